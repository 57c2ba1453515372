// The world model's step time (issue #23): one dream step of a world
// model (either kind) with all its heads (next latent, reward, done,
// next-state mask and location counts) at batch 1 from a carried state, and
// dream steps per second batched (the step with sampling at temperature 1).
// A trained model is timed with --world_model=PATH; by default a fresh one
// of --world_model_kind with the default sizes (LSTM or GRU 256, 8
// components, latent 32) knowing --vocabulary of the checked-in database's
// 7324 rule actions.
//
//   ./bazelw run //benchmarks:world_model_bench [-- --world_model=DIR/world_model.pt --threads=1]
//   ./bazelw run //benchmarks:world_model_bench -- --world_model_kind=rssm
#include <gflags/gflags.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "core/cli.h"
#include "runtime/threads.h"
#include "world_model/train.h"
#include "world_model/world_model.h"

DEFINE_string(world_model, "", "world_model.pt of //world_model:train (default: a fresh model, default sizes)");
DEFINE_string(world_model_kind, "mdn_rnn", "the fresh model's kind: mdn_rnn or rssm");
DEFINE_int32(vocabulary, 1000, "rule actions the fresh model knows (its action space; of the database's 7324)");
DEFINE_int32(threads, 1, "ATen threads");
DEFINE_int32(batch, 1024, "batch of the batched measurement");
DEFINE_int32(repeats, 15, "timed repetitions (medians are printed)");

namespace rlflow {
namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Run() {
  SetComputeThreads(FLAGS_threads);
  torch::set_num_threads(std::max(1, FLAGS_threads));
  world_model::WorldModel model;
  if (!FLAGS_world_model.empty()) {
    model = world_model::LoadWorldModel(FLAGS_world_model);
  } else {
    world_model::WorldModelOptions o;
    o.rule_actions = 7324;
    for (int64_t a = 0; a < FLAGS_vocabulary; ++a) o.vocabulary.push_back(a * 7);
    model = world_model::MakeWorldModel(FLAGS_world_model_kind, o);
  }
  model->eval();
  torch::NoGradGuard no_grad;
  const world_model::WorldModelOptions& o = model->options();
  std::mt19937_64 g(1);
  // `steps` dream steps of `batch` episodes from zero state, each feeding
  // the next latent back: sampled at tau 1, or the most likely one (tau 0);
  // seconds.
  auto run = [&](int64_t batch, int steps, bool sample) {
    torch::Tensor z = torch::randn({batch, o.latent});
    torch::Tensor a = torch::randint(0, o.rule_actions, {batch}, torch::kInt64);  // most outside the vocabulary
    torch::Tensor l = torch::zeros({batch}, torch::kInt64);
    world_model::WorldModelImpl::State state;
    auto t0 = Clock::now();
    for (int s = 0; s < steps; ++s) {
      world_model::WorldModelImpl::Imagined out =
          model->Imagine(z, a, l, s == 0 ? nullptr : &state, sample ? 1.0 : 0.0, g);
      state = out.state;
      z = out.next_latent;
    }
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  run(1, 50, true);  // warm-up
  std::vector<double> one, one_sampled, batched;
  for (int r = 0; r < FLAGS_repeats; ++r) {
    one.push_back(run(1, 200, false) / 200 * 1e3);
    one_sampled.push_back(run(1, 200, true) / 200 * 1e3);
    batched.push_back(FLAGS_batch * 20 / run(FLAGS_batch, 20, true));
  }
  int64_t params = 0;
  for (const auto& p : model->parameters()) params += p.numel();
  std::printf(
      "world model %s: latent %d, recurrent state %d, %d components, %d of %d rule actions known, %lld parameters "
      "(%.2f MB float32)\n",
      model->kind().c_str(), o.latent, o.hidden, o.mixtures, model->vocabulary_size(), o.rule_actions,
      static_cast<long long>(params), params * 4 / 1e6);
  std::printf(
      "threads %d: one step at batch 1 %.3f ms at tau 0 (%.3f ms sampling at tau 1); batched (%d): %.0f "
      "dream steps/s; medians of %d\n",
      FLAGS_threads, Median(one), Median(one_sampled), FLAGS_batch, Median(batched), FLAGS_repeats);
  return 0;
}

}  // namespace
}  // namespace rlflow

int main(int argc, char** argv) { return rlflow::cli::Main(argc, argv, "world_model_bench", rlflow::Run); }
