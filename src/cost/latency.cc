#include "weft/cost/latency.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace weft::cost {

double GemmEfficiencyCurve::Efficiency(double m, double n, double k) const {
  auto sat = [](double x, double half) { return x <= 0 ? 0.0 : x / (x + std::max(0.0, half)); };
  return sat(m, m_half) * sat(n, n_half) * sat(k, k_half);
}

Status CostOptions::Validate() const {
  if (gemm.m_half < 0 || gemm.n_half < 0 || gemm.k_half < 0) {
    return InvalidArgumentError(fmt::format(
        "cost_options.gemm = ({}, {}, {}); half-saturation sizes must be >= 0", gemm.m_half,
        gemm.n_half, gemm.k_half));
  }
  if (attention_peak_fraction <= 0 || attention_peak_fraction > 1) {
    return InvalidArgumentError(fmt::format(
        "cost_options.attention_peak_fraction = {}; must lie in (0, 1]", attention_peak_fraction));
  }
  if (attention_half_tokens < 0) {
    return InvalidArgumentError(fmt::format(
        "cost_options.attention_half_tokens = {}; must be >= 0", attention_half_tokens));
  }
  if (attention_backward_hardware_factor < 1) {
    return InvalidArgumentError(
        fmt::format("cost_options.attention_backward_hardware_factor = {}; must be >= 1",
                    attention_backward_hardware_factor));
  }
  for (int i = 0; i < kNumMemoryClasses; ++i) {
    if (memory_class_efficiency[i] <= 0 || memory_class_efficiency[i] > 2) {
      return InvalidArgumentError(
          fmt::format("cost_options.memory_class_efficiency[{}] = {}; must lie in (0, 2]", i,
                      memory_class_efficiency[i]));
    }
  }
  if (kernel_launch_s < 0 || collective_base_latency_s < 0) {
    return InvalidArgumentError(fmt::format(
        "cost_options.kernel_launch_s = {}, collective_base_latency_s = {}; must be >= 0",
        kernel_launch_s, collective_base_latency_s));
  }
  if (gradient_bytes_per_param < 0 || optimizer_bytes_per_param < 0) {
    return InvalidArgumentError(fmt::format(
        "cost_options.gradient_bytes_per_param = {}, optimizer_bytes_per_param = {}; must be >= 0",
        gradient_bytes_per_param, optimizer_bytes_per_param));
  }
  return OkStatus();
}

double CollectiveLatency(CollectiveKind kind, double bytes, int group_size,
                         const spec::LinkSpec& link, double network_efficiency,
                         const CostOptions& options) {
  if (group_size <= 1 || bytes <= 0) return 0.0;
  const double n = group_size;
  const double bandwidth = std::max(1e-30, network_efficiency * link.bandwidth_bytes_per_s);
  const double steps = kind == CollectiveKind::kAllReduce ? 2 * (n - 1) : (n - 1);
  const double wire_bytes = steps / n * bytes;  // bytes each rank sends over the ring
  return wire_bytes / bandwidth + steps * link.latency_s + options.collective_base_latency_s;
}

double P2PLatency(double bytes, const spec::LinkSpec& link, double network_efficiency,
                  const CostOptions& options) {
  if (bytes <= 0) return 0.0;
  const double bandwidth = std::max(1e-30, network_efficiency * link.bandwidth_bytes_per_s);
  return bytes / bandwidth + link.latency_s + options.collective_base_latency_s;
}

double MemoryClassEfficiency(MemoryClass cls,
                             const spec::ClusterSpec& cluster,
                             const CostOptions& options) {
  // Per-GPU calibration (cluster.efficiency.residual / .embedding) where the preset has one;
  // the other classes scale by cluster.efficiency.memory_kernels.
  if (cls == MemoryClass::kResidual && cluster.efficiency.residual > 0) {
    return cluster.efficiency.residual;
  }
  if (cls == MemoryClass::kEmbedding && cluster.efficiency.embedding > 0) {
    return cluster.efficiency.embedding;
  }
  return options.memory_class_efficiency[static_cast<int>(cls)] *
         (cls == MemoryClass::kResidual || cls == MemoryClass::kEmbedding
              ? 1.0
              : cluster.efficiency.memory_kernels);
}

double OpLatency(const Op& op, const spec::ClusterSpec& cluster, const CostOptions& options) {
  const spec::EfficiencyFactors& alpha = cluster.efficiency;
  const double peak = std::max(1e-30, cluster.gpu.peak_bf16_flops_per_s);
  const double hbm = std::max(1e-30, cluster.gpu.hbm_bandwidth_bytes_per_s);
  switch (op.kind) {
    case OpKind::kGemm: {
      const double eff = options.gemm.Efficiency(op.gemm_m, op.gemm_n, op.gemm_k);
      const double compute_s = op.flops / std::max(1e-30, alpha.compute * peak * eff);
      const double memory_s = op.hbm_bytes / (alpha.memory * hbm);
      return std::max(compute_s, memory_s) + options.kernel_launch_s;
    }
    case OpKind::kAttention: {
      const double s = op.attention_mean_tokens;
      const double eff = options.attention_peak_fraction * s / (s + options.attention_half_tokens);
      const double compute_s =
          op.flops * op.hardware_flops_factor / std::max(1e-30, peak * eff);
      const double memory_s = op.hbm_bytes / (alpha.memory * hbm);
      return std::max(compute_s, memory_s) +
             op.attention_segment_heads * options.attention_segment_head_s *
                 (op.pass == spec::Pass::kForward ? 1.0 : 2.0) +
             options.kernel_launch_s;
    }
    case OpKind::kMemory: {
      const double cls = MemoryClassEfficiency(op.memory_class, cluster, options);
      return op.hbm_bytes / (alpha.memory * cls * hbm) + options.kernel_launch_s;
    }
    case OpKind::kCollective: {
      const spec::LinkSpec& link = op.inter_node ? cluster.inter_node : cluster.intra_node;
      return CollectiveLatency(op.collective, op.net_bytes, op.group_size, link, alpha.network,
                               options);
    }
  }
  return 0.0;
}

}  // namespace weft::cost
