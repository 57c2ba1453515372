#include "agents/pass_policy.h"

#include <sstream>

#include "agents/archive.h"
#include "agents/gnn.h"
#include "agents/pass_policy_net.h"
#include "agents/ppo.h"
#include "core/error.h"
#include "core/file_util.h"

namespace rlflow::agents {

PassPolicyImpl::PassPolicyImpl(int observation_size, int actions, int hidden)
    : observation_size_(observation_size), actions_(actions), hidden_(hidden) {
  if (observation_size < 1 || actions < 1 || hidden < 1) Fail("pass policy: sizes must be >= 1");
  auto mlp = [&](int out) {
    return torch::nn::Sequential(torch::nn::Linear(observation_size, hidden), torch::nn::Tanh(),
                                 torch::nn::Linear(hidden, hidden), torch::nn::Tanh(), torch::nn::Linear(hidden, out));
  };
  actor_ = register_module("actor", mlp(actions));
  critic_ = register_module("critic", mlp(1));
  OrthogonalInit(*this);
  // CleanRL: the last layers with small gains (0.01 policy, 1 value).
  torch::NoGradGuard no_grad;
  auto last = [](torch::nn::Sequential& s) { return s[s->size() - 1]->as<torch::nn::Linear>(); };
  torch::nn::init::orthogonal_(last(actor_)->weight, 0.01);
  torch::nn::init::orthogonal_(last(critic_)->weight, 1.0);
}

PassPolicyImpl::Output PassPolicyImpl::forward(const std::vector<const PassObservation*>& obs) {
  const int64_t B = static_cast<int64_t>(obs.size());
  torch::Tensor x = torch::empty({B, observation_size_});
  torch::Tensor mask = torch::empty({B, actions_}, torch::TensorOptions().dtype(torch::kBool));
  for (int64_t b = 0; b < B; ++b) {
    if (static_cast<int>(obs[b]->features.size()) != observation_size_ ||
        static_cast<int>(obs[b]->mask.size()) != actions_)
      Fail("pass policy: an observation of ", obs[b]->features.size(), " features and ", obs[b]->mask.size(),
           " actions, the policy has ", observation_size_, " and ", actions_);
    x[b].copy_(torch::tensor(obs[b]->features));
    mask[b].copy_(torch::tensor(std::vector<int64_t>(obs[b]->mask.begin(), obs[b]->mask.end())).to(torch::kBool));
  }
  return {actor_->forward(x), mask, critic_->forward(x).squeeze(-1)};
}

void SavePassPolicy(PassPolicyImpl& policy, const std::vector<std::string>& passes, int horizon,
                    const std::string& path) {
  torch::serialize::OutputArchive a;
  policy.save(a);
  a.write("horizon", torch::tensor(static_cast<int64_t>(horizon)));
  a.write("sizes", torch::tensor({static_cast<int64_t>(policy.observation_size()),
                                  static_cast<int64_t>(policy.actions()), static_cast<int64_t>(policy.hidden())}));
  std::string names;
  for (const std::string& p : passes) names += p + "\n";
  a.write("passes", torch::tensor(std::vector<int64_t>(names.begin(), names.end())));
  SaveArchiveAtomically(a, path);
}

namespace {

torch::serialize::InputArchive Open(const std::string& path) {
  if (!FileExists(path)) Fail("pass-ordering agent ", path, " not found");
  torch::serialize::InputArchive a;
  try {
    a.load_from(path);
  } catch (const std::exception&) {
    Fail("pass-ordering agent ", path, " is corrupt or truncated");
  }
  return a;
}

std::vector<std::string> ReadActions(torch::serialize::InputArchive& a, const std::string& path) {
  torch::Tensor t;
  try {
    a.read("passes", t);
  } catch (const std::exception&) {
    Fail("pass-ordering agent ", path, " has no pass list (not a pass-ordering agent?)");
  }
  std::string names;
  for (int64_t k = 0; k < t.numel(); ++k) names.push_back(static_cast<char>(t[k].item<int64_t>()));
  std::vector<std::string> out;
  std::istringstream in(names);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

std::vector<std::string> PassPolicyActions(const std::string& path) {
  torch::serialize::InputArchive a = Open(path);
  return ReadActions(a, path);
}

std::shared_ptr<PassPolicyImpl> LoadPassPolicy(const std::string& path, const std::vector<std::string>& passes,
                                               int* horizon) {
  torch::serialize::InputArchive a = Open(path);
  std::vector<std::string> trained = ReadActions(a, path);
  if (trained != passes)
    Fail("pass-ordering agent ", path, " was trained with ", trained.size(), " passes that differ from this build's ",
         passes.size(), " (retrain it: see the README)");
  torch::Tensor sizes, h;
  try {
    a.read("sizes", sizes);
    a.read("horizon", h);
  } catch (const std::exception&) {
    Fail("pass-ordering agent ", path, " has no sizes or horizon (corrupt?)");
  }
  if (horizon != nullptr) *horizon = static_cast<int>(h.item<int64_t>());
  PassPolicy p(static_cast<int>(sizes[0].item<int64_t>()), static_cast<int>(sizes[1].item<int64_t>()),
               static_cast<int>(sizes[2].item<int64_t>()));
  try {
    p->load(a);
  } catch (const std::exception&) {
    Fail("pass-ordering agent ", path, " does not hold the policy's weights");
  }
  p->eval();
  return p.ptr();
}

PassEpisode RunPassEpisode(PassPolicyImpl* policy, PassEnv& env, const Graph& graph, bool greedy,
                           std::mt19937_64* rng) {
  if (!greedy && rng == nullptr) Fail("RunPassEpisode: sampling needs a generator");
  torch::NoGradGuard no_grad;
  env.Reset(graph);
  PassEpisode r;
  r.initial_nodes = env.stats().nodes;
  r.initial_cost = env.stats().cost;
  while (!env.done()) {
    const PassObservation& o = env.observation();
    int64_t a;
    if (policy == nullptr) {
      // Random orders run to the horizon: stop only when nothing else is valid.
      std::vector<int> valid;
      for (int k = 0; k < o.stop_action(); ++k)
        if (o.mask[k]) valid.push_back(k);
      if (valid.empty()) valid.push_back(o.stop_action());
      a = valid[std::uniform_int_distribution<size_t>(0, valid.size() - 1)(*rng)];
    } else {
      PassPolicyImpl::Output out = policy->forward({&o});
      torch::Tensor logp = torch::log_softmax(MaskLogits(out.logits, out.mask), -1)[0];
      a = greedy ? logp.argmax().item<int64_t>() : SampleAction(logp, out.mask[0], *rng);
    }
    r.shaped_return += env.Step(static_cast<int>(a)).reward;
  }
  r.applied = env.applied();
  r.final_nodes = env.stats().nodes;
  r.final_cost = env.stats().cost;
  r.graph = env.graph();
  return r;
}

}  // namespace rlflow::agents
