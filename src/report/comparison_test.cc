#include "weft/report/comparison.h"

#include <cmath>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_util.h"

namespace weft::report {
namespace {

using ::testing::HasSubstr;

IterationResult It(int index, double time_s, double lb_s = 0) {
  return {.iteration = index, .iteration_time_s = time_s, .lower_bound_s = lb_s};
}

TEST(Percentile, InterpolatesLinearlyBetweenClosestRanksLikeNumpy) {
  const std::vector<double> v = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(Percentile(v, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(Percentile(v, 0.9), 3.7);  // numpy.percentile([1,2,3,4], 90)
  EXPECT_DOUBLE_EQ(Percentile(v, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(Percentile(v, 1.0), 4.0);
  const std::vector<double> one = {7};
  EXPECT_DOUBLE_EQ(Percentile(one, 0.9), 7.0);
  EXPECT_DOUBLE_EQ(Percentile({}, 0.5), 0.0);
}

TEST(StrategySummary, ThroughputAndMfuAreTotalWorkOverTotalTime) {
  StrategyResult s{.name = "a"};
  s.iterations = {{.iteration = 0, .iteration_time_s = 1.0, .samples_per_s = 100,
                   .tokens_per_s = 1000, .mfu = 0.5},
                  {.iteration = 1, .iteration_time_s = 3.0, .samples_per_s = 50,
                   .tokens_per_s = 100, .mfu = 0.1}};
  const StrategySummary m = s.Summary();
  EXPECT_EQ(m.num_iterations, 2);
  EXPECT_DOUBLE_EQ(m.iteration_time_mean_s, 2.0);
  EXPECT_DOUBLE_EQ(m.samples_per_s, (100.0 + 150.0) / 4.0);
  EXPECT_DOUBLE_EQ(m.tokens_per_s, (1000.0 + 300.0) / 4.0);
  EXPECT_DOUBLE_EQ(m.mfu, (0.5 + 0.3) / 4.0);
}

TEST(StrategySummary, MedianResistsOneSlowIteration) {
  StrategyResult s{.name = "a"};
  for (int i = 0; i < 9; ++i) s.iterations.push_back(It(i, 1.0));
  s.iterations.push_back(It(9, 11.0));
  const StrategySummary m = s.Summary();
  EXPECT_DOUBLE_EQ(m.iteration_time_mean_s, 2.0);
  EXPECT_DOUBLE_EQ(m.iteration_time_p50_s, 1.0);
  EXPECT_NEAR(m.iteration_time_p90_s, 1.0 + 0.1 * 10.0, 1e-12);
}

TEST(StrategySummary, GapIsMeanOfPerIterationRatiosOverKnownBounds) {
  StrategyResult s{.name = "a"};
  s.iterations = {It(0, 1.5, 1.0), It(1, 2.0, 1.0), It(2, 5.0, 0.0)};  // last bound unknown
  const StrategySummary m = s.Summary();
  EXPECT_DOUBLE_EQ(m.gap_to_lower_bound, (0.5 + 1.0) / 2);
  EXPECT_DOUBLE_EQ(m.lower_bound_mean_s, 1.0);
}

TEST(StrategySummary, PeakIsMaxAndOomIsAny) {
  StrategyResult s{.name = "a"};
  s.iterations = {It(0, 1), It(1, 1), It(2, 1)};
  s.iterations[0].peak_memory_bytes = 5;
  s.iterations[1].peak_memory_bytes = 9;
  s.iterations[1].oom = true;
  s.iterations[2].peak_memory_bytes = 7;
  s.iterations[0].bubble_ratio = 0.2;
  s.iterations[2].bubble_ratio = 0.4;
  const StrategySummary m = s.Summary();
  EXPECT_EQ(m.peak_memory_bytes, 9);
  EXPECT_TRUE(m.any_oom);
  EXPECT_DOUBLE_EQ(m.bubble_ratio, 0.2);
}

TEST(StrategyResult, FailedOrEmptyIsNotOk) {
  EXPECT_FALSE((StrategyResult{.name = "a"}.ok()));
  StrategyResult failed{.name = "b", .iterations = {It(0, 1)}, .error = "needs 2 encoders"};
  EXPECT_FALSE(failed.ok());
  EXPECT_TRUE((StrategyResult{.name = "c", .iterations = {It(0, 1)}}.ok()));
  EXPECT_EQ(StrategyResult{.name = "a"}.Summary().num_iterations, 0);
}

TEST(IterationResultFromTimeline, CopiesMetricsAndTakesPeakOverGroups) {
  const testing::SmallCase c = testing::MakeSmallCase();
  sim::Timeline t = c.timeline;
  t.mfu = 0.4;
  t.samples_per_s = 12;
  t.tokens_per_s = 3400;
  t.oom.push_back({.group = 1, .peak_bytes = 5, .capacity_bytes = 4});
  const IterationResult r = IterationResultFromTimeline(3, t, 0.25);
  EXPECT_EQ(r.iteration, 3);
  EXPECT_DOUBLE_EQ(r.iteration_time_s, 7.75e-3);
  EXPECT_DOUBLE_EQ(r.lower_bound_s, 7.25e-3);
  EXPECT_DOUBLE_EQ(r.mfu, 0.4);
  EXPECT_DOUBLE_EQ(r.samples_per_s, 12);
  EXPECT_DOUBLE_EQ(r.tokens_per_s, 3400);
  EXPECT_DOUBLE_EQ(r.bubble_ratio, t.bubble_ratio);
  EXPECT_EQ(r.peak_memory_bytes, 5 * testing::kGiB);
  EXPECT_TRUE(r.oom);
  EXPECT_DOUBLE_EQ(r.plan_time_s, 0.25);
  EXPECT_NEAR(r.GapToLowerBound(), t.GapToLowerBound(), 1e-12);
}

TEST(Comparison, SpeedupIsBaselineMeanOverStrategyMean) {
  Comparison c{.strategies = {{.name = "base", .iterations = {It(0, 2.0), It(1, 4.0)}},
                              {.name = "fast", .iterations = {It(0, 1.0), It(1, 2.0)}},
                              {.name = "broken", .error = "does not apply"}},
               .baseline = "base"};
  ASSERT_TRUE(c.Validate().ok());
  EXPECT_DOUBLE_EQ(*c.SpeedupVsBaseline(c.strategies[1]), 2.0);
  EXPECT_DOUBLE_EQ(*c.SpeedupVsBaseline(c.strategies[0]), 1.0);
  EXPECT_FALSE(c.SpeedupVsBaseline(c.strategies[2]).has_value());
  c.baseline = "";
  EXPECT_FALSE(c.SpeedupVsBaseline(c.strategies[1]).has_value());
}

TEST(Comparison, OutOfMemoryResultsHaveNoSpeedupEitherWay) {
  IterationResult oom = It(1, 1.0);
  oom.oom = true;
  Comparison c{.strategies = {{.name = "base", .iterations = {It(0, 2.0), It(1, 2.0)}},
                              {.name = "fast-oom", .iterations = {It(0, 1.0), oom}}},
               .baseline = "base"};
  EXPECT_TRUE(c.strategies[0].feasible());
  EXPECT_TRUE(c.strategies[1].ok());
  EXPECT_FALSE(c.strategies[1].feasible());
  EXPECT_FALSE(c.SpeedupVsBaseline(c.strategies[1]).has_value());
  c.baseline = "fast-oom";  // a baseline that ran out of memory is no reference either
  EXPECT_FALSE(c.SpeedupVsBaseline(c.strategies[0]).has_value());
}

TEST(Comparison, RankedOrderIsFeasibleByTimeThenOomThenFailedAndBestIsTheFirstFeasible) {
  IterationResult oom = It(0, 0.5);
  oom.oom = true;
  Comparison c{.strategies = {{.name = "broken", .error = "does not apply"},
                              {.name = "slow", .iterations = {It(0, 3.0)}},
                              {.name = "oom-fast", .iterations = {oom}},
                              {.name = "fast", .iterations = {It(0, 1.0)}},
                              {.name = "empty"},
                              {.name = "tie", .iterations = {It(0, 1.0)}}}};
  EXPECT_EQ(c.RankedOrder(), (std::vector<int>{3, 5, 1, 2, 0, 4}));
  EXPECT_EQ(c.BestStrategy(), 3);
  Comparison none{
      .strategies = {{.name = "oom-fast", .iterations = {oom}}, {.name = "broken", .error = "x"}}};
  EXPECT_EQ(none.RankedOrder(), (std::vector<int>{0, 1}));
  EXPECT_EQ(none.BestStrategy(), -1);
  EXPECT_EQ(Comparison{}.BestStrategy(), -1);
}

TEST(StrategyConfiguration, BriefIsOneLinePerModuleThenMicrobatchesAndRecompute) {
  StrategyConfiguration config{.modules = {{.module = "vision",
                                            .tp = 1,
                                            .pp = 1,
                                            .dp = 2,
                                            .layers_per_stage = {24},
                                            .recompute = "none"},
                                           {.module = "llm",
                                            .tp = 4,
                                            .pp = 2,
                                            .dp = 2,
                                            .layers_per_stage = {16, 16},
                                            .recompute = "none"}},
                               .microbatches_min = 8,
                               .microbatches_max = 8};
  EXPECT_EQ(config.Brief(),
            "vision tp1 pp1 dp2 [24] | llm tp4 pp2 dp2 [16,16] | mb 8 | recompute none");
  // cp, interleaved chunks, copies, a microbatch range and recompute per module when it differs.
  config.modules[0].copies = 2;
  config.modules[1].cp = 2;
  config.modules[1].chunks_per_rank = 2;
  config.modules[1].layers_per_stage = {8, 8, 8, 8};
  config.modules[1].recompute = "selective+full";
  config.microbatches_min = 6;
  EXPECT_EQ(config.Brief(),
            "vision tp1 pp1 dp2 [24] x2 copies recompute none | llm tp4 cp2 pp2 dp2 [8,8,8,8] "
            "2 chunks/rank recompute selective+full | mb 6-8");
  // Long layer lists write runs of 3 or more equal values once.
  config.modules[1].layers_per_stage = {7, 8, 8, 8, 8, 8, 8, 8, 5, 5};
  EXPECT_THAT(config.Brief(), HasSubstr("[7,8x7,5,5]"));
  config.modules[1].layers_per_stage = std::vector<int>(63, 1);
  EXPECT_THAT(config.Brief(), HasSubstr("[1x63]"));
  EXPECT_EQ(StrategyConfiguration{}.Brief(), "");
  EXPECT_TRUE(StrategyConfiguration{}.empty());
}

TEST(ComparisonValidate, NamesTheFieldTheValueAndTheRule) {
  Comparison c{.strategies = {{.name = "dip"}, {.name = "megatron"}, {.name = "dip"}}};
  EXPECT_THAT(c.Validate().message(),
              HasSubstr("strategies[2].name = \"dip\"; must be unique (also strategies[0])"));

  c = Comparison{.strategies = {{.name = ""}}};
  EXPECT_THAT(c.Validate().message(), HasSubstr("strategies[0].name = \"\"; must be non-empty"));

  c = Comparison{.strategies = {{.name = "a"}}, .baseline = "zz"};
  EXPECT_THAT(c.Validate().message(), HasSubstr("baseline = \"zz\"; must name one of the 1"));

  c = Comparison{.strategies = {{.name = "a", .iterations = {It(1, 1), It(1, 1)}}}};
  EXPECT_THAT(c.Validate().message(),
              HasSubstr("strategies[0].iterations[1].iteration = 1; must be > the previous"));

  c = Comparison{.strategies = {{.name = "a", .iterations = {It(0, -1)}}}};
  EXPECT_THAT(c.Validate().message(),
              HasSubstr("strategies[0].iterations[0].iteration_time_s = -1; must be finite"));

  c = Comparison{.strategies = {{.name = "a", .iterations = {It(0, NAN)}}}};
  EXPECT_EQ(c.Validate().code(), StatusCode::kInvalidArgument);

  c = Comparison{.strategies = {{.name = "a"}, {.name = "b"}}};
  c.strategies[1].configuration.modules = {{.module = "llm", .tp = 0}};
  EXPECT_THAT(c.Validate().message(),
              HasSubstr("strategies[1].configuration.modules[0].tp = 0; must be >= 1"));
  c.strategies[1].configuration.modules = {{.module = "llm", .layers_per_stage = {4, -1}}};
  EXPECT_THAT(c.Validate().message(),
              HasSubstr("strategies[1].configuration.modules[0].layers_per_stage[1] = -1"));
  c.strategies[1].configuration = {.microbatches_min = 5, .microbatches_max = 4};
  EXPECT_THAT(c.Validate().message(),
              HasSubstr("strategies[1].configuration.microbatches_min = 5; must be in [0, "
                        "microbatches_max = 4]"));
}

}  // namespace
}  // namespace weft::report
