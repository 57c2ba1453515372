#include "core/rules/written.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/op_registry.h"

namespace rlflow {
namespace {

// ---- tokens ----
struct Token {
  enum Kind { kIdent, kNumber, kString, kPunct, kEnd } kind = kEnd;
  std::string text;
};

class Lexer {
 public:
  Lexer(const std::string& line, const std::string& where) : text_(&line), where_(where) {}
  Token Next() {
    const std::string& s_ = *text_;
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    Token t;
    if (pos_ >= s_.size()) return t;
    char c = s_[pos_];
    size_t start = pos_;
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      // Letters, digits, '_', and '.' before a letter (qualified operator
      // names: com.microsoft.SkipLayerNormalization).
      auto ident_char = [&](size_t i) {
        const unsigned char ch = static_cast<unsigned char>(s_[i]);
        return std::isalnum(ch) || ch == '_' ||
               (ch == '.' && i + 1 < s_.size() && std::isalpha(static_cast<unsigned char>(s_[i + 1])));
      };
      while (pos_ < s_.size() && ident_char(pos_)) ++pos_;
      t.kind = Token::kIdent;
    } else if (std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '+' || c == '.') {
      ++pos_;
      while (pos_ < s_.size()) {
        char d = s_[pos_];
        bool exp_sign = (d == '-' || d == '+') && (s_[pos_ - 1] == 'e' || s_[pos_ - 1] == 'E');
        if (!(std::isdigit(static_cast<unsigned char>(d)) || d == '.' || d == 'e' || d == 'E' || exp_sign)) break;
        ++pos_;
      }
      t.kind = Token::kNumber;
    } else if (c == '"') {
      size_t end = s_.find('"', pos_ + 1);
      if (end == std::string::npos) Fail(where_, ": unterminated string");
      t.kind = Token::kString;
      t.text = s_.substr(pos_ + 1, end - pos_ - 1);
      pos_ = end + 1;
      return t;
    } else {
      ++pos_;
      t.kind = Token::kPunct;
    }
    t.text = s_.substr(start, pos_ - start);
    return t;
  }

 private:
  const std::string* text_;
  std::string where_;
  size_t pos_ = 0;
};

bool IsFloatText(const std::string& t) { return t.find_first_of(".eE") != std::string::npos; }

// ---- expressions ----
struct AttrValue {
  enum Kind { kInt, kFloat, kString, kInts, kFloats, kSymbol } kind = kInt;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
};

struct Expr {
  enum Kind { kName, kFloat, kInt, kInts, kFill, kCall, kOmitted } kind = kName;
  std::string name;  // kName: the name; kCall: the operator
  double f = 0;
  int64_t i = 0;
  std::vector<int64_t> ints;
  std::vector<std::string> dims;  // kFill: its shape
  std::string fill_divisor;       // kFill: a dimension the value is divided by ("": none)
  std::vector<Expr> args;
  std::map<std::string, AttrValue> attrs;
  int num_outputs = 0;  // kCall: from the pseudo-attribute outputs=N (0: the registry's)
  int output = 0;       // the output a reference takes (#k)
};

class Parser {
 public:
  Parser(const std::string& text, const std::string& where) : lex_(text, where), where_(where) { Advance(); }

  Expr ParseExpr() {
    Expr e = Primary();
    if (tok_.kind == Token::kPunct && tok_.text == "#") {
      Advance();
      e.output = static_cast<int>(ParseInt());
    }
    return e;
  }

  void ExpectEnd() {
    if (tok_.kind != Token::kEnd) Fail(where_, ": unexpected '", tok_.text, "'");
  }

  // "NAME: TYPE[DIMS]" after `input`, then optionally "<= BOUND".
  void ParseInputDecl(std::string* name, std::string* type, std::vector<std::string>* dims,
                      std::optional<double>* upper_bound) {
    *name = ExpectIdent("an input name");
    ExpectPunct(":");
    *type = ExpectIdent("an element type");
    ExpectPunct("[");
    if (tok_.kind == Token::kPunct && tok_.text == "*") {
      dims->push_back("*");
      Advance();
      ExpectPunct("]");
    } else {
      *dims = DimList();
    }
    if (tok_.kind == Token::kPunct && tok_.text == "<") {
      Advance();
      ExpectPunct("=");
      *upper_bound = ParseNumber();
      if (!std::isfinite(**upper_bound)) Fail(where_, ": a bound must be finite");
    }
  }

