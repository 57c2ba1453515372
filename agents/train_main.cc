// Trains the model-free agent (GNN + PPO) on the rewrite environment.
//
//   ./bazelw run //agents:train -- --model=resnet18 [--model=squeezenet1_1 ...] --steps=N --out=DIR
//
// Progress on the terminal; DIR/metrics.csv (one row per update), DIR/
// training.png (gnuplot), DIR/checkpoint.pt (policy, optimiser, counters and
// the sampler's state, written atomically after every update),
// DIR/config.txt, and at the end DIR/agent.pt (the policy alone, for
// `--search=ppo --agent=`). Started again with the same command after a crash or kill
// -9, it resumes from the last checkpoint: at most one update is lost (the
// episode in progress restarts). A different configuration in an existing
// DIR is an error.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "agents/env.h"
#include "agents/gnn.h"
#include "agents/ppo.h"
#include "benchmarks/zoo/zoo.h"
#include "core/error.h"
#include "core/file_util.h"
#include "optimiser/batchnorm_cost.h"
#include "optimiser/load.h"
#include "optimiser/pipeline.h"
#include "runtime/threads.h"
#include "tools/cli/cli.h"

DEFINE_string(model, "", "training models: zoo names or ONNX files (repeat --model or separate with commas)");
DEFINE_int64(steps, 2048, "environment steps to train for (whole updates)");
DEFINE_string(out, "", "output directory (metrics.csv, training.png, checkpoint.pt, config.txt); required");
DEFINE_uint64(seed, 1, "seed of the weights' initialisation and of action sampling");
DEFINE_string(reward, "normalised", "reward: delta, combined, normalised, end_to_end");
DEFINE_int32(horizon, 100, "steps per episode");
DEFINE_int32(rollout_steps, 64, "transitions per PPO update");
DEFINE_int32(epochs, 4, "PPO epochs per update");
DEFINE_int32(minibatches, 4, "PPO minibatches per epoch");
DEFINE_double(lr, 5e-4, "Adam learning rate");
DEFINE_int32(hidden, 64, "GNN hidden size");
DEFINE_int32(gnn_steps, 5, "GNN message-passing steps");
DEFINE_string(cost, "analytical", "cost model the rewards come from: analytical (deterministic roofline) or measured "
                                  "(operators timed on this machine, in context)");
DEFINE_int32(threads, 1, "ATen / OpenBLAS threads");
DEFINE_string(rules, "", "rule database (default: the checked-in rules/default.rules.pb)");

namespace rlflow {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// Everything that changes what training computes (not --steps: more steps continue a run).
std::string Config() {
  std::ostringstream c;
  c << "model=" << FLAGS_model << "\nseed=" << FLAGS_seed << "\nreward=" << FLAGS_reward
    << "\nhorizon=" << FLAGS_horizon << "\nrollout_steps=" << FLAGS_rollout_steps << "\nepochs=" << FLAGS_epochs
    << "\nminibatches=" << FLAGS_minibatches << "\nlr=" << FLAGS_lr << "\nhidden=" << FLAGS_hidden
    << "\ngnn_steps=" << FLAGS_gnn_steps << "\ncost=" << FLAGS_cost << "\nthreads=" << FLAGS_threads
    << "\nrules=" << FLAGS_rules << "\n";
  return c.str();
}

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
     << "set ylabel 'entropy'\nset y2label 'approx KL'\nset y2tics\nplot '" << dir << "/metrics.csv' using 2:9 with lines title 'entropy', '' using 2:10 "
     << "with lines title 'approx KL' axes x1y2\nunset multiplot\n";
  gp.close();
  std::string cmd = "gnuplot '" + script + "' >/dev/null 2>&1";
  if (std::system(cmd.c_str()) == 0) {
    std::rename((dir + "/training.png.tmp").c_str(), (dir + "/training.png").c_str());
  } else {
    LOG_FIRST_N(WARNING, 1) << "gnuplot failed or is missing: no training.png (metrics.csv has the curve)";
  }
}

