// Generator: exact fingerprints find known identities; output is
// deterministic; shards merge to the single-run result.
#include "generator/enumerate.h"

#include <gtest/gtest.h>

#include <set>

namespace rlflow::generator {
namespace {

Settings Small() {
  Settings s;
  s.max_ops = 2;
  s.threads = 2;
  return s;
}

std::set<std::string> Texts(const rules::CandidateSet& c) {
  std::set<std::string> out;
  for (const auto& r : c.candidates()) out.insert(RuleToString(r));
  return out;
}

TEST(Generator, FindsKnownIdentities) {
  Stats stats;
  rules::CandidateSet c = MakeCandidates({Enumerate(Small(), &stats, nullptr)}, &stats);
  EXPECT_GT(stats.graphs, 1000);
  EXPECT_GT(stats.candidates, 100);
  std::set<std::string> t = Texts(c);
  // Matrix-product associativity, in either direction.
  EXPECT_TRUE(t.count("MatMul(MatMul(A1,M1),C1) => MatMul(A1,MatMul(M1,C1))") ||
              t.count("MatMul(A1,MatMul(M1,C1)) => MatMul(MatMul(A1,M1),C1)"));
  // A per-channel shift folds into the convolution's bias.
  bool bias_fold = false;
  for (const auto& s : t)
    bias_fold |= s.find("Conv[pads=[1,1,1,1]](X1,W1,Reshape(S1,[-1]))") != std::string::npos &&
                 s.find("Add(S1,Conv[pads=[1,1,1,1]](X1,W1))") != std::string::npos;
  EXPECT_TRUE(bias_fold);
  // Relu commutes with transposition.
  EXPECT_TRUE(t.count("Transpose[perm=[1,0]](Relu(A1)) => Relu(Transpose[perm=[1,0]](A1))") ||
              t.count("Relu(Transpose[perm=[1,0]](A1)) => Transpose[perm=[1,0]](Relu(A1))"));
}

// Over half the first-level choices (shard 0 of 2): the threads split a
// shard's choices as they split the whole set, and the whole set took 48 s
// under ASan with the fuzzers' coverage here (the single-threaded run is
// most of it).
TEST(Generator, TheThreadCountDoesNotChangeTheResult) {
  Stats a, b;
  Settings two_threads = Small();
  two_threads.shard_count = 2;
  ASSERT_EQ(two_threads.threads, 2);
  std::string one = SerializeDeterministic(MakeCandidates({Enumerate(two_threads, &a, nullptr)}, &a));
  EXPECT_GT(a.graphs, 500);
  Settings single_thread = two_threads;
  single_thread.threads = 1;
  std::string two = SerializeDeterministic(MakeCandidates({Enumerate(single_thread, &b, nullptr)}, &b));
  EXPECT_EQ(one, two) << "thread count changed the result";
}

TEST(Generator, ShardsMergeToTheResultOfOneRun) {
  Stats a, s;
  std::string one = SerializeDeterministic(MakeCandidates({Enumerate(Small(), &a, nullptr)}, &a));
  Settings s0 = Small(), s1 = Small();
  s0.shard_count = s1.shard_count = 2;
  s1.shard_index = 1;
  rules::GraphShard g0 = Enumerate(s0, &s, nullptr), g1 = Enumerate(s1, &s, nullptr);
  EXPECT_GT(g0.graphs_size(), 0);
  EXPECT_GT(g1.graphs_size(), 0);
  EXPECT_EQ(SerializeDeterministic(MakeCandidates({g0, g1}, &s)), one) << "merged shards differ from one run";
}

}  // namespace
}  // namespace rlflow::generator
