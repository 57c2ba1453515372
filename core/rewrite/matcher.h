#pragma once
// Rule matching and rewriting on graphs.
//
// A match binds a rule side's pattern nodes to graph nodes and its inputs to
// graph values so that operators, attributes (effective values, defaults
// included), constant operands and shapes (one consistent binding of the
// rule's shape symbols) agree, commutative operands in either order, and no
// intermediate value of the matched subgraph is used outside it (or is a
// graph output). Opaque nodes never match, so rewrites never cross them.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/graph.h"
#include "core/rules/rule.h"

namespace rlflow {

struct Match {
  int rule = -1;          // index into the rule list given to the matcher
  bool reverse = false;   // true: target -> source
  std::vector<NodeId> nodes;     // per pattern node of the matched side
  std::vector<ValueId> inputs;   // per rule input
  SymbolBinding symbols;
};

class Matcher {
 public:
  // `both_directions`: also match target patterns (rules are equalities).
  Matcher(const std::vector<rules::Rule>& rules, bool both_directions = true);

  // Every match of every rule in `graph`, in a deterministic order.
  std::vector<Match> FindAll(const Graph& graph) const;
  // Matches of one rule side.
  void FindRule(const Graph& graph, int rule, bool reverse, std::vector<Match>* out) const;

  // Applies a match: builds the other side, redirects uses of the matched
  // outputs, removes dead nodes and re-infers shapes. Throws rlflow::Error if
  // the result is not a valid graph (a cycle, a shape change).
  Graph Apply(const Graph& graph, const Match& match) const;

  const std::vector<rules::Rule>& rules() const { return rules_; }

 private:
  static std::map<std::string, std::vector<NodeId>> OpIndex(const Graph& graph);
  void FindRule(const Graph& graph, const std::vector<std::vector<std::pair<NodeId, int>>>& consumers,
                const std::map<std::string, std::vector<NodeId>>& by_op, int rule, bool reverse,
                std::vector<Match>* out) const;

  std::vector<rules::Rule> rules_;
  bool both_;
};

}  // namespace rlflow
