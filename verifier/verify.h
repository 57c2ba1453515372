#pragma once
// Verification of candidate rules:
//  1. a float64 check on random inputs at a few shapes (cheap rejection),
//  2. pruning of trivial rules: sides that share a common sub-expression or a
//     common context whose removal leaves a rule that still holds (a smaller
//     rule implies it); sides that share an inner sub-expression at all
//     (TASO's criterion: the rule composes smaller ones); duplicates up to
//     input renaming / side swap,
//  3. a Z3 proof that both sides are equal element by element on symbolic
//     tensors (every input dimension at most 4) at two shape instances, with
//     each op's symbolic semantics from its registry entry. A deterministic
//     resource limit (Z3 rlimit) bounds each proof: running out excludes the
//     rule, never accepts it.
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/mpi.h"
#include "core/rules/rule.h"

namespace rlflow::verifier {

enum class Outcome {
  kProved,
  kRefutedNumeric,
  kRefutedZ3,
  kTimeout,
  kPrunedDuplicate,
  kPrunedCommonSubgraph,
  kPrunedCommonContext,
  kPrunedComposite,
  kError,
};
const char* OutcomeName(Outcome o);

struct Options {
  int threads = 2;
  uint64_t rlimit = 2000000;  // Z3 resource limit per output element and instance
  int timeout_ms = 20000;     // wall-clock safety net (also excludes the rule)
  int shard_index = 0;
  int shard_count = 1;
  // An MPI job of several ranks (mpirun): VerifyAll hands the candidates out
  // over its ranks instead of `threads` (rank 0 collects; the other ranks
  // get no results). Null or one rank: threads.
  mpi::World* world = nullptr;
};

struct Result {
  Outcome outcome = Outcome::kError;
  rules::Rule rule;          // with provenance filled in when proved
  bool generalised = false;  // proved attribute-generic (rule is the generic form)
  double seconds = 0;
  std::string detail;
};

// The two proof instances for a rule (all input dimensions <= 4).
std::vector<SymbolBinding> ProofBindings(const rules::Rule& rule);
// Shapes for the numerical pre-check.
std::vector<SymbolBinding> CheckBindings(const rules::Rule& rule);

// Numerically compares source and target in float64 at `binding`; returns
// the largest relative error over the outputs.
double NumericError(const rules::Rule& rule, const SymbolBinding& binding, uint64_t seed);

// Z3 proof at one instance. Returns kProved, kRefutedZ3 or kTimeout; adds
// the instance's resource count to *rlimit_used.
Outcome ProveAt(const rules::Rule& rule, const SymbolBinding& binding, const Options& options, uint64_t* rlimit_used,
                bool* by_simplification, std::string* detail);

// Attribute-generic form of a proved rule whose Conv (or pooling) nodes all
// share their window attributes: those attributes become variables ($pads,
// $strides, $dilations; $kernel_shape for pooling; $group if `with_group`),
// the kernel dimensions of the inputs that feed conv weights become symbols
// kh, kw (and their channel dimension cg with groups). Proved (float64
// check and Z3) at every instance of a fixed table (1x1, 3x3, stride 2,
// asymmetric kernel, stride and pads, dilation; grouped and depthwise with
// groups). nullopt if the rule has no such nodes, they differ, or any
// instance fails. The provenance lists the instances.
std::optional<rules::Rule> Generalise(const rules::Rule& proved, bool with_group, const Options& options);

// Full pipeline for one candidate (no global duplicate pruning); a proved
// rule that generalises (Generalise, with groups first) is returned in its
// generic form.
Result VerifyOne(const rules::Rule& candidate, const Options& options);

// This shard's candidates, in parallel (threads, or options.world's ranks);
// results in candidate order (on rank 0 only, over MPI).
std::vector<Result> VerifyAll(const rules::CandidateSet& candidates, const Options& options,
                              const std::function<void(const std::string&)>& progress,
                              const std::atomic<bool>* stop = nullptr);

// A result as bytes and back (VerifyAll over MPI ranks); DecodeResult throws
// rlflow::Error on bytes EncodeResult did not make.
std::string EncodeResult(const Result& r);
Result DecodeResult(const std::string& bytes);
// Proved rules from one or several shards -> the database: duplicates up to
// renaming and side swap are pruned (the smallest id stays), sorted by id.
// `duplicates` receives how many were pruned.
rules::RuleDatabase Assemble(const rules::GeneratorSettings& settings, const std::vector<rules::Rule>& proved,
                             int64_t* duplicates);

}  // namespace rlflow::verifier
