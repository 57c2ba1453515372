#pragma once
// The subgraphs of a model's control flow (the branches of its If nodes,
// the bodies of its Loops and Scans) as models of their own, and back.
// Exporters that put a model's whole computation inside control flow leave
// nothing outside it for a graph optimiser: Hugging Face Optimum's merged decoders
// ("decoder_model_merged.onnx") are one If on a `use_cache_branch` input
// whose two branches are the decoder with and without its key/value cache,
// the weights they share stored once in the outer graph; a generation loop
// exported from a script is a Loop whose body runs the decoder once per new
// token. rlflow keeps an If or a Loop opaque (rewrites never cross it); the
// optimiser instead optimises each branch or body as a model
// (ExtractSubgraphs), checks and measures it like any model, and puts the
// result back (ReplaceSubgraph).
#include <string>
#include <vector>

namespace onnx {
class ModelProto;
}  // namespace onnx

namespace rlflow {

struct Subgraph {
  int node = -1;          // the If, Loop or Scan node's index in model.graph().node()
  std::string op;         // "If", "Loop" or "Scan"
  std::string node_name;  // its name, or "<op>_<index>" if it has none
  std::string attribute;  // "then_branch" or "else_branch" (If), "body" (Loop, Scan)
  int nodes = 0;          // the subgraph's nodes (its own, not those of its subgraphs)
  // The subgraph as a model (a serialised ModelProto), "" when it cannot be
  // one (`why_not` says why): its graph inputs are the subgraph's own inputs
  // (a Loop body's iteration number, condition and loop-carried values, a
  // Scan body's state variables and scan inputs' elements, as the body
  // declares them) and then the outer graph's inputs that it reads
  // (their declared types); the outer initializers and Constant nodes it
  // reads are copied in, its outputs are the subgraph's; the model's IR
  // version, opsets and local functions.
  std::string model;
  std::vector<std::string> formal_inputs;  // the subgraph's own inputs, in order (none for an If branch)
  // A Loop body that carries a sequence (a list appended to in a loop): the
  // nodes that read a sequence or what is computed from one stay outside
  // the model (serialised NodeProtos, put back after its nodes), the
  // sequences are not among its inputs and outputs, and the tensors those
  // nodes read from the rest of the body are outputs of the model too.
  std::vector<std::string> outside_nodes;
  std::string interface;             // the subgraph's inputs and outputs as declared (a serialised GraphProto)
  std::vector<std::string> inputs;   // the model's graph inputs
  std::vector<std::string> outputs;  // and outputs (what ReplaceSubgraph checks; `model` may be freed)
  std::string why_not;
};

// The branches of the top-level If nodes of `model` (then, else) and the
// bodies of its top-level Loop and Scan nodes (Scan from opset 9), in node
// order. A subgraph that reads a value computed in the outer graph (other
// than by a Constant node) whose type neither the model's value_info nor
// ONNX's shape inference (run on a copy when needed) gives is not made a
// model; nor is a Loop body whose iteration number or condition is not a
// typed tensor, or with a loop-carried tensor (or a Scan's state variable
// or element) declared without a shape. A Loop body that carries a
// sequence is made a model without its sequence nodes (Subgraph::
// outside_nodes).
std::vector<Subgraph> ExtractSubgraphs(const onnx::ModelProto& model);

// Puts the graph of `optimised`, a model with the interface of the
// subgraph's model (`sub.inputs` by name, `sub.outputs` in order), in place
// of the subgraph: the subgraph's own inputs and outputs are as it declared
// them again (the nodes kept outside the model put back after its nodes);
// its other inputs become reads of the outer graph again; its
// initializers that the outer graph holds alike (name, type, shape and
// data) are dropped (read from there); a name it defines that the outer
// graph defines too is renamed (a subgraph may not redefine one). An opset
// import the model lacks is added. Throws rlflow::Error (one line) if the
// interface differs or an opset differs from the model's.
// `data_dir`: the directory that the external data locations of both
// models are relative to (their tensors are compared by the bytes there);
// without it, a tensor in an external data file is alike only one at the
// same place in the same file.
void ReplaceSubgraph(onnx::ModelProto* model, const Subgraph& sub, const onnx::ModelProto& optimised,
                     const std::string* data_dir = nullptr);

// Removes the top-level initializers no node reads (subgraphs included)
// that are neither graph inputs nor outputs; returns how many.
int DropUnreadInitializers(onnx::ModelProto* model);

}  // namespace rlflow
