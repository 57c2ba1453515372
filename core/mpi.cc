#include "core/mpi.h"

// The C API only (Open MPI's deprecated C++ bindings live in another library).
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdint>
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

namespace {

template <class T>
void SumOverRanks(T* data, int64_t n, MPI_Datatype type, int rank, int size) {
  if (size == 1 || n == 0) return;
  if (n > INT32_MAX / size) Fail("MPI: ", n, " values are too many to sum in one call");
  const int count = static_cast<int>(n);
  std::vector<T> all(rank == 0 ? static_cast<size_t>(n) * size : 0);
  Check(MPI_Gather(data, count, type, all.data(), count, type, 0, MPI_COMM_WORLD), "MPI_Gather");
  if (rank == 0) {
    for (int r = 1; r < size; ++r) {
      const T* from = all.data() + static_cast<size_t>(r) * n;
      for (int64_t k = 0; k < n; ++k) data[k] += from[k];
    }
  }
  Check(MPI_Bcast(data, count, type, 0, MPI_COMM_WORLD), "MPI_Bcast");
}

}  // namespace

void World::SumInRankOrder(float* data, int64_t n) { SumOverRanks(data, n, MPI_FLOAT, rank_, size_); }
void World::SumInRankOrder(double* data, int64_t n) { SumOverRanks(data, n, MPI_DOUBLE, rank_, size_); }

void World::Broadcast(std::string* bytes) {
  if (size_ == 1) return;
  int64_t length = static_cast<int64_t>(bytes->size());
  Check(MPI_Bcast(&length, 1, MPI_INT64_T, 0, MPI_COMM_WORLD), "MPI_Bcast");
  if (length > INT32_MAX) Fail("MPI: ", length, " bytes are too many to broadcast in one call");
  bytes->resize(static_cast<size_t>(length));
  Check(MPI_Bcast(bytes->data(), static_cast<int>(length), MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast");
}

std::vector<std::string> World::Gather(const std::string& bytes) {
  if (size_ == 1) return {bytes};
  if (bytes.size() > INT32_MAX) Fail("MPI: ", bytes.size(), " bytes are too many to gather in one call");
  int length = static_cast<int>(bytes.size());
  std::vector<int> lengths(root() ? size_ : 0), offsets(root() ? size_ : 0);
  Check(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Gather");
  std::vector<char> all;
  if (root()) {
    int64_t total = 0;
    for (int r = 0; r < size_; ++r) {
      offsets[r] = static_cast<int>(total);
      total += lengths[r];
    }
    if (total > INT32_MAX) Fail("MPI: ", total, " bytes are too many to gather in one call");
    all.resize(static_cast<size_t>(total));
  }
  Check(MPI_Gatherv(bytes.data(), length, MPI_BYTE, all.data(), lengths.data(), offsets.data(), MPI_BYTE, 0,
                    MPI_COMM_WORLD),
        "MPI_Gatherv");
  std::vector<std::string> out;
  for (int r = 0; root() && r < size_; ++r) out.emplace_back(all.data() + offsets[r], lengths[r]);
  return out;
}

bool World::Any(bool flag) {
  double v = flag ? 1 : 0;
  SumInRankOrder(&v, 1);
  return v > 0;
}

}  // namespace rlflow::mpi
