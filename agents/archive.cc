#include "agents/archive.h"

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

}  // namespace rlflow::agents
