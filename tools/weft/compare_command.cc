// weft compare: simulate K iterations of real batches for each strategy; table, JSON, HTML, traces.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>

#include "cli_common.h"
#include "job_options.h"
#include "weft/report/html.h"
#include "weft/report/tables.h"
#include "weft/report/trace.h"
#include "weft/strategy/compare.h"
#include "weft/strategy/tune.h"

namespace weft::cli {

void RegisterCompareCommand(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<strategy::CompareOptions>();
  auto json_path = std::make_shared<std::string>();
  auto report_path = std::make_shared<std::string>();
  auto trace_dir = std::make_shared<std::string>();
  auto strategies = std::make_shared<std::string>();
  auto quiet = std::make_shared<bool>(false);
  auto tune = std::make_shared<bool>(false);
  auto tune_options = std::make_shared<strategy::TuneOptions>();
  CLI::App* cmd = app.add_subcommand(
      "compare",
      "Simulate K iterations of real batches under each strategy and compare them.\n"
      "Example:\n  weft compare --model vlm-s --cluster h800 --gpus 16 --data mixed "
      "--iterations 20 --report out/report.html --json out/compare.json");
  AddJobOptions(cmd, options->job);
  AddNumberOption(cmd, "--iterations", options->iterations, 1, kMaxIterations,
                  "iterations to simulate")
      ->capture_default_str();
  cmd->add_option("--strategies", *strategies,
                  "comma-separated strategies (default: all; weft compare --list describes "
                  "them), or auto (every one tuned, the best named): " + StrategyList());
  cmd->add_option("--baseline", options->baseline, "strategy speedups are relative to")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& name) -> std::string {
            Status s = CheckStrategyName(name);
            return s.ok() ? "" : s.message();
          },
          "", "strategy"));
  auto list = std::make_shared<bool>(false);
  cmd->add_flag("--list", *list, "list the strategies with one line each and exit");
  auto budget = std::make_shared<BudgetFlags>();
  AddBudgetOptions(cmd, *budget);
  cmd->add_option("--json", *json_path, "write the comparison as JSON");
  cmd->add_option("--report", *report_path, "write a self-contained HTML report");
  cmd->add_option("--trace-dir", *trace_dir,
                  "write a Chrome/Perfetto trace per strategy (last iteration; with DP > 1 the "
                  "slowest replica, named in the trace title)");
  cmd->add_flag("--quiet", *quiet, "no progress on stderr");
  cmd->add_flag("--tune", *tune,
                "tune each strategy's TP/CP/PP/DP and microbatches first (weft tune) and compare "
                "every one at its best; --strategies auto does this for all and names the best");
  AddNumberOption(cmd, "--max-simulations", tune_options->max_simulations, 1,
                  strategy::TuneOptions::kMaxSimulations,
                  "with --tune: candidates each strategy plans itself (weft tune)")
      ->capture_default_str();
  AddNumberOption(cmd, "--memory-check-batches", tune_options->memory_check_batches, 0,
                  strategy::TuneOptions::kMaxMemoryCheckBatches,
                  "with --tune: more profile-stream batches the tuned winner must fit (weft tune)")
      ->capture_default_str();
  cmd->callback([=, &exit_code]() {
    if (*list) {
      std::cout << StrategyTable();
      exit_code = 0;
      return;
    }
    // Every output path is checked before the work: a bad one fails now and writes nothing.
    if (Status s = CheckOutputs({{"--json", *json_path}, {"--report", *report_path}},
                                {{"--trace-dir", *trace_dir}});
        !s.ok()) {
      exit_code = ReportError(s);
      return;
    }
    auto plan_budget = MakePlanBudget(*budget);
    if (!plan_budget.ok()) {
      exit_code = ReportError(plan_budget.status());
      return;
    }
    options->budget = *plan_budget;
    options->strategies = SplitList(*strategies);
    // `auto`: every strategy tuned, the best named.
    const bool is_auto = options->strategies.size() == 1 && options->strategies[0] == "auto";
    if (is_auto) options->strategies.clear();
    if (std::find(options->strategies.begin(), options->strategies.end(), "auto") !=
        options->strategies.end()) {
      exit_code = ReportError(InvalidArgumentError(
          "--strategies auto stands alone (it tunes every strategy and names the best)"));
      return;
    }
    if (!*quiet) options->progress = ProgressPrinter();
    std::optional<strategy::TunedComparison> tuned;
    StatusOr<strategy::CompareRun> run = InvalidArgumentError("not run");
    if (*tune || is_auto) {
      if (!*quiet) tune_options->progress = options->progress;
      auto t = strategy::RunTunedComparison(*options, *tune_options);
      if (t.ok()) {
        tuned = std::move(*t);
        run = std::move(tuned->run);
      } else {
        run = t.status();
      }
    } else {
      run = strategy::RunComparison(*options);
    }
    if (!*quiet) ClearProgress();
    if (!run.ok()) {
      exit_code = ReportError(run.status());
      return;
    }
    if (!run->data_warning.empty()) std::cerr << "warning: " << run->data_warning << "\n";
    if (!run->setup_notes.empty()) std::cout << "note: " << run->setup_notes << "\n";
    std::cout << report::TextTable(run->comparison);
    std::cout << "  planning budget of search strategies: " << run->comparison.planning_budget
              << "\n";
    for (const auto& s : run->static_plans) std::cout << "  " << s << "\n";
    if (is_auto) {
      auto choice = strategy::ChooseAuto(tuned->tuning, options->job);
      std::cout << (choice.ok() ? choice->reason : "auto: " + std::string(choice.status().message()))
                << "\n";
    }
    // Every output is rendered first and written only when all of them rendered.
    std::vector<std::pair<std::string, std::string>> files;  // path, content
    if (!json_path->empty()) {
      files.emplace_back(*json_path, report::ComparisonJsonString(run->comparison));
    }
    if (!trace_dir->empty()) {
      for (const auto& kept : run->timelines) {
        report::TraceOptions t;
        t.title = kept.strategy + " iteration " + std::to_string(kept.iteration);
        if (kept.num_replicas > 1) {
          // One pipeline of several: say which (`weft simulate --replica K` shows another).
          t.title += " DP replica " + std::to_string(kept.replica) + " of " +
                     std::to_string(kept.num_replicas) +
                     " (the slowest; weft simulate --replica K shows another)";
        }
        auto trace = report::ChromeTraceString(kept.graph, kept.timeline, t);
        if (!trace.ok()) {
          exit_code = ReportError(trace.status());
          return;
        }
        files.emplace_back(
            (std::filesystem::path(*trace_dir) / (kept.strategy + ".trace.json")).string(),
            std::move(*trace));
      }
    }
    if (!report_path->empty()) {
      std::vector<report::StrategyTimeline> timelines;
      for (const auto& kept : run->timelines) {
        report::StrategyTimeline t{.strategy = kept.strategy,
                                   .iteration = kept.iteration,
                                   .graph = &kept.graph,
                                   .timeline = &kept.timeline,
                                   .replica = kept.replica,
                                   .num_replicas = kept.num_replicas,
                                   .pool = kept.pool ? &*kept.pool : nullptr,
                                   .pool_iterations = kept.pool_iterations};
        for (const auto& peak : run->peak_memory_timelines) {
          if (peak.strategy != kept.strategy) continue;
          t.peak_graph = &peak.graph;
          t.peak_timeline = &peak.timeline;
          t.peak_iteration = peak.iteration;
          t.peak_replica = peak.replica;
          t.peak_num_replicas = peak.num_replicas;
        }
        timelines.push_back(t);
      }
      report::HtmlOptions h;
      h.title = "weft compare: " + run->comparison.model + " on " +
                std::to_string(run->comparison.num_gpus) + " x " + run->comparison.cluster;
      auto html = report::HtmlReport(run->comparison, timelines, h);
      if (!html.ok()) {
        exit_code = ReportError(html.status());
        return;
      }
      files.emplace_back(*report_path, std::move(*html));
    }
    for (const auto& [path, content] : files) {
      if (Status s = WriteFileAtomically(path, content); !s.ok()) {
        exit_code = ReportError(s);
        return;
      }
    }
    if (!report_path->empty()) std::cout << "report: " << *report_path << "\n";
    // Every strategy failed (e.g. a data file no strategy can use): the table says why, and the
    // command fails with the first reason.
    if (!run->comparison.strategies.empty() &&
        std::none_of(run->comparison.strategies.begin(), run->comparison.strategies.end(),
                     [](const report::StrategyResult& r) { return r.ok(); })) {
      const auto& first = run->comparison.strategies.front();
      exit_code = ReportError(InvalidArgumentError(
          "every strategy failed on this input; " + first.name + ": " +
          first.error.value_or("no iterations")));
      return;
    }
    exit_code = 0;
  });
}

}  // namespace weft::cli
