#pragma once
// User placements (`--placement FILE.yaml`, strategy `manual`): per module its TP / CP / DP, the
// layer split over its pipeline stages, the GPUs it sits on (or the module it shares groups
// with) and one schedule rule for the whole job. What a user with a hand-tuned Megatron setup
// runs first: "how good is my setup, and what would weft do?". docs/placements.md has the format
// and two examples (presets/placements/).
//
//   placement:
//     schedule: 1f1b          # 1f1b | gpipe | interleaved | zb-h1
//     microbatches: 4         # per LLM replica (optional: the job's)
//     modules:
//       vision:    {dp: 2, layers: [24], first_gpu: 0}
//       projector: {on: vision}                 # one chunk on vision's last stage, same DP
//       llm:       {tp: 1, dp: 1, layers: [12, 12], first_gpu: 2}
//
// Group of module m, stage s, replica r: GPUs first_gpu + (s·dp + r)·tp·cp … (Megatron order:
// TP fastest, then DP, then PP), one group per replica (an unfolded Placement). A module `on`
// another shares that module's groups: its last stage when the host feeds it (a projector on
// its encoder), else its first stage (an encoder on the LLM); it takes the host's TP, CP and DP.
//
// Thread-safety: pure functions; the strategy is immutable.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"
#include "weft/sched/generators.h"
#include "weft/spec/cluster.h"
#include "weft/spec/model.h"
#include "weft/planning/strategy.h"

namespace weft::planning {

struct ModulePlacement {
  std::string module;
  int tp = 1, cp = 1, dp = 1;
  int virtual_stages = 1;   // chunks per pipeline group (interleaved)
  std::vector<int> layers;  // per chunk in layer order; pp · virtual_stages entries
  int first_gpu = -1;       // -1 with `on`
  std::string on;           // host module ("" = groups of its own)
  int PipelineSize() const { return static_cast<int>(layers.size()) / virtual_stages; }
};

struct PlacementSpec {
  std::string source;  // file name (for messages)
  sched::ScheduleKind schedule = sched::ScheduleKind::kOneFOneB;
  int num_microbatches = 0;  // 0 = the job's
  std::vector<ModulePlacement> modules;  // in the model's module order
};

// Reads and checks a placement file against the model and cluster. Every failure is one line
// naming the file, the field and the rule, e.g. "p.yaml: placement.modules.llm.layers sums to
// 30; module 'llm' has 32 layers".
StatusOr<PlacementSpec> ReadPlacementFile(const std::string& path, const spec::ModelSpec& model,
                                          const spec::ClusterSpec& cluster);
StatusOr<PlacementSpec> ParsePlacementYaml(std::string_view text, std::string_view source,
                                           const spec::ModelSpec& model,
                                           const spec::ClusterSpec& cluster);

// YAML text of a spec that ParsePlacementYaml reads back to the same spec (modules in the spec's
// order), with a comment header `header` (may be empty; one "# " line per line).
std::string PlacementSpecToYaml(const PlacementSpec& spec, std::string_view header = "");

// The unfolded Placement of a spec (groups, chunks with replicas, per-module parallel, gradient
// syncs and state bytes from the cost model).
StatusOr<Placement> BuildPlacement(const PlacementSpec& spec, const spec::ModelSpec& model,
                                   const spec::ClusterSpec& cluster,
                                   const cost::CostModel& cost_model);

}  // namespace weft::planning
