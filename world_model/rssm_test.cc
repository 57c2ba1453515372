// The DreamerV3-style RSSM: its loss falls and it learns the dynamics of a
// synthetic system (better than predicting no change); the dream at tau 0
// is the teacher-forced prediction's most likely component; the dream
// steps in its own latent state (the latent it is handed after the first
// step is not read); the mask head learns a tiny environment.
#include "world_model/rssm.h"

#include <gtest/gtest.h>

#include <cmath>

#include "world_model/test_util.h"

namespace rlflow::world_model {
namespace {

using test_util::MakeTinyEnvironment;
using test_util::Sequences;
using test_util::SmallOptions;
using test_util::Synthetic;

TEST(Rssm, LossFallsAndItLearnsTheDynamics) {
  torch::manual_seed(1);
  Rssm model(SmallOptions(5));
  Sequences s = Synthetic(12, 16, 5);
  torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(3e-3));
  double first_latent = 0, first_reward = 0, last_latent = 0, last_reward = 0;
  for (int it = 0; it < 300; ++it) {
    WorldModelImpl::TrainingTerms terms = model->ForTraining(s.z, s.next, s.action, s.location);
    torch::Tensor latent = terms.latent.mean();
    torch::Tensor reward = (terms.heads.reward - s.reward).pow(2).mean();
    if (it == 0) {
      first_latent = latent.item<double>();
      first_reward = reward.item<double>();
    }
    last_latent = latent.item<double>();
    last_reward = reward.item<double>();
    opt.zero_grad();
    (latent / 4 + reward).backward();
    opt.step();
  }
  EXPECT_LT(last_latent, first_latent - 5.0) << first_latent << " -> " << last_latent;
  EXPECT_LT(last_reward, 0.2 * first_reward) << first_reward << " -> " << last_reward;
  // The prior's prediction (no access to z_{t+1}) beats "no change" by far.
  torch::NoGradGuard no_grad;
  model->eval();
  WorldModelImpl::Output out = model->forward(s.z, s.action, s.location);
  const double model_error = (MostLikelyMean(out) - s.next).pow(2).mean().item<double>();
  const double still_error = (s.z - s.next).pow(2).mean().item<double>();
  EXPECT_LT(model_error, 0.25 * still_error) << model_error << " vs " << still_error;
}

TEST(Rssm, TheColdDreamIsTheMostLikelyPrediction) {
  torch::manual_seed(4);
  Rssm model(SmallOptions(5));
  model->eval();
  torch::NoGradGuard no_grad;
  Sequences s = Synthetic(3, 2, 5);
  WorldModelImpl::Output out =
      model->forward(s.z.narrow(0, 0, 1), s.action.narrow(0, 0, 1), s.location.narrow(0, 0, 1));
  std::mt19937_64 g1(1), g2(2);
  WorldModelImpl::Imagined a = model->Imagine(s.z[0], s.action[0], s.location[0], nullptr, 0.0, g1);
  WorldModelImpl::Imagined b = model->Imagine(s.z[0], s.action[0], s.location[0], nullptr, 0.0, g2);
  EXPECT_TRUE(torch::equal(a.next_latent, b.next_latent));
  EXPECT_TRUE(torch::allclose(a.next_latent, MostLikelyMean(out)[0], 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(a.reward, out.reward[0], 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(a.mask_logits, out.mask_logits[0], 1e-5, 1e-5));
  // Sampling (tau 1) depends on the generator, and a negative temperature is refused.
  WorldModelImpl::Imagined c = model->Imagine(s.z[0], s.action[0], s.location[0], nullptr, 1.0, g1);
  WorldModelImpl::Imagined d = model->Imagine(s.z[0], s.action[0], s.location[0], nullptr, 1.0, g2);
  EXPECT_FALSE(torch::equal(c.next_latent, d.next_latent));
  EXPECT_THROW(model->Imagine(s.z[0], s.action[0], s.location[0], nullptr, -1.0, g1), std::exception);
}

TEST(Rssm, TheDreamStepsInItsOwnState) {
  torch::manual_seed(5);
  Rssm model(SmallOptions(5));
  model->eval();
  torch::NoGradGuard no_grad;
  Sequences s = Synthetic(3, 2, 5);
  std::mt19937_64 g(1);
  WorldModelImpl::Imagined first = model->Imagine(s.z[0], s.action[0], s.location[0], nullptr, 1.0, g);
  ASSERT_TRUE(std::get<1>(first.state).defined());
  std::mt19937_64 g1(7), g2(7);
  WorldModelImpl::Imagined a = model->Imagine(first.next_latent, s.action[1], s.location[1], &first.state, 1.0, g1);
  WorldModelImpl::Imagined b =
      model->Imagine(torch::randn({2, 4}) * 100, s.action[1], s.location[1], &first.state, 1.0, g2);
  EXPECT_TRUE(torch::equal(a.next_latent, b.next_latent));
  EXPECT_TRUE(torch::equal(a.mask_logits, b.mask_logits));
  // Teacher-forced, the observed latent is read: another one changes the prediction.
  WorldModelImpl::Output o1 = model->forward(s.z.narrow(0, 0, 1), s.action.narrow(0, 0, 1), s.location.narrow(0, 0, 1));
  WorldModelImpl::Output o2 =
      model->forward(s.z.narrow(0, 0, 1) + 3, s.action.narrow(0, 0, 1), s.location.narrow(0, 0, 1));
  EXPECT_FALSE(torch::equal(o1.mu, o2.mu));
}

TEST(Rssm, TheMaskHeadLearnsATinyEnvironment) {
  // After rule action a, the valid rule actions are a and a + 1 (mod 6),
  // with a + 1 locations each. Trained on posterior states, read from the
  // prior's (teacher-forced prediction).
  const int actions = 6;
  torch::manual_seed(2);
  Rssm model(SmallOptions(actions));
  auto [action, mask, counts] = MakeTinyEnvironment(actions);
  // The next latent is the action's too (a known transition): the prior
  // can learn what the posterior sees.
  torch::Tensor z = torch::randn({8, 32, 4});
  torch::Tensor next = torch::randn({actions, 4}).index_select(0, action.flatten()).view({8, 32, 4});
  torch::Tensor loc = torch::zeros({8, 32}, torch::kInt64);
  torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(1e-2));
  // 1000 steps: at 300 the prior had not settled on every position on every
  // CPU (10 of 1536 masks wrong on an AVX-512 machine; seeds 5 and 8 off by
  // one location count at 600); at 1000, seeds 2, 5 and 8 to 11 all exact.
  for (int it = 0; it < 1000; ++it) {
    WorldModelImpl::TrainingTerms terms = model->ForTraining(z, next, action, loc);
    const WorldModelImpl::Output& out = terms.heads;
    torch::Tensor loss = torch::binary_cross_entropy_with_logits(out.mask_logits, mask) +
                         ((out.log_locations - counts).pow(2) * mask).sum() / mask.sum() + terms.latent.mean() / 4;
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  model->eval();
  torch::NoGradGuard no_grad;
  WorldModelImpl::Output out = model->forward(z, action, loc);
  torch::Tensor predicted = out.mask_logits > 0;
  EXPECT_TRUE(torch::equal(predicted, mask > 0.5))
      << "precision and recall are not both 1: " << (predicted != (mask > 0.5)).sum().item<int64_t>() << " of "
      << mask.numel() << " wrong";
  torch::Tensor n = torch::round(torch::expm1(out.log_locations)) * mask;
  EXPECT_TRUE(torch::equal(n, torch::round(torch::expm1(counts)) * mask))
      << (n - torch::round(torch::expm1(counts)) * mask).abs().max() << " "
      << ((n - torch::round(torch::expm1(counts)) * mask).abs() > 0).sum();
}

TEST(Rssm, CategoricalsMixInOnePercentUniformAndTheirKlIsZeroOnlyForEqualOnes) {
  Rssm model(SmallOptions(5));
  torch::Tensor logits = torch::zeros({16});
  logits[0] = 100.0f;
  torch::Tensor p = model->Probabilities(logits);
  ASSERT_EQ(p.sizes(), (std::vector<int64_t>{4, 4}));
  EXPECT_NEAR(p[0][0].item<double>(), 0.99 + 0.0025, 1e-6);
  EXPECT_NEAR(p[0][1].item<double>(), 0.0025, 1e-6);
  EXPECT_NEAR(p[1][2].item<double>(), 0.25, 1e-6);
  EXPECT_NEAR(RssmImpl::Kl(p, p).item<double>(), 0.0, 1e-6);
  torch::Tensor q = model->Probabilities(torch::zeros({16}));
  // KL(p || uniform) for the first group: sum p log(4p).
  double expected = 0;
  for (double x : {0.9925, 0.0025, 0.0025, 0.0025}) expected += x * std::log(4 * x);
  EXPECT_NEAR(RssmImpl::Kl(p, q).item<double>(), expected, 1e-5);
}

}  // namespace
}  // namespace rlflow::world_model
