#pragma once
// ParallelConfig: how each module is parallelized (TP/PP/DP/CP) and how a batch is microbatched.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"
#include "weft/spec/cluster.h"
#include "weft/spec/model.h"

namespace weft::spec {

struct ModuleParallel {
  std::string module;        // module name in the ModelSpec
  int tp = 1;                // tensor parallel size
  int pp = 1;                // pipeline stages this module spans (strategies may override)
  int dp = 1;                // data parallel replicas
  int cp = 1;                // context parallel size
  bool sequence_parallel = true;  // Megatron SP: norms/dropout sharded, RS/AG instead of AR
  int Gpus() const { return tp * pp * dp * cp; }
  bool operator==(const ModuleParallel&) const = default;
};

// Where the user wrote entry `entry`'s `field` ("" = the entry as a whole), for messages: a
// reader that expands `all:` names "parallel.all.tp", not the expanded "parallel.modules[2].tp".
// Empty = "parallel.modules[<entry>]" (+ ".<field>").
using ParallelEntryPaths = std::function<std::string(size_t entry, std::string_view field)>;

struct ParallelConfig {
  std::vector<ModuleParallel> modules;  // one entry per module (missing => defaults)
  int num_microbatches = 1;             // per DP replica per iteration
  int global_batch_size = 0;            // sequences per iteration (0 = from data)

  // The entry for `module`, or defaults {module, 1, 1, 1, 1}.
  ModuleParallel For(std::string_view module) const;
  bool operator==(const ParallelConfig&) const = default;
  // Checks sizes > 0, TP divides heads / kv groups (or kv groups divide TP), modules exist,
  // and GPUs used <= cluster GPUs (when a cluster is given; each module's tp·pp·dp·cp must fit,
  // since modules may share GPUs (DIP) or use disjoint groups (Cornstarch)).
  // Messages: "parallel.modules[1].tp = 3; must divide num_attention_heads (32) of module 'llm'".
  // `paths`, when given, name where each entry (and field) was written.
  Status Validate(const ModelSpec& model, const ParallelEntryPaths& paths = {}) const;
  Status Validate(const ModelSpec& model, const ClusterSpec& cluster,
                  const ParallelEntryPaths& paths = {}) const;
  // The per-entry GPU check alone: each entry's tp·pp·dp·cp <= `total_gpus`; a failure says
  // "must fit " + `what` (e.g. "the 16 GPUs of cluster 'h800'").
  Status CheckGpusFit(int total_gpus, std::string_view what,
                      const ParallelEntryPaths& paths = {}) const;
};

}  // namespace weft::spec