  std::string ExpectIdent(const char* what) {
    if (tok_.kind != Token::kIdent) Fail(where_, ": expected ", what, ", got '", tok_.text, "'");
    std::string s = tok_.text;
    Advance();
    return s;
  }
  void ExpectPunct(const std::string& p) {
    if (tok_.kind != Token::kPunct || tok_.text != p) Fail(where_, ": expected '", p, "', got '", tok_.text, "'");
    Advance();
  }
  double ParseNumber() {
    if (tok_.kind != Token::kNumber) Fail(where_, ": expected a number, got '", tok_.text, "'");
    char* end = nullptr;
    double v = std::strtod(tok_.text.c_str(), &end);
    if (end == nullptr || *end != '\0') Fail(where_, ": bad number '", tok_.text, "'");
    Advance();
    return v;
  }
  int64_t ParseInt() {
    if (tok_.kind != Token::kNumber || IsFloatText(tok_.text))
      Fail(where_, ": expected an integer, got '", tok_.text, "'");
    char* end = nullptr;
    long long v = std::strtoll(tok_.text.c_str(), &end, 10);
    if (end == nullptr || *end != '\0') Fail(where_, ": bad integer '", tok_.text, "'");
    Advance();
    return v;
  }

 private:
  void Advance() { tok_ = lex_.Next(); }
  bool IsPunct(const char* p) const { return tok_.kind == Token::kPunct && tok_.text == p; }

  // "[a, 3, b]" (after the '['): dimension tokens.
  std::vector<std::string> DimList() {
    std::vector<std::string> dims;
    while (!IsPunct("]")) {
      if (tok_.kind == Token::kIdent) {
        dims.push_back(tok_.text);
        Advance();
      } else {
        std::string dim = std::to_string(ParseInt());
        if (IsPunct("*")) {  // 2*h: a multiple of a symbol
          Advance();
          if (tok_.kind != Token::kIdent) Fail(where_, ": expected a dimension symbol after '", dim, "*'");
          if (std::stoll(dim) < 2) Fail(where_, ": a dimension's factor must be at least 2, got ", dim);
          dim += "*" + tok_.text;
          Advance();
        }
        dims.push_back(dim);
      }
      if (!IsPunct(",")) break;
      Advance();
    }
    ExpectPunct("]");
    return dims;
  }

  Expr Primary() {
    Expr e;
    if (tok_.kind == Token::kNumber) {
      if (IsFloatText(tok_.text)) {
        e.kind = Expr::kFloat;
        e.f = ParseNumber();
      } else {
        e.kind = Expr::kInt;
        e.i = ParseInt();
      }
      return e;
    }
    if (IsPunct("[")) {
      Advance();
      e.kind = Expr::kInts;
      while (!IsPunct("]")) {
        e.ints.push_back(ParseInt());
        if (!IsPunct(",")) break;
        Advance();
      }
      ExpectPunct("]");
      return e;
    }
    std::string id = ExpectIdent("an operand");
    if (id == "_") {
      e.kind = Expr::kOmitted;
      return e;
    }
    if (!IsPunct("(")) {
      e.kind = Expr::kName;
      e.name = id;
      return e;
    }
    Advance();
    if (id == "fill") {
      e.kind = Expr::kFill;
      e.f = ParseNumber();
      if (IsPunct("/")) {  // fill(1.0 / c, [1, c, 1, 1]): a value that depends on a dimension
        Advance();
        e.fill_divisor = ExpectIdent("a dimension symbol after '/'");
      }
      ExpectPunct(",");
      ExpectPunct("[");
      e.dims = DimList();
      ExpectPunct(")");
      return e;
    }
    e.kind = Expr::kCall;
    e.name = id;
    while (!IsPunct(")")) {
      // attr=value, or an operand.
      if (tok_.kind == Token::kIdent) {
        Lexer save = lex_;
        Token name = tok_;
        Advance();
        if (IsPunct("=")) {
          Advance();
          if (name.text == "outputs") {
            e.num_outputs = static_cast<int>(ParseInt());
          } else {
            e.attrs[name.text] = AttrValueHere();
          }
          if (!IsPunct(",")) break;
          Advance();
          continue;
        }
        lex_ = save;
        tok_ = name;
      }
      e.args.push_back(ParseExpr());
      if (!IsPunct(",")) break;
      Advance();
    }
    ExpectPunct(")");
    return e;
  }

