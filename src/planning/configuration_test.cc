#include "weft/planning/configuration.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace weft::planning {
namespace {

// vision (24 layers) and llm (32 layers); only the names and the microbatch count matter here.
Job TwoModuleJob() {
  Job job;
  job.model.name = "toy";
  spec::ModuleSpec vision;
  vision.name = "vision";
  vision.kind = spec::ModuleKind::kVit;
  vision.num_layers = 24;
  spec::ModuleSpec llm;
  llm.name = "llm";
  llm.kind = spec::ModuleKind::kLlm;
  llm.num_layers = 32;
  job.model.modules = {vision, llm};
  job.parallel.num_microbatches = 8;
  return job;
}

// Folded: vision on g0, llm split 16 + 16 over g0 and g1; both groups carry DP 2.
StaticPlan FoldedPlan() {
  StaticPlan plan;
  Placement& p = plan.placement;
  p.groups = {{.first_gpu = 0, .num_gpus = 4, .dp = 2}, {.first_gpu = 4, .num_gpus = 4, .dp = 2}};
  p.chunks = {{.module = 0, .first_layer = 0, .num_layers = 24, .group = 0, .chunk = 0},
              {.module = 1, .first_layer = 16, .num_layers = 16, .group = 1, .chunk = 0},
              {.module = 1, .first_layer = 0, .num_layers = 16, .group = 0, .chunk = 1}};
  p.parallel = {{.module = "vision", .tp = 1, .dp = 2}, {.module = "llm", .tp = 4, .dp = 2}};
  plan.recompute = {spec::Recompute::kNone, spec::Recompute::kSelective};
  return plan;
}

TEST(DescribeConfiguration, FoldedPlacementPerModuleInModelOrderWithLayersInLayerOrder) {
  const report::StrategyConfiguration c = DescribeConfiguration(TwoModuleJob(), FoldedPlan());
  ASSERT_EQ(c.modules.size(), 2u);
  const report::ModuleConfiguration& llm = c.modules[1];
  EXPECT_EQ(llm.module, "llm");
  EXPECT_EQ(llm.tp, 4);
  EXPECT_EQ(llm.cp, 1);
  EXPECT_EQ(llm.pp, 2);
  EXPECT_EQ(llm.dp, 2);
  EXPECT_EQ(llm.layers_per_stage, (std::vector<int>{16, 16}));
  EXPECT_EQ(llm.chunks_per_rank, 1);
  EXPECT_EQ(llm.recompute, "selective");  // no iteration seen: the static plan's
  EXPECT_EQ(c.microbatches_min, 8);       // the job's (the static plan sets none)
  EXPECT_EQ(c.Brief(),
            "vision tp1 pp1 dp2 [24] recompute none | llm tp4 pp2 dp2 [16,16] recompute "
            "selective | mb 8");
  StaticPlan own = FoldedPlan();
  own.num_microbatches = 6;
  own.recompute.clear();
  EXPECT_EQ(DescribeConfiguration(TwoModuleJob(), own).Brief(),
            "vision tp1 pp1 dp2 [24] | llm tp4 pp2 dp2 [16,16] | mb 6 | recompute none");
}

TEST(DescribeConfiguration, InterleavedChunksReplicatedModulesAndUnfoldedReplicas) {
  StaticPlan vpp = FoldedPlan();
  vpp.placement.chunks = {
      {.module = 0, .num_layers = 24, .group = 0},
      {.module = 1, .first_layer = 0, .num_layers = 8, .group = 0},
      {.module = 1, .first_layer = 8, .num_layers = 8, .group = 1},
      {.module = 1, .first_layer = 16, .num_layers = 8, .group = 0, .chunk = 1},
      {.module = 1, .first_layer = 24, .num_layers = 8, .group = 1, .chunk = 1}};
  const report::ModuleConfiguration llm = DescribeConfiguration(TwoModuleJob(), vpp).modules[1];
  EXPECT_EQ(llm.pp, 2);
  EXPECT_EQ(llm.chunks_per_rank, 2);
  EXPECT_EQ(llm.layers_per_stage, (std::vector<int>{8, 8, 8, 8}));
  // Uneven (Megatron's chain split over P·2 stages): the most chunks on one group count.
  vpp.placement.chunks.pop_back();
  vpp.placement.chunks.back().num_layers = 16;
  const report::ModuleConfiguration uneven = DescribeConfiguration(TwoModuleJob(), vpp).modules[1];
  EXPECT_EQ(uneven.pp, 2);
  EXPECT_EQ(uneven.chunks_per_rank, 2);
  EXPECT_EQ(uneven.layers_per_stage, (std::vector<int>{8, 8, 16}));

  StaticPlan replicated = FoldedPlan();
  replicated.placement.chunks.push_back({.module = 0, .num_layers = 24, .group = 1});
  replicated.placement.replicated = {true, false};
  const report::ModuleConfiguration vision =
      DescribeConfiguration(TwoModuleJob(), replicated).modules[0];
  EXPECT_EQ(vision.pp, 1);
  EXPECT_EQ(vision.copies, 2);
  EXPECT_EQ(vision.layers_per_stage, (std::vector<int>{24}));

  // Unfolded: vision has 3 replicas on groups of its own, llm 2 (each on one group, dp 1).
  StaticPlan unfolded;
  Placement& p = unfolded.placement;
  p.unfolded = true;
  for (int g = 0; g < 5; ++g) p.groups.push_back({.first_gpu = g, .num_gpus = 1, .dp = 1});
  for (int r = 0; r < 3; ++r)
    p.chunks.push_back({.module = 0, .num_layers = 24, .group = r, .replica = r});
  for (int r = 0; r < 2; ++r) {
    p.chunks.push_back({.module = 1, .num_layers = 32, .group = 3 + r, .replica = r});
  }
  p.parallel = {{.module = "vision", .dp = 3}, {.module = "llm", .dp = 2}};
  const report::StrategyConfiguration c = DescribeConfiguration(TwoModuleJob(), unfolded);
  EXPECT_EQ(c.modules[0].dp, 3);
  EXPECT_EQ(c.modules[0].pp, 1);
  EXPECT_EQ(c.modules[1].dp, 2);
  EXPECT_EQ(c.modules[1].layers_per_stage, (std::vector<int>{32}));
}

// One replica graph with the given llm stages (vision stages use no recomputation).
IterationPlan PlanWithStages(const std::vector<graph::Stage>& llm_stages,
                             const std::vector<int>& microbatches_per_replica) {
  IterationPlan plan;
  ReplicaPlan replica;
  replica.graph.AddGroup({});
  replica.graph.AddStage({.module = 0, .recompute = spec::Recompute::kNone});
  for (const graph::Stage& s : llm_stages) replica.graph.AddStage(s);
  plan.replicas.push_back(std::move(replica));
  for (int n : microbatches_per_replica) {
    plan.assignment.replicas.push_back(Microbatches(n, std::vector<int>{0}));
  }
  return plan;
}

TEST(DescribeConfiguration, RecomputeAndMicrobatchesAreWhatThePlannedIterationsUsed) {
  ConfigurationUsage usage;
  // Iteration 0: the memory policy recomputed the llm fully; replicas got 4 and 3 microbatches.
  usage.Add(PlanWithStages({{.module = 1, .recompute = spec::Recompute::kFull}}, {4, 3}));
  report::StrategyConfiguration c = DescribeConfiguration(TwoModuleJob(), FoldedPlan(), &usage);
  EXPECT_EQ(c.modules[0].recompute, "none");
  EXPECT_EQ(c.modules[1].recompute, "full");  // not the static plan's "selective"
  EXPECT_EQ(c.microbatches_min, 3);
  EXPECT_EQ(c.microbatches_max, 4);
  // Iteration 1: per-layer options (2 layers none, 3 offloaded) and 5 microbatches.
  graph::Stage per_layer{.module = 1, .recompute = spec::Recompute::kFull};
  per_layer.recompute_layers = {2, 0, 0, 3};
  usage.Add(PlanWithStages({per_layer}, {5}));
  c = DescribeConfiguration(TwoModuleJob(), FoldedPlan(), &usage);
  EXPECT_EQ(c.modules[1].recompute, "none+full+offload");
  EXPECT_EQ(c.microbatches_min, 3);
  EXPECT_EQ(c.microbatches_max, 5);
  EXPECT_EQ(c.Brief(),
            "vision tp1 pp1 dp2 [24] recompute none | llm tp4 pp2 dp2 [16,16] recompute "
            "none+full+offload | mb 3-5");
}

}  // namespace
}  // namespace weft::planning
