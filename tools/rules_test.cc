// //tools:rules as a user runs it: `reach` finds the rules of the
// checked-in database that apply to a zoo model, and none once the
// database itself is the base; `diff` of a database with itself finds no
// difference; a missing model is a one-line error.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/file_util.h"
#include "core/subprocess.h"

namespace rlflow {
namespace {

std::string Runfile(const std::string& path) { return std::string(std::getenv("TEST_SRCDIR")) + "/rlflow/" + path; }

TEST(RulesTool, ReachAndDiff) {
  const std::string db = Runfile("rules/default.rules.pb");
  const std::string tool = Runfile("tools/rules");
  int status = -1;
  std::string out = RunProgramOutput({tool, "reach", "--db=" + db, "squeezenet1_1"}, &status);
  ASSERT_EQ(status, 0) << out;
  // SqueezeNet's Relu after Concat, its convolutions sharing an input: some rules apply.
  const size_t at = out.find("squeezenet1_1: ");
  ASSERT_NE(at, std::string::npos) << out;
  int rules = 0, matches = 0;
  ASSERT_EQ(std::sscanf(out.c_str() + at, "squeezenet1_1: %d rules apply (%d matches)", &rules, &matches), 2) << out;
  EXPECT_GT(rules, 0);
  EXPECT_GE(matches, rules);
  // Relative to itself, no rule is new, so none applies.
  out = RunProgramOutput({tool, "reach", "--db=" + db, "--base=" + db, "squeezenet1_1"}, &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("0 rules not in --base"), std::string::npos) << out;
  EXPECT_NE(out.find("squeezenet1_1: 0 rules apply (0 matches)"), std::string::npos) << out;
  out = RunProgramOutput({tool, "diff", db, db}, &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("0 only in A, 0 only in B, 0 changed"), std::string::npos) << out;
  out = RunProgramOutput({tool, "reach", "--db=" + db, "/no/such/model.onnx"}, &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("error: "), std::string::npos) << out;
}

}  // namespace
}  // namespace rlflow
