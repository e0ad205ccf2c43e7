#include "weft/cost/ops.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "weft/cost/cp_attention.h"

namespace weft::cost {

TokenShape TokenShape::Uniform(int64_t tokens_per_instance, int instances) {
  TokenShape shape;
  shape.instances = instances;
  shape.tokens = tokens_per_instance * instances;
  shape.sum_squared_tokens =
      static_cast<double>(tokens_per_instance) * static_cast<double>(tokens_per_instance) * instances;
  return shape;
}

TokenShape TokenShape::FromSegments(std::span<const int64_t> segment_tokens) {
  TokenShape shape;
  shape.instances = std::max<int>(1, static_cast<int>(segment_tokens.size()));
  shape.tokens = 0;
  shape.sum_squared_tokens = 0;
  for (int64_t s : segment_tokens) {
    shape.tokens += s;
    shape.sum_squared_tokens += static_cast<double>(s) * static_cast<double>(s);
  }
  return shape;
}

Status TokenShape::Validate() const {
  if (tokens < 0) return InvalidArgumentError(fmt::format("shape.tokens = {}; must be >= 0", tokens));
  if (instances < 1) {
    return InvalidArgumentError(fmt::format("shape.instances = {}; must be >= 1", instances));
  }
  if (context_tokens < 0) {
    return InvalidArgumentError(
        fmt::format("shape.context_tokens = {}; must be >= 0", context_tokens));
  }
  const double t = static_cast<double>(tokens);
  // Σs² lies in [Σs, (Σs)²] for positive integer segments (1e-9 slack for rounding).
  if (tokens > 0 && (sum_squared_tokens < t * (1 - 1e-9) || sum_squared_tokens > t * t * (1 + 1e-9))) {
    return InvalidArgumentError(fmt::format(
        "shape.sum_squared_tokens = {}; must lie in [tokens, tokens²] = [{}, {}]",
        sum_squared_tokens, t, t * t));
  }
  if (!(window_sum_squared_tokens >= 0) ||
      window_sum_squared_tokens > sum_squared_tokens * (1 + 1e-9)) {
    return InvalidArgumentError(fmt::format(
        "shape.window_sum_squared_tokens = {}; must lie in [0, sum_squared_tokens] = [0, {}]",
        window_sum_squared_tokens, sum_squared_tokens));
  }
  if (tokens == 0 && sum_squared_tokens != 0) {
    return InvalidArgumentError(fmt::format(
        "shape.sum_squared_tokens = {}; must be 0 when tokens = 0", sum_squared_tokens));
  }
  return OkStatus();
}

double TokenShape::AttentionSumSquared(const spec::ModuleSpec& module, int layer) const {
  if (!module.WindowedLayer(layer)) return sum_squared_tokens;
  if (window_sum_squared_tokens > 0) return window_sum_squared_tokens;
  return std::min(sum_squared_tokens,
                  static_cast<double>(tokens) * static_cast<double>(module.WindowPatches()));
}

std::string_view BackwardModeName(BackwardMode mode) {
  switch (mode) {
    case BackwardMode::kFull: return "full";
    case BackwardMode::kInputOnly: return "input_only";
    case BackwardMode::kNone: return "none";
  }
  return "?";
}

StatusOr<BackwardMode> BackwardModeOf(const spec::ModelSpec& model, int module) {
  const int n = static_cast<int>(model.modules.size());
  if (module < 0 || module >= n) {
    return InvalidArgumentError(
        fmt::format("module = {}; must index model.modules (size {})", module, n));
  }
  if (!model.modules[module].frozen) return BackwardMode::kFull;
  // Walk the edges upstream (the DAG is small; a visited set guards against bad input cycles).
  std::vector<bool> visited(n, false);
  std::vector<int> stack = {module};
  visited[module] = true;
  while (!stack.empty()) {
    const int current = stack.back();
    stack.pop_back();
    for (const spec::ModuleEdge& edge : model.edges) {
      if (edge.to != model.modules[current].name) continue;
      for (int i = 0; i < n; ++i) {
        if (visited[i] || model.modules[i].name != edge.from) continue;
        if (!model.modules[i].frozen) return BackwardMode::kInputOnly;
        visited[i] = true;
        stack.push_back(i);
      }
    }
  }
  return BackwardMode::kNone;
}

std::string_view OpKindName(OpKind kind) {
  switch (kind) {
    case OpKind::kGemm: return "gemm";
    case OpKind::kAttention: return "attention";
    case OpKind::kMemory: return "memory";
    case OpKind::kCollective: return "collective";
  }
  return "?";
}

std::string_view CollectiveKindName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce: return "all_reduce";
    case CollectiveKind::kAllGather: return "all_gather";
    case CollectiveKind::kReduceScatter: return "reduce_scatter";
  }
  return "?";
}

