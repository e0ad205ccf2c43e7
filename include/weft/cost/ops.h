#pragma once
// The operators of ONE transformer layer (or projector linear) on ONE tensor-parallel rank: what
// each computes (FLOPs), moves through HBM (bytes) and sends on the network (bytes), per pass.
// TP ranks are symmetric, so one rank stands for all of them (SEMU's spatial reuse).
// Free functions of value types; thread-safe.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"
#include "weft/cp/distribution.h"
#include "weft/spec/model.h"
#include "weft/spec/parallel.h"
#include "weft/spec/work.h"

namespace weft::cost {

// The workload of one module for one (sub-)microbatch, reduced to what the cost depends on.
// Linear ops scale with `tokens`; attention scales with Σ s_i² over the attention units
// (images, audio windows, packed sub-sequences with block-diagonal masks), never with tokens².
struct TokenShape {
  int64_t tokens = 0;               // Σ s_i: tokens through the module (all instances)
  double sum_squared_tokens = 0;    // Σ s_i² over attention segments (tokens²)
  int instances = 1;                // images / clips / packed sequences (adaLN conditioning, DiT)
  int64_t context_tokens = 0;       // DiT cross-attention: text-condition tokens over all instances
  // Window attention (ModuleSpec::attention_window_px): Σ w² over the attention windows, what a
  // windowed layer's attention scales with. 0 = not known: such layers take
  // min(Σs², tokens · WindowPatches()) (exact when every window is full).
  double window_sum_squared_tokens = 0;

