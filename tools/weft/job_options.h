#pragma once
// The --model/--cluster/--gpus/--data/... flags shared by compare, simulate and plan.
#include <CLI/CLI.hpp>

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
                  "split, GPUs and schedule rule, run as strategy `manual`");
  cmd->add_flag("!--ignore-idle-gpus", job.charge_idle_gpus,
                "MFU and per-GPU figures over the GPUs the placement uses only (default: over "
                "every GPU of the cluster, idle ones included)");
}

}  // namespace weft::cli
