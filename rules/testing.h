#pragma once
// Test helpers: the checked-in rule database as a runfile.
#include <string>
#include <vector>

#include "core/rules/rule.h"

namespace rlflow::testing {

// Path of rules/default.rules.pb in the test's runfiles.
std::string DefaultRulesPath();
// The database, loaded once.
const rules::RuleDatabase& DefaultRules();
// Every rule of the database, in order (what a Matcher takes).
std::vector<rules::Rule> AllRules();
// Rules by id (a test failure for an id not in the database).
std::vector<rules::Rule> RulesById(const std::vector<std::string>& ids);
rules::Rule RuleById(const std::string& id);

}  // namespace rlflow::testing
