// The dream: a controller trained by PPO inside a world model steps only
// the dream (no rewrite environment of the process is stepped); dreams are
// reproducible from their seed; their valid actions come from the mask
// head; the controller saves and loads.
#include "world_model/dream.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "agents/env.h"
#include "agents/ppo.h"
#include "core/error.h"
#include "core/file_util.h"
#include "core/rewrite/matcher.h"
#include "runtime/cost_model.h"
#include "world_model/collect.h"
#include "world_model/dream_train.h"
#include "world_model/train.h"

namespace rlflow::world_model {
namespace {

struct Fixture {
  Rollouts data;
  WorldModel model;
  std::string path, data_path;  // world_model.pt, the rollout file
};

// Rollouts of squeezenet and a small world model of `kind` trained on them
// (once per kind).
Fixture& F(const std::string& kind = "mdn_rnn") {
  static std::map<std::string, Fixture*>* fixtures = new std::map<std::string, Fixture*>();
  Fixture*& f = (*fixtures)[kind];
  if (f == nullptr) {
    f = new Fixture();
    std::string dir = MakeTempDir("dream_");
    CollectOptions c;
    c.models = {"squeezenet1_1"};
    c.episodes = 8;
    c.horizon = 8;
    c.out = dir + "/data.rollouts";
    Collect(c);
    TrainOptions t;
    t.data = c.out;
    t.out = dir + "/wm";
    t.epochs = 3;
    t.hidden = 32;
    t.mixtures = 2;
    t.batch = 4;
    t.kind = kind;
    TrainWorldModel(t);
    f->data = ReadRollouts(c.out);
    f->path = dir + "/wm/world_model.pt";
    f->data_path = c.out;
    f->model = LoadWorldModel(f->path);
    EXPECT_EQ(f->model->kind(), kind);
  }
  return *f;
}

// The dream's properties hold for both kinds of world model.
class DreamOfKind : public ::testing::TestWithParam<std::string> {
 protected:
  Fixture& F() { return world_model::F(GetParam()); }
};

TEST_P(DreamOfKind, ControllerTrainingNeverStepsTheRealEnvironment) {
  std::vector<DreamStart> starts = DreamStarts(F().data, *F().model);
  ASSERT_EQ(starts.size(), 1u);  // one model
  EXPECT_EQ(starts[0].state.latent.size(), 32u);
  const int64_t real_before = agents::RewriteEnv::ProcessSteps();
  DreamOptions o;
  o.horizon = 10;
  DreamEnv env(F().model, o);
  torch::manual_seed(1);
  Controller controller(32, F().model->vocabulary_size(), 16);
  agents::PpoOptions po;
  po.rollout_steps = 32;
  po.minibatches = 2;
  po.epochs = 2;
  agents::BasicPpoTrainer<DreamEnv, Controller, DreamStart> trainer(
      controller, &env, [&] { return starts[0]; }, po, 1);
  for (int k = 0; k < 3; ++k) trainer.Iterate();
  EXPECT_EQ(trainer.env_steps(), 96);
  EXPECT_GT(env.steps(), 0);
  EXPECT_EQ(agents::RewriteEnv::ProcessSteps(), real_before);  // no real step while dreaming
  // The counter does count real steps (so the check above can fail).
  Matcher matcher(std::vector<rules::Rule>{});
  AnalyticalCostModel cost;
  agents::RewriteEnv real(&matcher, &cost);
  real.Reset(Graph());
  real.Step(0);
  EXPECT_EQ(agents::RewriteEnv::ProcessSteps(), real_before + 1);
}

TEST_P(DreamOfKind, DreamsAreReproducibleAndFollowTheMaskHead) {
  std::vector<DreamStart> starts = DreamStarts(F().data, *F().model);
  DreamOptions o;
  o.seed = 9;
  o.horizon = 6;
  auto rollout = [&](double tau) {
    o.tau = tau;
    DreamEnv env(F().model, o);
    env.Reset(starts[0]);
    std::vector<float> trace;
    for (int t = 0; t < 6; ++t) {
      const DreamObservation& obs = env.observation();
      int action = env.actions() - 1;  // stop unless a rule action is valid
      for (int j = 0; j < env.actions() - 1; ++j)
        if (obs.valid[j]) {
          action = j;
          break;
        }
      DreamStepResult r = env.Step(action);
      trace.insert(trace.end(), env.observation().latent.begin(), env.observation().latent.end());
      trace.push_back(static_cast<float>(r.reward));
      if (r.done) break;
    }
    return trace;
  };
  EXPECT_EQ(rollout(1.0), rollout(1.0));
  EXPECT_NE(rollout(1.0), rollout(1.5));
  // An action the mask head does not allow ends the dream with no reward.
  DreamEnv env(F().model, o);
  env.Reset(starts[0]);
  int invalid = -1;
  for (int j = 0; j < env.actions() - 1; ++j)
    if (!env.observation().valid[j]) invalid = j;
  ASSERT_GE(invalid, 0);
  DreamStepResult r = env.Step(invalid);
  EXPECT_TRUE(r.done);
  EXPECT_EQ(r.reward, 0.0);
  EXPECT_EQ(env.steps(), 0);
  EXPECT_THROW(DreamEnv(F().model, DreamOptions{0.0, 5, 1}), Error);
}

// Starts from every recorded state: the models' initial states first (the
// same as the default's), then each recorded state once, with the valid
// actions recorded for it; the order is a function of the seed.
TEST(Dream, StartsFromEveryRecordedState) {
  const Rollouts& data = F().data;
  const WorldModelImpl& model = *F().model;
  std::vector<DreamStart> initial = DreamStarts(data, model);
  std::vector<DreamStart> all = DreamStarts(data, model, true, 3);
  size_t steps = 0;
  for (const Episode& e : data.episodes) steps += e.steps_size();
  ASSERT_EQ(all.size(), steps + initial.size() - 1);  // the first episode's initial state once
  ASSERT_EQ(initial.size(), 1u);
  EXPECT_EQ(all[0].state.latent, initial[0].state.latent);
  EXPECT_EQ(all[0].state.valid, initial[0].state.valid);
  // The state before step 2 of the first episode is among them, valid
  // actions as recorded after step 1.
  const Episode& e = data.episodes[0];
  ASSERT_GE(e.steps_size(), 3);
  std::vector<float> latent(e.steps(2).latent().begin(), e.steps(2).latent().end());
  std::vector<uint8_t> mask = UnpackMask(e.steps(1).next_valid().rule_mask(), model.options().rule_actions);
  int found = 0;
  for (const DreamStart& s : all) {
    if (s.state.latent != latent) continue;
    ++found;
    for (int j = 0; j < model.vocabulary_size(); ++j) EXPECT_EQ(s.state.valid[j], mask[model.options().vocabulary[j]]);
  }
  EXPECT_GE(found, 1);
  std::vector<DreamStart> again = DreamStarts(data, model, true, 3), other = DreamStarts(data, model, true, 4);
  bool same = true, differs = false;
  for (size_t i = 0; i < all.size(); ++i) {
    same &= again[i].state.latent == all[i].state.latent;
    differs |= other[i].state.latent != all[i].state.latent;
  }
  EXPECT_TRUE(same);
  EXPECT_TRUE(differs);
}

// //world_model:dream --starts=all: trains with no real step, records the
// setting (a run of the other setting is not resumed) and its starts.
TEST(Dream, TrainControllerFromAllRecordedStates) {
  const std::string dir = MakeTempDir("dream_all_");
  DreamTrainOptions o;
  o.world_model = F().path;
  o.data = F().data_path;
  o.out = dir + "/all";
  o.steps = 64;
  o.rollout_steps = 32;
  o.minibatches = 2;
  o.epochs = 1;
  o.starts = "all";
  DreamTrainResult r = TrainController(o);
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.real_steps, 0);
  EXPECT_NE(ReadFile(o.out + "/config.txt").find("starts=all"), std::string::npos);
  nlohmann::json summary = nlohmann::json::parse(ReadFile(o.out + "/summary.json"));
  EXPECT_GT(summary.at("starts").get<int64_t>(), 1);
  DreamTrainOptions initial = o;
  initial.starts = "initial";
  EXPECT_THROW(TrainController(initial), Error);  // another configuration in the same directory
  initial.out = dir + "/initial";
  ASSERT_TRUE(TrainController(initial).finished);
  EXPECT_EQ(nlohmann::json::parse(ReadFile(initial.out + "/summary.json")).at("starts").get<int64_t>(), 1);
  DreamTrainOptions bad = o;
  bad.out = dir + "/bad";
  bad.starts = "some";
  EXPECT_THROW(TrainController(bad), Error);
}

INSTANTIATE_TEST_SUITE_P(Kinds, DreamOfKind, ::testing::Values("mdn_rnn", "rssm"));

TEST(Dream, TheControllerSavesAndLoads) {
  torch::manual_seed(4);
  Controller c(32, F().model->vocabulary_size(), 16);
  std::string path = MakeTempDir("controller_") + "/controller.pt";
  SaveController(*c, path);
  Controller d = LoadController(path);
  std::vector<DreamStart> starts = DreamStarts(F().data, *F().model);
  std::vector<const DreamObservation*> obs = {&starts[0].state};
  ControllerImpl::Output a = c->forward(obs), b = d->forward(obs);
  EXPECT_TRUE(torch::equal(a.logits, b.logits));
  EXPECT_TRUE(torch::equal(a.mask, b.mask));
  EXPECT_TRUE(a.mask[0][F().model->vocabulary_size()].item<bool>());  // stop is always valid
  EXPECT_THROW(LoadController(path + ".missing"), Error);
}

}  // namespace
}  // namespace rlflow::world_model
