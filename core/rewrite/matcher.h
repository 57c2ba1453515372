#pragma once
// Rule matching and rewriting on graphs.
//
// A match binds a rule side's pattern nodes to graph nodes and its inputs to
// graph values so that operators, attributes (effective values, defaults
// included), constant operands and shapes (one consistent binding of the
// rule's shape symbols) agree, commutative operands in either order, and no
// intermediate value of the matched subgraph is used outside it (or is a
// graph output). Opaque nodes never match, so rewrites never cross them.
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/graph.h"
#include "core/rules/rule.h"

namespace rlflow {

struct Match {
  int rule = -1;                // index into the rule list given to the matcher
  bool reverse = false;         // true: target -> source
  std::vector<NodeId> nodes;    // per pattern node of the matched side
  std::vector<ValueId> inputs;  // per rule input
  SymbolBinding symbols;
  AttrBinding attrs;  // attribute variables (attribute-generic rules)
};

// A pattern node prepared for matching.
struct CompiledNode {
  const struct OpDef* def = nullptr;             // registry entry (null: unknown op, never matches)
  AttributeMap attrs;                            // the pattern's attributes (not variables)
  std::map<std::string, std::string> attr_vars;  // attribute name -> variable
  std::map<std::string, rules::Dim> attr_dims;   // attribute name -> dimension expression (checked once bound)
  // The pattern node's shape, copied out of the rule protos so that the
  // quick check of an anchor touches only this (dense) structure.
  std::string op;
  int num_outputs = 1;
  struct Operand {
    int kind = 0;    // rules::Ref::KindCase
    int node = -1;   // kNode: pattern node
    int output = 0;  // kNode: its output
  };
  std::vector<Operand> operands;
};

// What Apply changed, for incremental matching of the result.
struct ApplyInfo {
  std::vector<NodeId> node_map;    // parent node id -> result node id (kNoNode: removed)
  std::vector<ValueId> value_map;  // parent value id -> result value id (kNoValue: removed)
  std::vector<NodeId> changed;     // result nodes that are new or read a value the rewrite touched
};

class Matcher {
 public:
  // `both_directions`: also match target patterns (rules are equalities).
  // `enabled` (one flag per rule; empty: all): rules whose flag is 0 never
  // match (a rule the target cannot run, or one needing a newer opset),
  // but keep their index, so that rule numbers (the agents' actions) are
  // those of the database whatever is left out.
  Matcher(const std::vector<rules::Rule>& rules, bool both_directions = true, std::vector<char> enabled = {});

  // Every match of every rule in `graph`, in a deterministic order.
  std::vector<Match> FindAll(const Graph& graph) const;
  // Matches of one rule side.
  void FindRule(const Graph& graph, int rule, bool reverse, std::vector<Match>* out) const;

  // Applies a match: builds the other side, redirects uses of the matched
  // outputs, removes dead nodes and re-infers shapes. Throws rlflow::Error if
  // the result is not a valid graph (a cycle, a shape change).
  Graph Apply(const Graph& graph, const Match& match, ApplyInfo* info = nullptr) const;
  // Apply for a search's hot path: a rewrite whose result is not a valid
  // graph (it would make a cycle, or change an output's type) is refused as
  // a value, nullopt with the reason in `*why` when given, not thrown.
  // Throws only for a rule that cannot be built at all (an attribute the
  // match does not bind, an operator the registry lacks, a shape rule that
  // fails: errors the search cannot fix).
  std::optional<Graph> TryApply(const Graph& graph, const Match& match, ApplyInfo* info = nullptr,
                                std::string* why = nullptr) const;

  // The matches of `child` = Apply(parent, m, &info), computed from the
  // parent's: only anchors near the rewrite are searched again. Gives what
  // FindAll(child) gives (same order); checked by matcher_test's
  // Matcher.IncrementalMatchingEqualsFullMatching and engine_test.
  std::vector<Match> FindAllAfter(const Graph& child, const std::vector<Match>& parent_matches,
                                  const ApplyInfo& info) const;

  // The graph of the other side alone, for costing a rewrite without
  // applying it: graph input / initializer k is the match's input k (weights
  // shared, not copied), its outputs replace the matched outputs in order.
  // Throws rlflow::Error if shapes do not infer.
  //
  // `constants` (optional, one entry per match input): data for inputs that
  // are constant where the graph computes them from weights (nullptr: the
  // input as in the graph), e.g. to time the side with weight-only work folded.
  Graph Replacement(const Graph& graph, const Match& match,
                    const std::vector<TensorDataPtr>* constants = nullptr) const;
  // The same for the matched side, built from the rule: what the match
  // computes, alone (its nodes have the matched nodes' effective attributes).
  Graph Matched(const Graph& graph, const Match& match, const std::vector<TensorDataPtr>* constants = nullptr) const;
  // The graph values of the matched side's outputs, in the order of the
  // outputs of Replacement and Matched (the values a rewrite replaces).
  std::vector<ValueId> MatchedOutputs(const Graph& graph, const Match& match) const;

  const std::vector<rules::Rule>& rules() const { return rules_; }
  // Whether rule `rule` may match (the constructor's `enabled`).
  bool enabled(int rule) const { return enabled_.empty() || enabled_.at(rule) != 0; }

 private:
  Graph Side(const Graph& graph, const Match& match, bool replacement,
             const std::vector<TensorDataPtr>* constants) const;
  struct GraphIndex {
    std::map<std::string, std::vector<NodeId>> by_op;
    std::vector<std::vector<std::pair<NodeId, int>>> consumers;
    std::vector<int> topo_pos;
  };
  static GraphIndex Index(const Graph& graph);
  enum class RegionMode {
    kAll,                // no restriction
    kAnchorInside,       // the anchor node in the region
    kOtherOutputInside,  // the anchor outside, the second output's node inside
  };
  // `anchor_nodes`: the graph nodes to try as the anchor (default: every
  // node of the anchor's op), in ascending order.
  void FindRule(const Graph& graph, const GraphIndex& index, int rule, bool reverse, std::vector<Match>* out,
                const std::vector<char>* region = nullptr, RegionMode mode = RegionMode::kAll,
                const std::vector<NodeId>* anchor_nodes = nullptr) const;
  // The graph node a match is anchored at (its pattern's first output node).
  NodeId Anchor(const Match& m) const;

  std::vector<rules::Rule> rules_;
  std::vector<char> enabled_;                                       // per rule (empty: all)
  std::vector<std::array<std::vector<CompiledNode>, 2>> compiled_;  // per rule: source, target
  std::vector<std::array<bool, 2>> connected_;                      // per rule: source, target
  std::vector<std::array<bool, 2>> matchable_;   // per rule side: has nodes, and every output is a node's
  std::vector<std::array<int, 2>> anchor_node_;  // per rule side: the first output's pattern node (-1: not matchable)
  std::vector<std::vector<int>> divisors_;       // per rule: inputs a Div divides by (DivisorInputs)
  std::vector<std::map<int, double>> bounds_;    // per rule: inputs bounded above (UpperBounds)
  // The ops of the rule sides' anchors, and per op the rule sides anchored
  // at it, grouped by what the anchor's quick check reads (QuickKey).
  struct AnchorGroup {
    int rule;  // a representative side
    bool reverse;
    std::vector<std::pair<int, bool>> sides;  // (rule, reverse), the representative included
  };
  std::vector<std::string> anchor_ops_;
  std::vector<std::vector<AnchorGroup>> anchor_groups_;
  static std::string QuickKey(const std::vector<CompiledNode>& compiled, int pn);
  bool both_;
};

}  // namespace rlflow
