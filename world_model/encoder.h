#pragma once
// The world model's latent of a graph state (issue #23: "the encoder").
//
// The latent is the global embedding of a trained model-free agent's GNN
// (agents/gnn.h), frozen: the checked-in agents/zoo_agent.pt, trained by PPO
// on the zoo with the command in the README, has hidden size 32, so its
// embedding is the default latent size with no projection. The GNN
// was trained to score rewrites and to predict the value (the return still
// to come) from exactly this embedding, so graphs whose cost differs, and
// whose remaining gains differ, are pulled apart in it; //world_model:
// encoder_test and the collector's summary (rank correlation between
// latent distance and cost difference) measure how far. Training the
// encoder jointly with the world model, or as a graph auto-encoder, is the
// alternative the README discusses.
#include <memory>
#include <string>
#include <vector>

#include "agents/env.h"

namespace rlflow::agents {
// agents/gnn.h: libtorch's C++ API, which this header keeps out of its
// includers (their compile time).
class PolicyImpl;
}  // namespace rlflow::agents

namespace rlflow::world_model {

class LatentEncoder {
 public:
  // Loads the agent (agent.pt of //agents:train, or a checkpoint) for the
  // rule database of `database_ids` (agents::LoadPolicy); rlflow::Error if
  // it cannot.
  LatentEncoder(const std::string& agent_path, const std::vector<std::string>& database_ids);
  int size() const { return size_; }
  // z of one observation (size() floats); deterministic.
  std::vector<float> Encode(const agents::Observation& observation);
  // What made the latents (path, file size, hidden size), for file headers.
  const std::string& description() const { return description_; }

 private:
  std::shared_ptr<agents::PolicyImpl> policy_;
  int size_ = 0;
  std::string description_;
};

// Spearman's rank correlation of two equally long samples (ties share their
// mean rank); 0 when either is constant or they have fewer than 3 values.
double RankCorrelation(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace rlflow::world_model
