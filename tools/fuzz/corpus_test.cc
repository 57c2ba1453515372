// Runs the optimiser's pipeline (what the optimiser binary runs after its
// flags, optimiser/pipeline.h) over every model of the corpus of malformed
// and unusual models (tools/fuzz/make_corpus.py), in this process: a process
// per model spent about 1 s of its 1.3 s starting libtorch. For each model:
// no crash (it would end the test), no hang (the test's timeout), and either
// success with the output written, or an error (the binary prints its first
// line as its one 'error:' line) with no output file and no temp file left;
// nothing else is printed to stderr (a library's own message there would be a
// second line). The binary's own error handling (flags, exit codes, one line)
// is tested by //optimiser:optimiser_cli_errors_test.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/file_util.h"
#include "core/rules/rule.h"
#include "optimiser/pipeline.h"

namespace rlflow {
namespace {

struct Entry {
  std::string name, bytes;
};

std::string Runfile(const std::string& path) { return std::string(std::getenv("TEST_SRCDIR")) + "/rlflow/" + path; }
std::string TempDir() { return std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp"; }

std::vector<Entry> LoadCorpus() {
  std::string data = ReadFile(Runfile("tools/fuzz/corpus.bin"));
  std::vector<Entry> out;
  size_t pos = 0;
  while (pos < data.size()) {
    size_t nl = data.find('\n', pos);
    std::string header = data.substr(pos, nl - pos);
    size_t sp = header.rfind(' ');
    size_t size = std::stoul(header.substr(sp + 1));
    out.push_back({header.substr(0, sp), data.substr(nl + 1, size)});
    pos = nl + 1 + size;
  }
  return out;
}

const std::vector<Entry>& Corpus() {
  static const std::vector<Entry>* corpus = new std::vector<Entry>(LoadCorpus());
  return *corpus;
}

// The rule database, read once for all models: reading and checking its
// rules was most of a case's time (0.4 s a model).
const std::shared_ptr<const rules::RuleDatabase>& Rules() {
  static const auto* db = new std::shared_ptr<const rules::RuleDatabase>(
      std::make_shared<const rules::RuleDatabase>(LoadRuleDatabase(Runfile("rules/default.rules.pb"))));
  return *db;
}

// stderr lines that are not glog lines ("I1122 ...", "W1122 ...").
std::vector<std::string> NonLogLines(const std::string& err) {
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos < err.size()) {
    size_t end = err.find('\n', pos);
    std::string line = err.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    bool glog = line.size() > 5 && (line[0] == 'I' || line[0] == 'W') && isdigit(line[1]) && isdigit(line[4]);
    if (!line.empty() && !glog) lines.push_back(line);
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return lines;
}

class CorpusTest : public ::testing::TestWithParam<int> {};

TEST_P(CorpusTest, CleanResultOrOneErrorLine) {
  const Entry& e = Corpus().at(GetParam());
  std::string dir = TempDir();
  std::string model = dir + "/" + e.name + ".onnx";
  std::string output = dir + "/" + e.name + ".out.onnx";
  {
    std::ofstream f(model, std::ios::binary);
    f.write(e.bytes.data(), static_cast<std::streamsize>(e.bytes.size()));
  }
  PipelineOptions o;
  o.model = model;
  o.output = output;
  o.rules = Runfile("rules/default.rules.pb");
  o.loaded_rules = Rules();
  o.budget = 20;
  o.time_limit_s = 5;
  o.measure_runs = 1;
  o.timing_cache = dir + "/timing-cache.txt";
  bool ok = false;
  std::string error;  // the first line, as the binary prints it
  // gtest's capture of this process's stderr (fd 2).
  ::testing::internal::CaptureStderr();
  try {
    RunPipeline(o);
    ok = true;
  } catch (const std::bad_alloc&) {
    error = "out of memory";
  } catch (const std::exception& ex) {
    error = FirstLine(ex.what());
  }
  const std::string printed = ::testing::internal::GetCapturedStderr();
  for (const std::string& line : NonLogLines(printed)) ADD_FAILURE() << e.name << ": printed to stderr: " << line;
  EXPECT_EQ(TemporaryFilesOf(output), std::vector<std::string>{}) << e.name << ": temp file left";
  if (ok) {
    EXPECT_TRUE(FileExists(output)) << e.name << ": success but no output";
  } else {
    EXPECT_FALSE(FileExists(output)) << e.name << ": output written despite the error: " << error;
    EXPECT_FALSE(error.empty()) << e.name << ": an error without a message";
    EXPECT_LT(error.size(), 600u) << e.name << ": " << error;
  }
  ::unlink(model.c_str());
  ::unlink(output.c_str());
}

// The corpus is made by a script with a fixed seed; its size is checked so
// that a broken generator cannot shrink the test to nothing.
TEST(Corpus, HasAtLeast500Models) { EXPECT_GE(Corpus().size(), 500u); }

INSTANTIATE_TEST_SUITE_P(Models, CorpusTest, ::testing::Range(0, 520), [](const ::testing::TestParamInfo<int>& info) {
  std::string n = Corpus().at(info.param).name;
  for (char& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
});

}  // namespace
}  // namespace rlflow
