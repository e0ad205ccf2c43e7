#include "weft/spec/cluster.h"
#include "weft/spec/preset.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace weft::spec {
namespace {

ClusterSpec Cluster() {
  ClusterSpec c;
  c.name = "test";
  c.num_nodes = 2;
  c.gpus_per_node = 8;
  c.gpu = {.name = "X", .peak_bf16_flops_per_s = 1e15, .hbm_bandwidth_bytes_per_s = 3e12,
           .memory_capacity_bytes = int64_t{80} << 30};
  c.intra_node = {.bandwidth_bytes_per_s = 4.5e11, .latency_s = 1e-5};
  c.inter_node = {.bandwidth_bytes_per_s = 5e10, .latency_s = 1e-5};
  c.planning_cpu_cores = 8;
  return c;
}

std::string ErrorOf(const ClusterSpec& c) {
  Status s = c.Validate();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  return s.message();
}

TEST(ClusterSpecValidate, AcceptsAWellFormedCluster) { EXPECT_TRUE(Cluster().Validate().ok()); }

TEST(ClusterSpecValidate, RejectsZeroNodesAndGpus) {
  ClusterSpec c = Cluster();
  c.num_nodes = 0;
  EXPECT_EQ(ErrorOf(c), "num_nodes = 0; must be > 0");
  c = Cluster();
  c.gpus_per_node = -1;
  EXPECT_EQ(ErrorOf(c), "gpus_per_node = -1; must be > 0");
}

TEST(ClusterSpecValidate, RejectsNonPositiveGpuCapabilities) {
  ClusterSpec c = Cluster();
  c.gpu.peak_bf16_flops_per_s = 0;
  EXPECT_EQ(ErrorOf(c), "gpu.peak_bf16_flops_per_s = 0; must be > 0");
  c = Cluster();
  c.gpu.hbm_bandwidth_bytes_per_s = -1;
  EXPECT_EQ(ErrorOf(c), "gpu.hbm_bandwidth_bytes_per_s = -1; must be > 0");
  c = Cluster();
  c.gpu.memory_capacity_bytes = 0;
  EXPECT_EQ(ErrorOf(c), "gpu.memory_capacity_bytes = 0; must be > 0");
}

TEST(ClusterSpecValidate, RejectsNonPositiveLinkBandwidthAndNegativeLatency) {
  ClusterSpec c = Cluster();
  c.intra_node.bandwidth_bytes_per_s = 0;
  EXPECT_EQ(ErrorOf(c), "intra_node.bandwidth_bytes_per_s = 0; must be > 0");
  c = Cluster();
  c.inter_node.bandwidth_bytes_per_s = -5;
  EXPECT_EQ(ErrorOf(c), "inter_node.bandwidth_bytes_per_s = -5; must be > 0");
  c = Cluster();
  c.inter_node.latency_s = -1e-6;
  EXPECT_EQ(ErrorOf(c), "inter_node.latency_s = -1e-06; must be >= 0");
}

TEST(ClusterSpecValidate, RejectsEfficiencyOutsideUnitInterval) {
  ClusterSpec c = Cluster();
  c.efficiency.compute = 1.2;
  EXPECT_EQ(ErrorOf(c), "efficiency.compute = 1.2; must be in (0, 1]");
  c = Cluster();
  c.efficiency.network = 0;
  EXPECT_EQ(ErrorOf(c), "efficiency.network = 0; must be in (0, 1]");
}

TEST(ClusterSpecValidate, RejectsHostMemoryWithoutALink) {
  ClusterSpec c = Cluster();
  c.host_memory_bytes_per_gpu = int64_t{32} << 30;
  EXPECT_THAT(ErrorOf(c), ::testing::HasSubstr("host_link_bandwidth_bytes_per_s = 0; must be > 0 "
                                               "when host_memory_bytes_per_gpu > 0"));
  c.host_link_bandwidth_bytes_per_s = 6.4e10;
  EXPECT_TRUE(c.Validate().ok());
}

TEST(ClusterSpecValidate, RejectsNegativePlanningCores) {
  ClusterSpec c = Cluster();
  c.planning_cpu_cores = -2;
  EXPECT_EQ(ErrorOf(c), "planning_cpu_cores = -2; must be >= 0");
}

TEST(ClusterSpecWithTotalGpus, KeepsTheGpusAskedForWithAPartialLastNode) {
  // Issue 34 item 12: 20 GPUs are 20 (2 nodes of 8 and one of 4), not 24.
  StatusOr<ClusterSpec> c = Cluster().WithTotalGpus(20);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->num_nodes, 3);
  EXPECT_EQ(c->gpus_per_node, 8);
  EXPECT_EQ(c->last_node_gpus, 4);
  EXPECT_EQ(c->TotalGpus(), 20);
  EXPECT_TRUE(c->Validate().ok());
  // Whole nodes stay whole; resizing again resets the partial node.
  StatusOr<ClusterSpec> whole = c->WithTotalGpus(24);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->last_node_gpus, 0);
  EXPECT_EQ(whole->TotalGpus(), 24);
}

