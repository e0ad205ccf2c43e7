// libFuzzer target: the plan reader (weft.plan/v3 JSON, data tables included) and, for a plan it
// accepts, the validator and a write/read round trip; the same input through the measured-record
// reader (weft.measured/v1, the runtime's feedback) and, when it accepts it, its round trip.
#include "fuzz_common.h"
#include "weft/plan/measured.h"
#include "weft/plan/plan_json.h"
#include "weft/plan/validator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = weft::fuzz::AsText(data, size);
  weft::StatusOr<std::vector<weft::plan::MeasuredIteration>> measured =
      weft::plan::MeasuredFromJson(text);
  if (!measured.ok()) {
    weft::fuzz::CheckError(measured.status());
  } else {
    auto again = weft::plan::MeasuredFromJson(weft::plan::MeasuredToJson(*measured));
    if (!again.ok() || *again != *measured) {
      std::fprintf(stderr, "written measured record does not read back equal: %s\n",
                   again.ok() ? "different values" : again.status().message().c_str());
      std::abort();
    }
  }
  weft::StatusOr<weft::plan::ExecutionPlan> plan = weft::plan::PlanFromJson(text);
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
