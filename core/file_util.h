#pragma once
// Whole-file reads and atomic writes (temp file in the same directory, then
// rename), so that a failed or interrupted write never leaves a partial file.
#include <string>

namespace rlflow {

// Throws rlflow::Error("cannot read <what> '<path>': <reason>").
std::string ReadFile(const std::string& path, const std::string& what = "file");
// Fails unless `path`'s directory exists and is writable, and path itself is
// not a directory. Call before long work so that bad paths fail fast.
void CheckWritablePath(const std::string& path, const std::string& what = "output");
// Writes `bytes` to `path` atomically.
void WriteFileAtomically(const std::string& path, const std::string& bytes);
bool FileExists(const std::string& path);
// "dir/name" -> "dir" ("name" -> ".", "/name" -> "/") and -> "name".
std::string DirName(const std::string& path);
std::string BaseName(const std::string& path);
// A new directory under $TMPDIR (else /tmp) named <prefix>XXXXXX, and its
// removal with everything in it.
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
