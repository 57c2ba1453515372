#pragma once
// Whole-file reads and atomic writes (temp file in the same directory, then
// rename), so that a failed or interrupted write never leaves a partial file.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace rlflow {

// Throws rlflow::Error("cannot read <what> '<path>': <reason>"). A regular
// file is read into a string of its size (held once, not grown and copied).
std::string ReadFile(const std::string& path, const std::string& what = "file");

// A file's size and a hash of its contents (HashBytes chained over blocks of
// FileBlockReader::kBlockBytes): whether a file changed since it was read,
// without holding its bytes.
struct FileFingerprint {
  uint64_t size = 0, hash = 0;
  bool operator==(const FileFingerprint& o) const { return size == o.size && hash == o.hash; }
  bool operator!=(const FileFingerprint& o) const { return !(*this == o); }
};

// Reads a file block by block, fingerprinting what it reads; errors as
// ReadFile's.
class FileBlockReader {
 public:
  static constexpr size_t kBlockBytes = size_t{1} << 20;
  FileBlockReader(const std::string& path, const std::string& what = "file");
  ~FileBlockReader();
  FileBlockReader(const FileBlockReader&) = delete;
  FileBlockReader& operator=(const FileBlockReader&) = delete;
  // The next block (kBlockBytes, the last one shorter), empty at the end of
  // the file; valid until the next call.
  std::string_view Next();
  // Of the bytes read so far (the whole file once Next returned empty).
  const FileFingerprint& fingerprint() const { return fingerprint_; }
  // The file's size when it was opened (0 for what is not a regular file).
  uint64_t size_at_open() const { return size_at_open_; }

 private:
  std::string path_, what_;
  int fd_ = -1;
  uint64_t size_at_open_ = 0;
  std::vector<char> block_;
  FileFingerprint fingerprint_;
};

FileFingerprint FingerprintFile(const std::string& path, const std::string& what = "file");
// Copies `from` to `to` atomically, block by block; `check` is called with
// the fingerprint of the bytes copied before `to` is renamed into place (it
// may throw: then nothing is written).
void CopyFileAtomically(const std::string& from, const std::string& to,
                        const std::function<void(const FileFingerprint&)>& check = {});
// Fails unless `path`'s directory exists and is writable, and path itself is
// not a directory. Call before long work so that bad paths fail fast.
void CheckWritablePath(const std::string& path, const std::string& what = "output");
// Registers the temporary file of a write in progress for as long as it
// lives, so that RemovePendingTemporaryFiles can remove it. The atomic
// writes below register theirs.
class PendingTemporaryFile {
 public:
  explicit PendingTemporaryFile(const std::string& path);
  ~PendingTemporaryFile();
  PendingTemporaryFile(const PendingTemporaryFile&) = delete;
  PendingTemporaryFile& operator=(const PendingTemporaryFile&) = delete;

 private:
  int slot_ = -1;
};
// Removes the temporary files of the writes in progress (unlink(2) only:
// async-signal-safe). core/cli calls it when a second Ctrl-C or SIGTERM ends
// the process in the middle of a write, so that nothing is left behind, not
// even a partial temporary file (a model's data file can be gigabytes).
void RemovePendingTemporaryFiles();
// The temporary files of atomic writes of `path` and of its external data
// file ("<path>.tmp.<pid>", "<path>.data.tmp.<pid>") in its directory: what
// an interrupted or failed write would have left (tests check for none).
std::vector<std::string> TemporaryFilesOf(const std::string& path);
// Writes `bytes` to `path` atomically.
void WriteFileAtomically(const std::string& path, const std::string& bytes);
// Writes to `path` atomically what `write` writes to the file descriptor it
// is given (a temporary file beside `path`; removed if `write` throws). A
// symlink to a regular file stays a link: its target is replaced. A path
// that is a device, FIFO or socket (/dev/null, /dev/stdout into a pipe) is
// written in place, since a file renamed onto it would replace the node.
void WriteFileAtomicallyWith(const std::string& path, const std::function<void(int fd)>& write);
// The file an atomic write of `path` replaces: the target of a symlink to a
// regular file, else `path` itself.
std::string WriteTarget(const std::string& path);
// `path` exists and is neither a regular file nor a directory (symlinks
// followed): a device, FIFO or socket.
bool IsSpecialFile(const std::string& path);
// At most this many bytes per read(2) or write(2) on a file: a signal that
// arrives during such a call is handled only when it returns, and two Ctrl-C
// within one call of hundreds of megabytes (a model's weights) would be one.
constexpr size_t kMaxBytesPerIoCall = size_t{8} << 20;
// write(2) until all of `data` is written; errors name `path`.
void WriteAll(int fd, const char* data, size_t size, const std::string& path);
bool FileExists(const std::string& path);
// Whether writing `a` (atomically: a new file renamed onto the name) would
// replace the file `b` names: both exist and are one file (device and inode,
// symlinks followed), or neither exists and they are one path once `.`,
// `..` and symlinked directories are resolved.
bool SameFile(const std::string& a, const std::string& b);
// A file a program reads or writes, with what its messages call it ("--output",
// "the input model").
struct FileRole {
  std::string what;
  std::string path;
};
// Fails unless the outputs are distinct files and none would replace one of
// the inputs (SameFile; empty paths are skipped): "<what> and <what> are the
// same file 'P'", "<what> 'P' is <what> 'Q'; write it elsewhere".
void CheckFileRoles(const std::vector<FileRole>& outputs, const std::vector<FileRole>& inputs);
// "dir/name" -> "dir" ("name" -> ".", "/name" -> "/") and -> "name".
std::string DirName(const std::string& path);
std::string BaseName(const std::string& path);
// A new directory named <prefix>XXXXXX under $TEST_TMPDIR (in a Bazel test),
// else $TMPDIR, else /tmp; and its removal with everything in it.
std::string MakeTempDir(const std::string& prefix);
void RemoveTree(const std::string& dir);
// Relative paths are resolved against $BUILD_WORKING_DIRECTORY (the directory
// `bazel run` was started from) when it is set.
std::string ResolveUserPath(const std::string& path);
// A Bazel runfile of this workspace ("rules/default.rules.pb"): under
// $TEST_SRCDIR or $RUNFILES_DIR, the working directory (`bazel run`), or
// `<argv0>.runfiles` when argv0 is given. Empty if it is nowhere.
std::string FindRunfile(const std::string& rel, const std::string& argv0 = "");

}  // namespace rlflow