  AttrValue AttrValueHere() {
    AttrValue v;
    if (tok_.kind == Token::kIdent) {  // a shape symbol: group=c
      v.kind = AttrValue::kSymbol;
      v.s = tok_.text;
      Advance();
      return v;
    }
    if (tok_.kind == Token::kString) {
      v.kind = AttrValue::kString;
      v.s = tok_.text;
      Advance();
      return v;
    }
    if (IsPunct("[")) {
      Advance();
      std::vector<std::string> items;
      bool floats = false;
      while (!IsPunct("]")) {
        if (tok_.kind != Token::kNumber) Fail(where_, ": expected a number in a list, got '", tok_.text, "'");
        floats = floats || IsFloatText(tok_.text);
        items.push_back(tok_.text);
        Advance();
        if (!IsPunct(",")) break;
        Advance();
      }
      ExpectPunct("]");
      v.kind = floats ? AttrValue::kFloats : AttrValue::kInts;
      for (const auto& t : items) {
        if (floats)
          v.floats.push_back(std::strtod(t.c_str(), nullptr));
        else
          v.ints.push_back(std::strtoll(t.c_str(), nullptr, 10));
      }
      return v;
    }
    if (tok_.kind == Token::kNumber && IsFloatText(tok_.text)) {
      v.kind = AttrValue::kFloat;
      v.f = ParseNumber();
    } else {
      v.kind = AttrValue::kInt;
      v.i = ParseInt();
    }
    return v;
  }

  Lexer lex_;
  std::string where_;
  Token tok_;
};

// ---- rules ----
struct InputDecl {
  std::string name, type;
  std::vector<std::string> dims;      // {"*"}: rank-generic
  std::optional<double> upper_bound;  // "<= BOUND": a constant, every element at most it
  int line = 0;
};

struct Spec {
  std::string name;
  int line = 0;
  std::vector<InputDecl> inputs;
  std::vector<std::pair<std::string, Expr>> lets;
  std::optional<Expr> source, target;
  int source_line = 0, target_line = 0;
  double tolerance = 0;
};

DType DTypeByName(const std::string& name, const std::string& where) {
  for (int code = 1; code <= 16; ++code) {
    DType d = DTypeFromCode(code);
    if (d != DType::kUndefined && DTypeName(d) == name) return d;
  }
  Fail(where, ": unknown element type '", name, "' (e.g. float32, float64, int64)");
}

rules::Dim DimOf(const std::string& token) {
  const size_t star = token.find('*');
  if (star != std::string::npos && std::isdigit(static_cast<unsigned char>(token[0])))
    return DimScale(DimSymbol(token.substr(star + 1)), std::stoll(token.substr(0, star)));  // 2*h
  if (std::isdigit(static_cast<unsigned char>(token[0])) || token[0] == '-') return DimConst(std::stoll(token));
  return DimSymbol(token);
}

rules::Attribute AttrProto(const std::string& name, const AttrValue& v) {
  rules::Attribute a;
  a.set_name(name);
  switch (v.kind) {
    case AttrValue::kInt: a.set_i(v.i); break;
    case AttrValue::kFloat: a.set_f(static_cast<float>(v.f)); break;
    case AttrValue::kString: a.set_s(v.s); break;
    case AttrValue::kSymbol: *a.mutable_dim() = DimSymbol(v.s); break;
    case AttrValue::kInts:
      for (int64_t x : v.ints) a.mutable_ints()->add_values(x);
      break;
    case AttrValue::kFloats:
      for (double x : v.floats) a.mutable_floats()->add_values(static_cast<float>(x));
      break;
  }
  return a;
}

// Builds one side's pattern from expressions.
class SideBuilder {
 public:
  SideBuilder(const Spec& spec, const std::map<std::string, int>& inputs, rules::Pattern* p, std::string where)
      : spec_(spec), inputs_(inputs), p_(p), where_(std::move(where)) {}

