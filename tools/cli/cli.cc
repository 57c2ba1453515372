#include "tools/cli/cli.h"

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <chrono>
#include <csignal>
#include <cstdio>

#include "core/error.h"

namespace rlflow::cli {

std::atomic<bool> interrupted{false};

namespace {
// First signal: ask long loops to stop and keep their results. Second: the
// default action (terminate); outputs are written atomically, so no partial
// output file is left.
void OnSignal(int sig) {
  if (interrupted.exchange(true)) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
}
}  // namespace

void InstallInterruptHandler() {
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
}

int Main(int argc, char** argv, const char* usage, const std::function<int()>& body) {
  gflags::SetUsageMessage(usage);
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  if (argc > 1) {
    std::fprintf(stderr, "error: unexpected argument '%s' (flags are written --name=value)\n", argv[1]);
    return 2;
  }
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

std::pair<int, int> ParseShard(const std::string& v) {
  size_t slash = v.find('/');
  try {
    if (slash != std::string::npos) {
      size_t used = 0;
      int i = std::stoi(v.substr(0, slash), &used);
      if (used != slash) throw std::invalid_argument("i");
      int n = std::stoi(v.substr(slash + 1), &used);
      if (used != v.size() - slash - 1) throw std::invalid_argument("n");
      if (n >= 1 && i >= 0 && i < n) return {i, n};
    }
  } catch (const std::exception&) {
  }
  Fail("--shard must be I/N with 0 <= I < N, got '", v, "'");
}

bool Throttle::Ready() {
  double now = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  if (now - last_ < seconds_) return false;
  last_ = now;
  return true;
}

}  // namespace rlflow::cli
