#include "agents/training_run.h"

#include <glog/logging.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "agents/archive.h"
#include "core/cli.h"
#include "core/error.h"
#include "core/file_util.h"
#include "core/subprocess.h"

namespace rlflow::train {
namespace {

using Clock = std::chrono::steady_clock;

const char kCsvHeader[] =
    "update,env_steps,seconds,mean_reward,episodes,episode_return,policy_loss,value_loss,entropy,approx_kl,"
    "clip_fraction,explained_variance\n";

void Plot(const std::string& dir) {
  std::string script = dir + "/plot.gp";
  std::ofstream gp(script);
  gp << "set terminal png size 900,600\nset output '" << dir << "/training.png.tmp'\n"
     << "set datafile separator ','\nset key autotitle columnhead\nset multiplot layout 2,1\n"
     << "set xlabel 'environment steps'\nset ylabel 'episode return'\n"
     << "plot '" << dir << "/metrics.csv' using 2:($5 > 0 ? $6 : NaN) with points pt 7 ps 0.5 title 'episode return "
     << "(mean per update)', '' using 2:($5 > 0 ? $6 : NaN) smooth bezier title 'smoothed'\n"
     << "set ylabel 'entropy'\nset y2label 'approx KL'\nset y2tics\nplot '" << dir
     << "/metrics.csv' using 2:9 with lines title 'entropy', '' using 2:10 "
     << "with lines title 'approx KL' axes x1y2\nunset multiplot\n";
  gp.close();
  if (RunProgram({"gnuplot", script}) == 0) {
    std::rename((dir + "/training.png.tmp").c_str(), (dir + "/training.png").c_str());
  } else {
    std::remove((dir + "/training.png.tmp").c_str());
    LOG_FIRST_N(WARNING, 1) << "gnuplot failed or is missing: no training.png (metrics.csv has the curve)";
  }
}

class MpiWorkersImpl : public agents::Workers {
 public:
  int rank() const override { return mpi::World::Get().rank(); }
  int size() const override { return mpi::World::Get().size(); }
  void Sum(float* data, int64_t n) override { mpi::World::Get().SumInRankOrder(data, n); }
  void Sum(double* data, int64_t n) override { mpi::World::Get().SumInRankOrder(data, n); }
};

torch::Tensor BytesTensor(const std::string& bytes) {
  return torch::tensor(std::vector<int64_t>(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            reinterpret_cast<const uint8_t*>(bytes.data()) + bytes.size()));
}

std::string TensorBytes(const torch::Tensor& t) {
  std::string bytes;
  for (int64_t k = 0; k < t.numel(); ++k) bytes.push_back(static_cast<char>(t[k].item<int64_t>()));
  return bytes;
}

// The sampler state of worker `rank` in a checkpoint ("sampler" for rank 0).
std::string SamplerKey(int rank) { return rank == 0 ? "sampler" : "sampler_" + std::to_string(rank); }

// `samplers`: every worker's sampler state, in rank order.
void SaveCheckpoint(const std::string& path, agents::PpoTrainerBase& t, const std::vector<std::string>& samplers,
                    double seconds) {
  torch::serialize::OutputArchive a;
  t.module().save(a);
  torch::serialize::OutputArchive opt;
  t.optimizer().save(opt);
  a.write("optimizer", opt);
  a.write("updates", torch::tensor(static_cast<int64_t>(t.updates())));
  a.write("env_steps", torch::tensor(static_cast<int64_t>(t.env_steps())));
  a.write("seconds", torch::tensor(seconds, torch::kFloat64));
  for (size_t r = 0; r < samplers.size(); ++r) a.write(SamplerKey(static_cast<int>(r)), BytesTensor(samplers[r]));
  agents::SaveArchiveAtomically(a, path);
}

// Loads the checkpoint `bytes` (read from `path` by rank 0) into this
// worker's trainer.
void LoadCheckpoint(const std::string& path, const std::string& bytes, agents::PpoTrainerBase& trainer,
                    double* seconds_before) {
  const int rank = mpi::World::Get().rank();
  try {
    torch::serialize::InputArchive a;
    a.load_from(bytes.data(), bytes.size());
    trainer.module().load(a);
    torch::serialize::InputArchive opt;
    a.read("optimizer", opt);
    trainer.optimizer().load(opt);
    torch::Tensor updates, steps, sampler, seconds;
    a.read("seconds", seconds);
    *seconds_before = seconds.item<double>();
    a.read("updates", updates);
    a.read("env_steps", steps);
    if (!a.try_read(SamplerKey(rank), sampler))
      Fail("the checkpoint ", path, " has no sampler state for worker ", rank, " (written by fewer workers)");
    trainer.set_counters(updates.item<int64_t>(), steps.item<int64_t>());
    trainer.set_sampler_state(TensorBytes(sampler));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    Fail("cannot read the checkpoint ", path, " (corrupt or truncated; remove it to start again)");
  }
}

// Rank 0's parameters on every rank (a fresh run: the same seed gives the
// same initialisation, but a worker must never train other weights).
void ShareParameters(agents::PpoTrainerBase& trainer) {
  mpi::World& world = mpi::World::Get();
  std::string bytes;
  if (world.root()) {
    torch::serialize::OutputArchive a;
    trainer.module().save(a);
    a.save_to([&](const void* data, size_t n) {
      bytes.append(static_cast<const char*>(data), n);
      return n;
    });
  }
  world.Broadcast(&bytes);
  if (world.root()) return;
  torch::serialize::InputArchive a;
  a.load_from(bytes.data(), bytes.size());
  trainer.module().load(a);
}

// FNV-1a over the bytes of every parameter: equal on every worker as long
// as they train the same weights.
uint64_t ParameterHash(torch::nn::Module& module) {
  uint64_t h = 1469598103934665603ull;
  for (const torch::Tensor& p : module.parameters()) {
    torch::Tensor c = p.detach().contiguous();
    const auto* bytes = static_cast<const uint8_t*>(c.data_ptr());
    for (size_t k = 0; k < static_cast<size_t>(c.nbytes()); ++k) h = (h ^ bytes[k]) * 1099511628211ull;
  }
  return h;
}

}  // namespace

agents::Workers& MpiWorkers() {
  static MpiWorkersImpl workers;
  return workers;
}

namespace {

// The first setting ("key=value" line) in which two configurations differ,
// for the error message: "lr_schedule was not set, now 'cosine'".
std::string FirstDifference(const std::string& saved, const std::string& now) {
  auto settings = [](const std::string& text) {
    std::map<std::string, std::string> m;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      const size_t eq = line.find('=');
      m[line.substr(0, eq)] = eq == std::string::npos ? "" : line.substr(eq + 1);
    }
    return m;
  };
  const auto a = settings(saved), b = settings(now);
  std::set<std::string> keys;
  for (const auto& [k, v] : a) keys.insert(k);
  for (const auto& [k, v] : b) keys.insert(k);
  for (const std::string& k : keys) {
    auto ia = a.find(k), ib = b.find(k);
    const std::string was = ia == a.end() ? "not set" : "'" + ia->second + "'";
    const std::string is = ib == b.end() ? "not set" : "'" + ib->second + "'";
    if (was != is) return k + " was " + was + ", now " + is;
  }
  return "the files differ";
}

bool PrepareDirectory(const TrainingRun& run) {
  const std::string& dir = run.dir;
  for (size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    ::mkdir(dir.substr(0, slash).c_str(), 0755);  // each level; existing ones are fine
    if (slash == std::string::npos) break;
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) Fail("cannot create the --out directory ", dir);
  const std::string config_path = dir + "/config.txt", ckpt = dir + "/checkpoint.pt";
  bool resume = FileExists(ckpt);
  if (FileExists(config_path)) {
    const std::string saved = ReadFile(config_path);
    if (saved != run.config)
      Fail(dir, " holds a run with another configuration (", config_path, ": ", FirstDifference(saved, run.config),
           "); use another --out, or the settings the run was started with");
  } else {
    if (resume) Fail(dir, " has a checkpoint but no config.txt; use another --out");
    WriteFileAtomically(config_path, run.config);
  }
  return resume;
}

}  // namespace

