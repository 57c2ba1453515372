// Replays a fuzz target's seed corpus (the corpus of malformed models, the
// default rule database, sample timing caches) in every test run: each input
// must return, under the same build as the product (and under --config=asan
// with the sanitizers).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "tools/fuzz/fuzz_target.h"

namespace rlflow {
namespace {

std::vector<std::string> Inputs() {
  std::vector<std::string> out;
  const char* kind = std::getenv("FUZZ_SEEDS");
  std::string k = kind ? kind : "";
  if (k == "models") {
    std::string data = ReadFile(FindRunfile("tools/fuzz/corpus.bin"));
    size_t pos = 0;
    while (pos < data.size()) {
      size_t nl = data.find('\n', pos);
      size_t size = std::stoul(data.substr(data.rfind(' ', nl) + 1, nl));
      out.push_back(data.substr(nl + 1, size));
      pos = nl + 1 + size;
    }
  } else if (k == "rules") {
    std::string db = ReadFile(FindRunfile("rules/default.rules.pb"));
    out.push_back(db);
    // Truncations and byte flips of the real database.
    for (size_t cut : {size_t{0}, size_t{1}, size_t{7}, db.size() / 3, db.size() / 2, db.size() - 1})
      out.push_back(db.substr(0, cut));
    for (size_t at = 3; at < db.size(); at += db.size() / 41) {
      std::string flipped = db;
      flipped[at] = static_cast<char>(flipped[at] ^ 0x5a);
      out.push_back(flipped);
    }
  } else if (k == "timing_cache") {
    out = {"",
           "rlflow-timing-cache 1\n",
           "rlflow-timing-cache 1\n0.5\tcpu|Relu float32[1,4]\n",
           "rlflow-timing-cache 1\nnan\tkey\n",
           "rlflow-timing-cache 1\n-1\tkey\n",
           "rlflow-timing-cache 1\n1e999\tk\n",
           "rlflow-timing-cache 1\n0.1\t\n",
           "not a cache\n",
           std::string("rlflow-timing-cache 1\n\0\t\0\n", 26),
           "rlflow-timing-cache 1\n1.0 key\n"};
  }
  return out;
}

TEST(FuzzReplay, SeedCorpusRuns) {
  std::vector<std::string> inputs = Inputs();
  ASSERT_GT(inputs.size(), 5u) << "no seed inputs (FUZZ_SEEDS="
                               << (std::getenv("FUZZ_SEEDS") ? std::getenv("FUZZ_SEEDS") : "") << ")";
  for (const std::string& in : inputs)
    EXPECT_EQ(LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(in.data()), in.size()), 0);
}

}  // namespace
}  // namespace rlflow
