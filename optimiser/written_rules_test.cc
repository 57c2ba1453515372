// Every family of written rules (rules/written.rules, by name before "/")
// is in the checked-in database and fires on a model of the real-model
// corpus (//zoo:real_models) where the exporter wrote that form; and each
// rewrite computes what the model did.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>

#include "core/file_util.h"
#include "core/onnx_io.h"
#include "core/rewrite/matcher.h"
#include "core/rules/rule.h"
#include "core/rules/written.h"
#include "rules/testing.h"
#include "runtime/executor.h"

namespace rlflow {
namespace {

std::string Family(const std::string& written_name) { return written_name.substr(0, written_name.find('/')); }

TEST(WrittenRules, EachFamilyIsInTheDatabaseAndFiresOnTheCorpus) {
  const std::string path = FindRunfile("rules/written.rules");
  ASSERT_FALSE(path.empty());
  std::vector<rules::Rule> written = ParseWrittenRules(ReadFile(path), path);
  // The database holds each written rule, by id and name (regenerated with
  // the verifier's --written; README, "Rules").
  std::map<std::string, const rules::Rule*> by_id;
  for (const auto& r : testing::DefaultRules().rules()) by_id[r.id()] = &r;
  std::set<std::string> families;
  for (const auto& r : written) {
    families.insert(Family(r.written_name()));
    auto it = by_id.find(r.id());
    ASSERT_NE(it, by_id.end()) << r.written_name() << " (" << r.id() << ") is not in the database";
    EXPECT_EQ(it->second->written_name(), r.written_name());
  }
  std::vector<rules::Rule> db_written;
  for (const auto& r : testing::DefaultRules().rules())
    if (!r.written_name().empty()) db_written.push_back(r);
  EXPECT_EQ(db_written.size(), written.size()) << "the database has written rules the file does not";
  Matcher matcher(db_written, /*both_directions=*/false);

  std::map<std::string, int> fired;
  std::istringstream manifest(ReadFile(FindRunfile("zoo/real_models/models.txt")));
  std::string name, shape, other;
  int models = 0;
  while (manifest >> name >> shape >> other) {
    if (name.find("formula") == std::string::npos) continue;  // the models written with such forms
    ++models;
    ImportOptions at;
    at.input_shapes = ParseInputShapes(shape);
    Graph g = ImportOnnxFile(FindRunfile("zoo/real_models/" + name + ".onnx"), at);
    std::vector<at::Tensor> inputs = RandomInputs(g, 1);
    std::vector<at::Tensor> want = Executor(g).Run(inputs);
    for (const Match& m : matcher.FindAll(g)) {
      const std::string family = Family(matcher.rules()[m.rule].written_name());
      ++fired[family];
      Graph rewritten = matcher.Apply(g, m);
      std::vector<at::Tensor> got = Executor(rewritten).Run(inputs);
      ASSERT_EQ(got.size(), want.size());
      for (size_t k = 0; k < got.size(); ++k)
        EXPECT_LE(RelativeError(got[k], want[k]), 1e-5) << family << " on " << name;
    }
  }
  EXPECT_GE(models, 4);
  for (const std::string& f : families) EXPECT_GT(fired[f], 0) << f << " fires on no corpus model";
}

}  // namespace
}  // namespace rlflow
