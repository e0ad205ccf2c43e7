// ClusterSpec: validation and resizing.
#include "weft/spec/cluster.h"

#include <algorithm>

#include <fmt/format.h>

namespace weft::spec {

int64_t DefaultReservedMemoryBytes(int64_t capacity_bytes) {
  return (int64_t{2} << 30) + capacity_bytes / 20;
}
namespace {

Status FieldError(std::string_view field, const auto& value, std::string_view rule) {
  return InvalidArgumentError(fmt::format("{} = {}; {}", field, value, rule));
}

Status RequirePositive(std::string_view field, double value) {
  if (value > 0) return OkStatus();
  return FieldError(field, value, "must be > 0");
}

Status RequireNonNegative(std::string_view field, double value) {
  if (value >= 0) return OkStatus();
  return FieldError(field, value, "must be >= 0");
}

Status RequireFraction(std::string_view field, double value) {
  if (value > 0 && value <= 1) return OkStatus();
  return FieldError(field, value, "must be in (0, 1]");
}

}  // namespace

StatusOr<ClusterSpec> ClusterSpec::WithTotalGpus(int total_gpus) const {
  if (total_gpus <= 0) return FieldError("total_gpus", total_gpus, "must be > 0");
  if (gpus_per_node <= 0) return FieldError("gpus_per_node", gpus_per_node, "must be > 0");
  ClusterSpec out = *this;
  out.last_node_gpus = 0;
  if (total_gpus < gpus_per_node) {
    out.num_nodes = 1;
    out.gpus_per_node = total_gpus;
  } else {
    out.num_nodes = (total_gpus + gpus_per_node - 1) / gpus_per_node;
    // The GPUs asked for, not whole nodes: a partial last node (issue 34 item 12).
    if (total_gpus % gpus_per_node != 0) out.last_node_gpus = total_gpus % gpus_per_node;
  }
  return out;
}

Status ClusterSpec::Validate() const {
  if (name.empty()) return FieldError("name", "\"\"", "must be non-empty");
  WEFT_RETURN_IF_ERROR(RequirePositive("num_nodes", num_nodes));
  WEFT_RETURN_IF_ERROR(RequirePositive("gpus_per_node", gpus_per_node));
  if (last_node_gpus < 0 || last_node_gpus >= gpus_per_node) {
    return FieldError("last_node_gpus", last_node_gpus,
                      "must be in [0, gpus_per_node) (0 = the last node is full)");
  }
  WEFT_RETURN_IF_ERROR(RequirePositive("gpu.peak_bf16_flops_per_s", gpu.peak_bf16_flops_per_s));
  WEFT_RETURN_IF_ERROR(
      RequirePositive("gpu.hbm_bandwidth_bytes_per_s", gpu.hbm_bandwidth_bytes_per_s));
  if (gpu.reserved_memory_bytes < 0 || gpu.reserved_memory_bytes >= gpu.memory_capacity_bytes) {
    if (gpu.memory_capacity_bytes > 0) {
      return FieldError("gpu.reserved_memory_bytes", gpu.reserved_memory_bytes,
                        "must be >= 0 and below gpu.memory_capacity_bytes");
    }
  }
  if (gpu.memory_capacity_bytes <= 0) {
    return FieldError("gpu.memory_capacity_bytes", gpu.memory_capacity_bytes, "must be > 0");
  }
  WEFT_RETURN_IF_ERROR(
      RequirePositive("intra_node.bandwidth_bytes_per_s", intra_node.bandwidth_bytes_per_s));
  WEFT_RETURN_IF_ERROR(RequireNonNegative("intra_node.latency_s", intra_node.latency_s));
  WEFT_RETURN_IF_ERROR(
      RequirePositive("inter_node.bandwidth_bytes_per_s", inter_node.bandwidth_bytes_per_s));
  WEFT_RETURN_IF_ERROR(RequireNonNegative("inter_node.latency_s", inter_node.latency_s));
  WEFT_RETURN_IF_ERROR(RequireFraction("efficiency.compute", efficiency.compute));
  WEFT_RETURN_IF_ERROR(RequireFraction("efficiency.memory", efficiency.memory));
  WEFT_RETURN_IF_ERROR(RequireFraction("efficiency.network", efficiency.network));
  if (!(efficiency.memory_kernels > 0 && efficiency.memory_kernels <= kMaxKernelClassEfficiency)) {
    return FieldError("efficiency.memory_kernels", efficiency.memory_kernels,
                      fmt::format("must be in (0, {}]", kMaxKernelClassEfficiency));
  }
  for (const auto& [field, value] :
       {std::pair<std::string_view, double>{"efficiency.residual", efficiency.residual},
        {"efficiency.embedding", efficiency.embedding}}) {
    if (!(value >= 0 && value <= kMaxKernelClassEfficiency)) {
      return FieldError(field, value,
                        fmt::format("must be 0 (the cost model's default) or in (0, {}]",
                                    kMaxKernelClassEfficiency));
    }
  }
  WEFT_RETURN_IF_ERROR(RequireNonNegative("planning_cpu_cores", planning_cpu_cores));
  if (host_memory_bytes_per_gpu < 0) {
    return FieldError("host_memory_bytes_per_gpu", host_memory_bytes_per_gpu, "must be >= 0");
  }
  WEFT_RETURN_IF_ERROR(
      RequireNonNegative("host_link_bandwidth_bytes_per_s", host_link_bandwidth_bytes_per_s));
  if (host_memory_bytes_per_node < 0) {
    return FieldError("host_memory_bytes_per_node", host_memory_bytes_per_node, "must be >= 0");
  }
  WEFT_RETURN_IF_ERROR(RequireNonNegative("host_link_d2h_bandwidth_bytes_per_s",
                                          host_link_d2h_bandwidth_bytes_per_s));
  WEFT_RETURN_IF_ERROR(RequireNonNegative("host_bandwidth_bytes_per_s_per_node",
                                          host_bandwidth_bytes_per_s_per_node));
  if ((host_memory_bytes_per_gpu > 0 || host_memory_bytes_per_node > 0) &&
      host_link_bandwidth_bytes_per_s <= 0) {
    return FieldError("host_link_bandwidth_bytes_per_s", host_link_bandwidth_bytes_per_s,
                      "must be > 0 when host_memory_bytes_per_gpu > 0 (offload needs a link)");
  }
  return OkStatus();
}

double ClusterSpec::SharedHostBandwidthBytesPerS(double link_bytes_per_s, int copying_gpus) const {
  double bw = link_bytes_per_s;
  if (host_bandwidth_bytes_per_s_per_node > 0 && copying_gpus > 0) {
    bw = std::min(bw, host_bandwidth_bytes_per_s_per_node / copying_gpus);
  }
  return bw;
}

}  // namespace weft::spec
