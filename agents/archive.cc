#include "agents/archive.h"

#include <cstdio>
#include <exception>
#include <string>

#include "core/error.h"
#include "core/file_util.h"

namespace rlflow::agents {

void SaveArchiveAtomically(torch::serialize::OutputArchive& archive, const std::string& path) {
  WriteFileAtomicallyWith(path, [&](int fd) {
    // The archive (a zip) is streamed to the file as libtorch writes it. A
    // failed write is not reported to libtorch: its writer then throws, and
    // throws again from its destructor while unwinding (std::terminate).
    // Later pieces are skipped, and the first error is thrown once the
    // archive is done.
    std::string error;
    archive.save_to([&](const void* data, size_t size) -> size_t {
      if (error.empty()) {
        try {
          WriteAll(fd, static_cast<const char*>(data), size, path);
        } catch (const std::exception& e) {
          error = e.what();
        }
      }
      return size;
    });
    if (!error.empty()) throw Error(error);
  });
}

torch::Tensor RuleIdsToTensor(const std::vector<std::string>& ids) {
  std::vector<int64_t> v;
  v.reserve(ids.size());
  for (const std::string& id : ids) {
    if (id.empty() || id.size() > 15 || id.find_first_not_of("0123456789abcdef") != std::string::npos)
      Fail("rule id '", id, "' is not a short hexadecimal id");
    v.push_back(static_cast<int64_t>(std::stoull(id, nullptr, 16)));
  }
  return torch::tensor(v, torch::kInt64);
}

std::vector<std::string> RuleIdsFromTensor(const torch::Tensor& t) {
  std::vector<std::string> ids;
  torch::Tensor c = t.to(torch::kInt64).contiguous();
  for (int64_t k = 0; k < c.numel(); ++k) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "%012llx", static_cast<unsigned long long>(c.data_ptr<int64_t>()[k]));
    ids.push_back(buf);
  }
  return ids;
}

}  // namespace rlflow::agents
