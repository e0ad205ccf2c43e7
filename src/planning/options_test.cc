// PlannerOptions::Validate and GraphBuildOptions::Validate, and the entries that check them.
#include <gtest/gtest.h>

#include <limits>

#include "weft/planning/graph_builder.h"
#include "weft/planning/planner.h"

namespace weft::planning {
namespace {

TEST(PlannerOptionsValidate, DefaultsAreValid) { EXPECT_TRUE(PlannerOptions{}.Validate().ok()); }

TEST(PlannerOptionsValidate, EachBadFieldIsNamedWithItsRule) {
  const struct {
    PlannerOptions options;
    const char* message;
  } cases[] = {
      {{.budget = {.threads = 0}}, "budget threads = 0; must be in [1, 256]"},
      {{.sim = {.buffer_element_bytes = 0}},
       "sim: buffer_element_bytes = 0; must be >= 1 (1 = exact bytes)"},
      {{.memory_policy = MemoryPolicy::kStrategy},
       "memory_policy = kStrategy; must be unset or kFixed (the others follow from the strategy "
       "and the static plan)"},
      {{.memory_policy = MemoryPolicy::kFirstUniformLevelThatFits},
       "memory_policy = kFirstUniformLevelThatFits; must be unset or kFixed (the others follow "
       "from the strategy and the static plan)"},
  };
  for (const auto& c : cases) {
    const Status s = c.options.Validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(s.message(), c.message);
  }
  EXPECT_TRUE(PlannerOptions{.memory_policy = MemoryPolicy::kFixed}.Validate().ok());
}

TEST(GraphBuildOptionsValidate, DefaultsAreValid) {
  EXPECT_TRUE(GraphBuildOptions{}.Validate().ok());
}

TEST(GraphBuildOptionsValidate, EachBadFieldIsNamedWithItsRule) {
  const struct {
    GraphBuildOptions options;
    const char* message;
  } cases[] = {
      {{.sub_microbatch_size = {4, -1}},
       "sub_microbatch_size[1] = -1; must be >= 0 (0 = the whole microbatch)"},
      {{.recompute = {spec::Recompute::kFull, static_cast<spec::Recompute>(4)}},
       "recompute[1] = 4; must be none, selective, full or offload"},
      {{.weight_grad_activation_fraction = 1.5},
       "weight_grad_activation_fraction = 1.5; must be in [0, 1]"},
      {{.weight_grad_activation_fraction = std::numeric_limits<double>::quiet_NaN()},
       "weight_grad_activation_fraction = nan; must be in [0, 1]"},
      {{.anchor_replica = {0, 1, -1}}, "anchor_replica[2] = -1; must be >= 0"},
  };
  for (const auto& c : cases) {
    const Status s = c.options.Validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(s.message(), c.message);
  }
}

// The builders check the options before they read the model, placement or batch.
TEST(GraphBuildOptionsValidate, TheBuildersCheckTheOptionsFirst) {
  const cost::CostModel cost_model{spec::ClusterSpec{}};
  const GraphBuildOptions bad{.anchor_replica = {-3}};
  auto graph = BuildStageGraph({}, {}, {}, {}, cost_model, {}, bad);
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().message(), "anchor_replica[0] = -3; must be >= 0");
  auto variants = BuildStageGraphVariants({}, {}, {}, {}, cost_model, {}, bad, {{}});
  ASSERT_FALSE(variants.ok());
  EXPECT_EQ(variants.status().message(), "anchor_replica[0] = -3; must be >= 0");
}

}  // namespace
}  // namespace weft::planning
