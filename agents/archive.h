#pragma once
// libtorch archives (agents, checkpoints, world models) written as every
// other output: atomically, through core/file_util's WriteFileAtomicallyWith
// (a temporary file beside the path, fsync, rename; removed on failure; a
// symlink's target replaced and the link kept).
#include <string>

#include "third_party/torch_nn.h"

namespace rlflow::agents {

// Throws rlflow::Error("cannot write '<path>': <reason>") on failure, and
// then nothing is written.
void SaveArchiveAtomically(torch::serialize::OutputArchive& archive, const std::string& path);

}  // namespace rlflow::agents
