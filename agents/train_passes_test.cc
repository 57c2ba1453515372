// //agents:train_passes as a user runs it: a short run on two small zoo
// graphs writes metrics, plot, checkpoint, the agent and the evaluation
// table; run again with more steps it resumes (the loop is the one
// //agents:train_test kills with SIGKILL); overlapping train and test sets
// and missing flags are one-line errors.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <sstream>
#include <vector>

#include "agents/pass_policy.h"
#include "core/file_util.h"
#include "core/subprocess.h"
#include "runtime/ort_testing.h"

namespace rlflow {
namespace {

std::string Binary() { return std::string(std::getenv("TEST_SRCDIR")) + "/rlflow/agents/train_passes"; }

std::vector<std::string> Args(const std::string& out, int steps, const std::string& extra = "") {
  std::vector<std::string> a = {Binary(),
                                "--train=resnet18,torch:bert_base",
                                "--test=squeezenet1_1",
                                "--steps=" + std::to_string(steps),
                                "--out=" + out,
                                "--rollout_steps=16",
                                "--minibatches=2",
                                "--epochs=2",
                                "--hidden=16",
                                "--horizon=8",
                                "--random_orders=2"};
  if (!extra.empty()) a.push_back(extra);
  return a;
}

TEST(TrainPasses, WritesMetricsAgentAndEvaluationAndResumes) {
  std::string out = testing::MakeTempDir("train_passes_") + "/run";
  ASSERT_EQ(testing::WaitProcess(testing::StartProcess(Args(out, 32), out + ".log")), 0) << ReadFile(out + ".log");
  EXPECT_EQ(testing::CsvRows(out + "/metrics.csv").size(), 2u);
  EXPECT_TRUE(FileExists(out + "/checkpoint.pt"));
  EXPECT_EQ(ReadFile(out + "/training.png").substr(1, 3), "PNG");
  std::string eval = ReadFile(out + "/eval.md");
  for (const char* want : {"| resnet18 | train | 69 | 49 |", "| torch:bert_base | train |", "| squeezenet1_1 | test |",
                           "held-out graphs: geometric mean"})
    EXPECT_NE(eval.find(want), std::string::npos) << want << "\n" << eval;
  std::vector<std::string> actions = agents::PassPolicyActions(out + "/agent.pt");
  EXPECT_GT(actions.size(), 40u);  // builtin + rule-family passes
  int horizon = 0;
  agents::LoadPassPolicy(out + "/agent.pt", actions, &horizon);
  EXPECT_EQ(horizon, 8);
  // More steps: resumes from update 2, rows stay consecutive.
  ASSERT_EQ(testing::WaitProcess(testing::StartProcess(Args(out, 64), out + ".log2")), 0) << ReadFile(out + ".log2");
  EXPECT_NE(ReadFile(out + ".log2").find("resumed from"), std::string::npos);
  std::vector<std::vector<std::string>> rows = testing::CsvRows(out + "/metrics.csv");
  ASSERT_EQ(rows.size(), 4u);
  for (size_t k = 0; k < rows.size(); ++k) EXPECT_EQ(rows[k][0], std::to_string(k + 1));
}

TEST(TrainPasses, ErrorsAreOneLine) {
  std::string dir = testing::MakeTempDir("train_passes_err_");
  EXPECT_NE(testing::WaitProcess(testing::StartProcess(
                {Binary(), "--train=resnet18", "--test=resnet18", "--out=" + dir + "/a"}, dir + "/a.log")),
            0);
  EXPECT_NE(ReadFile(dir + "/a.log").find("disjoint"), std::string::npos) << ReadFile(dir + "/a.log");
  EXPECT_NE(testing::WaitProcess(testing::StartProcess({Binary(), "--out=" + dir + "/b"}, dir + "/b.log")), 0);
  EXPECT_NE(ReadFile(dir + "/b.log").find("--train is required"), std::string::npos) << ReadFile(dir + "/b.log");
  EXPECT_NE(testing::WaitProcess(testing::StartProcess(Args(dir + "/c", 16, "--reward=speed"), dir + "/c.log")), 0);
  EXPECT_NE(ReadFile(dir + "/c.log").find("unknown pass-ordering reward"), std::string::npos)
      << ReadFile(dir + "/c.log");
  EXPECT_NE(testing::WaitProcess(
                testing::StartProcess({Binary(), "--train=torch:nosuch", "--out=" + dir + "/d"}, dir + "/d.log")),
            0);
  EXPECT_NE(ReadFile(dir + "/d.log").find("nosuch"), std::string::npos) << ReadFile(dir + "/d.log");
}

}  // namespace
}  // namespace rlflow