namespace internal {
namespace {

constexpr double kBf16Bytes = 2;

// Shapes of one module on one rank, derived once.
struct RankDims {
  double tokens = 0;        // Tc: tokens on this CP rank
  double norm_tokens = 0;   // Tn: Tc / tp under sequence parallelism, else Tc
  double sum_sq = 0;        // Σs² / cp
  double hidden = 0;
  double head_dim = 0;
  double q_width = 0;       // (heads / tp) · head_dim
  double kv_width = 0;      // (kv heads on this rank) · head_dim
  double ffn = 0;           // ffn_hidden / tp
  int tp = 1;
  int cp = 1;
  bool sp = false;
  bool tp_inter_node = false;
  bool cp_inter_node = false;
  double cp_imbalance = 1;  // worst CP rank's attention work / mean (1 when cp = 1)
};

bool IsTransformer(spec::ModuleKind kind) { return kind != spec::ModuleKind::kMlpProjector; }

int NumLayersOf(const spec::ModuleSpec& m) { return m.num_layers; }

Status CheckLayer(const spec::ModuleSpec& m, int layer, const spec::ModuleParallel& par) {
  if (m.num_layers < 1) {
    return InvalidArgumentError(
        fmt::format("module '{}'.num_layers = {}; must be >= 1", m.name, m.num_layers));
  }
  if (layer < 0 || layer >= NumLayersOf(m)) {
    return InvalidArgumentError(fmt::format("layer = {}; must lie in [0, {}) for module '{}'",
                                            layer, m.num_layers, m.name));
  }
  if (par.tp < 1 || par.cp < 1) {
    return InvalidArgumentError(fmt::format(
        "parallel[{}].tp = {}, cp = {}; both must be >= 1", m.name, par.tp, par.cp));
  }
  if (m.hidden_size <= 0) {
    return InvalidArgumentError(
        fmt::format("module '{}'.hidden_size = {}; must be > 0", m.name, m.hidden_size));
  }
  if (IsTransformer(m.kind)) {
    if (m.num_attention_heads <= 0 || m.HeadDim() <= 0) {
      return InvalidArgumentError(fmt::format(
          "module '{}'.num_attention_heads = {}, head_dim = {}; both must be > 0", m.name,
          m.num_attention_heads, m.HeadDim()));
    }
    if (m.num_attention_heads % par.tp != 0) {
      return InvalidArgumentError(
          fmt::format("parallel[{}].tp = {}; must divide num_attention_heads ({})", m.name, par.tp,
                      m.num_attention_heads));
    }
    if (m.ffn_hidden_size <= 0) {
      return InvalidArgumentError(
          fmt::format("module '{}'.ffn_hidden_size = {}; must be > 0", m.name, m.ffn_hidden_size));
    }
    if (m.kind == spec::ModuleKind::kLlm && m.vocab_size <= 0) {
      return InvalidArgumentError(
          fmt::format("module '{}'.vocab_size = {}; must be > 0", m.name, m.vocab_size));
    }
  } else {
    if (m.input_size <= 0 || m.output_size <= 0) {
      return InvalidArgumentError(fmt::format(
          "module '{}'.input_size = {}, output_size = {}; projectors need both > 0", m.name,
          m.input_size, m.output_size));
    }
  }
  return OkStatus();
}

RankDims Dims(const spec::ModuleSpec& m, int layer, const OpBuildContext& ctx) {
  RankDims d;
  d.tp = ctx.parallel.tp;
  d.cp = ctx.parallel.cp;
  d.sp = ctx.parallel.sequence_parallel && d.tp > 1;
  d.tokens = static_cast<double>(ctx.shape.tokens) / d.cp;
  d.norm_tokens = d.sp ? d.tokens / d.tp : d.tokens;
  // A windowed layer (Qwen2.5-VL's ViT) attends within its windows: Σw², not Σs².
  d.sum_sq = ctx.shape.AttentionSumSquared(m, layer) / d.cp;
  d.hidden = m.hidden_size;
  d.tp_inter_node = d.tp > ctx.gpus_per_node;
  d.cp_inter_node = d.tp * d.cp > ctx.gpus_per_node;
  if (IsTransformer(m.kind)) {
    const int heads = m.num_attention_heads;
    const int kv = m.num_kv_groups > 0 ? m.num_kv_groups : heads;
    d.head_dim = m.HeadDim();
    d.q_width = (static_cast<double>(heads) / d.tp) * d.head_dim;
    // KV heads are split over TP; with fewer KV groups than ranks each rank holds one replica.
    d.kv_width = std::ceil(static_cast<double>(kv) / d.tp) * d.head_dim;
    d.ffn = static_cast<double>(m.ffn_hidden_size) / d.tp;
    if (d.cp > 1) {
      d.cp_imbalance = CpAttentionImbalance(ctx.shape, d.cp, m.causal_attention, ctx.cp_distribution);
    }
  }
  return d;
}

// Appends the ops of every pass that the backward mode allows.
class Builder {
 public:
  Builder(const OpBuildContext& ctx, const RankDims& dims) : ctx_(ctx), d_(dims) {}

