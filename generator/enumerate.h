#pragma once
// TASO-style enumeration of small operator graphs and their fingerprints.
//
// A universe of typed input tensors (with symbolic shapes) and a list of
// operator templates over the op registry define the search space. Every
// DAG of up to `max_ops` template applications is enumerated once (each DAG
// via its lexicographically smallest topological order), evaluated with the
// registry's fingerprint semantics (float64 kernels on small integer inputs:
// exact integer arithmetic), and fingerprinted by its outputs.
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/rules/rule.h"

namespace rlflow::generator {

struct Settings {
  int max_ops = 3;
  int max_outputs = 2;
  int max_inputs = 4;  // distinct universe tensors one graph may read
  uint64_t seed = 1;
  int threads = 2;
  int shard_index = 0;
  int shard_count = 1;
};

struct Stats {
  int64_t sequences = 0;  // op sequences evaluated
  int64_t graphs = 0;     // distinct graphs recorded
  int64_t distinct_fingerprints = 0;
  int64_t buckets = 0;  // fingerprints shared by >= 2 graphs
  int64_t candidates = 0;
  int64_t skipped_input_mismatch = 0;
  double seconds = 0;
};

// The default universe and templates, recorded in GeneratorSettings.
rules::GeneratorSettings DescribeSettings(const Settings& s);

// The number of first-level choices (first operator and its inputs): the
// unit of work. Shard I of N enumerates the choices k with k % N == I (an
// MPI task is such a shard).
int64_t FirstChoices(const Settings& s);

// Enumerates this shard's graphs. `progress` is called now and then with a
// line of text (may be empty). `stop` aborts early when set.
rules::GraphShard Enumerate(const Settings& s, Stats* stats, const std::function<void(const std::string&)>& progress,
                            const std::atomic<bool>* stop = nullptr);

// Buckets graph records (from one or several shards) by fingerprint and
// pairs every graph with its bucket's representative (fewest ops, then
// canonical text): the candidate rules, sorted by id.
rules::CandidateSet MakeCandidates(const std::vector<rules::GraphShard>& shards, Stats* stats);

}  // namespace rlflow::generator
