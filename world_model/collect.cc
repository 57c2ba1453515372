#include "world_model/collect.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>

#include "agents/env.h"
#include "agents/episode.h"
#include "agents/gnn.h"
#include "core/error.h"
#include "core/file_util.h"
#include "core/onnx_io.h"
#include "core/rewrite/matcher.h"
#include "core/rules/rule.h"
#include "runtime/cost_model.h"
#include "search/canonical.h"
#include "world_model/controller_episode.h"
#include "world_model/encoder.h"
#include "world_model/rollouts.h"
#include "world_model/train.h"
#include "zoo/load.h"

namespace rlflow::world_model {
namespace {

ValidActions ValidOf(const agents::Observation& o) {
  ValidActions v;
  v.set_rule_mask(PackMask(o.rule_mask));
  for (size_t a = 0; a < o.rule_mask.size(); ++a)
    if (o.rule_mask[a]) v.add_locations(static_cast<uint32_t>(o.locations[a].size()));
  v.set_stop_only(o.candidates.empty());
  return v;
}

// The episode's own seed: a function of (seed, episode) only.
uint64_t EpisodeSeed(uint64_t seed, int episode) {
  std::seed_seq s{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(episode)};
  std::mt19937_64 g(s);
  return g();
}

// The dream action (rule action, location) of flat action `flat`; the
// stop action is (-1, -1). A candidate beyond the location cap is not in
// the dream's action space: the rule action's first location stands for it.
std::pair<int, int> DreamAction(const agents::Observation& o, int flat) {
  if (flat >= o.stop_action()) return {-1, -1};
  const int a = o.candidates[flat].rule_action;
  const std::vector<int32_t>& l = o.locations[a];
  auto it = std::find(l.begin(), l.end(), flat);
  return {a, it == l.end() ? 0 : static_cast<int>(it - l.begin())};
}

}  // namespace

RealWorld::~RealWorld() = default;

std::unique_ptr<RealWorld> MakeRealWorld(const std::vector<std::string>& models, uint64_t seed, const std::string& cost,
                                         const std::string& rules, const std::string& encoder,
                                         const std::string& argv0) {
  if (cost != "analytical" && cost != "measured") Fail("--cost must be analytical or measured, got '", cost, "'");
  auto w = std::make_unique<RealWorld>();
  rules::RuleDatabase db = LoadRuleDatabase(RuleDatabasePath(rules, argv0));
  // As the agents: rules that produce a runtime's own operators are left out.
  w->rules = RuleList(db);
  w->matcher =
      std::make_unique<Matcher>(w->rules, /*both_directions=*/true, RulesEnabledFor(w->rules, "onnx", kMaxOpset));
  w->encoder_path = encoder.empty() ? FindRunfile("agents/zoo_agent.pt", argv0) : ResolveUserPath(encoder);
  if (w->encoder_path.empty()) Fail("the checked-in agent agents/zoo_agent.pt was not found (pass --encoder=PATH)");
  w->encoder = std::make_unique<LatentEncoder>(w->encoder_path, agents::RuleIds(w->rules));
  for (const std::string& m : models) {
    LoadOptions lo;
    lo.zoo_seed = seed;
    w->graphs.push_back(CanonicalForm(LoadModel(m, lo).graph));
  }
  w->device = MakeTimingBackend("cpu");
  w->counted = std::make_unique<CountingBackend>(w->device.get());
  if (cost == "measured") {
    auto measured = std::make_unique<MeasuredCostModel>(w->counted.get());
    for (const Graph& g : w->graphs) measured->Calibrate(g, 3);
    w->base = std::move(measured);
  } else {
    w->base = std::make_unique<AnalyticalCostModel>();
  }
  w->cost = std::make_unique<BatchNormAwareCost>(w->base.get());
  return w;
}

CollectResult Collect(const CollectOptions& o) {
  if (o.models.empty()) Fail("--model is required (zoo names such as resnet18, or ONNX files)");
  if (o.out.empty()) Fail("--out is required (the rollout file to write)");
  if (o.episodes < 1) Fail("--episodes must be >= 1, got ", o.episodes);
  if (o.horizon < 1) Fail("--horizon must be >= 1, got ", o.horizon);
  if (o.locations != "uniform" && o.locations != "best")
    Fail("--locations must be uniform or best, got '", o.locations, "'");
  if (o.first_episode < 0) Fail("first episode must be >= 0, got ", o.first_episode);
  agents::EnvOptions eo;
  eo.reward = agents::ParseRewardKind(o.reward);
  eo.horizon = o.horizon;
  eo.seed = o.seed;
  const std::string out = ResolveUserPath(o.out);
  CheckWritablePath(out, "--out");
  {
    // Neither the file nor its resumable part replaces what is read.
    std::vector<FileRole> inputs = {{"--rules", ResolveUserPath(o.rules)}, {"--encoder", ResolveUserPath(o.encoder)}};
    if (o.policy != "random") inputs.push_back({"--policy", ResolveUserPath(o.policy)});
    for (const std::string& m : o.models) inputs.push_back({"--model", ResolveUserPath(m)});
    CheckFileRoles({{"--out", out}, {"--out's partial file", out + ".partial"}}, inputs);
  }

  std::unique_ptr<RealWorld> world = MakeRealWorld(o.models, o.seed, o.cost, o.rules, o.encoder, o.argv0);
  const std::vector<rules::Rule>& rule_list = world->rules;
  const int rule_actions = world->rule_actions();
  LatentEncoder& encoder = *world->encoder;
  const std::vector<Graph>& graphs = world->graphs;
  CountingBackend& counted = *world->counted;
  std::shared_ptr<agents::PolicyImpl> policy;
  std::shared_ptr<ControllerImpl> controller;
  std::vector<int64_t> controller_vocabulary;  // the controller's actions as this database's rule actions
  if (!o.controller.empty()) {
    if (!(o.epsilon >= 0 && o.epsilon <= 1)) Fail("--epsilon must be in [0, 1], got ", o.epsilon);
    const std::string dir = ResolveUserPath(o.controller);
    DreamAgent agent = LoadDreamAgent(dir, agents::RuleIds(rule_list), encoder.size());
    controller = agent.controller;
    controller_vocabulary = agent.vocabulary;
  } else if (o.policy != "random") {
    policy = agents::LoadPolicyForInference(ResolveUserPath(o.policy), agents::RuleIds(world->rules));
  }

  agents::RewriteEnv env(world->matcher.get(), world->cost.get(), eo, &counted);

  RolloutHeader header;
  header.set_latent_size(encoder.size());
  header.set_rule_actions(rule_actions);
  header.set_rules_id(agents::RuleDatabaseId(agents::RuleIds(rule_list)));
  for (const std::string& id : agents::RuleIds(rule_list)) header.add_rule_ids(id);
  header.set_max_locations(eo.max_locations);
  header.set_encoder(encoder.description());
  header.set_policy(o.controller.empty()
                        ? o.policy
                        : "controller:" + ResolveUserPath(o.controller) + " epsilon=" + std::to_string(o.epsilon));
  header.set_seed(o.seed);
  header.set_horizon(o.horizon);
  header.set_first_episode(static_cast<uint32_t>(o.first_episode));
  if (o.locations != "uniform") header.set_policy(header.policy() + " locations=" + o.locations);
  header.set_reward(o.reward);
  for (const std::string& m : o.models) header.add_models(m);
  RolloutWriter writer(out, header);
  CollectResult r;
  const int resumed = writer.episodes();
  if (resumed > 0 && o.progress)
    o.progress("resuming " + out + ".partial: " + std::to_string(resumed) + " episodes already written");
  if (resumed > o.episodes)
    Fail("'", out, ".partial' already holds ", resumed, " episodes, more than --episodes=", o.episodes);

  // A location of rule action `a` (an index into obs.locations[a]).
  auto pick_location = [&](const agents::Observation& obs, int a, std::mt19937_64& rng) {
    const std::vector<int32_t>& locs = obs.locations[a];
    if (o.locations == "best")
      return static_cast<int>(std::max_element(locs.begin(), locs.end(),
                                               [&](int32_t x, int32_t y) {
                                                 return obs.candidates[x].estimated_gain <
                                                        obs.candidates[y].estimated_gain;
                                               }) -
                              locs.begin());
    return std::uniform_int_distribution<int>(0, static_cast<int>(locs.size()) - 1)(rng);
  };
  for (int k = resumed; k < o.episodes; ++k) {
    if (o.interrupted != nullptr && o.interrupted->load()) break;
    const size_t m = static_cast<size_t>(o.first_episode + k) % graphs.size();
    const uint64_t seed = EpisodeSeed(o.seed, o.first_episode + k);
    std::mt19937_64 rng(seed);
    Episode e;
    e.set_model(o.models[m]);
    e.set_seed(seed);
    env.Reset(graphs[m]);
    e.set_initial_cost_ms(env.state().cost());
    *e.mutable_initial_valid() = ValidOf(env.observation());
    while (!env.done()) {
      const agents::Observation& obs = env.observation();
      Step* s = e.add_steps();
      for (float v : encoder.Encode(obs)) s->add_latent(v);
      int flat = obs.stop_action();
      const bool explore = controller == nullptr || std::uniform_real_distribution<double>(0, 1)(rng) < o.epsilon;
      if (!explore) {
        std::vector<float> latent(s->latent().begin(), s->latent().end());
        const int rule = SampleControllerRule(*controller, controller_vocabulary, obs, std::move(latent),
                                              static_cast<float>(env.steps()) / eo.horizon, rng);
        if (rule >= 0) flat = env.FlatAction(rule, pick_location(obs, rule, rng));
      } else if (policy != nullptr) {
        flat = agents::SamplePolicyAction(*policy, obs, rng);
      } else {
        // Uniform over the valid rule actions and stop, then over the
        // chosen rule action's locations.
        std::vector<int> valid;
        for (size_t a = 0; a < obs.rule_mask.size(); ++a)
          if (obs.rule_mask[a]) valid.push_back(static_cast<int>(a));
        const int pick = std::uniform_int_distribution<int>(0, static_cast<int>(valid.size()))(rng);
        if (pick < static_cast<int>(valid.size())) {
          const int a = valid[pick];
          flat = env.FlatAction(a, pick_location(obs, a, rng));
        }
      }
      const auto [rule_action, location] = DreamAction(obs, flat);
      if (rule_action >= 0) flat = env.FlatAction(rule_action, location);
      s->set_rule_action(rule_action);
      s->set_location(location);
      agents::StepResult step = env.Step(flat);
      s->set_reward(static_cast<float>(step.reward));
      s->set_done(step.done);
      s->set_cost_ms(step.info.cost_ms);
      *s->mutable_next_valid() = ValidOf(env.observation());
    }
    for (float v : encoder.Encode(env.observation())) e.add_final_latent(v);
    writer.Append(e);
    ++r.new_episodes;
    if (o.progress)
      o.progress("episode " + std::to_string(k + 1) + "/" + std::to_string(o.episodes) + " (" + o.models[m] +
                 "): " + std::to_string(e.steps_size()) + " steps, cost " + std::to_string(e.initial_cost_ms()) +
                 " -> " + std::to_string(env.state().cost()) + " ms");
  }
  r.real_steps = env.real_steps();
  r.real_measurements = counted.measurements();
  if (writer.episodes() < o.episodes) {
    r.episodes = writer.episodes();
    return r;  // interrupted: PATH.partial keeps what was written
  }
  writer.Finish();
  r.finished = true;

  // Read back (the file checks), and measure how the latent separates
  // states of one model by cost.
  Rollouts data = ReadRollouts(out);
  r.episodes = static_cast<int>(data.episodes.size());
  std::map<std::string, std::vector<std::pair<double, const google::protobuf::RepeatedField<float>*>>> states;
  for (const Episode& e : data.episodes) {
    double c = e.initial_cost_ms();
    for (const Step& s : e.steps()) {
      states[e.model()].push_back({c, &s.latent()});
      c = s.cost_ms();
    }
    r.steps += e.steps_size();
  }
  std::mt19937_64 rng(o.seed);
  std::vector<double> dz, dc;
  for (const auto& [model, list] : states) {
    if (list.size() < 2) continue;
    std::uniform_int_distribution<size_t> pick(0, list.size() - 1);
    for (int i = 0; i < 1000; ++i) {
      const auto& [ca, za] = list[pick(rng)];
      const auto& [cb, zb] = list[pick(rng)];
      double d = 0;
      for (int j = 0; j < za->size(); ++j) d += ((*za)[j] - (*zb)[j]) * ((*za)[j] - (*zb)[j]);
      dz.push_back(std::sqrt(d));
      dc.push_back(std::fabs(ca - cb));
    }
  }
  r.pairs = static_cast<int>(dz.size());
  r.latent_cost_correlation = RankCorrelation(dz, dc);
  return r;
}

}  // namespace rlflow::world_model
