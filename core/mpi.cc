#include "core/mpi.h"

// The C API only (Open MPI's deprecated C++ bindings live in another library).
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace rlflow::mpi {
namespace {

// Worker -> rank 0: [int64 task][uint8 ok][result bytes, or the error's
// text]; task -1: ready for the first task. Rank 0 -> worker: int64, the
// next task or -1 (stop).
constexpr int kResultTag = 1, kTaskTag = 2;

std::string Message(int64_t task, bool ok, const std::string& body) {
  std::string m(sizeof task + 1, '\0');
  std::memcpy(&m[0], &task, sizeof task);
  m[sizeof task] = ok ? 1 : 0;
  return m + body;
}

void Check(int code, const char* what) {
  if (code != MPI_SUCCESS) Fail("MPI: ", what, " failed (error ", code, ")");
}

}  // namespace

bool Launched() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') return true;
  return false;
}

World::World() {
  if (!Launched()) return;
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) Check(MPI_Init(nullptr, nullptr), "MPI_Init");
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

int Finish(int exit_code) {
  int initialised = 0, finalised = 0;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalised);
  if (!initialised || finalised) return exit_code;
  // A rank that failed cannot finalise (the others may wait for it in a
  // send or a receive): the whole job ends with its exit code.
  if (exit_code != 0) MPI_Abort(MPI_COMM_WORLD, exit_code);
  MPI_Finalize();
  return exit_code;
}

World& World::Get() {
  static World world;
  return world;
}

std::vector<std::string> World::RunTasks(int64_t n, const std::function<std::string(int64_t)>& task,
                                         const std::function<void(int64_t, int64_t)>& progress,
                                         const std::atomic<bool>* stop) {
  std::vector<std::string> results;
  if (size_ == 1) {
    for (int64_t k = 0; k < n; ++k) {
      if (stop != nullptr && stop->load()) Fail("interrupted");
      results.push_back(task(k));
      if (progress) progress(k + 1, n);
    }
    return results;
  }
  if (!root()) {
    std::string out = Message(-1, true, "");
    for (;;) {
      Check(MPI_Send(out.data(), static_cast<int>(out.size()), MPI_BYTE, 0, kResultTag, MPI_COMM_WORLD), "MPI_Send");
      int64_t k = -1;
      Check(MPI_Recv(&k, 1, MPI_INT64_T, 0, kTaskTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
      if (k < 0) return {};
      try {
        out = Message(k, true, task(k));
      } catch (const Error& e) {
        out = Message(k, false, e.what());
      }
    }
  }
  results.assign(n, std::string());
  int64_t next = 0, done = 0;
  int working = size_ - 1;
  std::string error;
  std::vector<char> buffer;
  while (working > 0) {
    MPI_Status status;
    Check(MPI_Probe(MPI_ANY_SOURCE, kResultTag, MPI_COMM_WORLD, &status), "MPI_Probe");
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    buffer.resize(static_cast<size_t>(count));
    Check(MPI_Recv(buffer.data(), count, MPI_BYTE, status.MPI_SOURCE, kResultTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
          "MPI_Recv");
    int64_t k = -1;
    if (count < static_cast<int>(sizeof k + 1)) Fail("MPI: a short message from rank ", status.MPI_SOURCE);
    std::memcpy(&k, buffer.data(), sizeof k);
    const bool ok = buffer[sizeof k] != 0;
    std::string body(buffer.begin() + sizeof k + 1, buffer.end());
    if (k >= 0 && k < n) {
      if (ok) {
        results[k] = std::move(body);
        ++done;
        if (progress) progress(done, n);
      } else if (error.empty()) {
        error = "task " + std::to_string(k) + " on rank " + std::to_string(status.MPI_SOURCE) + ": " + body;
      }
    }
    int64_t give = -1;
    if (error.empty() && next < n && !(stop != nullptr && stop->load())) give = next++;
    if (give < 0) --working;
    Check(MPI_Send(&give, 1, MPI_INT64_T, status.MPI_SOURCE, kTaskTag, MPI_COMM_WORLD), "MPI_Send");
  }
  if (!error.empty()) Fail(error);
  if (done < n) Fail("interrupted");
  return results;
}

}  // namespace rlflow::mpi
