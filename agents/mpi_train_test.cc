// Data-parallel training (DD-PPO) as a user starts it, under Open MPI's
// mpirun: one rank is exactly the single-process trainer; two workers count
// both workers' steps, keep the same weights (the trainer checks their
// bytes after every update and fails otherwise), give the same run for the
// same seed, differ from one worker, and resume from their checkpoint; the
// pass-ordering trainer trains with two workers as well.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "core/mpi_testing.h"
#include "core/subprocess.h"

namespace rlflow {
namespace {

using testing::Mpirun;

std::string Binary(const std::string& name) {
  return std::string(std::getenv("TEST_SRCDIR")) + "/rlflow/agents/" + name;
}

std::vector<std::string> TrainArgs(const std::string& out, int steps) {
  return {Binary("train"),
          "--model=resnet18,squeezenet1_1",
          "--steps=" + std::to_string(steps),
          "--out=" + out,
          "--rollout_steps=16",
          "--minibatches=2",
          "--epochs=2",
          "--hidden=16",
          "--gnn_steps=1",
          "--horizon=20"};
}

// metrics.csv without its seconds column (the only column timing changes).
std::vector<std::vector<std::string>> Metrics(const std::string& dir) {
  std::vector<std::vector<std::string>> rows = testing::CsvRows(dir + "/metrics.csv");
  for (auto& row : rows)
    if (row.size() > 2) row.erase(row.begin() + 2);
  return rows;
}

// Runs it (mpirun looked up in PATH) and waits: its exit status.
int RunJob(const std::vector<std::string>& args, const std::string& log) { return RunProgram(args, log); }

TEST(DataParallelTraining, OneRankIsTheSingleProcessTrainer) {
  ASSERT_TRUE(HaveProgram("mpirun")) << "mpirun not found (Debian's openmpi-bin)";
  const std::string dir = MakeTempDir("dd_one_");
  ASSERT_EQ(RunJob(TrainArgs(dir + "/alone", 64), dir + "/a.log"), 0) << ReadFile(dir + "/a.log");
  ASSERT_EQ(RunJob(Mpirun(1, TrainArgs(dir + "/mpi", 64), 120), dir + "/b.log"), 0) << ReadFile(dir + "/b.log");
  EXPECT_EQ(ReadFile(dir + "/mpi/agent.pt"), ReadFile(dir + "/alone/agent.pt"));
  EXPECT_EQ(Metrics(dir + "/mpi"), Metrics(dir + "/alone"));
  EXPECT_EQ(ReadFile(dir + "/mpi/config.txt"), ReadFile(dir + "/alone/config.txt"));
}

TEST(DataParallelTraining, TwoWorkersAreReproducible) {
  ASSERT_TRUE(HaveProgram("mpirun")) << "mpirun not found (Debian's openmpi-bin)";
  const std::string dir = MakeTempDir("dd_two_");
  ASSERT_EQ(RunJob(TrainArgs(dir + "/one", 64), dir + "/one.log"), 0) << ReadFile(dir + "/one.log");
  for (const std::string run : {"a", "b"})
    ASSERT_EQ(RunJob(Mpirun(2, TrainArgs(dir + "/" + run, 64), 120), dir + "/" + run + ".log"), 0)
        << ReadFile(dir + "/" + run + ".log");
  // Same seed, same run, bit for bit.
  EXPECT_EQ(ReadFile(dir + "/b/agent.pt"), ReadFile(dir + "/a/agent.pt"));
  EXPECT_EQ(Metrics(dir + "/b"), Metrics(dir + "/a"));
  // Two workers of 16 transitions: 32 steps per update, both workers' steps counted.
  std::vector<std::vector<std::string>> rows = Metrics(dir + "/a");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0][1], "32");
  EXPECT_EQ(rows[1][1], "64");
  const std::string summary = ReadFile(dir + "/a/summary.json");
  EXPECT_NE(summary.find("\"workers\": 2"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"env_steps\": 64"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"real_steps\": 64"), std::string::npos) << summary;
  EXPECT_NE(ReadFile(dir + "/a/config.txt").find("workers=2\n"), std::string::npos);
  // Not the one-worker run (other samples, averaged gradients).
  EXPECT_NE(ReadFile(dir + "/a/agent.pt"), ReadFile(dir + "/one/agent.pt"));
}

TEST(DataParallelTraining, TwoWorkersResume) {
  ASSERT_TRUE(HaveProgram("mpirun")) << "mpirun not found (Debian's openmpi-bin)";
  const std::string dir = MakeTempDir("dd_resume_");
  // Half the steps, then the same command with more: resumed from the
  // checkpoint (every worker's sampler state in it), rows consecutive.
  const std::string out = dir + "/resumed";
  ASSERT_EQ(RunJob(Mpirun(2, TrainArgs(out, 32), 120), dir + "/r1.log"), 0) << ReadFile(dir + "/r1.log");
  ASSERT_EQ(RunJob(Mpirun(2, TrainArgs(out, 96), 120), dir + "/r2.log"), 0) << ReadFile(dir + "/r2.log");
  EXPECT_NE(ReadFile(dir + "/r2.log").find("resumed from"), std::string::npos) << ReadFile(dir + "/r2.log");
  std::vector<std::vector<std::string>> rows = Metrics(out);
  ASSERT_EQ(rows.size(), 3u);
  for (size_t k = 0; k < rows.size(); ++k) {
    EXPECT_EQ(rows[k][0], std::to_string(k + 1));
    EXPECT_EQ(rows[k][1], std::to_string(32 * (k + 1)));
  }
  // One worker in a two-worker run's directory trains differently: refused.
  EXPECT_NE(RunJob(TrainArgs(out, 128), dir + "/r3.log"), 0);
  EXPECT_NE(ReadFile(dir + "/r3.log").find("another configuration"), std::string::npos) << ReadFile(dir + "/r3.log");
}

TEST(DataParallelTraining, PassOrderingTrainerWithTwoWorkers) {
  ASSERT_TRUE(HaveProgram("mpirun")) << "mpirun not found (Debian's openmpi-bin)";
  const std::string dir = MakeTempDir("dd_passes_");
  std::vector<std::string> args = {Binary("train_passes"),  "--train=resnet18,squeezenet1_1",
                                   "--test=inception_v3",   "--steps=64",
                                   "--out=" + dir + "/run", "--rollout_steps=16",
                                   "--minibatches=2",       "--epochs=2",
                                   "--hidden=16",           "--horizon=8",
                                   "--random_orders=1"};
  for (const std::string run : {"a", "b"}) {
    std::vector<std::string> a = args;
    a[4] = "--out=" + dir + "/" + run;
    ASSERT_EQ(RunJob(Mpirun(2, a, 120), dir + "/" + run + ".log"), 0) << ReadFile(dir + "/" + run + ".log");
    EXPECT_TRUE(FileExists(dir + "/" + run + "/eval.md"));
  }
  EXPECT_EQ(ReadFile(dir + "/b/agent.pt"), ReadFile(dir + "/a/agent.pt"));
  std::vector<std::vector<std::string>> rows = Metrics(dir + "/a");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1][1], "64");
}

}  // namespace
}  // namespace rlflow
