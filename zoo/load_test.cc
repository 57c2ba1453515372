// LoadModel: a file is not held for the run; reading it again gives its
// bytes, and a file changed since it was loaded is an error.
#include "zoo/load.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/file_util.h"
#include "zoo/zoo.h"

namespace rlflow {
namespace {

TEST(LoadModel, ReadsTheFileAgainOnlyWhileItIsUnchanged) {
  const std::string dir = MakeTempDir("load_test_");
  const std::string path = dir + "/m.onnx";
  const std::string bytes = ExportOnnxBytes(zoo::Build("squeezenet1_1", 1));
  WriteFileAtomically(path, bytes);

  LoadedModel m = LoadModel(path);
  EXPECT_EQ(m.file, path);
  EXPECT_EQ(m.file_size, bytes.size());
  EXPECT_EQ(m.ReadFileAgain(), bytes);

  // The same size, one byte different: still caught (by the hash).
  std::string changed = bytes;
  changed[changed.size() / 2] ^= 1;
  WriteFileAtomically(path, changed);
  try {
    m.ReadFileAgain();
    ADD_FAILURE() << "a changed file was read as the loaded one";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("changed while it was being optimised (same size"), std::string::npos)
        << e.what();
  }
  // Another size.
  WriteFileAtomically(path, bytes + "x");
  try {
    m.ReadFileAgain();
    ADD_FAILURE() << "a longer file was read as the loaded one";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(bytes.size() + 1) + " now"), std::string::npos) << e.what();
  }
  // Removed: the read error names the file.
  RemoveTree(dir);
  try {
    m.ReadFileAgain();
    ADD_FAILURE() << "a removed file was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(LoadModel, AZooModelHasNoFile) {
  LoadedModel m = LoadModel("resnet18.onnx");  // no such file here: the built-in model
  EXPECT_TRUE(m.from_zoo);
  EXPECT_TRUE(m.file.empty());
  EXPECT_THROW(LoadModel("no/such/resnet18.onnx"), Error);  // a path is never replaced by the zoo
}

}  // namespace
}  // namespace rlflow