TEST(ClusterSpecValidate, RejectsALastNodeOutOfRange) {
  ClusterSpec c = Cluster();
  c.last_node_gpus = c.gpus_per_node;
  EXPECT_EQ(ErrorOf(c), "last_node_gpus = " + std::to_string(c.gpus_per_node) +
                            "; must be in [0, gpus_per_node) (0 = the last node is full)");
}

TEST(ClusterSpecWithTotalGpus, LessThanANodeGivesOnePartialNode) {
  StatusOr<ClusterSpec> c = Cluster().WithTotalGpus(4);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->num_nodes, 1);
  EXPECT_EQ(c->gpus_per_node, 4);
}

TEST(ClusterSpecWithTotalGpus, RejectsZero) {
  StatusOr<ClusterSpec> c = Cluster().WithTotalGpus(0);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "total_gpus = 0; must be > 0");
}

}  // namespace
}  // namespace weft::spec

namespace weft::spec {
namespace {

// Headroom: a cluster file without gpu.reserved_memory_bytes gets the documented default
// (2 GiB + 5% of the card); an explicit value overrides it; plans use capacity − reserved.
TEST(ClusterSpec, ReservedMemoryDefaultsToContextBuffersAndFragmentation) {
  auto h100 = LoadCluster("h100");
  ASSERT_TRUE(h100.ok());
  const int64_t gib = int64_t{1} << 30;
  EXPECT_EQ(h100->gpu.reserved_memory_bytes, 2 * gib + 80 * gib / 20);  // 6 GiB of 80
  EXPECT_EQ(h100->gpu.UsableMemoryBytes(), 74 * gib);
  auto own = ParseClusterYaml(
      "num_nodes: 1\ngpus_per_node: 8\ngpu: {name: x, peak_bf16_flops_per_s: 1e15, "
      "hbm_bandwidth_bytes_per_s: 2e12, memory_capacity_bytes: 80GiB, reserved_memory_bytes: "
      "1GiB}\nintra_node: {bandwidth_bytes_per_s: 1e11}\ninter_node: {bandwidth_bytes_per_s: "
      "1e10}\n",
      "c.yaml");
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  EXPECT_EQ(own->gpu.UsableMemoryBytes(), 79 * gib);
  auto bad = ParseClusterYaml(
      "num_nodes: 1\ngpus_per_node: 8\ngpu: {name: x, peak_bf16_flops_per_s: 1e15, "
      "hbm_bandwidth_bytes_per_s: 2e12, memory_capacity_bytes: 80GiB, reserved_memory_bytes: "
      "90GiB}\nintra_node: {bandwidth_bytes_per_s: 1e11}\ninter_node: {bandwidth_bytes_per_s: "
      "1e10}\n",
      "c.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("gpu.reserved_memory_bytes"), std::string::npos)
      << bad.status().message();
  // The emitted YAML carries the value and reads back equal.
  auto back = ParseClusterYaml(ClusterToYaml(*h100), "back.yaml");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, *h100);
}

}  // namespace
}  // namespace weft::spec
