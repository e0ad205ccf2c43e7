// weft simulate / weft plan: one strategy on the batches of K iterations.
#include <fmt/format.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <iostream>

#include "cli_common.h"
#include "job_options.h"
#include "weft/common/parallel.h"
#include "weft/cost/cost_model.h"
#include "weft/plan/plan_json.h"
#include "weft/plan/validator.h"
#include "weft/report/svg.h"
#include "weft/report/trace.h"
#include "weft/service/planner_service.h"
#include "weft/planning/window.h"
#include "weft/planning/mimo_config.h"
#include "weft/strategy/common.h"
#include "weft/strategy/compare.h"
#include "weft/strategy/tune.h"
#include "weft/planning/planner.h"

#include <fmt/format.h>

#include <atomic>
#include <nlohmann/json.hpp>

namespace weft::cli {
namespace {

struct RunOptions {
  planning::JobOptions job;
  std::string strategy = "";  // "" = manual with --placement, else megatron-1f1b
  int iterations = 1;
  int first_iteration = 0;
  BudgetFlags budget;
  std::string trace, svg, out, out_dir;
  std::string json;  // simulate: per-iteration summaries (the keys of Python weft.simulate's)
  int replica = -1;  // DP replica to trace / write; -1 = slowest (trace), every one (plan)
  bool world = false;  // plan: one world plan per iteration (Planner::CompileWorld)
  std::string emit_mimo_config;  // plan: the placement's Megatron MIMO parallelism config
  // Progress on stderr, only when stderr is a terminal (issue 34 item 16: long runs are not
  // silent; logs and pipes stay clean).
  std::function<void(const std::string&)> progress = TerminalProgress();
};

// What every run needs: the planner (job, strategy, static plan, memory policy) and the batches.
struct Prepared {
  std::unique_ptr<planning::Planner> planner;
  std::vector<spec::Batch> batches;
  std::string mimo_config;  // YAML for --emit-mimo-config, written after the plans
  std::string data_warning;  // the batches' given-vs-used line ("" = all used as given)
};

// The MIMO parallelism config of the planner's placement (planning::MimoConfigOfPlacement, read
// back and compared), or why the strategy's placement has none.
StatusOr<std::string> MimoConfigText(const planning::Planner& planner) {
  const auto& job = planner.job();
  auto config = planning::MimoConfigOfPlacement(planner.static_plan().placement, job.model,
                                                        job.cluster, *job.cost_model);
  if (!config.ok()) {
    return InvalidArgumentError("--emit-mimo-config: strategy '" +
                                std::string(planner.strategy().Name()) +
                                "' has no MIMO parallelism config: " +
                                std::string(config.status().message()));
  }
  const std::string header =
      "Megatron MIMO parallelism config (Megatron-Bridge module_parallelisms) written by weft\n"
      "strategy " + std::string(planner.strategy().Name()) + ", model " + job.model.name + ", " +
      std::to_string(job.cluster.TotalGpus()) + " GPUs; read back with --placement FILE.\n"
      "Layers split evenly over each module's pipeline stages; Megatron MIMO runs multimodule\n"
      "1F1B (the strategy's own schedule and microbatch count are not part of the config).";
  return planning::MimoConfigToYaml(*config, header);
}

StatusOr<Prepared> PrepareRun(const RunOptions& o) {
  if (o.iterations <= 0) {
    return InvalidArgumentError("--iterations = " + std::to_string(o.iterations) +
                                "; must be > 0");
  }
  Prepared p;
  planning::PlannerOptions options;
  WEFT_ASSIGN_OR_RETURN(options.budget, MakePlanBudget(o.budget));
  // --placement alone runs the user's placement.
  const std::string name =
      !o.strategy.empty() ? o.strategy : !o.job.placement.empty() ? "manual" : "megatron-1f1b";
  if (name == "auto") {
    // The best tuned strategy of this job (weft tune), run at its best configuration.
    strategy::TuneOptions tune;
    tune.job = o.job;
    tune.budget = options.budget;
    WEFT_ASSIGN_OR_RETURN(strategy::AutoChoice choice, strategy::ChooseAuto(tune));
    std::cout << choice.reason << "\n";
    WEFT_ASSIGN_OR_RETURN(p.planner, strategy::MakePlanner(choice.job, choice.strategy, options));
  } else {
    WEFT_ASSIGN_OR_RETURN(p.planner, strategy::MakePlanner(o.job, name, options));
  }
  const auto& planner = *p.planner;
  if (!o.emit_mimo_config.empty()) {  // before any output: a refusal is one line
    WEFT_ASSIGN_OR_RETURN(p.mimo_config, MimoConfigText(planner));
  }
  std::cout << "strategy " << planner.strategy().Name() << ": "
            << planner.static_plan().description << "\n";
  std::cout << "memory policy: " << planning::MemoryPolicyName(planner.memory_policy()) << "\n";
  const spec::GpuSpec& gpu = planner.job().cluster.gpu;
  std::cout << "memory: " << fmt::format("{:.2f}", gpu.memory_capacity_bytes / 1073741824.0)
            << " GiB per GPU, " << fmt::format("{:.2f}", gpu.reserved_memory_bytes / 1073741824.0)
            << " GiB reserved (CUDA context, communication buffers, fragmentation): plans use "
            << fmt::format("{:.2f}", gpu.UsableMemoryBytes() / 1073741824.0) << " GiB\n";
  // The setup notes describe the default configuration, which a user placement (or
  // megatron-mimo's searched MIMO config) replaces.
  if (!planner.setup().notes.empty() && name != "manual" && name != "megatron-mimo") {
    std::cout << "note: " << planner.setup().notes << "\n";
  }
  WEFT_ASSIGN_OR_RETURN(p.batches,
                        planner.Batches(o.first_iteration, o.iterations, &p.data_warning));
  if (!p.data_warning.empty()) std::cerr << "warning: " << p.data_warning << "\n";
  return p;
}

// Writes --emit-mimo-config once every plan is written.
Status WriteMimoConfig(const RunOptions& o, const Prepared& p) {
  if (o.emit_mimo_config.empty()) return OkStatus();
  WEFT_RETURN_IF_ERROR(WriteFileAtomically(o.emit_mimo_config, p.mimo_config));
  std::cout << "MIMO parallelism config: " << o.emit_mimo_config << "\n";
  return OkStatus();
}

// Plans and simulates the iterations; calls `each` with (iteration, planner, planned).
// `data_warning` (if not null) receives the batches' given-vs-used line.
template <typename Fn>
Status RunIterations(const RunOptions& o, std::string* data_warning, Fn each) {
  WEFT_ASSIGN_OR_RETURN(Prepared prepared, PrepareRun(o));
  if (data_warning != nullptr) *data_warning = prepared.data_warning;
  const size_t n = prepared.batches.size();
  for (size_t k = 0; k < n; ++k) {
    const auto& batch = prepared.batches[k];
    o.progress(fmt::format("planning iteration {} ({} of {}) with {} ...", batch.iteration, k + 1,
                           n, prepared.planner->strategy().Name()));
    WEFT_ASSIGN_OR_RETURN(auto planned, prepared.planner->Plan(batch));
    ClearProgress();
    WEFT_RETURN_IF_ERROR(each(batch.iteration, *prepared.planner, planned));
  }
  return WriteMimoConfig(o, prepared);
}

// Like RunIterations, but the plans come from the asynchronous PlannerService: every batch is
// submitted up front, each Get() waits at most 2x the budget (+1 s), then the fallback is served.
template <typename Fn>
Status RunIterationsWithService(const RunOptions& o, Fn each) {
  WEFT_ASSIGN_OR_RETURN(Prepared prepared, PrepareRun(o));
  WEFT_ASSIGN_OR_RETURN(planning::PlanBudget budget, MakePlanBudget(o.budget));
  // A work budget waits for every search (deterministic plans); a wall-clock one serves the
  // fallback after 2x the budget + 1 s.
  service::PlannerService planner(
      *prepared.planner,
      {.budget_s = std::max(1e-3, budget.time_budget_s), .work_budget = budget.work_budget});
  WEFT_RETURN_IF_ERROR(planner.status());  // planning threads could not start
  for (const auto& batch : prepared.batches) WEFT_RETURN_IF_ERROR(planner.Submit(batch));
  const size_t n = prepared.batches.size();
  for (size_t k = 0; k < n; ++k) {
    const auto& batch = prepared.batches[k];
    o.progress(fmt::format("planning iteration {} ({} of {}) with {} ...", batch.iteration, k + 1,
                           n, prepared.planner->strategy().Name()));
    const auto deadline =
        budget.work_budget > 0
            ? std::chrono::steady_clock::now() + std::chrono::hours(24)
            : std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(static_cast<int64_t>(2 * o.budget.budget_ms + 1000));
    WEFT_ASSIGN_OR_RETURN(auto served, planner.Get(batch.iteration, deadline));
    ClearProgress();
    planning::PlannedIteration planned = std::move(served.planned);
    planned.plan.plan_time_s = served.search_time_s;
    if (planned.outcome.is_fallback()) {
      planned.plan.notes +=
          std::string(planned.plan.notes.empty() ? "" : "; ") + planned.outcome.detail;
    }
    WEFT_RETURN_IF_ERROR(each(batch.iteration, *prepared.planner, planned));
  }
  return WriteMimoConfig(o, prepared);
}

// One iteration's summary for simulate --json: the keys and values of Python weft.simulate's
// (python/src/plan_dict.cc FillSummary), data_warning added by the caller.
nlohmann::json IterationSummaryJson(int64_t iteration, const planning::PlannedIteration& p) {
  const auto& e = p.evaluation;
  return {{"iteration", iteration},
          {"iteration_time_s", e.iteration_time_s},
          {"lower_bound_s", e.lower_bound_s},
          {"bubble_ratio", e.bubble_ratio},
          {"mfu", e.mfu},
          {"samples_per_s", e.samples_per_s},
          {"tokens_per_s", e.tokens_per_s},
          {"peak_memory_bytes", e.peak_memory_bytes},
          {"oom", e.oom},
          {"plan_time_s", p.plan.plan_time_s},
          {"recompute_used", std::string(spec::RecomputeName(p.recompute_used))},
          {"num_replicas", static_cast<int>(p.plan.replicas.size())},
          {"slowest_replica", e.slowest_replica},
          {"notes", p.plan.notes}};
}

// The replica whose timeline a trace shows: --replica, else the slowest one.
StatusOr<int> ShownReplica(const RunOptions& o, const planning::PlannedIteration& p) {
  const int n = static_cast<int>(p.plan.replicas.size());
  if (o.replica < 0) return p.evaluation.slowest_replica;
  if (o.replica >= n) {
    return InvalidArgumentError("--replica = " + std::to_string(o.replica) +
                                "; the plan has " + std::to_string(n) +
                                " DP replicas (0.." + std::to_string(n - 1) + ")");
  }
  return o.replica;
}

void AddRunOptions(CLI::App* cmd, RunOptions& o) {
  AddJobOptions(cmd, o.job);
  cmd->add_option("--strategy", o.strategy,
                  "strategy name: " + StrategyList() +
                      ", manual (with --placement), auto (every strategy tuned, the best run at "
                      "its best configuration; weft tune) (default: manual with --placement, else "
                      "megatron-1f1b)");
  AddNumberOption(cmd, "--iterations", o.iterations, 1, kMaxIterations,
                  "iterations (batches) to plan")
      ->capture_default_str();
  AddNumberOption(cmd, "--first-iteration", o.first_iteration, 0, 1'000'000'000,
                  "index of the first batch")
      ->capture_default_str();
  AddBudgetOptions(cmd, o.budget);
  AddNumberOption(cmd, "--replica", o.replica, -1, planning::JobOptions::kMaxGpus - 1,
                  "DP replica to show (simulate: trace/SVG) or to write (plan)",
                  "-1 = simulate: the slowest, plan: every replica");
}

}  // namespace

void RegisterSimulateCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand(
      "simulate",
      "Simulate one strategy on the batches of K iterations; print the timeline summary.\n"
      "Example:\n  weft simulate --model vlm-s --strategy megatron-1f1b --data mixed "
      "--trace out/1f1b.trace.json --svg out/1f1b.svg");
  AddRunOptions(cmd, *o);
  cmd->add_option("--trace", o->trace, "Chrome/Perfetto trace of the last iteration");
  cmd->add_option("--svg", o->svg, "SVG timeline of the last iteration");
  cmd->add_option("--json", o->json,
                  "per-iteration summaries as a JSON list (the keys of Python weft.simulate's: "
                  "iteration_time_s, mfu, samples_per_s (the job's), ...; - = stdout)");
  cmd->callback([o, &exit_code]() {
    for (const auto& [flag, path] : {std::pair<std::string, std::string>{"--trace", o->trace},
                                     {"--svg", o->svg},
                                     {"--json", o->json}}) {
      if (path.empty()) continue;
      if (Status s = CheckOutputFile(path, flag); !s.ok()) {
        exit_code = ReportError(s);
        return;
      }
    }
    std::string trace_text, svg_text;  // of the last iteration, written once all succeeded
    nlohmann::json summaries = nlohmann::json::array();  // --json
    std::string data_warning;
    std::vector<planning::IterationPlan> streamed;  // a streaming plan's iterations (a pool)
    Status s = RunIterations(*o, &data_warning, [&](int64_t it, const planning::Planner& planner,
                                                    planning::PlannedIteration& p) -> Status {
      const auto& e = p.evaluation;
      const int n = static_cast<int>(p.plan.replicas.size());
      WEFT_ASSIGN_OR_RETURN(const int shown, ShownReplica(*o, p));
      summaries.push_back(IterationSummaryJson(it, p));
      std::cout << "iteration " << it << ": " << e.timelines[e.slowest_replica].BriefReport();
      if (n > 1) {
        // The lines above are one replica's (its throughput and MFU); the job's are all of them.
        std::cout << fmt::format("  job: {:.4g} samples/s, {:.0f} tokens/s, MFU {:.1f}% over all {} "
                                 "DP replicas (the lines above: replica {} alone)\n",
                                 e.samples_per_s, e.tokens_per_s, 100 * e.mfu, n,
                                 e.slowest_replica);
        std::cout << "  " << n << " DP replicas; the iteration time is the slowest one's (replica "
                  << e.slowest_replica << ")";
        if (!o->trace.empty() || !o->svg.empty()) {
          std::cout << "; trace/SVG show replica " << shown << " (--replica K picks another)";
        }
        std::cout << "\n";
      }
      if (!p.plan.notes.empty()) std::cout << "  note: " << p.plan.notes << "\n";
      const auto& g = p.plan.replicas[shown].graph;
      const auto& t = e.timelines[shown];
      if (!o->trace.empty()) {
        WEFT_ASSIGN_OR_RETURN(trace_text, report::ChromeTraceString(g, t));
      }
      if (!o->svg.empty()) {
        WEFT_ASSIGN_OR_RETURN(svg_text, report::TimelineSvg(g, t));
      }
      if (!planner.static_plan().pool) return OkStatus();
      // Streaming (planning/window.h): the lines above are each iteration run alone; once all
      // are planned, the window of all of them with the pool between producers and consumers.
      streamed.push_back(p.plan);
      if (static_cast<int>(streamed.size()) < o->iterations) return OkStatus();
      std::vector<const planning::IterationPlan*> ptrs;
      for (const auto& plan : streamed) ptrs.push_back(&plan);
      const int warmup = planning::kAutoWarmup;
      WEFT_ASSIGN_OR_RETURN(planning::WindowEvaluation w,
                            planning::EvaluateWindow(planner.job(), planner.static_plan(), ptrs,
                                                     warmup, {.record_transfers = true}));
      std::cout << "streaming " << w.Brief() << "\n  " << planner.static_plan().pool->description
                << "\n";
      for (size_t k = 0; k < w.iteration_time_s.size(); ++k) {
        std::cout << fmt::format("  window iteration {}: {:.4f} s (ends at {:.4f} s)\n",
                                 o->first_iteration + static_cast<int64_t>(k),
                                 w.iteration_time_s[k], w.window.iteration_end_s[k]);
      }
      std::cout << "  " << w.window.BriefReport() << "\n";
      if (!o->trace.empty()) {
        std::vector<sim::WindowIteration> its;
        for (size_t k = 0; k < streamed.size(); ++k) {
          its.push_back(sim::WindowIteration{.graph = &w.graphs[k].graph,
                                             .schedule = &streamed[k].replicas[0].schedule,
                                             .buffer_uses = w.graphs[k].buffer_uses});
        }
        WEFT_ASSIGN_OR_RETURN(trace_text, report::ChromeWindowTraceString(its, w.window));
      }
      return OkStatus();
    });
    if (s.ok() && !o->trace.empty()) s = WriteFileAtomically(o->trace, trace_text);
    if (s.ok() && !o->svg.empty()) s = WriteFileAtomically(o->svg, svg_text);
    if (s.ok() && !o->json.empty()) {
      for (auto& summary : summaries) summary["data_warning"] = data_warning;
      s = WriteFileAtomically(o->json, summaries.dump(2) + "\n");
    }
    exit_code = s.ok() ? 0 : ReportError(s);
  });
}

void RegisterPlanCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "Plan batches with a strategy and write validated execution plans (JSON, weft.plan/v3).\n"
      "Example:\n  weft plan --model tiny-vlm --strategy megatron-1f1b --out plan.json\n"
      "  weft plan --model vlm-s --strategy zb-h1 --iterations 4 --out-dir out/plans");
  AddRunOptions(cmd, *o);
  cmd->add_option("--out", o->out, "plan file of the (single) iteration");
  cmd->add_option("--out-dir", o->out_dir, "one plan file per iteration: plan_<i>.json");
  cmd->add_flag("--world", o->world,
                "write one world plan per iteration: every rank of every DP replica, each "
                "gradient all-reduce naming its ranks (what a data-parallel runtime executes)");
  cmd->add_option("--emit-mimo-config", o->emit_mimo_config,
                  "also write the placement as a Megatron MIMO parallelism config (YAML; "
                  "module_parallelisms); strategies manual and megatron-mimo, others say why not");
  cmd->callback([o, &exit_code]() {
    if (o->out.empty() == o->out_dir.empty()) {
      exit_code = ReportError(InvalidArgumentError("plan: give exactly one of --out or --out-dir"));
      return;
    }
    if (!o->out.empty() && o->iterations != 1) {
      exit_code = ReportError(
          InvalidArgumentError("plan: --out writes one iteration; use --out-dir for --iterations > 1"));
      return;
    }
    // Output paths are checked before the work: a bad one fails now and writes nothing.
    if (Status s = !o->out.empty() ? CheckOutputFile(o->out, "--out")
                                   : CheckOutputDir(o->out_dir, "--out-dir");
        !s.ok()) {
      exit_code = ReportError(s);
      return;
    }
    if (!o->emit_mimo_config.empty()) {
      if (Status s = CheckOutputFile(o->emit_mimo_config, "--emit-mimo-config"); !s.ok()) {
        exit_code = ReportError(s);
        return;
      }
    }
    auto write_plan = [&](int64_t it, const planning::Planner& planner,
                          planning::PlannedIteration& p) -> Status {
      const auto& e = p.evaluation;
      const int n = static_cast<int>(p.plan.replicas.size());
      if (o->replica >= n) {
        return InvalidArgumentError("--replica = " + std::to_string(o->replica) +
                                    "; the plan has " + std::to_string(n) + " DP replicas");
      }
      // Every DP replica runs its own plan on its own data: one file each (FILE for one
      // replica; FILE's stem + ".r<k>" + extension for several), each with the simulated time
      // it re-simulates to.
      std::vector<int> replicas;
      if (o->replica >= 0) {
        replicas.push_back(o->replica);
      } else {
        for (int r = 0; r < n; ++r) replicas.push_back(r);
      }
      const std::filesystem::path base =
          !o->out.empty() ? std::filesystem::path(o->out)
                          : std::filesystem::path(o->out_dir) /
                                ("plan_" + std::to_string(it) + ".json");
      // Nothing is written unless every replica compiled and validated: each plan goes to a
      // staged file as soon as it is ready (a VLM-XL replica plan is ~15 MB), all are renamed
      // at the end. Replicas compile on --threads threads; the files do not depend on it.
      StagedFiles files;
      std::vector<std::string> lines;
      std::atomic<int64_t> staged_bytes{0};
      std::atomic<int> staged_files{0};
      const int to_write = o->world ? 1 : (o->replica >= 0 ? 1 : n);
      auto stage = [&](const std::string& path, const std::string& text) -> Status {
        WEFT_RETURN_IF_ERROR(files.Write(path, text));
        staged_bytes += static_cast<int64_t>(text.size());
        const int done = ++staged_files;
        o->progress(fmt::format("iteration {}: {} of {} plan files compiled and validated, "
                                "{:.1f} MB so far",
                                it, done, to_write, staged_bytes.load() / 1e6));
        return OkStatus();
      };
      if (o->world) {
        // One plan with every rank of every replica (what a data-parallel runtime runs).
        plan::ValidationReport report;
        WEFT_ASSIGN_OR_RETURN(plan::ExecutionPlan world, planner.CompileWorld(p, it, &report));
        WEFT_RETURN_IF_ERROR(stage(base.string(), plan::PlanToJson(world)));
        lines.push_back(base.string() + ": world plan of " + std::to_string(n) +
                        " replica graph(s): " + report.BriefReport() + "; simulated " +
                        std::to_string(e.iteration_time_s) + " s");
        replicas.clear();
      }
      const size_t first_line = lines.size();
      lines.resize(first_line + replicas.size());

      const Status compiled_all = ParallelFor(
          static_cast<int>(replicas.size()), o->budget.threads, [&](int i) -> Status {
            const int r = replicas[i];
            plan::ValidationReport report;
            WEFT_ASSIGN_OR_RETURN(plan::ExecutionPlan compiled,
                                  planner.Compile(p, r, it, &report));
            std::filesystem::path path = base;
            if (replicas.size() > 1) {
              path = base.parent_path() / (base.stem().string() + ".r" + std::to_string(r) +
                                           base.extension().string());
            }
            WEFT_RETURN_IF_ERROR(stage(path.string(), plan::PlanToJson(compiled)));
            lines[first_line + i] =
                path.string() + ": " + (n > 1 ? "replica " + std::to_string(r) + ": " : "") +
                report.BriefReport() + "; simulated " +
                std::to_string(e.timelines[r].iteration_time_s) + " s";
            return OkStatus();
          });
      WEFT_RETURN_IF_ERROR(compiled_all);
      ClearProgress();
      WEFT_RETURN_IF_ERROR(files.Commit());
      std::cout << "iteration " << it << ": " << staged_files.load() << " plan file"
                << (staged_files.load() == 1 ? "" : "s") << ", "
                << fmt::format("{:.1f}", staged_bytes.load() / 1e6) << " MB; simulated "
                << e.iteration_time_s << " s";
      if (n > 1) std::cout << " (slowest of " << n << " DP replicas: " << e.slowest_replica << ")";
      std::cout << "; planned in " << p.plan.plan_time_s * 1e3 << " ms (budget "
                << planning::DescribeBudget(planner.options().budget) << ")" << (p.plan.notes.empty() ? "" : "; " + p.plan.notes) << "\n";
      const size_t show = lines.size() <= 8 ? lines.size() : 4;
      for (size_t i = 0; i < show; ++i) std::cout << "  " << lines[i] << "\n";
      if (show < lines.size()) {
        std::cout << "  ... and " << lines.size() - show << " more replica plans\n";
      }
      return OkStatus();
    };
    // A stream of batches goes through the asynchronous planner service; one batch is planned
    // in the foreground.
    Status s = o->out_dir.empty() ? RunIterations(*o, nullptr, write_plan)
                                  : RunIterationsWithService(*o, write_plan);
    exit_code = s.ok() ? 0 : ReportError(s);
  });
}

}  // namespace weft::cli
