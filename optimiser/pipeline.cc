#include "optimiser/pipeline.h"

#include <chrono>
#include <nlohmann/json.hpp>

#include "optimiser/stages.h"

namespace rlflow {

PipelineResult RunPipeline(const PipelineOptions& o) {
  PipelineResult res;
  OptimiseRun r(o, res);
  for (const Stage& stage : Stages()) {
    const auto t = std::chrono::steady_clock::now();
    stage.run(r);
    res.stage_seconds.push_back(
        {stage.name, std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count()});
  }
  return res;
}

namespace {

// The summary and the report: each stage's record, in the stages' order.
std::pair<std::string, nlohmann::ordered_json> Describe(const PipelineResult& result) {
  std::pair<std::string, nlohmann::ordered_json> out;
  for (const Stage& stage : Stages())
    if (stage.describe != nullptr) stage.describe(result, out.first, out.second);
  return out;
}

}  // namespace

std::string PipelineResult::Summary() const { return Describe(*this).first; }

std::string PipelineResult::ReportJson() const {
  // Non-finite numbers are written as null; bytes that are not UTF-8 (a
  // path) as U+FFFD.
  return Describe(*this).second.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace rlflow
