#pragma once
// CostModel: latency, FLOPs and memory of layers and model chunks of one TP rank, for every
// module kind and parallel configuration (SEMU's analytical core; docs/cost_model.md).
//
//   cost::CostModel model(cluster);
//   auto chunk = model.Chunk(vlm, vlm.FindModule("llm").value(), 0, 8,
//                            cost::TokenShape::Uniform(8192), parallel.For("llm"));
//   double step_s = chunk->forward_s + chunk->BackwardS(spec::Recompute::kSelective);
//
// Measured correction (cost/correction.h): `model.WithCorrection(c)` is a view of the same model
// whose Layer/Chunk times are multiplied by c's factors for their module, pass and shape bucket;
// it shares the model's cache of uncorrected layer costs, so making one per iteration is cheap
// (two shared pointers). A model without a correction gives the analytical (or measured-table)
// costs, exactly as before corrections existed.
//
// Thread-safety: all const methods may be called concurrently from several planner threads.
// Layer results are cached in a cache shared by a model, its copies and its corrected views,
// guarded by a mutex (lookups and inserts take it briefly; the cost itself is computed outside
// the lock, so two threads may compute the same entry once each — the results are identical).
// The cache lives as long as the last model sharing it. Copies and views are independent
// objects otherwise: a corrected view never changes the results of the model it came from.
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "weft/common/status.h"
#include "weft/cost/calibration.h"
#include "weft/cost/correction.h"
#include "weft/cost/latency.h"
#include "weft/cost/ops.h"
#include "weft/spec/cluster.h"
#include "weft/spec/model.h"
#include "weft/spec/parallel.h"

namespace weft::cost {

// Per-TP-rank totals shared by a layer and a chunk.
struct CostTotals {
  double forward_s = 0;
  double backward_input_s = 0;    // 0 when the module has no backward
  double backward_weight_s = 0;   // 0 when frozen
  double forward_flops = 0;       // matmul FLOPs of one TP rank (MFU convention)
  double backward_input_flops = 0;
  double backward_weight_flops = 0;
  // Activation bytes held from forward to backward on this rank, per Recompute (index = enum).
  std::array<double, spec::kNumRecompute> activation_bytes{};
  // Extra time each strategy adds to the backward (recomputation; 0 for kNone and kOffload).
  std::array<double, spec::kNumRecompute> recompute_s{};
  // kOffload: time to copy the activations one way over PCIe (0 if the cluster has no host link).
  double offload_transfer_s = 0;
  int64_t parameters = 0;          // parameters held by this rank
  double parameter_bytes = 0;      // bf16 weights
  double gradient_bytes = 0;       // trainable only (CostOptions::gradient_bytes_per_param)
  double optimizer_bytes = 0;      // trainable only, /DP under ZeRO-1

  double BackwardS(spec::Recompute r) const {
    return backward_input_s + backward_weight_s + recompute_s[static_cast<int>(r)];
  }
  double StateBytes() const { return parameter_bytes + gradient_bytes + optimizer_bytes; }
  double ActivationBytes(spec::Recompute r) const { return activation_bytes[static_cast<int>(r)]; }
  void Accumulate(const CostTotals& other, int times = 1);
};

struct LayerCost : CostTotals {
  int module = -1;
  int layer = -1;
  BackwardMode backward = BackwardMode::kFull;
  std::vector<Op> ops;  // per-op breakdown, all passes, latency filled
};

struct ChunkCost : CostTotals {
  int module = -1;
  int first_layer = 0;
  int num_layers = 0;
  BackwardMode backward = BackwardMode::kFull;
  spec::Recompute recompute = spec::Recompute::kNone;  // the strategy the caller asked about
  double output_activation_bytes = 0;          // sent to the next pipeline stage
  // Convenience for the caller's strategy.
  double BackwardS() const { return CostTotals::BackwardS(recompute); }
  double ActivationBytes() const { return CostTotals::ActivationBytes(recompute); }
};

// Bytes one pipeline stage sends to the next for this module's shape (bf16 hidden states):
// tokens × hidden × 2 / cp, and / tp under sequence parallelism. Projectors use output_size.
double OutputActivationBytes(const spec::ModuleSpec& module,
                             const TokenShape& shape,
                             const spec::ModuleParallel& parallel);

class CostModel {
 public:
  // `measured` (optional) replaces analytical forward latencies of matching (op name, TP); the
  // backward ops of a matched op are scaled by the same measured/analytical ratio.
  explicit CostModel(spec::ClusterSpec cluster,
                     CostOptions options = {},
                     MeasuredOpTable measured = {});
  // Copies share the cluster, options, measured table and cache (copying is cheap); a copy of a
  // corrected view keeps its correction. (No move: a moved-from model would have no cache.)
  CostModel(const CostModel&) = default;
  CostModel& operator=(const CostModel&) = default;

