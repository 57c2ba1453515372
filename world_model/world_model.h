#pragma once
// The world model's interface (issue #23): what training, the dream, the
// held-out evaluation and the optimiser's --search=world_model need of a
// learned model of the rewrite environment, whichever its kind:
//  - "mdn_rnn" (world_model/mdn_rnn.h): World Models' and RLFlow's LSTM with
//    a mixture of Gaussians over the next latent;
//  - "rssm" (world_model/rssm.h): a DreamerV3-style recurrent state-space
//    model (deterministic GRU state + categorical stochastic state, prior
//    and posterior, KL balancing with free bits) decoding to the latent.
// Both read and predict the same thing: the 32-d graph latent z_t of the
// encoder (world_model/encoder.h), the action in the dream's action space
// (a rule action of the database or stop, and a location index), and from
// the state after the action: the next latent, the reward, done, and the
// valid actions of the next state with their numbers of locations. So the
// controller, the dream and the rollout files are the same for both.
//
// Shared here: the vocabulary (the rule actions the model knows: those seen
// valid or taken in its training data), the action embedding and the heads
// over a kind's features: reward (its own MLP over the features, z_t and
// the action, as RLFlow's results suggest), done (from the features and the
// action: stopping ends an episode) and the mask: rule action a is valid
// with logit <q(f), e_a> + b_a and has about exp(<p(f), e_a> + c_a) - 1
// locations. Scoring by the embedding keeps the model small: one
// [V + 2, E] table instead of a [F, V] layer per head.
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "third_party/torch_nn.h"

namespace rlflow::world_model {

struct WorldModelOptions {
  int latent = 32;
  int rule_actions = 0;  // the database's: 2 x rules (the stop action is one more)
  // The rule actions the model knows, increasing (empty: all of them).
  std::vector<int64_t> vocabulary;
  // The rule database's ids (rule k: actions 2k and 2k + 1), from the
  // rollouts; empty for a model saved before they were recorded.
  std::vector<std::string> rule_ids;
  int embedding = 32;  // action embedding
  int hidden = 256;    // the recurrent state (LSTM or GRU)
  // mdn_rnn: Gaussians in the mixture over z_{t+1}. rssm: components of
  // its predictive distribution over z_{t+1} (the decoding of the prior's
  // mode and of K - 1 fixed draws from it; see rssm.h).
  int mixtures = 8;
  int max_locations = 200;  // EnvOptions::max_locations: scales the location input
  // rssm only: the stochastic state, `groups` categorical variables of
  // `classes` classes each (DreamerV3: 32 x 32; smaller here).
  int groups = 16, classes = 16;
};

class WorldModelImpl : public torch::nn::Module {
 public:
  // A kind's recurrent state, each [1, B, ...]. mdn_rnn: the LSTM's (h, c).
  // rssm: (h, s), where s, when defined, is the stochastic state of the
  // step about to be taken (set by Imagine: the dream's own); undefined,
  // it is inferred from the observed latent (the posterior).
  using State = std::tuple<torch::Tensor, torch::Tensor>;
  struct Output {
    // The distribution of z_{t+1}: a mixture of K diagonal Gaussians.
    torch::Tensor pi_logits;      // [T, B, K]
    torch::Tensor mu;             // [T, B, K, Z]
    torch::Tensor log_sigma;      // [T, B, K, Z]
    torch::Tensor reward;         // [T, B]
    torch::Tensor done_logit;     // [T, B]
    torch::Tensor mask_logits;    // [T, B, V]: vocabulary action v valid in the next state
    torch::Tensor log_locations;  // [T, B, V]: log(1 + its number of locations)
    State state;                  // after the last step
  };
  // One step of the dream, for each of B episodes.
  struct Imagined {
    torch::Tensor next_latent;    // [B, Z]
    torch::Tensor reward;         // [B]
    torch::Tensor done_logit;     // [B]
    torch::Tensor mask_logits;    // [B, V]
    torch::Tensor log_locations;  // [B, V]
    State state;
  };
  // What training fits (world_model/train.cc adds the heads' losses).
  struct TrainingTerms {
    torch::Tensor latent;  // [T, B]: the kind's latent loss per step, in nats (summed over the latent)
    Output heads;          // reward, done_logit, mask_logits, log_locations
  };

  explicit WorldModelImpl(WorldModelOptions options);
  ~WorldModelImpl() override = default;