  // C[m×n] = A[m×k]·B[k×n]. Backward-input dX = dY·Wᵀ, backward-weight dW = Xᵀ·dY, each with the
  // forward's FLOPs. `input_grad` = false for ops fed by data (pixels, mel frames).
  void Gemm(const std::string& name, double m, double n, double k, bool extra = false,
            bool input_grad = true) {
    if (m <= 0 || n <= 0 || k <= 0) return;
    const double flops = 2 * m * n * k;
    const double bytes = kBf16Bytes * (m * k + k * n + m * n);
    Push(GemmOp(name, spec::Pass::kForward, m, n, k, flops, bytes, extra));
    if (ctx_.backward != BackwardMode::kNone && input_grad) {
      Push(GemmOp(name, spec::Pass::kBackwardInput, m, k, n, flops, bytes, extra));
    }
    if (ctx_.backward == BackwardMode::kFull) {
      Push(GemmOp(name, spec::Pass::kBackwardWeight, k, n, m, flops, bytes, extra));
    }
  }

  // A memory-bound kernel moving `bytes` forward; its backward moves bwd_factor × bytes.
  void Memory(const std::string& name, MemoryClass cls, double bytes, double bwd_factor = 2.0,
              bool extra = false, bool selective = false) {
    if (bytes <= 0) return;
    Op op;
    op.name = name;
    op.kind = OpKind::kMemory;
    op.memory_class = cls;
    op.hbm_bytes = bytes;
    op.recomputed_by_selective = selective;
    op.recomputed_by_full = !extra;
    op.pass = spec::Pass::kForward;
    Push(op);
    if (ctx_.backward != BackwardMode::kNone && bwd_factor > 0) {
      op.pass = spec::Pass::kBackwardInput;
      op.hbm_bytes = bytes * bwd_factor;
      Push(op);
    }
  }

  // Weight-gradient-only memory op (embedding scatter-add).
  void MemoryWeightGrad(const std::string& name, MemoryClass cls, double bytes) {
    if (ctx_.backward != BackwardMode::kFull || bytes <= 0) return;
    Op op;
    op.name = name;
    op.kind = OpKind::kMemory;
    op.memory_class = cls;
    op.hbm_bytes = bytes;
    op.pass = spec::Pass::kBackwardWeight;
    op.recomputed_by_full = false;
    Push(op);
  }

  // Fused attention core; backward (all input-gradient) has 2× the model FLOPs.
  void Attention(const std::string& name, double flops, double fwd_bytes, double bwd_bytes,
                 double mean_tokens, double segment_heads, double bwd_hw_factor) {
    if (flops <= 0) return;
    Op op;
    op.name = name;
    op.kind = OpKind::kAttention;
    op.flops = flops;
    op.hbm_bytes = fwd_bytes;
    op.attention_mean_tokens = mean_tokens;
    op.attention_segment_heads = segment_heads;
    op.recomputed_by_selective = true;
    op.pass = spec::Pass::kForward;
    Push(op);
    if (ctx_.backward != BackwardMode::kNone) {
      op.pass = spec::Pass::kBackwardInput;
      op.flops = 2 * flops;
      op.hbm_bytes = bwd_bytes;
      op.hardware_flops_factor = bwd_hw_factor;
      Push(op);
    }
  }

  // A collective in forward and its conjugate in backward-input.
  void Collective(const std::string& name, std::optional<CollectiveKind> fwd,
                  std::optional<CollectiveKind> bwd, double bytes, int group, bool inter_node,
                  bool extra = false) {
    if (group <= 1 || bytes <= 0) return;
    Op op;
    op.name = name;
    op.kind = OpKind::kCollective;
    op.net_bytes = bytes;
    op.group_size = group;
    op.inter_node = inter_node;
    op.recomputed_by_full = !extra;
    if (fwd) {
      op.pass = spec::Pass::kForward;
      op.collective = *fwd;
      Push(op);
    }
    if (bwd && ctx_.backward != BackwardMode::kNone) {
      op.pass = spec::Pass::kBackwardInput;
      op.collective = *bwd;
      Push(op);
    }
  }

