#include "core/subprocess.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <sstream>

#include "core/file_util.h"

namespace rlflow {
namespace {

pid_t Start(const std::vector<std::string>& args, const std::string& log, bool search_path) {
  if (args.empty()) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    FILE* f = std::freopen(log.c_str(), "w", stdout);
    (void)f;
    ::dup2(::fileno(stdout), 2);
    std::vector<char*> argv;
    for (const std::string& s : args) argv.push_back(const_cast<char*>(s.c_str()));
    argv.push_back(nullptr);
    if (search_path)
      ::execvp(argv[0], argv.data());
    else
      ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

}  // namespace

int RunProgram(const std::vector<std::string>& args, const std::string& log) {
  const pid_t pid = Start(args, log, /*search_path=*/true);
  return pid < 0 ? 127 : testing::WaitProcess(pid);
}

}  // namespace rlflow

namespace rlflow::testing {

pid_t StartProcess(const std::vector<std::string>& args, const std::string& log) {
  return Start(args, log, /*search_path=*/false);
}

int WaitProcess(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::vector<std::vector<std::string>> CsvRows(const std::string& path) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(ReadFile(path));
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::istringstream l(line);
    for (std::string c; std::getline(l, c, ',');) cells.push_back(c);
    rows.push_back(cells);
  }
  return rows;
}

}  // namespace rlflow::testing
