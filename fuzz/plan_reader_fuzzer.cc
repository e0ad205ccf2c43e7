// libFuzzer target: the plan reader (weft.plan/v2 JSON) and, for a plan it accepts, the
// validator and a write/read round trip.
#include "fuzz_common.h"
#include "weft/plan/plan_json.h"
#include "weft/plan/validator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::StatusOr<weft::plan::ExecutionPlan> plan =
      weft::plan::PlanFromJson(weft::fuzz::AsText(data, size));
  if (!plan.ok()) {
    weft::fuzz::CheckError(plan.status());
    return 0;
  }
  auto report = weft::plan::ValidatePlan(*plan);
  if (!report.ok()) weft::fuzz::CheckError(report.status());
  const std::string json = weft::plan::PlanToJson(*plan);
  auto again = weft::plan::PlanFromJson(json);
  if (!again.ok()) {
    std::fprintf(stderr, "written plan does not read back: %s\n", again.status().message().c_str());
    std::abort();
  }
  return 0;
}
