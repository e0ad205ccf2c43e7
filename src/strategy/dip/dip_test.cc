#include "weft/strategy/dip/dip.h"

#include <gtest/gtest.h>

#include "../planner_test_util.h"

#include <algorithm>
#include <set>

#include "weft/plan/compiler.h"
#include "weft/plan/validator.h"
#include "weft/sched/generators.h"
#include "weft/sim/simulator.h"
#include "weft/strategy/common.h"
#include "weft/strategy/compare.h"

namespace weft::strategy::dip {
namespace {

TEST(DipOptionsValidate, DefaultsAreValid) { EXPECT_TRUE(DipOptions{}.Validate().ok()); }

TEST(DipOptionsValidate, EachBadFieldIsNamedWithItsRule) {
  const struct {
    DipOptions options;
    const char* message;
  } cases[] = {
      {{.efficiency_threshold = 0}, "efficiency_threshold = 0; must be in (0, 1]"},
      {{.efficiency_threshold = 1.5}, "efficiency_threshold = 1.5; must be in (0, 1]"},
      {{.max_sub_microbatch_size = 0}, "max_sub_microbatch_size = 0; must be >= 1"},
      {{.max_segments = 0}, "max_segments = 0; must be >= 1"},
      {{.mcts_alpha = 0}, "mcts_alpha = 0; must be finite and > 0"},
      {{.mcts_beta = -1}, "mcts_beta = -1; must be finite and >= 0"},
      {{.mcts_rollouts = 0}, "mcts_rollouts = 0; must be >= 1"},
      {{.mcts_incumbent_rollouts = 2}, "mcts_incumbent_rollouts = 2; must be in [0, 1]"},
      {{.memory_candidates = 0}, "memory_candidates = 0; must be >= 1"},
      {{.sub_microbatch_size_override = {0, -4}},
       "sub_microbatch_size_override[1] = -4; must be >= 0 (0 = the partitioner's choice)"},
  };
  for (const auto& c : cases) {
    const Status s = c.options.Validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(s.message(), c.message);
  }
}

TEST(DipOptionsValidate, MakeDipStrategyRefusesBadOptions) {
  auto bad = MakeDipStrategy(DipVariant::kFull, {.max_segments = 0});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "max_segments = 0; must be >= 1");
  auto good = MakeDipStrategy(DipVariant::kFull);
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_EQ((*good)->Name(), "dip");
}

TEST(SmallestEfficientSize, PicksTheSmallestSizeWithin95PercentOfTheBest) {
  const std::vector<int> sizes = {1, 2, 4, 8, 16};
  const std::vector<double> eff = {10, 50, 96, 100, 99};
  auto j = SmallestEfficientSize(sizes, eff);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(sizes[*j], 4);
  auto strict = SmallestEfficientSize(sizes, eff, 0.999);
  ASSERT_TRUE(strict.ok());
  EXPECT_EQ(sizes[*strict], 8);
  EXPECT_FALSE(SmallestEfficientSize(sizes, std::vector<double>{1, 2}).ok());
}

TEST(SegmentCounts, FloorOfLatencyOverTheFastestModuleCapped) {
  const std::vector<double> t = {1.0, 2.5, 7.9, 0.0};
  auto k = SegmentCounts(t);
  EXPECT_EQ(k, (std::vector<int>{1, 2, 7, 1}));
  const std::vector<int> cap = {4, 4, 4, 4};
  EXPECT_EQ(SegmentCounts(t, cap), (std::vector<int>{1, 2, 4, 1}));
}

// When no uniform recompute level fits a batch, dip-reorder keeps the level that overflows least
// (and says so), not the fastest one: on VLM-L at tp4 cp2 pp8 mb16, iteration 3 of the mixed
// data overflows at every level; the fastest (none) peaked at 305.9 GiB, full at 74.1 GiB.
TEST(DipReorder, KeepsTheLevelThatOverflowsLeastWhenNoneFits) {
  auto planner = strategy::MakePlanner(
      {.model = "vlm-l",
       .pipeline_size = 8,
       .data = "mixed",
       .num_microbatches = 16,
       .tensor_size = {.all = 4, .by_module = {}},
       .context_size = {.all = 2, .by_module = {}}},
      "dip-reorder");
  ASSERT_TRUE(planner.ok()) << planner.status().message();
  auto batches = (*planner)->Batches(3, 1);
  ASSERT_TRUE(batches.ok());
  auto planned = (*planner)->Plan(batches->front());
  ASSERT_TRUE(planned.ok()) << planned.status().message();
  EXPECT_TRUE(planned->evaluation.oom);
  const double usable = static_cast<double>((*planner)->job().cluster.gpu.UsableMemoryBytes());
  EXPECT_LT(static_cast<double>(planned->evaluation.peak_memory_bytes), 1.05 * usable);
  EXPECT_NE(planned->plan.notes.find("full (no level fits 1 of 1 replica(s): the level that "
                                     "overflows least kept)"),
            std::string::npos)
      << planned->plan.notes;
}

// Two groups, a linear pipeline of 4 microbatches.
graph::StageGraph Pipeline(int microbatches, int64_t activation_bytes) {
  sched::PipelineShape shape;
  shape.num_groups = 2;
  shape.num_microbatches = microbatches;
  shape.costs = {{.forward_s = 1.0, .backward_input_s = 2.0, .activation_bytes = activation_bytes}};
  auto g = sched::BuildPipelineGraph(shape);
  EXPECT_TRUE(g.ok());
  return std::move(*g);
}

TEST(DualQueueSchedule, AlternatesForwardAndBackwardLike1F1BWhenBothAreReady) {
  auto g = Pipeline(4, 0);
  auto s = DualQueueSchedule(g);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE(s->Validate(g).ok());
  ASSERT_TRUE(s->CheckDeadlockFree(g).ok());
  // The last group: F0 B0 F1 B1 ... (each backward is ready as soon as its forward ends).
  const auto& last = s->order[1];
  ASSERT_EQ(last.size(), 8u);
  for (size_t i = 0; i < last.size(); ++i) {
    EXPECT_EQ(spec::IsBackward(g.stage(last[i]).pass), i % 2 == 1) << i;
    EXPECT_EQ(g.stage(last[i]).microbatch, static_cast<int>(i / 2));
  }
  // The first group starts with two forwards (warmup), then alternates.
  const auto& first = s->order[0];
  EXPECT_EQ(g.stage(first[0]).pass, spec::Pass::kForward);
  EXPECT_EQ(g.stage(first[1]).pass, spec::Pass::kForward);
  // Simulated time matches 1F1B on this pipeline.
  auto one_f_one_b = sched::MakeSchedule(sched::ScheduleKind::kOneFOneB, g);
  ASSERT_TRUE(one_f_one_b.ok());
  JobOptions jo;
  auto setup = MakeJobSetup(jo);
  ASSERT_TRUE(setup.ok());
  const auto& cluster = (*setup)->job.cluster;
  auto a = sim::Simulate(g, *s, cluster);
  auto b = sim::Simulate(g, *one_f_one_b, cluster);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_LE(a->iteration_time_s, b->iteration_time_s + 1e-9);
}

TEST(DualQueueSchedule, PriorityKeysDecideAmongReadyStages) {
  auto g = Pipeline(3, 0);
  std::vector<double> key(g.num_stages());
  // Reverse microbatch priority: on group 0 the forwards are all ready at t=0 but run one at a
  // time, so the earliest-start rule ties and the key decides.
  for (int s = 0; s < g.num_stages(); ++s) key[s] = -g.stage(s).microbatch;
  auto s = DualQueueSchedule(g, {.priority_key = key});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(g.stage(s->order[0][0]).microbatch, 2);
}

TEST(DualQueueSchedule, DisablesForwardsAtTheMemoryCap) {
  auto g = Pipeline(6, 100);
  // Group 0 may hold one microbatch's activations: F, B alternate strictly.
  auto s = DualQueueSchedule(g, {.activation_cap_bytes = {100, 100}});
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s->CheckDeadlockFree(g).ok());
  int64_t held = 0, peak = 0;
  for (auto id : s->order[0]) {
    held += g.stage(id).activation_alloc_bytes - g.stage(id).activation_free_bytes;
    peak = std::max(peak, held);
  }
  EXPECT_LE(peak, 100);
  // Unlimited: group 0 runs ahead (warmup of two forwards).
  auto free = DualQueueSchedule(g);
  ASSERT_TRUE(free.ok());
  held = 0;
  peak = 0;
  for (auto id : free->order[0]) {
    held += g.stage(id).activation_alloc_bytes - g.stage(id).activation_free_bytes;
    peak = std::max(peak, held);
  }
  EXPECT_GT(peak, 100);
}

