// weft bench dip <experiment>: the DIP evidence experiments (bench/dip/experiments.h).
// weft bench dflop-correction: the Fig. 15 analogue of DFLOP's adaptive correction
// (strategy/dflop/correction_study.h).
#include <filesystem>
#include <limits>
#include <iostream>
#include <sstream>

#include "cli_common.h"
#include "job_options.h"
#include "weft/common/text.h"
#include "bench/dip/experiments.h"
#include "weft/strategy/dflop/correction_study.h"
#include "weft/strategy/strategy.h"

namespace weft::cli {
namespace {

// Parses "0.01,0.03" into numbers in (0, max]; InvalidArgument naming the flag on a bad element.
StatusOr<std::vector<double>> ParseNumbers(const std::string& flag, const std::string& text,
                                           double max) {
  std::vector<double> out;
  for (const std::string& item : SplitList(text)) {
    try {
      size_t used = 0;
      const double v = std::stod(item, &used);
      if (used != item.size() || !(v > 0) || v > max) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      return InvalidArgumentError(flag + " = " + QuoteForMessage(text) + ": " +
                                  QuoteForMessage(item) + " is not a number in (0, " +
                                  std::to_string(max) + "]");
    }
  }
  return out;
}

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

  auto study = std::make_shared<strategy::dflop::CorrectionStudyOptions>();
  auto rates = std::make_shared<std::string>("0.01,0.03,0.05");
  auto latencies = std::make_shared<std::string>("0.25,0.5,0.75,1");
  auto study_seeds = std::make_shared<std::string>("1,2,3");
  auto study_markdown = std::make_shared<std::string>();
  CLI::App* corr = bench->add_subcommand(
      "dflop-correction",
      "DFLOP adaptive correction, Fig. 15 analogue in simulation: latency injected into rare LLM "
      "shapes; net speedup of dflop with correction vs without per (rate, latency) cell.\n"
      "Example:\n  weft bench dflop-correction --rates 0.01,0.03,0.05 --latencies 0.25,0.5,0.75,1");
  corr->add_option("--model", study->model, "model preset")->capture_default_str();
  corr->add_option("--cluster", study->cluster, "cluster preset")->capture_default_str();
  AddNumberOption(corr, "--gpus", study->gpus, 2, 4096, "GPUs")->capture_default_str();
  corr->add_option("--data", study->data, "data profile")->capture_default_str();
  AddNumberOption(corr, "--iterations", study->iterations, 1, 1000, "iterations per run")
      ->capture_default_str();
  corr->add_option("--rates", *rates, "anomaly rates (fractions of items)")->capture_default_str();
  corr->add_option("--latencies", *latencies, "injected latency, fractions of the max stage")
      ->capture_default_str();
  corr->add_option("--seeds", *study_seeds, "seeds")->capture_default_str();
  AddNumberOption(corr, "--window", study->correction.window_iterations, 1, 1000000,
                  "iterations per cost-benefit decision (I)")
      ->capture_default_str();
  AddNumberOption(corr, "--tracking-cost", study->correction.tracking_cost_fraction, 0.0, 1.0,
                  "modelled tracking cost C, fraction of an iteration")
      ->capture_default_str();
  corr->add_option("--markdown", *study_markdown, "write the markdown to a file too");
  corr->add_flag("--quiet", *quiet, "no progress on stderr");
  corr->callback([=, &exit_code]() {
    strategy::dflop::CorrectionStudyOptions o = *study;
    auto r = ParseNumbers("--rates", *rates, 0.99);
    auto l = ParseNumbers("--latencies", *latencies, 10.0);
    auto sd = ParseList<uint64_t>("--seeds", *study_seeds, std::numeric_limits<long long>::max());
    for (const Status& st : {r.status(), l.status(), sd.status()}) {
      if (!st.ok()) {
        exit_code = ReportError(st);
        return;
      }
    }
    o.rates = *r;
    o.latency_fractions = *l;
    o.seeds = *sd;
    if (Status s = CheckOutputs({{"--markdown", *study_markdown}}, {}); !s.ok()) {
      exit_code = ReportError(s);
      return;
    }
    strategy::dflop::StudyProgress progress;
    if (!*quiet) progress = [](const std::string& line) { std::cerr << line << "\n"; };
    auto result = strategy::dflop::RunCorrectionStudy(o, progress);
    if (!result.ok()) {
      exit_code = ReportError(result.status());
      return;
    }
    const std::string md = result->ToMarkdown(o);
    std::cout << md;
    std::cerr << "real CPU cost of Planner::Observe with tracking (median per iteration): "
              << result->observe_wall_s_per_iteration * 1e3 << " ms\n";
    if (!study_markdown->empty()) {
      if (Status s = WriteFileAtomically(*study_markdown, md); !s.ok()) {
        exit_code = ReportError(s);
        return;
      }
    }
    exit_code = 0;
  });
}

}  // namespace weft::cli
