#include "world_model/dream_train.h"

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <vector>

#include "agents/env.h"
#include "agents/ppo.h"
#include "agents/training_run.h"
#include "core/error.h"
#include "core/file_util.h"
#include "world_model/dream.h"
#include "world_model/train.h"

namespace rlflow::world_model {

DreamTrainResult TrainController(const DreamTrainOptions& o) {
  if (o.world_model.empty()) Fail("--world_model is required (world_model.pt of //world_model:train)");
  if (o.data.empty()) Fail("--data is required (the rollout file the world model was trained on)");
  if (o.out.empty()) Fail("--out is required (a directory for the controller and its metrics)");
  if (o.steps < 1) Fail("--steps must be >= 1");
  if (!(o.tau > 0)) Fail("--tau must be > 0, got ", o.tau);
  if (o.starts != "initial" && o.starts != "all") Fail("--starts must be initial or all, got '", o.starts, "'");
  std::string wm_path = ResolveUserPath(o.world_model);
  if (FileExists(wm_path + "/world_model.pt")) wm_path += "/world_model.pt";
  const int64_t real_before = agents::RewriteEnv::ProcessSteps();

  std::ostringstream config;
  config << "world_model=" << wm_path << "\nworld_model_bytes=" << ReadFile(wm_path, "world model").size()
         << "\ndata=" << ResolveUserPath(o.data) << "\ntau=" << o.tau << "\nhorizon=" << o.horizon
         << "\nseed=" << o.seed << "\nhidden=" << o.hidden << "\nrollout_steps=" << o.rollout_steps
         << "\nepochs=" << o.epochs << "\nminibatches=" << o.minibatches << "\nlr=" << o.lr << "\n"
         << (o.starts == "initial" ? "" : "starts=" + o.starts + "\n");
  train::TrainingRun run{ResolveUserPath(o.out), config.str(), o.steps};
  const bool resume = train::PrepareRun(run);

  WorldModel model = LoadWorldModel(wm_path);
  std::vector<DreamStart> starts =
      DreamStarts(ReadRollouts(ResolveUserPath(o.data)), *model, o.starts == "all", o.seed);
  DreamOptions dream;
  dream.tau = o.tau;
  dream.horizon = o.horizon;
  dream.seed = o.seed;
  DreamEnv env(model, dream);
  torch::manual_seed(o.seed);
  Controller controller(model->options().latent, model->vocabulary_size(), o.hidden);
  agents::PpoOptions po;
  po.rollout_steps = o.rollout_steps;
  po.epochs = o.epochs;
  po.minibatches = o.minibatches;
  po.lr = o.lr;
  // The first `initial` starts are the models' initial states.
  std::set<std::string> models;
  for (const DreamStart& s : starts) models.insert(s.model);
  const size_t initial = models.size(), recorded = starts.size() - initial;
  size_t next = 0;
  auto pick = [&]() -> const DreamStart& {
    const size_t k = next++;
    if (recorded == 0) return starts[k % initial];
    return k % 2 == 0 ? starts[(k / 2) % initial] : starts[initial + (k / 2) % recorded];
  };
  agents::BasicPpoTrainer<DreamEnv, Controller, DreamStart> trainer(controller, &env, pick, po, o.seed);
  train::RunTraining(run, trainer, resume, [&] { next = static_cast<size_t>(trainer.updates()); });
  DreamTrainResult r;
  r.updates = trainer.updates();
  r.dream_steps = trainer.env_steps();
  r.real_steps = agents::RewriteEnv::ProcessSteps() - real_before;
  r.finished = trainer.env_steps() >= o.steps;
  if (!r.finished) return r;  // interrupted: the checkpoint is kept
  r.controller = run.dir + "/controller.pt";
  SaveController(*controller, r.controller);
  WriteFileAtomically(run.dir + "/world_model.pt", ReadFile(wm_path, "world model"));
  nlohmann::json summary = {{"updates", r.updates},
                            {"dream_steps", r.dream_steps},
                            {"dream_steps_this_run", env.steps()},
                            {"real_steps", r.real_steps},
                            {"tau", o.tau},
                            {"starts", starts.size()}};
  WriteFileAtomically(run.dir + "/summary.json", summary.dump(2) + "\n");
  return r;
}

}  // namespace rlflow::world_model