std::unique_ptr<JobSetup> MakeSetup(const std::string& model) {
  JobOptions o;
  o.model = model;
  o.data = "mixed";
  o.num_microbatches = 8;
  auto setup = MakeJobSetup(o);
  EXPECT_TRUE(setup.ok()) << setup.status().ToString();
  return setup.ok() ? std::move(*setup) : nullptr;
}

TEST(DipPrepare, SeparatedPartitioningGivesEachModuleItsOwnSlots) {
  auto setup = MakeSetup("vlm-s");
  ASSERT_NE(setup, nullptr);
  auto strategy = MakeDipStrategy(DipVariant::kInterleave).value();
  auto fixed = strategy->Prepare(setup->job);
  ASSERT_TRUE(fixed.ok()) << fixed.status().ToString();
  ASSERT_TRUE(fixed->placement.Validate(setup->job.model).ok());
  const int p = setup->job.PipelineSize();
  std::set<std::pair<int, int>> slots;  // (group, slot)
  for (const auto& c : fixed->placement.chunks) {
    EXPECT_TRUE(slots.insert({c.group, c.chunk}).second) << "two chunks share a slot";
    EXPECT_GE(c.num_layers, 1);
  }
  for (size_t i = 0; i < setup->job.model.modules.size(); ++i) {
    const auto chunks = fixed->placement.ChunksOf(static_cast<int>(i));
    for (size_t k = 0; k < chunks.size(); ++k) {
      EXPECT_EQ(fixed->placement.chunks[chunks[k]].group, static_cast<int>(k) % p);
    }
  }
  ASSERT_EQ(fixed->sub_microbatch_size.size(), setup->job.model.modules.size());
  for (int b : fixed->sub_microbatch_size) EXPECT_GE(b, 0);
}

