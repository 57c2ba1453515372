// SameFile: what the optimiser compares its outputs with its inputs by, so
// that no spelling of a path (./, .., a symlink, a hard link) lets an output
// replace the model it reads.
#include "core/file_util.h"

#include <gtest/gtest.h>
#include <unistd.h>

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

}  // namespace
}  // namespace rlflow
