// The generator and the verifier as MPI jobs (Open MPI's mpirun): with 1, 2
// and 4 ranks (--oversubscribe: this machine has 2 cores) they write the
// same candidates, database and statistics, byte for byte, as one process
// with threads, however the work was handed out.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "core/mpi_testing.h"
#include "core/rules/rule.h"
#include "core/subprocess.h"

namespace rlflow {
namespace {

std::string Runfile(const std::string& path) { return std::string(std::getenv("TEST_SRCDIR")) + "/rlflow/" + path; }

using testing::Mpirun;

// The --timings table without its seconds column: id, outcome, rule per line.
std::string WithoutSeconds(const std::string& tsv) {
  std::istringstream in(tsv);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cells;
    std::istringstream row(line);
    for (std::string cell; std::getline(row, cell, '\t');) cells.push_back(cell);
    if (cells.size() >= 3) cells.erase(cells.begin() + 2);
    for (const std::string& cell : cells) out += cell + "\t";
    out += "\n";
  }
  return out;
}

// Candidates of up to two operators over two inputs: about 300, verified in
// a few seconds.
const std::vector<std::string> kSmall = {"--max_ops=2", "--max_inputs=2"};

TEST(GeneratorMpi, AnyNumberOfRanksWritesTheSameCandidatesAsOneProcess) {
  ASSERT_TRUE(HaveProgram("mpirun")) << "mpirun not found (Debian's openmpi-bin)";
  const std::string dir = MakeTempDir("generator_mpi_");
  const std::string log = dir + "/log.txt";
  std::vector<std::string> generate = {Runfile("generator/generator")};
  generate.insert(generate.end(), kSmall.begin(), kSmall.end());
  std::vector<std::string> one = generate;
  one.push_back("--output=" + dir + "/one.pb");
  ASSERT_EQ(RunProgram(one, log), 0) << ReadFile(log);
  ASSERT_GT(ReadFile(dir + "/one.pb").size(), 1000u);
  for (const int ranks : {1, 2, 4}) {
    std::vector<std::string> args = generate;
    const std::string out = dir + "/ranks" + std::to_string(ranks) + ".pb";
    args.push_back("--output=" + out);
    ASSERT_EQ(RunProgram(Mpirun(ranks, args), log), 0) << ranks << " ranks:\n" << ReadFile(log);
    EXPECT_EQ(ReadFile(out), ReadFile(dir + "/one.pb")) << ranks << " ranks";
  }
}

// Candidates of up to two operators over two inputs, in `dir`, and the
// verifier's command line for them.
std::vector<std::string> Candidates(const std::string& dir) {
  const std::string log = dir + "/generate.txt";
  std::vector<std::string> generate = {Runfile("generator/generator"), "--output=" + dir + "/candidates.pb"};
  generate.insert(generate.end(), kSmall.begin(), kSmall.end());
  EXPECT_EQ(RunProgram(generate, log), 0) << ReadFile(log);
  return {Runfile("verifier/verifier"), "--candidates=" + dir + "/candidates.pb"};
}

// The verifier as one process with threads, then as MPI jobs of `ranks`:
// the same database, statistics and per-candidate outcomes.
void ExpectRanksWriteTheOneProcessDatabase(int ranks) {
  // ./bazelw installs openmpi-bin: a missing mpirun is a failure, not a skip.
  ASSERT_TRUE(HaveProgram("mpirun")) << "mpirun not found (Debian's openmpi-bin)";
  const std::string dir = MakeTempDir("verifier_mpi_" + std::to_string(ranks) + "_ranks_");
  const std::string log = dir + "/log.txt";
  const std::vector<std::string> verify = Candidates(dir);
  ASSERT_FALSE(::testing::Test::HasFailure());
  std::vector<std::string> one = verify;
  one.push_back("--output=" + dir + "/one.pb");
  one.push_back("--threads=2");
  one.push_back("--timings=" + dir + "/one.tsv");
  ASSERT_EQ(RunProgram(one, log), 0) << ReadFile(log);
  const rules::RuleDatabase db = LoadRuleDatabase(dir + "/one.pb");
  ASSERT_GT(db.rules_size(), 50);
  std::vector<std::string> args = verify;
  const std::string out = dir + "/ranks" + std::to_string(ranks) + ".pb";
  args.push_back("--output=" + out);
  args.push_back("--timings=" + dir + "/ranks.tsv");
  ASSERT_EQ(RunProgram(Mpirun(ranks, args), log), 0) << ranks << " ranks:\n" << ReadFile(log);
  EXPECT_EQ(ReadFile(out), ReadFile(dir + "/one.pb")) << ranks << " ranks";
  EXPECT_EQ(ReadFile(dir + "/ranks" + std::to_string(ranks) + ".stats.md"), ReadFile(dir + "/one.stats.md"))
      << ranks << " ranks";
  // Every candidate's outcome, in candidate order (the database is sorted
  // by id whatever the order; this list is not).
  EXPECT_EQ(WithoutSeconds(ReadFile(dir + "/ranks.tsv")), WithoutSeconds(ReadFile(dir + "/one.tsv")))
      << ranks << " ranks";
}

// A test for each number of ranks, a shard each (as one test: 47 s here, 53 s
// on CI's machine; 2 and 4 ranks in one test: 44 s beside another test).
TEST(VerifierMpi, OneRankWritesTheSameDatabaseAsOneProcess) { ExpectRanksWriteTheOneProcessDatabase(1); }

TEST(VerifierMpi, TwoRanksWriteTheSameDatabaseAsOneProcess) { ExpectRanksWriteTheOneProcessDatabase(2); }

TEST(VerifierMpi, FourRanksWriteTheSameDatabaseAsOneProcess) { ExpectRanksWriteTheOneProcessDatabase(4); }

TEST(VerifierMpi, ErrorsEndTheWholeJob) {
  ASSERT_TRUE(HaveProgram("mpirun")) << "mpirun not found (Debian's openmpi-bin)";
  const std::string dir = MakeTempDir("verifier_mpi_errors_");
  const std::string log = dir + "/log.txt";
  const std::vector<std::string> verify = Candidates(dir);
  ASSERT_FALSE(HasFailure());
  // Shards are for separate processes: refused under mpirun.
  std::vector<std::string> sharded = verify;
  sharded.push_back("--output=" + dir + "/shard.pb");
  sharded.push_back("--shard=0/2");
  EXPECT_NE(RunProgram(Mpirun(2, sharded), log), 0);
  EXPECT_NE(ReadFile(log).find("--merge and --shard are for separate processes"), std::string::npos) << ReadFile(log);
  // A one-line error on rank 0 alone (the others are waiting for their
  // first task) ends the whole job, not a hang (mpirun's own --timeout
  // bounds the test if it did hang).
  std::vector<std::string> unwritable = verify;
  unwritable.push_back("--output=" + dir + "/no_such_dir/rules.pb");
  std::vector<std::string> job = Mpirun(3, unwritable, /*timeout_s=*/60);
  EXPECT_NE(RunProgram(job, log), 0);
  EXPECT_NE(ReadFile(log).find("cannot write --output"), std::string::npos) << ReadFile(log);
  EXPECT_EQ(ReadFile(log).find("time limit for job execution has been reached"), std::string::npos) << ReadFile(log);
}

// No output replaces a file the job reads, however the path is spelled: a
// one-line error before anything is read or written (checked before the
// inputs are read, so they need not be valid here).
TEST(VerifierCli, NoOutputReplacesAnInput) {
  const std::string dir = MakeTempDir("verifier_roles_");
  const std::string log = dir + "/log.txt";
  for (const char* name : {"candidates.pb", "written.rules", "a.pb", "b.pb"})
    WriteFileAtomically(dir + "/" + name, std::string("input ") + name);
  struct Case {
    std::vector<std::string> args;
    std::string error;
  };
  const std::string verifier = Runfile("verifier/verifier"), generator = Runfile("generator/generator");
  const std::vector<Case> cases = {
      {{verifier, "--candidates=" + dir + "/candidates.pb", "--output=" + dir + "/./candidates.pb"},
       "--output '" + dir + "/./candidates.pb' is --candidates"},
      {{verifier, "--candidates=" + dir + "/candidates.pb", "--written=" + dir + "/written.rules",
        "--output=" + dir + "/rules.pb", "--timings=" + dir + "/x/../written.rules"},
       "--timings '" + dir + "/x/../written.rules' is --written"},
      {{verifier, "--candidates=" + dir + "/candidates.pb", "--output=" + dir + "/rules.pb",
        "--stats=" + dir + "/./rules.pb"},
       "--stats and --output are the same file"},
      {{verifier, "--merge=" + dir + "/a.pb," + dir + "/b.pb", "--output=" + dir + "/./b.pb"},
       "--output '" + dir + "/./b.pb' is --merge"},
      {{generator, "--merge=" + dir + "/a.pb," + dir + "/b.pb", "--output=" + dir + "/./a.pb"},
       "--output '" + dir + "/./a.pb' is --merge"},
  };
  ASSERT_EQ(::mkdir((dir + "/x").c_str(), 0755), 0);
  for (const Case& c : cases) {
    EXPECT_NE(RunProgram(c.args, log), 0) << c.error;
    EXPECT_NE(ReadFile(log).find("error: " + c.error), std::string::npos) << ReadFile(log);
  }
  for (const char* name : {"candidates.pb", "written.rules", "a.pb", "b.pb"})
    EXPECT_EQ(ReadFile(dir + "/" + name), std::string("input ") + name);
  EXPECT_FALSE(FileExists(dir + "/rules.pb"));
  RemoveTree(dir);
}

}  // namespace
}  // namespace rlflow
