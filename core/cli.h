#pragma once
// Shared command-line plumbing for rlflow's binaries: flag parsing, logging,
// error reporting ("error: ..." and exit 1), SIGINT handling, --shard=I/N.
#include <atomic>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace rlflow::cli {

// Parses gflags, sets up glog (to stderr), rejects positional arguments,
// runs `body` and turns exceptions into one-line errors. Returns the exit code.
int Main(int argc, char** argv, const char* usage, const std::function<int()>& body);
// The same, where each flag named in `repeated` may be given several times
// (--model=a --model=b): gflags keeps only the last, so they are joined
// into one comma-separated value first (read it with SplitList).
int Main(int argc, char** argv, const std::vector<std::string>& repeated, const char* usage,
         const std::function<int()>& body);

// Set by SIGINT/SIGTERM once InstallInterruptHandler() ran; long loops poll
// it. A second signal terminates the process.
extern std::atomic<bool> interrupted;
void InstallInterruptHandler();

// "I/N" -> (I, N); throws rlflow::Error naming the flag on bad input.
std::pair<int, int> ParseShard(const std::string& flag_value);

// Calls `f` at most every `seconds` (for progress lines).
class Throttle {
 public:
  explicit Throttle(double seconds) : seconds_(seconds) {}
  bool Ready();

 private:
  double seconds_;
  double last_ = -1e9;
};

}  // namespace rlflow::cli
