// SameFile: what the optimiser compares its outputs with its inputs by, so
// that no spelling of a path (./, .., a symlink, a hard link) lets an output
// replace the model it reads. Atomic writes: special files and symlinks, and
// no temporary file left when a second signal ends the process mid-write.
#include "core/file_util.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <vector>

#include "core/cli.h"
#include "core/error.h"

namespace rlflow {
namespace {

TEST(FileUtil, SameFileComparesFilesNotSpellings) {
  const std::string dir = MakeTempDir("same_file_");
  WriteFileAtomically(dir + "/a.onnx", "a");
  WriteFileAtomically(dir + "/b.onnx", "a");  // equal bytes, another file
  ASSERT_EQ(::symlink((dir + "/a.onnx").c_str(), (dir + "/link.onnx").c_str()), 0);
  ASSERT_EQ(::link((dir + "/a.onnx").c_str(), (dir + "/hard.onnx").c_str()), 0);
  ASSERT_EQ(::mkdir((dir + "/sub").c_str(), 0755), 0);
  ASSERT_EQ(::symlink((dir + "/sub").c_str(), (dir + "/subdir_link").c_str()), 0);

  // Existing files: one file by device and inode.
  EXPECT_TRUE(SameFile(dir + "/a.onnx", dir + "/a.onnx"));
  EXPECT_TRUE(SameFile(dir + "/./a.onnx", dir + "/a.onnx"));
  EXPECT_TRUE(SameFile(dir + "/sub/../a.onnx", dir + "/a.onnx"));
  EXPECT_TRUE(SameFile(dir + "/link.onnx", dir + "/a.onnx"));
  EXPECT_TRUE(SameFile(dir + "/hard.onnx", dir + "/a.onnx"));
  EXPECT_FALSE(SameFile(dir + "/b.onnx", dir + "/a.onnx"));
  // A file that does not exist is not one that does.
  EXPECT_FALSE(SameFile(dir + "/new.onnx", dir + "/a.onnx"));
  EXPECT_FALSE(SameFile(dir + "/a.onnx", dir + "/new.onnx"));
  // Neither exists: one path once ., .. and symlinked directories resolve.
  EXPECT_TRUE(SameFile(dir + "/new.onnx", dir + "/./new.onnx"));
  EXPECT_TRUE(SameFile(dir + "/sub/new.onnx", dir + "/subdir_link/new.onnx"));
  EXPECT_TRUE(SameFile(dir + "/sub/../new.onnx", dir + "/new.onnx"));
  EXPECT_FALSE(SameFile(dir + "/new.onnx", dir + "/other.onnx"));
  EXPECT_FALSE(SameFile(dir + "/sub/new.onnx", dir + "/new.onnx"));
  RemoveTree(dir);
}

// An atomic write replaces a file by renaming a new one onto its name. Onto
// a FIFO or a device (--report=/dev/stdout into a pipe, --output=/dev/null)
// that replaced the node itself (2026-11-29: /dev/null became a regular
// file); such paths are written in place. A symlink to a file stays a link.
TEST(FileUtil, AtomicWritesKeepSpecialFilesAndSymlinks) {
  const std::string dir = MakeTempDir("special_files_");
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  // A reader that never blocks the test: non-blocking, for at most 10 s.
  std::string got;
  std::thread reader([&] {
    int fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
    if (fd < 0) return;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    char buf[256];
    while (got.size() < 5 && std::chrono::steady_clock::now() < deadline) {
      const ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n > 0) got.append(buf, static_cast<size_t>(n));
      if (n <= 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ::close(fd);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the reader has opened it
  std::string error;
  try {
    WriteFileAtomically(fifo, "bytes");
  } catch (const Error& e) {
    error = e.what();
  }
  reader.join();
  EXPECT_EQ(error, "");
  EXPECT_EQ(got, "bytes");
  struct stat st;
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced by a file";

  WriteFileAtomically(dir + "/target.onnx", "old");
  ASSERT_EQ(::symlink((dir + "/target.onnx").c_str(), (dir + "/latest.onnx").c_str()), 0);
  WriteFileAtomically(dir + "/latest.onnx", "new");
  ASSERT_EQ(::lstat((dir + "/latest.onnx").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode)) << "the symlink was replaced by a file";
  EXPECT_EQ(ReadFile(dir + "/target.onnx"), "new");
  RemoveTree(dir);
}

std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// A test's temporary directories live in its own $TEST_TMPDIR (which Bazel
// empties before each run), not in /tmp where every run of the test suite
// left them; outside a test, $TMPDIR.
TEST(FileUtil, TemporaryDirectoriesOfATestStayInItsOwnDirectory) {
  const std::string test_tmp = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "";
  ASSERT_FALSE(test_tmp.empty()) << "run under bazel test";
  const std::string in_test = MakeTempDir("scratch_");
  EXPECT_EQ(DirName(in_test), test_tmp);
  EXPECT_EQ(BaseName(in_test).rfind("scratch_", 0), 0u) << in_test;
  const std::string other = MakeTempDir("other_base_");
  const char* tmpdir = std::getenv("TMPDIR");
  const std::string saved_tmpdir = tmpdir ? tmpdir : "";
  ::setenv("TMPDIR", other.c_str(), 1);
  ::unsetenv("TEST_TMPDIR");
  const std::string outside = MakeTempDir("scratch_");
  ::setenv("TEST_TMPDIR", test_tmp.c_str(), 1);
  if (tmpdir)
    ::setenv("TMPDIR", saved_tmpdir.c_str(), 1);
  else
    ::unsetenv("TMPDIR");
  EXPECT_EQ(DirName(outside), other);
  RemoveTree(in_test);
  RemoveTree(other);
  EXPECT_FALSE(FileExists(in_test));
  EXPECT_FALSE(FileExists(outside));
}

// The temporary file of a write in progress is registered, and
// RemovePendingTemporaryFiles removes it (and nothing else).
TEST(FileUtil, PendingTemporaryFilesAreRemovedOnRequest) {
  const std::string dir = MakeTempDir("pending_");
  WriteFileAtomically(dir + "/done.onnx", "done");
  EXPECT_THROW(WriteFileAtomicallyWith(dir + "/out.onnx",
                                       [&](int fd) {
                                         WriteAll(fd, "part", 4, dir + "/out.onnx");
                                         ASSERT_EQ(Names(dir).size(), 2u);  // done.onnx and the temporary file
                                         EXPECT_EQ(TemporaryFilesOf(dir + "/out.onnx").size(), 1u);
                                         EXPECT_EQ(TemporaryFilesOf(dir + "/done.onnx").size(), 0u);
                                         RemovePendingTemporaryFiles();
                                         EXPECT_EQ(Names(dir), std::vector<std::string>{"done.onnx"});
                                         Fail("stop");
                                       }),
               Error);
  // A child forked mid-write (as before an exec) removes nothing of its
  // parent's.
  EXPECT_THROW(WriteFileAtomicallyWith(dir + "/out.onnx",
                                       [&](int fd) {
                                         WriteAll(fd, "part", 4, dir + "/out.onnx");
                                         pid_t child = ::fork();
                                         if (child == 0) {
                                           RemovePendingTemporaryFiles();
                                           ::_exit(0);
                                         }
                                         int status = 0;
                                         ASSERT_EQ(::waitpid(child, &status, 0), child);
                                         EXPECT_EQ(Names(dir).size(), 2u);
                                         Fail("stop");
                                       }),
               Error);
  // The names TemporaryFilesOf finds: the file's and its data file's.
  for (const char* name : {"out.onnx.tmp.7", "out.onnx.data.tmp.7", "out.onnx2.tmp.7", "out.onnx.tmpx"})
    WriteFileAtomically(dir + "/" + name, "");
  EXPECT_EQ(TemporaryFilesOf(dir + "/out.onnx"),
            (std::vector<std::string>{dir + "/out.onnx.data.tmp.7", dir + "/out.onnx.tmp.7"}));
  for (const char* name : {"out.onnx.tmp.7", "out.onnx.data.tmp.7", "out.onnx2.tmp.7", "out.onnx.tmpx"})
    ::unlink((dir + "/" + name).c_str());
  RemovePendingTemporaryFiles();  // nothing pending: nothing removed
  EXPECT_EQ(Names(dir), std::vector<std::string>{"done.onnx"});
  EXPECT_EQ(ReadFile(dir + "/done.onnx"), "done");
}

// A second SIGTERM (or Ctrl-C) in the middle of a write ends the process
// with nothing written: no output and no temporary file.
TEST(FileUtil, ASecondSignalMidWriteLeavesNoTemporaryFile) {
  for (int sig : {SIGINT, SIGTERM}) {
    const std::string dir = MakeTempDir("signal_");
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      cli::InstallInterruptHandler();
      WriteFileAtomicallyWith(dir + "/out.onnx", [&](int fd) {
        WriteAll(fd, "part", 4, dir + "/out.onnx");
        std::raise(sig);  // the first: a request to stop, noted
        std::raise(sig);  // the second: the process ends
      });
      ::_exit(0);  // not reached
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << "status " << status;
    EXPECT_EQ(Names(dir), std::vector<std::string>{}) << "signal " << sig;
  }
}

}  // namespace
}  // namespace rlflow
