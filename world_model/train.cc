#include "world_model/train.h"

#include <ATen/core/Reduction.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <sstream>

#include "agents/archive.h"
#include "agents/training_run.h"
#include "core/error.h"
#include "core/file_util.h"
#include "core/subprocess.h"
#include "world_model/world_model.h"

namespace rlflow::world_model {
namespace {

using Clock = std::chrono::steady_clock;

const char kCsvHeader[] =
    "epoch,seconds,train_loss,heldout_nll,latent_error_1,latent_error_5,reward_mae,done_accuracy,mask_precision,"
    "mask_recall,location_mae\n";

// Episodes as padded [T, B, ...] tensors; `valid` [T, B] marks real steps;
// masks and counts over the model's vocabulary; `missed` [T, B]: valid rule
// actions of the next state outside the vocabulary.
struct Batch {
  torch::Tensor z, next, action, location, reward, done, valid, mask, counts, missed;
};

Batch MakeBatch(const std::vector<const Episode*>& eps, const WorldModelImpl& model) {
  const int latent = model.options().latent, actions = model.options().rule_actions, v = model.vocabulary_size();
  int64_t t_max = 0;
  for (const Episode* e : eps) t_max = std::max<int64_t>(t_max, e->steps_size());
  const int64_t b = static_cast<int64_t>(eps.size());
  Batch x;
  x.z = torch::zeros({t_max, b, latent});
  x.next = torch::zeros({t_max, b, latent});
  x.action = torch::full({t_max, b}, -1, torch::kInt64);
  x.location = torch::full({t_max, b}, -1, torch::kInt64);
  x.reward = torch::zeros({t_max, b});
  x.done = torch::zeros({t_max, b});
  x.valid = torch::zeros({t_max, b});
  x.mask = torch::zeros({t_max, b, v});
  x.counts = torch::zeros({t_max, b, v});
  x.missed = torch::zeros({t_max, b});
  auto z = x.z.accessor<float, 3>(), next = x.next.accessor<float, 3>(), mask = x.mask.accessor<float, 3>(),
       counts = x.counts.accessor<float, 3>();
  auto action = x.action.accessor<int64_t, 2>(), location = x.location.accessor<int64_t, 2>();
  auto reward = x.reward.accessor<float, 2>(), done = x.done.accessor<float, 2>(), valid = x.valid.accessor<float, 2>(),
       missed = x.missed.accessor<float, 2>();
  for (int64_t i = 0; i < b; ++i) {
    const Episode& e = *eps[i];
    for (int t = 0; t < e.steps_size(); ++t) {
      const Step& s = e.steps(t);
      const auto& target = t + 1 < e.steps_size() ? e.steps(t + 1).latent() : e.final_latent();
      for (int d = 0; d < latent; ++d) {
        z[t][i][d] = s.latent(d);
        next[t][i][d] = target.Get(d);
      }
      action[t][i] = s.rule_action();
      location[t][i] = s.location();
      reward[t][i] = s.reward();
      done[t][i] = s.done() ? 1.0f : 0.0f;
      valid[t][i] = 1.0f;
      std::vector<uint8_t> m = UnpackMask(s.next_valid().rule_mask(), actions);
      int k = 0;
      for (int a = 0; a < actions; ++a) {
        if (!m[a]) continue;
        const int64_t j = model.VocabularyIndex(a);
        if (j < 0) {
          missed[t][i] += 1.0f;
        } else {
          mask[t][i][j] = 1.0f;
          if (k < s.next_valid().locations_size()) counts[t][i][j] = std::log1p(s.next_valid().locations(k));
        }
        ++k;
      }
    }
  }
  return x;
}

struct Losses {
  torch::Tensor total, nll, reward, done, mask, counts;
};

Losses Loss(WorldModelImpl& model, const Batch& x, bool huber) {
  WorldModelImpl::TrainingTerms terms = model.ForTraining(x.z, x.next, x.action, x.location);
  const WorldModelImpl::Output& out = terms.heads;
  const torch::Tensor n = x.valid.sum().clamp_min(1.0);
  Losses l;
  l.nll = (terms.latent * x.valid).sum() / n / model.options().latent;
  const torch::Tensor reward_error =
      huber ? torch::huber_loss(out.reward, x.reward, at::Reduction::None, 1.0) : (out.reward - x.reward).pow(2);
  l.reward = (reward_error * x.valid).sum() / n;
  l.done =
      (torch::binary_cross_entropy_with_logits(out.done_logit, x.done, {}, {}, at::Reduction::None) * x.valid).sum() /
      n;
  // Summed over the rule actions (a handful of a state's thousands are
  // valid: a mean would drown them), per step.
  l.mask =
      (torch::binary_cross_entropy_with_logits(out.mask_logits, x.mask, {}, {}, at::Reduction::None).sum(-1) * x.valid)
          .sum() /
      n;
  l.counts = ((out.log_locations - x.counts).pow(2) * x.mask).sum() / x.mask.sum().clamp_min(1.0);
  l.total = l.nll + l.reward + l.done + 0.1 * l.mask + l.counts;
  return l;
}

void Save(WorldModelImpl& model, torch::optim::Adam* opt, int epoch, const std::string& path) {
  torch::serialize::OutputArchive a;
  model.save(a);
  const WorldModelOptions& o = model.options();
  a.write("sizes", torch::tensor(std::vector<int64_t>{o.latent, o.rule_actions, o.embedding, o.hidden, o.mixtures,
                                                      o.max_locations}));
  // The kind: an MDN-RNN's file has no "rssm" entry (those written before
  // the RSSM existed load unchanged).
  if (model.kind() == "rssm") a.write("rssm", torch::tensor(std::vector<int64_t>{o.groups, o.classes}));
  a.write("vocabulary", torch::tensor(o.vocabulary));
  if (!o.rule_ids.empty()) a.write("rule_ids", agents::RuleIdsToTensor(o.rule_ids));
  a.write("epoch", torch::tensor(static_cast<int64_t>(epoch)));
  if (opt != nullptr) {
    torch::serialize::OutputArchive oa;
    opt->save(oa);
    a.write("optimizer", oa);
  }
  agents::SaveArchiveAtomically(a, path);
}

void Plot(const std::string& dir) {
  std::string script = dir + "/plot.gp";
  std::ofstream gp(script);
  gp << "set terminal png size 900,900\nset output '" << dir << "/curves.png.tmp'\n"
     << "set datafile separator ','\nset key autotitle columnhead\nset multiplot layout 3,1\nset xlabel 'epoch'\n"
     << "plot '" << dir << "/metrics.csv' using 1:3 with lines title 'training loss', '' using 1:4 with lines title "
     << "'held-out latent NLL / dim'\n"
     << "plot '" << dir << "/metrics.csv' using 1:5 with lines title 'latent error, 1 step', '' using 1:6 with lines "
     << "title 'latent error, 5 steps', '' using 1:7 with lines title 'reward MAE'\n"
     << "set yrange [0:1]\nplot '" << dir << "/metrics.csv' using 1:8 with lines title 'done accuracy', '' using 1:9 "
     << "with lines title 'mask precision', '' using 1:10 with lines title 'mask recall'\nunset multiplot\n";
  gp.close();
  // gnuplot writes the picture beside its name, renamed into place when it
  // succeeds (a failed run's partial picture is removed).
  if (RunProgram({"gnuplot", script}) == 0)
    std::rename((dir + "/curves.png.tmp").c_str(), (dir + "/curves.png").c_str());
  else
    std::remove((dir + "/curves.png.tmp").c_str());
}

nlohmann::json MetricsJson(const HeldOutMetrics& m) {
  return {{"episodes", m.episodes},
          {"steps", m.steps},
          {"latent_nll", m.nll},
          {"latent_error_1", m.latent_error_1},
          {"latent_error_5", m.latent_error_5},
          {"reward_mae", m.reward_mae},
          {"done_accuracy", m.done_accuracy},
          {"mask_precision", m.mask_precision},
          {"mask_recall", m.mask_recall},
          {"location_mae", m.location_mae},
          {"reward_mae_of_zero", m.reward_mae_zero},
          {"done_accuracy_of_never", m.done_accuracy_never},
          {"reward_rmse", m.reward_rmse},
          {"reward_rmse_of_zero", m.reward_rmse_zero}};
}

}  // namespace

HeldOutMetrics Evaluate(WorldModelImpl& model, const std::vector<const Episode*>& episodes) {
  torch::NoGradGuard no_grad;
  HeldOutMetrics m;
  m.episodes = static_cast<int>(episodes.size());
  if (episodes.empty()) return m;
  Batch x = MakeBatch(episodes, model);
  WorldModelImpl::Output out = model.forward(x.z, x.action, x.location);
  const double n = x.valid.sum().item<double>();
  m.steps = static_cast<int64_t>(n);
  m.nll = (MixtureNll(out, x.next) * x.valid).sum().item<double>() / n;
  m.latent_error_1 = ((MostLikelyMean(out) - x.next).pow(2).mean(-1) * x.valid).sum().item<double>() / n;
  m.reward_mae = ((out.reward - x.reward).abs() * x.valid).sum().item<double>() / n;
  m.reward_mae_zero = (x.reward.abs() * x.valid).sum().item<double>() / n;
  m.reward_rmse = std::sqrt(((out.reward - x.reward).pow(2) * x.valid).sum().item<double>() / n);
  m.reward_rmse_zero = std::sqrt((x.reward.pow(2) * x.valid).sum().item<double>() / n);
  m.done_accuracy_never = 1.0 - (x.done * x.valid).sum().item<double>() / n;
  m.done_accuracy =
      (((out.done_logit > 0).to(torch::kFloat32) == x.done).to(torch::kFloat32) * x.valid).sum().item<double>() / n;
  torch::Tensor v = x.valid.unsqueeze(-1);
  torch::Tensor predicted = (out.mask_logits > 0).to(torch::kFloat32) * v;
  const double tp = (predicted * x.mask).sum().item<double>();
  const double pp = predicted.sum().item<double>(), ap = x.mask.sum().item<double>();
  const double missed = (x.missed * x.valid).sum().item<double>();  // outside the vocabulary: never predicted
  m.mask_precision = pp > 0 ? tp / pp : 1.0;
  m.mask_recall = ap + missed > 0 ? tp / (ap + missed) : 1.0;
  m.location_mae =
      ap > 0
          ? ((torch::round(torch::expm1(out.log_locations.clamp_min(0))) - torch::round(torch::expm1(x.counts))).abs() *
             x.mask)
                    .sum()
                    .item<double>() /
                ap
          : 0.0;
  // 5 steps open-loop from every step that has 5 after it.
  double err5 = 0;
  int64_t count5 = 0;
  for (size_t i = 0; i < episodes.size(); ++i) {
    const int64_t steps = episodes[i]->steps_size();
    if (steps < 5) continue;
    torch::Tensor z = x.z.narrow(1, static_cast<int64_t>(i), 1), a = x.action.narrow(1, static_cast<int64_t>(i), 1),
                  l = x.location.narrow(1, static_cast<int64_t>(i), 1),
                  target = x.next.narrow(1, static_cast<int64_t>(i), 1);
    std::vector<WorldModelImpl::State> state(steps + 1);
    for (int64_t t = 0; t < steps; ++t) {
      WorldModelImpl::Output o =
          model.forward(z.narrow(0, t, 1), a.narrow(0, t, 1), l.narrow(0, t, 1), t == 0 ? nullptr : &state[t]);
      state[t + 1] = o.state;
    }
    // Open loop: the model's own most likely predictions (the dream at tau
    // = 0; the generator is not used).
    std::mt19937_64 unused(0);
    for (int64_t t = 0; t + 5 <= steps; ++t) {
      torch::Tensor zt = z[t];
      WorldModelImpl::State s = state[t];
      for (int64_t k = 0; k < 5; ++k) {
        WorldModelImpl::Imagined o = model.Imagine(zt, a[t + k], l[t + k], t + k == 0 ? nullptr : &s, 0.0, unused);
        s = o.state;
        zt = o.next_latent;
      }
      err5 += (zt - target[t + 4]).pow(2).mean().item<double>();
      ++count5;
    }
  }
  m.latent_error_5 = count5 > 0 ? err5 / count5 : 0.0;
  return m;
}

std::string WorldModelKind(const std::string& path) { return LoadWorldModel(path)->kind(); }

WorldModel LoadWorldModel(const std::string& path) {
  torch::serialize::InputArchive a;
  try {
    a.load_from(path);
  } catch (const std::exception&) {
    Fail("cannot load the world model '", path, "' (missing or not a saved world model)");
  }
  torch::Tensor sizes;
  if (!a.try_read("sizes", sizes) || sizes.numel() != 6) Fail("'", path, "' holds no world model");
  WorldModelOptions o;
  torch::Tensor vocabulary, rssm;
  if (!a.try_read("vocabulary", vocabulary)) Fail("'", path, "' holds no world model vocabulary");
  vocabulary = vocabulary.to(torch::kInt64).contiguous();
  o.vocabulary.assign(vocabulary.data_ptr<int64_t>(), vocabulary.data_ptr<int64_t>() + vocabulary.numel());
  o.latent = static_cast<int>(sizes[0].item<int64_t>());
  o.rule_actions = static_cast<int>(sizes[1].item<int64_t>());
  o.embedding = static_cast<int>(sizes[2].item<int64_t>());
  o.hidden = static_cast<int>(sizes[3].item<int64_t>());
  o.mixtures = static_cast<int>(sizes[4].item<int64_t>());
  o.max_locations = static_cast<int>(sizes[5].item<int64_t>());
  torch::Tensor ids;
  if (a.try_read("rule_ids", ids)) {
    if (2 * ids.numel() != o.rule_actions)
      Fail("the world model '", path, "' is corrupt: ", ids.numel(), " rule ids for ", o.rule_actions / 2, " rules");
    o.rule_ids = agents::RuleIdsFromTensor(ids);
  }
  const bool is_rssm = a.try_read("rssm", rssm);
  if (is_rssm) {
    if (rssm.numel() != 2) Fail("'", path, "' holds no world model");
    o.groups = static_cast<int>(rssm[0].item<int64_t>());
    o.classes = static_cast<int>(rssm[1].item<int64_t>());
  }
  WorldModel model = MakeWorldModel(is_rssm ? "rssm" : "mdn_rnn", o);
  try {
    model->load(a);
  } catch (const std::exception& e) {
    Fail("the world model '", path, "' is corrupt (", e.what(), ")");
  }
  return model;
}

TrainResult TrainWorldModel(const TrainOptions& o) {
  if (o.data.empty()) Fail("--data is required (a rollout file of //world_model:collect)");
  if (o.out.empty()) Fail("--out is required (a directory for metrics, curves and checkpoints)");
  if (o.epochs < 1) Fail("--epochs must be >= 1, got ", o.epochs);
  if (o.batch < 1) Fail("--batch must be >= 1, got ", o.batch);
  if (!(o.lr > 0)) Fail("--lr must be > 0");
  if (o.reward_loss != "mse" && o.reward_loss != "huber")
    Fail("--reward_loss must be mse or huber, got '", o.reward_loss, "'");
  if (o.kind != "mdn_rnn" && o.kind != "rssm")
    Fail("--world_model_kind must be ", kWorldModelKinds, ", got '", o.kind, "'");
  if (o.lr_schedule != "constant" && o.lr_schedule != "cosine")
    Fail("--lr_schedule must be constant or cosine, got '", o.lr_schedule, "'");
  if (!(o.held_out > 0 && o.held_out < 1)) Fail("--held_out must be in (0, 1), got ", o.held_out);
  const std::string data_path = ResolveUserPath(o.data);
  Rollouts data = ReadRollouts(data_path);
  if (data.episodes.size() < 2)
    Fail("rollout file '", data_path, "' has ", data.episodes.size(), " episodes; need at least 2");
  const int actions = static_cast<int>(data.header.rule_actions());
  torch::set_num_threads(std::max(1, o.threads));

  std::ostringstream config;
  config << "data=" << data_path << "\ndata_bytes=" << ReadFile(data_path).size() << "\nbatch=" << o.batch
         << "\nlr=" << o.lr << "\nheld_out=" << o.held_out << "\nseed=" << o.seed << "\nhidden=" << o.hidden
         << "\nmixtures=" << o.mixtures << "\n"
         << (o.reward_loss == "mse" ? "" : "reward_loss=" + o.reward_loss + "\n")
         << (o.lr_schedule == "constant" ? "" : "lr_schedule=" + o.lr_schedule + "\n")
         << (o.kind == "mdn_rnn" ? "" : "world_model_kind=" + o.kind + "\n");
  train::TrainingRun run{ResolveUserPath(o.out), config.str(), o.epochs};
  TrainResult r;
  r.resumed = train::PrepareRun(run);

  // Held-out episodes: a seeded shuffle.
  std::vector<size_t> order(data.episodes.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(o.seed));
  const size_t held = std::max<size_t>(1, static_cast<size_t>(std::lround(o.held_out * order.size())));
  std::vector<const Episode*> test, train;
  for (size_t k = 0; k < order.size(); ++k) (k < held ? test : train).push_back(&data.episodes[order[k]]);

  torch::manual_seed(o.seed);
  WorldModelOptions mo;
  mo.latent = static_cast<int>(data.header.latent_size());
  mo.rule_actions = actions;
  if (data.header.rule_ids_size() == actions / 2)
    mo.rule_ids.assign(data.header.rule_ids().begin(), data.header.rule_ids().end());
  mo.hidden = o.hidden;
  mo.mixtures = o.mixtures;
  mo.max_locations = static_cast<int>(data.header.max_locations());
  // The vocabulary: every rule action taken or valid in a training episode.
  {
    std::vector<uint8_t> seen(actions, 0);
    auto add = [&](const ValidActions& v) {
      std::vector<uint8_t> m = UnpackMask(v.rule_mask(), actions);
      for (int a = 0; a < actions; ++a) seen[a] |= m[a];
    };
    for (const Episode* e : train) {
      add(e->initial_valid());
      for (const Step& s : e->steps()) {
        add(s.next_valid());
        if (s.rule_action() >= 0) seen[s.rule_action()] = 1;
      }
    }
    for (int a = 0; a < actions; ++a)
      if (seen[a]) mo.vocabulary.push_back(a);
    if (mo.vocabulary.empty())
      Fail("rollout file '", data_path, "': no rule action is ever valid in its training episodes");
  }
  WorldModel model = MakeWorldModel(o.kind, mo);
  torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(o.lr));
  for (const auto& p : model->parameters()) r.parameters += p.numel();

