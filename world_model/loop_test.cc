// The loop (world_model/loop.h) on a tiny setting: two rounds, the second
// collected by the first round's controller and continuing the first's
// episodes; the world model of round 2 trained on both rounds; no real
// step while dreaming (RunLoop fails otherwise); the same command again
// collects nothing and gives the same figures; an interrupt stops it.
#include "world_model/loop.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "agents/env.h"
#include "core/error.h"
#include "core/file_util.h"
#include "world_model/rollouts.h"
#include "world_model/train.h"

namespace rlflow::world_model {
namespace {

LoopOptions Tiny(const std::string& out) {
  LoopOptions o;
  o.models = {"squeezenet1_1"};
  o.rounds = 2;
  o.episodes = 4;
  o.horizon = 6;
  o.epochs = 2;
  o.dream_steps = 256;
  o.out = out;
  o.seed = 5;
  return o;
}

TEST(Loop, TwoRoundsTheSecondCollectedByTheFirstsController) {
  const std::string out = MakeTempDir("loop_");
  LoopResult r = RunLoop(Tiny(out));
  ASSERT_TRUE(r.finished);
  ASSERT_EQ(r.rounds.size(), 2u);

  Rollouts first = ReadRollouts(out + "/round_1/new.rollouts");
  Rollouts second = ReadRollouts(out + "/round_2/new.rollouts");
  Rollouts all = ReadRollouts(out + "/round_2/data.rollouts");
  EXPECT_EQ(first.header.policy(), "random");
  EXPECT_EQ(second.header.policy().rfind("controller:" + out + "/round_1/dream", 0), 0u) << second.header.policy();
  EXPECT_EQ(second.header.first_episode(), 4u);
  ASSERT_EQ(first.episodes.size(), 4u);
  ASSERT_EQ(second.episodes.size(), 4u);
  ASSERT_EQ(all.episodes.size(), 8u);
  std::set<uint64_t> seeds;
  int64_t steps_first = 0, steps_all = 0;
  for (const Episode& e : first.episodes) seeds.insert(e.seed()), steps_first += e.steps_size();
  for (const Episode& e : second.episodes) seeds.insert(e.seed());
  for (const Episode& e : all.episodes) steps_all += e.steps_size();
  EXPECT_EQ(seeds.size(), 8u) << "round 2 repeats round 1's episode seeds";

  EXPECT_EQ(r.rounds[0].real_steps_total, steps_first);
  EXPECT_EQ(r.rounds[1].real_steps_total, steps_all);
  EXPECT_EQ(r.rounds[1].dream_steps, 256);
  for (const LoopRound& round : r.rounds) {
    ASSERT_EQ(round.models.count("squeezenet1_1"), 1u);
    const LoopRound::ModelResult& m = round.models.at("squeezenet1_1");
    EXPECT_GT(m.initial_cost, 0);
    EXPECT_LE(m.best_cost, m.initial_cost);
    EXPECT_NEAR(m.improvement, (m.initial_cost - m.best_cost) / m.initial_cost, 1e-12);
    EXPECT_GT(round.eval_real_steps, 0);
    EXPECT_GE(m.model_free_improvement, 0);
    EXPECT_GT(m.model_free_steps, 0);
    EXPECT_TRUE(FileExists(out + "/round_" + std::to_string(round.round) + "/dream/controller.pt"));
  }
  nlohmann::json summary = nlohmann::json::parse(ReadFile(out + "/summary.json"));
  ASSERT_EQ(summary.size(), 2u);
  EXPECT_EQ(summary[1].at("real_steps_total").get<int64_t>(), steps_all);

  // Again: every stage is done; only the evaluation episodes step the real
  // environment, and they give the same figures.
  const int64_t before = agents::RewriteEnv::ProcessSteps();
  LoopResult again = RunLoop(Tiny(out));
  ASSERT_TRUE(again.finished);
  int64_t evaluation = 0;  // the controller's episodes and the model-free reference's
  for (const LoopRound& round : r.rounds)
    evaluation += round.eval_real_steps + round.models.at("squeezenet1_1").model_free_steps;
  EXPECT_EQ(agents::RewriteEnv::ProcessSteps() - before, evaluation);
  for (size_t k = 0; k < 2; ++k)
    EXPECT_EQ(again.rounds[k].models.at("squeezenet1_1").best_cost, r.rounds[k].models.at("squeezenet1_1").best_cost);
}

// --world_model_kind=rssm: every round's world model is an RSSM, and the
// second round is collected by the controller dreamed in it.
TEST(Loop, TheRssmKindRunsTheWholeLoop) {
  const std::string out = MakeTempDir("loop_rssm_");
  LoopOptions o = Tiny(out);
  o.world_model_kind = "rssm";
  LoopResult r = RunLoop(o);
  ASSERT_TRUE(r.finished);
  ASSERT_EQ(r.rounds.size(), 2u);
  for (int k : {1, 2}) EXPECT_EQ(WorldModelKind(out + "/round_" + std::to_string(k) + "/wm/world_model.pt"), "rssm");
  EXPECT_EQ(
      ReadRollouts(out + "/round_2/new.rollouts").header.policy().rfind("controller:" + out + "/round_1/dream", 0), 0u);
  EXPECT_GT(r.rounds[1].models.at("squeezenet1_1").initial_cost, 0);
}

TEST(Loop, AnInterruptStopsItBeforeAnythingIsCollected) {
  const std::string out = MakeTempDir("loop_stop_");
  std::atomic<bool> stop{true};
  LoopOptions o = Tiny(out);
  o.interrupted = &stop;
  LoopResult r = RunLoop(o);
  EXPECT_FALSE(r.finished);
  EXPECT_TRUE(r.rounds.empty());
  EXPECT_FALSE(FileExists(out + "/round_1/new.rollouts"));
}

TEST(Loop, BadOptionsAreErrors) {
  LoopOptions o = Tiny(MakeTempDir("loop_bad_"));
  o.rounds = 0;
  EXPECT_THROW(RunLoop(o), Error);
  o = Tiny(MakeTempDir("loop_bad_"));
  o.models.clear();
  EXPECT_THROW(RunLoop(o), Error);
}

}  // namespace
}  // namespace rlflow::world_model
