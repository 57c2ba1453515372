#pragma once
// The world model (World Models' MDN-RNN, as RLFlow uses it; issue #23).
//
// Input per step: the latent z_t of the state (world_model/encoder.h) and
// the action a_t in the dream's action space (world_model/collect.h): a
// rule action (2 x rule + reverse, or stop) and a location index. An LSTM
// (256) runs over the episode; from its output h_t:
//  - a mixture of K (8) diagonal Gaussians over z_{t+1}: mixture logits,
//    means, log standard deviations;
//  - the reward r_t: its own network (an MLP over h_t, z_t and the action),
//    as RLFlow's results suggest;
//  - done: a logit (from h_t and the action: stopping ends an episode);
//  - the valid actions of the next state, factored through the action
//    embedding: rule action a is valid with logit <q(h_t), e_a> + b_a, and
//    has about exp(<p(h_t), e_a> + c_a) - 1 locations (the dream picks one
//    uniformly). Scoring by the embedding keeps the model small: one
//    [V + 2, 32] table instead of a [256, V] layer per head.
// The model knows a vocabulary of V rule actions (those seen valid or taken
// in its training data; a rule that never matched there cannot be
// predicted to): the dream's action space. Its outputs over rule actions
// are in vocabulary order; its inputs are the database's rule actions (one
// outside the vocabulary shares an "other" embedding).
// Sampling at temperature tau divides the mixture logits by tau and scales
// the Gaussian noise by sqrt(tau) (World Models, RLFlow).
#include <torch/torch.h>

#include <cstdint>
#include <random>
#include <tuple>
#include <vector>

namespace rlflow::world_model {

struct MdnRnnOptions {
  int latent = 32;
  int rule_actions = 0;  // the database's: 2 x rules (the stop action is one more)
  // The rule actions the model knows, increasing (empty: all of them).
  std::vector<int64_t> vocabulary;
  int embedding = 32;  // action embedding
  int hidden = 256;    // LSTM
  int mixtures = 8;
  int max_locations = 200;  // EnvOptions::max_locations: scales the location input
};

class MdnRnnImpl : public torch::nn::Module {
 public:
  explicit MdnRnnImpl(MdnRnnOptions options);
  using State = std::tuple<torch::Tensor, torch::Tensor>;  // LSTM (h, c), each [1, B, hidden]
  struct Output {
    torch::Tensor pi_logits;      // [T, B, K]
    torch::Tensor mu;             // [T, B, K, Z]
    torch::Tensor log_sigma;      // [T, B, K, Z]
    torch::Tensor reward;         // [T, B]
    torch::Tensor done_logit;     // [T, B]
    torch::Tensor mask_logits;    // [T, B, V]: vocabulary action v valid in the next state
    torch::Tensor log_locations;  // [T, B, V]: log(1 + its number of locations)
    State state;                  // after the last step
  };
  // z [T, B, Z] float; rule_action, location [T, B] int64 (-1 for stop).
  // `state` empty: zeros.
  Output forward(const torch::Tensor& z, const torch::Tensor& rule_action, const torch::Tensor& location,
                 const State* state = nullptr);
  const MdnRnnOptions& options() const { return o_; }
  // Vocabulary size V, and the vocabulary index of a database rule action
  // (-1 if the model does not know it).
  int vocabulary_size() const { return static_cast<int>(o_.vocabulary.size()); }
  int64_t VocabularyIndex(int64_t rule_action) const;

 private:
  torch::Tensor ActionInput(const torch::Tensor& rule_action, const torch::Tensor& location);
  MdnRnnOptions o_;
  torch::nn::Embedding action_{nullptr};  // [V + 2, E]: 0 stop, v + 1 vocabulary action v, V + 1 other
  torch::Tensor lookup_;                  // [A + 1]: embedding index of rule action a at a + 1 (stop at 0)
  torch::nn::LSTM lstm_{nullptr};
  torch::nn::Linear mdn_{nullptr}, done_{nullptr}, query_{nullptr}, count_{nullptr};
  torch::nn::Sequential reward_{nullptr};
  torch::Tensor mask_bias_, count_bias_;  // [A]
};
TORCH_MODULE(MdnRnn);

// Negative log-likelihood of `target` [T, B, Z] under the mixture, per step
// [T, B] (nats).
torch::Tensor MixtureNll(const MdnRnnImpl::Output& out, const torch::Tensor& target);

// One sample of z_{t+1} per batch element from step `t` of `out` [T, B, ...]
// at temperature tau (> 0; tau -> 0 gives the mean of the most likely
// component). Deterministic given `generator`.
torch::Tensor SampleLatent(const MdnRnnImpl::Output& out, int64_t t, double tau, std::mt19937_64& generator);

}  // namespace rlflow::world_model
