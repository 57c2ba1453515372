#include "world_model/loop.h"

#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "agents/env.h"
#include "agents/episode.h"
#include "agents/gnn.h"
#include "core/error.h"
#include "core/file_util.h"
#include "world_model/collect.h"
#include "world_model/controller_episode.h"
#include "world_model/dream_train.h"
#include "world_model/encoder.h"
#include "world_model/rollouts.h"
#include "world_model/train.h"

namespace rlflow::world_model {
namespace {

bool Stop(const LoopOptions& o) { return o.interrupted != nullptr && o.interrupted->load(); }

// Every round's episodes so far in one file, under round 1's header.
void Merge(const std::vector<std::string>& parts, const std::string& out, int round) {
  Rollouts first = ReadRollouts(parts.front());
  RolloutHeader header = first.header;
  header.set_policy("loop rounds 1-" + std::to_string(round) + " (random, then the previous round's controller)");
  header.set_first_episode(0);
  std::filesystem::remove(out + ".partial");
  RolloutWriter writer(out, header);
  for (size_t i = 0; i < parts.size(); ++i) {
    Rollouts part = i == 0 ? std::move(first) : ReadRollouts(parts[i]);
    if (part.header.latent_size() != header.latent_size() || part.header.rules_id() != header.rules_id() ||
        part.header.rule_actions() != header.rule_actions() || part.header.encoder() != header.encoder())
      Fail("'", parts[i], "' was collected with another encoder or rule database than '", parts.front(), "'");
    for (const Episode& e : part.episodes) writer.Append(e);
  }
  writer.Finish();
}

}  // namespace

LoopResult RunLoop(const LoopOptions& o) {
  if (o.models.empty()) Fail("--model is required (zoo names such as resnet18, or ONNX files)");
  if (o.out.empty()) Fail("--out is required (a directory for the rounds)");
  if (o.rounds < 1) Fail("--rounds must be >= 1, got ", o.rounds);
  if (o.episodes < 2) Fail("--episodes must be >= 2 (some are held out), got ", o.episodes);
  const std::string out = ResolveUserPath(o.out);
  std::filesystem::create_directories(out);
  auto say = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };

  // The real environment the controllers are evaluated in (the
  // collections build the same).
  std::unique_ptr<RealWorld> world = MakeRealWorld(o.models, o.seed, o.cost, "", "", o.argv0);
  const std::vector<Graph>& graphs = world->graphs;
  std::shared_ptr<agents::PolicyImpl> model_free =
      agents::LoadPolicyForInference(world->encoder_path, agents::RuleIds(world->rules));
  agents::EnvOptions eo;
  eo.horizon = o.horizon;
  eo.seed = o.seed;

