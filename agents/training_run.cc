#include "agents/training_run.h"

#include <glog/logging.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>

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
    LOG_FIRST_N(WARNING, 1) << "gnuplot failed or is missing: no training.png (metrics.csv has the curve)";
  }
}

void SaveCheckpoint(const std::string& path, agents::PpoTrainerBase& t, const std::string& rng_state, double seconds) {
  torch::serialize::OutputArchive a;
  t.module().save(a);
  torch::serialize::OutputArchive opt;
  t.optimizer().save(opt);
  a.write("optimizer", opt);
  a.write("updates", torch::tensor(static_cast<int64_t>(t.updates())));
  a.write("env_steps", torch::tensor(static_cast<int64_t>(t.env_steps())));
  a.write("seconds", torch::tensor(seconds, torch::kFloat64));
  std::vector<uint8_t> bytes(rng_state.begin(), rng_state.end());
  a.write("sampler", torch::tensor(std::vector<int64_t>(bytes.begin(), bytes.end())));
  std::string tmp = path + ".tmp";
  a.save_to(tmp);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) Fail("cannot write ", path);
}

void LoadCheckpoint(const std::string& path, agents::PpoTrainerBase& trainer, double* seconds_before) {
  torch::serialize::InputArchive a;
  try {
    a.load_from(path);
  } catch (const std::exception& e) {
    Fail("cannot read the checkpoint ", path, " (corrupt or truncated; remove it to start again)");
  }
  trainer.module().load(a);
  torch::serialize::InputArchive opt;
  a.read("optimizer", opt);
  trainer.optimizer().load(opt);
  torch::Tensor updates, steps, sampler, seconds;
  a.read("seconds", seconds);
  *seconds_before = seconds.item<double>();
  a.read("updates", updates);
  a.read("env_steps", steps);
  a.read("sampler", sampler);
  trainer.set_counters(updates.item<int64_t>(), steps.item<int64_t>());
  std::string state;
  for (int64_t k = 0; k < sampler.numel(); ++k) state.push_back(static_cast<char>(sampler[k].item<int64_t>()));
  trainer.set_sampler_state(state);
}

}  // namespace

bool PrepareRun(const TrainingRun& run) {
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
    if (ReadFile(config_path) != run.config)
      Fail(dir, " holds a run with another configuration (", config_path, "); use another --out");
  } else {
    if (resume) Fail(dir, " has a checkpoint but no config.txt; use another --out");
    WriteFileAtomically(config_path, run.config);
  }
  return resume;
}

void RunTraining(const TrainingRun& run, agents::PpoTrainerBase& trainer, bool resume,
                 const std::function<void()>& on_resumed) {
  const std::string ckpt = run.dir + "/checkpoint.pt", csv = run.dir + "/metrics.csv";
  double seconds_before = 0;  // training time of the run before a resume
  if (resume) {
    LoadCheckpoint(ckpt, trainer, &seconds_before);
    if (on_resumed) on_resumed();
    // Rows written after the checkpoint belong to an update that is redone.
    std::ifstream in(csv);
    std::string line, kept = kCsvHeader;
    std::getline(in, line);
    while (std::getline(in, line))
      if (!line.empty() && std::stoll(line.substr(0, line.find(','))) <= trainer.updates()) kept += line + "\n";
    WriteFileAtomically(csv, kept);
    LOG(INFO) << "resumed from " << ckpt << ": update " << trainer.updates() << ", " << trainer.env_steps()
              << " environment steps";
  } else {
    WriteFileAtomically(csv, kCsvHeader);
  }

  cli::InstallInterruptHandler();
  auto t0 = Clock::now();
  std::ofstream metrics(csv, std::ios::app);
  while (trainer.env_steps() < run.steps) {
    if (cli::interrupted) {
      LOG(WARNING) << "interrupted: the last checkpoint (update " << trainer.updates() << ") is kept";
      break;
    }
    agents::UpdateStats s = trainer.Iterate();
    double sec = seconds_before + std::chrono::duration<double>(Clock::now() - t0).count();
    char row[512];
    std::snprintf(row, sizeof row, "%lld,%lld,%.2f,%.6g,%d,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g\n",
                  static_cast<long long>(trainer.updates()), static_cast<long long>(trainer.env_steps()), sec,
                  s.mean_reward, s.episodes, s.episode_return, s.policy_loss, s.value_loss, s.entropy, s.approx_kl,
                  s.clip_fraction, s.explained_variance);
    metrics << row;
    metrics.flush();
    SaveCheckpoint(ckpt, trainer, trainer.sampler_state(), sec);
    Plot(run.dir);
    std::printf(
        "update %lld  steps %lld/%lld  return %.3f (%d episodes)  entropy %.3f  kl %.4f  clip %.3f  "
        "expl.var %.3f  %.1f s\n",
        static_cast<long long>(trainer.updates()), static_cast<long long>(trainer.env_steps()),
        static_cast<long long>(run.steps), s.episode_return, s.episodes, s.entropy, s.approx_kl, s.clip_fraction,
        s.explained_variance, sec);
    std::fflush(stdout);
  }
}

}  // namespace rlflow::train
