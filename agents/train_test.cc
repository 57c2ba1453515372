// //agents:train as a user runs it: a short run writes metrics, plot and
// checkpoint; killed with SIGKILL in the middle and started again with the
// same command it resumes from its last checkpoint (rows consecutive, at
// most one update redone); another configuration in the same directory (a
// rule database changed since included) and missing flags are one-line errors.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "core/file_util.h"
#include "core/rules/rule.h"
#include "core/subprocess.h"
#include "runtime/ort_testing.h"

namespace rlflow {
namespace {

std::string Binary() { return std::string(std::getenv("TEST_SRCDIR")) + "/rlflow/agents/train"; }

std::vector<std::string> Args(const std::string& out, int steps, const std::string& extra = "") {
  std::vector<std::string> a = {Binary(),       "--model=resnet18",   "--steps=" + std::to_string(steps),
                                "--out=" + out, "--rollout_steps=16", "--minibatches=2",
                                "--epochs=2",   "--hidden=16",        "--gnn_steps=1",
                                "--horizon=20"};
  if (!extra.empty()) a.push_back(extra);
  return a;
}

TEST(Train, WritesMetricsPlotAndCheckpoint) {
  std::string out = testing::MakeTempDir("train_") + "/run";
  std::string log = out + ".log";
  ASSERT_EQ(testing::WaitProcess(testing::StartProcess(Args(out, 32), log)), 0) << ReadFile(log);
  std::vector<std::vector<std::string>> rows = testing::CsvRows(out + "/metrics.csv");
  ASSERT_EQ(rows.size(), 2u) << ReadFile(out + "/metrics.csv");
  EXPECT_EQ(rows[0][0], "1");
  EXPECT_EQ(rows[1][1], "32");
  EXPECT_EQ(rows[0].size(), 12u);
  EXPECT_TRUE(FileExists(out + "/checkpoint.pt"));
  EXPECT_TRUE(FileExists(out + "/config.txt"));
  std::string png = ReadFile(out + "/training.png");
  ASSERT_GT(png.size(), 8u);
  EXPECT_EQ(png.substr(1, 3), "PNG");
  EXPECT_NE(ReadFile(log).find("done: 2 updates"), std::string::npos) << ReadFile(log);
  // Real work: every environment step was a real one; the analytical cost
  // model (the default) and the normalised reward time nothing on the device.
  std::string summary = ReadFile(out + "/summary.json");
  EXPECT_NE(summary.find("\"env_steps\": 32"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"real_steps\": 32"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"real_measurements\": 0"), std::string::npos) << summary;
  EXPECT_NE(ReadFile(log).find("this run: 32 real steps"), std::string::npos) << ReadFile(log);
  // The trained policy's final cost on the training graph: never above the
  // start (the start counts as reached), never above its greedy episode's.
  EXPECT_NE(summary.find("\"final_cost\""), std::string::npos) << summary;
  const std::string text = ReadFile(log);
  const size_t at = text.find("final cost on resnet18: ");
  ASSERT_NE(at, std::string::npos) << text;
  double before = 0, after = 0, lower = 0, greedy = 0;
  ASSERT_EQ(std::sscanf(text.c_str() + at, "final cost on resnet18: %lf -> %lf (%lf%% lower; greedy episode alone %lf)",
                        &before, &after, &lower, &greedy),
            4);
  EXPECT_GT(before, 0);
  EXPECT_LE(after, before);
  EXPECT_LE(after, greedy);
  EXPECT_LE(greedy, before);
}

TEST(Train, ResumesAfterSigkill) {
  std::string out = testing::MakeTempDir("train_kill_") + "/run";
  std::vector<std::string> args = Args(out, 160);
  pid_t pid = testing::StartProcess(args, out + ".log1");
  // Kill it once at least two updates are checkpointed.
  for (int i = 0; i < 600; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (FileExists(out + "/metrics.csv") && testing::CsvRows(out + "/metrics.csv").size() >= 2) break;
  }
  ::kill(pid, SIGKILL);
  EXPECT_EQ(testing::WaitProcess(pid), 128 + SIGKILL);
  size_t before = testing::CsvRows(out + "/metrics.csv").size();
  ASSERT_GE(before, 2u);
  ASSERT_LT(before, 10u) << "finished before it was killed";
  ASSERT_EQ(testing::WaitProcess(testing::StartProcess(args, out + ".log2")), 0) << ReadFile(out + ".log2");
  EXPECT_NE(ReadFile(out + ".log2").find("resumed from"), std::string::npos);
  std::vector<std::vector<std::string>> rows = testing::CsvRows(out + "/metrics.csv");
  ASSERT_EQ(rows.size(), 10u);  // 160 steps / 16 per update, each update once
  for (size_t k = 0; k < rows.size(); ++k) {
    EXPECT_EQ(rows[k][0], std::to_string(k + 1));
    EXPECT_EQ(rows[k][1], std::to_string(16 * (k + 1)));
  }
  // Seconds keep counting across the restart.
  for (size_t k = 1; k < rows.size(); ++k) EXPECT_GE(std::stod(rows[k][2]), std::stod(rows[k - 1][2]));
}

TEST(Train, ErrorsAreOneLine) {
  std::string dir = testing::MakeTempDir("train_err_");
  std::string out = dir + "/run";
  ASSERT_EQ(testing::WaitProcess(testing::StartProcess(Args(out, 16), dir + "/a.log")), 0) << ReadFile(dir + "/a.log");
  // Another configuration in the same directory.
  EXPECT_NE(testing::WaitProcess(testing::StartProcess(Args(out, 16, "--lr=0.01"), dir + "/b.log")), 0);
  EXPECT_NE(ReadFile(dir + "/b.log").find("another configuration"), std::string::npos) << ReadFile(dir + "/b.log");
  EXPECT_NE(ReadFile(dir + "/b.log").find("lr was '"), std::string::npos) << ReadFile(dir + "/b.log");  // names it
  EXPECT_NE(ReadFile(dir + "/b.log").find(", now '0.01'"), std::string::npos) << ReadFile(dir + "/b.log");
  // The same flags on a rule database that changed since (one rule fewer at
  // the same path): the policy's actions are its rules by position, so the
  // run is not continued on other actions.
  rules::RuleDatabase db = LoadRuleDatabase(FindRunfile("rules/default.rules.pb"));
  const std::string rules_path = dir + "/rules.pb";
  SaveMessageAtomically(db, rules_path);
  const std::string rules_flag = "--rules=" + rules_path;
  ASSERT_EQ(testing::WaitProcess(testing::StartProcess(Args(dir + "/z", 16, rules_flag), dir + "/f.log")), 0)
      << ReadFile(dir + "/f.log");
  const std::string before = "rule_database was '" + std::to_string(db.rules_size()) + " rules";
  db.mutable_rules()->RemoveLast();
  SaveMessageAtomically(db, rules_path);
  EXPECT_NE(testing::WaitProcess(testing::StartProcess(Args(dir + "/z", 32, rules_flag), dir + "/g.log")), 0);
  EXPECT_NE(ReadFile(dir + "/g.log").find("another configuration"), std::string::npos) << ReadFile(dir + "/g.log");
  EXPECT_NE(ReadFile(dir + "/g.log").find(before), std::string::npos) << ReadFile(dir + "/g.log");
  // No --out, no --model, an unknown reward.
  EXPECT_NE(testing::WaitProcess(testing::StartProcess({Binary(), "--model=resnet18"}, dir + "/c.log")), 0);
  EXPECT_NE(ReadFile(dir + "/c.log").find("--out is required"), std::string::npos) << ReadFile(dir + "/c.log");
  EXPECT_NE(testing::WaitProcess(testing::StartProcess({Binary(), "--out=" + dir + "/x"}, dir + "/d.log")), 0);
  EXPECT_NE(ReadFile(dir + "/d.log").find("--model is required"), std::string::npos);
  EXPECT_NE(testing::WaitProcess(testing::StartProcess(Args(dir + "/y", 16, "--reward=speed"), dir + "/e.log")), 0);
  EXPECT_NE(ReadFile(dir + "/e.log").find("unknown reward 'speed'"), std::string::npos) << ReadFile(dir + "/e.log");
}

}  // namespace
}  // namespace rlflow
