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

// A repeatable size flag taking N or MODULE=N (planning::ModuleSizes).
inline void AddModuleSizeOption(CLI::App* cmd, const std::string& names, const std::string& flag,
                                planning::ModuleSizes& sizes, const std::string& help) {
  const int max = planning::JobOptions::kMaxParallelSize;
  cmd->add_option_function<std::vector<std::string>>(
         names,
         [&sizes, flag, max](const std::vector<std::string>& values) {
           for (const auto& v : values) {
             // Checked by the validator below; applying cannot fail here.
             (void)planning::AddModuleSize(flag, v, max, sizes);
           }
         },
         help)
      ->check(CLI::Validator(
          [flag, max](std::string& text) {
            planning::ModuleSizes probe;
            Status s = planning::AddModuleSize(flag, text, max, probe);
            return s.ok() ? std::string() : std::string(s.message());
          },
          "N|MODULE=N", "module size"));
}

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
  AddNumberOption(cmd, "--pp,--pipeline-model-parallel-size", job.pipeline_size, 0,
                  JobOptions::kMaxPipelineSize, "pipeline ranks of the backbone",
                  "0 = the setup's");
  AddModuleSizeOption(cmd, "--tp,--tensor-model-parallel-size", "--tp", job.tensor_size,
                      "tensor parallel size of every module (N) or of one (MODULE=N, "
                      "repeatable); with N a module whose heads N does not divide takes the "
                      "largest TP below N that does");
  AddModuleSizeOption(cmd, "--cp,--context-parallel-size", "--cp", job.context_size,
                      "context parallel size of every module (N) or of one (MODULE=N, "
                      "repeatable)");
  AddNumberOption(cmd, "--dp", job.data_parallel_size, 0, JobOptions::kMaxParallelSize,
                  "data-parallel replicas of the backbone (every module shares them); "
                  "tp·cp·pp·dp must fit --gpus",
                  "0 = fill the GPUs");
  cmd->add_option("--data", job.data,
                  "data profile (weft presets --kind data lists them) or a data file (weft "
                  "JSONL, LLaVA JSON, COCO, CSV/TSV manifests)")
      ->check(InputFileCheck(kMaxDataFileBytes));
  AddNumberOption(cmd, "--sequences,--global-batch-size", job.sequences_per_batch, 0,
                  JobOptions::kMaxSequencesPerBatch, "packed sequences per global batch",
                  "0 = microbatches x DP; the derived value has the same limit");
  AddNumberOption(cmd, "--microbatches", job.num_microbatches, 0, JobOptions::kMaxMicrobatches,
                  "microbatches per DP replica", "0 = the setup's, else 2 x pp");
  AddNumberOption(cmd, "--micro-batch-size", job.micro_batch_sequences, 0,
                  JobOptions::kMaxSequencesPerBatch,
                  "packed sequences per microbatch (Megatron's name): microbatches = global "
                  "batch / (size x DP)",
                  "0 = --microbatches decides");
  cmd->add_option("--recompute-granularity", job.recompute,
                     "lowest uniform recompute level tried (none, selective, full; Megatron's "
                     "name): rule-based strategies take the first level from it that fits")
      ->check(CLI::IsMember({"none", "selective", "full"}));
  // The rest of a Megatron-LM argument list `weft tune --emit megatron` writes, so that the
  // list re-reads: checked, never silently dropped.
  cmd->add_flag("--sequence-parallel", job.sequence_parallel_flag,
                "Megatron's sequence parallelism (weft models it whenever TP > 1; accepted so a "
                "Megatron argument list re-reads)");
  cmd->add_option("--recompute-method", job.recompute_method,
                  "Megatron's recompute method; weft's full recompute is `uniform` over every "
                  "layer (with --recompute-num-layers 1)")
      ->check(CLI::IsMember({"uniform"}));
  cmd->add_option("--recompute-num-layers", job.recompute_num_layers,
                  "Megatron's layers per recompute group; weft models 1")
      ->check(CLI::Range(1, 1));
  AddNumberOption(cmd, "--decoder-first-pipeline-num-layers", job.first_stage_llm_layers, 0,
                  1 << 20,
                  "backbone layers the plan must put on the first pipeline rank (checked "
                  "against the strategy's plan, not applied)",
                  "0 = unchecked");
  AddNumberOption(cmd, "--decoder-last-pipeline-num-layers", job.last_stage_llm_layers, 0,
                  1 << 20,
                  "backbone layers the plan must put on the last pipeline rank (checked)",
                  "0 = unchecked");
  AddNumberOption(cmd, "--context,--seq-length", job.context_tokens, 0,
                  JobOptions::kMaxContextTokens,
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
