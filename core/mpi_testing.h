#pragma once
// Tests that start binaries as MPI jobs (Open MPI's mpirun) on one machine.
#include <unistd.h>

#include <string>
#include <vector>

namespace rlflow::testing {

// mpirun --oversubscribe [--timeout S] -np N <args...>: more ranks than
// this machine has cores; as root where the sandbox runs tests as root;
// a job that runs past `timeout_s` is ended by mpirun itself (0: no limit).
inline std::vector<std::string> Mpirun(int ranks, const std::vector<std::string>& args, int timeout_s = 0) {
  std::vector<std::string> all = {"mpirun", "--oversubscribe", "-np", std::to_string(ranks)};
  if (timeout_s > 0) all.insert(all.begin() + 1, {"--timeout", std::to_string(timeout_s)});
  if (geteuid() == 0) all.push_back("--allow-run-as-root");
  all.insert(all.end(), args.begin(), args.end());
  return all;
}

}  // namespace rlflow::testing