  // Megatron's "f" (before a TP block) and "g" (after it) conjugate operators on a [Tc × width]
  // tensor. Without SP: f = identity / all-reduce, g = all-reduce / identity. With SP:
  // f = all-gather / reduce-scatter, g = reduce-scatter / all-gather.
  void TpEnter(const std::string& name, double width, bool extra = false) {
    const double bytes = kBf16Bytes * d_.tokens * width;
    if (d_.sp) {
      Collective(name, CollectiveKind::kAllGather, CollectiveKind::kReduceScatter, bytes, d_.tp,
                 d_.tp_inter_node, extra);
    } else {
      Collective(name, std::nullopt, CollectiveKind::kAllReduce, bytes, d_.tp, d_.tp_inter_node,
                 extra);
    }
  }
  void TpExit(const std::string& name, double width, bool extra = false) {
    const double bytes = kBf16Bytes * d_.tokens * width;
    if (d_.sp) {
      Collective(name, CollectiveKind::kReduceScatter, CollectiveKind::kAllGather, bytes, d_.tp,
                 d_.tp_inter_node, extra);
    } else {
      Collective(name, CollectiveKind::kAllReduce, std::nullopt, bytes, d_.tp, d_.tp_inter_node,
                 extra);
    }
  }

  std::vector<Op> Take() { return std::move(ops_); }

 private:
  static Op GemmOp(const std::string& name,
                   spec::Pass pass,
                   double m,
                   double n,
                   double k,
                   double flops,
                   double bytes,
                   bool extra) {
    Op op;
    op.name = name;
    op.pass = pass;
    op.kind = OpKind::kGemm;
    op.gemm_m = m;
    op.gemm_n = n;
    op.gemm_k = k;
    op.flops = flops;
    op.hbm_bytes = bytes;
    op.recomputed_by_full = !extra;
    return op;
  }
  void Push(Op op) { ops_.push_back(std::move(op)); }

