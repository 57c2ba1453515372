// Fuzz target: the timing-cache reader.
#include <string>

#include "core/error.h"
#include "runtime/cost_model.h"
#include "tools/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rlflow;
  static TimingBackend* backend = MakeTimingBackend("cpu").release();
  try {
    MeasuredCostModel cost(backend);
    cost.LoadCacheText(std::string(reinterpret_cast<const char*>(data), size), "fuzz input");
  } catch (const std::exception&) {
  }
  return 0;
}
