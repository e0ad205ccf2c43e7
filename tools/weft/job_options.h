#pragma once
// The --model/--cluster/--gpus/--data/... flags shared by compare, simulate and plan.
#include <CLI/CLI.hpp>

#include <cmath>
#include <string>

#include "weft/strategy/compare.h"

namespace weft::cli {

inline void AddJobOptions(CLI::App* cmd, strategy::JobOptions& job) {
  cmd->add_option("--model", job.model, "model preset name or YAML/JSON file")
      ->capture_default_str();
  cmd->add_option("--cluster", job.cluster,
                  "cluster preset name or file (default: the model's setup cluster)");
  cmd->add_option("--gpus", job.gpus, "total GPUs (default: the model's setup)");
  cmd->add_option("--pp", job.pipeline_size, "pipeline ranks of the backbone (default: setup's)");
  cmd->add_option("--data", job.data,
                  "data profile (laion obelics coco-llava video audio mixed rise-and-fall) or a "
                  "data file (weft JSONL, LLaVA JSON, COCO, CSV/TSV manifests)");
  cmd->add_option("--sequences", job.sequences_per_batch,
                  "packed sequences per global batch (default: microbatches x DP)");
  cmd->add_option("--microbatches", job.num_microbatches, "microbatches per DP replica");
  cmd->add_option("--context", job.context_tokens, "packed sequence length in LLM tokens");
  cmd->add_option("--seed", job.seed, "seed of the synthetic data")->capture_default_str();
  cmd->add_option("--placement", job.placement,
                  "user placement file (YAML; docs/placements.md): per-module TP/CP/DP, layer "
                  "split, GPUs and schedule rule, or a Megatron MIMO parallelism config "
                  "(module_parallelisms); run as strategy `manual`");
  cmd->add_flag("!--ignore-idle-gpus", job.charge_idle_gpus,
                "MFU and per-GPU figures over the GPUs the placement uses only (default: over "
                "every GPU of the cluster, idle ones included)");
}

// The planning budget of search strategies (DIP). Deterministic by default: a work budget, so the
// same command with the same inputs prints the same numbers; --budget-ms opts into a wall-clock
// budget (faster to hit a deadline, different plans run to run).
inline constexpr int64_t kDefaultWorkBudget = 100;  // dip: 0.37 s (vlm-m) to 1.30 s (vlm-s); docs/cli.md
struct BudgetFlags {
  double budget_ms = 0;                   // > 0: wall clock
  int64_t budget_work = kDefaultWorkBudget;
  int threads = 1;                        // planning threads (DIP: DP replicas in parallel)
};

inline void AddBudgetOptions(CLI::App* cmd, BudgetFlags& b) {
  cmd->add_option("--budget-work", b.budget_work,
                  "deterministic planning budget per iteration of search strategies, in work "
                  "units (MCTS iterations per replica search; same inputs, same plans)")
      ->capture_default_str();
  cmd->add_option("--budget-ms", b.budget_ms,
                  "wall-clock planning budget per iteration instead (plans then vary run to run)");
  cmd->add_option("--threads", b.threads,
                  "planning threads of search strategies (dip: DP replicas planned in parallel; "
                  "under --budget-work the plan does not depend on it), 1..256")
      ->capture_default_str();
}

// The PlanBudget of the flags, or InvalidArgument naming the flag.
inline StatusOr<strategy::PlanBudget> MakePlanBudget(const BudgetFlags& b) {
  if (!std::isfinite(b.budget_ms) || b.budget_ms < 0 || b.budget_ms > 3.6e6) {
    return InvalidArgumentError("--budget-ms = " + std::to_string(b.budget_ms) +
                                "; must be in [0, 3600000] (0 = use --budget-work)");
  }
  if (b.budget_work < 1 || b.budget_work > 100'000'000) {
    return InvalidArgumentError("--budget-work = " + std::to_string(b.budget_work) +
                                "; must be in [1, 100000000]");
  }
  if (b.threads < 1 || b.threads > 256) {
    return InvalidArgumentError("--threads = " + std::to_string(b.threads) +
                                "; must be in [1, 256]");
  }
  strategy::PlanBudget p;
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
