// Plan schema v3 end to end: a stage graph built by the strategy layer from a real batch (with
// sub-microbatches, fan-in and frozen/trainable modules) compiles to a plan whose buffer ends,
// samples, rows and gradient all-reduces survive write -> read unchanged, and the plan validates;
// the planner's plans carry their data tables (the batch, the microbatches with every module's
// instances, per rank its replica, group and chunks), which round-trip and validate too.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "weft/data/workload.h"
#include "weft/plan/compiler.h"
#include "weft/plan/plan_json.h"
#include "weft/plan/validator.h"
#include "weft/sched/generators.h"
#include "weft/sim/simulator.h"
#include "weft/strategy/compare.h"
#include "weft/planning/graph_builder.h"
#include "weft/planning/planner.h"
#include "weft/strategy/compare.h"

namespace weft {
namespace {

TEST(PlanV3, CompiledPlanOfASubMicrobatchGraphRoundTripsThroughJson) {
  auto setup = strategy::MakeJobSetup(
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
  strategy::GraphBuildOptions options;
  options.sub_microbatch_size.assign(model.modules.size(), 0);
  options.sub_microbatch_size[*model.FindModule("vision")] = 2;
  options.sub_microbatch_size[*model.FindModule("llm")] = 1;
  auto graph = strategy::BuildStageGraph(model, fixed->placement, batch, {{0, 1}, {2, 3}},
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


// Every compute of `plan` finds its microbatch, instances and chunk in the data tables, and the
// instance lists are the workload derivation of the planned microbatches.
void ExpectTablesFitThePlan(const plan::ExecutionPlan& plan, const strategy::Planner& planner,
                            const strategy::PlannedIteration& planned) {
  const plan::PlanData& d = plan.data;
  ASSERT_EQ(static_cast<int>(d.ranks.size()), plan.num_ranks());
  ASSERT_EQ(d.samples.size(), planned.plan.batch->samples.size());
  for (size_t i = 0; i < d.samples.size(); ++i) {
    EXPECT_EQ(d.samples[i].id, planned.plan.batch->samples[i].id);
  }
  int computes = 0;
  for (int r = 0; r < plan.num_ranks(); ++r) {
    for (const plan::Action& a : plan.ranks[r].actions) {
      if (!plan::IsCompute(a.kind)) continue;
      ++computes;
      const int index = d.FindMicrobatch(d.ranks[r].replica, a.stage.microbatch);
      ASSERT_GE(index, 0) << plan::DescribeAction(a);
      EXPECT_LE(a.instance_end,
                static_cast<int>(d.microbatches[index].instances[a.stage.module].size()));
    }
  }
  EXPECT_GT(computes, 0);
  for (const plan::MicrobatchData& m : d.microbatches) {
    const auto& mbs = planned.plan.replicas.at(m.replica).microbatches;
    ASSERT_LT(m.microbatch, static_cast<int>(mbs.size()));
    EXPECT_EQ(std::vector<int>(m.sequences.begin(), m.sequences.end()), mbs[m.microbatch]);
    for (int module = 0; module < static_cast<int>(m.instances.size()); ++module) {
      if (m.instances[module].empty()) continue;
      auto w = data::DeriveModuleWorkload(planner.job().model, module, *planned.plan.batch,
                                          mbs[m.microbatch], planner.job().workload);
      ASSERT_TRUE(w.ok());
      ASSERT_EQ(m.instances[module].size(), w->instances.size());
      for (size_t k = 0; k < w->instances.size(); ++k) {
        EXPECT_EQ(m.instances[module][k].tokens, w->instances[k].segment_tokens);
      }
    }
  }
  auto back = plan::PlanFromJson(plan::PlanToJson(plan));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->data, plan.data);
  EXPECT_TRUE(plan::ValidatePlan(*back).ok());
}

TEST(PlanV3, PlannerPlansCarryTheirDataTables) {
  // tiny-valm with DIP: sub-microbatches of both encoders, padded audio windows.
  auto planner = strategy::MakePlanner(
      {.model = "tiny-valm", .cluster = "", .data = "mixed", .num_microbatches = 2}, "dip");
  ASSERT_TRUE(planner.ok()) << planner.status().ToString();
  auto batches = (*planner)->Batches(0, 1);
  ASSERT_TRUE(batches.ok()) << batches.status().ToString();
  strategy::PlanBudget budget{.time_budget_s = 0, .work_budget = 5};
  auto planned = (*planner)->Plan((*batches)[0], budget);
  ASSERT_TRUE(planned.ok()) << planned.status().ToString();
  EXPECT_EQ(planned->plan.batch->samples.size(), (*batches)[0].samples.size());
  auto compiled = (*planner)->Compile(*planned, 0, 4);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  ExpectTablesFitThePlan(*compiled, **planner, *planned);
  for (const plan::RankData& r : compiled->data.ranks) EXPECT_EQ(r.replica, 0);
}

TEST(PlanV3, WorldPlansNameEveryRanksReplicaAndGroup) {
  auto planner = strategy::MakePlanner(
      {.model = "tiny-vlm", .cluster = "", .gpus = 4, .pipeline_size = 2,
       .data = "coco-llava"},
      "megatron-1f1b");
  ASSERT_TRUE(planner.ok()) << planner.status().ToString();
  auto batches = (*planner)->Batches(0, 1);
  ASSERT_TRUE(batches.ok());
  auto planned = (*planner)->Plan((*batches)[0]);
  ASSERT_TRUE(planned.ok()) << planned.status().ToString();
  ASSERT_EQ(planned->plan.replicas.size(), 2u);
  auto world = (*planner)->CompileWorld(*planned);
  ASSERT_TRUE(world.ok()) << world.status().ToString();
  ASSERT_EQ(world->num_ranks(), 4);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(world->data.ranks[r].replica, r / 2);
    EXPECT_EQ(world->data.ranks[r].group, r % 2);
    EXPECT_EQ(world->data.ranks[r].chunks, world->data.ranks[r % 2].chunks);
    EXPECT_FALSE(world->data.ranks[r].chunks.empty());
  }
  ExpectTablesFitThePlan(*world, **planner, *planned);
  // Replica 1's plan alone: its microbatches only, every rank replica 1.
  auto one = (*planner)->Compile(*planned, 1);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  for (const plan::MicrobatchData& m : one->data.microbatches) EXPECT_EQ(m.replica, 1);
  for (const plan::RankData& r : one->data.ranks) EXPECT_EQ(r.replica, 1);
  EXPECT_EQ(one->data.microbatches.size(), planned->plan.replicas[1].microbatches.size());
  ExpectTablesFitThePlan(*one, **planner, *planned);
}

}  // namespace
}  // namespace weft
