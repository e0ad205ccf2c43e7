#include "weft/sched/partition.h"

#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace weft::sched {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// DIP §2.2: 64 ViT layers at 6.75 ms and 64 LM layers at 10.5 ms (fwd+bwd) over 16 stages.
TEST(PartitionMinMax, ReproducesDipSection2Point2) {
  std::vector<double> costs(64, 6.75e-3);
  costs.insert(costs.end(), 64, 10.5e-3);
  auto part = PartitionMinMax(costs, 16);
  ASSERT_TRUE(part.ok()) << part.status().ToString();
  EXPECT_EQ(part->num_stages(), 16);
  EXPECT_NEAR(part->max_stage_cost, 73.5e-3, 1e-9);
  EXPECT_NEAR(part->min_stage_cost, 63e-3, 1e-9);
  int layers = 0;
  for (int s = 0; s < 16; ++s) {
    EXPECT_GE(part->LayersOf(s), 1);
    layers += part->LayersOf(s);
  }
  EXPECT_EQ(layers, 128);
  // Megatron's equal split puts 8 layers on every stage: 54 ms ViT stages, 84 ms LM stages.
  auto equal = PartitionEqualLayers(costs, 16);
  ASSERT_TRUE(equal.ok());
  EXPECT_NEAR(equal->max_stage_cost, 84e-3, 1e-9);
  EXPECT_NEAR(equal->min_stage_cost, 54e-3, 1e-9);
}

TEST(PartitionEqualLayers, GivesTheRemainderToTheFirstStages) {
  std::vector<double> costs(10, 1.0);
  auto part = PartitionEqualLayers(costs, 4);
  ASSERT_TRUE(part.ok());
  EXPECT_THAT(part->boundaries, ElementsAre(0, 3, 6, 8, 10));
  EXPECT_THAT(part->stage_costs, ElementsAre(3, 3, 2, 2));
}

TEST(PartitionMinMax, BalancesByParameterCounts) {
  // Embedding-heavy first layer: the balance by parameters isolates it.
  std::vector<double> params = {8, 1, 1, 1, 1, 1, 1, 1, 1};
  auto part = PartitionMinMax(params, 2);
  ASSERT_TRUE(part.ok());
  EXPECT_THAT(part->boundaries, ElementsAre(0, 1, 9));
  EXPECT_DOUBLE_EQ(part->max_stage_cost, 8);
}

TEST(Partition, RejectsTooFewLayersAndBadCosts) {
  std::vector<double> costs(3, 1.0);
  EXPECT_THAT(PartitionMinMax(costs, 4).status().message(), HasSubstr("num_stages = 4"));
  EXPECT_THAT(PartitionEqualLayers(costs, 0).status().message(), HasSubstr("num_stages = 0"));
  costs[1] = -1;
  EXPECT_THAT(PartitionMinMax(costs, 2).status().message(), HasSubstr("costs[1] = -1"));
}

}  // namespace
}  // namespace weft::sched
