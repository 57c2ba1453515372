#include "core/cli.h"

#include <gflags/gflags.h>
#include <glog/logging.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <sstream>

#include "core/error.h"
#include "core/file_util.h"

namespace rlflow::cli {

std::atomic<bool> interrupted{false};

namespace {
// First signal: ask long loops to stop and keep their results. Second: the
// default action (terminate); outputs are written atomically, so no partial
// output file is left, and the temporary file of a write in progress is
// removed first.
// The first is said at once (write(2) is async-signal-safe; the log is
// not): the step in progress can run on for a while (a calibration of a
// large model, a measurement), and a request that shows nothing reads as
// ignored.
void OnSignal(int sig) {
  if (interrupted.exchange(true)) {
    RemovePendingTemporaryFiles();
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
  static const char kNote[] =
      "interrupted: stopping after the step in progress and keeping what was done (interrupt again to abort)\n";
  [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, kNote, sizeof(kNote) - 1);
}
}  // namespace

void InstallInterruptHandler() {
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
}

namespace {
// One printable line of at most 1000 characters (names in corrupt models can
// hold any bytes).
std::string Printable(const std::string& message) {
  std::string out;
  for (unsigned char c : FirstLine(message)) out += c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?';
  if (out.size() > 1000) out = out.substr(0, 1000) + "...";
  return out;
}

// gflags reports a bad flag with its own "ERROR: ..." text (and an unknown
// one by exiting); check every --name=value first so that each problem is
// one "error:" line. Returns the message, or "" if the flags parse.
std::string CheckFlags(int argc, char** argv) {
  for (int k = 1; k < argc; ++k) {
    std::string arg = argv[k];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;  // a positional argument, reported later
    std::string body = arg.substr(arg[1] == '-' ? 2 : 1);
    size_t eq = body.find('=');
    std::string name = body.substr(0, eq);
    gflags::CommandLineFlagInfo info;
    if (name == "help" || name == "helpfull" || name == "helpshort" || name == "version" || name == "helpxml" ||
        name == "helpon" || name == "helpmatch" || name == "helppackage" || name == "flagfile" || name == "fromenv" ||
        name == "tryfromenv" || name == "undefok")
      continue;
    if (!gflags::GetCommandLineFlagInfo(name.c_str(), &info)) {
      // --noflag for a boolean flag
      if (name.rfind("no", 0) == 0 && eq == std::string::npos &&
          gflags::GetCommandLineFlagInfo(name.substr(2).c_str(), &info) && info.type == "bool")
        continue;
      return "unknown flag --" + name + " (see --help)";
    }
    std::string value;
    if (eq != std::string::npos) {
      value = body.substr(eq + 1);
    } else if (info.type == "bool") {
      continue;
    } else if (k + 1 < argc) {
      value = argv[++k];
    } else {
      return "flag --" + name + " needs a value (" + info.type + ")";
    }
    if (gflags::SetCommandLineOption(name.c_str(), value.c_str()).empty())
      return "invalid value '" + value + "' for --" + name + " (expected " +
             (info.type == "bool" ? std::string("true or false") : "a value of type " + info.type) + ")";
  }
  return "";
}
}  // namespace

int Main(int argc, char** argv, const std::vector<std::string>& repeated, const char* usage,
         const std::function<int()>& body) {
  std::vector<char*> kept;
  std::vector<std::string> joined(repeated.size()), flags(repeated.size());
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    bool taken = false;
    for (size_t r = 0; r < repeated.size() && i > 0 && !taken; ++r) {
      const std::string prefix = "--" + repeated[r] + "=";
      if (a.rfind(prefix, 0) != 0) continue;
      joined[r] += (joined[r].empty() ? "" : ",") + a.substr(prefix.size());
      taken = true;
    }
    if (!taken) kept.push_back(argv[i]);
  }
  for (size_t r = 0; r < repeated.size(); ++r) {
    if (joined[r].empty()) continue;
    flags[r] = "--" + repeated[r] + "=" + joined[r];
    kept.push_back(flags[r].data());
  }
  return Main(static_cast<int>(kept.size()), kept.data(), usage, body);
}

int Main(int argc, char** argv, const char* usage, const std::function<int()>& body) {
  gflags::SetUsageMessage(usage);
  std::string flag_error = CheckFlags(argc, argv);
  if (!flag_error.empty()) {
    std::fprintf(stderr, "error: %s\n", flag_error.c_str());
    return 2;
  }
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  if (argc > 1) {
    std::fprintf(stderr, "error: unexpected argument '%s' (flags are written --name=value)\n", argv[1]);
    return 2;
  }
  // One error path: whatever fails (rlflow, ATen, protobuf, the standard
  // library) ends as one "error:" line; ATen's messages carry a stack trace
  // after the first line.
  try {
    return body();
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", Printable(e.what()).c_str());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "error: unexpected failure (unknown exception)\n");
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
