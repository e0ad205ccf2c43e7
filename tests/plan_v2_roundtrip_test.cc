// Plan schema v2 end to end: a stage graph built by the strategy layer from a real batch (with
// sub-microbatches, fan-in and frozen/trainable modules) compiles to a plan whose buffer ends,
// samples, rows and gradient all-reduces survive write -> read unchanged, and the plan validates.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "weft/plan/compiler.h"
#include "weft/plan/plan_json.h"
#include "weft/plan/validator.h"
#include "weft/sched/generators.h"
#include "weft/sim/simulator.h"
#include "weft/strategy/compare.h"
#include "weft/planning/graph_builder.h"

namespace weft {
namespace {

TEST(PlanV2, CompiledPlanOfASubMicrobatchGraphRoundTripsThroughJson) {
  auto setup = planning::MakeJobSetup(
      {.model = "tiny-valm", .cluster = "", .data = "mixed", .num_microbatches = 2});
  ASSERT_TRUE(setup.ok()) << setup.status().ToString();
  auto rule = strategy::MakeStrategy("megatron-1f1b");
  ASSERT_TRUE(rule.ok());
  auto fixed = (*rule)->Prepare((*setup)->job);
  ASSERT_TRUE(fixed.ok()) << fixed.status().ToString();
  const spec::ModelSpec& model = (*setup)->job.model;
  // 4 samples in 2 microbatches; sample i has i + 1 images.
  spec::Batch batch;
  for (int i = 0; i < 4; ++i) {
    spec::Sample sample;
    sample.id = i;
    sample.text_tokens = 10;
    for (int k = 0; k <= i; ++k) sample.images.push_back({.width_px = 56, .height_px = 56});
    batch.samples.push_back(sample);
  }
  planning::GraphBuildOptions options;
  options.sub_microbatch_size.assign(model.modules.size(), 0);
  options.sub_microbatch_size[*model.FindModule("vision")] = 2;
  options.sub_microbatch_size[*model.FindModule("llm")] = 1;
  auto graph = planning::BuildStageGraph(model, fixed->placement, batch, {{0, 1}, {2, 3}},
                                         *(*setup)->job.cost_model, (*setup)->job.workload,
                                         options);
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  int subs = 0;
  for (const graph::Stage& s : graph->stages()) subs = std::max(subs, s.sub_microbatch);
  ASSERT_GT(subs, 0) << "the graph should have sub-microbatches";

  auto schedule = sched::MakeSchedule(sched::ScheduleKind::kOneFOneB, *graph);
  ASSERT_TRUE(schedule.ok()) << schedule.status().ToString();
  auto timeline = sim::Simulate(*graph, *schedule, (*setup)->job.cluster);
  ASSERT_TRUE(timeline.ok()) << timeline.status().ToString();
  auto plan = plan::CompilePlan(*graph, *schedule, *timeline,
                                {.model = "tiny-valm", .iteration = 5, .replica = 1,
                                 .num_replicas = 2});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto report = plan::ValidatePlan(*plan, {.check_memory = false});
  ASSERT_TRUE(report.ok()) << report.status().ToString();

  // The data assignment made it into the plan: computes name samples, buffers name samples and
  // rows, and every sample of the batch is computed somewhere.
  std::set<int32_t> computed;
  int buffers_with_samples = 0, buffers = 0, reduces = 0;
  for (const plan::RankPlan& rank : plan->ranks) {
    for (const plan::Action& a : rank.actions) {
      if (plan::IsCompute(a.kind)) computed.insert(a.samples.begin(), a.samples.end());
      reduces += a.kind == plan::ActionKind::kAllReduceGrads;
    }
    for (const plan::Buffer& b : rank.buffers) {
      ++buffers;
      buffers_with_samples += !b.samples.empty() && b.rows > 0;
    }
  }
  EXPECT_EQ(computed, (std::set<int32_t>{0, 1, 2, 3}));
  EXPECT_GT(buffers_with_samples, buffers / 2);
  EXPECT_GT(reduces, 0);

  const std::string text = plan::PlanToJson(*plan);
  auto back = plan::PlanFromJson(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, *plan);
  EXPECT_EQ(plan::PlanToJson(*back), text);
}

}  // namespace
}  // namespace weft