  const spec::ClusterSpec& cluster() const;
  const CostOptions& options() const;

  // A view of this model whose Layer and Chunk results carry `correction`'s factors (replacing
  // this model's correction, if any): forward_s and recompute_s × the forward factor,
  // backward_input_s and backward_weight_s × theirs, Layer's op latencies × their pass's factor;
  // FLOPs, bytes, parameters and offload_transfer_s unchanged. Shares this model's cache.
  // nullptr or an empty correction (dropped: correction() is then nullptr) = the uncorrected
  // model, what StageObservation's predicted_uncorrected_s is priced with. ModuleLayer (no
  // module index) is never corrected.
  CostModel WithCorrection(std::shared_ptr<const CostCorrection> correction) const;
  // The correction applied, or nullptr.
  const std::shared_ptr<const CostCorrection>& correction() const { return correction_; }
  // correction()->version(), or 0 without one (caches of corrected results key on it).
  uint64_t correction_version() const { return correction_ ? correction_->version() : 0; }

  // One layer of `model.modules[module]` on one TP rank. Layer 0 carries the module's input
  // extras, layer num_layers−1 its output extras. Backward passes follow BackwardModeOf.
  StatusOr<LayerCost> Layer(const spec::ModelSpec& model,
                            int module,
                            int layer,
                            const TokenShape& shape,
                            const spec::ModuleParallel& parallel) const;

  // Layers [first_layer, first_layer + num_layers) summed; the op lists are dropped. Corrected
  // after the sum (so a corrected chunk is exactly factor × the uncorrected chunk).
  StatusOr<ChunkCost> Chunk(const spec::ModelSpec& model,
                            int module,
                            int first_layer,
                            int num_layers,
                            const TokenShape& shape,
                            const spec::ModuleParallel& parallel,
                            spec::Recompute recompute = spec::Recompute::kNone) const;

  // Same as Layer, without a ModelSpec (for tests and tools): the caller states the mode.
  StatusOr<LayerCost> ModuleLayer(const spec::ModuleSpec& module,
                                  int layer,
                                  const TokenShape& shape,
                                  const spec::ModuleParallel& parallel,
                                  BackwardMode backward) const;

  // Statistics of the shared cache (for tests and benchmarks).
  int64_t cache_hits() const;
  int64_t cache_size() const;

 private:
  // The cache's entry of a layer (computed and added on a miss): its totals, without the op list;
  // its `layer` is the first layer that made it.
  StatusOr<std::shared_ptr<const LayerCost>> CachedLayer(const spec::ModuleSpec& module,
                                                         int layer, const TokenShape& shape,
                                                         const spec::ModuleParallel& parallel,
                                                         BackwardMode backward) const;
  StatusOr<LayerCost> ComputeLayer(const spec::ModuleSpec& module,
                                   int layer,
                                   const TokenShape& shape,
                                   const spec::ModuleParallel& parallel,
                                   BackwardMode backward) const;

  // What a model, its copies and its corrected views share: the inputs and the cache of
  // uncorrected layer costs.
  struct Shared {
    spec::ClusterSpec cluster;
    CostOptions options;
    MeasuredOpTable measured;
    std::mutex mutex;
    std::unordered_map<std::string, std::shared_ptr<const LayerCost>> cache;
    int64_t hits = 0;
  };

  std::shared_ptr<Shared> shared_;                    // never null
  std::shared_ptr<const CostCorrection> correction_;  // null = uncorrected
};

}  // namespace weft::cost
