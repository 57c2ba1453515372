#include "core/file_util.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

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

bool SameFile(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  const bool a_exists = ::stat(a.c_str(), &sa) == 0, b_exists = ::stat(b.c_str(), &sb) == 0;
  if (a_exists && b_exists) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  if (a_exists != b_exists) return false;
  namespace fs = std::filesystem;
  std::error_code ea, eb;
  const fs::path ca = fs::weakly_canonical(fs::absolute(a, ea), ea), cb = fs::weakly_canonical(fs::absolute(b, eb), eb);
  if (ea || eb) return a == b;
  return ca == cb;
}

void CheckFileRoles(const std::vector<FileRole>& outputs, const std::vector<FileRole>& inputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].path.empty()) continue;
    for (size_t j = 0; j < i; ++j)
      if (!outputs[j].path.empty() && SameFile(outputs[i].path, outputs[j].path))
        Fail(outputs[i].what, " and ", outputs[j].what, " are the same file '", outputs[i].path, "'");
    for (const FileRole& in : inputs)
      if (!in.path.empty() && SameFile(outputs[i].path, in.path))
        Fail(outputs[i].what, " '", outputs[i].path, "' is ", in.what, " '", in.path, "'; write it elsewhere");
  }
}

namespace {

int OpenForReading(const std::string& path, const std::string& what, struct stat* st) {
  if (::stat(path.c_str(), st) != 0) Fail("cannot read ", what, " '", path, "': ", std::strerror(errno));
  if (S_ISDIR(st->st_mode)) Fail("cannot read ", what, " '", path, "': it is a directory");
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) Fail("cannot read ", what, " '", path, "': ", std::strerror(errno));
  return fd;
}

// read(2) into data[0, size): the bytes read (fewer only at the end of the
// file). Leaves `fd` open.
size_t ReadFully(int fd, char* data, size_t size, const std::string& path, const std::string& what) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::read(fd, data + done, std::min(size - done, kMaxBytesPerIoCall));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) Fail("cannot read ", what, " '", path, "': ", std::strerror(errno));
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

}  // namespace

std::string ReadFile(const std::string& path, const std::string& what) {
  struct stat st;
  const int fd = OpenForReading(path, what, &st);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  std::string bytes;
  // A regular file in one read of its size; then whatever else there is (a
  // pipe, a file that grew).
  size_t got = 0;
  if (S_ISREG(st.st_mode) && st.st_size > 0) {
    bytes.resize(static_cast<size_t>(st.st_size));
    got = ReadFully(fd, bytes.data(), bytes.size(), path, what);
    bytes.resize(got);
  }
  if (got == bytes.size()) {
    // Read into a chunk of its own: growing `bytes` at the end of a large
    // file would copy it.
    std::vector<char> chunk(size_t{64} << 10);
    while (true) {
      const size_t n = ReadFully(fd, chunk.data(), chunk.size(), path, what);
      bytes.append(chunk.data(), n);
      if (n < chunk.size()) break;
    }
  }
  return bytes;
}

FileBlockReader::FileBlockReader(const std::string& path, const std::string& what) : path_(path), what_(what) {
  struct stat st;
  fd_ = OpenForReading(path, what, &st);
  size_at_open_ = S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0;
}

FileBlockReader::~FileBlockReader() {
  if (fd_ >= 0) ::close(fd_);
}

std::string_view FileBlockReader::Next() {
  if (fd_ < 0) return {};
  block_.resize(kBlockBytes);
  const size_t n = ReadFully(fd_, block_.data(), block_.size(), path_, what_);
  if (n == 0) {
    ::close(fd_);
    fd_ = -1;
    return {};
  }
  fingerprint_.size += n;
  fingerprint_.hash = HashBytes(block_.data(), n, fingerprint_.hash);
  return {block_.data(), n};
}

FileFingerprint FingerprintFile(const std::string& path, const std::string& what) {
  FileBlockReader r(path, what);
  while (!r.Next().empty()) {
  }
  return r.fingerprint();
}

void CopyFileAtomically(const std::string& from, const std::string& to,
                        const std::function<void(const FileFingerprint&)>& check) {
  FileBlockReader r(from);
  WriteFileAtomicallyWith(to, [&](int fd) {
    for (std::string_view b = r.Next(); !b.empty(); b = r.Next()) WriteAll(fd, b.data(), b.size(), to);
    if (check) check(r.fingerprint());
  });
}

