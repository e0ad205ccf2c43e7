// Bindings: execution-plan validation and normalization (JSON in, JSON out).
#include "bindings.h"
#include "weft/plan/plan_json.h"
#include "weft/plan/validator.h"

namespace weft::python {

void RegisterPlan(py::module_& m) {
  m.def(
      "validate_plan",
      [](const std::string& json, bool check_memory) {
        auto plan = Unwrap(plan::PlanFromJson(json));
        plan::ValidateOptions o;
        o.check_memory = check_memory;
        auto report = Unwrap(plan::ValidatePlan(plan, o));
        py::dict d;
        d["num_transfers"] = report.num_transfers;
        d["p2p_bytes"] = report.p2p_bytes;
        d["brief"] = report.BriefReport();
        py::list ranks;
        for (const auto& r : report.ranks) {
          py::dict x;
          x["num_actions"] = r.num_actions;
          x["num_compute"] = r.num_compute;
          x["peak_bytes"] = r.peak_bytes;
          ranks.append(x);
        }
        d["ranks"] = ranks;
        return d;
      },
      py::arg("plan_json"), py::arg("check_memory") = true,
      "Parses and validates a weft.plan/v2 JSON plan (hardened reader: size, depth and number\n"
      "limits); ValueError with one line naming the first problem.");
  m.def(
      "normalize_plan",
      [](const std::string& json) { return plan::PlanToJson(Unwrap(plan::PlanFromJson(json))); },
      py::arg("plan_json"), "Parses a plan and writes it back in canonical JSON.");
}

}  // namespace weft::python
