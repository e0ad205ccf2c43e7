// weft bench dip <experiment>: the DIP evidence experiments (bench/dip/experiments.h).
#include <filesystem>
#include <limits>
#include <iostream>
#include <sstream>

#include "cli_common.h"
#include "job_options.h"
#include "weft/common/text.h"
#include "bench/dip/experiments.h"
#include "weft/strategy/strategy.h"

namespace weft::cli {
namespace {

}  // namespace

void RegisterBenchCommand(CLI::App& app, int& exit_code) {
  CLI::App* bench = app.add_subcommand(
      "bench", "Run the paper-figure experiments.\nExample:\n  weft bench dip search --budget-s 5");
  bench->require_subcommand(1);
  auto options = std::make_shared<bench::dip::ExperimentOptions>();
  auto experiment = std::make_shared<std::string>();
  auto json_path = std::make_shared<std::string>();
  auto markdown_path = std::make_shared<std::string>();
  auto figure_dir = std::make_shared<std::string>();
  auto seeds = std::make_shared<std::string>();
  auto sweep = std::make_shared<std::string>();
  auto quiet = std::make_shared<bool>(false);
  CLI::App* cmd = bench->add_subcommand(
      "dip",
      "DIP evidence experiments (issue 4). Each prints a markdown table.\n"
      "Experiments:\n" +
          bench::dip::ExperimentHelp() +
          "Example:\n  weft bench dip search --budget-s 60 --json out/search.json "
          "--figure-dir docs/figures\n  weft bench dip subbatch --sweep 1,4,16 --iterations 2");
  cmd->add_option("experiment", *experiment, "experiment name (see above)")->required();
  cmd->add_option("--model", options->model, "model preset or file (default: the experiment's)")
      ->check(ModelInputCheck());
  cmd->add_option("--data", options->data, "data profile or file (default: the experiment's)")
      ->check(InputFileCheck(kMaxDataFileBytes));
  auto budget_s = std::make_shared<double>(-1);
  CLI::Option* budget_opt = AddNumberOption(
      cmd, "--budget-s", *budget_s, 0.0, planning::PlanBudget::kMaxTimeBudgetS,
      "search budget per run (search, scalability) or planning budget per iteration (others), "
      "seconds (default: the experiment's)");
  AddNumberOption(cmd, "--iterations", options->iterations, 0, kMaxIterations,
                  "iterations of fresh batches", "0 = the experiment's");
  cmd->add_option("--seeds", *seeds, "comma-separated search seeds (default 1,2,3)");
  AddNumberOption(cmd, "--threads", options->threads, 1, planning::PlanBudget::kMaxThreads,
                  "search / planning threads")
      ->capture_default_str();
  cmd->add_option("--sweep", *sweep,
                  "comma-separated sweep values: microbatch counts (scalability) or encoder "
                  "sub-microbatch sizes (subbatch)");
  cmd->add_option("--json", *json_path, "write the results as JSON");
  cmd->add_option("--markdown", *markdown_path, "write the markdown to a file too");
  cmd->add_option("--figure-dir", *figure_dir, "write the experiment's SVG figures here");
  cmd->add_flag("--quiet", *quiet, "no progress on stderr");
  cmd->callback([=, &exit_code]() {
    auto seed_list = ParseList<uint64_t>("--seeds", *seeds, std::numeric_limits<long long>::max());
    if (!seed_list.ok()) {
      exit_code = ReportError(seed_list.status());
      return;
    }
    auto sweep_list = ParseList<int>("--sweep", *sweep, planning::JobOptions::kMaxMicrobatches);
    if (!sweep_list.ok()) {
      exit_code = ReportError(sweep_list.status());
      return;
    }
    bench::dip::ExperimentOptions o = *options;
    o.seeds = *seed_list;
    o.sweep = *sweep_list;
    if (budget_opt->count() > 0) o.budget_s = *budget_s;  // range checked at parse time
    // Output paths are checked before the work.
    if (Status s = CheckOutputs({{"--json", *json_path}, {"--markdown", *markdown_path}},
                                {{"--figure-dir", *figure_dir}});
        !s.ok()) {
      exit_code = ReportError(s);
      return;
    }
    if (!*quiet) o.progress = ProgressPrinter();
    auto result = bench::dip::RunExperiment(*experiment, o);
    if (!*quiet) ClearProgress();
    if (!result.ok()) {
      exit_code = ReportError(result.status());
      return;
    }
    std::cout << result->markdown;
    if (!markdown_path->empty()) {
      if (Status s = WriteFileAtomically(*markdown_path, result->markdown); !s.ok()) {
        exit_code = ReportError(s);
        return;
      }
    }
    if (!json_path->empty()) {
      if (Status s = WriteFileAtomically(*json_path, result->json.dump(1) + "\n"); !s.ok()) {
        exit_code = ReportError(s);
        return;
      }
    }
    if (!figure_dir->empty()) {
      for (const auto& f : result->figures) {
        const std::string path = (std::filesystem::path(*figure_dir) / f.file_name).string();
        if (Status s = WriteFileAtomically(path, f.svg); !s.ok()) {
          exit_code = ReportError(s);
          return;
        }
        std::cout << "\nfigure: " << path << "\n";
      }
    }
    exit_code = 0;
  });
}

}  // namespace weft::cli