  const OpBuildContext& ctx_;
  const RankDims& d_;
  std::vector<Op> ops_;
};

// Width of a ViT / DiT patch (input features of the patch-embedding GEMM).
double PatchFeatures(const spec::ModuleSpec& m) {
  return static_cast<double>(m.in_channels) * m.patch_size * m.patch_size *
         std::max(1, m.temporal_patch);
}

void AddSelfAttentionBlock(const spec::ModuleSpec& m, const RankDims& d, const OpBuildContext& ctx,
                           Builder& b, double bwd_hw_factor) {
  const double h = d.hidden;
  b.Memory("input_norm", MemoryClass::kNorm, 2 * kBf16Bytes * d.norm_tokens * h);
  b.TpEnter("tp_attn_enter", h);
  b.Gemm("qkv_proj", d.tokens, d.q_width + 2 * d.kv_width, h);
  if (m.qk_norm) {
    b.Memory("qk_norm", MemoryClass::kNorm, 2 * kBf16Bytes * d.tokens * (d.q_width + d.kv_width));
  }
  if (m.kind == spec::ModuleKind::kLlm) {
    b.Memory("rope", MemoryClass::kRope, 2 * kBf16Bytes * d.tokens * (d.q_width + d.kv_width));
  }
  if (d.cp > 1) {
    // Context parallelism: every rank needs the K/V of all ranks (ring exchange ≈ all-gather);
    // the gradients of K/V flow back (≈ reduce-scatter).
    const double kv_bytes = kBf16Bytes * static_cast<double>(ctx.shape.tokens) * 2 * d.kv_width;
    b.Collective("cp_kv_exchange", CollectiveKind::kAllGather, CollectiveKind::kReduceScatter,
                 kv_bytes, d.cp, d.cp_inter_node);
  }
  const double causal = m.causal_attention ? 0.5 : 1.0;
  // Under CP the group waits for its most loaded rank (d.cp_imbalance = max/mean, 1 when cp = 1).
  const double flops =
      4.0 * d.sum_sq * d.head_dim * (d.q_width / d.head_dim) * causal * d.cp_imbalance;
  const double qkv_bytes = kBf16Bytes * d.tokens * (d.q_width + 2 * d.kv_width);
  const double o_bytes = kBf16Bytes * d.tokens * d.q_width;
  const double fwd_bytes = qkv_bytes + o_bytes;
  const double bwd_bytes = 2 * qkv_bytes + 2 * o_bytes;  // read Q,K,V,O,dO; write dQ,dK,dV
  const double total = static_cast<double>(ctx.shape.tokens);
  const double segments = d.sum_sq > 0 ? total * total / (d.sum_sq * d.cp) : 0;
  b.Attention("attention", flops, fwd_bytes, bwd_bytes, total > 0 ? d.sum_sq * d.cp / total : 0,
              segments * d.q_width / d.head_dim, bwd_hw_factor);
  b.Gemm("out_proj", d.tokens, h, d.q_width);
  b.TpExit("tp_attn_exit", h);
  b.Memory("residual_add", MemoryClass::kResidual, 3 * kBf16Bytes * d.norm_tokens * h, 1.0);
}

void AddMlpBlock(const spec::ModuleSpec& m, const RankDims& d, Builder& b) {
  const double h = d.hidden;
  const double up_width = (m.gated_mlp ? 2.0 : 1.0) * d.ffn;
  b.Memory("post_attn_norm", MemoryClass::kNorm, 2 * kBf16Bytes * d.norm_tokens * h);
  b.TpEnter("tp_mlp_enter", h);
  b.Gemm("mlp_up", d.tokens, up_width, h);
  // Gated: read gate and up halves, write one; plain: read and write one.
  const double act_bytes = kBf16Bytes * d.tokens * d.ffn * (m.gated_mlp ? 3.0 : 2.0);
  b.Memory("mlp_act", MemoryClass::kActivation, act_bytes, 2.0, false, /*selective=*/true);
  b.Gemm("mlp_down", d.tokens, h, d.ffn);
  b.TpExit("tp_mlp_exit", h);
  b.Memory("residual_add", MemoryClass::kResidual, 3 * kBf16Bytes * d.norm_tokens * h, 1.0);
}

void AddDitExtras(const spec::ModuleSpec& m, const RankDims& d, const OpBuildContext& ctx,
                  Builder& b, double bwd_hw_factor) {
  const double h = d.hidden;
  // adaLN: the conditioning vector of each instance -> shift/scale/gate ×2 (replicated over TP),
  // then modulation of both norm outputs and the gated residuals.
  // adaLN-single shares one modulation MLP (costed in the first layer) and adds a 6h table.
  if (!m.shared_adaln) b.Gemm("adaln_modulation", ctx.shape.instances, 6 * h, h);
  b.Memory("adaln_modulate", MemoryClass::kOther, 2 * 2 * kBf16Bytes * d.norm_tokens * h);
  if (m.text_condition_hidden > 0) {
    const double context = static_cast<double>(ctx.shape.context_tokens);
    const double per_instance_context = context / std::max(1, ctx.shape.instances);
    b.Memory("cross_norm", MemoryClass::kNorm, 2 * kBf16Bytes * d.norm_tokens * h);
    b.TpEnter("tp_cross_enter", h);
    b.Gemm("cross_q_proj", d.tokens, d.q_width, h);
    b.Gemm("cross_kv_proj", context, 2 * d.q_width, m.text_condition_hidden);
    const double flops = 4.0 * d.tokens * per_instance_context * d.q_width;
    const double fwd_bytes = kBf16Bytes * (2 * d.tokens * d.q_width + 2 * context * d.q_width);
    b.Attention("cross_attention", flops, fwd_bytes, 2 * fwd_bytes, per_instance_context,
                ctx.shape.instances * d.q_width / d.head_dim, bwd_hw_factor);
    b.Gemm("cross_out_proj", d.tokens, h, d.q_width);
    b.TpExit("tp_cross_exit", h);
    b.Memory("residual_add", MemoryClass::kResidual, 3 * kBf16Bytes * d.norm_tokens * h, 1.0);
  }
}

void AddFirstLayerExtras(const spec::ModuleSpec& m, const RankDims& d, const OpBuildContext& ctx,
                         Builder& b) {
  const double h = d.hidden;
  switch (m.kind) {
    case spec::ModuleKind::kLlm: {
      // Vocab-parallel embedding: each rank looks up its vocabulary slice, then the partial
      // embeddings are summed (all-reduce, or reduce-scatter into the SP layout).
      b.Memory("embedding", MemoryClass::kEmbedding, 2 * kBf16Bytes * d.tokens * h, 0.0, true);
      b.MemoryWeightGrad("embedding_grad", MemoryClass::kEmbedding, 2 * kBf16Bytes * d.tokens * h);
      if (d.tp > 1) {
        b.Collective("tp_embedding_reduce",
                     d.sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce,
                     std::nullopt, kBf16Bytes * d.tokens * h, d.tp, d.tp_inter_node, true);
      }
      break;
    }
    case spec::ModuleKind::kVit:
      b.Gemm("patch_embed", d.tokens, h, PatchFeatures(m), true, /*input_grad=*/false);
      b.Memory("pos_embed_add", MemoryClass::kResidual, 3 * kBf16Bytes * d.tokens * h, 1.0, true);
      break;
    case spec::ModuleKind::kAudioEncoder:
      // Whisper stem: conv1d(mel -> h, k=3) on 2·T frames, GELU, conv1d(h -> h, k=3, stride 2).
      b.Gemm("conv1", d.tokens * m.conv_downsample, h, 3.0 * m.mel_bins, true, false);
      b.Memory("conv_act", MemoryClass::kActivation,
               2 * kBf16Bytes * d.tokens * m.conv_downsample * h, 2.0, true);
      b.Gemm("conv2", d.tokens, h, 3.0 * h, true, false);
      b.Memory("pos_embed_add", MemoryClass::kResidual, 3 * kBf16Bytes * d.tokens * h, 1.0, true);
      break;
    case spec::ModuleKind::kDit:
      b.Gemm("patch_embed", d.tokens, h, PatchFeatures(m), true, false);
      b.Gemm("timestep_mlp", ctx.shape.instances, h, 256, true, false);
      b.Gemm("timestep_mlp", ctx.shape.instances, h, h, true, false);
      if (m.shared_adaln) b.Gemm("adaln_modulation", ctx.shape.instances, 6 * h, h, true, false);
      break;
    case spec::ModuleKind::kMlpProjector:
      break;
  }
}

void AddLastLayerExtras(const spec::ModuleSpec& m, const RankDims& d, Builder& b) {
  const double h = d.hidden;
  switch (m.kind) {
    case spec::ModuleKind::kLlm: {
      b.Memory("final_norm", MemoryClass::kNorm, 2 * kBf16Bytes * d.norm_tokens * h, 2.0, true);
      b.TpEnter("tp_head_enter", h, true);
      const double vocab = static_cast<double>(m.vocab_size) / d.tp;
      b.Gemm("lm_head", d.tokens, vocab, h, true);
      // Vocab-parallel cross entropy on fp32 logits: read bf16 logits, write and re-read fp32.
      b.Memory("cross_entropy", MemoryClass::kOther, 10.0 * d.tokens * vocab, 1.0, true);
      break;
    }
    case spec::ModuleKind::kVit:
    case spec::ModuleKind::kAudioEncoder:
      b.Memory("final_norm", MemoryClass::kNorm, 2 * kBf16Bytes * d.norm_tokens * h, 2.0, true);
      break;
    case spec::ModuleKind::kDit:
      b.Memory("final_norm", MemoryClass::kNorm, 2 * kBf16Bytes * d.norm_tokens * h, 2.0, true);
      b.Gemm("final_linear", d.norm_tokens, PatchFeatures(m), h, true);
      break;
    case spec::ModuleKind::kMlpProjector:
      break;
  }
}

// Projector linear `layer`: input_size -> hidden -> ... -> output_size. One linear: replicated;
// several: first column-parallel, last row-parallel (+ all-reduce), middle replicated.
struct ProjectorLinear {
  double in = 0, out = 0;
  double in_rank = 0, out_rank = 0;  // widths on this rank
  bool column = false, row = false, activation = false;
};

ProjectorLinear ProjectorLayer(const spec::ModuleSpec& m, int layer, int tp) {
  ProjectorLinear p;
  const int last = m.num_layers - 1;
  // input_size -> ffn_hidden_size -> ... -> output_size (spec: hidden_size is the output width).
  const double mid = m.ffn_hidden_size > 0 ? m.ffn_hidden_size : m.output_size;
  p.in = layer == 0 ? m.input_size : mid;
  p.out = layer == last ? m.output_size : mid;
  p.in_rank = p.in;
  p.out_rank = p.out;
  p.activation = layer != last;
  if (m.num_layers > 1 && tp > 1) {
    if (layer == 0) {
      p.column = true;
      p.out_rank = p.out / tp;
    } else if (layer == last) {
      p.row = true;
      p.in_rank = p.in / tp;
    }
  }
  return p;
}

std::vector<Op> BuildProjectorOps(const spec::ModuleSpec& m, int layer, const RankDims& d,
                                  Builder& b) {
  const ProjectorLinear p = ProjectorLayer(m, layer, d.tp);
  if (p.column) b.TpEnter("tp_proj_enter", p.in);
  b.Gemm("proj_linear", d.tokens, p.out_rank, p.in_rank);
  if (p.row) b.TpExit("tp_proj_exit", p.out);
  if (p.activation) {
    b.Memory("proj_act", MemoryClass::kActivation, 2 * kBf16Bytes * d.tokens * p.out_rank, 2.0,
             false, true);
  }
  return b.Take();
}

}  // namespace
}  // namespace internal