class DipOnModel : public ::testing::TestWithParam<std::tuple<DipVariant, std::string>> {};

TEST_P(DipOnModel, PlansFitMemorySimulateAndValidate) {
  const auto& [variant, model] = GetParam();
  auto setup = MakeSetup(model);
  ASSERT_NE(setup, nullptr);
  auto strategy = MakeDipStrategy(variant).value();
  auto fixed = strategy->Prepare(setup->job);
  ASSERT_TRUE(fixed.ok()) << fixed.status().ToString();
  auto batches = MakeIterationBatches(*setup, 0, 1);
  ASSERT_TRUE(batches.ok());
  PlanBudget budget{.time_budget_s = 0, .work_budget = 20, .threads = 1};
  auto planned = PlanThroughPlanner(*strategy, *setup, *fixed, batches->front(), budget);
  ASSERT_TRUE(planned.ok()) << planned.status().ToString();
  EXPECT_FALSE(planned->evaluation.oom);
  EXPECT_GE(planned->evaluation.iteration_time_s,
            planned->evaluation.lower_bound_s * (1 - 1e-9));
  for (size_t r = 0; r < planned->plan.replicas.size(); ++r) {
    const auto& replica = planned->plan.replicas[r];
    auto compiled = plan::CompilePlan(replica.graph, replica.schedule,
                                      planned->evaluation.timelines[r],
                                      {.model = model, .strategy = std::string(strategy->Name())});
    ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
    // `dip` manages memory itself, P2P buffers included: its compiled plans fit the capacity.
    auto valid = plan::ValidatePlan(*compiled, {.check_memory = variant == DipVariant::kFull});
    EXPECT_TRUE(valid.ok()) << valid.status().ToString();
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllVariants, DipOnModel,
    ::testing::Combine(::testing::Values(DipVariant::kPartitionOnly, DipVariant::kInterleave,
                                         DipVariant::kReorder, DipVariant::kFull),
                       ::testing::Values("vlm-s", "t2v-s", "tiny-valm")),
    [](const auto& info) {
      std::string n = "v" + std::to_string(static_cast<int>(std::get<0>(info.param))) + "_" +
                      std::get<1>(info.param);
      for (char& c : n) if (!isalnum(static_cast<unsigned char>(c))) c = '_';
      return n;
    });

TEST(Dip, DeterministicUnderASeedWithAWorkBudget) {
  auto setup = MakeSetup("vlm-s");
  ASSERT_NE(setup, nullptr);
  auto strategy = MakeDipStrategy(DipVariant::kFull).value();
  auto fixed = strategy->Prepare(setup->job);
  ASSERT_TRUE(fixed.ok());
  auto batches = MakeIterationBatches(*setup, 0, 1);
  ASSERT_TRUE(batches.ok());
  PlanBudget budget{.time_budget_s = 0, .work_budget = 20, .threads = 1};
  auto a = strategy->PlanBatch(setup->job, *fixed, batches->front(), budget);
  auto b = strategy->PlanBatch(setup->job, *fixed, batches->front(), budget);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->replicas.size(), b->replicas.size());
  for (size_t r = 0; r < a->replicas.size(); ++r) {
    EXPECT_EQ(a->replicas[r].schedule.order, b->replicas[r].schedule.order);
  }
}

