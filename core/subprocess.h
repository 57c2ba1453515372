#pragma once
// The one way this project starts a child process: the optimiser's helpers
// (ONNX Runtime's server and typing runs, Graphviz, gnuplot), the
// benchmarks that drive the binaries, and tests that run a binary as a user
// does. No shell: arguments are passed as they are (no quoting, no
// injection), the environment is extended explicitly, and the exit status
// is the child's exit code, 127 if it could not be started, or 128 + the
// signal that killed it.
//
// (core/onnx_io.cc forks without exec to contain a crash in ONNX's own
// shape inference: not a program start, so not here.)
#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace rlflow {

// Where a child's standard streams go, and what it adds to the environment.
struct ProgramIo {
  std::string in = "/dev/null";            // stdin is read from this file
  std::string out = "/dev/null";           // stdout is written (truncated) to this file
  std::string err;                         // stderr to this file ("": where stdout goes)
  std::map<std::string, std::string> env;  // set in the child's environment
};

// Runs `args[0]` (looked up in PATH when it has no '/') with `args` and
// waits for it.
int RunProgram(const std::vector<std::string>& args, const ProgramIo& io);
// The same, stdout and stderr to `log` ("/dev/null" to drop them).
int RunProgram(const std::vector<std::string>& args, const std::string& log = "/dev/null");
// Runs it and returns its stdout and stderr together; its exit status in
// `*status`.
std::string RunProgramOutput(const std::vector<std::string>& args, int* status,
                             const std::map<std::string, std::string>& env = {});
// Whether `program` is in PATH and starts (runs it with `version_flag`).
bool HaveProgram(const std::string& program, const std::string& version_flag = "--version");

// A child that stays up, with a pipe to its stdin and one from its stdout
// (a server answering requests line by line); its stderr goes to io.err
// (io.in and io.out are not used). Throws rlflow::Error if it cannot be
// started; a program that is missing exits 127 at once (`pid` is valid).
struct PipedProcess {
  pid_t pid = -1;
  int to = -1;    // write end of the child's stdin
  int from = -1;  // read end of the child's stdout
};
PipedProcess StartPiped(const std::vector<std::string>& args, const ProgramIo& io);

}  // namespace rlflow

namespace rlflow::testing {

// Starts `args[0]` (a path: PATH is not searched) with `args`, stdout and
// stderr to `log` (or as `io` says); returns its pid.
pid_t StartProcess(const std::vector<std::string>& args, const std::string& log);
pid_t StartProcess(const std::vector<std::string>& args, const ProgramIo& io);
// Command-line arguments as a test writes them, "--a=1 --b='x y'": split at
// spaces, single quotes grouping (and removed); no other shell syntax.
std::vector<std::string> SplitArgs(const std::string& text);
// Waits for it: its exit code, or 128 + the signal that killed it.
int WaitProcess(pid_t pid);
// The data rows of a CSV file (the header dropped), split at commas.
std::vector<std::vector<std::string>> CsvRows(const std::string& path);

}  // namespace rlflow::testing
