#pragma once
// CostModel: latency, FLOPs and memory of layers and model chunks of one TP rank, for every
// module kind and parallel configuration (SEMU's analytical core; docs/cost_model.md).
//
//   cost::CostModel model(cluster);
//   auto chunk = model.Chunk(vlm, vlm.FindModule("llm").value(), 0, 8,
//                            cost::TokenShape::Uniform(8192), parallel.For("llm"));
//   double step_s = chunk->forward_s + chunk->BackwardS(cost::Recompute::kSelective);
//
// Thread-safety: all const methods may be called concurrently from several planner threads.
// Layer results are cached in the model's own cache, guarded by a mutex (lookups and inserts
// take it briefly; the cost itself is computed outside the lock, so two threads may compute the
// same entry once each — the results are identical). The cache lives and dies with the object.
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
#include "weft/cost/latency.h"
#include "weft/cost/ops.h"
#include "weft/spec/cluster.h"
#include "weft/spec/model.h"
#include "weft/spec/parallel.h"

namespace weft::cost {

// What a layer keeps between its forward and backward (graph / sched choose one per stage):
//  kNone      — every activation the backward needs (Korthikanti's "no recompute").
//  kSelective — the attention core and the MLP activation function are recomputed in backward:
//               their outputs (attention output O, activation output) are not stored; without
//               flash attention this also drops the s² score tensors (Korthikanti's selective).
//  kFull      — only the layer input is stored; the whole forward is recomputed in backward.
//  kOffload   — activations are copied to host memory over PCIe and back for backward:
//               GPU bytes ≈ 0, transfer time at ClusterSpec::host_link_bandwidth_bytes_per_s.
enum class Recompute { kNone = 0, kSelective = 1, kFull = 2, kOffload = 3 };
inline constexpr int kNumRecompute = 4;
inline constexpr std::array<Recompute, kNumRecompute> kAllRecompute = {
    Recompute::kNone, Recompute::kSelective, Recompute::kFull, Recompute::kOffload};
std::string_view RecomputeName(Recompute r);  // "none", "selective", "full", "offload"
StatusOr<Recompute> ParseRecompute(std::string_view name);

// Per-TP-rank totals shared by a layer and a chunk.
struct CostTotals {
  double forward_s = 0;
  double backward_input_s = 0;    // 0 when the module has no backward
  double backward_weight_s = 0;   // 0 when frozen
  double forward_flops = 0;       // matmul FLOPs of one TP rank (MFU convention)
  double backward_input_flops = 0;
  double backward_weight_flops = 0;
  // Activation bytes held from forward to backward on this rank, per Recompute (index = enum).
  std::array<double, kNumRecompute> activation_bytes{};
  // Extra time each strategy adds to the backward (recomputation; 0 for kNone and kOffload).
  std::array<double, kNumRecompute> recompute_s{};
  // kOffload: time to copy the activations one way over PCIe (0 if the cluster has no host link).
  double offload_transfer_s = 0;
  int64_t parameters = 0;          // parameters held by this rank
  double parameter_bytes = 0;      // bf16 weights
  double gradient_bytes = 0;       // trainable only (CostOptions::gradient_bytes_per_param)
  double optimizer_bytes = 0;      // trainable only, /DP under ZeRO-1

  double BackwardS(Recompute r) const {
    return backward_input_s + backward_weight_s + recompute_s[static_cast<int>(r)];
  }
  double StateBytes() const { return parameter_bytes + gradient_bytes + optimizer_bytes; }
  double ActivationBytes(Recompute r) const { return activation_bytes[static_cast<int>(r)]; }
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
  Recompute recompute = Recompute::kNone;     // the strategy the caller asked about
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

  const spec::ClusterSpec& cluster() const { return cluster_; }
  const CostOptions& options() const { return options_; }

  // One layer of `model.modules[module]` on one TP rank. Layer 0 carries the module's input
  // extras, layer num_layers−1 its output extras. Backward passes follow BackwardModeOf.
  StatusOr<LayerCost> Layer(const spec::ModelSpec& model,
                            int module,
                            int layer,
                            const TokenShape& shape,
                            const spec::ModuleParallel& parallel) const;

  // Layers [first_layer, first_layer + num_layers) summed; the op lists are dropped.
  StatusOr<ChunkCost> Chunk(const spec::ModelSpec& model,
                            int module,
                            int first_layer,
                            int num_layers,
                            const TokenShape& shape,
                            const spec::ModuleParallel& parallel,
                            Recompute recompute = Recompute::kNone) const;

  // Same as Layer, without a ModelSpec (for tests and tools): the caller states the mode.
  StatusOr<LayerCost> ModuleLayer(const spec::ModuleSpec& module,
                                  int layer,
                                  const TokenShape& shape,
                                  const spec::ModuleParallel& parallel,
                                  BackwardMode backward) const;

  // Cache statistics (for tests and benchmarks).
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

  spec::ClusterSpec cluster_;
  CostOptions options_;
  MeasuredOpTable measured_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<std::string, std::shared_ptr<const LayerCost>> cache_;
  mutable int64_t hits_ = 0;
};

}  // namespace weft::cost
