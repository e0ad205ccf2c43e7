#include "weft/strategy/dflop/correction.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <memory>

#include "weft/planning/job_setup.h"
#include "weft/planning/planner.h"
#include "weft/strategy/dflop/correction_study.h"
#include "weft/strategy/dflop/dflop.h"

namespace weft::strategy::dflop {
namespace {

struct Loop {
  std::shared_ptr<const planning::JobSetup> setup;
  std::unique_ptr<planning::Planner> planner;
  std::vector<spec::Batch> batches;
  double max_stage_s = 0;
};

Loop MakeLoop(const CorrectionOptions& correction, int iterations, uint64_t seed = 1) {
  planning::JobOptions jo;
  jo.model = "llava-ov-llama3-8b";
  jo.cluster = "a100";
  jo.gpus = 16;
  jo.data = "mixed";
  jo.seed = seed;
  auto made = planning::MakeJobSetup(jo);
  EXPECT_TRUE(made.ok()) << made.status().ToString();
  Loop loop;
  loop.setup = std::shared_ptr<const planning::JobSetup>(std::move(*made));
  auto planner =
      planning::Planner::Create(loop.setup, MakeDflopStrategy(Variant::kDflop, correction));
  EXPECT_TRUE(planner.ok()) << planner.status().ToString();
  loop.planner = std::move(*planner);
  auto batches = loop.planner->Batches(0, iterations);
  EXPECT_TRUE(batches.ok());
  loop.batches = *batches;
  auto first = loop.planner->Plan(loop.batches[0]);
  EXPECT_TRUE(first.ok());
  loop.max_stage_s = MaxStageSeconds(first->plan);
  return loop;
}

// Plans, measures (injected) and observes `iterations` batches; returns the final state and
// the measured times.
planning::PlanState RunLoop(const Loop& loop,
                            const InjectedDeviations& injected,
                            std::vector<double>* times = nullptr,
                            std::vector<std::string>* notes = nullptr) {
  planning::PlanState state;
  for (size_t it = 0; it < loop.batches.size(); ++it) {
    auto step = loop.planner->Plan(loop.batches[it], state);
    EXPECT_TRUE(step.ok()) << step.status().ToString();
    auto m = MeasureInjected(*loop.planner, state, step->planned, injected, it);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (times) times->push_back(m->iteration_time_s);
    if (notes) notes->push_back(step->planned.plan.assignment.notes);
    auto next = loop.planner->Observe(step->next, step->planned, m->stages);
    EXPECT_TRUE(next.ok()) << next.status().ToString();
    state = *next;
  }
  return state;
}

// Every anomalous shape observed in K >= 2 iterations has learned a penalty within 10% of the
// injected latency (a shape seen once, always beside another unconfirmed shape, can only share
// the blame), and no ordinary shape carries an applied penalty after 6 iterations.
TEST(DflopCorrection, LearnsTheInjectedDeviation) {
  CorrectionOptions options;
  options.toggle = false;
  Loop loop = MakeLoop(options, 6);
  auto injected = ChooseAnomalousShapes(loop.setup->job, loop.batches, 0.03, 1);
  ASSERT_TRUE(injected.ok());
  injected->latency_s = 0.5 * loop.max_stage_s;
  const planning::PlanState state = RunLoop(loop, *injected);
  const CorrectionState* c = CorrectionOf(state);
  ASSERT_NE(c, nullptr);
  int learned = 0;
  for (const auto& [bucket, p] : c->penalties) {
    const bool anomalous = std::binary_search(injected->anomalous_buckets.begin(),
                                              injected->anomalous_buckets.end(), bucket);
    if (anomalous && p.iterations >= 2) {
      EXPECT_NEAR(p.penalty_s, injected->latency_s, 0.10 * injected->latency_s)
          << "bucket " << bucket << " after " << p.iterations << " iterations";
      EXPECT_TRUE(p.Applied(options.threshold));
      ++learned;
    } else if (!anomalous) {
      EXPECT_FALSE(p.Applied(options.threshold))
          << "bucket " << bucket << " penalty " << p.penalty_s << " of " << p.predicted_s;
    }
  }
  EXPECT_GE(learned, 1);
}

// The toggle: C = 0 keeps tracking on, C = 100% of an iteration switches it off after the first
// window (I = 2), and then the scheduler applies no penalty and says so.
TEST(DflopCorrection, ToggleSwitchesOffBelowCost) {
  for (double cost : {0.0, 1.0}) {
    CorrectionOptions options;
    options.window_iterations = 2;
    options.tracking_cost_fraction = cost;
    Loop loop = MakeLoop(options, 3);
    auto injected = ChooseAnomalousShapes(loop.setup->job, loop.batches, 0.05, 1);
    ASSERT_TRUE(injected.ok());
    injected->latency_s = 0.5 * loop.max_stage_s;
    std::vector<std::string> notes;
    const planning::PlanState state = RunLoop(loop, *injected, nullptr, &notes);
    const CorrectionState* c = CorrectionOf(state);
    ASSERT_NE(c, nullptr);
    if (cost == 0.0) {
      EXPECT_EQ(c->decision, TrackingDecision::kOn);
      EXPECT_GT(c->last_window_benefit, 0.0);
      EXPECT_NE(notes[2].find("tracking on ("), std::string::npos) << notes[2];
    } else {
      EXPECT_EQ(c->decision, TrackingDecision::kOff);
      EXPECT_LT(c->last_window_benefit, 1.0);
      EXPECT_NE(notes[2].find("tracking off"), std::string::npos) << notes[2];
      EXPECT_NE(notes[2].find("0 items penalised"), std::string::npos) << notes[2];
      EXPECT_EQ(c->AppliedPenalty(1000, options.threshold), 0.0);
    }
  }
}

TEST(DflopCorrection, DeterministicGivenSeed) {
  CorrectionOptions options;
  options.toggle = false;
  std::vector<double> a, b;
  std::map<int, double> pa, pb;
  for (auto* out : {&a, &b}) {
    Loop loop = MakeLoop(options, 3);
    auto injected = ChooseAnomalousShapes(loop.setup->job, loop.batches, 0.03, 7);
    ASSERT_TRUE(injected.ok());
    injected->latency_s = 0.75 * loop.max_stage_s;
    injected->noise_sigma = 0.02;
    const planning::PlanState s = RunLoop(loop, *injected, out);
    for (const auto& [k, p] : CorrectionOf(s)->penalties) (out == &a ? pa : pb)[k] = p.penalty_s;
  }
  EXPECT_EQ(a, b);
  EXPECT_EQ(pa, pb);
}

TEST(DflopCorrection, OptionsAreValidated) {
  CorrectionOptions o;
  o.alpha = 0;
  EXPECT_FALSE(o.Validate().ok());
  o = {};
  o.window_iterations = 0;
  EXPECT_FALSE(o.Validate().ok());
  o = {};
  o.tracking_cost_fraction = -0.1;
  EXPECT_FALSE(o.Validate().ok());
  EXPECT_TRUE(CorrectionOptions{}.Validate().ok());
}

// On the injected workload the assignment with correction is never worse than without, on
// average over seeds (simulated iteration time, tracking cost left out).
TEST(DflopCorrection, NeverWorseOnAverageOverSeeds) {
  CorrectionStudyOptions o;
  o.iterations = 6;
  o.rates = {0.05};
  o.latency_fractions = {0.5};
  o.seeds = {1, 2, 3};
  auto study = RunCorrectionStudy(o);
  ASSERT_TRUE(study.ok()) << study.status().ToString();
  ASSERT_EQ(study->cells.size(), 1u);
  EXPECT_GE(study->cells[0].gain, 0.0) << study->ToMarkdown(o);
  std::cout << study->ToMarkdown(o);
}

}  // namespace
}  // namespace weft::strategy::dflop
