#include "core/subprocess.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "core/error.h"
#include "core/file_util.h"

namespace rlflow {
namespace {

TEST(Subprocess, ExitCodesAndSignals) {
  EXPECT_EQ(RunProgram({"true"}), 0);
  EXPECT_EQ(RunProgram({"sh", "-c", "exit 3"}), 3);
  EXPECT_EQ(RunProgram({"sh", "-c", "kill -TERM $$"}), 128 + 15);
  EXPECT_EQ(RunProgram({"no-such-program-rlflow"}), 127);
  EXPECT_FALSE(HaveProgram("no-such-program-rlflow"));
  EXPECT_TRUE(HaveProgram("sh", "-c true"));
}

TEST(Subprocess, ArgumentsPassAsTheyAreWithoutAShell) {
  int status = -1;
  // A value with spaces, quotes and shell syntax is one argument, untouched.
  const std::string odd = "a b 'c' $(echo no) ; > x";
  EXPECT_EQ(RunProgramOutput({"printf", "%s|", odd, "two"}, &status), odd + "|two|");
  EXPECT_EQ(status, 0);
}

TEST(Subprocess, StreamsAndEnvironment) {
  const std::string dir = MakeTempDir("subprocess_test_");
  WriteFileAtomically(dir + "/in.txt", "from stdin\n");
  ProgramIo io;
  io.in = dir + "/in.txt";
  io.out = dir + "/out.txt";
  io.err = dir + "/err.txt";
  io.env["RLFLOW_TEST_VALUE"] = "set here";
  EXPECT_EQ(RunProgram({"sh", "-c", "cat; echo \"$RLFLOW_TEST_VALUE\"; echo oops >&2"}, io), 0);
  EXPECT_EQ(ReadFile(io.out), "from stdin\nset here\n");
  EXPECT_EQ(ReadFile(io.err), "oops\n");
  // stderr joins stdout by default.
  int status = -1;
  EXPECT_EQ(RunProgramOutput({"sh", "-c", "echo a; echo b >&2"}, &status), "a\nb\n");
  RemoveTree(dir);
}

TEST(Subprocess, PipedServer) {
  ProgramIo io;
  PipedProcess p = StartPiped({"cat"}, io);
  ASSERT_GT(p.pid, 0);
  const std::string line = "{\"op\":\"ping\"}\n";
  ASSERT_EQ(::write(p.to, line.data(), line.size()), static_cast<ssize_t>(line.size()));
  ::close(p.to);
  std::string got;
  char buf[64];
  for (ssize_t n; (n = ::read(p.from, buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
  ::close(p.from);
  EXPECT_EQ(got, line);
  EXPECT_EQ(testing::WaitProcess(p.pid), 0);
}

TEST(Subprocess, SplitArgs) {
  EXPECT_EQ(testing::SplitArgs("--a=1  --b='x y;z' ''"), (std::vector<std::string>{"--a=1", "--b=x y;z", ""}));
  EXPECT_TRUE(testing::SplitArgs("").empty());
}

}  // namespace
}  // namespace rlflow
