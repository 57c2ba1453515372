// The collector: every recorded step is consistent with the environment it
// came from (the action was valid in the state before, the location within
// that rule action's locations, the reward follows the normalised
// definition, the episode ends on `done`), with random actions and with
// the checked-in agent's; a collection interrupted after
// two episodes keeps them in FILE.partial, and resuming it writes exactly
// what an uninterrupted collection writes; bad flags of the binary are
// one-line errors.
#include "world_model/collect.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "core/error.h"
#include "core/file_util.h"
#include "core/subprocess.h"
#include "world_model/rollouts.h"

namespace rlflow::world_model {
namespace {

CollectOptions Options(const std::string& out, int episodes) {
  CollectOptions o;
  o.models = {"squeezenet1_1"};
  o.episodes = episodes;
  o.horizon = 6;
  o.out = out;
  o.seed = 3;
  return o;
}

// Checks every step of `data` against the environment's definitions;
// returns the number of steps.
int64_t ExpectConsistent(const Rollouts& data, int horizon) {
  const int actions = static_cast<int>(data.header.rule_actions());
  int64_t steps = 0;
  for (const Episode& e : data.episodes) {
    EXPECT_GT(e.steps_size(), 0);
    EXPECT_LE(e.steps_size(), horizon);
    steps += e.steps_size();
    ValidActions valid = e.initial_valid();
    double cost = e.initial_cost_ms();
    for (int t = 0; t < e.steps_size(); ++t) {
      const Step& s = e.steps(t);
      EXPECT_EQ(s.latent_size(), 32);
      std::vector<uint8_t> mask = UnpackMask(valid.rule_mask(), actions);
      if (s.rule_action() >= 0) {
        EXPECT_TRUE(mask[s.rule_action()]) << "step " << t << ": rule action not valid in the state";
        int index = 0;  // the rule action's place among the valid ones
        for (int a = 0; a < s.rule_action(); ++a) index += mask[a];
        EXPECT_LT(index, valid.locations_size());
        if (index < valid.locations_size()) {
          EXPECT_LT(s.location(), static_cast<int>(valid.locations(index)));
        }
      } else {
        EXPECT_EQ(s.location(), -1);
      }
      EXPECT_NEAR(s.reward(), 100.0 * (cost - s.cost_ms()) / e.initial_cost_ms(), 1e-3);
      EXPECT_EQ(s.done(), t + 1 == e.steps_size());
      valid = s.next_valid();
      cost = s.cost_ms();
    }
    EXPECT_EQ(e.final_latent_size(), 32);
  }
  return steps;
}

TEST(Collect, StepsAreConsistentWithTheEnvironment) {
  std::string out = MakeTempDir("collect_") + "/r.rollouts";
  CollectResult r = Collect(Options(out, 3));
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.episodes, 3);
  EXPECT_EQ(r.new_episodes, 3);
  EXPECT_FALSE(FileExists(out + ".partial"));
  Rollouts data = ReadRollouts(out);
  EXPECT_EQ(data.header.latent_size(), 32u);
  EXPECT_EQ(data.header.policy(), "random");
  ASSERT_EQ(data.episodes.size(), 3u);
  const int64_t steps = ExpectConsistent(data, 6);
  EXPECT_EQ(r.steps, steps);
  EXPECT_EQ(r.real_steps, steps);     // every step was a real one
  EXPECT_EQ(r.real_measurements, 0);  // analytical cost, normalised reward
  EXPECT_GT(r.pairs, 0);
  EXPECT_GE(r.latent_cost_correlation, -1.0);
  EXPECT_LE(r.latent_cost_correlation, 1.0);
}

// Collected by a trained agent (the checked-in one): its sampled actions
// are valid, and the same seed gives the same file.
TEST(Collect, ATrainedAgentCollectsValidSteps) {
  const std::string dir = MakeTempDir("collect_agent_");
  CollectOptions o = Options(dir + "/a.rollouts", 2);
  o.models = {"resnet18"};
  o.policy = FindRunfile("agents/zoo_agent.pt");
  ASSERT_FALSE(o.policy.empty());
  ASSERT_TRUE(Collect(o).finished);
  Rollouts data = ReadRollouts(o.out);
  EXPECT_EQ(data.header.policy(), o.policy);
  ASSERT_EQ(data.episodes.size(), 2u);
  int rewrites = 0;
  for (const Episode& e : data.episodes)
    for (const Step& s : e.steps()) rewrites += s.rule_action() >= 0;
  EXPECT_GT(rewrites, 0) << "the agent only stopped";
  ExpectConsistent(data, 6);
  o.out = dir + "/b.rollouts";
  ASSERT_TRUE(Collect(o).finished);
  EXPECT_EQ(ReadFile(dir + "/a.rollouts"), ReadFile(o.out));
}

TEST(Collect, AnInterruptedCollectionResumesToTheSameFile) {
  std::string dir = MakeTempDir("collect_resume_");
  CollectResult whole = Collect(Options(dir + "/whole.rollouts", 4));
  ASSERT_TRUE(whole.finished);

  std::atomic<bool> stop{false};
  CollectOptions o = Options(dir + "/part.rollouts", 4);
  o.interrupted = &stop;
  int seen = 0;
  o.progress = [&](const std::string& line) {
    if (line.rfind("episode ", 0) == 0 && ++seen == 2) stop = true;
  };
  CollectResult first = Collect(o);
  EXPECT_FALSE(first.finished);
  EXPECT_EQ(first.episodes, 2);
  EXPECT_FALSE(FileExists(dir + "/part.rollouts"));
  ASSERT_TRUE(FileExists(dir + "/part.rollouts.partial"));

  stop = false;
  o.progress = nullptr;
  CollectResult second = Collect(o);
  ASSERT_TRUE(second.finished);
  EXPECT_EQ(second.episodes, 4);
  EXPECT_EQ(second.new_episodes, 2);
  EXPECT_EQ(ReadFile(dir + "/part.rollouts"), ReadFile(dir + "/whole.rollouts"));

  // A partial file of another collection is not taken over.
  CollectOptions other = Options(dir + "/other.rollouts", 4);
  other.interrupted = &stop;
  other.progress = [&](const std::string&) { stop = true; };
  EXPECT_FALSE(Collect(other).finished);
  stop = false;
  other.progress = nullptr;
  other.seed = 4;
  EXPECT_THROW(Collect(other), Error);
}

// --locations=best: every rewrite at the location the cost model estimates
// best. With the analytical cost model an estimate is the cost after the
// rewrite, so no step of a rule action can have a reward below that of
// the same rule action at a uniformly drawn location in the same state:
// checked on the first step of each episode, which both collections take
// from the same initial graph.
TEST(Collect, BestLocationsAreRecordedAndNeverWorseOnTheFirstStep) {
  const std::string dir = MakeTempDir("collect_best_");
  CollectOptions best = Options(dir + "/best.rollouts", 6);
  best.locations = "best";
  ASSERT_TRUE(Collect(best).finished);
  CollectOptions uniform = Options(dir + "/uniform.rollouts", 6);
  ASSERT_TRUE(Collect(uniform).finished);
  Rollouts b = ReadRollouts(dir + "/best.rollouts"), u = ReadRollouts(dir + "/uniform.rollouts");
  EXPECT_NE(b.header.policy().find("locations=best"), std::string::npos) << b.header.policy();
  int compared = 0;
  for (size_t k = 0; k < b.episodes.size(); ++k) {
    // The same seed draws the same first rule action in both.
    const Step& sb = b.episodes[k].steps(0);
    const Step& su = u.episodes[k].steps(0);
    ASSERT_EQ(sb.rule_action(), su.rule_action());
    if (sb.rule_action() < 0) continue;
    EXPECT_GE(sb.reward(), su.reward() - 1e-4) << "episode " << k;
    ++compared;
  }
  EXPECT_GT(compared, 0);
}

TEST(Collect, BadFlagsAreOneLineErrors) {
  const std::string bin = std::string(std::getenv("TEST_SRCDIR")) + "/rlflow/world_model/collect";
  const std::string dir = MakeTempDir("collect_bad_");
  // Inputs an output must not replace (checked before they are read).
  WriteFileAtomically(dir + "/m.onnx", "a model");
  WriteFileAtomically(dir + "/p.pt", "an agent");
  struct Case {
    std::string flags, needle;
  };
  for (const Case& c : std::vector<Case>{
           {"--model=squeezenet1_1", "--out"},
           {"--out=" + dir + "/x", "--model"},
           {"--model=squeezenet1_1 --out=" + dir + "/x --cost=magic", "--cost"},
           {"--model=squeezenet1_1 --out=" + dir + "/x --episodes=0", "--episodes"},
           {"--model=squeezenet1_1 --out=" + dir + "/x --locations=nearest", "--locations"},
           {"--model=no_such_model.onnx --out=" + dir + "/x", "no_such_model"},
           {"--model=squeezenet1_1 --out=" + dir + "/x --policy=" + dir + "/none.pt", "none.pt"},
           {"--model=" + dir + "/m.onnx --out=" + dir + "/./m.onnx", "--out '" + dir + "/./m.onnx' is --model"},
           {"--model=squeezenet1_1 --policy=" + dir + "/p.pt --out=" + dir + "/p.pt",
            "--out '" + dir + "/p.pt' is --policy"}}) {
    const std::string err = dir + "/err.txt";
    std::vector<std::string> args = testing::SplitArgs(c.flags);
    args.insert(args.begin(), bin);
    ProgramIo io;
    io.err = err;
    const int rc = RunProgram(args, io);
    EXPECT_NE(rc, 0) << c.flags;
    std::string text = ReadFile(err);
    while (!text.empty() && text.back() == '\n') text.pop_back();
    EXPECT_NE(text.find(c.needle), std::string::npos) << c.flags << ": " << text;
    EXPECT_EQ(text.find('\n'), std::string::npos) << c.flags << ": " << text;
    EXPECT_FALSE(FileExists(dir + "/x")) << c.flags;
  }
  EXPECT_EQ(ReadFile(dir + "/m.onnx"), "a model");
  EXPECT_EQ(ReadFile(dir + "/p.pt"), "an agent");
}

}  // namespace
}  // namespace rlflow::world_model