  rules::Ref Build(const Expr& e) {
    rules::Ref r;
    switch (e.kind) {
      case Expr::kOmitted: r.set_omitted(true); return r;
      case Expr::kName: {
        auto in = inputs_.find(e.name);
        if (in != inputs_.end()) {
          if (e.output != 0) Fail(where_, ": input '", e.name, "' has one output");
          r.set_input(in->second);
          return r;
        }
        for (const auto& [name, let] : spec_.lets) {
          if (name != e.name) continue;
          auto done = lets_.find(name);
          if (done == lets_.end()) {
            if (building_.count(name)) Fail(where_, ": let '", name, "' refers to itself");
            building_.insert(name);
            done = lets_.emplace(name, Build(let)).first;
            building_.erase(name);
          }
          r = done->second;
          if (e.output != 0) {
            if (r.kind_case() != rules::Ref::kNode) Fail(where_, ": '", e.name, "' has one output");
            const int node = r.node().node();
            if (e.output >= p_->nodes(node).num_outputs())
              Fail(where_, ": '", e.name, "' has ", p_->nodes(node).num_outputs(), " outputs (give outputs=N)");
            r.mutable_node()->set_output(e.output);
          }
          return r;
        }
        Fail(where_, ": '", e.name, "' is neither an input nor a let");
      }
      case Expr::kFloat: {
        rules::Constant* c = p_->add_constants();
        c->set_dtype(static_cast<int32_t>(DType::kFloat32));
        c->add_float_values(e.f);
        r.set_constant(p_->constants_size() - 1);
        return r;
      }
      case Expr::kInt:
      case Expr::kInts: {
        rules::Constant* c = p_->add_constants();
        c->set_dtype(static_cast<int32_t>(DType::kInt64));
        if (e.kind == Expr::kInt) {
          c->add_int_values(e.i);
        } else {
          c->add_dims(static_cast<int64_t>(e.ints.size()));
          for (int64_t x : e.ints) c->add_int_values(x);
        }
        r.set_constant(p_->constants_size() - 1);
        return r;
      }
      case Expr::kFill: {
        rules::Constant* c = p_->add_constants();
        c->set_dtype(static_cast<int32_t>(DType::kFloat32));
        c->set_fill_value(e.f);
        for (const auto& d : e.dims) *c->add_fill_shape() = DimOf(d);
        if (!e.fill_divisor.empty()) *c->mutable_fill_divisor() = DimOf(e.fill_divisor);
        r.set_constant(p_->constants_size() - 1);
        return r;
      }
      case Expr::kCall: {
        const OpDef* def = OpRegistry::Global().FindQualified(e.name);
        if (def == nullptr) Fail(where_, ": '", e.name, "' is not a registry operator");
        std::vector<rules::Ref> operands;
        for (const Expr& a : e.args) operands.push_back(Build(a));
        rules::Node n;
        n.set_op(e.name);
        for (const auto& o : operands) *n.add_inputs() = o;
        int outputs = e.num_outputs > 0 ? e.num_outputs : def->min_outputs;
        if (e.num_outputs == 0 && def->min_outputs != def->max_outputs && e.output >= outputs) outputs = e.output + 1;
        n.set_num_outputs(outputs);
        for (const auto& [name, v] : e.attrs) *n.add_attrs() = AttrProto(name, v);  // std::map: sorted
        *p_->add_nodes() = n;
        if (e.output >= outputs) Fail(where_, ": ", e.name, " has ", outputs, " outputs, #", e.output, " asked");
        r.mutable_node()->set_node(p_->nodes_size() - 1);
        r.mutable_node()->set_output(e.output);
        return r;
      }
    }
    Fail(where_, ": bad expression");
  }

