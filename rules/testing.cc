#include "rules/testing.h"

#include <gtest/gtest.h>

#include "core/file_util.h"

namespace rlflow::testing {

std::string DefaultRulesPath() { return FindRunfile("rules/default.rules.pb"); }

const rules::RuleDatabase& DefaultRules() {
  static const rules::RuleDatabase db = LoadRuleDatabase(DefaultRulesPath());
  return db;
}

std::vector<rules::Rule> AllRules() { return {DefaultRules().rules().begin(), DefaultRules().rules().end()}; }

std::vector<rules::Rule> RulesById(const std::vector<std::string>& ids) {
  std::vector<rules::Rule> out;
  for (const auto& id : ids) out.push_back(RuleById(id));
  return out;
}

rules::Rule RuleById(const std::string& id) {
  for (const auto& r : DefaultRules().rules())
    if (r.id() == id) return r;
  ADD_FAILURE() << "rule " << id << " not in the database";
  return {};
}

}  // namespace rlflow::testing
