#include "weft/cost/cost_model.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

namespace weft::cost {

void CostTotals::Accumulate(const CostTotals& o, int times) {
  const double t = times;
  forward_s += t * o.forward_s;
  backward_input_s += t * o.backward_input_s;
  backward_weight_s += t * o.backward_weight_s;
  forward_flops += t * o.forward_flops;
  backward_input_flops += t * o.backward_input_flops;
  backward_weight_flops += t * o.backward_weight_flops;
  for (int i = 0; i < spec::kNumRecompute; ++i) {
    activation_bytes[i] += t * o.activation_bytes[i];
    recompute_s[i] += t * o.recompute_s[i];
  }
  offload_transfer_s += t * o.offload_transfer_s;
  parameters += static_cast<int64_t>(times) * o.parameters;
  parameter_bytes += t * o.parameter_bytes;
  gradient_bytes += t * o.gradient_bytes;
  optimizer_bytes += t * o.optimizer_bytes;
}

double OutputActivationBytes(const spec::ModuleSpec& module, const TokenShape& shape,
                             const spec::ModuleParallel& parallel) {
  const double width =
      module.kind == spec::ModuleKind::kMlpProjector ? module.output_size : module.hidden_size;
  double bytes = 2.0 * static_cast<double>(shape.tokens) * width / std::max(1, parallel.cp);
  // An audio encoder that pools its output (Qwen2-Audio) hands on 1 / output_pool of its rows.
  if (module.kind == spec::ModuleKind::kAudioEncoder) bytes /= std::max(1, module.output_pool);
  if (parallel.sequence_parallel && parallel.tp > 1) bytes /= parallel.tp;
  return bytes;
}

CostModel::CostModel(spec::ClusterSpec cluster, CostOptions options, MeasuredOpTable measured)
    : shared_(std::make_shared<Shared>()) {
  shared_->cluster = std::move(cluster);
  shared_->options = std::move(options);
  shared_->measured = std::move(measured);
}

const spec::ClusterSpec& CostModel::cluster() const { return shared_->cluster; }
const CostOptions& CostModel::options() const { return shared_->options; }

CostModel CostModel::WithCorrection(std::shared_ptr<const CostCorrection> correction) const {
  CostModel view = *this;
  view.correction_ =
      correction != nullptr && !correction->empty() ? std::move(correction) : nullptr;
  return view;
}

namespace internal {
namespace {

// The bytes of scalars one after the other (fixed width per field: the key needs no
// separators), written into a string sized once.
template <typename... T>
std::string PackBytes(const T&... values) {
  static_assert(((std::is_trivially_copyable_v<T> && std::is_scalar_v<T>) && ...));
  std::string key((sizeof(T) + ... + 0), '\0');
  char* out = key.data();
  ((std::memcpy(out, &values, sizeof(T)), out += sizeof(T)), ...);
  return key;
}

// Everything a layer's cost depends on, as a string (the cache key): the fields' bytes, one
// after the other (a formatted key cost more than the cached lookup it saves). Modules are keyed
// by their architecture, not their name, so identical layers of different models share entries.
std::string CacheKey(const spec::ModuleSpec& m, int layer, const TokenShape& s,
                     const spec::ModuleParallel& p, BackwardMode backward) {
  const int position = (layer == 0 ? 1 : 0) | (layer == m.num_layers - 1 ? 2 : 0);
  return PackBytes(
      m.kind, m.frozen, m.num_layers, m.hidden_size, m.ffn_hidden_size, m.num_attention_heads,
      m.num_kv_groups, m.gated_mlp, m.causal_attention, m.qkv_bias, m.rms_norm, m.vocab_size,
      m.tied_embeddings, m.patch_size, m.image_size_px, m.in_channels, m.temporal_patch,
      m.text_condition_hidden, m.mel_bins, m.conv_downsample, m.max_source_positions, m.input_size,
      m.output_size, position, backward, s.tokens, s.instances, s.context_tokens, p.tp,
      s.sum_squared_tokens, p.cp, p.sequence_parallel, p.dp,
      layer == 0 || layer == m.num_layers - 1 ? layer : -1, m.activation, m.spatial_merge,
      m.head_dim, m.linear_bias, m.qk_norm, m.learned_position_embeddings, m.shared_adaln,
      m.attention_window_px, m.WindowedLayer(layer), s.window_sum_squared_tokens, m.output_pool);
}

double FactorOf(const PassFactors& f, spec::Pass pass) {
  switch (pass) {
    case spec::Pass::kForward:
      return f.forward;
    case spec::Pass::kBackwardInput:
      return f.backward_input;
    case spec::Pass::kBackwardWeight:
      return f.backward_weight;
    case spec::Pass::kBackward:
      break;  // an Op is never kBackward (Op::pass)
  }
  return 1.0;
}

// A measured correction scales compute times only; recomputation replays the forward.
void ApplyFactors(const PassFactors& f, CostTotals& totals) {
  totals.forward_s *= f.forward;
  totals.backward_input_s *= f.backward_input;
  totals.backward_weight_s *= f.backward_weight;
  for (double& s : totals.recompute_s) s *= f.forward;
}

}  // namespace
}  // namespace internal

StatusOr<LayerCost> CostModel::ComputeLayer(const spec::ModuleSpec& module, int layer,
                                            const TokenShape& shape,
                                            const spec::ModuleParallel& parallel,
                                            BackwardMode backward) const {
  const spec::ClusterSpec& cluster = shared_->cluster;
  const CostOptions& options = shared_->options;
  const MeasuredOpTable& measured = shared_->measured;
  WEFT_RETURN_IF_ERROR(options.Validate());
  OpBuildContext ctx{.shape = shape,
                     .parallel = parallel,
                     .backward = backward,
                     .gpus_per_node = std::max(1, cluster.gpus_per_node),
                     .cp_distribution = options.cp_distribution};
  WEFT_ASSIGN_OR_RETURN(std::vector<Op> ops, BuildLayerOps(module, layer, ctx));
  LayerCost cost;
  cost.layer = layer;
  cost.backward = backward;
  const int tp = std::max(1, parallel.tp);
  const double tokens_per_rank = static_cast<double>(shape.tokens) / std::max(1, parallel.cp);
  // Measured forward latencies first, so backward ops of the same name can reuse the ratio.
  std::vector<std::pair<std::string, double>> measured_ratio;
  auto ratio_of = [&](const std::string& name) -> std::optional<double> {
    for (const auto& [n, r] : measured_ratio) {
      if (n == name) return r;
    }
    return std::nullopt;
  };
  for (Op& op : ops) {
    if (op.kind == OpKind::kAttention && op.pass != spec::Pass::kForward) {
      op.hardware_flops_factor = options.attention_backward_hardware_factor;
    }
    const double analytical_s = OpLatency(op, cluster, options);
    op.latency_s = analytical_s;
    if (measured.empty() || op.kind == OpKind::kCollective) continue;
    if (op.pass == spec::Pass::kForward) {
      if (auto m = measured.Lookup(op.name, tp, tokens_per_rank); m.has_value()) {
        op.latency_s = *m;
        op.measured = true;
        if (!ratio_of(op.name) && analytical_s > 0) measured_ratio.emplace_back(op.name, *m / analytical_s);
      }
    }
  }
  if (!measured_ratio.empty()) {
    for (Op& op : ops) {
      if (op.pass == spec::Pass::kForward || op.kind == OpKind::kCollective) continue;
      if (auto r = ratio_of(op.name); r.has_value()) {
        op.latency_s *= *r;
        op.measured = true;
      }
    }
  }
  double selective_s = 0, full_s = 0;
  for (const Op& op : ops) {
    switch (op.pass) {
      case spec::Pass::kForward:
        cost.forward_s += op.latency_s;
        cost.forward_flops += op.flops;
        if (op.recomputed_by_selective) selective_s += op.latency_s;
        if (op.recomputed_by_full) full_s += op.latency_s;
        break;
      case spec::Pass::kBackwardInput:
        cost.backward_input_s += op.latency_s;
        cost.backward_input_flops += op.flops;
        break;
      case spec::Pass::kBackwardWeight:
        cost.backward_weight_s += op.latency_s;
        cost.backward_weight_flops += op.flops;
        break;
      case spec::Pass::kBackward:  // BuildLayerOps splits every backward op (Op::pass)
        break;
    }
  }
  WEFT_ASSIGN_OR_RETURN(
      ActivationFootprint act,
      LayerActivationBytes(module, layer, ctx, options.flash_attention, options.dropout_masks));
  cost.activation_bytes = {act.none_bytes, act.selective_bytes, act.full_bytes, 0.0};
  if (backward != BackwardMode::kNone) {
    cost.recompute_s = {0.0, selective_s, full_s, 0.0};
    if (cluster.host_link_bandwidth_bytes_per_s > 0) {
      cost.offload_transfer_s = act.none_bytes / cluster.host_link_bandwidth_bytes_per_s;
    } else {
      // No host link: offloading is impossible; keep the activations on the GPU.
      cost.activation_bytes[static_cast<int>(spec::Recompute::kOffload)] = act.none_bytes;
    }
  }
  WEFT_ASSIGN_OR_RETURN(cost.parameters, LayerParametersPerRank(module, layer, parallel));
  const double params = static_cast<double>(cost.parameters);
  cost.parameter_bytes = 2.0 * params;
  if (!module.frozen) {
    cost.gradient_bytes = options.gradient_bytes_per_param * params;
    const double shards = options.zero1 ? std::max(1, parallel.dp) : 1;
    cost.optimizer_bytes = options.optimizer_bytes_per_param * params / shards;
  }
  cost.ops = std::move(ops);
  return cost;
}

StatusOr<std::shared_ptr<const LayerCost>> CostModel::CachedLayer(
    const spec::ModuleSpec& module, int layer, const TokenShape& shape,
    const spec::ModuleParallel& parallel, BackwardMode backward) const {
  const std::string key = internal::CacheKey(module, layer, shape, parallel, backward);
  Shared& shared = *shared_;
  {
    std::lock_guard<std::mutex> lock(shared.mutex);
    auto it = shared.cache.find(key);
    if (it != shared.cache.end()) {
      ++shared.hits;
      return it->second;
    }
  }
  // Computed outside the lock: other threads keep looking up while this one works. Kept
  // without its op list: Chunk reads the totals only, and the op lists of every shape an
  // iteration prices would hold ~1 MB per VLM-XL pp16 replica.
  WEFT_ASSIGN_OR_RETURN(LayerCost cost, ComputeLayer(module, layer, shape, parallel, backward));
  cost.ops = {};
  auto computed = std::make_shared<const LayerCost>(std::move(cost));
  {
    std::lock_guard<std::mutex> lock(shared.mutex);
    shared.cache.emplace(key, computed);
  }
  return computed;
}

StatusOr<LayerCost> CostModel::ModuleLayer(const spec::ModuleSpec& module, int layer,
                                           const TokenShape& shape,
                                           const spec::ModuleParallel& parallel,
                                           BackwardMode backward) const {
  // Not from the cache, which keeps no op lists (a cold path: tables and tools).
  return ComputeLayer(module, layer, shape, parallel, backward);
}

StatusOr<LayerCost> CostModel::Layer(const spec::ModelSpec& model, int module, int layer,
                                     const TokenShape& shape,
                                     const spec::ModuleParallel& parallel) const {
  WEFT_ASSIGN_OR_RETURN(BackwardMode backward, BackwardModeOf(model, module));
  WEFT_ASSIGN_OR_RETURN(LayerCost cost,
                        ModuleLayer(model.modules[module], layer, shape, parallel, backward));
  cost.module = module;
  if (correction_ != nullptr) {
    const PassFactors f = correction_->Factors(module, shape);
    internal::ApplyFactors(f, cost);
    for (Op& op : cost.ops) op.latency_s *= internal::FactorOf(f, op.pass);
  }
  return cost;
}

StatusOr<ChunkCost> CostModel::Chunk(const spec::ModelSpec& model,
                                     int module,
                                     int first_layer,
                                     int num_layers,
                                     const TokenShape& shape,
                                     const spec::ModuleParallel& parallel,
                                     spec::Recompute recompute) const {
  WEFT_ASSIGN_OR_RETURN(BackwardMode backward, BackwardModeOf(model, module));
  const spec::ModuleSpec& m = model.modules[module];
  if (num_layers < 1 || first_layer < 0 || first_layer + num_layers > m.num_layers) {
    return InvalidArgumentError(fmt::format(
        "chunk layers [{}, {}) of module '{}'; must be a non-empty range within [0, {})",
        first_layer, first_layer + num_layers, m.name, m.num_layers));
  }
  ChunkCost chunk;
  chunk.module = module;
  chunk.first_layer = first_layer;
  chunk.num_layers = num_layers;
  chunk.backward = backward;
  chunk.recompute = recompute;
  // At most three distinct layers: the first, a middle one (repeated) and the last.
  const int last_layer = first_layer + num_layers - 1;
  int middle_count = num_layers;
  std::set<int> ends;  // the module's first and last layers carry extras
  if (first_layer == 0) ends.insert(0);
  if (last_layer == m.num_layers - 1) ends.insert(last_layer);
  // The totals only: the cached entries are read in place (their op lists are not copied).
  for (int layer : ends) {
    WEFT_ASSIGN_OR_RETURN(auto cost, CachedLayer(m, layer, shape, parallel, backward));
    chunk.Accumulate(*cost);
    --middle_count;
  }
  if (middle_count > 0) {
    // Layers that are neither the module's first nor its last are identical, except that with
    // window attention some attend within windows and the rest (full_attention_layers) to the
    // whole unit: one representative layer of each kind, times its count.
    int windowed = 0, windowed_layer = -1, full = 0, full_layer = -1;
    for (int layer = first_layer; layer <= last_layer; ++layer) {
      if (ends.count(layer) != 0) continue;
      if (m.WindowedLayer(layer)) {
        ++windowed;
        if (windowed_layer < 0) windowed_layer = layer;
      } else {
        ++full;
        if (full_layer < 0) full_layer = layer;
      }
    }
    for (const std::pair<int, int>& group :
         {std::pair{windowed, windowed_layer}, std::pair{full, full_layer}}) {
      if (group.first == 0) continue;
      WEFT_ASSIGN_OR_RETURN(auto cost, CachedLayer(m, group.second, shape, parallel, backward));
      chunk.Accumulate(*cost, group.first);
    }
  }
  chunk.output_activation_bytes = OutputActivationBytes(m, shape, parallel);
  if (correction_ != nullptr) internal::ApplyFactors(correction_->Factors(module, shape), chunk);
  return chunk;
}

int64_t CostModel::cache_hits() const {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  return shared_->hits;
}

int64_t CostModel::cache_size() const {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  return static_cast<int64_t>(shared_->cache.size());
}

}  // namespace weft::cost
