#pragma once
// The one list splitter: every comma-separated flag (--model=a,b,
// --passes=dce, cse, --taus=...) is read with it, the same way.
#include <string>
#include <vector>

namespace rlflow {

// "a, b,,c " -> {"a", "b", "c"}: items split at `separator`, spaces and
// tabs around each trimmed, empty items dropped.
std::vector<std::string> SplitList(const std::string& list, char separator = ',');

}  // namespace rlflow
