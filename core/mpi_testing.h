#pragma once
// Tests that start binaries as MPI jobs (Open MPI's mpirun) on one machine.
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace rlflow::testing {

// Open MPI names its session directory (under TMPDIR) and the shared-memory
// segments of its on-node transport (in /dev/shm) after mpirun's PID. Bazel's
// sandbox gives each test its own PID namespace but shares /tmp and /dev/shm,
// so two tests' mpiruns can have the same PID and open the same files: a rank
// of one job crashed in the shared-memory transport (mca_btl_vader) and the
// job hung, here and reproduced with two `unshare --pid` jobs. Each test
// process gets its own directory for both, short (PMIx's socket paths are
// limited to 107 characters, which TEST_TMPDIR exceeds), removed at exit
// (mpirun leaves it empty).
class MpiScratchDir {
 public:
  static const std::string& Path() {
    static const MpiScratchDir dir;
    return dir.path_;
  }

 private:
  MpiScratchDir() {
    std::string t = "/tmp/rlflow-mpi-XXXXXX";
    if (::mkdtemp(t.data()) != nullptr) path_ = t;
  }
  ~MpiScratchDir() {
    if (!path_.empty()) ::rmdir(path_.c_str());
  }
  std::string path_;
};

// mpirun --oversubscribe [--timeout S] -np N <args...>: more ranks than
// this machine has cores; as root where the sandbox runs tests as root;
// a job that runs past `timeout_s` is ended by mpirun itself (0: no limit).
inline std::vector<std::string> Mpirun(int ranks, const std::vector<std::string>& args, int timeout_s = 0) {
  std::vector<std::string> all = {"mpirun", "--oversubscribe", "-np", std::to_string(ranks)};
  if (timeout_s > 0) all.insert(all.begin() + 1, {"--timeout", std::to_string(timeout_s)});
  if (geteuid() == 0) all.push_back("--allow-run-as-root");
  const std::string& scratch = MpiScratchDir::Path();
  if (!scratch.empty())
    all.insert(all.end(), {"--mca", "orte_tmpdir_base", scratch, "--mca", "btl_vader_backing_directory", scratch});
  all.insert(all.end(), args.begin(), args.end());
  return all;
}

}  // namespace rlflow::testing
