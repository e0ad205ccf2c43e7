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
  // Memory a training job cannot use: CUDA context and library workspaces, communication
  // buffers, allocator fragmentation. A cluster file without the key gets
  // DefaultReservedMemoryBytes(capacity); specs built in code default to 0.
  int64_t reserved_memory_bytes = 0;
  // What plans may use: capacity − reserved (every strategy, the simulator, the plan's ranks).
  int64_t UsableMemoryBytes() const { return memory_capacity_bytes - reserved_memory_bytes; }
  bool operator==(const GpuSpec&) const = default;
};

struct LinkSpec {
  double bandwidth_bytes_per_s = 0;          // per GPU, one direction
  double latency_s = 0;                      // per message
  bool operator==(const LinkSpec&) const = default;
};

// Largest per-GPU kernel-class efficiency accepted (a fraction of α_m·B_hbm; > 1 where the
// kernel's working set stays in L2).
inline constexpr double kMaxKernelClassEfficiency = 4;

// Fractions of peak reachable in practice (the α's of the cost model).
struct EfficiencyFactors {
  double compute = 0.8;   // α_f: best large-GEMM fraction of peak FLOP/s
  double memory = 0.85;   // α_m: fraction of HBM bandwidth reached by memory-bound kernels
  double network = 0.8;   // α_n: fraction of link bandwidth reached by NCCL
  // Per-GPU memory-bound kernel speed (fitted by `weft cost --fit`, docs/cost_model.md
  // "Per-GPU calibration"). memory_kernels scales the cost model's norm / activation / rope /
  // other class efficiencies (CostOptions::memory_class_efficiency, fitted on H100 and A100):
  // how much more of α_m·B_hbm this GPU's elementwise kernels reach (A40's GDDR6: more).
  double memory_kernels = 1;
  // The fraction of α_m·B_hbm that the residual add (L2 reuse can beat 1) and the embedding
  // gather reach on this GPU; 0 = the cost model's cluster-independent default.
  double residual = 0;
  double embedding = 0;
  bool operator==(const EfficiencyFactors&) const = default;
};

// The headroom of a card of `capacity_bytes`: 2 GiB (CUDA context and cuBLAS/cuDNN workspaces,
// ~0.5–1 GiB per process; NCCL communicator buffers, NCCL_BUFFSIZE 4 MiB per channel and peer
// over the TP/PP/DP communicators, ~0.5–1 GiB) + 5% of the card (caching-allocator
// fragmentation). An engineering default, not a measurement: a cluster file overrides it with
// gpu.reserved_memory_bytes. docs/spec.md.
int64_t DefaultReservedMemoryBytes(int64_t capacity_bytes);

struct ClusterSpec {
  std::string name;
  std::string description;
  int num_nodes = 0;
  int gpus_per_node = 0;
  // GPUs of the last node when it is partial (WithTotalGpus of a count that is not a multiple of
  // gpus_per_node: --gpus 20 on 8-GPU nodes is 2 full nodes and one of 4); 0 = every node full.
  int last_node_gpus = 0;
  GpuSpec gpu;
  LinkSpec intra_node;     // NVLink / HCCS
  LinkSpec inter_node;     // RoCE / InfiniBand, per GPU
  EfficiencyFactors efficiency;
  int planning_cpu_cores = 0;   // CPU cores available for asynchronous planning per node
  // Activation offload (docs/simulator.md "Offload"). Host memory: a node holds at most
  // HostMemoryBytesPerNode() offloaded bytes at any time (0 = offload not available).
  int64_t host_memory_bytes_per_gpu = 0;   // used when host_memory_bytes_per_node is 0
  int64_t host_memory_bytes_per_node = 0;  // 0 = host_memory_bytes_per_gpu × gpus_per_node
  // Per GPU, one copy alone on its PCIe link: host→device (H2D, measured pinned memcpy) and
  // device→host (D2H; 0 = the H2D figure).
  double host_link_bandwidth_bytes_per_s = 0;
  double host_link_d2h_bandwidth_bytes_per_s = 0;
  // What all GPUs of a node copying at once get together (CPU root ports / PCIe-switch uplinks /
  // host DRAM); 0 = no node limit (gpus_per_node × the per-GPU link). Copies of a node share it.
  double host_bandwidth_bytes_per_s_per_node = 0;
  // The GPU's NIC hangs off the GPU's PCIe switch (GPUDirect RDMA over the GPU's own x16 link):
  // an inter-node transfer of the GPU halves the host bandwidth of its copies while it runs.
  bool nic_shares_host_link = false;

  int64_t HostMemoryBytesPerNode() const {
    return host_memory_bytes_per_node > 0 ? host_memory_bytes_per_node
                                          : host_memory_bytes_per_gpu * gpus_per_node;
  }
  double HostD2hBandwidthBytesPerS() const {
    return host_link_d2h_bandwidth_bytes_per_s > 0 ? host_link_d2h_bandwidth_bytes_per_s
                                                   : host_link_bandwidth_bytes_per_s;
  }
  // Per-GPU copy bandwidth when `copying_gpus` GPUs of a node copy at once (one direction).
  double SharedHostBandwidthBytesPerS(double link_bytes_per_s, int copying_gpus) const;

  int TotalGpus() const {
    return num_nodes * gpus_per_node - (last_node_gpus > 0 ? gpus_per_node - last_node_gpus : 0);
  }
  // Returns a copy with exactly `total_gpus` GPUs: num_nodes = ceil(total/gpus_per_node), the
  // last node partial (last_node_gpus) when total is not a multiple; a total smaller than a node
  // is one node of total GPUs. Fails if total_gpus <= 0.
  StatusOr<ClusterSpec> WithTotalGpus(int total_gpus) const;
  bool operator==(const ClusterSpec&) const = default;
  // Stops at the first problem: "gpu.memory_capacity_bytes = 0; must be > 0".
  Status Validate() const;
};

}  // namespace weft::spec
