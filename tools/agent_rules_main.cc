// What rule database a trained agent acts on.
//
//   ./bazelw run //tools:agent_rules -- --agent=PATH [--db=PATH]
//     PATH: a policy (agent.pt of //agents:train, agents/zoo_agent.pt) or a
//     directory of //world_model:dream (world_model/agent). Prints its rule
//     count, whether it records its rules' ids, and how it maps onto the
//     database: the database's rules it does not know (never its actions)
//     and its rules the database lacks.
//   ./bazelw run //tools:agent_rules -- --agent=PATH --stamp=DB
//     For an agent saved before agents recorded their rule ids: records the
//     ids of DB, the database it was trained on (same rule count, checked),
//     so that it acts by rule id on databases regenerated or grown since.
//     The weights are unchanged; the file is rewritten atomically.
#include <gflags/gflags.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "agents/gnn.h"
#include "core/error.h"
#include "core/file_util.h"
#include "core/rules/rule.h"
#include "world_model/controller_episode.h"
#include "world_model/train.h"
#include "world_model/world_model.h"

DEFINE_string(agent, "", "a policy file (agent.pt) or a world-model agent directory (controller.pt, world_model.pt)");
DEFINE_string(db, "rules/default.rules.pb", "the rule database to map onto (default: the checked-in one)");
DEFINE_string(stamp, "", "record this database's rule ids in an agent that records none (the one it was trained on)");

namespace rlflow {
namespace {

std::vector<std::string> DatabaseIds(const std::string& flag_path) {
  const std::string path =
      flag_path == "rules/default.rules.pb" && FileExists(flag_path) ? flag_path : ResolveUserPath(flag_path);
  const rules::RuleDatabase db = LoadRuleDatabase(path);
  std::vector<std::string> ids;
  for (const auto& r : db.rules()) ids.push_back(r.id());
  return ids;
}

void PrintMapping(const std::vector<std::string>& own, const std::vector<std::string>& database) {
  if (own.empty()) {
    std::printf("rule ids:  not recorded (acts only on a database of exactly its rule count, by position)\n");
    return;
  }
  const std::vector<int> in_agent = agents::IndexByRuleId(database, own),
                         in_database = agents::IndexByRuleId(own, database);
  const auto absent = [](const std::vector<int>& v) { return static_cast<int>(std::count(v.begin(), v.end(), -1)); };
  const int unknown = absent(in_agent), missing = absent(in_database);
  std::printf("rule ids:  recorded\n");
  std::printf("database:  %zu rules; %d the agent does not know (never its actions), %d of its rules missing\n",
              database.size(), unknown, missing);
}

int Run() {
  if (FLAGS_agent.empty()) Fail("--agent is required (a policy file or a world-model agent directory)");
  const std::string agent = ResolveUserPath(FLAGS_agent);
  const bool stamping = !FLAGS_stamp.empty();
  const std::vector<std::string> database = DatabaseIds(stamping ? FLAGS_stamp : FLAGS_db);
  if (FileExists(agent + "/world_model.pt")) {
    const std::string path = agent + "/world_model.pt";
    world_model::WorldModel model = world_model::LoadWorldModel(path);
    const world_model::WorldModelOptions& o = model->options();
    std::printf("agent:     %s (world model and controller)\n", agent.c_str());
    std::printf("rules:     %d (vocabulary of %zu rule actions)\n", o.rule_actions / 2, o.vocabulary.size());
    if (stamping) {
      if (!o.rule_ids.empty()) Fail("'", path, "' already records its rule ids");
      model->SetRuleIds(database);  // checks the count
      torch::serialize::InputArchive a;
      a.load_from(path);
      torch::Tensor epoch;
      const int e = a.try_read("epoch", epoch) ? static_cast<int>(epoch.item<int64_t>()) : 0;
      world_model::SaveWorldModel(*model, e, path);
      world_model::LoadDreamAgent(agent, database);  // loads as it will be used
      std::printf("stamped:   %s with the ids of %s\n", path.c_str(), FLAGS_stamp.c_str());
      return 0;
    }
    PrintMapping(o.rule_ids, database);
    return 0;
  }
  std::printf("agent:     %s (policy)\n", agent.c_str());
  if (stamping) {
    agents::Policy policy = agents::LoadPolicy(agent, database);  // no ids: the count must match
    if (!policy->rule_ids().empty()) Fail("'", agent, "' already records its rule ids");
    policy->SetRuleIds(database);
    agents::SavePolicy(*policy, agent);
    agents::LoadPolicy(agent, database);
    std::printf("stamped:   %s with the ids of %s\n", agent.c_str(), FLAGS_stamp.c_str());
    return 0;
  }
  // A policy recording no ids loads only at its own size: try the database,
  // and report the count from the error otherwise.
  try {
    agents::Policy policy = agents::LoadPolicy(agent, database);
    std::printf("rules:     %d\n", policy->rule_actions() / 2);
    PrintMapping(policy->rule_ids(), database);
  } catch (const Error& e) {
    std::printf("database:  cannot act on it: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace rlflow

int main(int argc, char** argv) {
  gflags::SetUsageMessage("what rule database a trained agent acts on (see tools/agent_rules_main.cc)");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  try {
    return rlflow::Run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