void CheckWritablePath(const std::string& path, const std::string& what) {
  if (path.empty()) Fail(what, " path is empty");
  if (IsSpecialFile(path)) {  // written in place (WriteFileAtomicallyWith)
    if (::access(path.c_str(), W_OK) != 0) Fail("cannot write ", what, " '", path, "': ", std::strerror(errno));
    return;
  }
  std::string dir = DirName(path);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    Fail("cannot write ", what, " '", path, "': directory '", dir, "' does not exist");
  if (::access(dir.c_str(), W_OK) != 0)
    Fail("cannot write ", what, " '", path, "': directory '", dir, "' is not writable");
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    Fail("cannot write ", what, " '", path, "': it is a directory");
}

void WriteAll(int fd, const char* data, size_t size, const std::string& path) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::write(fd, data + done, std::min(size - done, kMaxBytesPerIoCall));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) Fail("cannot write '", path, "': ", std::strerror(errno));
    done += static_cast<size_t>(n);
  }
}

std::string WriteTarget(const std::string& path) {
  struct stat st, lst;
  if (::lstat(path.c_str(), &lst) != 0 || !S_ISLNK(lst.st_mode)) return path;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return path;
  std::error_code ec;
  const std::filesystem::path target = std::filesystem::canonical(path, ec);
  return ec ? path : target.string();
}

bool IsSpecialFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

namespace {
// The registry of PendingTemporaryFile: fixed slots (no allocation), each a
// state (0 free, 1 being filled, 2 holding a path), the process that wrote it
// and a path, read by a signal handler.
constexpr int kPendingSlots = 64;
constexpr size_t kPendingPathBytes = 4096;
struct PendingSlot {
  std::atomic<int> state{0};
  pid_t owner = 0;  // a child forked mid-write (before its exec) removes nothing of its parent's
  char path[kPendingPathBytes];
};
PendingSlot pending_slots[kPendingSlots];
static_assert(std::atomic<int>::is_always_lock_free, "read in a signal handler");
}  // namespace

PendingTemporaryFile::PendingTemporaryFile(const std::string& path) {
  if (path.size() >= kPendingPathBytes) return;
  for (int k = 0; k < kPendingSlots; ++k) {
    int free = 0;
    if (!pending_slots[k].state.compare_exchange_strong(free, 1)) continue;
    std::memcpy(pending_slots[k].path, path.c_str(), path.size() + 1);
    pending_slots[k].owner = ::getpid();
    pending_slots[k].state.store(2);
    slot_ = k;
    return;
  }
}

PendingTemporaryFile::~PendingTemporaryFile() {
  if (slot_ >= 0) pending_slots[slot_].state.store(0);
}

void RemovePendingTemporaryFiles() {
  const pid_t self = ::getpid();
  for (PendingSlot& slot : pending_slots)
    if (slot.state.load() == 2 && slot.owner == self) ::unlink(slot.path);
}

void WriteFileAtomicallyWith(const std::string& given, const std::function<void(int fd)>& write) {
  CheckWritablePath(given);
  if (IsSpecialFile(given)) {
    // A device, FIFO or socket (--output=/dev/null, --report=/dev/stdout
    // into a pipe) is written in place: a file renamed onto its name would
    // replace the node itself.
    int fd = ::open(given.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) Fail("cannot write '", given, "': ", std::strerror(errno));
    try {
      write(fd);
    } catch (...) {
      ::close(fd);
      throw;
    }
    if (::close(fd) != 0) Fail("cannot write '", given, "': ", std::strerror(errno));
    return;
  }
  // A symlink to a file: the file is replaced and the link kept.
  const std::string path = WriteTarget(given);
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  PendingTemporaryFile pending(tmp);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) Fail("cannot write '", path, "': ", std::strerror(errno));
  try {
    write(fd);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
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

std::vector<std::string> TemporaryFilesOf(const std::string& path) {
  std::vector<std::string> found;
  const std::string base = BaseName(path);
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(DirName(path), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(base + ".tmp.", 0) == 0 || name.rfind(base + ".data.tmp.", 0) == 0)
      found.push_back(DirName(path) + "/" + name);
  }
  std::sort(found.begin(), found.end());
  return found;
}

void WriteFileAtomically(const std::string& path, const std::string& bytes) {
  WriteFileAtomicallyWith(path, [&](int fd) { WriteAll(fd, bytes.data(), bytes.size(), path); });
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
  // A Bazel test's own directory first: Bazel empties it before each run of
  // the test, so what a test leaves there does not pile up in /tmp.
  const char* base = std::getenv("TEST_TMPDIR");
  if (!(base && *base)) base = std::getenv("TMPDIR");
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
