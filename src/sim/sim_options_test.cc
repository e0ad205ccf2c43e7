#include <gtest/gtest.h>

#include <limits>

#include "weft/sched/generators.h"
#include "weft/sim/simulator.h"
#include "weft/sim/window.h"

namespace weft::sim {
namespace {

TEST(SimOptionsValidate, DefaultsAreValid) { EXPECT_TRUE(SimOptions{}.Validate().ok()); }

TEST(SimOptionsValidate, EachBadFieldIsNamedWithItsRule) {
  const struct {
    SimOptions options;
    const char* message;
  } cases[] = {
      {{.model_flops = -1}, "model_flops = -1; must be finite and >= 0 (0 = the stages' FLOPs)"},
      {{.model_flops = std::numeric_limits<double>::infinity()},
       "model_flops = inf; must be finite and >= 0 (0 = the stages' FLOPs)"},
      {{.num_gpus = -2}, "num_gpus = -2; must be >= 0 (0 = the groups' GPUs)"},
      {{.capacity_bytes = -1}, "capacity_bytes = -1; must be >= 0 (0 = the cluster's GPU memory)"},
      {{.samples_per_iteration = std::numeric_limits<double>::quiet_NaN()},
       "samples_per_iteration = nan; must be finite and >= 0 (0 = unknown)"},
      {{.tokens_per_iteration = -5},
       "tokens_per_iteration = -5; must be finite and >= 0 (0 = unknown)"},
      {{.buffer_element_bytes = 0}, "buffer_element_bytes = 0; must be >= 1 (1 = exact bytes)"},
  };
  for (const auto& c : cases) {
    const Status s = c.options.Validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(s.message(), c.message);
  }
}

// Simulate and SimulateWindow refuse bad options with Validate's message (an element size of 0
// would divide by zero when boundary buffers are rounded to whole elements).
TEST(SimOptionsValidate, SimulateAndSimulateWindowCheckTheOptionsFirst) {
  auto graph = sched::BuildPipelineGraph({.num_groups = 2, .num_microbatches = 2, .costs = {{}}});
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto schedule = sched::MakeSchedule(sched::ScheduleKind::kOneFOneB, *graph);
  ASSERT_TRUE(schedule.ok()) << schedule.status().ToString();
  spec::ClusterSpec cluster;
  cluster.name = "test";
  cluster.num_nodes = 1;
  cluster.gpus_per_node = 8;
  cluster.gpu.peak_bf16_flops_per_s = 1e15;
  cluster.gpu.hbm_bandwidth_bytes_per_s = 2e12;
  cluster.gpu.memory_capacity_bytes = int64_t{80} << 30;
  cluster.intra_node = {.bandwidth_bytes_per_s = 200e9};
  cluster.inter_node = {.bandwidth_bytes_per_s = 25e9};
  ASSERT_TRUE(Simulate(*graph, *schedule, cluster).ok());

  auto bad = Simulate(*graph, *schedule, cluster, {.buffer_element_bytes = 0});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "buffer_element_bytes = 0; must be >= 1 (1 = exact bytes)");

  const WindowIteration iteration{.graph = &*graph, .schedule = &*schedule};
  auto window = SimulateWindow({&iteration, 1}, cluster, {.sim = {.num_gpus = -1}}, {});
  ASSERT_FALSE(window.ok());
  EXPECT_EQ(window.status().message(),
            "options.sim: num_gpus = -1; must be >= 0 (0 = the groups' GPUs)");
}

}  // namespace
}  // namespace weft::sim
