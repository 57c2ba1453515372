// Runs the optimiser binary over every model of the corpus of malformed and
// unusual models (tools/fuzz/make_corpus.py). For each: no death by signal,
// no hang (each run is bounded), and either success with the output written
// or exactly one 'error:' line with no output file (and no temp file) left.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/file_util.h"
#include "core/subprocess.h"

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

struct RunOutcome {
  int status = 0;
  bool timed_out = false;
  std::string err;
};

// Runs the optimiser with a wall-clock bound; stderr to a file.
RunOutcome RunBounded(const std::vector<std::string>& args, const std::string& err_path, int limit_s) {
  ProgramIo io;
  io.err = err_path;
  const pid_t pid = testing::StartProcess(args, io);
  RunOutcome r;
  EXPECT_GT(pid, 0);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(limit_s);
  for (;;) {
    pid_t done = waitpid(pid, &r.status, WNOHANG);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &r.status, 0);
      r.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  r.err = ReadFile(err_path);
  return r;
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
  std::string err = dir + "/" + e.name + ".stderr";
  {
    std::ofstream f(model, std::ios::binary);
    f.write(e.bytes.data(), static_cast<std::streamsize>(e.bytes.size()));
  }
  RunOutcome r = RunBounded({Runfile("optimiser/optimiser"), "--model=" + model, "--output=" + output,
                             "--rules=" + Runfile("rules/default.rules.pb"), "--budget=20", "--time_limit=5",
                             "--measure_runs=1", "--timing_cache=" + dir + "/timing-cache.txt"},
                            err, 60);
  ASSERT_FALSE(r.timed_out) << e.name << ": still running after 60 s";
  ASSERT_TRUE(WIFEXITED(r.status)) << e.name << ": killed by signal " << WTERMSIG(r.status) << "\n" << r.err;
  int code = WEXITSTATUS(r.status);
  std::vector<std::string> lines = NonLogLines(r.err);
  EXPECT_FALSE(FileExists(output + ".tmp")) << e.name << ": temp file left";
  if (code == 0) {
    EXPECT_TRUE(FileExists(output)) << e.name << ": success but no output";
    for (const auto& l : lines) EXPECT_EQ(l.rfind("error", 0), std::string::npos) << e.name << ": " << l;
  } else {
    EXPECT_FALSE(FileExists(output)) << e.name << ": output written despite exit code " << code;
    ASSERT_EQ(lines.size(), 1u) << e.name << ": expected one error line, stderr:\n" << r.err;
    EXPECT_EQ(lines[0].rfind("error: ", 0), 0u) << e.name << ": " << lines[0];
    EXPECT_LT(lines[0].size(), 600u) << e.name << ": " << lines[0];
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
