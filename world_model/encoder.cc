#include "world_model/encoder.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "agents/gnn.h"
#include "core/error.h"
#include "core/file_util.h"

namespace rlflow::world_model {

LatentEncoder::LatentEncoder(const std::string& agent_path, const std::vector<std::string>& database_ids) {
  policy_ = agents::LoadPolicy(agent_path, database_ids).ptr();
  policy_->eval();
  size_ = policy_->hidden();
  description_ = "global embedding of the frozen GNN of " + agent_path + " (" +
                 std::to_string(ReadFile(agent_path, "agent").size()) + " bytes, hidden " + std::to_string(size_) + ")";
}

std::vector<float> LatentEncoder::Encode(const agents::Observation& observation) {
  torch::NoGradGuard no_grad;
  torch::Tensor z = policy_->Embed({&observation}).contiguous().to(torch::kFloat32);
  const float* p = z.data_ptr<float>();
  return std::vector<float>(p, p + z.size(1));
}

namespace {

std::vector<double> Ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return v[x] < v[y]; });
  std::vector<double> rank(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    for (size_t k = i; k <= j; ++k) rank[order[k]] = 0.5 * static_cast<double>(i + j);
    i = j + 1;
  }
  return rank;
}

}  // namespace

double RankCorrelation(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) Fail("RankCorrelation: samples of different sizes");
  if (a.size() < 3) return 0;
  std::vector<double> ra = Ranks(a), rb = Ranks(b);
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n, mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : 0.0;
}

}  // namespace rlflow::world_model
