// Data-parallel training's throughput (issue #25): //agents:train started
// by mpirun with 1, 2 and 4 workers on the same training graph, in
// interleaved rounds (1 2 4, then 4 2 1, ...), each a fresh run of --steps
// environment steps (all workers together) from the same seed. Per run:
// samples per second of the training loop (metrics.csv: steps / the
// loop's seconds, so start-up is not counted) and the whole job's CPU
// seconds per 1000 samples (every rank, start-up included). Per worker
// count: the median over rounds and the paired ratio to one worker with
// its 95% interval. Each worker runs ATen with one thread.
//
//   ./bazelw run //benchmarks:dd_ppo_bench [-- --model=resnet18 --workers=1,2,4 --rounds=6 --steps=768]
#include <gflags/gflags.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "core/cli.h"
#include "core/error.h"
#include "core/file_util.h"
#include "core/strings.h"
#include "core/subprocess.h"
#include "runtime/stats.h"

DEFINE_string(model, "resnet18", "training graph (zoo name or ONNX file)");
DEFINE_string(workers, "1,2,4", "worker counts to compare (the first is the baseline)");
DEFINE_int32(rounds, 6, "interleaved rounds (6 or more for a 95% interval)");
DEFINE_int64(steps, 768, "environment steps per run, all workers together (a multiple of 64 x each count)");
DEFINE_uint64(seed, 1, "training seed (the same for every run)");

namespace rlflow {
namespace {

double ChildCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_CHILDREN, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

int Run() {
  std::vector<int> counts;
  for (const std::string& w : SplitList(FLAGS_workers)) counts.push_back(std::stoi(w));
  if (counts.empty()) Fail("--workers is empty");
  for (int n : counts)
    if (n < 1 || FLAGS_steps % (64 * n) != 0) Fail("--steps must be a multiple of 64 x every worker count");
  if (!HaveProgram("mpirun")) Fail("mpirun not found (Debian's openmpi-bin)");
  const std::string train = FindRunfile("agents/train", gflags::GetArgv0());
  if (train.empty()) Fail("agents/train not found in the runfiles");
  const std::string dir = MakeTempDir("dd_ppo_bench_");
  std::map<int, std::vector<double>> rate, cpu;  // per worker count, per round
  int job = 0;
  for (int round = 0; round < FLAGS_rounds; ++round) {
    std::vector<int> order = counts;
    if (round % 2 == 1) order.assign(counts.rbegin(), counts.rend());
    for (int n : order) {
      const std::string out = dir + "/run" + std::to_string(job++);
      std::vector<std::string> args = {"mpirun", "--oversubscribe", "-np", std::to_string(n)};
      if (geteuid() == 0) args.push_back("--allow-run-as-root");
      for (const std::string& a :
           std::vector<std::string>{train, "--model=" + FLAGS_model, "--steps=" + std::to_string(FLAGS_steps),
                                    "--seed=" + std::to_string(FLAGS_seed), "--threads=1", "--out=" + out})
        args.push_back(a);
      const double cpu0 = ChildCpuSeconds();
      if (RunProgram(args, out + ".log") != 0) Fail("training with ", n, " workers failed: ", ReadFile(out + ".log"));
      const double cpu_s = ChildCpuSeconds() - cpu0;
      std::vector<std::vector<std::string>> rows = testing::CsvRows(out + "/metrics.csv");
      if (rows.empty()) Fail("no metrics from ", out);
      const double seconds = std::stod(rows.back()[2]);
      rate[n].push_back(static_cast<double>(FLAGS_steps) / seconds);
      cpu[n].push_back(1000.0 * cpu_s / static_cast<double>(FLAGS_steps));
      std::printf("round %d  %d worker(s): %.1f samples/s, %.2f CPU s per 1000 samples\n", round + 1, n, rate[n].back(),
                  cpu[n].back());
      std::fflush(stdout);
    }
  }
  RemoveTree(dir);
  std::printf(
      "\n| workers | samples/s (median) | vs %d worker(s) [95%%] | CPU s per 1000 samples (median) | vs %d "
      "[95%%] |\n|---:|---:|---|---:|---|\n",
      counts[0], counts[0]);
  for (int n : counts) {
    std::printf("| %d | %.1f | %s | %.2f | %s |\n", n, Median(rate[n]),
                PairedRatio(rate[n], rate[counts[0]]).ToString().c_str(), Median(cpu[n]),
                PairedRatio(cpu[n], cpu[counts[0]]).ToString().c_str());
  }
  std::printf("\nmodel %s, %lld steps per run, seed %llu, %ld online CPUs, ATen 1 thread per worker\n",
              FLAGS_model.c_str(), static_cast<long long>(FLAGS_steps), static_cast<unsigned long long>(FLAGS_seed),
              sysconf(_SC_NPROCESSORS_ONLN));
  return 0;
}

}  // namespace
}  // namespace rlflow

int main(int argc, char** argv) {
  return rlflow::cli::Main(argc, argv,
                           "dd_ppo_bench: ./bazelw run //benchmarks:dd_ppo_bench [-- --model=resnet18 "
                           "--workers=1,2,4 --rounds=6 --steps=768]",
                           rlflow::Run);
}
