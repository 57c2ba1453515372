// Fuzz target: the rule-database reader (protobuf parse, magic and version,
// validation of every rule) and the matcher compiling the rules and matching
// them on a small graph.
#include <string>
#include <vector>

#include "core/error.h"
#include "core/graph_builder.h"
#include "core/rewrite/matcher.h"
#include "core/rules/rule.h"
#include "tools/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rlflow;
  static const Graph* graph = [] {
    GraphBuilder b(1);
    ValueId x = b.Input("x", {1, 4, 6, 6});
    ValueId c = b.Op("Conv", {x, b.Weight("w", {4, 4, 3, 3}, 0.3f)}, {{"pads", Attribute::Ints({1, 1, 1, 1})}});
    ValueId r = b.Op("Relu", {b.Op("Mul", {c, b.Uniform("s", {4, 1, 1}, 0.5f, 1.5f)})});
    return new Graph(b.Build({b.Op("Add", {r, x})}));
  }();
  try {
    rules::RuleDatabase db = ParseRuleDatabase(std::string(reinterpret_cast<const char*>(data), size), "fuzz input");
    Matcher m(RuleList(db));
    for (const Match& match : m.FindAll(*graph)) {
      try {
        m.Apply(*graph, match);
      } catch (const Error&) {
      }
    }
  } catch (const std::exception&) {
  }
  return 0;
}
