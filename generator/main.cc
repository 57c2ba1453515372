// rlflow generator: enumerates operator graphs, fingerprints them and writes
// candidate substitutions (graphs with equal fingerprints) for the verifier.
//
//   ./bazelw run //generator -- --output=candidates.pb
//   ./bazelw run //generator -- --shard=0/2 --output=g0.pb   (and 1/2)
//   mpirun -np 5 bazel-bin/generator/generator --output=$PWD/candidates.pb
//     (an MPI job: rank 0 hands the first operators out to the 4 others and
//     writes the same candidates as one process does)
//   ./bazelw run //generator -- --merge=g0.pb,g1.pb --output=candidates.pb
#include <ATen/Parallel.h>
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

#include "core/cli.h"
#include "core/error.h"
#include "core/file_util.h"
#include "core/mpi.h"
#include "core/strings.h"
#include "generator/enumerate.h"

DEFINE_int32(max_ops, 3, "largest number of operators in an enumerated graph");
DEFINE_uint64(seed, 1, "seed of the integer fingerprint inputs");
DEFINE_int32(threads, 2, "worker threads");
DEFINE_string(shard, "0/1", "I/N: enumerate only shard I of N and write a graph shard (merge with --merge)");
DEFINE_string(merge, "", "comma-separated graph shards to merge into one candidates file");
DEFINE_string(output, "candidates.pb", "output file (candidates, or a graph shard with --shard=I/N, N > 1)");
DEFINE_int32(max_outputs, 2, "most outputs an enumerated graph may have");
DEFINE_int32(max_inputs, 4, "most distinct input tensors an enumerated graph may read");

namespace rlflow {
namespace {

void PrintStats(const generator::Stats& s) {
  std::printf(
      "| graphs enumerated | op sequences evaluated | distinct fingerprints | shared fingerprints | "
      "candidate pairs | skipped (inputs differ) | time (s) |\n|---:|---:|---:|---:|---:|---:|---:|\n");
  std::printf("| %lld | %lld | %lld | %lld | %lld | %lld | %.1f |\n", static_cast<long long>(s.graphs),
              static_cast<long long>(s.sequences), static_cast<long long>(s.distinct_fingerprints),
              static_cast<long long>(s.buckets), static_cast<long long>(s.candidates),
              static_cast<long long>(s.skipped_input_mismatch), s.seconds);
}

int Run() {
  if (FLAGS_threads < 1) Fail("--threads must be >= 1");
  if (FLAGS_max_outputs < 1 || FLAGS_max_inputs < 1) Fail("--max_outputs and --max_inputs must be >= 1");
  mpi::World& world = mpi::World::Get();
  if (world.size() > 1 && (!FLAGS_merge.empty() || FLAGS_shard != "0/1"))
    Fail("--merge and --shard are for separate processes: under mpirun the ranks share the work themselves");
  std::string output = ResolveUserPath(FLAGS_output);
  if (world.root()) {
    CheckWritablePath(output, "--output");
    std::vector<FileRole> shards;
    for (const std::string& p : SplitList(FLAGS_merge)) shards.push_back({"--merge", ResolveUserPath(p)});
    CheckFileRoles({{"--output", output}}, shards);
  }
  cli::InstallInterruptHandler();
  at::set_num_threads(1);
  generator::Stats stats;
  if (!FLAGS_merge.empty()) {
    std::vector<rules::GraphShard> shards;
    std::stringstream ss(FLAGS_merge);
    for (std::string p; std::getline(ss, p, ',');) {
      if (p.empty()) continue;
      rules::GraphShard sh;
      ReadRulesFile(ResolveUserPath(p), kGraphShardMagic, &sh, "graph shard");
      stats.graphs += sh.graphs_size();
      shards.push_back(std::move(sh));
    }
    rules::CandidateSet c = generator::MakeCandidates(shards, &stats);
    SaveMessageAtomically(c, output);
    PrintStats(stats);
    LOG(INFO) << "wrote " << c.candidates_size() << " candidates to " << output;
    return 0;
  }
  generator::Settings s;
  s.max_ops = FLAGS_max_ops;
  s.seed = FLAGS_seed;
  s.threads = FLAGS_threads;
  s.max_outputs = FLAGS_max_outputs;
  s.max_inputs = FLAGS_max_inputs;
  std::tie(s.shard_index, s.shard_count) = cli::ParseShard(FLAGS_shard);
  cli::Throttle throttle(2.0);
  if (world.size() > 1) {
    // An MPI job: the first-level choices are dealt into tasks (task I of T
    // holds the choices k with k % T == I, a shard), 32 per worker so that
    // rank 0's queue evens out their differences; rank 0 merges the graph
    // shards as --merge does, which gives what one process writes.
    const int64_t choices = generator::FirstChoices(s);
    const int64_t n = std::min<int64_t>(choices, 32 * static_cast<int64_t>(world.size() - 1));
    if (world.root())
      LOG(INFO) << "MPI job of " << world.size() << " ranks: rank 0 hands out " << choices << " first operators in "
                << n << " tasks, " << world.size() - 1 << " ranks enumerate them";
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::string> parts = world.RunTasks(
        n,
        [&](int64_t k) {
          generator::Settings one = s;
          one.threads = 1;
          one.shard_index = static_cast<int>(k);
          one.shard_count = static_cast<int>(n);
          generator::Stats ignored;
          return SerializeDeterministic(generator::Enumerate(one, &ignored, nullptr, &cli::interrupted));
        },
        [&](int64_t done, int64_t all) {
          if (throttle.Ready()) LOG(INFO) << "enumerating: " << done << "/" << all << " tasks";
        },
        &cli::interrupted);
    if (!world.root()) return 0;  // rank 0 writes
    std::vector<rules::GraphShard> shards(parts.size());
    for (size_t k = 0; k < parts.size(); ++k) {
      if (!shards[k].ParseFromString(parts[k])) Fail("MPI: the graph shard of task ", k, " does not parse");
      stats.graphs += shards[k].graphs_size();
    }
    rules::CandidateSet c = generator::MakeCandidates(shards, &stats);
    stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    SaveMessageAtomically(c, output);
    PrintStats(stats);
    LOG(INFO) << "wrote " << c.candidates_size() << " candidates to " << output;
    return 0;
  }
  rules::GraphShard shard = generator::Enumerate(
      s, &stats,
      [&](const std::string& line) {
        if (throttle.Ready()) LOG(INFO) << line;
      },
      &cli::interrupted);
  if (s.shard_count > 1) {
    SaveMessageAtomically(shard, output);
    PrintStats(stats);
    LOG(INFO) << "wrote graph shard " << s.shard_index << "/" << s.shard_count << " (" << shard.graphs_size()
              << " graphs) to " << output;
    return 0;
  }
  rules::CandidateSet c = generator::MakeCandidates({shard}, &stats);
  SaveMessageAtomically(c, output);
  PrintStats(stats);
  LOG(INFO) << "wrote " << c.candidates_size() << " candidates to " << output;
  return 0;
}

}  // namespace
}  // namespace rlflow

int main(int argc, char** argv) {
  return rlflow::mpi::Finish(rlflow::cli::Main(
      argc, argv, "rlflow generator: ./bazelw run //generator -- --output=candidates.pb", rlflow::Run));
}
