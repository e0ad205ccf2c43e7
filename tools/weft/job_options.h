#pragma once
// The --model/--cluster/--gpus/--data/... flags shared by compare, simulate and plan.
#include <CLI/CLI.hpp>
#include <cmath>
#include <string>

#include "cli_common.h"
#include "weft/common/text.h"
#include "weft/strategy/compare.h"

namespace weft::cli {

// Seeds: any unsigned 64-bit integer; a negative one is refused (it would wrap to 2^64 - 1).
inline constexpr uint64_t kMaxSeed = ~uint64_t{0};

inline void AddJobOptions(CLI::App* cmd, planning::JobOptions& job) {
  using planning::JobOptions;
  cmd->add_option("--model", job.model,
                  "model preset name, YAML/JSON spec, Hugging Face config.json or a "
                  "checkpoint directory holding one")
      ->capture_default_str()
      ->check(ModelInputCheck());
  cmd->add_option("--freeze", job.freeze,
                  "module of the model to train frozen (repeatable, e.g. --freeze vision); adds "
                  "to the spec's frozen modules");
  cmd->add_option("--cluster", job.cluster,
                  "cluster preset name or file (default: the model's setup cluster)")
      ->check(InputFileCheck(kMaxSpecFileBytes));
  AddNumberOption(cmd, "--gpus", job.gpus, 0, JobOptions::kMaxGpus, "total GPUs",
                  "0 = the model's setup");
  AddNumberOption(cmd, "--pp", job.pipeline_size, 0, JobOptions::kMaxPipelineSize,
                  "pipeline ranks of the backbone", "0 = the setup's");
  cmd->add_option("--data", job.data,
                  "data profile (weft presets --kind data lists them) or a data file (weft "
                  "JSONL, LLaVA JSON, COCO, CSV/TSV manifests)")
      ->check(InputFileCheck(kMaxDataFileBytes));
  AddNumberOption(cmd, "--sequences", job.sequences_per_batch, 0, JobOptions::kMaxSequencesPerBatch,
                  "packed sequences per global batch",
                  "0 = microbatches x DP; the derived value has the same limit");
  AddNumberOption(cmd, "--microbatches", job.num_microbatches, 0, JobOptions::kMaxMicrobatches,
                  "microbatches per DP replica", "0 = the setup's, else 2 x pp");
  AddNumberOption(cmd, "--context", job.context_tokens, 0, JobOptions::kMaxContextTokens,
                  "packed sequence length in LLM tokens", "0 = the setup's, else 8192");
  AddNumberOption(cmd, "--seed", job.seed, uint64_t{0}, kMaxSeed, "seed of the synthetic data")
      ->capture_default_str();
  cmd->add_option("--placement", job.placement,
                  "user placement file (YAML; docs/placements.md): per-module TP/CP/DP, layer "
                  "split, GPUs and schedule rule, or a Megatron MIMO parallelism config "
                  "(module_parallelisms); run as strategy `manual`")
      ->check(InputFileCheck(kMaxSpecFileBytes));
  AddNumberOption(cmd, "--pool-bytes", job.pool_bytes, int64_t{0}, JobOptions::kMaxPoolBytes,
                  "a streaming plan's pool capacity in bytes (flowtrain)",
                  "0 = the strategy's sizing rule");
  cmd->add_flag("!--ignore-idle-gpus", job.charge_idle_gpus,
                "MFU and per-GPU figures over the GPUs the placement uses only (default: over "
                "every GPU of the cluster, idle ones included)");
}

// Iterations to simulate (compare, simulate, plan): each plans and simulates one global batch.
inline constexpr int kMaxIterations = 10000;

// The planning budget of search strategies (DIP). Deterministic by default: a work budget, so the
// same command with the same inputs prints the same numbers; --budget-ms opts into a wall-clock
// budget (faster to hit a deadline, different plans run to run).
inline constexpr int64_t kDefaultWorkBudget =
    100;  // dip: 0.37 s (vlm-m) to 1.30 s (vlm-s); docs/cli.md
struct BudgetFlags {
  double budget_ms = 0;  // > 0: wall clock
  int64_t budget_work = kDefaultWorkBudget;
  int threads = 1;  // planning threads (DIP: DP replicas in parallel)
};

inline void AddBudgetOptions(CLI::App* cmd, BudgetFlags& b) {
  AddNumberOption(cmd, "--budget-work", b.budget_work, int64_t{1},
                  planning::PlanBudget::kMaxWorkBudget,
                  "deterministic planning budget per iteration of search strategies, in work "
                  "units (MCTS iterations, shared by the DP replicas: each replica's search gets "
                  "budget / DP, at least 1; same inputs, same plans)")
      ->capture_default_str();
  AddNumberOption(cmd, "--budget-ms", b.budget_ms, 0.0,
                  planning::PlanBudget::kMaxTimeBudgetS * 1000,
                  "wall-clock planning budget per iteration instead (plans then vary run to run)",
                  "0 = use --budget-work");
  AddNumberOption(cmd, "--threads", b.threads, 1, planning::PlanBudget::kMaxThreads,
                  "planning threads of search strategies (dip: DP replicas planned in parallel; "
                  "under --budget-work the plan does not depend on it); plan: replica plans "
                  "also compile in parallel")
      ->capture_default_str();
}

// The PlanBudget of the flags, or InvalidArgument naming the flag.
inline StatusOr<planning::PlanBudget> MakePlanBudget(const BudgetFlags& b) {
  // The flags' ranges are checked at parse time; callers that fill BudgetFlags directly get
  // the same rules here.
  if (std::string e =
          CheckRealText(NumberForMessage(b.budget_ms), 0,
                        planning::PlanBudget::kMaxTimeBudgetS * 1000, "0 = use --budget-work");
      !e.empty()) {
    return InvalidArgumentError("--budget-ms: " + e);
  }
  if (std::string e = CheckIntegerText(std::to_string(b.budget_work), 1,
                                       planning::PlanBudget::kMaxWorkBudget, "");
      !e.empty()) {
    return InvalidArgumentError("--budget-work: " + e);
  }
  if (std::string e =
          CheckIntegerText(std::to_string(b.threads), 1, planning::PlanBudget::kMaxThreads, "");
      !e.empty()) {
    return InvalidArgumentError("--threads: " + e);
  }
  planning::PlanBudget p;
  p.threads = b.threads;
  if (b.budget_ms > 0) {
    p.time_budget_s = b.budget_ms / 1000.0;
    p.work_budget = 0;
  } else {
    p.time_budget_s = 0;
    p.work_budget = b.budget_work;
  }
  return p;
}

}  // namespace weft::cli
