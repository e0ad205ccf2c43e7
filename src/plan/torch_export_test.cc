#include "weft/plan/torch_export.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_plans.h"
#include "weft/graph/stage_graph.h"
#include "weft/plan/compiler.h"
#include "weft/sched/generators.h"
#include "weft/sim/simulator.h"

namespace weft::plan {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kHidden = 1024;

spec::ClusterSpec OneNodeCluster() {
  spec::ClusterSpec c;
  c.name = "test";
  c.num_nodes = 1;
  c.gpus_per_node = 8;
  c.gpu.peak_bf16_flops_per_s = 1e15;
  c.gpu.hbm_bandwidth_bytes_per_s = 2e12;
  c.gpu.memory_capacity_bytes = 80 * kGiB;
  c.intra_node = {.bandwidth_bytes_per_s = 200e9, .latency_s = 1e-5};
  c.inter_node = {.bandwidth_bytes_per_s = 25e9, .latency_s = 1e-5};
  c.efficiency = {.compute = 1, .memory = 1, .network = 1};
  return c;
}

// Megatron-style slot sharing: the ViT and the projector both run in slot (chunk) 0 of group
// `encoder_group`, passing data through a local buffer; the LLM runs in slot 0 of `llm_group`.
graph::StageGraph MultiModuleSlotGraph(int m, int encoder_group = 0, int llm_group = 1) {
  graph::StageGraph g;
  for (int i = 0; i < 2; ++i) {
    g.AddGroup({.first_gpu = i, .num_gpus = 1, .static_bytes = kGiB, .label = fmt::format("g{}", i)});
  }
  g.SetModuleNames({"vit", "proj", "llm"});
  const int group_of[] = {encoder_group, encoder_group, llm_group};
  const int64_t bytes = 128 * kHidden * 2;
  for (int mb = 0; mb < m; ++mb) {
    graph::StageId f[3], b[3];
    for (int i = 0; i < 3; ++i) {
      f[i] = g.AddStage({.group = group_of[i],
                         .module = i,
                         .chunk = 0,
                         .microbatch = mb,
                         .pass = spec::Pass::kForward,
                         .latency_s = 1e-3,
                         .activation_alloc_bytes = kGiB / 8});
    }
    for (int i = 2; i >= 0; --i) {
      b[i] = g.AddStage({.group = group_of[i],
                         .module = i,
                         .chunk = 0,
                         .microbatch = mb,
                         .pass = spec::Pass::kBackward,
                         .latency_s = 2e-3,
                         .activation_free_bytes = kGiB / 8});
    }
    for (int i = 0; i < 3; ++i) g.AddEdge(f[i], b[i]);
    for (int i = 0; i < 2; ++i) {
      g.AddEdge(f[i], f[i + 1], bytes);
      g.AddEdge(b[i + 1], b[i], bytes);
    }
  }
  EXPECT_TRUE(g.Finalize().ok());
  return g;
}

StatusOr<ExecutionPlan> CompileOneFOneB(const graph::StageGraph& graph) {
  WEFT_ASSIGN_OR_RETURN(auto schedule, sched::MakeSchedule(sched::ScheduleKind::kOneFOneB, graph));
  WEFT_ASSIGN_OR_RETURN(auto timeline, sim::Simulate(graph, schedule, OneNodeCluster()));
  return CompilePlan(graph, schedule, timeline,
                     {.strategy = "megatron-1f1b", .hidden_size_by_module = {kHidden, kHidden, kHidden}});
}

TEST(TorchCsv, HandMadeOneFOneBIsExportedCellByCell) {
  auto rows = ExportTorchActions(testing::TwoRankOneFOneB());
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_THAT((*rows)[0], ElementsAre("0F0", "0SEND_F0", "0F1", "0SEND_F1", "0RECV_B0", "0B0",
                                      "0RECV_B1", "0B1"));
  EXPECT_THAT((*rows)[1], ElementsAre("1RECV_F0", "1F0", "1B0", "1SEND_B0", "1RECV_F1", "1F1",
                                      "1B1", "1SEND_B1"));
  auto csv = ExportTorchCsv(testing::TwoRankOneFOneB());
  ASSERT_TRUE(csv.ok());
  EXPECT_EQ(*csv,
            "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
            "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n");
}

TEST(TorchCsv, ComputeOnlyFormatDropsCommunication) {
  auto csv = ExportTorchCsv(testing::TwoRankOneFOneB(), {.format = TorchCsvFormat::kComputeOnly});
  ASSERT_TRUE(csv.ok());
  EXPECT_EQ(*csv, "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
}

TEST(TorchCsv, StageMapFollowsTheDataChain) {
  auto map = DeriveTorchStageMap(testing::TwoRankOneFOneB());
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  ASSERT_EQ(map->stages.size(), 2u);
  EXPECT_EQ(map->stages[0].rank, 0);
  EXPECT_EQ(map->stages[1].rank, 1);
  EXPECT_EQ(map->num_microbatches, 2);
}

TEST(TorchCsv, SubMicrobatchesAreRefused) {
  ExecutionPlan plan = testing::TwoRankOneFOneB();
  for (Action& a : plan.ranks[1].actions) {  // rank 1's stages of mb 0 become mb 0.1
    if (a.kind != ActionKind::kAllReduceGrads && a.stage.microbatch == 0)
      a.stage.sub_microbatch = 1;
  }
  testing::SetBufferEnds(plan);
  auto csv = ExportTorchCsv(plan);
  ASSERT_FALSE(csv.ok());
  EXPECT_EQ(csv.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(csv.status().message(),
            "cannot export to torch CSV: rank 1 action 2 (forward m0 c0 mb0.1): sub-microbatches "
            "have no equivalent in torch's pipelining IR");
}

TEST(TorchCsv, MissingBackwardIsRefused) {
  ExecutionPlan plan = testing::TwoRankOneFOneB();
  // Make rank 0's backward of microbatch 1 a forward-only plan by dropping it (and its inputs).
  auto& a = plan.ranks[0].actions;
  a[10] = testing::Compute(ActionKind::kBackward, 0, {31}, {});  // B0 twice, B1 never
  testing::SetBufferEnds(plan);
  auto csv = ExportTorchCsv(plan);
  ASSERT_FALSE(csv.ok());
  // The validator refuses it first: a stage runs exactly once.
  EXPECT_THAT(csv.status().message(),
              HasSubstr("rank 0 action 10 (backward m0 c0 mb0): the stage's backward already ran "
                        "at action 6"));
}

TEST(TorchCsv, InvalidPlanIsRefusedWithTheValidatorsReason) {
  ExecutionPlan plan = testing::TwoRankOneFOneB();
  plan.ranks[1].buffers[1].tensor.shape = {1};
  auto csv = ExportTorchCsv(plan);
  ASSERT_FALSE(csv.ok());
  EXPECT_THAT(csv.status().message(), StartsWith("plan is invalid: rank 1 action 6"));
}

TEST(TorchCsv, ModulesSharingASlotBecomeOneStageWithOneCellPerPass) {
  auto plan = CompileOneFOneB(MultiModuleSlotGraph(3));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto map = DeriveTorchStageMap(*plan);
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  ASSERT_EQ(map->stages.size(), 2u);
  EXPECT_EQ(map->stages[0].rank, 0);
  EXPECT_EQ(map->stages[0].chunk, 0);
  EXPECT_THAT(map->stages[0].modules, ElementsAre(0, 1));  // vit + proj
  EXPECT_EQ(map->stages[1].rank, 1);
  EXPECT_THAT(map->stages[1].modules, ElementsAre(2));
  EXPECT_EQ(map->num_microbatches, 3);

  auto rows = ExportTorchActions(*plan);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 2u);
  // 1F1B on 2 stages, 3 microbatches; vit→proj stays local (no cell), proj→llm is the only
  // transfer. The compiler posts a receive as soon as the simulated sender is done, so some
  // RECV cells come one compute early (e.g. 0RECV_B1 before 0F2): still before their consumer.
  EXPECT_THAT((*rows)[0], ElementsAre("0F0", "0SEND_F0", "0F1", "0SEND_F1", "0RECV_B0", "0B0",
                                      "0RECV_B1", "0F2", "0SEND_F2", "0B1", "0RECV_B2", "0B2"));
  EXPECT_THAT((*rows)[1], ElementsAre("1RECV_F0", "1F0", "1RECV_F1", "1B0", "1SEND_B0", "1F1",
                                      "1B1", "1SEND_B1", "1RECV_F2", "1F2", "1B2", "1SEND_B2"));
  auto compute_only = ExportTorchCsv(*plan, {.format = TorchCsvFormat::kComputeOnly});
  ASSERT_TRUE(compute_only.ok());
  EXPECT_EQ(*compute_only, "0F0,0F1,0B0,0F2,0B1,0B2\n1F0,1B0,1F1,1B1,1F2,1B2\n");
}

TEST(TorchCsv, AChainNotNumberedRankPlusChunkTimesPIsRefused) {
  // The encoders' slot is on rank 1 and the LLM on rank 0: stage 0 would sit on rank 1.
  auto plan = CompileOneFOneB(MultiModuleSlotGraph(2, /*encoder_group=*/1, /*llm_group=*/0));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto csv = ExportTorchCsv(*plan);
  ASSERT_FALSE(csv.ok());
  EXPECT_EQ(csv.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(csv.status().message(),
            "cannot export to torch CSV: stage 0 of the chain is (rank 1, modules 0 'vit' + 1 "
            "'proj', chunk 0), but torch's loop placement puts stage 0 on rank 0 as its chunk 0 "
            "(stage = rank + chunk·P, P = 2)");
}

}  // namespace
}  // namespace weft::plan
