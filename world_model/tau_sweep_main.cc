// The world model's temperature sweep (issue #23, after RLFlow's Table 3):
// for each tau, a controller is trained in the dream at that temperature
// (same seed, same steps), then scored inside the model (the mean return of
// its greedy policy over dream episodes from the graph's recorded start, at
// that tau) and in the real environment (the greedy episode on the graph,
// with the analytical cost model the rollouts were collected with; the
// return is 100 x (initial - final cost) / initial cost, what the
// normalised rewards add up to).
//
//   ./bazelw run //world_model:tau_sweep -- --world_model=DIR --data=FILE --model=resnet18
//   [--taus=0.5,0.75,1,1.25,1.5,1.75]
#include <gflags/gflags.h>

#include <cstdio>
#include <random>

#include "agents/env.h"
#include "agents/gnn.h"
#include "agents/ppo.h"
#include "core/cli.h"
#include "core/error.h"
#include "core/file_util.h"
#include "core/onnx_io.h"
#include "core/rewrite/matcher.h"
#include "core/rules/rule.h"
#include "core/strings.h"
#include "runtime/threads.h"
#include "search/canonical.h"
#include "world_model/controller_episode.h"
#include "world_model/dream.h"
#include "world_model/train.h"
#include "zoo/load.h"

DEFINE_string(world_model, "", "world_model.pt of //world_model:train, or its directory; required");
DEFINE_string(data, "", "the rollout file it was trained on (the dreams' starts); required");
DEFINE_string(model, "resnet18", "the graph: a model of the rollouts (zoo name or ONNX file as collected)");
DEFINE_string(taus, "0.5,0.75,1,1.25,1.5,1.75", "temperatures");
DEFINE_int64(steps, 8192, "dream steps of PPO per temperature");
DEFINE_int32(horizon, 50, "steps per episode (dream and real)");
DEFINE_int32(dream_episodes, 32, "dream episodes scoring each controller inside the model");
DEFINE_uint64(seed, 1, "seed");

namespace rlflow {
namespace {

int Run() {
  if (FLAGS_world_model.empty() || FLAGS_data.empty()) Fail("--world_model and --data are required");
  SetComputeThreads(1);
  torch::set_num_threads(1);
  std::string wm_path = ResolveUserPath(FLAGS_world_model);
  if (FileExists(wm_path + "/world_model.pt")) wm_path += "/world_model.pt";
  world_model::WorldModel model = world_model::LoadWorldModel(wm_path);
  world_model::Rollouts data = world_model::ReadRollouts(ResolveUserPath(FLAGS_data));
  world_model::DreamStart start;
  bool found = false;
  for (const world_model::DreamStart& s : world_model::DreamStarts(data, *model))
    if (s.model == FLAGS_model) start = s, found = true;
  if (!found) Fail("--model=", FLAGS_model, " has no episode in ", FLAGS_data);

  rules::RuleDatabase db = LoadRuleDatabase(RuleDatabasePath("", gflags::GetArgv0()));
  std::vector<rules::Rule> rule_list = RuleList(db);
  Matcher matcher(rule_list, /*both_directions=*/true, RulesEnabledFor(rule_list, "onnx", kMaxOpset));
  world_model::LatentEncoder encoder(FindRunfile("agents/zoo_agent.pt", gflags::GetArgv0()),
                                     agents::RuleIds(rule_list));
  LoadOptions lo;
  lo.zoo_seed = data.header.seed();
  Graph graph = CanonicalForm(LoadModel(FLAGS_model, lo).graph);
  AnalyticalCostModel analytical;
  BatchNormAwareCost cost(&analytical);

  std::printf("| tau | score in the dream (mean of %d) | real return (final) | real return (best) | real steps |\n",
              FLAGS_dream_episodes);
  std::printf("|---:|---:|---:|---:|---:|\n");
  for (const std::string& t : SplitList(FLAGS_taus)) {
    const double tau = std::stod(t);
    world_model::DreamOptions dream{tau, FLAGS_horizon, FLAGS_seed};
    world_model::DreamEnv env(model, dream);
    torch::manual_seed(FLAGS_seed);
    world_model::Controller controller(model->options().latent, model->vocabulary_size());
    agents::PpoOptions po;
    po.rollout_steps = 256;
    po.lr = 3e-4;
    agents::BasicPpoTrainer<world_model::DreamEnv, world_model::Controller, world_model::DreamStart> trainer(
        controller, &env, [&] { return start; }, po, FLAGS_seed);
    while (trainer.env_steps() < FLAGS_steps) trainer.Iterate();
    controller->eval();
    torch::NoGradGuard no_grad;
    // Inside the model: greedy actions, sampled latents.
    double dream_score = 0;
    for (int e = 0; e < FLAGS_dream_episodes; ++e) {
      world_model::DreamEnv score(model, world_model::DreamOptions{tau, FLAGS_horizon, FLAGS_seed + 1000 + e});
      score.Reset(start);
      for (bool done = false; !done;) {
        world_model::ControllerImpl::Output out = controller->forward({&score.observation()});
        const int a =
            static_cast<int>(out.logits[0].masked_fill(out.mask[0].logical_not(), -1e30).argmax().item<int64_t>());
        world_model::DreamStepResult r = score.Step(a);
        dream_score += r.reward;
        done = r.done;
      }
    }
    dream_score /= FLAGS_dream_episodes;
    // In the real environment.
    agents::EnvOptions eo;
    eo.horizon = FLAGS_horizon;
    agents::RewriteEnv real(&matcher, &cost, eo);
    world_model::ControllerEpisode ep =
        world_model::RunControllerEpisode(*controller, model->options().vocabulary, encoder, real, graph);
    const double final_return = 100.0 * (ep.initial_cost - real.state().cost()) / ep.initial_cost;
    const double best_return = 100.0 * (ep.initial_cost - ep.best_cost) / ep.initial_cost;
    std::printf("| %g | %.3f | %.3f | %.3f | %d |\n", tau, dream_score, final_return, best_return, ep.steps);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace rlflow

int main(int argc, char** argv) {
  return rlflow::cli::Main(argc, argv, "tau_sweep --world_model=DIR --data=FILE", rlflow::Run);
}