StatusOr<std::vector<Op>> BuildLayerOps(const spec::ModuleSpec& module, int layer,
                                        const OpBuildContext& ctx) {
  using namespace internal;
  WEFT_RETURN_IF_ERROR(ctx.shape.Validate());
  WEFT_RETURN_IF_ERROR(CheckLayer(module, layer, ctx.parallel));
  const RankDims d = Dims(module, layer, ctx);
  Builder b(ctx, d);
  // Hardware factor of the flash-attention backward (see CostOptions); the builder records the
  // default and the cost model may override it per op.
  constexpr double kBwdHw = 1.0;
  if (module.kind == spec::ModuleKind::kMlpProjector) return BuildProjectorOps(module, layer, d, b);
  const LayerPosition pos{.first = layer == 0, .last = layer == module.num_layers - 1};
  if (pos.first) AddFirstLayerExtras(module, d, ctx, b);
  if (module.kind == spec::ModuleKind::kDit) {
    AddDitExtras(module, d, ctx, b, kBwdHw);
  }
  AddSelfAttentionBlock(module, d, ctx, b, kBwdHw);
  AddMlpBlock(module, d, b);
  if (pos.last) AddLastLayerExtras(module, d, b);
  return b.Take();
}

StatusOr<ActivationFootprint> LayerActivationBytes(const spec::ModuleSpec& m, int layer,
                                                   const OpBuildContext& ctx, bool flash_attention,
                                                   bool dropout_masks) {
  using namespace internal;
  WEFT_RETURN_IF_ERROR(ctx.shape.Validate());
  WEFT_RETURN_IF_ERROR(CheckLayer(m, layer, ctx.parallel));
  ActivationFootprint out;
  if (ctx.backward == BackwardMode::kNone) return out;  // nothing is ever differentiated
  const RankDims d = Dims(m, layer, ctx);
  const double h = d.hidden;
  const double mask = dropout_masks ? 1.0 : 0.0;
  const double layer_input = kBf16Bytes * d.norm_tokens * h;
  if (m.kind == spec::ModuleKind::kMlpProjector) {
    const ProjectorLinear p = ProjectorLayer(m, layer, d.tp);
    const double input = kBf16Bytes * d.tokens * p.in_rank / (p.column && d.sp ? d.tp : 1);
    const double act = p.activation ? kBf16Bytes * d.tokens * p.out_rank : 0;
    out.none_bytes = input + act;
    out.selective_bytes = input + act;  // the activation input is the next linear's input
    out.full_bytes = input;
    return out;
  }
  // Attention block (Korthikanti: 11sbh + 5as²b without SP, per TP rank generalized).
  double attn = 0;
  attn += 2 * layer_input;                                      // norm input, QKV input
  attn += kBf16Bytes * d.tokens * (d.q_width + 2 * d.kv_width);  // Q, K, V
  const double attn_out = kBf16Bytes * d.tokens * d.q_width;    // O (out-proj input)
  attn += mask * d.norm_tokens * h;                              // dropout mask
  const double scores = flash_attention ? 0.0 : 5.0 * (d.q_width / d.head_dim) * d.sum_sq;
  // MLP block (19sbh for ffn = 4h, plain GELU).
  const double up_width = (m.gated_mlp ? 2.0 : 1.0) * d.ffn;
  double mlp = 2 * layer_input;                       // norm input, up input
  mlp += kBf16Bytes * d.tokens * up_width;            // activation input
  const double act_out = kBf16Bytes * d.tokens * d.ffn;  // down-proj input
  mlp += mask * d.norm_tokens * h;
  double extra_block = 0;
  if (m.kind == spec::ModuleKind::kDit) {
    extra_block += 2 * layer_input;  // modulated norm outputs
    if (m.text_condition_hidden > 0) {
      const double context = static_cast<double>(ctx.shape.context_tokens);
      extra_block += 2 * layer_input + mask * d.norm_tokens * h;
      extra_block += 2 * kBf16Bytes * d.tokens * d.q_width;  // Q and O
      extra_block += kBf16Bytes * context * (m.text_condition_hidden + 2 * d.q_width);
    }
  }
  // Extras kept under every strategy.
  double kept = 0;
  if (layer == 0) {
    if (m.kind == spec::ModuleKind::kVit || m.kind == spec::ModuleKind::kDit) {
      kept += kBf16Bytes * d.tokens * PatchFeatures(m);
    } else if (m.kind == spec::ModuleKind::kAudioEncoder) {
      kept += kBf16Bytes * d.tokens * (m.conv_downsample * (3.0 * m.mel_bins + 2 * h) + 3.0 * h);
    }
  }
  if (layer == m.num_layers - 1) {
    kept += layer_input;  // final norm input
    if (m.kind == spec::ModuleKind::kLlm) {
      kept += kBf16Bytes * d.norm_tokens * h;                              // LM-head input
      kept += 4.0 * d.tokens * static_cast<double>(m.vocab_size) / d.tp;  // fp32 softmax
    } else if (m.kind == spec::ModuleKind::kDit) {
      kept += kBf16Bytes * d.norm_tokens * h;
    }
  }
  out.none_bytes = attn + attn_out + scores + mlp + act_out + extra_block + kept;
  out.selective_bytes = attn + mlp + extra_block + kept;
  out.full_bytes = layer_input + kept;
  return out;
}

