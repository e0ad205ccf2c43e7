#pragma once
// The parallel-configuration space of one module, shared by DFLOP's optimizer
// (strategy/dflop/optimizer.h: the encoder's and the LLM's own groups) and the per-strategy
// tuner (strategy/tune.h: the backbone's TP/CP/PP/DP): which (tp, pp, dp) splits of a GPU count
// are legal, and the model-state bytes one GPU holds under them (DFLOP eqs. 4–5, the state term).
// Thread-safety: pure functions.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "weft/cost/latency.h"
#include "weft/spec/model.h"

namespace weft::planning {

// One module's tensor, pipeline and data parallel sizes.
struct ModuleLayout {
  int tp = 1, pp = 1, dp = 1;
  int Gpus() const { return tp * pp * dp; }
  bool operator==(const ModuleLayout&) const = default;
};

// Why enumerated choices were left out: rule -> count (e.g. "LLM pp > layers" -> 3).
using RejectCounts = std::map<std::string, int64_t>;

// TP divides the module's attention heads and its KV groups (or the KV groups divide TP).
bool TpFitsHeads(const spec::ModuleSpec& module, int tp);

// Every (tp, pp, dp) with tp·pp·dp = module_gpus, tp <= gpus_per_node (TP stays inside a node),
// TpFitsHeads and `tp_allowed(tp)` (null = any), pp <= the module's layers; ordered tp ascending,
// then pp ascending. Each TP refused is counted once under "<who> tp (heads / table)", each PP
// refused under "<who> pp > layers" (when `rejected` is given).
std::vector<ModuleLayout> EnumerateModuleLayouts(const spec::ModuleSpec& module,
                                                 int module_gpus,
                                                 int gpus_per_node,
                                                 const std::function<bool(int tp)>& tp_allowed,
                                                 std::string_view who,
                                                 RejectCounts* rejected);

// Model-state bytes per parameter on one GPU: 2 (bf16 weights), plus the gradient and optimizer
// bytes when the module trains, the optimizer's divided by DP under ZeRO-1.
double StateBytesPerParameter(const spec::ModuleSpec& module, int dp,
                              const cost::CostOptions& options);

// A lower bound of the model-state bytes the fullest GPU of a pipeline of `pp` stages holds for
// `module` at (tp, dp): every parameter (layers and embeddings) / (tp·pp) at
// StateBytesPerParameter. Any layer split puts at least the mean on some stage, and TP shards at
// most 1/tp of a layer on a rank, so no placement of the module on tp·pp GPUs per replica holds
// less; activations only add. Used to prune configurations without simulating them.
double StateBytesLowerBound(const spec::ModuleSpec& module, int tp, int pp, int dp,
                            const cost::CostOptions& options);

}  // namespace weft::planning
