#pragma once
// libtorch archives (agents, checkpoints, world models) written as every
// other output: atomically, through core/file_util's WriteFileAtomicallyWith
// (a temporary file beside the path, fsync, rename; removed on failure; a
// symlink's target replaced and the link kept).
#include <string>
#include <vector>

#include "third_party/torch_nn.h"

namespace rlflow::agents {

// Throws rlflow::Error("cannot write '<path>': <reason>") on failure, and
// then nothing is written.
void SaveArchiveAtomically(torch::serialize::OutputArchive& archive, const std::string& path);

// A rule database's rule ids (12 hexadecimal digits each) as an int64
// tensor, saved with what was trained on it (agents, world models) so that
// it can act on a database regenerated or grown since; and back. Throws
// rlflow::Error for an id that is not short hexadecimal.
torch::Tensor RuleIdsToTensor(const std::vector<std::string>& ids);
std::vector<std::string> RuleIdsFromTensor(const torch::Tensor& t);

}  // namespace rlflow::agents
