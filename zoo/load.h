#pragma once
// Resolving --model: an ONNX file, or a built-in zoo model when no such file
// exists and the name (without .onnx) is a zoo model.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/file_util.h"
#include "core/graph.h"
#include "core/onnx_io.h"

namespace rlflow {

// The file of a LoadedModel changed since it was loaded: never a note, always
// the run's error.
class ModelFileChanged : public Error {
 public:
  using Error::Error;
};

struct LoadedModel {
  Graph graph;
  std::string source;  // file path, or "zoo:<name>"
  bool from_zoo = false;
  // The file the graph was imported from, for what needs the file itself
  // (the original written back unchanged, imported again at a second
  // binding): empty for a zoo model, and for a file that must never be
  // written back (its nodes out of order). Its contents are not held for
  // the run (a model up to 2 GB would be held twice, beside the graph's
  // weights): it is read again, and that fails if it changed since it was
  // loaded (its fingerprint, size and hash).
  std::string file;
  FileFingerprint fingerprint;
  // Imports the file again (with `options`), block by block.
  Graph ImportFileAgain(const ImportOptions& options) const;
  // Copies the file to `output` atomically, block by block.
  void CopyFileTo(const std::string& output) const;
  // Throws ModelFileChanged unless `now` (the file's fingerprint read again)
  // is the loaded one; ImportFileAgain and CopyFileTo check it, also where
  // the file no longer imports or cannot be read to the end.
  void CheckUnchanged(const FileFingerprint& now) const;
  // Tensors were read from external data files: the file alone is not the
  // model (it is read again with `import`, never written as the result).
  bool external_data = false;
  ImportOptions import;  // the options it was imported with (external data directory set)
  // The shapes ImportOnnxFileFitting bound the inputs to where the model did
  // not fit at the free binding (also in `import.input_shapes`); empty if
  // it did.
  std::map<std::string, std::vector<int64_t>> fitted;
  // ImportReport::folded_at_binding: the graph runs at the bound shapes only.
  bool folded_at_binding = false;
  std::vector<std::string> notes;  // for the log
  // Per graph input, the axes bound to free_dim_value (ImportReport::free_axes).
  std::map<std::string, std::vector<int>> free_axes;
  int folded_nodes = 0;
  // Static dimensions of symbolic shapes folded at import (ImportOptions::
  // fold_static_dims). Where there are some, `as_given` is the graph as the
  // file computes it (imported without that folding): the original the
  // verdict compares with and the graph of the bytes written when nothing is
  // faster. Folding them is part of the optimisation (ONNX Runtime fuses a
  // MatMul with a constant scale, not with one computed from a shape).
  int static_dims = 0;
  Graph as_given;
  const Graph& AsGiven() const { return static_dims > 0 ? as_given : graph; }
};

struct LoadOptions {
  ImportOptions import;
  uint64_t zoo_seed = 1;
};

// Imports (or builds), folds shape subgraphs to constants, and validates.
LoadedModel LoadModel(const std::string& model_flag, const LoadOptions& options = {});

}  // namespace rlflow
