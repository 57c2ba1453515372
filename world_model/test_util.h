#pragma once
// What the world models' unit tests share (testonly): small sizes, a
// synthetic deterministic system and a tiny environment with known valid
// actions.
#include <cmath>

#include "third_party/torch_nn.h"
#include "world_model/world_model.h"

namespace rlflow::world_model::test_util {

inline WorldModelOptions SmallOptions(int rule_actions) {
  WorldModelOptions o;
  o.latent = 4;
  o.rule_actions = rule_actions;
  o.embedding = 8;
  o.hidden = 32;
  o.mixtures = 3;
  o.max_locations = 4;
  o.groups = 4;  // rssm only
  o.classes = 4;
  return o;
}

// Episodes of a deterministic system: z_{t+1} = 0.5 z_t + effect(a_t),
// reward = z_t[0] - z_{t+1}[0]; [steps, batch, ...].
struct Sequences {
  torch::Tensor z, next, action, location, reward;
};
inline Sequences Synthetic(int steps, int batch, int rule_actions) {
  torch::manual_seed(3);
  Sequences s;
  s.action = torch::randint(0, rule_actions, {steps, batch}, torch::kInt64);
  s.location = torch::zeros({steps, batch}, torch::kInt64);
  torch::Tensor effect = torch::randn({rule_actions, 4});
  s.z = torch::empty({steps, batch, 4});
  s.next = torch::empty({steps, batch, 4});
  torch::Tensor z = torch::randn({batch, 4});
  for (int t = 0; t < steps; ++t) {
    s.z[t] = z;
    z = 0.5 * z + effect.index_select(0, s.action[t]);
    s.next[t] = z;
  }
  s.reward = s.z.select(2, 0) - s.next.select(2, 0);
  return s;
}

// After rule action a (random, [8, 32], drawn from torch's generator), the
// valid rule actions are a and a + 1 (mod `actions`), rule action v with
// v + 1 locations: the mask [8, 32, actions] and log(1 + locations).
struct TinyEnvironment {
  torch::Tensor action, mask, counts;
};
inline TinyEnvironment MakeTinyEnvironment(int actions) {
  TinyEnvironment e;
  e.action = torch::randint(0, actions, {8, 32}, torch::kInt64);
  e.mask = torch::zeros({8, 32, actions});
  e.counts = torch::zeros({8, 32, actions});
  for (int t = 0; t < 8; ++t)
    for (int b = 0; b < 32; ++b) {
      const int64_t a = e.action[t][b].item<int64_t>();
      for (int64_t v : {a, (a + 1) % actions}) {
        e.mask[t][b][v] = 1;
        e.counts[t][b][v] = std::log1p(static_cast<double>(v + 1));
      }
    }
  return e;
}

}  // namespace rlflow::world_model::test_util
