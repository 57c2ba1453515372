#include "core/subprocess.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "core/error.h"
#include "core/file_util.h"

namespace rlflow {
namespace {

// In the child: `path` opened on descriptor `fd` (nothing if it cannot be).
void Redirect(const std::string& path, int fd, bool write) {
  const int f = write ? ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644) : ::open(path.c_str(), O_RDONLY);
  if (f < 0) return;
  ::dup2(f, fd);
  ::close(f);
}

// In the child: the environment, then exec (PATH searched when asked).
[[noreturn]] void Exec(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                       bool search_path) {
  for (const auto& [name, value] : env) ::setenv(name.c_str(), value.c_str(), 1);
  std::vector<char*> argv;
  for (const std::string& s : args) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  if (search_path)
    ::execvp(argv[0], argv.data());
  else
    ::execv(argv[0], argv.data());
  ::_exit(127);
}

pid_t Start(const std::vector<std::string>& args, const ProgramIo& io, bool search_path) {
  if (args.empty()) return -1;
  std::fflush(nullptr);  // buffered output is not written twice
  const pid_t pid = ::fork();
  if (pid == 0) {
    Redirect(io.in, 0, false);
    Redirect(io.out, 1, true);
    if (io.err.empty())
      ::dup2(1, 2);
    else
      Redirect(io.err, 2, true);
    Exec(args, io.env, search_path);
  }
  return pid;
}

}  // namespace

int RunProgram(const std::vector<std::string>& args, const ProgramIo& io) {
  const pid_t pid = Start(args, io, /*search_path=*/true);
  return pid < 0 ? 127 : testing::WaitProcess(pid);
}

int RunProgram(const std::vector<std::string>& args, const std::string& log) {
  ProgramIo io;
  io.out = log;
  return RunProgram(args, io);
}

std::string RunProgramOutput(const std::vector<std::string>& args, int* status,
                             const std::map<std::string, std::string>& env) {
  const std::string dir = MakeTempDir("run_");
  ProgramIo io;
  io.out = dir + "/output.txt";
  io.env = env;
  *status = RunProgram(args, io);
  std::string out = FileExists(io.out) ? ReadFile(io.out) : "";
  RemoveTree(dir);
  return out;
}

bool HaveProgram(const std::string& program, const std::string& version_flag) {
  return RunProgram({program, version_flag}) != 127;
}

PipedProcess StartPiped(const std::vector<std::string>& args, const ProgramIo& io) {
  if (args.empty()) Fail("StartPiped: no program");
  int in[2], out[2];
  if (::pipe(in) != 0) Fail("cannot start ", args[0], ": pipe: ", std::strerror(errno));
  if (::pipe(out) != 0) {
    const int saved = errno;
    ::close(in[0]);
    ::close(in[1]);
    Fail("cannot start ", args[0], ": pipe: ", std::strerror(saved));
  }
  std::fflush(nullptr);
  PipedProcess p;
  p.pid = ::fork();
  if (p.pid < 0) {
    const int saved = errno;
    for (int fd : {in[0], in[1], out[0], out[1]}) ::close(fd);
    Fail("cannot start ", args[0], ": fork: ", std::strerror(saved));
  }
  if (p.pid == 0) {
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    if (!io.err.empty()) Redirect(io.err, 2, true);
    for (int fd : {in[0], in[1], out[0], out[1]}) ::close(fd);
    Exec(args, io.env, /*search_path=*/true);
  }
  ::close(in[0]);
  ::close(out[1]);
  p.to = in[1];
  p.from = out[0];
  return p;
}

}  // namespace rlflow

namespace rlflow::testing {

pid_t StartProcess(const std::vector<std::string>& args, const std::string& log) {
  ProgramIo io;
  io.out = log;
  return Start(args, io, /*search_path=*/false);
}

pid_t StartProcess(const std::vector<std::string>& args, const ProgramIo& io) {
  return Start(args, io, /*search_path=*/false);
}

std::vector<std::string> SplitArgs(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  bool in_arg = false, quoted = false;
  for (char c : text) {
    if (c == '\'') {
      quoted = !quoted;
      in_arg = true;
    } else if (c == ' ' && !quoted) {
      if (in_arg) out.push_back(cur);
      cur.clear();
      in_arg = false;
    } else {
      cur += c;
      in_arg = true;
    }
  }
  if (in_arg) out.push_back(cur);
  return out;
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
