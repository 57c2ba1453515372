#pragma once
// Written rules: substitutions a person writes as two expressions, the
// second rule source beside the generator's enumeration (fusions deeper
// than its three operators, forms real exporters write). They are
// candidates like the generator's: the verifier proves each (Z3 on
// symbolic tensors, a float64 check) before it enters the database, where
// it keeps its name (Rule.written_name).
//
// The format (rules/written.rules), one rule per block:
//
//   # Hard-swish as tf2onnx and paddle2onnx export it.
//   rule hardswish_by_formula
//     input X: float32[*]
//     source Div(Mul(X, Clip(Add(X, 3.0), 0.0, 6.0)), 6.0)
//     target HardSwish(X)
//
//   rule layernorm_without_affine
//     input X: float32[n, d]
//     let M = ReduceMean(X, axes=[-1])
//     let D = Sub(X, M)
//     source Div(D, Sqrt(Add(ReduceMean(Pow(D, 2.0), axes=[-1]), 1e-05)))
//     target LayerNormalization(X, fill(1.0, [d]), axis=-1, epsilon=1e-05)
//
// - `input NAME: TYPE[DIMS]`: DIMS are integers, symbols (identifiers)
//   and multiples of a symbol (`2*h`: the matcher binds h where the
//   dimension divides, and the rule does not match where it does not);
//   `[*]` makes the rule rank-generic: one rule per rank 1 to 4 (symbols
//   d1, d2, ...), every `[*]` input of that shape. Names in later lines
//   refer to inputs and lets. `input NAME: TYPE[DIMS] <= BOUND` is a
//   premise: the input is a constant whose every element is at most BOUND
//   (TensorVar.bounded_above); the verifier proves the rule under it and
//   the matcher applies it only where the matched constant satisfies it.
// - `let NAME = EXPR`: a shared subexpression (one node per side that uses
//   it, however often).
// - `source EXPR`, `target EXPR`: `Op(operand, ..., attr=value)`; an
//   operand is a name, an expression, a float literal (a scalar constant of
//   the inputs' floating type: 3.0, 1e-05), an integer literal or list (an
//   int64 constant: 2, [0, -1]), `fill(VALUE, [DIMS])` (a floating constant
//   of a symbolic shape; `fill(VALUE / SYMBOL, [DIMS])` holds VALUE divided
//   by that dimension at the match, a mean's weights 1/c), or `_` (an
//   omitted optional operand); `Op(...)#k`
//   is output k. Attribute values: integers, floats (with a '.' or an
//   exponent), "strings", [lists], or a shape symbol (group=c: an integer
//   attribute equal to that dimension at the match, a depthwise conv's).
//   An operator outside the default ONNX domain is named with its domain:
//   com.microsoft.SkipLayerNormalization(...)
//   (such a rule is used only for targets that run it, OpDef::targets).
// - `tolerance T` (optional): the sides agree within T * (1 + |source|)
//   instead of exactly (a float32 attribute standing for a real number).
// - `#` starts a comment.
#include <string>
#include <vector>

#include "core/rules/rule.h"

namespace rlflow {

// The candidate rules of a written-rules text (unproved; ids set); `path`
// names it in errors, which give the line. Each rule is validated
// (ValidateRule) so that a bad one is an error naming it.
std::vector<rules::Rule> ParseWrittenRules(const std::string& text, const std::string& path);

}  // namespace rlflow
