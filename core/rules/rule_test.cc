// Rule format: symbolic dimensions, printing, canonical forms, database I/O.
#include "core/rules/rule.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <climits>
#include <cstdlib>
#include <fstream>

#include "core/error.h"
#include "core/file_util.h"

namespace rlflow {
namespace {

rules::Rule Assoc(const char* a, const char* b, const char* c) {
  rules::Rule r;
  auto var = [&](const char* name, const char* s0, const char* s1) {
    rules::TensorVar* v = r.add_inputs();
    v->set_name(name);
    v->set_dtype(1);
    *v->add_shape() = DimSymbol(s0);
    *v->add_shape() = DimSymbol(s1);
  };
  var(a, "m", "k");
  var(b, "k", "j");
  var(c, "j", "l");
  auto node = [](rules::Pattern* p, rules::Ref x, rules::Ref y) {
    rules::Node* n = p->add_nodes();
    n->set_op("MatMul");
    n->set_num_outputs(1);
    *n->add_inputs() = x;
    *n->add_inputs() = y;
    rules::Ref out;
    out.mutable_node()->set_node(p->nodes_size() - 1);
    return out;
  };
  auto in = [](int i) {
    rules::Ref x;
    x.set_input(i);
    return x;
  };
  *r.mutable_source()->add_outputs() = node(r.mutable_source(), node(r.mutable_source(), in(0), in(1)), in(2));
  *r.mutable_target()->add_outputs() = node(r.mutable_target(), in(0), node(r.mutable_target(), in(1), in(2)));
  r.set_id(RuleId(r));
  return r;
}

// Attribute variables: listed, bound, printed, refused unbound.
TEST(Rule, AttributeVariables) {
  rules::Rule r;
  rules::TensorVar* x = r.add_inputs();
  x->set_name("X");
  x->set_dtype(1);
  for (const char* d : {"n", "c", "h", "w"}) *x->add_shape() = DimSymbol(d);
  for (rules::Pattern* p : {r.mutable_source(), r.mutable_target()}) {
    rules::Node* n = p->add_nodes();
    n->set_op("MaxPool");
    n->set_num_outputs(1);
    n->add_inputs()->set_input(0);
    for (const char* a : {"kernel_shape", "pads", "strides"}) {
      rules::Attribute* attr = n->add_attrs();
      attr->set_name(a);
      attr->set_var(a);
    }
    p->add_outputs()->mutable_node()->set_node(0);
  }
  r.set_id(RuleId(r));
  EXPECT_EQ(AttributeVariables(r), (std::vector<std::string>{"kernel_shape", "pads", "strides"}));
  EXPECT_NE(RuleToString(r).find("MaxPool[kernel_shape=$kernel_shape,pads=$pads,strides=$strides](X)"),
            std::string::npos)
      << RuleToString(r);
  EXPECT_THROW(InstantiatePattern(r, r.source(), {{"n", 1}, {"c", 1}, {"h", 4}, {"w", 4}}), Error);
  EXPECT_THROW(ValidateRule(r), Error);  // no proved instance binds the variables
  EXPECT_THROW(BindAttributes(r, {{"pads", Attribute::Ints({0, 0, 0, 0})}}), Error);  // kernel_shape unbound
  AttrBinding values = {{"kernel_shape", Attribute::Ints({3, 3})},
                        {"pads", Attribute::Ints({0, 1, 1, 0})},
                        {"strides", Attribute::Ints({2, 2})}};
  rules::Rule bound = BindAttributes(r, values);
  EXPECT_TRUE(AttributeVariables(bound).empty());
  Graph g = InstantiatePattern(bound, bound.source(), {{"n", 1}, {"c", 1}, {"h", 5}, {"w", 5}});
  EXPECT_EQ(g.value(g.outputs()[0]).type.shape, (Shape{1, 1, 2, 2}));
  rules::ShapeInstance* inst = r.mutable_provenance()->add_proved_on();
  for (const auto& [sym, v] : SymbolBinding{{"n", 1}, {"c", 1}, {"h", 5}, {"w", 5}}) {
    auto* b = inst->add_bindings();
    b->set_symbol(sym);
    b->set_value(v);
  }
  for (const auto& [name, v] : values) *inst->add_attrs() = AttributeToProto(name, v);
  EXPECT_EQ(InstanceAttributes(*inst).at("pads").ints, (std::vector<int64_t>{0, 1, 1, 0}));
  ValidateRule(r);
}

TEST(Rule, DimensionArithmetic) {
  rules::Dim two_c = DimAdd(DimSymbol("c"), DimSymbol("c"));
  EXPECT_EQ(DimToString(two_c), "2c");
  EXPECT_TRUE(DimEqual(*DimHalf(two_c), DimSymbol("c")));
  EXPECT_FALSE(DimHalf(DimSymbol("c")).has_value());
  EXPECT_EQ(EvalDim(DimAdd(two_c, DimConst(3)), {{"c", 5}}), 13);
  EXPECT_THROW(EvalDim(DimSymbol("q"), {{"c", 5}}), Error);
}

// Constants with symbolic values (Split sizes [j, l]) evaluate at a binding
// and print as expressions.
TEST(Rule, SymbolicConstants) {
  rules::Constant c;
  c.set_dtype(7);
  c.add_dims(2);
  *c.add_dim_values() = DimSymbol("j");
  *c.add_dim_values() = DimAdd(DimSymbol("l"), DimConst(1));
  EXPECT_TRUE(IsSymbolicConstant(c));
  EXPECT_EQ(ConstantValues(c, {{"j", 12}, {"l", 20}}), (std::vector<int64_t>{12, 21}));
  EXPECT_THROW(ConstantValues(c, {{"j", 12}}), Error);
  rules::Constant plain;
  plain.add_int_values(4);
  EXPECT_FALSE(IsSymbolicConstant(plain));
  EXPECT_EQ(ConstantValues(plain, {}), (std::vector<int64_t>{4}));
}

TEST(Rule, PrintsReadably) {
  EXPECT_EQ(RuleToString(Assoc("A", "B", "C")), "MatMul(MatMul(A,B),C) => MatMul(A,MatMul(B,C))");
}

TEST(Rule, CanonicalFormIgnoresNamesAndDirection) {
  rules::Rule a = Assoc("A", "B", "C"), b = Assoc("P", "Q", "R");
  EXPECT_EQ(CanonicalForm(a), CanonicalForm(b));
  rules::Rule swapped = a;
  *swapped.mutable_source() = a.target();
  *swapped.mutable_target() = a.source();
  EXPECT_EQ(CanonicalForm(swapped), CanonicalForm(a));
  EXPECT_EQ(RuleId(swapped), RuleId(a));
}

TEST(Rule, InstantiatesAtConcreteShapes) {
  rules::Rule r = Assoc("A", "B", "C");
  Graph g = InstantiatePattern(r, r.source(), {{"m", 2}, {"k", 3}, {"j", 4}, {"l", 5}});
  EXPECT_EQ(g.inputs().size(), 3u);
  EXPECT_EQ(g.value(g.outputs()[0]).type.shape, (Shape{2, 5}));
  ValidateRule(r);
}

std::string TempPath(const std::string& name) {
  const char* t = std::getenv("TEST_TMPDIR");
  return std::string(t ? t : "/tmp") + "/" + name;
}

std::string ErrorOf(const std::string& path) {
  try {
    LoadRuleDatabase(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Rule, DatabaseRoundTripAndBadFiles) {
  rules::RuleDatabase db;
  db.set_magic(kRuleDatabaseMagic);
  db.set_format_version(kRuleFormatVersion);
  *db.add_rules() = Assoc("A", "B", "C");
  std::string path = TempPath("db.pb");
  SaveMessageAtomically(db, path);
  rules::RuleDatabase back = LoadRuleDatabase(path);
  ASSERT_EQ(back.rules_size(), 1);
  EXPECT_EQ(SerializeDeterministic(back), SerializeDeterministic(db));

  EXPECT_NE(ErrorOf(TempPath("missing.pb")).find("cannot read rule database"), std::string::npos);
  std::string bytes = SerializeDeterministic(db);
  std::string truncated = TempPath("truncated.pb");
  std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() - 7);
  EXPECT_NE(ErrorOf(truncated).find("corrupt or truncated"), std::string::npos) << ErrorOf(truncated);
  std::string empty = TempPath("empty.pb");
  std::ofstream(empty).close();
  EXPECT_NE(ErrorOf(empty).find("is empty"), std::string::npos);

  rules::RuleDatabase wrong_version = db;
  wrong_version.set_format_version(99);
  SaveMessageAtomically(wrong_version, TempPath("v99.pb"));
  EXPECT_NE(ErrorOf(TempPath("v99.pb")).find("format version 99"), std::string::npos);
  rules::RuleDatabase wrong_magic = db;
  wrong_magic.set_magic("something else");
  SaveMessageAtomically(wrong_magic, TempPath("magic.pb"));
  EXPECT_NE(ErrorOf(TempPath("magic.pb")).find("is not a rlflow.rules file"), std::string::npos);
  rules::RuleDatabase bad_op = db;
  bad_op.mutable_rules(0)->mutable_source()->mutable_nodes(0)->set_op("FrobnicateOp");
  SaveMessageAtomically(bad_op, TempPath("badop.pb"));
  EXPECT_NE(ErrorOf(TempPath("badop.pb")).find("FrobnicateOp"), std::string::npos);

  // A corrupt output count is refused before anything is built (2^31-1
  // outputs once made the loader run for minutes), and so is zero.
  for (int32_t outputs : {INT32_MAX, 0, 2, -5}) {
    rules::RuleDatabase bad_outputs = db;
    bad_outputs.mutable_rules(0)->mutable_source()->mutable_nodes(0)->set_num_outputs(outputs);
    std::string path = TempPath("outputs" + std::to_string(outputs) + ".pb");
    SaveMessageAtomically(bad_outputs, path);
    std::string error = ErrorOf(path);
    EXPECT_NE(error.find("declares " + std::to_string(outputs) + " outputs; MatMul has 1 to 1"), std::string::npos)
        << error;
  }
}

// The database a binary reads: the one given (relative to where the user
// ran `bazel run`), else the checked-in one among the runfiles of argv0;
// neither is a one-line error naming the flag.
TEST(Rule, RuleDatabasePathGivenOrDefault) {
  const std::string dir = MakeTempDir("rules_path_");
  EXPECT_EQ(RuleDatabasePath("/abs/my.rules.pb", ""), "/abs/my.rules.pb");
  ::setenv("BUILD_WORKING_DIRECTORY", dir.c_str(), 1);
  EXPECT_EQ(RuleDatabasePath("my.rules.pb", ""), dir + "/my.rules.pb");
  ::unsetenv("BUILD_WORKING_DIRECTORY");
  // This test has no rules/default.rules.pb among its runfiles, nor beside
  // the binary named by argv0 until it is put there.
  const std::string argv0 = dir + "/bin/tool";
  std::string message;
  try {
    RuleDatabasePath("", argv0);
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("default rule database was not found"), std::string::npos) << message;
  EXPECT_NE(message.find("--rules=PATH"), std::string::npos) << message;
  const std::string runfile = argv0 + ".runfiles/rlflow/rules/default.rules.pb";
  for (const char* sub : {"/bin", "/bin/tool.runfiles", "/bin/tool.runfiles/rlflow", "/bin/tool.runfiles/rlflow/rules"})
    ASSERT_EQ(::mkdir((dir + sub).c_str(), 0755), 0) << sub;
  std::ofstream(runfile).close();
  EXPECT_EQ(RuleDatabasePath("", argv0), runfile);
  RemoveTree(dir);
}

}  // namespace
}  // namespace rlflow
