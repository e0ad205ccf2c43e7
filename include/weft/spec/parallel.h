#pragma once
// ParallelConfig: how each module is parallelized (TP/PP/DP/CP) and how a batch is microbatched.
#include <string>
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
};

struct ParallelConfig {
  std::vector<ModuleParallel> modules;  // one entry per module (missing => defaults)
  int num_microbatches = 1;             // per DP replica per iteration
  int global_batch_size = 0;            // sequences per iteration (0 = from data)

  // The entry for `module`, or defaults {module, 1, 1, 1, 1}.
  ModuleParallel For(std::string_view module) const;
  // Checks sizes > 0, TP divides heads / kv groups (or kv groups divide TP), modules exist,
  // and GPUs used <= cluster GPUs (when a cluster is given).
  Status Validate(const ModelSpec& model) const;
  Status Validate(const ModelSpec& model, const ClusterSpec& cluster) const;
};

}  // namespace weft::spec
