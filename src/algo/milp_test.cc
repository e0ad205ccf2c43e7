#include "weft/algo/milp.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace weft::algo {
namespace {

TEST(SolveMilp, SolvesSmallKnapsackToOptimality) {
  // max 5a + 4b + 3c  s.t. 2a + 3b + c <= 5, binaries.
  MilpModel model;
  const int a = model.AddBinary("a");
  const int b = model.AddBinary("b");
  const int c = model.AddBinary("c");
  model.AddLessEqual({{a, 2}, {b, 3}, {c, 1}}, 5, "weight");
  model.SetObjective({{a, 5}, {b, 4}, {c, 3}}, ObjectiveSense::kMaximize);
  auto result = SolveMilp(model);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->status, MilpStatus::kOptimal) << result->BriefReport();
  // 2a+3b+c <= 5: {a,b}=9, {a,c}=8, {b,c}=7 -> optimum 9 with a=b=1, c=0.
  EXPECT_NEAR(result->objective_value, 9.0, 1e-6);
  EXPECT_NEAR(result->values[a], 1.0, 1e-6);
  EXPECT_NEAR(result->values[b], 1.0, 1e-6);
  EXPECT_NEAR(result->values[c], 0.0, 1e-6);
}

TEST(SolveMilp, SolvesIntegerProgramWhoseLpRelaxationIsFractional) {
  // min x + y s.t. 2x + 2y >= 3, x, y integer >= 0 -> LP optimum 1.5, integer optimum 2.
  MilpModel model;
  const int x = model.AddVariable(0, 10, true, "x");
  const int y = model.AddVariable(0, 10, true, "y");
  model.AddGreaterEqual({{x, 2}, {y, 2}}, 3);
  model.SetObjective({{x, 1}, {y, 1}}, ObjectiveSense::kMinimize, /*offset=*/10.0);
  auto result = SolveMilp(model);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->status, MilpStatus::kOptimal);
  EXPECT_NEAR(result->objective_value, 12.0, 1e-6);
}

TEST(SolveMilp, SolvesPureLinearProgram) {
  // max 3x + 2y s.t. x + y <= 4, x + 3y <= 6, x <= 3 -> x=3, y=1, objective 11.
  MilpModel model;
  const int x = model.AddContinuous(0, 3);
  const int y = model.AddContinuous(0, kMilpInfinity);
  model.AddLessEqual({{x, 1}, {y, 1}}, 4);
  model.AddLessEqual({{x, 1}, {y, 3}}, 6);
  model.SetObjective({{x, 3}, {y, 2}}, ObjectiveSense::kMaximize);
  auto result = SolveMilp(model);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->status, MilpStatus::kOptimal);
  EXPECT_NEAR(result->objective_value, 11.0, 1e-6);
  EXPECT_NEAR(result->values[x], 3.0, 1e-6);
  EXPECT_NEAR(result->values[y], 1.0, 1e-6);
}

TEST(SolveMilp, HonoursRangedAndEqualityConstraints) {
  // min x s.t. 2 <= x + y <= 3, y == 1.5, x integer -> x = 1 (x + 1.5 >= 2 -> x >= 0.5).
  MilpModel model;
  const int x = model.AddVariable(-5, 5, true);
  const int y = model.AddContinuous(-kMilpInfinity, kMilpInfinity);
  model.AddConstraint({{x, 1}, {y, 1}}, 2, 3);
  model.AddEqual({{y, 1}}, 1.5);
  model.SetObjective({{x, 1}}, ObjectiveSense::kMinimize);
  auto result = SolveMilp(model);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->status, MilpStatus::kOptimal);
  EXPECT_NEAR(result->values[x], 1.0, 1e-6);
}

TEST(SolveMilp, ReportsInfeasibility) {
  MilpModel model;
  const int x = model.AddVariable(0, 1, true);
  const int y = model.AddVariable(0, 1, true);
  model.AddGreaterEqual({{x, 1}, {y, 1}}, 3);
  model.SetObjective({{x, 1}}, ObjectiveSense::kMinimize);
  auto result = SolveMilp(model);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->status, MilpStatus::kInfeasible);
  EXPECT_FALSE(result->has_solution());
}

TEST(SolveMilp, AcceptsWarmStartAndReturnsOptimum) {
  MilpModel model;
  std::vector<LinearTerm> weight, value;
  const std::vector<double> w = {4, 6, 5, 3, 7, 2, 8, 5};
  const std::vector<double> v = {7, 9, 8, 4, 11, 3, 12, 6};
  for (size_t i = 0; i < w.size(); ++i) {
    const int var = model.AddBinary();
    weight.push_back({var, w[i]});
    value.push_back({var, v[i]});
  }
  model.AddLessEqual(weight, 20);
  model.SetObjective(value, ObjectiveSense::kMaximize);
  // Brute force optimum.
  double best = 0;
  for (int mask = 0; mask < (1 << 8); ++mask) {
    double ww = 0, vv = 0;
    for (int i = 0; i < 8; ++i) {
      if (mask >> i & 1) ww += w[i], vv += v[i];
    }
    if (ww <= 20) best = std::max(best, vv);
  }
  MilpOptions options;
  options.warm_start = {1, 0, 0, 0, 0, 0, 0, 0};  // feasible, poor
  auto result = SolveMilp(model, options);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->status, MilpStatus::kOptimal);
  EXPECT_NEAR(result->objective_value, best, 1e-6);
}

TEST(SolveMilp, RejectsInvalidModelNamingTheField) {
  MilpModel model;
  const int x = model.AddVariable(2, 1, false, "x");
  model.SetObjective({{x, 1}}, ObjectiveSense::kMinimize);
  auto result = SolveMilp(model);
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), ::testing::HasSubstr("milp.variables[0]"));

  MilpModel model2;
  model2.AddBinary();
  model2.AddLessEqual({{3, 1.0}}, 1);
  EXPECT_THAT(SolveMilp(model2).status().message(),
              ::testing::HasSubstr("milp.constraints[0] ('').terms[0].variable = 3"));
  MilpModel model3;
  model3.AddBinary();
  EXPECT_THAT(SolveMilp(model3, {.warm_start = {1, 2}}).status().message(),
              ::testing::HasSubstr("warm_start"));
}

}  // namespace
}  // namespace weft::algo
