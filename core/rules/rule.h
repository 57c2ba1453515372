#pragma once
// Rules: pattern graphs over the op registry's operators with symbolic
// shapes, plus database I/O, instantiation and printing.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/graph.h"
#include "core/rules/rules.pb.h"

namespace rlflow {

constexpr char kRuleDatabaseMagic[] = "rlflow.rules";
constexpr char kCandidateSetMagic[] = "rlflow.candidates";
constexpr char kGraphShardMagic[] = "rlflow.graphs";
// 2: attribute variables (attribute-generic rules). 3: constants with
// symbolic values (Constant.dim_values). 4: Div (and Gemm) in patterns; a
// rule that divides by one of its inputs holds where that input has no zero
// element, and matchers must check it (DivisorInputs). 5: written rules
// (Rule.written_name, Rule.tolerance) and floating constants
// (Constant.float_values, fill_shape/fill_value). 6: inputs bounded above
// (TensorVar.bounded_above, upper_bound), a premise matchers must check
// (UpperBounds). 7: integer attributes given by a dimension expression
// (Attribute.dim: a depthwise conv's group=c), which matchers must check at
// the match's binding (AttributeAt). 8: filled constants whose value is
// divided by a dimension expression (Constant.fill_divisor: a channel
// mean's weights 1/c), which matchers must evaluate at the match's binding
// (FillValue). Files of versions 4 to 7 are read as they are (subsets).
constexpr uint32_t kRuleFormatVersion = 8;
constexpr uint32_t kOldestRuleFormatVersion = 4;

using SymbolBinding = std::map<std::string, int64_t>;
// Attribute variable -> value.
using AttrBinding = std::map<std::string, Attribute>;

// ---- symbolic dimensions ----
rules::Dim DimConst(int64_t value);
rules::Dim DimSymbol(const std::string& symbol);
rules::Dim DimAdd(const rules::Dim& a, const rules::Dim& b);
rules::Dim DimScale(const rules::Dim& a, int64_t factor);
// The product of two symbols, a term whose symbol is the monomial "a*b"
// (e.g. the features of a multi-head projection, heads*head_dim). A product
// is never bound from a shape by itself: its factors are bound elsewhere
// (another input, or a symbolic constant such as a Reshape target).
rules::Dim DimProduct(const std::string& a, const std::string& b);
inline bool IsProductSymbol(const std::string& symbol) { return symbol.find('*') != std::string::npos; }
// The factors of a term's symbol ("c*w" -> c, w; "n" -> n).
std::vector<std::string> SymbolFactors(const std::string& symbol);
// A term symbol's value at `binding`; nullopt if a factor is unbound.
std::optional<int64_t> EvalSymbol(const std::string& symbol, const SymbolBinding& binding);
// A plain symbol: one term, coefficient 1, no constant, not a product.
bool DimIsPlainSymbol(const rules::Dim& d);
// a / 2 if every coefficient and the constant are even.
std::optional<rules::Dim> DimHalf(const rules::Dim& a);
bool DimEqual(const rules::Dim& a, const rules::Dim& b);
bool DimIsConst(const rules::Dim& a, int64_t value);
int64_t EvalDim(const rules::Dim& dim, const SymbolBinding& binding);
std::string DimToString(const rules::Dim& dim);
Shape EvalShape(const rules::TensorVar& var, const SymbolBinding& binding);
std::string ShapeToString(const rules::TensorVar& var);
// A constant's integer values at `binding` (its dim_values evaluated, or
// its int_values); throws if a symbol is unbound.
std::vector<int64_t> ConstantValues(const rules::Constant& c, const SymbolBinding& binding);
inline bool IsSymbolicConstant(const rules::Constant& c) { return c.dim_values_size() > 0; }
inline bool IsFloatConstant(const rules::Constant& c) { return c.float_values_size() > 0; }
inline bool IsFilledConstant(const rules::Constant& c) { return c.fill_shape_size() > 0; }
// A filled constant's element value at `binding` (fill_value, divided by
// fill_divisor where it has one); throws if a symbol is unbound or the
// divisor is not positive.
double FillValue(const rules::Constant& c, const SymbolBinding& binding);
// A constant's data at `binding`: integer constants as int64; floating ones
// (float_values, fill) in `float_dtype` (float32 when undefined; float64
// for checks).
TensorData ConstantData(const rules::Constant& c, const SymbolBinding& binding, DType float_dtype = DType::kUndefined);
// Every symbol a rule's inputs use.
std::vector<std::string> RuleSymbols(const rules::Rule& rule);
// Rule inputs that a Div on either side divides by (or a Reciprocal takes
// the reciprocal of): the rule is proved
// where they have no zero element, so it applies only where each is a
// constant without zeros.
std::vector<int> DivisorInputs(const rules::Rule& rule);
// The rule's inputs bounded above (TensorVar.bounded_above): input index ->
// bound. The rule holds where each is a constant with every element at
// most its bound; matchers check it, and random inputs for checking a
// rule are clamped to it.
std::map<int, double> UpperBounds(const rules::Rule& rule);

// A rule attribute as an IR attribute; throws for an attribute variable
// and for a dimension expression (AttributeAt).
Attribute AttributeFromProto(const rules::Attribute& a);
inline bool IsDimAttribute(const rules::Attribute& a) { return a.value_case() == rules::Attribute::kDim; }
// A rule attribute as an IR attribute at a symbol binding: a dimension
// expression evaluated there (throws naming an unbound symbol), any other
// as AttributeFromProto.
Attribute AttributeAt(const rules::Attribute& a, const SymbolBinding& binding);
// An IR attribute as a rule attribute called `name`.
rules::Attribute AttributeToProto(const std::string& name, const Attribute& a);
inline bool IsAttributeVariable(const rules::Attribute& a) { return a.value_case() == rules::Attribute::kVar; }
// The attribute variables a rule uses (sorted, unique).
std::vector<std::string> AttributeVariables(const rules::Rule& rule);
// The rule with every attribute variable replaced by its value in `values`
// (the id is kept); throws rlflow::Error naming an unbound variable.
rules::Rule BindAttributes(const rules::Rule& rule, const AttrBinding& values);
// The symbol and attribute values of a proved instance.
SymbolBinding InstanceSymbols(const rules::ShapeInstance& instance);
AttrBinding InstanceAttributes(const rules::ShapeInstance& instance);

// ---- patterns ----
// A Graph for one side at concrete shapes: graph inputs are the rule's
// inputs in order (named like them), constants become initializers, and the
// graph outputs are the pattern's outputs. Shapes are inferred (and checked).
// `dtype` overrides the inputs' element type (e.g. float64 for checks).
Graph InstantiatePattern(const rules::Rule& rule, const rules::Pattern& pattern, const SymbolBinding& binding,
                         DType dtype = DType::kUndefined);
// Expression text of every node's output(s), e.g. "Relu(X1)" (nodes of
// several outputs without the "#k" suffix); equal texts compute equal values.
std::vector<std::string> NodeExpressions(const rules::Rule& rule, const rules::Pattern& pattern);
// "MatMul(MatMul(A,B),C)"; several outputs print as "(X, Y)".
std::string PatternToString(const rules::Rule& rule, const rules::Pattern& pattern);
// "source => target".
std::string RuleToString(const rules::Rule& rule);
int PatternOpCount(const rules::Pattern& pattern);

// Canonical text of a rule, the same for rules equal up to renaming of
// inputs and up to swapping source and target.
std::string CanonicalForm(const rules::Rule& rule);
// Canonical text of one side with inputs renamed by first use.
std::string CanonicalPattern(const rules::Rule& rule, const rules::Pattern& pattern);
// Stable id: 12 hex digits of the canonical form's hash.
std::string RuleId(const rules::Rule& rule);

// Checks references, arity and operators against the registry; throws
// rlflow::Error naming the rule.
void ValidateRule(const rules::Rule& rule);
// The lowest default-domain opset that has every operator of both sides
// (OpDef::since_opset): a model written at a lower opset cannot hold the
// side this rule produces.
int64_t RuleOpset(const rules::Rule& rule);
// Whether every operator of both sides runs on `target` (OpDef::RunsOn): a
// rule is used in both directions, so neither side may hold an operator
// the target lacks.
bool RuleRunsOn(const rules::Rule& rule, const std::string& target);
// One flag per rule (Matcher's `enabled`): it runs on `target` and needs no
// opset above `max_opset`.
std::vector<char> RulesEnabledFor(const std::vector<rules::Rule>& rules, const std::string& target, int64_t max_opset);

// ---- files ----
std::string SerializeDeterministic(const google::protobuf::Message& message);
// Reads a rules-format file; checks magic and version. `what` names it.
void ReadRulesFile(const std::string& path, const std::string& magic, google::protobuf::Message* message,
                   const std::string& what);
rules::RuleDatabase LoadRuleDatabase(const std::string& path);  // read + validate every rule
// The database a binary was given (`path`, relative to the user's directory,
// ResolveUserPath) or, when `path` is empty, the checked-in
// rules/default.rules.pb among the runfiles (FindRunfile with `argv0`).
// Throws Error when that is not found.
std::string RuleDatabasePath(const std::string& path, const std::string& argv0);
// The same from the file's bytes (`path` names it in errors).
rules::RuleDatabase ParseRuleDatabase(const std::string& bytes, const std::string& path);
// The database's rules in order (what Matcher takes).
std::vector<rules::Rule> RuleList(const rules::RuleDatabase& db);
void SaveMessageAtomically(const google::protobuf::Message& message, const std::string& path);

}  // namespace rlflow
