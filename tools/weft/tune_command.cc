// `weft tune`: the best parallel configuration of each strategy (thin over strategy/tune.h), and
// a launchable file of one (strategy/launch.h).
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "cli_common.h"
#include "job_options.h"
#include "weft/strategy/compare.h"
#include "weft/strategy/launch.h"
#include "weft/strategy/tune.h"

namespace weft::cli {
namespace {

struct TuneArgs {
  strategy::TuneOptions options;
  std::string strategies;
  std::string cp_sizes = "1,2";
  BudgetFlags budget;
  std::string json;
  std::string emit;
  std::string emit_strategy;  // "" = the best
  std::string out;
  bool quiet = false;
};

int RunTune(TuneArgs& args) {
  std::optional<strategy::LaunchFormat> format;
  if (!args.emit.empty()) {
    auto f = strategy::ParseLaunchFormat(args.emit);
    if (!f.ok()) return ReportError(f.status());
    format = *f;
    if (args.out.empty()) {
      return ReportError(InvalidArgumentError("--emit " + args.emit + " needs --out FILE"));
    }
  } else if (!args.out.empty()) {
    return ReportError(InvalidArgumentError("--out FILE needs --emit FORMAT (megatron, mimo, "
                                            "torchtitan, weft)"));
  }
  if (Status s = CheckOutputs({{"--json", args.json == "-" ? "" : args.json}, {"--out", args.out}});
      !s.ok()) {
    return ReportError(s);
  }
  if (format == strategy::LaunchFormat::kTorchtitan) {
    // Where weft's own schedule goes (written only when the strategy needs it).
    if (Status s = CheckOutputs({{"--out", args.out + ".csv"}}); !s.ok()) return ReportError(s);
  }
  auto budget = MakePlanBudget(args.budget);
  if (!budget.ok()) return ReportError(budget.status());
  args.options.budget = *budget;
  args.options.strategies = SplitList(args.strategies);
  auto cp_sizes =
      ParseList<int>("--cp-sizes", args.cp_sizes, planning::JobOptions::kMaxParallelSize);
  if (!cp_sizes.ok()) return ReportError(cp_sizes.status());
  args.options.context_parallel_sizes = *cp_sizes;
  if (!args.quiet) args.options.progress = ProgressPrinter();
  auto result = strategy::Tune(args.options);
  if (!args.quiet) ClearProgress();
  if (!result.ok()) return ReportError(result.status());
  if (args.json == "-") {
    std::cout << result->ToJson() << "\n";
  } else {
    std::cout << result->ToText();
    if (!args.json.empty()) {
      if (Status s = WriteFileAtomically(args.json, result->ToJson() + "\n"); !s.ok()) {
        return ReportError(s);
      }
    }
  }
  if (!format) return 0;
  const strategy::StrategyTuning* chosen = nullptr;
  if (args.emit_strategy.empty()) {
    chosen = result->Best();
    if (!chosen) return ReportError(FailedPreconditionError("--emit: no strategy fits memory"));
  } else {
    for (const auto& s : result->strategies) {
      if (s.strategy == args.emit_strategy) chosen = &s;
    }
    if (!chosen || !chosen->error.empty()) {
      return ReportError(InvalidArgumentError(
          "--emit-strategy " + args.emit_strategy + ": not tuned in this run" +
          (chosen ? " (" + chosen->error + ")" : " (add it to --strategies)")));
    }
  }
  const planning::JobOptions job =
      chosen->best.Apply(args.options.job, result->global_batch_sequences);
  auto planner = strategy::MakePlanner(job, chosen->strategy, {.budget = *budget});
  if (!planner.ok()) return ReportError(planner.status());
  auto recompute = spec::ParseRecompute(chosen->best.recompute);
  const std::string header = fmt::format(
      "weft tune: {} on {} x {} GPUs, data {}: {} at {} ({:.3f} s/iteration simulated, "
      "recompute {})",
      result->model, result->gpus, result->cluster, result->data, chosen->strategy,
      chosen->best.Describe(), chosen->best.time_s, chosen->best.recompute);
  auto file =
      strategy::EmitLaunch(*format, **planner, recompute.ok() ? *recompute : spec::Recompute::kNone,
                           header, args.out + ".csv");
  if (!file.ok()) return ReportError(file.status());
  if (!file->companion_text.empty()) {
    if (Status s = WriteFileAtomically(args.out + ".csv", file->companion_text); !s.ok()) {
      return ReportError(s);
    }
  }
  if (Status s = WriteFileAtomically(args.out, file->text); !s.ok()) return ReportError(s);
  std::cout << fmt::format("{} configuration of {} written to {}{}\n", args.emit,
                           chosen->strategy, args.out,
                           file->companion_text.empty() ? "" : " (schedule: " + args.out + ".csv)");
  return 0;
}

}  // namespace

void RegisterTuneCommand(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<TuneArgs>();
  CLI::App* cmd = app.add_subcommand(
      "tune",
      "The best parallel configuration of each strategy: TP, CP, PP, DP and microbatches "
      "enumerated, pruned by divisibility and memory, screened by the rule plan and planned by "
      "the strategy (docs/tune.md); --emit writes a launchable file of the best.\n\n"
      "Example:\n  weft tune --model vlm-s --gpus 16 --data mixed --strategies "
      "megatron-1f1b,dip --emit megatron --out megatron.args");
  AddJobOptions(cmd, args->options.job);
  cmd->add_option("--strategies", args->strategies,
                  "comma-separated strategies (default: every one that applies)");
  AddNumberOption(cmd, "--max-simulations", args->options.max_simulations, 1,
                  strategy::TuneOptions::kMaxSimulations,
                  "per strategy: candidates planned by the strategy itself (the job's own "
                  "configuration and the best of the screen)")
      ->capture_default_str();
  AddNumberOption(cmd, "--memory-check-batches", args->options.memory_check_batches, 0,
                  strategy::TuneOptions::kMaxMemoryCheckBatches,
                  "more batches of the profile stream (never the measured ones) the winner must "
                  "fit at the screen's budget; 0 = no check")
      ->capture_default_str();
  cmd->add_flag("--exhaustive", args->options.exhaustive,
                "plan every candidate with the strategy (the oracle the screen is checked "
                "against; slow)");
  cmd->add_option("--cp-sizes", args->cp_sizes, "context parallel sizes tried, comma-separated")
      ->capture_default_str();
  AddBudgetOptions(cmd, args->budget);
  cmd->add_option("--json", args->json, "write weft.tune/v1 JSON to FILE (- = stdout only)");
  cmd->add_option("--emit", args->emit,
                  "write a launchable file of the best configuration: megatron (argument list), "
                  "mimo (Megatron MIMO module_parallelisms), torchtitan (TOML), weft (weft's "
                  "flags)");
  cmd->add_option("--emit-strategy", args->emit_strategy,
                  "emit this strategy's best instead of the overall best");
  cmd->add_option("--out", args->out, "the file --emit writes");
  cmd->add_flag("--quiet", args->quiet, "no progress on stderr");
  cmd->callback([args, &exit_code] { exit_code = RunTune(*args); });
}

}  // namespace weft::cli
