// weft compare: simulate K iterations of real batches for each strategy; table, JSON, HTML, traces.
#include <filesystem>
#include <iostream>

#include "cli_common.h"
#include "job_options.h"
#include "weft/report/html.h"
#include "weft/report/tables.h"
#include "weft/report/trace.h"
#include "weft/strategy/compare.h"

namespace weft::cli {

void RegisterCompareCommand(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<strategy::CompareOptions>();
  auto json_path = std::make_shared<std::string>();
  auto report_path = std::make_shared<std::string>();
  auto trace_dir = std::make_shared<std::string>();
  auto strategies = std::make_shared<std::string>();
  auto quiet = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "compare",
      "Simulate K iterations of real batches under each strategy and compare them.\n"
      "Example:\n  weft compare --model vlm-s --cluster h800 --gpus 16 --data mixed "
      "--iterations 20 --report out/report.html --json out/compare.json");
  AddJobOptions(cmd, options->job);
  cmd->add_option("--iterations", options->iterations, "iterations to simulate")
      ->capture_default_str();
  cmd->add_option("--strategies", *strategies,
                  "comma-separated strategies (default: all): " + StrategyList());
  cmd->add_option("--baseline", options->baseline, "strategy speedups are relative to")
      ->capture_default_str();
  auto budget = std::make_shared<BudgetFlags>();
  AddBudgetOptions(cmd, *budget);
  cmd->add_option("--json", *json_path, "write the comparison as JSON");
  cmd->add_option("--report", *report_path, "write a self-contained HTML report");
  cmd->add_option("--trace-dir", *trace_dir,
                  "write a Chrome/Perfetto trace per strategy (last iteration; with DP > 1 the "
                  "slowest replica, named in the trace title)");
  cmd->add_flag("--quiet", *quiet, "no progress on stderr");
  cmd->callback([=, &exit_code]() {
    auto plan_budget = MakePlanBudget(*budget);
    if (!plan_budget.ok()) {
      exit_code = ReportError(plan_budget.status());
      return;
    }
    options->budget = *plan_budget;
    options->strategies.clear();
    std::stringstream ss(*strategies);
    for (std::string s; std::getline(ss, s, ',');) {
      if (!s.empty()) options->strategies.push_back(s);
    }
    if (!*quiet) options->progress = [](const std::string& m) { std::cerr << "\r" << m << "\033[K"; };
    auto run = strategy::RunComparison(*options);
    if (!*quiet) std::cerr << "\r\033[K";
    if (!run.ok()) {
      exit_code = ReportError(run.status());
      return;
    }
    if (!run->data_warning.empty()) std::cerr << "warning: " << run->data_warning << "\n";
    std::cout << report::TextTable(run->comparison);
    std::cout << "  planning budget of search strategies: " << run->comparison.planning_budget
              << "\n";
    for (const auto& s : run->static_plans) std::cout << "  " << s << "\n";
    if (!json_path->empty()) {
      if (Status s = WriteFileAtomically(*json_path, report::ComparisonJsonString(run->comparison));
          !s.ok()) {
        exit_code = ReportError(s);
        return;
      }
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
        const std::string path = (std::filesystem::path(*trace_dir) /
                                  (kept.strategy + ".trace.json")).string();
        if (Status s = WriteFileAtomically(path, *trace); !s.ok()) {
          exit_code = ReportError(s);
          return;
        }
      }
    }
    if (!report_path->empty()) {
      std::vector<report::StrategyTimeline> timelines;
      for (const auto& kept : run->timelines) {
        timelines.push_back({kept.strategy, kept.iteration, &kept.graph, &kept.timeline});
      }
      report::HtmlOptions h;
      h.title = "weft compare: " + run->comparison.model + " on " +
                std::to_string(run->comparison.num_gpus) + " x " + run->comparison.cluster;
      auto html = report::HtmlReport(run->comparison, timelines, h);
      if (!html.ok()) {
        exit_code = ReportError(html.status());
        return;
      }
      if (Status s = WriteFileAtomically(*report_path, *html); !s.ok()) {
        exit_code = ReportError(s);
        return;
      }
      std::cout << "report: " << *report_path << "\n";
    }
    exit_code = 0;
  });
}

}  // namespace weft::cli