bool PrepareRun(const TrainingRun& run) {
  mpi::World& world = mpi::World::Get();
  std::string resume;
  if (world.root()) resume = PrepareDirectory(run) ? "1" : "0";
  world.Broadcast(&resume);
  return resume == "1";
}

bool RunTraining(const TrainingRun& run, agents::PpoTrainerBase& trainer, bool resume,
                 const std::function<void()>& on_resumed) {
  mpi::World& world = mpi::World::Get();
  trainer.set_workers(&MpiWorkers());
  const std::string ckpt = run.dir + "/checkpoint.pt", csv = run.dir + "/metrics.csv";
  double seconds_before = 0;  // training time of the run before a resume
  if (resume) {
    std::string bytes;
    if (world.root()) bytes = ReadFile(ckpt, "checkpoint");
    world.Broadcast(&bytes);
    LoadCheckpoint(ckpt, bytes, trainer, &seconds_before);
    if (on_resumed) on_resumed();
  } else {
    ShareParameters(trainer);
  }
  if (resume && world.root()) {
    // Rows written after the checkpoint belong to an update that is redone.
    std::ifstream in(csv);
    std::string line, kept = kCsvHeader;
    std::getline(in, line);
    while (std::getline(in, line))
      if (!line.empty() && std::stoll(line.substr(0, line.find(','))) <= trainer.updates()) kept += line + "\n";
    WriteFileAtomically(csv, kept);
    LOG(INFO) << "resumed from " << ckpt << ": update " << trainer.updates() << ", " << trainer.env_steps()
              << " environment steps";
  } else if (world.root()) {
    WriteFileAtomically(csv, kCsvHeader);
  }

  cli::InstallInterruptHandler();
  auto t0 = Clock::now();
  std::ofstream metrics;
  if (world.root()) metrics.open(csv, std::ios::app);
  // The picture's return curve needs an ended episode: before one, gnuplot
  // has no point to plot and fails (not "missing"). A resumed run has had
  // one, nearly always.
  bool episode_ended = resume;
  while (trainer.env_steps() < run.steps) {
    if (world.Any(cli::interrupted)) {
      if (world.root()) LOG(WARNING) << "interrupted: the last checkpoint (update " << trainer.updates() << ") is kept";
      return false;
    }
    agents::UpdateStats s = trainer.Iterate();
    const std::vector<std::string> samplers = world.Gather(trainer.sampler_state());
    if (world.size() > 1) {
      // The workers' weights must be the same bits after every update.
      const uint64_t mine = ParameterHash(trainer.module());
      const std::vector<std::string> hashes =
          world.Gather(std::string(reinterpret_cast<const char*>(&mine), sizeof mine));
      for (size_t r = 1; r < hashes.size(); ++r)
        if (hashes[r] != hashes[0])
          Fail("data-parallel training: worker ", r, "'s parameters differ from worker 0's after update ",
               trainer.updates());
    }
    if (!world.root()) continue;
    double sec = seconds_before + std::chrono::duration<double>(Clock::now() - t0).count();
    char row[512];
    std::snprintf(row, sizeof row, "%lld,%lld,%.2f,%.6g,%d,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g\n",
                  static_cast<long long>(trainer.updates()), static_cast<long long>(trainer.env_steps()), sec,
                  s.mean_reward, s.episodes, s.episode_return, s.policy_loss, s.value_loss, s.entropy, s.approx_kl,
                  s.clip_fraction, s.explained_variance);
    metrics << row;
    metrics.flush();
    SaveCheckpoint(ckpt, trainer, samplers, sec);
    episode_ended = episode_ended || s.episodes > 0;
    if (episode_ended) Plot(run.dir);
    std::printf(
        "update %lld  steps %lld/%lld  return %.3f (%d episodes)  entropy %.3f  kl %.4f  clip %.3f  "
        "expl.var %.3f  %.1f s\n",
        static_cast<long long>(trainer.updates()), static_cast<long long>(trainer.env_steps()),
        static_cast<long long>(run.steps), s.episode_return, s.episodes, s.entropy, s.approx_kl, s.clip_fraction,
        s.explained_variance, sec);
    std::fflush(stdout);
  }
  return true;
}

}  // namespace rlflow::train
