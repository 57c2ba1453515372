// The MDN-RNN: its loss falls when it learns a synthetic sequence; sampling
// at a temperature near 0 gives the mean of the most likely component; the
// mask head learns a tiny environment whose valid actions after each action
// are known.
#include "world_model/mdn_rnn.h"

#include <gtest/gtest.h>

#include <cmath>

#include "world_model/test_util.h"

namespace rlflow::world_model {
namespace {

using test_util::MakeTinyEnvironment;
using test_util::Sequences;
using test_util::SmallOptions;
using test_util::Synthetic;

TEST(MdnRnn, LossFallsOnASyntheticSequence) {
  torch::manual_seed(1);
  MdnRnn model(SmallOptions(5));
  Sequences s = Synthetic(12, 16, 5);
  torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(3e-3));
  double first_nll = 0, first_reward = 0, last_nll = 0, last_reward = 0;
  for (int it = 0; it < 300; ++it) {
    MdnRnnImpl::Output out = model->forward(s.z, s.action, s.location);
    torch::Tensor nll = MixtureNll(out, s.next).mean();
    torch::Tensor reward = (out.reward - s.reward).pow(2).mean();
    if (it == 0) {
      first_nll = nll.item<double>();
      first_reward = reward.item<double>();
    }
    last_nll = nll.item<double>();
    last_reward = reward.item<double>();
    opt.zero_grad();
    (nll + reward).backward();
    opt.step();
  }
  EXPECT_LT(last_nll, first_nll - 5.0) << first_nll << " -> " << last_nll;
  EXPECT_LT(last_reward, 0.2 * first_reward) << first_reward << " -> " << last_reward;
}

TEST(MdnRnn, ColdSamplingGivesTheMeanOfTheMostLikelyComponent) {
  MdnRnnImpl::Output out;
  out.pi_logits = torch::tensor({0.1f, 2.0f, -1.0f}).view({1, 1, 3});
  out.mu = torch::arange(12, torch::kFloat32).view({1, 1, 3, 4});
  out.log_sigma = torch::zeros({1, 1, 3, 4});
  std::mt19937_64 g(5);
  for (int k = 0; k < 20; ++k) {
    torch::Tensor z = SampleLatent(out, 0, 1e-6, g);
    EXPECT_TRUE(torch::allclose(z[0], out.mu[0][0][1], 1e-4, 1e-2)) << z;
  }
  // At tau = 1 the samples spread (sigma 1) and visit other components.
  torch::Tensor a = SampleLatent(out, 0, 1.0, g), b = SampleLatent(out, 0, 1.0, g);
  EXPECT_FALSE(torch::allclose(a, b));
  EXPECT_THROW(SampleLatent(out, 0, 0.0, g), std::exception);
}

TEST(MdnRnn, TheMaskHeadLearnsATinyEnvironment) {
  // After rule action a, the valid rule actions are a and a + 1 (mod 6),
  // with a + 1 locations each.
  const int actions = 6;
  torch::manual_seed(2);
  MdnRnn model(SmallOptions(actions));
  auto [action, mask, counts] = MakeTinyEnvironment(actions);
  torch::Tensor z = torch::randn({8, 32, 4}), loc = torch::zeros({8, 32}, torch::kInt64);
  torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(1e-2));
  for (int it = 0; it < 300; ++it) {
    MdnRnnImpl::Output out = model->forward(z, action, loc);
    torch::Tensor loss = torch::binary_cross_entropy_with_logits(out.mask_logits, mask) +
                         ((out.log_locations - counts).pow(2) * mask).sum() / mask.sum();
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  torch::NoGradGuard no_grad;
  MdnRnnImpl::Output out = model->forward(z, action, loc);
  torch::Tensor predicted = out.mask_logits > 0;
  EXPECT_TRUE(torch::equal(predicted, mask > 0.5)) << "precision and recall are not both 1";
  torch::Tensor n = torch::round(torch::expm1(out.log_locations)) * mask;
  EXPECT_TRUE(torch::equal(n, torch::round(torch::expm1(counts)) * mask));
}

}  // namespace
}  // namespace rlflow::world_model
