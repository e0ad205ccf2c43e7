#include "weft/strategy/dflop/dflop.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <set>

#include "weft/plan/validator.h"
#include "weft/planning/iteration.h"
#include "weft/planning/planner.h"
#include "weft/sched/generators.h"
#include "weft/strategy/compare.h"

namespace weft::strategy::dflop {
namespace {

// At tp 1 · pp 1 · cp 1 (the preset's tuned layout needs 16 GPUs; DFLOP's optimizer picks its
// own groups, these tests check it on 8 and 16).
JobOptions Options(int gpus) {
  JobOptions o{.model = "llava-ov-llama3-8b",
               .cluster = "a100",
               .gpus = gpus,
               .pipeline_size = 1,
               .data = "mixed"};
  o.tensor_size = {.all = 1, .by_module = {}};
  o.context_size = {.all = 1, .by_module = {}};
  return o;
}

// Every (E, L, N_mb) of a small cluster priced by an independent enumeration (all tp, pp, dp
// with the products tiling the GPUs, every microbatch count): the optimizer's argmin is the brute
// force's, for both objectives.
TEST(DflopOptimizer, ArgminEqualsBruteForceOnSmallClusters) {
  for (int gpus : {8, 16}) {
    auto planner = MakePlanner(Options(gpus), "megatron-1f1b");
    ASSERT_TRUE(planner.ok()) << planner.status().ToString();
    const Job& job = (*planner)->job();
    auto tables = cost::ThroughputTable::Analytical(job.model, *job.cost_model);
    ASSERT_TRUE(tables.ok());
    for (Objective objective : {Objective::kPaper, Objective::kExpected}) {
      OptimizerOptions formula{.objective = objective, .rerank_top_k = 0};
      auto best = Optimize(job, *tables, formula);
      ASSERT_TRUE(best.ok()) << best.status().ToString();
      auto roles = FindRoles(job.model);
      ASSERT_TRUE(roles.ok());
      // Enumeration: every (tp, pp, dp) per module, tp a tabled value within a node, pp at most
      // the layers, the two products tiling the GPUs, one DP dividing the other.
      auto configs = [&](int module, int module_gpus) {
        std::vector<int> dps;
        const auto tps = tables->TpValues(module);
        for (int tp : tps) {
          if (tp > job.cluster.gpus_per_node || module_gpus % tp != 0) continue;
          for (int pp = 1; pp <= module_gpus / tp; ++pp) {
            if ((module_gpus / tp) % pp == 0 && pp <= job.model.modules[module].num_layers) {
              dps.push_back(module_gpus / tp / pp);
            }
          }
        }
        return dps;
      };
      int64_t pairs = 0;
      for (int e = 1; e < gpus; ++e) {
        for (int edp : configs(roles->encoder, e)) {
          for (int ldp : configs(roles->llm, gpus - e)) pairs += edp % ldp == 0 || ldp % edp == 0;
        }
      }
      EXPECT_EQ(best->module_configs, pairs);
      // The optimizer reports the argmins of both objectives over everything it priced; the
      // chosen one is the argmin of its own objective.
      EXPECT_EQ(best->best,
                objective == Objective::kPaper ? best->argmin_paper : best->argmin_expected);
      const auto& c = best->top.front();
      EXPECT_EQ(c.config, best->best);
      // Brute force over N_mb for the chosen (E, L): no microbatch count beats the chosen one.
      for (int mb = 1; mb <= 64; ++mb) {
        OptimizerOptions only = formula;
        only.max_microbatches = mb;
        auto r = Optimize(job, *tables, only);
        if (!r.ok()) continue;
        const double v =
            objective == Objective::kPaper ? r->top.front().paper_s : r->top.front().expected_s;
        const double chosen = objective == Objective::kPaper ? c.paper_s : c.expected_s;
        EXPECT_GE(v, chosen - 1e-12) << "max_microbatches " << mb;
      }
    }
  }
}

// Pruning by the work lower bound never changes the result: argmins of both objectives, the
// re-rank set and its order equal the exhaustive enumeration's, on several clusters, objectives,
// re-rank sizes and with the acceptance rule.
TEST(DflopOptimizer, PruningKeepsTheExhaustiveResult) {
  for (int gpus : {8, 16, 24}) {
    auto planner = MakePlanner(Options(gpus), "megatron-1f1b");
    ASSERT_TRUE(planner.ok()) << planner.status().ToString();
    const Job& job = (*planner)->job();
    auto tables = cost::ThroughputTable::Analytical(job.model, *job.cost_model);
    ASSERT_TRUE(tables.ok());
    for (Objective objective : {Objective::kPaper, Objective::kExpected}) {
      for (int k : {1, 8}) {
        for (double accept : {0.0, 0.1}) {
          OptimizerOptions pruned{
              .objective = objective, .rerank_top_k = 0, .accept_within = accept};
          pruned.rerank_top_k = k;
          OptimizerOptions full = pruned;
          full.prune = false;
          // Compare the formula phase only (no simulation): rerank set = top before re-rank.
          auto a = Optimize(job, *tables, pruned, [](auto&&...) -> StatusOr<planning::Assignment> {
            return InvalidArgumentError("formula only");
          });
          auto b = Optimize(job, *tables, full, [](auto&&...) -> StatusOr<planning::Assignment> {
            return InvalidArgumentError("formula only");
          });
          ASSERT_TRUE(a.ok() && b.ok());
          EXPECT_EQ(a->argmin_paper, b->argmin_paper) << gpus;
          EXPECT_EQ(a->argmin_expected, b->argmin_expected) << gpus;
          ASSERT_EQ(a->top.size(), b->top.size()) << gpus << " k " << k << " accept " << accept;
          for (size_t i = 0; i < a->top.size(); ++i) {
            EXPECT_EQ(a->top[i].config, b->top[i].config)
                << gpus << " #" << i << " k " << k << " accept " << accept << " objective "
                << ObjectiveName(objective);
          }
          EXPECT_LE(a->evaluated, b->evaluated);
        }
      }
    }
  }
}

TEST(DflopOptimizer, ItemDurationsAddUpToTheFormulasStageTimes) {
  auto planner = MakePlanner(Options(8), "megatron-1f1b");
  ASSERT_TRUE(planner.ok());
  const Job& job = (*planner)->job();
  auto tables = cost::ThroughputTable::Analytical(job.model, *job.cost_model);
  ASSERT_TRUE(tables.ok());
  auto roles = FindRoles(job.model);
  ASSERT_TRUE(roles.ok());
  auto items = ItemShapes(job.model, *roles, *tables, job.profile_batches[0], job.workload);
  ASSERT_TRUE(items.ok());
  ASSERT_FALSE(items->empty());
  double units = 0, tokens = 0;
  for (const auto& it : *items) {
    units += it.encoder_units;
    tokens += static_cast<double>(it.llm_tokens);
    EXPECT_GE(it.encoder_units, 0);
    EXPECT_GT(it.llm_tokens, 0);
  }
  const int n = static_cast<int>(items->size());
  const Config config{.encoder = {.tp = 1, .pp = 1, .dp = 2},
                      .llm = {.tp = 2, .pp = 3, .dp = 1},
                      .num_microbatches = 4};
  auto model = DurationModel::Create(job.model, *roles, *tables, config, n, units / n, tokens / n);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  // The encoder's per-unit time is the table's at the mean microbatch (n·mean/(N_mb·E_dp)
  // instances), scaled by layers/E_pp and L_dp/E_dp.
  const double b_mb = units / (4.0 * 2);
  auto et = tables->EncoderLayerTime(roles->encoder, 1, b_mb);
  ASSERT_TRUE(et.ok());
  const auto& enc = job.model.modules[roles->encoder];
  EXPECT_NEAR(model->encoder_s_per_unit(),
              enc.num_layers * (et->forward_s + et->backward_s) / b_mb * (1.0 / 2), 1e-12);
  double sum_e = 0;
  for (const auto& it : *items) sum_e += model->Item(it).encoder_s;
  EXPECT_NEAR(sum_e, model->encoder_s_per_unit() * units, 1e-9);
}

TEST(DflopScheduler, BucketsCoverTheBatchAndBalanceBetterThanRandom) {
  auto planner = MakePlanner(Options(8), "dflop");
  ASSERT_TRUE(planner.ok()) << planner.status().ToString();
  const Job& job = (*planner)->job();
  auto config = ConfigOfPlan(job, (*planner)->static_plan());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto tables = cost::ThroughputTable::Analytical(job.model, *job.cost_model);
  ASSERT_TRUE(tables.ok());
  const spec::Batch& batch = job.profile_batches[0];
  algo::BucketBalanceResult ours, lpt;
  auto balanced = ScheduleBatch(job, *config, *tables, batch, SchedulerKind::kHybrid, &ours);
  auto paper = ScheduleBatch(job, *config, *tables, batch, SchedulerKind::kPaper, &lpt);
  auto random = ScheduleBatch(job, *config, *tables, batch, SchedulerKind::kRandom);
  ASSERT_TRUE(balanced.ok() && paper.ok() && random.ok());
  for (const auto* a : {&*balanced, &*paper, &*random}) {
    ASSERT_TRUE(a->Validate(batch).ok()) << a->Validate(batch).ToString();
    ASSERT_EQ(static_cast<int>(a->replicas.size()), config->llm.dp);
    std::set<int> seen;
    for (const auto& r : a->replicas) {
      for (const auto& mb : r) {
        EXPECT_FALSE(mb.empty());
        for (int i : mb) EXPECT_TRUE(seen.insert(i).second);
      }
    }
    EXPECT_EQ(seen.size(), batch.sequences.empty() ? batch.samples.size() : batch.sequences.size());
  }
  EXPECT_LE(ours.makespan_s, lpt.makespan_s + 1e-12);
  EXPECT_GE(ours.makespan_s, ours.lower_bound_s - 1e-12);
  EXPECT_EQ(balanced->policy, "dflop-balanced");
  EXPECT_EQ(random->policy, "dflop-random");
}

TEST(Dflop, PlansValidatesAndRecordsTheSchedulersBuckets) {
  auto planner = MakePlanner(Options(8), "dflop");
  ASSERT_TRUE(planner.ok()) << planner.status().ToString();
  const Placement& placement = (*planner)->static_plan().placement;
  EXPECT_TRUE(placement.unfolded);
  EXPECT_EQ(placement.NumGpus(), 8);
  EXPECT_NE((*planner)->static_plan().description.find("N_mb"), std::string::npos);
  auto batches = (*planner)->Batches(0, 2);
  ASSERT_TRUE(batches.ok());
  for (const auto& batch : *batches) {
    auto planned = (*planner)->Plan(batch);
    ASSERT_TRUE(planned.ok()) << planned.status().ToString();
    EXPECT_EQ(planned->plan.assignment.policy, "dflop-balanced");
    EXPECT_FALSE(planned->evaluation.oom);
    plan::ValidationReport report;
    EXPECT_TRUE((*planner)->CompileWorld(*planned, 0, &report).ok());
  }
}

// One encoder replica feeding six LLM replicas (E_dp = 1, L_dp = 6) and the reverse: 1F1B's
// warm-up follows the data flow (sched: DataFlowWarmups), so the unfolded graph is ordered and
// simulated with the scheduler's buckets (text-only buckets skip the encoder).
TEST(Dflop, UnevenDpPlacementsAreOrderedBy1F1B) {
  auto planner = MakePlanner(Options(16), "megatron-1f1b");
  ASSERT_TRUE(planner.ok());
  const Job& job = (*planner)->job();
  auto tables = cost::ThroughputTable::Analytical(job.model, *job.cost_model);
  ASSERT_TRUE(tables.ok());
  auto roles = FindRoles(job.model);
  ASSERT_TRUE(roles.ok());
  for (const Config& config : {Config{.encoder = {.tp = 4, .pp = 1, .dp = 1},
                              .llm = {.tp = 1, .pp = 2, .dp = 6},
                              .num_microbatches = 4},
                               Config{.encoder = {.tp = 1, .pp = 1, .dp = 4},
                               .llm = {.tp = 4, .pp = 3, .dp = 1},
                               .num_microbatches = 8}}) {
    auto spec = PlacementOf(config, job.model, *roles);
    ASSERT_TRUE(spec.ok());
    auto placement = planning::BuildPlacement(*spec, job.model, job.cluster, *job.cost_model);
    ASSERT_TRUE(placement.ok()) << placement.status().ToString();
    planning::StaticPlan plan;
    plan.placement = std::move(*placement);
    plan.num_microbatches = config.num_microbatches;
    for (SchedulerKind kind : {SchedulerKind::kHybrid, SchedulerKind::kRandom}) {
      auto assignment = ScheduleBatch(job, config, *tables, job.profile_batches[0], kind);
      ASSERT_TRUE(assignment.ok()) << assignment.status().ToString();
      auto it = planning::PlanReplicas(
          job, plan, {.batch = job.profile_batches[0], .assignment = *assignment},
          [](const graph::StageGraph& g) {
            return sched::MakeSchedule(sched::ScheduleKind::kOneFOneB, g);
          });
      ASSERT_TRUE(it.ok()) << config.Describe() << ": " << it.status().ToString();
      auto e = planning::EvaluateIteration(job, *it);
      ASSERT_TRUE(e.ok()) << e.status().ToString();
      EXPECT_GT(e->iteration_time_s, 0);
      EXPECT_GE(e->iteration_time_s, e->lower_bound_s);
    }
  }
}

TEST(Dflop, RefusesModelsThatAreNotOneEncoderAndOneLlm) {
  for (const char* model : {"llama3-8b", "cs-valm-ss"}) {
    auto planner = MakePlanner(JobOptions{.model = model, .cluster = "h800", .gpus = 32}, "dflop");
    ASSERT_FALSE(planner.ok()) << model;
    EXPECT_NE(planner.status().message().find("one encoder (+ projector) and one LLM"),
              std::string::npos)
        << model << ": " << planner.status().message();
  }
}

}  // namespace
}  // namespace weft::strategy::dflop