  // Teacher-forced prediction over recorded steps: z [T, B, Z] float (the
  // observed latents), rule_action and location [T, B] int64 (-1 for stop);
  // output t is the prediction for step t + 1. `state` null: the start of
  // an episode.
  virtual Output forward(const torch::Tensor& z, const torch::Tensor& rule_action, const torch::Tensor& location,
                         const State* state = nullptr) = 0;
  // One dream step from the current latent z [B, Z] (of the last step, or
  // an episode's recorded start): the next latent sampled at temperature
  // tau (> 0), or, at tau = 0, the model's single most likely prediction
  // (the mean of the most likely component). Deterministic given
  // `generator`.
  virtual Imagined Imagine(const torch::Tensor& z, const torch::Tensor& rule_action, const torch::Tensor& location,
                           const State* state, double tau, std::mt19937_64& generator) = 0;
  // The loss terms of recorded episodes: z [T, B, Z] and next [T, B, Z]
  // (z_{t+1}, the last step's the episode's final latent).
  virtual TrainingTerms ForTraining(const torch::Tensor& z, const torch::Tensor& next, const torch::Tensor& rule_action,
                                    const torch::Tensor& location) = 0;
  virtual std::string kind() const = 0;

  const WorldModelOptions& options() const { return o_; }
  // Records the rule database the model's rule actions refer to (ids of
  // exactly rule_actions / 2 rules); rlflow::Error otherwise.
  void SetRuleIds(std::vector<std::string> ids);
  // Vocabulary size V, and the vocabulary index of a database rule action
  // (-1 if the model does not know it).
  int vocabulary_size() const { return static_cast<int>(o_.vocabulary.size()); }
  int64_t VocabularyIndex(int64_t rule_action) const;

 protected:
  // Registration is split so that each kind registers its modules in the
  // order that fixes its random initialisation (the MDN-RNN's is the one
  // its checked-in model was trained with).
  void RegisterActionEmbedding();  // "action", "lookup"
  // "done", "query", "count", "reward", "mask_bias", "count_bias" over
  // features of size `features`.
  void RegisterHeads(int features);
  void InitActionEmbedding();
  // [T, B, E + 1]: the action's embedding and its scaled location.
  torch::Tensor ActionInput(const torch::Tensor& rule_action, const torch::Tensor& location);
  // Sets reward, done_logit, mask_logits, log_locations of `out` from the
  // features f [..., F], the current latent z [..., Z] and the action
  // input [..., E + 1].
  void Heads(const torch::Tensor& f, const torch::Tensor& z, const torch::Tensor& action_input, Output& out);

  WorldModelOptions o_;

 private:
  torch::nn::Embedding action_{nullptr};  // [V + 2, E]: 0 stop, v + 1 vocabulary action v, V + 1 other
  torch::Tensor lookup_;                  // [A + 1]: embedding index of rule action a at a + 1 (stop at 0)
  torch::nn::Linear done_{nullptr}, query_{nullptr}, count_{nullptr};
  torch::nn::Sequential reward_{nullptr};
  torch::Tensor mask_bias_, count_bias_;  // [V]
};

using WorldModel = std::shared_ptr<WorldModelImpl>;

// Negative log-likelihood of `target` [T, B, Z] under the mixture, per step
// [T, B] (nats).
torch::Tensor MixtureNll(const WorldModelImpl::Output& out, const torch::Tensor& target);

// One sample of z_{t+1} per batch element from step `t` of `out` [T, B, ...]
// at temperature tau (> 0; tau -> 0 gives the mean of the most likely
// component): the mixture logits divided by tau, the Gaussian noise scaled
// by sqrt(tau) (World Models, RLFlow). Deterministic given `generator`.
torch::Tensor SampleLatent(const WorldModelImpl::Output& out, int64_t t, double tau, std::mt19937_64& generator);

// The mean of the most likely component at each step: [T, B, Z].
torch::Tensor MostLikelyMean(const WorldModelImpl::Output& out);

// The kinds, for flags and messages.
inline const char kWorldModelKinds[] = "mdn_rnn or rssm";

// A new model of `kind` ("mdn_rnn" or "rssm"; rlflow::Error otherwise).
WorldModel MakeWorldModel(const std::string& kind, WorldModelOptions options);

}  // namespace rlflow::world_model