TEST(Dip, ReplicasPlannedOnSeveralThreadsGiveTheSamePlan) {
  // Under a work budget every replica's search runs on one thread: the plan is the sequential
  // one, whichever thread plans which replica, also with more threads than replicas.
  for (auto variant : {DipVariant::kFull, DipVariant::kReorder}) {
    JobOptions o;
    o.model = "tiny-vlm";
    o.gpus = 6;
    o.pipeline_size = 2;
    o.data = "mixed";
    o.num_microbatches = 4;
    auto setup = MakeJobSetup(o);
    ASSERT_TRUE(setup.ok()) << setup.status().ToString();
    const int dp = (*setup)->job.DataParallelSize();
    ASSERT_EQ(dp, 3);
    auto strategy = MakeDipStrategy(variant).value();
    const Job& job = (*setup)->job;
    auto fixed = strategy->Prepare(job);
    ASSERT_TRUE(fixed.ok());
    auto batches = MakeIterationBatches(**setup, 0, 1);
    ASSERT_TRUE(batches.ok());
    PlanBudget one{.time_budget_s = 0, .work_budget = 10, .threads = 1};
    PlanBudget spread = one;
    spread.threads = dp + 2;
    auto a = strategy->PlanBatch(job, *fixed, batches->front(), one);
    auto b = strategy->PlanBatch(job, *fixed, batches->front(), spread);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString() << b.status().ToString();
    ASSERT_EQ(a->replicas.size(), b->replicas.size());
    EXPECT_EQ(a->notes, b->notes);
    EXPECT_DOUBLE_EQ(a->model_flops, b->model_flops);
    for (size_t r = 0; r < a->replicas.size(); ++r) {
      EXPECT_EQ(a->replicas[r].schedule.order, b->replicas[r].schedule.order) << "replica " << r;
      EXPECT_EQ(a->replicas[r].microbatches, b->replicas[r].microbatches);
      EXPECT_EQ(a->replicas[r].graph.num_stages(), b->replicas[r].graph.num_stages());
    }
  }
}

TEST(Dip, ASpentTimeBudgetHurriesEveryReplicaAlikeOnAnyThreads) {
  // Under a time budget spent before the first search ends, every replica takes step 2 right
  // after its step 1 (hurried: rule orders and the greedy selection, no search): the plan does
  // not depend on timing or on the threads, and every replica's compiled plan fits.
  JobOptions o;
  o.model = "vlm-s";
  o.gpus = 32;
  o.data = "laion";
  auto setup = MakeJobSetup(o);
  ASSERT_TRUE(setup.ok()) << setup.status().ToString();
  const Job& job = (*setup)->job;
  ASSERT_EQ(job.DataParallelSize(), 2);
  auto strategy = MakeDipStrategy(DipVariant::kFull).value();
  auto fixed = strategy->Prepare(job);
  ASSERT_TRUE(fixed.ok());
  auto batches = MakeIterationBatches(**setup, 0, 1);
  ASSERT_TRUE(batches.ok());
  PlanBudget one{.time_budget_s = 1e-9, .threads = 1};
  PlanBudget two = one;
  two.threads = 2;
  auto a = strategy->PlanBatch(job, *fixed, batches->front(), one);
  auto b = strategy->PlanBatch(job, *fixed, batches->front(), two);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString() << b.status().ToString();
  EXPECT_NE(a->notes.find("budget spent: 2 replica(s) that do not fit planned without search"),
            std::string::npos)
      << a->notes;
  EXPECT_EQ(a->notes, b->notes);
  ASSERT_EQ(a->replicas.size(), 2u);
  ASSERT_EQ(b->replicas.size(), 2u);
  for (size_t r = 0; r < a->replicas.size(); ++r) {
    EXPECT_EQ(a->replicas[r].schedule.order, b->replicas[r].schedule.order) << "replica " << r;
    ASSERT_EQ(a->replicas[r].graph.num_stages(), b->replicas[r].graph.num_stages());
    for (int s = 0; s < a->replicas[r].graph.num_stages(); ++s) {
      EXPECT_EQ(a->replicas[r].graph.stage(s).recompute, b->replicas[r].graph.stage(s).recompute);
    }
    auto t = sim::Simulate(a->replicas[r].graph, a->replicas[r].schedule, job.cluster);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_TRUE(t->oom.empty()) << "replica " << r;
  }
}

