#pragma once
// Megatron MIMO parallelism configs as weft placements. A Megatron-Bridge MIMO job gives each
// module (the language module and every modality encoder) a pipeline grid of its own:
//
//   module_parallelisms:
//     vision: {tensor_model_parallel_size: 1, pipeline_model_parallel_size: 1,
//              context_parallel_size: 1, data_parallel_size: 8, rank_offset: 0}
//     llm:    {tensor_model_parallel_size: 4, pipeline_model_parallel_size: 2,
//              context_parallel_size: 1, data_parallel_size: 2, rank_offset: 8}
//   modules: {images: vision}   # optional: config name -> module of the weft model
//
// `llm` (or `language`, Megatron Core's key) is the model's language module (its first kLlm
// module); other names are modules of the model, or map to one through `modules:`. A module of
// the model the config does not name (a projector) is part of the named module next to it in the
// data flow (Megatron's modality submodule holds encoder and projection): the one that feeds it,
// else the one it feeds. Each module's layers are split evenly over its pipeline stages
// (Megatron's default; the first stages take one more layer when they do not divide), its ranks
// ordered TP, CP, DP, PP from fastest (rank_offset + (s·dp + r)·tp·cp is the first GPU of stage
// s, replica r), and the job runs Megatron's multimodule 1F1B.
//
// Checks (each failure is one line naming file, module, field and rule), Megatron-Bridge's:
// the language module is present, data_parallel_size is set, rank ranges do not overlap (gaps
// are allowed: idle GPUs), the world size max(rank_offset + tp·cp·pp·dp) is the job's GPU count,
// TP is a power of two, DP
// sizes divide one another, and an encoder's DP is at least the language module's; and weft's:
// the module exists, tp·cp fits in a node and no group straddles two nodes, TP divides the heads
// (spec::ParallelConfig::Validate), PP is at most the module's layers, experts are absent
// (expert_tensor_parallel_size 1).
//
// Thread-safety: pure functions.
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"
#include "weft/spec/cluster.h"
#include "weft/spec/model.h"
#include "weft/planning/placement_file.h"
#include "weft/planning/strategy.h"

namespace weft::planning {

struct MimoModuleParallelism {
  std::string name;    // key in module_parallelisms ("llm" for the language module)
  std::string module;  // module of the weft model it stands for
  int tp = 1, pp = 1, cp = 1;
  int dp = 0;  // 0 = unset (Megatron-Bridge refuses that in a heterogeneous deployment)
  int rank_offset = 0;
  int Ranks() const { return tp * cp * pp * dp; }
};

struct MimoConfig {
  std::string source;  // file name (for messages)
  std::vector<MimoModuleParallelism> modules;  // in the file's order
};

// The model's language module (the MIMO `llm`): its first kLlm module, else the last module in
// data-flow order.
int MimoLanguageModule(const spec::ModelSpec& model);

// True when `text` is YAML/JSON whose top level has `module_parallelisms` (a MIMO config rather
// than a `placement:` file).
bool LooksLikeMimoConfig(std::string_view text);

// Reads a MIMO config: syntax, fields, module names (no cross-module checks).
StatusOr<MimoConfig> ParseMimoConfigYaml(std::string_view text, std::string_view source,
                                         const spec::ModelSpec& model);
// Megatron-Bridge's checks and weft's (see above) against the model and the job's cluster.
Status CheckMimoConfig(const MimoConfig& config, const spec::ModelSpec& model,
                       const spec::ClusterSpec& cluster);
// The placement of a checked config: one ModulePlacement per model module (unnamed ones `on`
// their neighbour), even layer split, schedule 1F1B, the job's microbatches.
StatusOr<PlacementSpec> MimoConfigToPlacementSpec(const MimoConfig& config,
                                                  const spec::ModelSpec& model,
                                                  const spec::ClusterSpec& cluster);
// Parse + check + convert (what ReadPlacementFile does for a MIMO config).
StatusOr<PlacementSpec> ReadMimoConfigYaml(std::string_view text, std::string_view source,
                                           const spec::ModelSpec& model,
                                           const spec::ClusterSpec& cluster);

// The MIMO config of a placement, when one expresses it: every module (with the ones sharing
// its groups) on a rank range of its own, one chunk per stage, layers split evenly, ranks in
// Megatron's order, the whole cluster used, and Megatron-Bridge's checks passed. Else an
// InvalidArgument saying why not. The config is read back and must give the same groups and
// chunks (the round trip is checked here).
StatusOr<MimoConfig> MimoConfigOfPlacement(const Placement& placement,
                                           const spec::ModelSpec& model,
                                           const spec::ClusterSpec& cluster,
                                           const cost::CostModel& cost_model);
// YAML text of a config (with a `modules:` mapping where a name is not the module's own), with a
// comment header `header` (may be empty; one "# " line per line).
std::string MimoConfigToYaml(const MimoConfig& config, std::string_view header = "");

// "vision TP1·PP1·CP1·DP8 @0, llm TP4·PP2·CP1·DP2 @8" for plan descriptions.
std::string DescribeMimoConfig(const MimoConfig& config);

}  // namespace weft::planning
