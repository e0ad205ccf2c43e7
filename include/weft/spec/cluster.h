#pragma once
// ClusterSpec: what it is trained on. Value type.
#include <cstdint>
#include <string>

#include "weft/common/status.h"

namespace weft::spec {

struct GpuSpec {
  std::string name;                          // "H800-SXM"
  double peak_bf16_flops_per_s = 0;          // dense bf16 tensor-core peak
  double hbm_bandwidth_bytes_per_s = 0;
  int64_t memory_capacity_bytes = 0;
  bool operator==(const GpuSpec&) const = default;
};

struct LinkSpec {
  double bandwidth_bytes_per_s = 0;          // per GPU, one direction
  double latency_s = 0;                      // per message
  bool operator==(const LinkSpec&) const = default;
};

// Fractions of peak reachable in practice (the α's of the cost model).
struct EfficiencyFactors {
  double compute = 0.8;   // α_f: best large-GEMM fraction of peak FLOP/s
  double memory = 0.85;   // α_m: fraction of HBM bandwidth reached by memory-bound kernels
  double network = 0.8;   // α_n: fraction of link bandwidth reached by NCCL
  bool operator==(const EfficiencyFactors&) const = default;
};

struct ClusterSpec {
  std::string name;
  std::string description;
  int num_nodes = 0;
  int gpus_per_node = 0;
  GpuSpec gpu;
  LinkSpec intra_node;     // NVLink / HCCS
  LinkSpec inter_node;     // RoCE / InfiniBand, per GPU
  EfficiencyFactors efficiency;
  int planning_cpu_cores = 0;   // CPU cores available for asynchronous planning per node
  int64_t host_memory_bytes_per_gpu = 0;  // for CPU offload (0 = offload not available)
  double host_link_bandwidth_bytes_per_s = 0;  // PCIe GPU<->host for offload

  int TotalGpus() const { return num_nodes * gpus_per_node; }
  // Returns a copy with `total_gpus` GPUs (num_nodes = ceil(total/gpus_per_node); if total is
  // smaller than a node, one node with total GPUs). Fails if total_gpus <= 0.
  StatusOr<ClusterSpec> WithTotalGpus(int total_gpus) const;
  bool operator==(const ClusterSpec&) const = default;
  // Stops at the first problem: "gpu.memory_capacity_bytes = 0; must be > 0".
  Status Validate() const;
};

}  // namespace weft::spec
