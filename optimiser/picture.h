#pragma once
// --picture: the rewritten regions of a model, before and after, side by
// side, with the applied rules named: a Graphviz DOT text and its PNG
// (Graphviz's `dot`, Debian's graphviz, installed by ./bazelw).
//
// A node is unchanged when the other graph has a node that computes the
// same thing (same operator and attributes on the same inputs, compared
// structurally from the graph inputs and weights down), feeds the same
// things (compared from the graph outputs up), or has the same operator,
// attributes and input and output names. The changed nodes of each side are
// the rewritten regions; each is drawn with its unchanged neighbours (grey)
// for context.
#include <string>
#include <vector>

#include "core/graph.h"

namespace rlflow {

struct PictureOptions {
  int max_nodes = 80;  // changed nodes drawn per side (the rest are counted in the caption)
};

// The DOT text. `rules`: one line per rule applied ("<id> x3: <summary>").
std::string RewritePictureDot(const Graph& before, const Graph& after, const std::vector<std::string>& rules,
                              const PictureOptions& options = {});

// Renders `dot_text` to the PNG `path` with Graphviz, atomically (a
// temporary file renamed). Throws rlflow::Error (one line) if `dot` is
// missing or fails.
void WritePng(const std::string& dot_text, const std::string& path);

}  // namespace rlflow
