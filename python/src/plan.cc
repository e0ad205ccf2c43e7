// Bindings: execution-plan validation and normalization (JSON in, JSON out), and the measured
// records a runtime writes (weft.measured/v1) checked against their plans.
#include "bindings.h"
#include "weft/plan/measured.h"
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
      "Parses and validates a weft.plan/v3 JSON plan (hardened reader: size, depth and number\n"
      "limits; the data tables checked against the actions); ValueError with one line naming\n"
      "the first problem.");
  m.def(
      "normalize_plan",
      [](const std::string& json) { return plan::PlanToJson(Unwrap(plan::PlanFromJson(json))); },
      py::arg("plan_json"), "Parses a plan and writes it back in canonical JSON.");
  m.def(
      "validate_measured",
      [](const std::string& measured_json, const std::vector<std::string>& plans_json) {
        std::vector<plan::MeasuredIteration> iterations;
        {
          py::gil_scoped_release release;
          iterations = Unwrap(plan::MeasuredFromJson(measured_json));
        }
        if (!plans_json.empty() && plans_json.size() != iterations.size()) {
          Check(InvalidArgumentError("validate_measured: " + std::to_string(plans_json.size()) +
                                     " plans for " + std::to_string(iterations.size()) +
                                     " measured iterations"));
        }
        for (size_t i = 0; i < plans_json.size(); ++i) {
          const plan::ExecutionPlan p = Unwrap(plan::PlanFromJson(plans_json[i]));
          Check(plan::CheckMeasuredAgainstPlan(iterations[i], p)
                    .WithPrefix("iterations[" + std::to_string(i) + "]"));
        }
        return plan::MeasuredToJson(iterations);
      },
      py::arg("measured_json"), py::arg("plans_json") = std::vector<std::string>{},
      "Reads a weft.measured/v1 document (hardened reader, docs/plan_schema.md) and, given one\n"
      "plan per measured iteration, checks that each record names that plan's compute actions\n"
      "with their stage, replica, group, instances and tokens; returns the record in canonical\n"
      "JSON. ValueError with one line naming the first problem.");
}

}  // namespace weft::python
