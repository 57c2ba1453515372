#pragma once
// Loop-invariant products moved out of the bodies of a model's top-level
// Scan and Loop nodes. A recurrent network written as a loop (a GRU or an
// LSTM cell that a converter writes as a Scan body, as keras2onnx and
// CNTK do; a scripted loop that reads `x[t]`, which torch.onnx writes as a
// Loop whose body gathers row t of an outer tensor) multiplies each step's
// input by the weights inside the body: T small products, each with the
// loop's per-step overhead, where one product over the whole sequence
// does the same work at once. rlflow keeps Scan and Loop nodes opaque
// (rewrites never cross them); this transformation is the one thing that
// crosses them, and only as far as it is exact by construction:
//
// A body value is *sliced* when it is row t of a tensor outside the body
// at the step t: a Scan's scan input element (a reversed scan input reads
// the rows backwards, and only values of one direction are combined), or
// a Loop body's Gather(X, i) with X outside the body and i the iteration
// number (torch.onnx's `x[t]`, or `x[:, t]` along axis 1). Rows along an
// axis other than 0 are read from the tensor transposed outside, that axis
// first. A body node is moved out when its
// inputs are sliced values of one source and loop invariants (values
// outside the body, the body's initializers and Constant nodes, and what
// the body computes from those alone with an elementwise operator or a
// Transpose: copied out with the node that reads them) and its
// operator computes each row of a stacked input as it computes the row
// alone: elementwise operators whose invariant operands broadcast from the
// trailing axes (rank at most the rows'), MatMul whose other operand has
// no batch axes beyond the row's, Gemm (as MatMul and Add), Transpose,
// Split, Concat and Softmax with their axes moved by one. The node is then
// computed once outside, before the Scan or Loop, over the stacked input
// (T rows at once), and the body reads its row: a new scan input of the
// same direction (Scan), or a Gather of row i (Loop). Nothing is moved out
// of a body unless a MatMul or a Gemm is.
#include <string>
#include <vector>

namespace onnx {
class ModelProto;
}  // namespace onnx

namespace rlflow {

struct HoistedLoop {
  std::string op;                // "Scan" or "Loop"
  std::string node_name;         // its name, or "<op>_<index>" if it has none
  int nodes = 0;                 // body nodes moved out
  int matmuls = 0;               // of them MatMul or Gemm
  int new_inputs = 0;            // values the body now reads by row (scan inputs added, or Gathers)
  std::vector<std::string> ops;  // the operators moved out, in body order
};

// Moves out of the body of each top-level Scan (opset 9 and up) and Loop
// what is said above; returns a record per node changed (none: `model` as
// it was). `model`'s top-level value_info should type the outer values the
// bodies read (ONNX's shape inference); a value whose rank is not known is
// not moved.
std::vector<HoistedLoop> HoistLoopInvariantProducts(onnx::ModelProto* model);

}  // namespace rlflow
