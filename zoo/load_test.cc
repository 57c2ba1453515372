// LoadModel: a file is not held for the run; using it again (a copy, a
// second import) gives its contents, and a file changed since it was loaded
// is an error.
#include "zoo/load.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/file_util.h"
#include "zoo/zoo.h"

namespace rlflow {
namespace {

TEST(LoadModel, UsesTheFileAgainOnlyWhileItIsUnchanged) {
  const std::string dir = MakeTempDir("load_test_");
  const std::string path = dir + "/m.onnx", copy = dir + "/copy.onnx";
  const std::string bytes = ExportOnnxBytes(zoo::Build("squeezenet1_1", 1));
  WriteFileAtomically(path, bytes);

  LoadedModel m = LoadModel(path);
  EXPECT_EQ(m.file, path);
  EXPECT_EQ(m.fingerprint.size, bytes.size());
  EXPECT_EQ(m.fingerprint, FingerprintFile(path));
  m.CopyFileTo(copy);
  EXPECT_EQ(ReadFile(copy), bytes);
  EXPECT_EQ(m.ImportFileAgain({}).StructuralHash(), m.graph.StructuralHash());
  RemoveTree(copy);

  // Each use of the file fails once it changed, and writes nothing.
  auto expect_changed = [&](const std::string& why) {
    try {
      m.CopyFileTo(copy);
      ADD_FAILURE() << "a changed file was copied as the loaded one";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
    EXPECT_FALSE(FileExists(copy));
    try {
      m.ImportFileAgain({});
      ADD_FAILURE() << "a changed file was imported as the loaded one";
    } catch (const ModelFileChanged& e) {  // the optimiser's run error, never a note
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  // The same size, one byte different (in a weight: the model still
  // imports): still caught, by the hash.
  std::string changed = bytes;
  changed[changed.size() / 2] ^= 1;
  WriteFileAtomically(path, changed);
  expect_changed("changed while it was being optimised (same size");
  // Another size (and no longer a model).
  WriteFileAtomically(path, bytes + "x");
  expect_changed(std::to_string(bytes.size() + 1) + " now");
  // Removed: the read error names the file.
  RemoveTree(dir);
  expect_changed(path);
}

TEST(FileFingerprint, IsOfTheWholeContentsAcrossBlocks) {
  const std::string dir = MakeTempDir("load_test_");
  const std::string path = dir + "/f";
  // Three blocks and a bit; a change in the last block and in the first.
  std::string bytes(3 * FileBlockReader::kBlockBytes + 17, 'a');
  for (size_t k = 0; k < bytes.size(); k += 4099) bytes[k] = static_cast<char>(k);
  WriteFileAtomically(path, bytes);
  const FileFingerprint f = FingerprintFile(path);
  EXPECT_EQ(f.size, bytes.size());
  EXPECT_EQ(ReadFile(path), bytes);
  for (size_t at : {bytes.size() - 1, size_t{0}}) {
    std::string other = bytes;
    other[at] ^= 1;
    WriteFileAtomically(path, other);
    EXPECT_NE(FingerprintFile(path), f) << at;
  }
  WriteFileAtomically(path, bytes);
  EXPECT_EQ(FingerprintFile(path), f);
  RemoveTree(dir);
}

TEST(LoadModel, AZooModelHasNoFile) {
  LoadedModel m = LoadModel("resnet18.onnx");  // no such file here: the built-in model
  EXPECT_TRUE(m.from_zoo);
  EXPECT_TRUE(m.file.empty());
  EXPECT_THROW(LoadModel("no/such/resnet18.onnx"), Error);  // a path is never replaced by the zoo
}

}  // namespace
}  // namespace rlflow
