// `weft validate plan.json`: checks that an execution plan can run (thin over weft::plan).
#include <iostream>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli_common.h"
#include "weft/plan/plan_json.h"
#include "weft/plan/validator.h"

namespace weft::cli {
namespace {

struct ValidateArgs {
  std::string plan_path;
  bool no_memory = false;
  bool allow_leaks = false;
};

int RunValidate(const ValidateArgs& args) {
  auto plan = plan::ReadPlanFile(args.plan_path);
  if (!plan.ok()) return ReportError(plan.status());
  auto report = plan::ValidatePlan(
      *plan, {.check_memory = !args.no_memory, .require_all_freed = !args.allow_leaks});
  if (!report.ok()) return ReportError(report.status().WithPrefix(args.plan_path));
  std::cout << "OK " << args.plan_path << ": " << report->BriefReport() << "\n";
  for (size_t r = 0; r < report->ranks.size(); ++r) {
    const plan::RankValidation& rv = report->ranks[r];
    const plan::RankPlan& rank = plan->ranks[r];
    std::cout << fmt::format("  rank {} ({}): {} actions, {} compute, {} isend, {} irecv, peak {:.2f} GiB"
                             " of {}\n",
                             r, rank.label, rv.num_actions, rv.num_compute, rv.num_isend,
                             rv.num_irecv, rv.peak_bytes / double(int64_t{1} << 30),
                             rank.memory_capacity_bytes > 0
                                 ? fmt::format("{:.2f} GiB",
                                               rank.memory_capacity_bytes / double(int64_t{1} << 30))
                                 : std::string("unknown capacity"));
  }
  return 0;
}

}  // namespace

void RegisterValidateCommand(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<ValidateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "validate",
      "Check that an execution plan (JSON, schema weft.plan/v3) can run: matching isend/irecv per\n"
      "rank pair (order, shape, dtype), inputs ready before use, no use after free, no deadlock,\n"
      "memory under capacity, buffer ends and samples consistent. Prints OK and a summary, or the\n"
      "first error on one line (exit code 2). Files over 1 GiB, nested deeper than 32 levels or\n"
      "with out-of-range numbers are refused before validation (docs/plan_schema.md).\n\n"
      "Example:\n  weft validate plan.json\n");
  cmd->add_option("plan", args->plan_path, "plan file (JSON, weft.plan/v3)")
      ->required()
      ->check(InputFileCheck(kMaxPlanFileBytes));
  cmd->add_flag("--no-memory", args->no_memory, "do not check memory against capacity");
  cmd->add_flag("--allow-leaks", args->allow_leaks, "buffers never freed are not an error");
  cmd->callback([args, &exit_code] { exit_code = RunValidate(*args); });
}

}  // namespace weft::cli
