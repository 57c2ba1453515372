#pragma once
// Work spread over the ranks of an MPI job (Open MPI), for the jobs users
// outgrow a machine on: rule verification (and generation). A binary started
// by `mpirun -np N` (or Slurm's `srun`) is one of N ranks; started alone it
// is a world of one and MPI is not initialised at all, so it behaves exactly
// as without MPI.
//
// RunTasks hands tasks out dynamically from rank 0 (a queue: tasks differ a
// lot in time, e.g. one Z3 proof each); the other ranks run them one at a
// time and send each result back as bytes. Rank 0 gets every result in task
// order, whichever rank ran it, so what it writes is the same for any
// number of ranks. Rank 0 only hands out and collects: N ranks are N - 1
// workers (on one machine, start one rank more than it has cores).
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace rlflow::mpi {

// Whether this process was started as one rank of an MPI job (mpirun sets
// OMPI_COMM_WORLD_SIZE, PMIx launchers such as srun PMIX_RANK).
bool Launched();

// Ends this process's part of the job and returns `exit_code` (main's
// last call in a binary that uses World): MPI_Finalize after success;
// after a failure MPI_Abort, which ends every rank (the others may be
// waiting for this one), so that a one-line error never leaves a job
// hanging. Without MPI, returns `exit_code`.
int Finish(int exit_code);

class World {
 public:
  // The job this process belongs to: MPI is initialised on first use when
  // Launched() (main ends with Finish), else a world of one rank.
  static World& Get();

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool root() const { return rank_ == 0; }

  // Runs tasks 0..n-1 over the ranks (size() > 1) and returns their results
  // in task order on rank 0, nothing on the others; with one rank, runs them
  // here in order. Every rank must call it with the same n. A task's
  // rlflow::Error on any rank, or `stop` set on rank 0, stops the hand-out
  // and throws rlflow::Error on rank 0 once every worker has been told to
  // stop. progress(done, n) is called on rank 0 after each result.
  std::vector<std::string> RunTasks(int64_t n, const std::function<std::string(int64_t)>& task,
                                    const std::function<void(int64_t, int64_t)>& progress = nullptr,
                                    const std::atomic<bool>* stop = nullptr);

  // Collectives for data-parallel training (every rank calls them, in the
  // same order; with one rank they change nothing). SumInRankOrder sums
  // data[0..n) over the ranks in place: rank 0 gathers every rank's array,
  // adds them in rank order and sends the sum back, so every rank holds the
  // same bits and a seeded run gives the same sums each time (MPI_Allreduce
  // promises neither). n must be the same on every rank.
  void SumInRankOrder(float* data, int64_t n);
  void SumInRankOrder(double* data, int64_t n);
  // Rank 0's bytes, on every rank.
  void Broadcast(std::string* bytes);
  // Every rank's bytes, in rank order, on rank 0 (nothing on the others).
  std::vector<std::string> Gather(const std::string& bytes);
  // Whether `flag` is true on any rank.
  bool Any(bool flag);

 private:
  World();
  int rank_ = 0, size_ = 1;
};

}  // namespace rlflow::mpi
