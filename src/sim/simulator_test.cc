#include "weft/sim/simulator.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <string>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "weft/sched/generators.h"

namespace weft::sim {
namespace {

using graph::StageGraph;
using graph::StageId;
using sched::ScheduleKind;
using spec::Pass;
using ::testing::HasSubstr;

constexpr int64_t kGiB = int64_t{1} << 30;

spec::ClusterSpec TestCluster(double link_latency_s = 0) {
  spec::ClusterSpec c;
  c.name = "test";
  c.num_nodes = 4;
  c.gpus_per_node = 8;
  c.gpu.peak_bf16_flops_per_s = 1e15;
  c.gpu.hbm_bandwidth_bytes_per_s = 2e12;
  c.gpu.memory_capacity_bytes = 80 * kGiB;
  c.intra_node = {.bandwidth_bytes_per_s = 200e9, .latency_s = link_latency_s};
  c.inter_node = {.bandwidth_bytes_per_s = 25e9, .latency_s = link_latency_s};
  c.efficiency = {.compute = 1, .memory = 1, .network = 1};
  return c;
}

StageGraph Pipeline(int p, int v, int m, bool split, const sched::VirtualStageCost& cost) {
  auto g = sched::BuildPipelineGraph({.num_groups = p,
                                      .chunks_per_group = v,
                                      .num_microbatches = m,
                                      .split_backward = split,
                                      .costs = {cost}});
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return *std::move(g);
}

Timeline SimulateRule(const StageGraph& g, ScheduleKind kind, const spec::ClusterSpec& c = TestCluster()) {
  auto s = sched::MakeSchedule(kind, g);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  auto t = Simulate(g, *s, c);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return *std::move(t);
}

TEST(OneFOneB, BalancedStagesHaveTextbookBubble) {
  const sched::VirtualStageCost cost{.forward_s = 1e-3, .backward_input_s = 1e-3,
                                     .backward_weight_s = 1e-3};
  for (int p : {1, 2, 4, 8}) {
    for (int m : {1, 3, 8, 32}) {
      const StageGraph g = Pipeline(p, 1, m, false, cost);
      const Timeline t = SimulateRule(g, ScheduleKind::kOneFOneB);
      EXPECT_NEAR(t.bubble_ratio, double(p - 1) / (m + p - 1), 1e-9) << "p=" << p << " m=" << m;
      EXPECT_NEAR(t.iteration_time_s, (m + p - 1) * 3e-3, 1e-12) << "p=" << p << " m=" << m;
      EXPECT_GE(t.iteration_time_s, t.lower_bound_s - 1e-12);
    }
  }
}

TEST(GPipe, TakesAsLongAsOneFOneBButPeaksHigherInMemory) {
  const sched::VirtualStageCost cost{.forward_s = 1e-3, .backward_input_s = 1e-3,
                                     .backward_weight_s = 1e-3, .activation_bytes = kGiB};
  const StageGraph g = Pipeline(4, 1, 16, false, cost);
  const Timeline one = SimulateRule(g, ScheduleKind::kOneFOneB);
  const Timeline gpipe = SimulateRule(g, ScheduleKind::kGPipe);
  EXPECT_NEAR(gpipe.iteration_time_s, one.iteration_time_s, 1e-12);
  EXPECT_EQ(gpipe.groups[0].peak_bytes, 16 * kGiB);  // all microbatches live
  EXPECT_EQ(one.groups[0].peak_bytes, 4 * kGiB);     // p in flight on rank 0
  EXPECT_EQ(one.groups[3].peak_bytes, 1 * kGiB);
  // The memory curve returns to the static level.
  EXPECT_EQ(one.groups[0].memory.back().bytes, 0);
}

TEST(Interleaved, ReducesTheBubbleByAboutTheChunkCount) {
  const int p = 4, m = 16;
  for (int v : {2, 4}) {
    // Same total work per microbatch: each chunk does 1/v of a rank's work.
    const sched::VirtualStageCost whole{.forward_s = 1e-3, .backward_input_s = 1e-3,
                                        .backward_weight_s = 1e-3};
    const sched::VirtualStageCost part{.forward_s = 1e-3 / v, .backward_input_s = 1e-3 / v,
                                       .backward_weight_s = 1e-3 / v};
    const Timeline one = SimulateRule(Pipeline(p, 1, m, false, whole), ScheduleKind::kOneFOneB);
    const Timeline inter =
        SimulateRule(Pipeline(p, v, m, false, part), ScheduleKind::kInterleavedOneFOneB);
    const double work_s = m * 3e-3;
    const double bubble_one_s = one.iteration_time_s - work_s;
    const double bubble_inter_s = inter.iteration_time_s - work_s;
    EXPECT_NEAR(bubble_one_s, (p - 1) * 3e-3, 1e-12);
    // Megatron: interleaving divides the bubble by v.
    EXPECT_NEAR(bubble_one_s / bubble_inter_s, v, 0.05 * v) << "v=" << v;
  }
}

TEST(ZeroBubbleH1, LeavesAboutAThirdOfOneFOneBsBubble) {
  const sched::VirtualStageCost cost{.forward_s = 1e-3, .backward_input_s = 1e-3,
                                     .backward_weight_s = 1e-3, .activation_bytes = kGiB,
                                     .weight_grad_activation_bytes = kGiB / 2};
  for (int p : {4, 8}) {
    const int m = 2 * p;
    const Timeline one = SimulateRule(Pipeline(p, 1, m, false, cost), ScheduleKind::kOneFOneB);
    const Timeline zb = SimulateRule(Pipeline(p, 1, m, true, cost), ScheduleKind::kZeroBubbleH1);
    const double work_s = m * 3e-3;
    const double ratio = (zb.iteration_time_s - work_s) / (one.iteration_time_s - work_s);
    EXPECT_NEAR(ratio, 1.0 / 3.0, 0.05) << "p=" << p;
    // Memory like 1F1B: the deferred W's sit on the later ranks, so no group exceeds the peak of
    // 1F1B's busiest group (rank 0, p microbatches in flight).
    int64_t peak_one = 0, peak_zb = 0;
    for (size_t g = 0; g < zb.groups.size(); ++g) {
      peak_one = std::max(peak_one, one.groups[g].peak_bytes);
      peak_zb = std::max(peak_zb, zb.groups[g].peak_bytes);
    }
    EXPECT_EQ(peak_one, p * kGiB);
    EXPECT_LE(peak_zb, peak_one) << "p=" << p;
  }
}

TEST(Simulate, ChoosesNvlinkInsideANodeAndTheNetworkAcrossNodes) {
  // Two groups of 4 GPUs in node 0, a third group in node 1 (gpus_per_node = 8).
  StageGraph g;
  g.AddGroup({.first_gpu = 0, .num_gpus = 4});
  g.AddGroup({.first_gpu = 4, .num_gpus = 4});
  g.AddGroup({.first_gpu = 8, .num_gpus = 4});
  const StageId a = g.AddStage({.group = 0, .latency_s = 1e-3});
  const StageId b = g.AddStage({.group = 1, .latency_s = 1e-3});
  const StageId c = g.AddStage({.group = 2, .latency_s = 1e-3});
  g.AddEdge(a, b, 200'000'000);  // 1 ms on 200 GB/s NVLink
  g.AddEdge(b, c, 25'000'000);   // 1 ms on 25 GB/s network
  ASSERT_TRUE(g.Finalize().ok());
  const sched::Schedule s{.order = {{a}, {b}, {c}}};
  auto t = Simulate(g, s, TestCluster(/*link_latency_s=*/1e-5));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->transfers.size(), 2u);
  EXPECT_EQ(t->transfers[0].link, LinkKind::kIntraNode);
  EXPECT_EQ(t->transfers[1].link, LinkKind::kInterNode);
  EXPECT_NEAR(t->stages[b].start_s, 2e-3 + 1e-5, 1e-12);
  EXPECT_NEAR(t->stages[c].start_s, 4e-3 + 2e-5, 1e-12);
  EXPECT_NEAR(t->iteration_time_s, 5e-3 + 2e-5, 1e-12);
  EXPECT_NEAR(t->critical_path_s, t->iteration_time_s, 1e-12);
}

TEST(Simulate, SerializesTransfersOnOneDirectedLinkButOverlapsThemWithCompute) {
  StageGraph g;
  g.AddGroup({.first_gpu = 0});
  g.AddGroup({.first_gpu = 8});
  const StageId a0 = g.AddStage({.group = 0, .latency_s = 1e-3});
  const StageId a1 = g.AddStage({.group = 0, .microbatch = 1, .latency_s = 1e-3});
  const StageId b0 = g.AddStage({.group = 1, .latency_s = 0.5e-3});
  const StageId b1 = g.AddStage({.group = 1, .microbatch = 1, .latency_s = 0.5e-3});
  g.AddEdge(a0, b0, 75'000'000);  // 3 ms each on 25 GB/s
  g.AddEdge(a1, b1, 75'000'000);
  ASSERT_TRUE(g.Finalize().ok());
  auto t = Simulate(g, {.order = {{a0, a1}, {b0, b1}}}, TestCluster());
  ASSERT_TRUE(t.ok());
  // a1 computes while a0's transfer is on the wire; a1's transfer waits for the link.
  EXPECT_NEAR(t->stages[a1].start_s, 1e-3, 1e-12);
  EXPECT_NEAR(t->transfers[1].start_s, 4e-3, 1e-12);
  EXPECT_NEAR(t->stages[b1].start_s, 7e-3, 1e-12);
  EXPECT_NEAR(t->iteration_time_s, 7.5e-3, 1e-12);
  // The critical path ignores link contention and the group order: 1 ms + 3 ms + 0.5 ms.
  EXPECT_NEAR(t->critical_path_s, 4.5e-3, 1e-12);
}

TEST(Simulate, AddsRingAllReduceAndOptimizerStepAtTheEndOfEachGroup) {
  StageGraph g;
  // 4 replicas of 2 GPUs, stride 2: all in node 0 → NVLink ring.
  g.AddGroup({.first_gpu = 0, .num_gpus = 2, .dp = 4, .grad_sync_bytes = 400'000'000,
              .optimizer_bytes = 2'000'000'000});
  // 4 replicas of 2 GPUs, stride 8: across nodes → network ring.
  g.AddGroup({.first_gpu = 2, .num_gpus = 2, .dp = 4, .dp_stride_gpus = 8,
              .grad_sync_bytes = 400'000'000});
  const StageId a = g.AddStage({.group = 0, .latency_s = 1e-3});
  const StageId b = g.AddStage({.group = 1, .latency_s = 1e-3});
  ASSERT_TRUE(g.Finalize().ok());
  auto t = Simulate(g, {.order = {{a}, {b}}}, TestCluster());
  ASSERT_TRUE(t.ok());
  // 2·(d−1)/d · 400 MB = 600 MB: 3 ms on NVLink, 24 ms on the network; optimizer 2 GB / 2 TB/s.
  EXPECT_NEAR(t->groups[0].grad_sync_s, 3e-3, 1e-12);
  EXPECT_NEAR(t->groups[0].optimizer_s, 1e-3, 1e-12);
  EXPECT_NEAR(t->groups[1].grad_sync_s, 24e-3, 1e-12);
  EXPECT_NEAR(t->iteration_time_s, 25e-3, 1e-12);
  EXPECT_NEAR(t->busiest_group_work_s, 25e-3, 1e-12);
  EXPECT_EQ(t->num_gpus, 16);
  auto no_tail = Simulate(g, {.order = {{a}, {b}}}, TestCluster(),
                          {.include_grad_sync = false, .include_optimizer_step = false});
  ASSERT_TRUE(no_tail.ok());
  EXPECT_NEAR(no_tail->iteration_time_s, 1e-3, 1e-12);
}

// The inter-module communicator's gather: 4 encoder groups (one per node) each send 250 MB to
// one LLM group at once. Per pair they would overlap (10 ms each on the network); the LLM
// group's network ingress takes them one after the other: arrivals at 10, 20, 30, 40 ms.
TEST(Simulate, AGatherQueuesOnTheReceiversIngressPort) {
  StageGraph g;
  std::vector<StageId> encoders;
  for (int e = 0; e < 4; ++e) g.AddGroup({.first_gpu = 8 * e, .num_gpus = 1});
  g.AddGroup({.first_gpu = 1, .num_gpus = 1});  // node 0: NVLink from group 0, network else
  for (int e = 0; e < 4; ++e) encoders.push_back(g.AddStage({.group = e, .latency_s = 0}));
  const StageId llm = g.AddStage({.group = 4, .latency_s = 1e-3});
  for (int e = 1; e < 4; ++e) g.AddEdge(encoders[e], llm, 250'000'000);
  ASSERT_TRUE(g.Finalize().ok());
  auto t = Simulate(g, {.order = {{encoders[0]}, {encoders[1]}, {encoders[2]}, {encoders[3]}, {llm}}},
                    TestCluster(), {.include_grad_sync = false, .include_optimizer_step = false});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  std::vector<double> arrivals;
  for (const auto& tr : t->transfers) arrivals.push_back(tr.end_s);
  std::sort(arrivals.begin(), arrivals.end());
  ASSERT_EQ(arrivals.size(), 3u);
  EXPECT_NEAR(arrivals[0], 10e-3, 1e-12);
  EXPECT_NEAR(arrivals[1], 20e-3, 1e-12);
  EXPECT_NEAR(arrivals[2], 30e-3, 1e-12);
  EXPECT_NEAR(t->iteration_time_s, 31e-3, 1e-12);
  // A scatter queues on the sender's egress the same way.
  StageGraph h;
  for (int e = 0; e < 3; ++e) h.AddGroup({.first_gpu = 8 * e, .num_gpus = 1});
  const StageId src = h.AddStage({.group = 0, .latency_s = 0});
  const StageId d1 = h.AddStage({.group = 1, .latency_s = 0});
  const StageId d2 = h.AddStage({.group = 2, .latency_s = 0});
  h.AddEdge(src, d1, 250'000'000);
  h.AddEdge(src, d2, 250'000'000);
  ASSERT_TRUE(h.Finalize().ok());
  auto u = Simulate(h, {.order = {{src}, {d1}, {d2}}}, TestCluster(),
                    {.include_grad_sync = false, .include_optimizer_step = false});
  ASSERT_TRUE(u.ok());
  EXPECT_NEAR(u->iteration_time_s, 20e-3, 1e-12);
}

// Unfolded replicas: a GradSync set starts when its slowest member finished and takes the ring
// time over the members; every member ends together.
TEST(Simulate, GradSyncSetsWaitForTheirSlowestMember) {
  StageGraph g;
  g.AddGroup({.first_gpu = 0, .num_gpus = 1, .optimizer_bytes = 2'000'000'000});
  g.AddGroup({.first_gpu = 1, .num_gpus = 1, .optimizer_bytes = 2'000'000'000});
  const StageId a = g.AddStage({.group = 0, .latency_s = 1e-3});
  const StageId b = g.AddStage({.group = 1, .latency_s = 5e-3});
  g.AddGradSync({.module = 0, .groups = {0, 1}, .bytes = 400'000'000});
  ASSERT_TRUE(g.Finalize().ok());
  auto t = Simulate(g, {.order = {{a}, {b}}}, TestCluster());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  // 2·(2−1)/2 · 400 MB on NVLink at 200 GB/s = 2 ms, from 5 ms; optimizer 1 ms.
  for (int k = 0; k < 2; ++k) {
    EXPECT_NEAR(t->groups[k].grad_sync_start_s, 5e-3, 1e-12);
    EXPECT_NEAR(t->groups[k].grad_sync_s, 2e-3, 1e-12);
    EXPECT_NEAR(t->groups[k].end_s, 8e-3, 1e-12);
  }
  EXPECT_NEAR(t->iteration_time_s, 8e-3, 1e-12);
  EXPECT_LE(t->lower_bound_s, t->iteration_time_s);
  // A folded group in a set is refused.
  StageGraph bad;
  bad.AddGroup({.num_gpus = 1, .dp = 2});
  bad.AddGradSync({.module = 0, .groups = {0}, .bytes = 1});
  EXPECT_FALSE(bad.Finalize().ok());
}

// One group of `gpus_per_replica` GPUs folded `dp` times: forward F0, F1 then backward B1, B0
// (1 s each); microbatch 0 offloads `bytes` per GPU (D2H after F0, H2D before B0).
StageGraph OffloadingGroup(int dp, int64_t bytes) {
  StageGraph g;
  g.AddGroup({.first_gpu = 0, .num_gpus = 1, .dp = dp});
  for (int mb : {0, 1}) {
    g.AddStage({.group = 0, .microbatch = mb, .pass = Pass::kForward, .latency_s = 1.0,
                .offload_bytes = mb == 0 ? bytes : 0});
  }
  for (int mb : {1, 0}) {
    g.AddStage({.group = 0, .microbatch = mb, .pass = Pass::kBackward, .latency_s = 1.0,
                .offload_bytes = mb == 0 ? bytes : 0});
  }
  g.AddEdge(0, 3);
  g.AddEdge(1, 2);
  g.AddEdge(0, 1);
  g.AddEdge(2, 3);
  EXPECT_TRUE(g.Finalize().ok());
  return g;
}

spec::ClusterSpec OffloadCluster() {
  spec::ClusterSpec c = TestCluster();
  c.host_link_bandwidth_bytes_per_s = 50e9;
  c.host_bandwidth_bytes_per_s_per_node = 100e9;  // two GPUs' worth for the node's eight
  c.host_memory_bytes_per_node = 1000 * kGiB;
  return c;
}

TEST(Offload, CopiesOverlapComputeUntilTheStreamCannotKeepUp) {
  const auto cluster = OffloadCluster();
  sched::Schedule order;
  order.order = {{0, 1, 2, 3}};
  // 25 GB per copy at 50 GB/s: 0.5 s, hidden under F1 (D2H) and B1 (H2D prefetch).
  auto hidden = Simulate(OffloadingGroup(1, 25'000'000'000), order, cluster);
  ASSERT_TRUE(hidden.ok()) << hidden.status().ToString();
  EXPECT_NEAR(hidden->iteration_time_s, 4.0, 1e-9);
  EXPECT_EQ(hidden->groups[0].offload_wait_s, 0);
  EXPECT_EQ(hidden->groups[0].offload_bytes, int64_t{25'000'000'000});
  // 100 GB per copy: 2 s each. D2H [1,3); the prefetch, issued when B1 starts (2 s), queues
  // behind it: H2D [3,5); B0 waits 2 s: [5,6).
  auto slow = Simulate(OffloadingGroup(1, 100'000'000'000), order, cluster);
  ASSERT_TRUE(slow.ok());
  EXPECT_NEAR(slow->stages[3].start_s, 5.0, 1e-9);
  EXPECT_NEAR(slow->groups[0].offload_wait_s, 2.0, 1e-9);
  EXPECT_NEAR(slow->iteration_time_s, 6.0, 1e-9);
  EXPECT_EQ(slow->host_peak_bytes_per_node, int64_t{100'000'000'000});
  EXPECT_TRUE(slow->oom.empty());
}

TEST(Offload, AllGpusOfANodeOffloadingShareItsHostBandwidth) {
  const auto cluster = OffloadCluster();
  sched::Schedule order;
  order.order = {{0, 1, 2, 3}};
  const int64_t bytes = 25'000'000'000;
  auto alone = Simulate(OffloadingGroup(1, bytes), order, cluster);
  auto all = Simulate(OffloadingGroup(8, bytes), order, cluster);  // 8 replicas in one node
  ASSERT_TRUE(alone.ok() && all.ok());
  // 8 GPUs copying share 100 GB/s: 12.5 GB/s each, 2 s per copy instead of 0.5 s.
  EXPECT_GT(all->iteration_time_s, alone->iteration_time_s + 1.0);
  EXPECT_GT(all->groups[0].offload_wait_s, 0);
  EXPECT_EQ(alone->groups[0].offload_wait_s, 0);
  // And the host holds 8 GPUs' copies.
  EXPECT_EQ(all->host_peak_bytes_per_node, 8 * alone->host_peak_bytes_per_node);
}

TEST(Offload, ANodeOverItsHostMemoryIsOutOfMemory) {
  spec::ClusterSpec cluster = OffloadCluster();
  cluster.host_memory_bytes_per_node = 20'000'000'000;  // less than the 25-GB copy
  sched::Schedule order;
  order.order = {{0, 1, 2, 3}};
  auto t = Simulate(OffloadingGroup(1, 25'000'000'000), order, cluster);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->oom.size(), 1u);
  EXPECT_EQ(t->oom[0].host_node, 0);
  EXPECT_EQ(t->oom[0].peak_bytes, 25'000'000'000);
  EXPECT_THAT(t->BriefReport(), HasSubstr("OUT OF HOST MEMORY: node 0"));
}

TEST(Offload, NodesHoldingTheSameGpusCopyAlikeAndEachReportsItsHostMemory) {
  const auto cluster = OffloadCluster();  // 8 GPUs per node
  sched::Schedule order;
  order.order = {{0, 1, 2, 3}};
  const int64_t bytes = 25'000'000'000;
  auto one_node = Simulate(OffloadingGroup(8, bytes), order, cluster);
  // 16 replicas: nodes 0 and 1 with 8 copying GPUs each; 12: node 0 with 8, node 1 with 4.
  auto two_full = Simulate(OffloadingGroup(16, bytes), order, cluster);
  auto full_and_half = Simulate(OffloadingGroup(12, bytes), order, cluster);
  ASSERT_TRUE(one_node.ok() && two_full.ok() && full_and_half.ok());
  // The slowest node sets the copy rate: 8 GPUs sharing it in every case.
  EXPECT_EQ(two_full->iteration_time_s, one_node->iteration_time_s);
  EXPECT_EQ(full_and_half->iteration_time_s, one_node->iteration_time_s);
  EXPECT_EQ(two_full->host_peak_bytes_per_node, 8 * bytes);
  EXPECT_EQ(full_and_half->host_peak_bytes_per_node, 8 * bytes);
  // Host memory for 6 GPUs' copies: both full nodes are over it, and only the full one of the
  // other pair; each names its node and peak.
  spec::ClusterSpec small = cluster;
  small.host_memory_bytes_per_node = 6 * bytes;
  auto two_over = Simulate(OffloadingGroup(16, bytes), order, small);
  auto one_over = Simulate(OffloadingGroup(12, bytes), order, small);
  ASSERT_TRUE(two_over.ok() && one_over.ok());
  ASSERT_EQ(two_over->oom.size(), 2u);
  EXPECT_EQ(two_over->oom[0].host_node, 0);
  EXPECT_EQ(two_over->oom[1].host_node, 1);
  EXPECT_EQ(two_over->oom[1].peak_bytes, 8 * bytes);
  ASSERT_EQ(one_over->oom.size(), 1u);
  EXPECT_EQ(one_over->oom[0].host_node, 0);
  EXPECT_EQ(one_over->oom[0].peak_bytes, 8 * bytes);
}

TEST(Simulate, ComputesMfuFromStageFlopsTimesReplicas) {
  StageGraph g;
  g.AddGroup({.num_gpus = 2, .dp = 2});
  g.AddStage({.latency_s = 1e-3, .flops = 1e12});
  ASSERT_TRUE(g.Finalize().ok());
  auto t = Simulate(g, {.order = {{0}}}, TestCluster(), {.samples_per_iteration = 8});
  ASSERT_TRUE(t.ok());
  // 2 replicas × 1e12 FLOPs over 4 GPUs × 1e15 FLOP/s × 1 ms.
  EXPECT_NEAR(t->model_flops, 2e12, 1);
  EXPECT_NEAR(t->mfu, 0.5, 1e-12);
  EXPECT_NEAR(t->samples_per_s, 8000, 1e-6);
  EXPECT_THAT(t->BriefReport(), HasSubstr("MFU 50.0%"));
}

TEST(Simulate, ReportsADeadlockNamingTheGroupAndStage) {
  StageGraph g;
  g.AddGroup({});
  g.AddGroup({.first_gpu = 1});
  const StageId a0 = g.AddStage({.group = 0, .latency_s = 1e-3});
  const StageId a1 = g.AddStage({.group = 0, .microbatch = 1, .latency_s = 1e-3});
  const StageId b0 = g.AddStage({.group = 1, .latency_s = 1e-3});
  const StageId b1 = g.AddStage({.group = 1, .microbatch = 1, .latency_s = 1e-3});
  g.AddEdge(a0, b1);
  g.AddEdge(b0, a1);
  ASSERT_TRUE(g.Finalize().ok());
  auto t = Simulate(g, {.order = {{a1, a0}, {b1, b0}}}, TestCluster());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(t.status().message(), HasSubstr("deadlock"));
  EXPECT_THAT(t.status().message(),
              HasSubstr("group 0 waits at order[0][0] = stage 1 (g0 F mb1.0 c0 m0) for stage 2 "
                        "(g1 F mb0.0 c0 m0) of group 1"));
}

TEST(Simulate, ListsGroupsOverCapacityOrFailsWhenAsked) {
  const sched::VirtualStageCost cost{.activation_bytes = 30 * kGiB};
  const StageGraph g = Pipeline(2, 1, 4, false, cost);
  auto s = sched::MakeSchedule(ScheduleKind::kOneFOneB, g);
  ASSERT_TRUE(s.ok());
  auto t = Simulate(g, *s, TestCluster());
  ASSERT_TRUE(t.ok());
  // Rank 0 holds 2 microbatches (60 GiB, fits); GPipe would hold 4.
  EXPECT_TRUE(t->oom.empty());
  auto gp = sched::MakeSchedule(ScheduleKind::kGPipe, g);
  auto tg = Simulate(g, *gp, TestCluster());
  ASSERT_TRUE(tg.ok());
  ASSERT_EQ(tg->oom.size(), 2u);
  EXPECT_EQ(tg->oom[0].group, 0);
  EXPECT_EQ(tg->oom[0].peak_bytes, 120 * kGiB);
  EXPECT_EQ(tg->oom[0].capacity_bytes, 80 * kGiB);
  EXPECT_THAT(tg->BriefReport(), HasSubstr("OUT OF MEMORY: group 0 peaks at 120.00 GiB"));
  auto fail = Simulate(g, *gp, TestCluster(), {.fail_on_oom = true});
  EXPECT_EQ(fail.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(fail.status().message(), HasSubstr("group 0 (pp0) peaks at 120.00 GiB"));
}

TEST(Simulate, RejectsAnInvalidScheduleOrCluster) {
  const StageGraph g = Pipeline(2, 1, 1, false, {});
  EXPECT_THAT(Simulate(g, {.order = {{0}}}, TestCluster()).status().message(),
              HasSubstr("schedule: order.size() = 1"));
  spec::ClusterSpec c = TestCluster();
  c.gpus_per_node = 0;
  auto s = sched::MakeSchedule(ScheduleKind::kOneFOneB, g);
  EXPECT_THAT(Simulate(g, *s, c).status().message(), HasSubstr("cluster.gpus_per_node = 0"));
}

// ---- property: the makespan never beats either lower bound ---------------------------------

struct RandomInstance {
  StageGraph graph;
  sched::Schedule schedule;
  std::string description;
};

// A random DAG (edges only from lower to higher ids) on random groups; each group runs its
// stages in a random topological order (a random linear extension), so there is no deadlock.
RandomInstance MakeRandomInstance(uint32_t seed) {
  std::mt19937 rng(seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  RandomInstance inst;
  const int num_groups = uniform(1, 6);
  const int n = uniform(1, 40);
  for (int gi = 0; gi < num_groups; ++gi) {
    inst.graph.AddGroup({.first_gpu = uniform(0, 31), .num_gpus = 1, .dp = uniform(1, 3),
                         .dp_stride_gpus = 1, .grad_sync_bytes = uniform(0, 3) * 10'000'000,
                         .optimizer_bytes = uniform(0, 2) * 1'000'000'000});
  }
  inst.description = fmt::format("seed {}: {} groups, {} stages; edges:", seed, num_groups, n);
  for (int i = 0; i < n; ++i) {
    inst.graph.AddStage({.group = uniform(0, num_groups - 1), .microbatch = i,
                         .latency_s = uniform(0, 100) * 1e-4});
  }
  for (int j = 1; j < n; ++j) {
    const int k = uniform(0, 3);
    for (int e = 0; e < k; ++e) {
      const int i = uniform(0, j - 1);
      const int64_t bytes = int64_t{uniform(0, 50)} * 1'000'000;
      inst.graph.AddEdge(i, j, bytes);
      inst.description += fmt::format(" {}->{}({}MB)", i, j, bytes / 1'000'000);
    }
  }
  EXPECT_TRUE(inst.graph.Finalize().ok());
  // Random linear extension: repeatedly pick a random ready stage.
  std::vector<int> indegree(n);
  for (int s = 0; s < n; ++s) indegree[s] = static_cast<int>(inst.graph.in_edges(s).size());
  std::vector<StageId> ready;
  for (int s = 0; s < n; ++s) {
    if (indegree[s] == 0) ready.push_back(s);
  }
  inst.schedule.order.resize(num_groups);
  while (!ready.empty()) {
    const int pick = uniform(0, static_cast<int>(ready.size()) - 1);
    const StageId s = ready[pick];
    ready.erase(ready.begin() + pick);
    inst.schedule.order[inst.graph.stage(s).group].push_back(s);
    for (auto e : inst.graph.out_edges(s)) {
      if (--indegree[inst.graph.edge(e).to] == 0) ready.push_back(inst.graph.edge(e).to);
    }
  }
  inst.description += "; groups:";
  for (const auto& s : inst.graph.stages()) inst.description += fmt::format(" {}", s.group);
  return inst;
}

TEST(SimulateProperty, MakespanNeverBeatsEitherLowerBound) {
  for (uint32_t seed = 1; seed <= 500; ++seed) {
    RandomInstance inst = MakeRandomInstance(seed);
    auto t = Simulate(inst.graph, inst.schedule, TestCluster(/*link_latency_s=*/1e-5));
    ASSERT_TRUE(t.ok()) << inst.description << ": " << t.status().ToString();
    EXPECT_GE(t->iteration_time_s, t->busiest_group_work_s - 1e-12) << inst.description;
    EXPECT_GE(t->iteration_time_s, t->critical_path_s - 1e-12) << inst.description;
    // Stages respect their dependencies and never overlap on a group.
    for (const auto& e : inst.graph.edges()) {
      EXPECT_LE(t->stages[e.from].end_s, t->stages[e.to].start_s + 1e-15) << inst.description;
    }
    for (const auto& order : inst.schedule.order) {
      for (size_t i = 1; i < order.size(); ++i) {
        EXPECT_LE(t->stages[order[i - 1]].end_s, t->stages[order[i]].start_s + 1e-15)
            << inst.description;
      }
    }
  }
}

TEST(SimulateProperty, GeneratedPipelinesStayAboveTheBoundsAndAreDeterministic) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 60; ++trial) {
    const int p = 1 + rng() % 6, v = 1 + rng() % 3, m = p * (1 + rng() % 4);
    std::vector<sched::VirtualStageCost> costs(p * v);
    for (auto& c : costs) {
      c.forward_s = (1 + rng() % 10) * 1e-4;
      c.backward_input_s = (1 + rng() % 10) * 1e-4;
      c.backward_weight_s = (1 + rng() % 10) * 1e-4;
      c.send_bytes = (rng() % 5) * 10'000'000;
    }
    for (bool split : {false, true}) {
      auto g = sched::BuildPipelineGraph({.num_groups = p, .chunks_per_group = v,
                                          .num_microbatches = m, .split_backward = split,
                                          .costs = costs, .gpus_per_group = 4});
      ASSERT_TRUE(g.ok());
      for (ScheduleKind k : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB,
                             ScheduleKind::kInterleavedOneFOneB, ScheduleKind::kZeroBubbleH1}) {
        auto s = sched::MakeSchedule(k, *g);
        if (!s.ok()) continue;
        auto t1 = Simulate(*g, *s, TestCluster(1e-5));
        auto t2 = Simulate(*g, *s, TestCluster(1e-5));
        const std::string what = fmt::format("trial {} {} p={} v={} m={} split={}", trial,
                                             sched::ScheduleKindName(k), p, v, m, split);
        ASSERT_TRUE(t1.ok()) << what << ": " << t1.status().ToString();
        EXPECT_GE(t1->iteration_time_s, t1->lower_bound_s - 1e-12) << what;
        EXPECT_EQ(t1->iteration_time_s, t2->iteration_time_s) << what;
      }
    }
  }
}

}  // namespace
}  // namespace weft::sim
