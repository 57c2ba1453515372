#include "core/file_util.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/error.h"

namespace rlflow {

std::string ResolveUserPath(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  const char* wd = std::getenv("BUILD_WORKING_DIRECTORY");
  if (wd == nullptr || *wd == '\0') return path;
  return std::string(wd) + "/" + path;
}

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string ReadFile(const std::string& path, const std::string& what) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) Fail("cannot read ", what, " '", path, "': ", std::strerror(errno));
  if (S_ISDIR(st.st_mode)) Fail("cannot read ", what, " '", path, "': it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail("cannot read ", what, " '", path, "': ", std::strerror(errno));
  std::ostringstream os;
  os << in.rdbuf();
  if (in.bad()) Fail("cannot read ", what, " '", path, "': read error");
  return os.str();
}

void CheckWritablePath(const std::string& path, const std::string& what) {
  if (path.empty()) Fail(what, " path is empty");
  std::string dir = DirName(path);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    Fail("cannot write ", what, " '", path, "': directory '", dir, "' does not exist");
  if (::access(dir.c_str(), W_OK) != 0)
    Fail("cannot write ", what, " '", path, "': directory '", dir, "' is not writable");
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    Fail("cannot write ", what, " '", path, "': it is a directory");
}

void WriteFileAtomically(const std::string& path, const std::string& bytes) {
  CheckWritablePath(path);
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) Fail("cannot write '", tmp, "': ", std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      Fail("cannot write '", path, "': ", std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    Fail("cannot write '", path, "': ", std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    Fail("cannot write '", path, "': ", std::strerror(err));
  }
}

std::string DirName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string MakeTempDir(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/" + prefix + "XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr)
    Fail("cannot create a temporary directory '", tmpl, "': ", std::strerror(errno));
  return buf.data();
}

void RemoveTree(const std::string& dir) {
  if (dir.empty() || dir == "/") return;
  ::nftw(
      dir.c_str(), [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p) == 0 ? 0 : 0; }, 16,
      FTW_DEPTH | FTW_PHYS);
}

std::string FindRunfile(const std::string& rel, const std::string& argv0) {
  for (const char* var : {"TEST_SRCDIR", "RUNFILES_DIR"}) {
    const char* root = std::getenv(var);
    if (root && *root && FileExists(std::string(root) + "/rlflow/" + rel)) return std::string(root) + "/rlflow/" + rel;
  }
  if (FileExists(rel)) return rel;
  if (!argv0.empty() && FileExists(argv0 + ".runfiles/rlflow/" + rel)) return argv0 + ".runfiles/rlflow/" + rel;
  // The running binary's own runfiles (a bazel-bin binary started directly).
  char exe[4096];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    std::string self(exe, static_cast<size_t>(n));
    if (FileExists(self + ".runfiles/rlflow/" + rel)) return self + ".runfiles/rlflow/" + rel;
  }
  return "";
}

}  // namespace rlflow
