#include "zoo/load.h"

#include <cstdlib>

#include "core/error.h"
#include "core/file_util.h"
#include "core/tensor.h"
#include "zoo/zoo.h"

namespace rlflow {

namespace {
std::string Stem(const std::string& path) {
  size_t slash = path.find_last_of('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.size() > 5 && base.compare(base.size() - 5, 5, ".onnx") == 0) base.resize(base.size() - 5);
  return base;
}
}  // namespace

LoadedModel LoadModel(const std::string& model_flag, const LoadOptions& options) {
  if (model_flag.empty()) Fail("--model is required (an ONNX file or a zoo model name)");
  LoadedModel m;
  std::string path = ResolveUserPath(model_flag);
  std::string stem = Stem(model_flag);
  // Only a bare name ("resnet50.onnx", no directory) falls back to the zoo:
  // a mistyped path is an error, not a silently different model.
  const bool bare = model_flag.find('/') == std::string::npos;
  if (!FileExists(path) && bare && zoo::IsZooModel(stem)) {
    m.graph = zoo::Build(stem, options.zoo_seed);
    m.import = options.import;
    m.source = "zoo:" + stem;
    m.from_zoo = true;
    m.notes.push_back("'" + path + "' does not exist; using the built-in zoo model '" + stem + "' (seed " +
                      std::to_string(options.zoo_seed) + ")");
  } else {
    ImportReport report;
    // Tensors in external data files are read from the model's directory.
    ImportOptions import = options.import;
    if (import.external_data_dir.empty()) import.external_data_dir = DirName(path);
    // One import: where static dimensions fold, the graph without that
    // folding comes with it (sharing its weights: a model over 2 GB is held
    // once). The file is parsed as it is read, never held whole.
    import.also_as_given = true;
    FileFingerprint fingerprint;
    // A model that does not fit at the free binding (a detector of any
    // resolution at 1 x 1) is bound at a size it fits, said in the notes;
    // the fitted shapes bind every later import of the run.
    m.graph = ImportOnnxFileFitting(path, import, &report, &fingerprint, &m.fitted);
    for (const auto& [name, shape] : m.fitted) import.input_shapes[name] = shape;
    import.also_as_given = false;
    m.import = import;
    m.external_data = m.graph.info().external_data;
    if (m.external_data)
      report.warnings.push_back(
          "the model keeps its weights in external data files: the written model keeps them in one data file beside "
          "it ('<output>.data')");
    m.source = path;
    m.notes = report.warnings;
    m.free_axes = report.free_axes;
    m.folded_nodes = report.folded_nodes;
    m.folded_at_binding = report.folded_at_binding;
    // The file itself is invalid ONNX (nodes out of order, node names used
    // twice): what is written when nothing improves is the repaired model,
    // never these bytes.
    if (!report.reordered_nodes && !report.renamed_nodes) {
      m.file = path;
      m.fingerprint = fingerprint;
    }
    if (m.folded_nodes > 0) m.notes.push_back("folded " + std::to_string(m.folded_nodes) + " constant/shape nodes");
    m.static_dims = report.static_dims;
    if (m.static_dims > 0) {
      RLFLOW_CHECK(report.as_given.has_value(), "LoadModel: static dimensions folded without the graph as given");
      m.as_given = std::move(*report.as_given);
      m.as_given.Validate();
      m.notes.push_back(std::to_string(m.static_dims) +
                        " static dimensions of symbolic shapes folded (with the shape arithmetic on them); the "
                        "verdict compares with the model as the file computes them");
    }
  }
  m.graph.Validate();
  return m;
}

void LoadedModel::CheckUnchanged(const FileFingerprint& now) const {
  RLFLOW_CHECK(!file.empty(), "LoadedModel: no file");
  if (now.size != fingerprint.size)
    throw ModelFileChanged("the model file '" + file + "' changed while it was being optimised (" +
                           std::to_string(fingerprint.size) + " bytes when read, " + std::to_string(now.size) +
                           " now); run again");
  if (now.hash != fingerprint.hash)
    throw ModelFileChanged("the model file '" + file +
                           "' changed while it was being optimised (same size, other contents); run again");
}

Graph LoadedModel::ImportFileAgain(const ImportOptions& options) const {
  RLFLOW_CHECK(!file.empty(), "LoadedModel::ImportFileAgain: no file");
  FileFingerprint now;
  Graph g;
  try {
    g = ImportOnnxFile(file, options, nullptr, &now);
  } catch (const Error&) {
    // A file that changed may no longer import, or no longer be there: say
    // that it changed.
    FileFingerprint again;
    try {
      again = FingerprintFile(file, "model");
    } catch (const Error& read) {
      throw ModelFileChanged(std::string(read.what()) + " (it was read when the model was loaded)");
    }
    CheckUnchanged(again);
    throw;
  }
  CheckUnchanged(now);
  return g;
}

void LoadedModel::CopyFileTo(const std::string& output) const {
  RLFLOW_CHECK(!file.empty(), "LoadedModel::CopyFileTo: no file");
  CopyFileAtomically(file, output, [&](const FileFingerprint& copied) { CheckUnchanged(copied); });
}

}  // namespace rlflow