StatusOr<int64_t> LayerParametersPerRank(const spec::ModuleSpec& m, int layer,
                                         const spec::ModuleParallel& parallel) {
  using namespace internal;
  WEFT_RETURN_IF_ERROR(CheckLayer(m, layer, parallel));
  const int64_t tp = parallel.tp;
  const int64_t h = m.hidden_size;
  const bool bias = m.linear_bias;
  if (m.kind == spec::ModuleKind::kMlpProjector) {
    const ProjectorLinear p = ProjectorLayer(m, layer, parallel.tp);
    return static_cast<int64_t>(p.in_rank * p.out_rank + (bias ? p.out_rank : 0));
  }
  const int64_t heads = m.num_attention_heads;
  const int64_t kv = m.num_kv_groups > 0 ? m.num_kv_groups : heads;
  const int64_t d = m.HeadDim();
  const int64_t q = heads / tp * d;
  const int64_t kv_rank = (kv + tp - 1) / tp * d;
  const int64_t ffn = m.ffn_hidden_size / tp;
  const int64_t norm = m.rms_norm ? h : 2 * h;
  int64_t p = 0;
  p += h * (q + 2 * kv_rank) + (m.qkv_bias ? q + 2 * kv_rank : 0);
  p += q * h + (bias ? h : 0);
  p += h * ffn * (m.gated_mlp ? 2 : 1) + (bias ? ffn * (m.gated_mlp ? 2 : 1) : 0);
  p += ffn * h + (bias ? h : 0);
  p += 2 * norm;
  if (m.qk_norm) p += (m.rms_norm ? 1 : 2) * 2 * d;
  if (m.kind == spec::ModuleKind::kDit) {
    p += m.shared_adaln ? 6 * h : h * 6 * h + 6 * h;  // adaLN modulation (replicated)
    if (m.text_condition_hidden > 0) {
      p += h * q + static_cast<int64_t>(m.text_condition_hidden) * 2 * q + q * h + norm +
           (bias ? 3 * q + h : 0);
    }
  }
  const int64_t patch = static_cast<int64_t>(PatchFeatures(m));
  if (layer == 0) {
    p += static_cast<int64_t>(m.learned_position_embeddings) * h;
    switch (m.kind) {
      case spec::ModuleKind::kLlm:
        p += static_cast<int64_t>(m.vocab_size) / tp * h;
        break;
      case spec::ModuleKind::kVit:
        p += patch * h + h;
        break;
      case spec::ModuleKind::kAudioEncoder:
        p += 3LL * m.mel_bins * h + h + 3 * h * h + h;
        break;
      case spec::ModuleKind::kDit:
        p += patch * h + h + 256 * h + h + h * h + h;
        if (m.shared_adaln) p += h * 6 * h + 6 * h;
        break;
      case spec::ModuleKind::kMlpProjector:
        break;
    }
  }
  if (layer == m.num_layers - 1) {
    p += norm;
    if (m.kind == spec::ModuleKind::kLlm && !m.tied_embeddings) {
      p += static_cast<int64_t>(m.vocab_size) / tp * h;
    }
    if (m.kind == spec::ModuleKind::kDit) p += h * patch + patch;
  }
  return p;
}

}  // namespace weft::cost
