#pragma once
// Model-local ONNX functions (ModelProto.functions, IR >= 8): torch.onnx's
// export_modules_as_functions and onnxscript write a module as a function
// and each use of it as one node calling it. rlflow's IR has no calls: a
// call would stay one opaque node, and nothing inside it could be rewritten.
// ONNX Runtime inlines them when it loads the model; so does this, at import.
#include <string>
#include <vector>

namespace onnx {
class ModelProto;
}  // namespace onnx

namespace rlflow {

// Replaces each top-level node that calls one of `model`'s local functions
// by the function's body: formal inputs and outputs become the call's
// (a formal input the call omits is an absent optional input; a formal
// output it omits gets a fresh name), the body's other names get fresh ones
// prefixed with the call node's name, and attributes the body refers to
// (ref_attr_name) take the call's values (dropped where the call has none).
// Calls inside inlined bodies are inlined with them. A function is not
// inlined, and its calls stay opaque nodes, when inlining could change what
// it computes or never end: its opset for a domain differs from the model's,
// a body node holds a subgraph (If, Loop, Scan), it uses fields newer than
// ONNX 1.12 (attribute defaults, overloads), or it calls itself. A call
// whose full expansion would take the graph past 2^20 nodes (nesting that
// multiplies: F1 calls F2 twice, F2 calls F3 twice, ...) stays a call too.
// The function definitions stay in the model.
// `notes` receives one line per function inlined and per function kept.
// Returns the number of calls inlined, nested ones included.
int InlineLocalFunctions(onnx::ModelProto* model, std::vector<std::string>* notes);

}  // namespace rlflow