void SaveCheckpoint(const std::string& path, agents::PpoTrainer& t, const std::string& rng_state, double seconds) {
  torch::serialize::OutputArchive a;
  t.policy()->save(a);
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

int Run() {
  std::vector<std::string> models = Split(FLAGS_model);
  if (models.empty()) Fail("--model is required (zoo names such as resnet18, or ONNX files)");
  if (FLAGS_out.empty()) Fail("--out is required (a directory for metrics, plot and checkpoints)");
  if (FLAGS_steps < 1) Fail("--steps must be >= 1");
  if (FLAGS_cost != "analytical" && FLAGS_cost != "measured") Fail("--cost must be analytical or measured");
  agents::EnvOptions eo;
  eo.reward = agents::ParseRewardKind(FLAGS_reward);
  eo.horizon = FLAGS_horizon;
  eo.seed = FLAGS_seed;
  SetComputeThreads(FLAGS_threads);
  torch::set_num_threads(std::max(1, FLAGS_threads));

  std::string dir = ResolveUserPath(FLAGS_out);
  for (size_t slash = dir.find('/', 1); ; slash = dir.find('/', slash + 1)) {
    ::mkdir(dir.substr(0, slash).c_str(), 0755);  // each level; existing ones are fine
    if (slash == std::string::npos) break;
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) Fail("cannot create the --out directory ", dir);
  const std::string config = Config(), config_path = dir + "/config.txt", ckpt = dir + "/checkpoint.pt",
                    csv = dir + "/metrics.csv";
  bool resume = FileExists(ckpt);
  if (FileExists(config_path)) {
    if (ReadFile(config_path) != config)
      Fail(dir, " holds a run with another configuration (", config_path, "); use another --out");
  } else {
    if (resume) Fail(dir, " has a checkpoint but no config.txt; use another --out");
    WriteFileAtomically(config_path, config);
  }

  std::string rules_path = FLAGS_rules.empty() ? FindRunfile("rules/default.rules.pb", gflags::GetArgv0())
                                               : ResolveUserPath(FLAGS_rules);
  if (rules_path.empty()) Fail("the default rule database was not found (pass --rules=PATH)");
  rules::RuleDatabase db = LoadRuleDatabase(rules_path);
  Matcher matcher(std::vector<rules::Rule>(db.rules().begin(), db.rules().end()));

  // The training graphs, canonical, and the cost model.
  std::vector<Graph> graphs;
  for (const std::string& m : models) {
    LoadOptions lo;
    lo.zoo_seed = FLAGS_seed;
    graphs.push_back(CanonicalForm(LoadModel(m, lo).graph));
    LOG(INFO) << "training graph " << m << ": " << graphs.back().num_nodes() << " nodes";
  }
  std::unique_ptr<TimingBackend> backend = MakeTimingBackend("cpu");
  AnalyticalCostModel analytical;
  MeasuredCostModel measured(backend.get());
  CostModel* base = &analytical;
  if (FLAGS_cost == "measured") {
    for (const Graph& g : graphs) measured.Calibrate(g, 3);
    base = &measured;
  }
  BatchNormAwareCost cost(base);
  agents::RewriteEnv env(&matcher, &cost, eo, backend.get());

  torch::manual_seed(FLAGS_seed);
  agents::GnnOptions go{FLAGS_hidden, FLAGS_gnn_steps};
  agents::Policy policy(2 * static_cast<int>(matcher.rules().size()), go);
  size_t next = 0;
  agents::PpoOptions po;
  po.rollout_steps = FLAGS_rollout_steps;
  po.epochs = FLAGS_epochs;
  po.minibatches = FLAGS_minibatches;
  po.lr = FLAGS_lr;
  agents::PpoTrainer trainer(policy, &env, [&] { return graphs[next++ % graphs.size()]; }, po, FLAGS_seed);

  double seconds_before = 0;  // training time of the run before a resume
  if (resume) {
    torch::serialize::InputArchive a;
    a.load_from(ckpt);
    policy->load(a);
    torch::serialize::InputArchive opt;
    a.read("optimizer", opt);
    trainer.optimizer().load(opt);
    torch::Tensor updates, steps, sampler, seconds;
    a.read("seconds", seconds);
    seconds_before = seconds.item<double>();
    a.read("updates", updates);
    a.read("env_steps", steps);
    a.read("sampler", sampler);
    trainer.set_counters(updates.item<int64_t>(), steps.item<int64_t>());
    std::string state;
    for (int64_t k = 0; k < sampler.numel(); ++k) state.push_back(static_cast<char>(sampler[k].item<int64_t>()));
    trainer.set_sampler_state(state);
    next = static_cast<size_t>(trainer.updates());  // a fresh episode on the next graph
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
  while (trainer.env_steps() < FLAGS_steps) {
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
    Plot(dir);
    std::printf("update %lld  steps %lld/%lld  return %.3f (%d episodes)  entropy %.3f  kl %.4f  clip %.3f  "
                "expl.var %.3f  %.1f s\n",
                static_cast<long long>(trainer.updates()), static_cast<long long>(trainer.env_steps()),
                static_cast<long long>(FLAGS_steps), s.episode_return, s.episodes, s.entropy, s.approx_kl,
                s.clip_fraction, s.explained_variance, sec);
    std::fflush(stdout);
  }
  // The policy alone, for --search=ppo --agent=DIR/agent.pt.
  agents::SavePolicy(*policy, dir + "/agent.pt");
  std::printf("done: %lld updates, %lld environment steps; %s\n", static_cast<long long>(trainer.updates()),
              static_cast<long long>(trainer.env_steps()), dir.c_str());
  return 0;
}

}  // namespace
}  // namespace rlflow

int main(int argc, char** argv) {
  // --model may be repeated: gflags keeps only the last, so join them first.
  std::vector<std::string> args(argv, argv + argc), models;
  std::vector<char*> kept;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (i > 0 && a.rfind("--model=", 0) == 0) models.push_back(a.substr(8));
    else kept.push_back(argv[i]);
  }
  std::string joined;
  for (const std::string& m : models) joined += (joined.empty() ? "" : ",") + m;
  std::string flag = "--model=" + joined;
  if (!models.empty()) kept.push_back(flag.data());
  int n = static_cast<int>(kept.size());
  return rlflow::cli::Main(n, kept.data(),
                           "train: ./bazelw run //agents:train -- --model=M [--model=M2 ...] --steps=N --out=DIR",
                           rlflow::Run);
}
