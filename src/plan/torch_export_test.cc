#include "weft/plan/torch_export.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_plans.h"

namespace weft::plan {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(TorchCsv, HandMadeOneFOneBIsExportedCellByCell) {
  auto rows = ExportTorchActions(testing::TwoRankOneFOneB());
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_THAT((*rows)[0], ElementsAre("0F0", "0SEND_F0", "0F1", "0SEND_F1", "0RECV_B0", "0B0",
                                      "0RECV_B1", "0B1"));
  EXPECT_THAT((*rows)[1], ElementsAre("1RECV_F0", "1F0", "1B0", "1SEND_B0", "1RECV_F1", "1F1",
                                      "1B1", "1SEND_B1"));
  auto csv = ExportTorchCsv(testing::TwoRankOneFOneB());
  ASSERT_TRUE(csv.ok());
  EXPECT_EQ(*csv,
            "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
            "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n");
}

TEST(TorchCsv, ComputeOnlyFormatDropsCommunication) {
  auto csv = ExportTorchCsv(testing::TwoRankOneFOneB(), {.format = TorchCsvFormat::kComputeOnly});
  ASSERT_TRUE(csv.ok());
  EXPECT_EQ(*csv, "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
}

TEST(TorchCsv, StageMapFollowsTheDataChain) {
  auto map = DeriveTorchStageMap(testing::TwoRankOneFOneB());
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  ASSERT_EQ(map->stages.size(), 2u);
  EXPECT_EQ(map->stages[0].rank, 0);
  EXPECT_EQ(map->stages[1].rank, 1);
  EXPECT_EQ(map->num_microbatches, 2);
}

TEST(TorchCsv, SubMicrobatchesAreRefused) {
  ExecutionPlan plan = testing::TwoRankOneFOneB();
  plan.ranks[1].actions[2].stage.sub_microbatch = 1;
  auto csv = ExportTorchCsv(plan);
  ASSERT_FALSE(csv.ok());
  EXPECT_EQ(csv.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(csv.status().message(),
            "cannot export to torch CSV: rank 1 action 2 (forward m0 c0 mb0.1): sub-microbatches "
            "have no equivalent in torch's pipelining IR");
}

TEST(TorchCsv, MissingBackwardIsRefused) {
  ExecutionPlan plan = testing::TwoRankOneFOneB();
  // Make rank 0's backward of microbatch 1 a forward-only plan by dropping it (and its inputs).
  auto& a = plan.ranks[0].actions;
  a[10] = testing::Compute(ActionKind::kBackward, 0, {31}, {});  // B0 twice, B1 never
  auto csv = ExportTorchCsv(plan);
  ASSERT_FALSE(csv.ok());
  EXPECT_THAT(csv.status().message(), HasSubstr("microbatch 0 has 2 backward, 0 backward_input"));
}

TEST(TorchCsv, InvalidPlanIsRefusedWithTheValidatorsReason) {
  ExecutionPlan plan = testing::TwoRankOneFOneB();
  plan.ranks[1].buffers[1].tensor.shape = {1};
  auto csv = ExportTorchCsv(plan);
  ASSERT_FALSE(csv.ok());
  EXPECT_THAT(csv.status().message(), StartsWith("plan is invalid: rank 1 action 6"));
}

}  // namespace
}  // namespace weft::plan
