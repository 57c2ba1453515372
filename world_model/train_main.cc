// Trains the world model (MDN-RNN or RSSM, --world_model_kind) on rollouts of //world_model:collect.
//
//   ./bazelw run //world_model:train -- --data=FILE --out=DIR [--epochs=30]
//
// Progress on the terminal (one line per epoch); DIR/metrics.csv,
// DIR/curves.png, DIR/checkpoint.pt after every epoch, DIR/world_model.pt
// and DIR/eval.json at the end (world_model/train.h). Killed and started
// again with the same command, it resumes from the last epoch.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>

#include "core/cli.h"
#include "runtime/threads.h"
#include "world_model/train.h"

DEFINE_string(data, "", "rollout file (//world_model:collect); required");
DEFINE_string(out, "", "output directory (metrics.csv, curves.png, checkpoint.pt, world_model.pt); required");
DEFINE_int32(epochs, 30, "epochs over the training episodes");
DEFINE_int32(batch, 16, "episodes per minibatch");
DEFINE_double(lr, 1e-3, "Adam learning rate");
DEFINE_double(held_out, 0.2, "fraction of the episodes held out for the metrics");
DEFINE_uint64(seed, 1, "seed of the initialisation, the held-out split and the episodes' order");
DEFINE_string(world_model_kind, "mdn_rnn",
              "the model: mdn_rnn (LSTM + mixture of Gaussians, RLFlow) or rssm (DreamerV3-style state-space model)");
DEFINE_int32(hidden, 256, "the recurrent state's size (LSTM or GRU)");
DEFINE_int32(mixtures, 8, "components of the predicted distribution of the next latent");
DEFINE_string(reward_loss, "huber", "the reward head's loss: mse or huber");
DEFINE_string(lr_schedule, "cosine", "the learning rate over the epochs: cosine (from --lr down to 0), or constant");
DEFINE_int32(threads, 1, "ATen threads");

namespace rlflow {
namespace {

int Run() {
  world_model::TrainOptions o;
  o.data = FLAGS_data;
  o.out = FLAGS_out;
  o.epochs = FLAGS_epochs;
  o.batch = FLAGS_batch;
  o.lr = FLAGS_lr;
  o.held_out = FLAGS_held_out;
  o.seed = FLAGS_seed;
  o.hidden = FLAGS_hidden;
  o.mixtures = FLAGS_mixtures;
  o.kind = FLAGS_world_model_kind;
  o.reward_loss = FLAGS_reward_loss;
  o.lr_schedule = FLAGS_lr_schedule;
  o.threads = FLAGS_threads;
  o.progress = [](const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  };
  SetComputeThreads(FLAGS_threads);
  cli::InstallInterruptHandler();
  o.interrupted = &cli::interrupted;
  world_model::TrainResult r = world_model::TrainWorldModel(o);
  if (!r.finished) {
    std::printf("interrupted after epoch %d: the checkpoint is kept (run the same command to go on)\n", r.epochs);
    return 1;
  }
  const world_model::HeldOutMetrics& m = r.held_out;
  std::printf(
      "done: %d epochs, %lld parameters; held out (%d episodes, %lld steps): latent NLL %.3f nats/step, latent error "
      "%.4f (1 step) %.4f (5 steps), reward MAE %.4f (predicting 0: %.4f) RMSE %.4f (%.4f), done accuracy %.3f "
      "(never done: %.3f), "
      "mask precision %.3f recall %.3f; %s\n",
      r.epochs, static_cast<long long>(r.parameters), m.episodes, static_cast<long long>(m.steps), m.nll,
      m.latent_error_1, m.latent_error_5, m.reward_mae, m.reward_mae_zero, m.reward_rmse, m.reward_rmse_zero,
      m.done_accuracy, m.done_accuracy_never, m.mask_precision, m.mask_recall, FLAGS_out.c_str());
  return 0;
}

}  // namespace
}  // namespace rlflow

int main(int argc, char** argv) {
  return rlflow::cli::Main(argc, argv, "train: ./bazelw run //world_model:train -- --data=FILE --out=DIR", rlflow::Run);
}
