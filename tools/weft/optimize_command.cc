// `weft optimize`: DFLOP's data-aware 3D parallelism optimizer (thin over strategy/dflop), and
// `weft profile`: the throughput tables it prices from (analytical; a measured file comes from
// `python -m weft.profile`).
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <string>

#include "cli_common.h"
#include "job_options.h"
#include "weft/cost/throughput_table.h"
#include "weft/planning/job_setup.h"
#include "weft/strategy/dflop/dflop.h"

namespace weft::cli {
namespace {

struct OptimizeArgs {
  planning::JobOptions job;
  std::string strategy = "dflop";
  std::string objective = "expected";
  int top_k = 8;
  double accept_within = 0;
  std::string profile;  // measured weft.profile/v1 (empty = analytical)
  std::string out;      // placement YAML
};

StatusOr<cost::ThroughputTable> Tables(const std::string& profile, const planning::Job& job) {
  if (profile.empty()) return cost::ThroughputTable::Analytical(job.model, *job.cost_model);
  return cost::ThroughputTable::Load(profile, job.model);
}

int RunOptimize(const OptimizeArgs& args) {
  if (args.strategy != "dflop") {
    return ReportError(InvalidArgumentError(fmt::format(
        "--strategy = '{}'; weft optimize knows 'dflop' (DFLOP's data-aware 3D parallelism "
        "optimizer)",
        args.strategy)));
  }
  auto objective = strategy::dflop::ParseObjective(args.objective);
  if (!objective.ok()) return ReportError(objective.status());
  if (!args.out.empty()) {
    if (Status s = CheckOutputFile(args.out, "--out"); !s.ok()) return ReportError(s);
  }
  auto setup = planning::MakeJobSetup(args.job);
  if (!setup.ok()) return ReportError(setup.status());
  const planning::Job& job = (*setup)->job;
  auto tables = Tables(args.profile, job);
  if (!tables.ok()) return ReportError(tables.status());
  const strategy::dflop::OptimizerOptions options{
      .objective = *objective, .rerank_top_k = args.top_k, .accept_within = args.accept_within};
  auto roles = strategy::dflop::FindRoles(job.model);
  if (!roles.ok()) return ReportError(roles.status());
  strategy::dflop::AssignFn assign = [&](const planning::Job& j, const planning::StaticPlan&,
                                         const strategy::dflop::Config& c, const spec::Batch& b) {
    return strategy::dflop::ScheduleBatch(j, c, *tables, b,
                                          strategy::dflop::SchedulerKind::kHybrid);
  };
  auto result = strategy::dflop::Optimize(job, *tables, options, assign);
  if (!result.ok()) return ReportError(result.status());
  std::cout << fmt::format(
                   "dflop optimizer: {} on {} x {} ({} GPUs), data {}, objective {}, "
                   "tables {}\n",
                   (*setup)->model_name, (*setup)->cluster_name, job.cluster.gpu.name,
                   job.cluster.TotalGpus(), (*setup)->data_name, args.objective, tables->source())
            << result->ToText();
  if (!args.out.empty()) {
    auto spec = strategy::dflop::PlacementOf(result->best, job.model, *roles);
    if (!spec.ok()) return ReportError(spec.status());
    const std::string header = fmt::format(
        "weft optimize --strategy dflop: {} on {} GPUs ({}), data {}\n{}\nrun it: weft simulate "
        "--model {} --gpus {} --placement {}",
        (*setup)->model_name, job.cluster.TotalGpus(), (*setup)->cluster_name, (*setup)->data_name,
        result->best.Describe(), args.job.model, job.cluster.TotalGpus(), args.out);
    if (Status s = WriteFileAtomically(args.out, planning::PlacementSpecToYaml(*spec, header));
        !s.ok()) {
      return ReportError(s);
    }
    std::cout << "placement written to " << args.out << "\n";
  }
  return 0;
}

struct ProfileArgs {
  std::string model = "vlm-s";
  std::string cluster;
  std::string out;
  bool json = false;
};

int RunProfile(const ProfileArgs& args) {
  if (!args.out.empty()) {
    if (Status s = CheckOutputFile(args.out, "--out"); !s.ok()) return ReportError(s);
  }
  planning::JobOptions options{.model = args.model, .cluster = args.cluster};
  auto setup = planning::MakeJobSetup(options);
  if (!setup.ok()) return ReportError(setup.status());
  auto tables = cost::ThroughputTable::Analytical((*setup)->job.model, *(*setup)->job.cost_model);
  if (!tables.ok()) return ReportError(tables.status());
  if (!args.out.empty()) {
    if (Status s = WriteFileAtomically(args.out, tables->ToJson() + "\n"); !s.ok()) {
      return ReportError(s);
    }
    std::cout << "analytical throughput tables of " << (*setup)->model_name << " written to "
              << args.out << "\n";
    return 0;
  }
  std::cout << (args.json ? tables->ToJson() + "\n" : tables->ToText());
  return 0;
}

}  // namespace

void RegisterOptimizeCommand(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<OptimizeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "optimize",
      "DFLOP's data-aware 3D parallelism optimizer: the encoder's and the LLM's own TP/PP/DP and "
      "the microbatch count for a model, cluster and dataset (docs/strategies_dflop.md).\n\n"
      "Example:\n  weft optimize --strategy dflop --model llava-ov-llama3-8b --cluster a100 "
      "--gpus 64 --data mixed --out placement.yaml");
  AddJobOptions(cmd, args->job);
  cmd->add_option("--strategy", args->strategy, "optimizer (dflop)")->capture_default_str();
  cmd->add_option("--objective", args->objective,
                  "expected (weft: mean makespan over the profile batches, balanced buckets) or "
                  "paper (Algorithm 1: makespan of the mean item)")
      ->capture_default_str();
  AddNumberOption(cmd, "--top-k", args->top_k, 0, 256,
                  "best configs re-ranked by the event simulator", "0 = the formula's argmin")
      ->capture_default_str();
  AddNumberOption(cmd, "--accept-within", args->accept_within, 0.0, 1.0,
                  "DFLOP's public code's rule: the fewest microbatches within this fraction of "
                  "the best",
                  "0 = off");
  cmd->add_option("--profile", args->profile,
                  "measured throughput tables (weft.profile/v1 of python -m weft.profile); "
                  "default: analytical")
      ->check(InputFileCheck(kMaxSpecFileBytes));
  cmd->add_option("--out", args->out, "write the winner as a placement file (--placement runs it)");
  cmd->callback([args, &exit_code] { exit_code = RunOptimize(*args); });

  auto pargs = std::make_shared<ProfileArgs>();
  CLI::App* prof = app.add_subcommand(
      "profile",
      "Throughput tables of a model (DFLOP's profiling engine format, weft.profile/v1) from the "
      "analytical cost model; measured ones come from `python -m weft.profile`.\n\n"
      "Example:\n  weft profile --model llava-ov-llama3-8b --cluster a100 --out profile.json");
  prof->add_option("--model", pargs->model, "model preset name or YAML/JSON file")
      ->capture_default_str()
      ->check(InputFileCheck(kMaxSpecFileBytes));
  prof->add_option("--cluster", pargs->cluster, "cluster preset or file (default: the setup's)")
      ->check(InputFileCheck(kMaxSpecFileBytes));
  prof->add_option("--out", pargs->out, "write the JSON file here (default: a table on stdout)");
  prof->add_flag("--json", pargs->json, "print JSON instead of the table");
  prof->callback([pargs, &exit_code] { exit_code = RunProfile(*pargs); });
}

}  // namespace weft::cli