class DipAblation : public ::testing::TestWithParam<std::string> {};

TEST_P(DipAblation, StepsNeverSlowTheIterationDown) {
  auto setup = MakeSetup(GetParam());
  ASSERT_NE(setup, nullptr);
  auto batches = MakeIterationBatches(*setup, 0, 2);
  ASSERT_TRUE(batches.ok());
  PlanBudget budget{.time_budget_s = 0, .work_budget = 20, .threads = 1};
  for (const auto& batch : *batches) {
    double previous = std::numeric_limits<double>::infinity();
    for (auto v : {DipVariant::kPartitionOnly, DipVariant::kInterleave, DipVariant::kReorder,
                   DipVariant::kFull}) {
      auto strategy = MakeDipStrategy(v).value();
      auto fixed = strategy->Prepare(setup->job);
      ASSERT_TRUE(fixed.ok());
      auto planned = PlanThroughPlanner(*strategy, *setup, *fixed, batch, budget);
      ASSERT_TRUE(planned.ok()) << planned.status().ToString();
      const double t = planned->evaluation.iteration_time_s;
      EXPECT_LE(t, previous * (1 + 1e-9)) << strategy->Name();
      EXPECT_FALSE(planned->evaluation.oom) << strategy->Name();
      previous = t;
    }
  }
}

// vlm-s fits without recomputation; on t2v-s the fastest graph does not fit, so `dip` goes
// through the §5.3 per-layer memory path.
INSTANTIATE_TEST_SUITE_P(Models, DipAblation, ::testing::Values("vlm-s", "t2v-s"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

// dip-partition-only orders by 1F1B where a 1F1B rule is deadlock-free, and says so in the
// iteration's notes where it is not and the dual-queue FIFO order is used (issue 17.6: vlm-s on
// obelics with 3 microbatches).
TEST(DipPartitionOnly, SaysWhereTheDualQueueOrderReplacesOneFOneB) {
  JobOptions o;
  o.model = "vlm-s";
  o.data = "obelics";
  o.num_microbatches = 3;
  auto planner = strategy::MakePlanner(o, "dip-partition-only");
  ASSERT_TRUE(planner.ok()) << planner.status().ToString();
  EXPECT_NE(std::string((*planner)->strategy().Description()).find("dual-queue"),
            std::string::npos);
  auto batches = (*planner)->Batches(0, 1);
  ASSERT_TRUE(batches.ok());
  auto planned = (*planner)->Plan(batches->front());
  ASSERT_TRUE(planned.ok()) << planned.status().ToString();
  EXPECT_NE(planned->plan.notes.find("no 1F1B rule is deadlock-free"), std::string::npos)
      << planned->plan.notes;
  // Where 1F1B applies (tiny-t2v) it orders by 1F1B and says nothing.
  auto plain = strategy::MakePlanner({.model = "tiny-t2v"}, "dip-partition-only");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  auto plain_batches = (*plain)->Batches(0, 1);
  ASSERT_TRUE(plain_batches.ok());
  auto plain_planned = (*plain)->Plan(plain_batches->front());
  ASSERT_TRUE(plain_planned.ok()) << plain_planned.status().ToString();
  EXPECT_EQ(plain_planned->plan.notes.find("no 1F1B rule"), std::string::npos)
      << plain_planned->plan.notes;
}

}  // namespace
}  // namespace weft::strategy::dip
