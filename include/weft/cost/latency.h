#pragma once
// Latency of one operator: the roofline max(FLOPs/(α_f·F·eff), bytes/(α_m·B_hbm·class),
// net/(α_n·B_link)) plus fixed terms (kernel launch, NCCL per-step latency). The size-aware GEMM
// efficiency and the per-class memory efficiencies are calibrated on measured H100/A100 profiles
// (docs/cost_model.md). Free functions; thread-safe.
#include <array>
#include <optional>

#include "weft/cost/ops.h"
#include "weft/spec/cluster.h"

namespace weft::cost {

// eff(m,n,k) = sat(m; m0)·sat(n; n0)·sat(k; k0), sat(x; x0) = x / (x + x0): a GEMM with a small
// dimension cannot fill the GPU's SMs / tensor-core tiles. The GEMM runs at α_f·F·eff.
// Defaults: least-squares fit (log error) over vidur's Llama-2-7B QKV/out/up/down projections on
// H100 and A100, TP 1–8, 16–4096 tokens (tools: `weft cost --validate`).
struct GemmEfficiencyCurve {
  double m_half = 163;  // tokens at which the m factor is 1/2
  double n_half = 218;  // output columns at which the n factor is 1/2
  double k_half = 180;  // reduction length at which the k factor is 1/2
  double Efficiency(double m, double n, double k) const;  // in (0, 1]
};

// The analytical knobs of the model (cluster-independent). Calibrated defaults.
struct CostOptions {
  GemmEfficiencyCurve gemm;
  // Flash attention (varlen, packed) reaches attention_peak_fraction · F · s/(s + half) for a
  // token-weighted mean segment length s, plus a fixed cost per (segment × head) on the rank.
  // Fit to distca's H100 causal flash-attention forward over 32K packed tokens (64 query heads,
  // 4 KV heads, d = 128, documents of 32..32K tokens, TP 1..8).
  double attention_peak_fraction = 0.366;
  double attention_half_tokens = 413;
  double attention_segment_head_s = 1.28e-8;
  // Hardware FLOPs of the attention backward over its model FLOPs (2× forward). distca's
  // Megatron attention timings are ≈3.0× its forward-only kernel timings at equal length, i.e.
  // backward ≈ 2× forward, so the default adds no extra factor.
  double attention_backward_hardware_factor = 1.0;
  // Fraction of α_m·B_hbm each memory-bound kernel class reaches (index: MemoryClass). Fit to
  // vidur's RMSNorm, SiLU·mul, residual add, rotary and embedding kernels (H100 and A100).
  std::array<double, kNumMemoryClasses> memory_class_efficiency = {
      0.49,  // kNorm
      0.63,  // kActivation
      1.4,   // kResidual (vidur's residual add beats 3 tensors / (α_m·B): L2 reuse)
      0.59,  // kRope
      0.2,   // kEmbedding
      0.6,   // kOther
  };
  double kernel_launch_s = 2e-6;   // fixed cost of any kernel
  // NCCL: fixed launch/synchronization cost of a collective, plus the link's per-message latency
  // on each of the ring's steps. Fit to vidur's H100 DGX all-reduce and distca's nccl-tests.
  double collective_base_latency_s = 8e-6;
  bool flash_attention = true;     // no s² score tensors stored (Korthikanti's 5as/h term drops)
  bool dropout_masks = true;       // 1-byte dropout masks stored (Korthikanti's 34 counts them)
  double gradient_bytes_per_param = 4;   // fp32 main gradients (Megatron); 2 for bf16 grads
  double optimizer_bytes_per_param = 12; // fp32 master weights + Adam m and v
  bool zero1 = true;               // optimizer state sharded over the module's DP replicas
  // Context parallelism (cp > 1) is all-gather based (Cornstarch §5.3): attention costs the most
  // loaded rank's key-block work when the sequence's 128-token blocks are distributed by this
  // method over a mask derived from the shape (cost/cp_attention.h); nullopt = perfectly
  // balanced (Σs²/cp, the model before CP distributions existed). cp = 1 is unaffected.
  std::optional<cp::Method> cp_distribution = cp::Method::kLpt;
  Status Validate() const;
};

// Ring-algorithm latency of a collective over `group_size` ranks where `bytes` is the size of the
// full tensor (the reduced tensor, or the gathered output):
//   all-reduce:               2(n−1)/n · bytes / (α_n·B) + 2(n−1)·link.latency + base
//   all-gather/reduce-scatter: (n−1)/n · bytes / (α_n·B) +  (n−1)·link.latency + base
// group_size 1 costs 0.
double CollectiveLatency(CollectiveKind kind,
                         double bytes,
                         int group_size,
                         const spec::LinkSpec& link,
                         double network_efficiency = 0.8,
                         const CostOptions& options = {});

// Point-to-point send of `bytes` (pipeline activations): bytes/(α_n·B) + link.latency + base.
double P2PLatency(double bytes,
                  const spec::LinkSpec& link,
                  double network_efficiency = 0.8,
                  const CostOptions& options = {});

// Fraction of α_m·B_hbm that kernels of class `cls` reach on `cluster`: the cluster's fitted
// per-GPU value (efficiency.residual / efficiency.embedding) where set, else
// options.memory_class_efficiency (× efficiency.memory_kernels outside those two classes).
double MemoryClassEfficiency(MemoryClass cls,
                             const spec::ClusterSpec& cluster,
                             const CostOptions& options = {});

// Analytical latency of `op` on one GPU of `cluster` (ignores Op::latency_s / measured).
double OpLatency(const Op& op, const spec::ClusterSpec& cluster, const CostOptions& options = {});

}  // namespace weft::cost