  LoopResult result;
  nlohmann::json summary = nlohmann::json::array();
  std::vector<std::string> parts;
  int64_t real_total = 0;
  for (int k = 1; k <= o.rounds; ++k) {
    const std::string dir = out + "/round_" + std::to_string(k);
    std::filesystem::create_directories(dir);
    LoopRound r;
    r.round = k;
    // Collect.
    const std::string part = dir + "/new.rollouts";
    if (!FileExists(part)) {
      say("round " + std::to_string(k) + ": collecting " + std::to_string(o.episodes) + " episodes (" +
          (k == 1 ? std::string("random policy") : "round " + std::to_string(k - 1) + "'s controller") + ")");
      CollectOptions c;
      c.models = o.models;
      c.episodes = o.episodes;
      c.out = part;
      c.seed = o.seed;
      c.first_episode = (k - 1) * o.episodes;
      c.horizon = o.horizon;
      c.cost = o.cost;
      c.reward = o.reward;
      c.locations = o.locations;
      c.argv0 = o.argv0;
      c.interrupted = o.interrupted;
      if (k > 1) {
        c.controller = out + "/round_" + std::to_string(k - 1) + "/dream";
        c.epsilon = o.epsilon;
      }
      CollectResult cr = Collect(c);
      if (!cr.finished) return result;
      WriteFileAtomically(
          dir + "/collect.json",
          nlohmann::json{{"real_steps", cr.real_steps}, {"real_measurements", cr.real_measurements}}.dump(2) + "\n");
    }
    if (FileExists(dir + "/collect.json"))
      r.real_measurements =
          nlohmann::json::parse(ReadFile(dir + "/collect.json")).value("real_measurements", int64_t{0});
    parts.push_back(part);
    {
      Rollouts mine = ReadRollouts(part);
      r.episodes = static_cast<int>(mine.episodes.size());
      for (const Episode& e : mine.episodes) r.real_steps += e.steps_size();
    }
    real_total += r.real_steps;
    r.real_steps_total = real_total;
    std::string data = part;
    if (k > 1) {
      data = dir + "/data.rollouts";
      if (!FileExists(data)) Merge(parts, data, k);
    }
    if (Stop(o)) return result;
    // The world model.
    const std::string wm = dir + "/wm";
    if (!FileExists(wm + "/world_model.pt")) {
      say("round " + std::to_string(k) + ": training the world model");
      TrainOptions t;
      t.data = data;
      t.out = wm;
      t.epochs = o.epochs;
      t.reward_loss = o.reward_loss;
      t.lr_schedule = o.lr_schedule;
      t.kind = o.world_model_kind;
      t.seed = o.seed;
      t.interrupted = o.interrupted;
      if (!TrainWorldModel(t).finished) return result;
    }
    {
      nlohmann::json eval = nlohmann::json::parse(ReadFile(wm + "/eval.json", "world-model evaluation"));
      const nlohmann::json& all = eval.at("held_out");
      r.latent_error_1 = all.value("latent_error_1", 0.0);
      r.reward_mae = all.value("reward_mae", 0.0);
      r.mask_recall = all.value("mask_recall", 0.0);
    }
    if (Stop(o)) return result;
    // The controller, in the dream.
    say("round " + std::to_string(k) + ": training the controller in the dream");
    DreamTrainOptions d;
    d.world_model = wm;
    d.data = data;
    d.out = dir + "/dream";
    d.tau = o.tau;
    d.steps = o.dream_steps;
    d.horizon = o.horizon;
    d.seed = o.seed;
    DreamTrainResult dr = TrainController(d);
    if (!dr.finished) return result;
    if (dr.real_steps != 0) Fail("internal: the real environment was stepped while dreaming");
    r.dream_steps = dr.dream_steps;
    // Evaluated in the real environment.
    DreamAgent agent = LoadDreamAgent(dir + "/dream", agents::RuleIds(world->rules), world->encoder->size());
    nlohmann::json per_model = nlohmann::json::object();
    for (size_t m = 0; m < graphs.size(); ++m) {
      if (r.models.count(o.models[m])) continue;
      agents::RewriteEnv env(world->matcher.get(), world->cost.get(), eo);
      ControllerEpisode ep =
          RunControllerEpisode(*agent.controller, agent.vocabulary, *world->encoder, env, graphs[m], o.interrupted);
      if (ep.interrupted) return result;
      LoopRound::ModelResult& mr = r.models[o.models[m]];
      mr.initial_cost = ep.initial_cost;
      mr.best_cost = ep.best_cost;
      mr.improvement = (ep.initial_cost - ep.best_cost) / ep.initial_cost;
      mr.steps = ep.steps;
      r.eval_real_steps += env.real_steps();
      {
        agents::RewriteEnv reference(world->matcher.get(), world->cost.get(), eo);
        agents::EpisodeResult e = agents::RunEpisode(*model_free, reference, graphs[m], /*greedy=*/true);
        mr.model_free_improvement = (e.initial_cost - e.best_cost) / e.initial_cost;
        mr.model_free_steps = e.steps;
      }
      per_model[o.models[m]] = {{"initial_cost", mr.initial_cost},
                                {"best_cost", mr.best_cost},
                                {"improvement", mr.improvement},
                                {"steps", mr.steps},
                                {"model_free_improvement", mr.model_free_improvement},
                                {"model_free_steps", mr.model_free_steps}};
    }
    nlohmann::json j = {
        {"round", k},
        {"episodes", r.episodes},
        {"real_steps", r.real_steps},
        {"real_steps_total", r.real_steps_total},
        {"eval_real_steps", r.eval_real_steps},
        {"dream_steps", r.dream_steps},
        {"held_out",
         {{"latent_error_1", r.latent_error_1}, {"reward_mae", r.reward_mae}, {"mask_recall", r.mask_recall}}},
        {"models", per_model}};
    WriteFileAtomically(dir + "/eval.json", j.dump(2) + "\n");
    summary.push_back(j);
    WriteFileAtomically(out + "/summary.json", summary.dump(2) + "\n");
    std::string line = "round " + std::to_string(k) + ": " + std::to_string(r.real_steps_total) + " real steps so far;";
    for (const auto& [name, mr] : r.models) {
      char buf[64];
      std::snprintf(buf, sizeof buf, " %.2f%% (model-free %.2f%%)", 100 * mr.improvement,
                    100 * mr.model_free_improvement);
      line += " " + name + buf;
    }
    say(line);
    result.rounds.push_back(std::move(r));
  }
  result.finished = true;
  return result;
}

}  // namespace rlflow::world_model
