// //tools:agent_rules as a user runs it: on the checked-in agents it says
// they record their rules' ids and how they map onto the checked-in
// database; --stamp records the database's ids in a policy saved without
// them (then it acts by rule id), and refuses to stamp twice.
#include <gtest/gtest.h>

#include <string>

#include "agents/gnn.h"
#include "core/file_util.h"
#include "core/subprocess.h"
#include "rules/testing.h"

namespace rlflow {
namespace {

TEST(AgentRulesTool, ReportsAndStamps) {
  const std::string db = FindRunfile("rules/default.rules.pb");
  const std::string tool = FindRunfile("tools/agent_rules");
  int status = -1;
  for (const std::string& agent : {FindRunfile("agents/zoo_agent.pt"), FindRunfile("world_model/agent")}) {
    const std::string out = RunProgramOutput({tool, "--agent=" + agent, "--db=" + db}, &status);
    EXPECT_EQ(status, 0) << out;
    EXPECT_NE(out.find("rule ids:  recorded"), std::string::npos) << out;
    EXPECT_NE(out.find(", 0 of its rules missing"), std::string::npos) << out;
  }
  // A policy saved without ids, for the checked-in database's rules.
  const std::vector<std::string> ids = agents::RuleIds(testing::AllRules());
  const std::string path = MakeTempDir("agent_rules_") + "/agent.pt";
  agents::Policy legacy(2 * static_cast<int>(ids.size()), agents::GnnOptions{8, 1});
  agents::SavePolicy(*legacy, path);
  std::string out = RunProgramOutput({tool, "--agent=" + path, "--db=" + db}, &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("rule ids:  not recorded"), std::string::npos) << out;
  out = RunProgramOutput({tool, "--agent=" + path, "--stamp=" + db}, &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_EQ(agents::LoadPolicy(path, ids)->rule_ids(), ids);
  out = RunProgramOutput({tool, "--agent=" + path, "--stamp=" + db}, &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("already records its rule ids"), std::string::npos) << out;
  out = RunProgramOutput({tool}, &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("error: --agent is required"), std::string::npos) << out;
}

}  // namespace
}  // namespace rlflow
