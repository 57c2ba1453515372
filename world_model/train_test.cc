// World-model training as a user runs it: a short run writes metrics,
// curves, checkpoint, the model and its evaluation; interrupted after its
// first epoch and started again, it resumes and ends with exactly the
// model an uninterrupted run gives; bad options are errors.
#include "world_model/train.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "core/file_util.h"
#include "world_model/collect.h"
#include "world_model/world_model.h"

namespace rlflow::world_model {
namespace {

std::string Data(const std::string& dir) {
  CollectOptions c;
  c.models = {"squeezenet1_1"};
  c.episodes = 8;
  c.horizon = 8;
  c.out = dir + "/data.rollouts";
  EXPECT_TRUE(Collect(c).finished);
  return c.out;
}

TrainOptions Options(const std::string& data, const std::string& out) {
  TrainOptions o;
  o.data = data;
  o.out = out;
  o.epochs = 3;
  o.batch = 4;
  o.hidden = 32;
  o.mixtures = 2;
  o.held_out = 0.25;
  return o;
}

TEST(TrainWorldModel, WritesItsRunAndResumesToTheSameModel) {
  std::string dir = MakeTempDir("wm_train_");
  std::string data = Data(dir);
  TrainResult whole = TrainWorldModel(Options(data, dir + "/whole"));
  ASSERT_TRUE(whole.finished);
  EXPECT_EQ(whole.epochs, 3);
  EXPECT_FALSE(whole.resumed);
  EXPECT_EQ(whole.held_out.episodes, 2);
  EXPECT_GT(whole.held_out.steps, 0);
  EXPECT_GE(whole.held_out.mask_recall, 0.0);
  EXPECT_LE(whole.held_out.mask_recall, 1.0);
  EXPECT_EQ(whole.per_model.count("squeezenet1_1"), 1u);
  for (const char* f : {"config.txt", "metrics.csv", "checkpoint.pt", "world_model.pt", "eval.json"})
    EXPECT_TRUE(FileExists(dir + "/whole/" + f)) << f;
  std::string csv = ReadFile(dir + "/whole/metrics.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 4) << csv;  // header + 3 epochs
  WorldModel loaded = LoadWorldModel(dir + "/whole/world_model.pt");
  EXPECT_EQ(loaded->options().hidden, 32);
  EXPECT_EQ(loaded->options().latent, 32);
  // The rule database's ids, from the rollouts: it acts by rule id on a
  // database regenerated or grown since (LoadDreamAgent).
  const Rollouts rollouts = ReadRollouts(data);
  ASSERT_EQ(rollouts.header.rule_ids_size() * 2, static_cast<int>(rollouts.header.rule_actions()));
  EXPECT_EQ(loaded->options().rule_ids,
            std::vector<std::string>(rollouts.header.rule_ids().begin(), rollouts.header.rule_ids().end()));

  // Interrupted after epoch 1, then resumed.
  std::atomic<bool> stop{false};
  TrainOptions o = Options(data, dir + "/part");
  o.interrupted = &stop;
  o.progress = [&](const std::string& line) {
    if (line.rfind("epoch 1/", 0) == 0) stop = true;
  };
  TrainResult first = TrainWorldModel(o);
  EXPECT_FALSE(first.finished);
  EXPECT_EQ(first.epochs, 1);
  EXPECT_FALSE(FileExists(dir + "/part/world_model.pt"));
  stop = false;
  o.progress = nullptr;
  TrainResult second = TrainWorldModel(o);
  ASSERT_TRUE(second.finished);
  EXPECT_TRUE(second.resumed);
  EXPECT_EQ(second.epochs, 3);
  WorldModel a = LoadWorldModel(dir + "/whole/world_model.pt"), b = LoadWorldModel(dir + "/part/world_model.pt");
  auto pa = a->named_parameters(), pb = b->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (const auto& p : pa) EXPECT_TRUE(torch::equal(p.value(), pb[p.key()])) << p.key();
  EXPECT_DOUBLE_EQ(second.held_out.nll, whole.held_out.nll);

  // Another configuration in the same directory, and bad options.
  TrainOptions other = Options(data, dir + "/whole");
  other.lr = 0.5;
  EXPECT_THROW(TrainWorldModel(other), Error);
  other = Options(data, dir + "/whole");
  other.reward_loss = "mse";  // another loss is another configuration
  EXPECT_THROW(TrainWorldModel(other), Error);
  TrainOptions bad = Options(data, dir + "/bad");
  bad.held_out = 1.0;
  EXPECT_THROW(TrainWorldModel(bad), Error);
  bad = Options(data, dir + "/bad3");
  bad.reward_loss = "l3";
  EXPECT_THROW(TrainWorldModel(bad), Error);
  bad = Options(dir + "/missing.rollouts", dir + "/bad2");
  EXPECT_THROW(TrainWorldModel(bad), Error);
  EXPECT_THROW(LoadWorldModel(dir + "/missing.pt"), Error);
}

// The cosine schedule: a resumed run continues it (the same model as an
// uninterrupted one), it trains another model than the constant rate, and
// it is part of the run's configuration.
TEST(TrainWorldModel, CosineScheduleResumesWhereItStopped) {
  std::string dir = MakeTempDir("wm_cosine_");
  std::string data = Data(dir);
  TrainOptions o = Options(data, dir + "/whole");
  EXPECT_EQ(o.lr_schedule, "cosine");  // the default
  ASSERT_TRUE(TrainWorldModel(o).finished);
  EXPECT_NE(ReadFile(dir + "/whole/config.txt").find("lr_schedule=cosine"), std::string::npos);

  std::atomic<bool> stop{false};
  TrainOptions part = Options(data, dir + "/part");
  part.interrupted = &stop;
  part.progress = [&](const std::string& line) {
    if (line.rfind("epoch 2/", 0) == 0) stop = true;
  };
  EXPECT_FALSE(TrainWorldModel(part).finished);
  stop = false;
  part.progress = nullptr;
  ASSERT_TRUE(TrainWorldModel(part).finished);
  TrainOptions constant = Options(data, dir + "/constant");
  constant.lr_schedule = "constant";
  ASSERT_TRUE(TrainWorldModel(constant).finished);
  EXPECT_EQ(ReadFile(dir + "/constant/config.txt").find("lr_schedule"), std::string::npos);  // old runs resume
  WorldModel a = LoadWorldModel(dir + "/whole/world_model.pt"), b = LoadWorldModel(dir + "/part/world_model.pt");
  WorldModel c = LoadWorldModel(dir + "/constant/world_model.pt");
  auto pa = a->named_parameters(), pb = b->named_parameters(), pc = c->named_parameters();
  bool differs = false;
  for (const auto& p : pa) {
    EXPECT_TRUE(torch::equal(p.value(), pb[p.key()])) << p.key();
    differs |= !torch::equal(p.value(), pc[p.key()]);
  }
  EXPECT_TRUE(differs);

  TrainOptions other = Options(data, dir + "/whole");  // the constant rate in the cosine run's directory
  other.lr_schedule = "constant";
  try {
    TrainWorldModel(other);
    ADD_FAILURE() << "the constant rate resumed a cosine run";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lr_schedule was 'cosine', now not set"), std::string::npos) << e.what();
  }
  TrainOptions bad = Options(data, dir + "/bad");
  bad.lr_schedule = "linear";
  EXPECT_THROW(TrainWorldModel(bad), Error);
}

// The RSSM kind: trained, saved and loaded as an RSSM, resumed after an
// interruption to the model an uninterrupted run gives (its posterior
// samples included), recorded in the configuration.
TEST(TrainWorldModel, RssmTrainsResumesAndLoadsAsItsKind) {
  std::string dir = MakeTempDir("wm_rssm_");
  std::string data = Data(dir);
  TrainOptions o = Options(data, dir + "/whole");
  o.kind = "rssm";
  TrainResult whole = TrainWorldModel(o);
  ASSERT_TRUE(whole.finished);
  EXPECT_TRUE(std::isfinite(whole.held_out.nll));
  EXPECT_GT(whole.held_out.latent_error_5, 0.0);
  EXPECT_NE(ReadFile(dir + "/whole/config.txt").find("world_model_kind=rssm"), std::string::npos);
  EXPECT_NE(ReadFile(dir + "/whole/eval.json").find("\"kind\": \"rssm\""), std::string::npos);
  WorldModel a = LoadWorldModel(dir + "/whole/world_model.pt");
  EXPECT_EQ(a->kind(), "rssm");
  EXPECT_EQ(a->options().groups, 16);

  std::atomic<bool> stop{false};
  TrainOptions part = Options(data, dir + "/part");
  part.kind = "rssm";
  part.interrupted = &stop;
  part.progress = [&](const std::string& line) {
    if (line.rfind("epoch 1/", 0) == 0) stop = true;
  };
  EXPECT_FALSE(TrainWorldModel(part).finished);
  stop = false;
  part.progress = nullptr;
  TrainResult second = TrainWorldModel(part);
  ASSERT_TRUE(second.finished);
  EXPECT_TRUE(second.resumed);
  WorldModel b = LoadWorldModel(dir + "/part/world_model.pt");
  auto pa = a->named_parameters(), pb = b->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (const auto& p : pa) EXPECT_TRUE(torch::equal(p.value(), pb[p.key()])) << p.key();
  EXPECT_DOUBLE_EQ(second.held_out.nll, whole.held_out.nll);

  // An MDN-RNN run's directory is not resumed as an RSSM, nor the reverse.
  ASSERT_TRUE(TrainWorldModel(Options(data, dir + "/mdn")).finished);
  EXPECT_EQ(LoadWorldModel(dir + "/mdn/world_model.pt")->kind(), "mdn_rnn");
  TrainOptions swapped = Options(data, dir + "/mdn");
  swapped.kind = "rssm";
  EXPECT_THROW(TrainWorldModel(swapped), Error);
  EXPECT_THROW(TrainWorldModel(Options(data, dir + "/whole")), Error);
  TrainOptions bad = Options(data, dir + "/bad");
  bad.kind = "transformer";
  EXPECT_THROW(TrainWorldModel(bad), Error);
}

}  // namespace
}  // namespace rlflow::world_model