  const std::string ckpt = run.dir + "/checkpoint.pt", csv = run.dir + "/metrics.csv";
  int start = 0;
  if (r.resumed) {
    torch::serialize::InputArchive a;
    try {
      a.load_from(ckpt);
      model->load(a);
      torch::serialize::InputArchive oa;
      a.read("optimizer", oa);
      opt.load(oa);
      torch::Tensor e;
      a.read("epoch", e);
      start = static_cast<int>(e.item<int64_t>());
    } catch (const std::exception&) {
      Fail("cannot read the checkpoint ", ckpt, " (corrupt or truncated; remove it to start again)");
    }
    std::ifstream in(csv);
    std::string line, kept = kCsvHeader;
    std::getline(in, line);
    while (std::getline(in, line))
      if (!line.empty() && std::stoll(line.substr(0, line.find(','))) <= start) kept += line + "\n";
    WriteFileAtomically(csv, kept);
    if (o.progress) o.progress("resumed from " + ckpt + ": epoch " + std::to_string(start));
  } else {
    WriteFileAtomically(csv, kCsvHeader);
  }
  double seconds = 0;
  auto t0 = Clock::now();
  std::ofstream metrics(csv, std::ios::app);
  for (int epoch = start + 1; epoch <= o.epochs; ++epoch) {
    if (o.interrupted != nullptr && o.interrupted->load()) break;
    // A function of the epoch alone: a resumed run continues the schedule.
    const double lr = o.lr_schedule == "cosine" ? o.lr * 0.5 * (1 + std::cos(M_PI * (epoch - 1) / o.epochs)) : o.lr;
    for (auto& group : opt.param_groups()) static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr);
    std::vector<const Episode*> shuffled = train;
    std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937_64(o.seed * 1000003 + epoch));
    // The RSSM's posterior samples draw from torch's generator: seeded per
    // epoch, so a resumed run draws what an uninterrupted one does.
    torch::manual_seed(o.seed * 1000003 + epoch);
    model->train();
    double loss_sum = 0;
    int batches = 0;
    for (size_t at = 0; at < shuffled.size(); at += o.batch) {
      std::vector<const Episode*> b(shuffled.begin() + at,
                                    shuffled.begin() + std::min(shuffled.size(), at + static_cast<size_t>(o.batch)));
      Losses l = Loss(*model, MakeBatch(b, *model), o.reward_loss == "huber");
      opt.zero_grad();
      l.total.backward();
      torch::nn::utils::clip_grad_norm_(model->parameters(), 5.0);
      opt.step();
      loss_sum += l.total.item<double>();
      ++batches;
    }
    model->eval();
    HeldOutMetrics m = Evaluate(*model, test);
    seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    r.train_loss = loss_sum / std::max(1, batches);
    char row[512];
    std::snprintf(row, sizeof row, "%d,%.2f,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g\n", epoch, seconds,
                  r.train_loss, m.nll / mo.latent, m.latent_error_1, m.latent_error_5, m.reward_mae, m.done_accuracy,
                  m.mask_precision, m.mask_recall, m.location_mae);
    metrics << row;
    metrics.flush();
    Save(*model, &opt, epoch, ckpt);
    Plot(run.dir);
    r.epochs = epoch;
    if (o.progress)
      o.progress("epoch " + std::to_string(epoch) + "/" + std::to_string(o.epochs) + ": loss " +
                 std::to_string(r.train_loss) + ", held-out NLL/dim " + std::to_string(m.nll / mo.latent) +
                 ", latent error 1/5 steps " + std::to_string(m.latent_error_1) + "/" +
                 std::to_string(m.latent_error_5) + ", reward MAE " + std::to_string(m.reward_mae) + ", mask P/R " +
                 std::to_string(m.mask_precision) + "/" + std::to_string(m.mask_recall));
  }
  r.epochs = std::max(r.epochs, start);
  if (r.epochs < o.epochs) return r;  // interrupted: the checkpoint is kept
  r.finished = true;
  model->eval();
  r.held_out = Evaluate(*model, test);
  std::map<std::string, std::vector<const Episode*>> by_model;
  for (const Episode* e : test) by_model[e->model()].push_back(e);
  nlohmann::json per = nlohmann::json::object();
  for (const auto& [name, eps] : by_model) {
    r.per_model[name] = Evaluate(*model, eps);
    per[name] = MetricsJson(r.per_model[name]);
  }
  Save(*model, nullptr, r.epochs, run.dir + "/world_model.pt");
  nlohmann::json j = {{"data", data_path},
                      {"kind", model->kind()},
                      {"epochs", r.epochs},
                      {"parameters", r.parameters},
                      {"vocabulary", model->vocabulary_size()},
                      {"train_episodes", train.size()},
                      {"held_out", MetricsJson(r.held_out)},
                      {"per_model", per}};
  WriteFileAtomically(run.dir + "/eval.json", j.dump(2) + "\n");
  return r;
}

void SaveWorldModel(WorldModelImpl& model, int epoch, const std::string& path) { Save(model, nullptr, epoch, path); }

}  // namespace rlflow::world_model
