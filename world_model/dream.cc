#include "world_model/dream.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "agents/archive.h"
#include "core/error.h"

namespace rlflow::world_model {

namespace nn = torch::nn;

std::vector<DreamStart> DreamStarts(const Rollouts& data, const WorldModelImpl& model, bool all, uint64_t seed) {
  const int actions = static_cast<int>(data.header.rule_actions()), v = model.vocabulary_size();
  if (actions != model.options().rule_actions)
    Fail("the rollouts have ", actions, " rule actions, the world model ", model.options().rule_actions);
  if (static_cast<int>(data.header.latent_size()) != model.options().latent)
    Fail("the rollouts' latents have size ", data.header.latent_size(), ", the world model's ", model.options().latent);
  // The state before step t of episode e: its latent and its valid actions.
  auto start = [&](const Episode& e, int t) {
    const ValidActions& valid = t == 0 ? e.initial_valid() : e.steps(t - 1).next_valid();
    DreamStart s;
    s.model = e.model();
    s.state.latent.assign(e.steps(t).latent().begin(), e.steps(t).latent().end());
    s.state.valid.assign(v, 0);
    s.state.locations.assign(v, 0);
    std::vector<uint8_t> mask = UnpackMask(valid.rule_mask(), actions);
    int k = 0;
    for (int a = 0; a < actions; ++a) {
      if (!mask[a]) continue;
      const int64_t j = model.VocabularyIndex(a);
      if (j >= 0) {
        s.state.valid[j] = 1;
        s.state.locations[j] = k < valid.locations_size() ? valid.locations(k) : 1;
      }
      ++k;
    }
    return s;
  };
  std::vector<DreamStart> starts, others;
  std::set<std::string> seen;
  for (const Episode& e : data.episodes) {
    if (e.steps_size() == 0) continue;
    if (seen.insert(e.model()).second)
      starts.push_back(start(e, 0));
    else if (all)
      others.push_back(start(e, 0));
    if (all)
      for (int t = 1; t < e.steps_size(); ++t) others.push_back(start(e, t));
  }
  if (starts.empty()) Fail("the rollouts hold no episode to start a dream from");
  std::shuffle(others.begin(), others.end(), std::mt19937_64(seed));
  for (DreamStart& s : others) starts.push_back(std::move(s));
  return starts;
}

DreamEnv::DreamEnv(WorldModel model, DreamOptions options) : model_(std::move(model)), o_(options), rng_(options.seed) {
  if (!(o_.tau > 0)) Fail("--tau must be > 0, got ", o_.tau);
  if (o_.horizon < 1) Fail("--horizon must be >= 1, got ", o_.horizon);
  model_->eval();
}

const DreamObservation& DreamEnv::Reset(const DreamStart& start) {
  obs_ = start.state;
  obs_.step_fraction = 0;
  have_state_ = false;
  done_ = false;
  steps_ = 0;
  return obs_;
}

DreamStepResult DreamEnv::Step(int action) {
  DreamStepResult r;
  const int v = model_->vocabulary_size();
  if (done_ || action < 0 || action > v || (action < v && !obs_.valid[action])) {
    done_ = true;
    r.done = true;
    return r;
  }
  ++steps_;
  ++steps_total_;
  torch::NoGradGuard no_grad;
  const WorldModelOptions& mo = model_->options();
  int64_t rule_action = -1, location = -1;
  if (action < v) {
    rule_action = mo.vocabulary[action];
    location = std::uniform_int_distribution<int64_t>(0, std::max(1, obs_.locations[action]) - 1)(rng_);
  }
  torch::Tensor z = torch::from_blob(obs_.latent.data(), {1, mo.latent}, torch::kFloat32).clone();
  WorldModelImpl::Imagined out =
      model_->Imagine(z, torch::full({1}, rule_action, torch::kInt64), torch::full({1}, location, torch::kInt64),
                      have_state_ ? &state_ : nullptr, o_.tau, rng_);
  state_ = out.state;
  have_state_ = true;
  r.reward = out.reward[0].item<double>();
  r.done = action == v || out.done_logit[0].item<double>() > 0 || steps_ >= o_.horizon;
  torch::Tensor next = out.next_latent.contiguous();
  obs_.latent.assign(next.data_ptr<float>(), next.data_ptr<float>() + mo.latent);
  torch::Tensor valid = (out.mask_logits[0] > 0).to(torch::kUInt8).contiguous();
  torch::Tensor counts = torch::round(torch::expm1(out.log_locations[0].clamp_min(0))).to(torch::kInt32).contiguous();
  obs_.valid.assign(valid.data_ptr<uint8_t>(), valid.data_ptr<uint8_t>() + v);
  obs_.locations.assign(v, 0);
  for (int j = 0; j < v; ++j)
    if (obs_.valid[j]) obs_.locations[j] = std::max(1, counts.data_ptr<int32_t>()[j]);
  obs_.step_fraction = static_cast<float>(steps_) / o_.horizon;
  done_ = r.done;
  return r;
}

ControllerImpl::ControllerImpl(int latent, int vocabulary, int hidden) : latent_(latent), vocabulary_(vocabulary) {
  if (latent < 1 || vocabulary < 1 || hidden < 1) Fail("controller: sizes must be positive");
  body_ = register_module(
      "body", nn::Sequential(nn::Linear(latent + 1, hidden), nn::Tanh(), nn::Linear(hidden, hidden), nn::Tanh()));
  policy_ = register_module("policy", nn::Linear(hidden, vocabulary + 1));
  value_ = register_module("value", nn::Linear(hidden, 1));
  torch::NoGradGuard no_grad;
  nn::init::orthogonal_(policy_->weight, 0.01);  // near-uniform first policy (CleanRL)
  nn::init::zeros_(policy_->bias);
}

ControllerImpl::Output ControllerImpl::forward(const std::vector<const DreamObservation*>& observations) {
  const int64_t b = static_cast<int64_t>(observations.size());
  torch::Tensor x = torch::empty({b, latent_ + 1});
  torch::Tensor mask = torch::zeros({b, vocabulary_ + 1}, torch::kBool);
  auto xa = x.accessor<float, 2>();
  auto ma = mask.accessor<bool, 2>();
  for (int64_t i = 0; i < b; ++i) {
    const DreamObservation& o = *observations[i];
    if (static_cast<int>(o.latent.size()) != latent_ || static_cast<int>(o.valid.size()) != vocabulary_)
      Fail("controller: an observation of another world model (latent ", o.latent.size(), ", vocabulary ",
           o.valid.size(), ")");
    for (int d = 0; d < latent_; ++d) xa[i][d] = o.latent[d];
    xa[i][latent_] = o.step_fraction;
    for (int j = 0; j < vocabulary_; ++j) ma[i][j] = o.valid[j] != 0;
    ma[i][vocabulary_] = true;  // stop
  }
  torch::Tensor h = body_->forward(x);
  return {policy_->forward(h), mask, value_->forward(h).squeeze(-1)};
}

void SaveController(ControllerImpl& controller, const std::string& path) {
  torch::serialize::OutputArchive a;
  controller.save(a);
  a.write("sizes", torch::tensor(std::vector<int64_t>{controller.latent(), controller.vocabulary()}));
  agents::SaveArchiveAtomically(a, path);
}

Controller LoadController(const std::string& path) {
  torch::serialize::InputArchive a;
  try {
    a.load_from(path);
  } catch (const std::exception&) {
    Fail("cannot load the controller '", path, "' (missing or not a saved controller)");
  }
  torch::Tensor sizes, w;
  torch::serialize::InputArchive body;
  if (!a.try_read("sizes", sizes) || sizes.numel() != 2) Fail("'", path, "' holds no controller");
  torch::serialize::InputArchive policy;
  if (!a.try_read("policy", policy) || !policy.try_read("weight", w)) Fail("'", path, "' holds no controller");
  Controller c(static_cast<int>(sizes[0].item<int64_t>()), static_cast<int>(sizes[1].item<int64_t>()),
               static_cast<int>(w.size(1)));
  try {
    c->load(a);
  } catch (const std::exception& e) {
    Fail("the controller '", path, "' is corrupt (", e.what(), ")");
  }
  return c;
}

}  // namespace rlflow::world_model
