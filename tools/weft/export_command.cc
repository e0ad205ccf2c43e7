// `weft export --format torch-csv --plan plan.json --out sched.csv`: writes a plan in another
// framework's format (thin over weft::plan).
#include <iostream>
#include <memory>
#include <string>

#include "cli_common.h"
#include "weft/common/text.h"
#include "weft/plan/plan_json.h"
#include "weft/plan/torch_export.h"
#include "weft/plan/validator.h"

namespace weft::cli {
namespace {

struct ExportArgs {
  std::string format = "torch-csv";
  std::string plan_path;
  std::string out = "-";
  bool no_memory = false;
  bool allow_leaks = false;
};

int RunExport(const ExportArgs& args) {
  if (Status s = CheckOutputFile(args.out, "--out"); !s.ok()) return ReportError(s);
  auto plan = plan::ReadPlanFile(args.plan_path);
  if (!plan.ok()) return ReportError(plan.status());
  // A plan that cannot run is never exported: the same check and message as `weft validate`,
  // before anything is written.
  auto report = plan::ValidatePlan(
      *plan, {.check_memory = !args.no_memory, .require_all_freed = !args.allow_leaks});
  if (!report.ok()) return ReportError(report.status().WithPrefix(args.plan_path));
  plan::TorchCsvOptions options;
  if (args.format == "torch-csv") {
    options.format = plan::TorchCsvFormat::kComputeComms;
  } else if (args.format == "torch-csv-compute-only") {
    options.format = plan::TorchCsvFormat::kComputeOnly;
  } else {
    return ReportError(InvalidArgumentError(
        "--format = " + QuoteForMessage(args.format) +
        "; must be torch-csv or torch-csv-compute-only"));
  }
  auto csv = plan::ExportTorchCsv(*plan, options);
  if (!csv.ok()) return ReportError(csv.status().WithPrefix(args.plan_path));
  Status written = WriteFileAtomically(args.out, *csv);
  if (!written.ok()) return ReportError(written);
  if (args.out != "-") {
    std::cerr << "weft: wrote " << args.out << " (" << plan->num_ranks() << " ranks)\n";
  }
  return 0;
}

}  // namespace

void RegisterExportCommand(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<ExportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "export",
      "Export an execution plan to PyTorch pipelining's CSV schedule (one row per rank, cells\n"
      "like 0F3, 1B3, 1I3/1W3, 0SEND_F3, 1RECV_F3; load with\n"
      "_PipelineScheduleRuntime._load_csv(path, format=\"compute_comms\")). Only chains of stages\n"
      "with the same microbatches everywhere can be expressed; other plans are refused (exit 2)\n"
      "and no file is written. The plan is validated first (as `weft validate`); an invalid one\n"
      "is refused with the validator's message.\n\n"
      "Example:\n  weft export --format torch-csv --plan plan.json --out sched.csv\n");
  cmd->add_option("--format", args->format,
                  "torch-csv (compute + send/recv cells) or torch-csv-compute-only")
      ->capture_default_str();
  cmd->add_option("--plan", args->plan_path, "plan file (JSON, weft.plan/v3)")
      ->required()
      ->check(InputFileCheck(kMaxPlanFileBytes));
  cmd->add_option("--out", args->out, "output file, - for stdout")->capture_default_str();
  cmd->add_flag("--no-memory", args->no_memory, "validate without checking memory against capacity");
  cmd->add_flag("--allow-leaks", args->allow_leaks, "buffers never freed are not an error");
  cmd->callback([args, &exit_code] { exit_code = RunExport(*args); });
}

}  // namespace weft::cli
