#include "weft/strategy/compare.h"

#include <gtest/gtest.h>

#include <numeric>
#include <string>

namespace weft::strategy {
namespace {

int SumOf(const std::vector<int>& v) { return std::accumulate(v.begin(), v.end(), 0); }

TEST(CompareOptionsValidate, DefaultsAreValid) { EXPECT_TRUE(CompareOptions{}.Validate().ok()); }

TEST(CompareOptionsValidate, EachBadFieldIsNamedWithItsRule) {
  auto message = [](auto change) {
    CompareOptions o;
    change(o);
    const Status s = o.Validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    return s.message();
  };
  EXPECT_EQ(message([](CompareOptions& o) { o.job.gpus = -1; }),
            "gpus = -1; must be in [0, 16384] (0 = the model's setup)");
  EXPECT_EQ(message([](CompareOptions& o) { o.iterations = 0; }), "iterations = 0; must be >= 1");
  EXPECT_EQ(message([](CompareOptions& o) {
              o.strategies = {"gpipe", ""};
            }),
            "strategies[1] = ''; must be a strategy name");
  EXPECT_EQ(message([](CompareOptions& o) {
              o.strategies = {"dip", "gpipe", "dip"};
            }),
            "strategies[2] = 'dip'; must not repeat strategies[0]");
  EXPECT_EQ(message([](CompareOptions& o) { o.budget.threads = 0; }),
            "budget threads = 0; must be in [1, 256]");
  EXPECT_EQ(message([](CompareOptions& o) { o.keep_timeline_of_iteration = -2; }),
            "keep_timeline_of_iteration = -2; must be >= -1 (-1 = the last)");
}

// A bad budget fails the comparison with its message (it used to become one error row per
// strategy: Planner::Create refused it for each).
TEST(CompareOptionsValidate, RunComparisonChecksTheOptionsFirst) {
  CompareOptions o;
  o.job.model = "tiny-vlm";
  o.iterations = 1;
  o.strategies = {"megatron-1f1b"};
  o.budget.threads = 0;
  auto run = RunComparison(o);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().message(), "budget threads = 0; must be in [1, 256]");
}

// Every strategy that ran carries its configuration: every module of the model, in order, with
// all of its layers, and the backbone over the job's pipeline ranks.
TEST(RunComparison, EveryResultCarriesTheConfigurationItRan) {
  CompareOptions o;
  o.job.model = "tiny-vlm";
  o.job.gpus = 4;
  o.job.pipeline_size = 2;
  o.iterations = 2;
  o.strategies = {"megatron-1f1b", "megatron-vpp", "replicated"};
  auto run = RunComparison(o);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  auto setup = MakeJobSetup(o.job);
  ASSERT_TRUE(setup.ok()) << setup.status().ToString();
  const spec::ModelSpec& model = (*setup)->job.model;
  for (const report::StrategyResult& r : run->comparison.strategies) {
    ASSERT_TRUE(r.ok()) << r.name << ": " << r.error.value_or("");
    const report::StrategyConfiguration& c = r.configuration;
    ASSERT_EQ(c.modules.size(), model.modules.size()) << r.name;
    for (size_t m = 0; m < model.modules.size(); ++m) {
      EXPECT_EQ(c.modules[m].module, model.modules[m].name);
      EXPECT_EQ(SumOf(c.modules[m].layers_per_stage), model.modules[m].num_layers)
          << r.name << " " << model.modules[m].name;
      EXPECT_FALSE(c.modules[m].recompute.empty());
    }
    const report::ModuleConfiguration& llm = c.modules.back();
    EXPECT_EQ(llm.module, "llm");
    EXPECT_EQ(llm.pp, 2) << r.name;
    EXPECT_GT(c.microbatches_min, 0);
    EXPECT_FALSE(c.Brief().empty());
  }
  const auto& vpp = run->comparison.strategies[1].configuration;
  int most = 0;
  for (const auto& m : vpp.modules) most = std::max(most, m.chunks_per_rank);
  EXPECT_EQ(most, 2) << vpp.Brief();
  const auto& replicated = run->comparison.strategies[2].configuration;
  EXPECT_EQ(replicated.modules.front().copies, 2) << replicated.Brief();
}

// The recomputation reported is the one the memory policy chose for the planned iterations, not
// the static plan's (none): this job does not fit without recomputation (planner_test.cc).
TEST(RunComparison, ConfigurationSaysTheRecomputationThePlannerChose) {
  CompareOptions o;
  o.job.model = "vlm-m";
  o.job.gpus = 32;
  o.job.data = "mixed";
  o.iterations = 1;
  o.strategies = {"gpipe"};
  auto run = RunComparison(o);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const report::StrategyResult& r = run->comparison.strategies[0];
  ASSERT_TRUE(r.ok()) << r.error.value_or("");
  for (const auto& m : r.configuration.modules) {
    EXPECT_NE(m.recompute, "none") << r.configuration.Brief();
  }
}

// The table's peak GiB (the most of any group, iteration and DP replica) has a timeline to draw:
// the kept one when it holds the peak, else one kept for the peak, with its memory curves.
TEST(RunComparison, KeepsTheTimelineHoldingEachStrategysMemoryPeak) {
  CompareOptions o;
  o.job.model = "vlm-s";
  o.job.gpus = 16;
  o.job.data = "mixed";
  o.iterations = 3;
  o.strategies = {"gpipe", "fsdp", "nnscaler"};
  auto run = RunComparison(o);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(run->timelines.size(), 3u);
  for (const KeptTimeline& kept : run->timelines) {
    const int index = run->comparison.FindStrategy(kept.strategy);
    ASSERT_GE(index, 0);
    const int64_t table_peak = run->comparison.strategies[index].Summary().peak_memory_bytes;
    const KeptTimeline* holder = &kept;
    for (const KeptTimeline& peak : run->peak_memory_timelines) {
      if (peak.strategy != kept.strategy) continue;
      EXPECT_TRUE(peak.iteration != kept.iteration || peak.replica != kept.replica)
          << kept.strategy;
      holder = &peak;
    }
    const sim::GroupTimeline* most = nullptr;
    for (const sim::GroupTimeline& g : holder->timeline.groups) {
      if (most == nullptr || g.peak_bytes > most->peak_bytes) most = &g;
    }
    ASSERT_NE(most, nullptr);
    EXPECT_EQ(most->peak_bytes, table_peak) << kept.strategy;
    EXPECT_FALSE(most->memory.empty()) << kept.strategy;
    EXPECT_EQ(holder->graph.num_groups(), static_cast<int>(holder->timeline.groups.size()));
  }
  // On this input the peaks are in earlier iterations (or another DP replica) than the kept last
  // one for at least one strategy, so the test covers the kept-for-the-peak path.
  EXPECT_FALSE(run->peak_memory_timelines.empty());
}

}  // namespace
}  // namespace weft::strategy