 private:
  const Spec& spec_;
  const std::map<std::string, int>& inputs_;
  rules::Pattern* p_;
  std::string where_;
  std::map<std::string, rules::Ref> lets_;
  std::set<std::string> building_;
};

rules::Rule MakeRule(const Spec& spec, const std::string& path, int rank) {
  const std::string where = path + ":" + std::to_string(spec.line) + ": rule '" + spec.name + "'";
  rules::Rule rule;
  rule.set_written_name(rank > 0 ? spec.name + "/rank" + std::to_string(rank) : spec.name);
  rule.set_tolerance(spec.tolerance);
  std::map<std::string, int> inputs;
  for (const InputDecl& in : spec.inputs) {
    rules::TensorVar* v = rule.add_inputs();
    v->set_name(in.name);
    v->set_dtype(
        static_cast<int32_t>(DTypeByName(in.type, path + ":" + std::to_string(in.line) + ": input '" + in.name + "'")));
    if (in.dims.size() == 1 && in.dims[0] == "*") {
      for (int k = 1; k <= rank; ++k) *v->add_shape() = DimSymbol("d" + std::to_string(k));
    } else {
      for (const auto& d : in.dims) *v->add_shape() = DimOf(d);
    }
    if (in.upper_bound) {
      v->set_bounded_above(true);
      v->set_upper_bound(*in.upper_bound);
    }
    if (!inputs.emplace(in.name, rule.inputs_size() - 1).second) Fail(where, ": input '", in.name, "' twice");
  }
  if (!spec.source || !spec.target) Fail(where, ": needs a source and a target");
  auto at = [&](int line, const char* side) {
    return path + ":" + std::to_string(line) + ": rule '" + spec.name + "' (" + side + ")";
  };
  rules::Ref s = SideBuilder(spec, inputs, rule.mutable_source(), at(spec.source_line, "source")).Build(*spec.source);
  rules::Ref t = SideBuilder(spec, inputs, rule.mutable_target(), at(spec.target_line, "target")).Build(*spec.target);
  *rule.mutable_source()->add_outputs() = s;
  *rule.mutable_target()->add_outputs() = t;
  rule.set_id(RuleId(rule));
  try {
    ValidateRule(rule);
  } catch (const Error& e) {
    Fail(where, ": ", e.what());
  }
  return rule;
}

}  // namespace

std::vector<rules::Rule> ParseWrittenRules(const std::string& text, const std::string& path) {
  std::vector<Spec> specs;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  std::set<std::string> names;
  while (std::getline(in, line)) {
    ++number;
    size_t hash = std::string::npos;
    bool quoted = false;
    for (size_t k = 0; k < line.size(); ++k) {
      if (line[k] == '"') quoted = !quoted;
      // '#' begins a comment unless it follows an expression (Op(...)#1).
      if (line[k] == '#' && !quoted && (k == 0 || std::isspace(static_cast<unsigned char>(line[k - 1])))) {
        hash = k;
        break;
      }
    }
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string keyword;
    if (!(words >> keyword)) continue;
    std::string rest;
    std::getline(words, rest);
    const std::string where = path + ":" + std::to_string(number);
    if (keyword == "rule") {
      Spec s;
      Parser p(rest, where);
      s.name = p.ExpectIdent("a rule name");
      p.ExpectEnd();
      if (!names.insert(s.name).second) Fail(where, ": rule '", s.name, "' is defined twice");
      s.line = number;
      specs.push_back(s);
      continue;
    }
    if (specs.empty()) Fail(where, ": '", keyword, "' before the first 'rule'");
    Spec& s = specs.back();
    Parser p(rest, where);
    if (keyword == "input") {
      InputDecl d;
      d.line = number;
      p.ParseInputDecl(&d.name, &d.type, &d.dims, &d.upper_bound);
      p.ExpectEnd();
      s.inputs.push_back(d);
    } else if (keyword == "let") {
      std::string name = p.ExpectIdent("a name");
      p.ExpectPunct("=");
      s.lets.push_back({name, p.ParseExpr()});
    } else if (keyword == "source" || keyword == "target") {
      (keyword == "source" ? s.source : s.target) = p.ParseExpr();
      (keyword == "source" ? s.source_line : s.target_line) = number;
    } else if (keyword == "tolerance") {
      s.tolerance = p.ParseNumber();
      if (!(s.tolerance > 0 && s.tolerance < 1e-2)) Fail(where, ": tolerance must be in (0, 0.01)");
    } else {
      Fail(where, ": unknown keyword '", keyword, "' (rule, input, let, source, target, tolerance)");
    }
    p.ExpectEnd();
  }
  std::vector<rules::Rule> out;
  for (const Spec& s : specs) {
    bool generic = false;
    for (const auto& in : s.inputs) generic = generic || (in.dims.size() == 1 && in.dims[0] == "*");
    if (!generic) {
      out.push_back(MakeRule(s, path, 0));
      continue;
    }
    for (int rank = 1; rank <= 4; ++rank) out.push_back(MakeRule(s, path, rank));
  }
  return out;
}

}  // namespace rlflow