  // One segment of `tokens` tokens per instance, `instances` instances.
  static TokenShape Uniform(int64_t tokens_per_instance, int instances = 1);
  // Segments of the given lengths (a packed sequence or a list of images).
  static TokenShape FromSegments(std::span<const int64_t> segment_tokens);
  // tokens >= 0, instances >= 1, tokens <= Σs² <= tokens² (when tokens > 0), context >= 0,
  // 0 <= window Σw² <= Σs².
  Status Validate() const;
  // Token-weighted mean attention length Σs²/Σs (tokens); 0 when empty.
  double MeanSegmentTokens() const { return tokens > 0 ? sum_squared_tokens / tokens : 0.0; }
  // What layer `layer` of `module` attends over: Σw² for a windowed layer
  // (ModuleSpec::WindowedLayer), else Σs².
  double AttentionSumSquared(const spec::ModuleSpec& module, int layer) const;
};

// Which passes exist for a module (Cornstarch's frozen-status rule):
//  trainable                                  -> kFull       (backward-input and backward-weight)
//  frozen, with a trainable module upstream   -> kInputOnly  (backward-input only, ≈1× forward)
//  frozen, nothing trainable upstream         -> kNone       (no backward at all)
enum class BackwardMode { kFull, kInputOnly, kNone };
std::string_view BackwardModeName(BackwardMode mode);
// Derives the mode of `modules[module]` from its frozen flag and the edges of `model`.
// Fails if `module` is out of range.
StatusOr<BackwardMode> BackwardModeOf(const spec::ModelSpec& model, int module);

enum class OpKind {
  kGemm,        // dense matrix multiply (dims in Op::gemm_*)
  kAttention,   // fused attention core (flash attention): QKᵀ, softmax, ·V
  kMemory,      // memory-bound kernel: norms, activations, residual adds, rope, embedding lookup
  kCollective,  // NCCL collective over the TP (or CP) group
};
std::string_view OpKindName(OpKind kind);

// Memory-bound kernel classes, each with its own reachable fraction of HBM bandwidth
// (CostOptions::memory_class_efficiency, calibrated on vidur's per-op profiles).
enum class MemoryClass { kNorm, kActivation, kResidual, kRope, kEmbedding, kOther };
inline constexpr int kNumMemoryClasses = 6;

enum class CollectiveKind { kAllReduce, kAllGather, kReduceScatter };
std::string_view CollectiveKindName(CollectiveKind kind);

// One operator of one pass on one TP rank. FLOPs count matrix-multiply work only (the MFU
// convention of Megatron-LM); memory-bound kernels have flops = 0 and are timed by their bytes.
struct Op {
  std::string name;          // "qkv_proj", "attention", "mlp_up", "tp_all_reduce", ...
  // kForward, kBackwardInput or kBackwardWeight: BuildLayerOps splits every backward operator
  // into its input and weight gradients, so no operator is spec::Pass::kBackward.
  spec::Pass pass = spec::Pass::kForward;
  OpKind kind = OpKind::kGemm;
  double flops = 0;          // model FLOPs (2·m·n·k per GEMM; attention: 4·Σs²·d·heads, halved if causal)
  double hbm_bytes = 0;      // bytes read + written in HBM
  double net_bytes = 0;      // collectives: size of the full (reduced / gathered) tensor
  // kGemm: C[m×n] = A[m×k]·B[k×n] on this rank.
  double gemm_m = 0, gemm_n = 0, gemm_k = 0;
  // kAttention: token-weighted mean segment length (sets the kernel's efficiency) and the factor
  // hardware FLOPs exceed model FLOPs (flash-attention backward recomputes QKᵀ: ≈1.25).
  double attention_mean_tokens = 0;
  double hardware_flops_factor = 1.0;
  // kAttention: (segments on this rank) × (query heads on this rank); each carries a fixed cost.
  // Segments are estimated as tokens² / Σs² (exact for equal segments).
  double attention_segment_heads = 0;
  MemoryClass memory_class = MemoryClass::kOther;
  CollectiveKind collective = CollectiveKind::kAllReduce;
  int group_size = 1;        // ranks in the collective
  bool inter_node = false;   // the collective's group spans nodes
  bool recomputed_by_selective = false;  // re-run in backward under spec::Recompute::kSelective
  bool recomputed_by_full = true;        // re-run under kFull (false: first/last-layer extras)
  double latency_s = 0;      // filled by the cost model
  bool measured = false;     // latency taken (or scaled) from a measured table
};

// Where a layer sits in its module: the first layer carries the embedding / patch embedding /
// conv stem, the last one the final norm, LM head / output projection.
struct LayerPosition {
  bool first = false;
  bool last = false;
};

// Everything the op builder needs besides the module spec.
struct OpBuildContext {
  TokenShape shape;
  spec::ModuleParallel parallel;
  BackwardMode backward = BackwardMode::kFull;
  int gpus_per_node = 8;     // decides whether TP / CP groups span nodes
  // cp > 1: the token distribution over the CP ranks; the attention op costs the worst rank's
  // share (cost/cp_attention.h). nullopt = perfectly balanced (Σs²/cp). Mirrors CostOptions.
  std::optional<cp::Method> cp_distribution = cp::Method::kLpt;
};

// The ops of layer `layer` of `module` (all passes that `ctx.backward` allows), latency unset.
// Projector layers are the module's linears (num_layers of them). Fails on an invalid shape,
// a layer out of range, or a TP size that does not divide the heads.
StatusOr<std::vector<Op>> BuildLayerOps(const spec::ModuleSpec& module,
                                        int layer,
                                        const OpBuildContext& ctx);

// Activation bytes one TP rank keeps from a layer's forward to its backward (Korthikanti et al.
// 2022, generalized to GQA, gated MLPs and ffn != 4h; see docs/cost_model.md). First/last-layer
// extras (patch embedding input, LM-head logits) are kept under every strategy.
struct ActivationFootprint {
  double none_bytes = 0;       // Recompute::kNone
  double selective_bytes = 0;  // Recompute::kSelective (attention output and MLP activation dropped)
  double full_bytes = 0;       // Recompute::kFull (layer input only)
};
StatusOr<ActivationFootprint> LayerActivationBytes(const spec::ModuleSpec& module,
                                                   int layer,
                                                   const OpBuildContext& ctx,
                                                   bool flash_attention = true,
                                                   bool dropout_masks = true);

// Parameters held by one TP rank for one layer (including first/last-layer extras:
// embeddings, patch embedding, LM head, final norm). Fails like BuildLayerOps.
StatusOr<int64_t> LayerParametersPerRank(const spec::ModuleSpec& module,
                                         int layer,
                                         const spec::ModuleParallel& parallel);

}  // namespace weft::cost
