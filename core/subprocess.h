#pragma once
// Running a binary under test as a user does: a child process with its
// stdout and stderr in a log file, its exit status (128 + signal if killed),
// and the rows of a CSV file it wrote. The one way this project starts a
// child process (tests, and tools such as Graphviz and gnuplot).
#include <sys/types.h>

#include <string>
#include <vector>

namespace rlflow {

// Runs `args[0]` (looked up in PATH when it has no '/') with `args`, its
// stdout and stderr to `log` ("/dev/null" to drop them), and waits: its exit
// code, 127 if it could not be started, or 128 + the signal that killed it.
int RunProgram(const std::vector<std::string>& args, const std::string& log = "/dev/null");

}  // namespace rlflow

namespace rlflow::testing {

// Starts `args[0]` with `args` (stdout and stderr to `log`); returns its pid.
pid_t StartProcess(const std::vector<std::string>& args, const std::string& log);
// Waits for it: its exit code, or 128 + the signal that killed it.
int WaitProcess(pid_t pid);
// The data rows of a CSV file (the header dropped), split at commas.
std::vector<std::vector<std::string>> CsvRows(const std::string& path);

}  // namespace rlflow::testing
