#include "weft/sched/schedule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace weft::sched {
namespace {

using ::testing::HasSubstr;

graph::StageGraph TwoGroups() {
  graph::StageGraph g;
  g.AddGroup({});
  g.AddGroup({.first_gpu = 1});
  g.AddStage({.group = 0});                    // 0
  g.AddStage({.group = 0, .microbatch = 1});   // 1
  g.AddStage({.group = 1});                    // 2
  g.AddEdge(0, 1);
  g.AddEdge(1, 2);
  EXPECT_TRUE(g.Finalize().ok());
  return g;
}

TEST(Schedule, AcceptsAnOrderRespectingSameGroupDependencies) {
  const auto g = TwoGroups();
  EXPECT_TRUE((Schedule{.order = {{0, 1}, {2}}}).Validate(g).ok());
}

TEST(Schedule, RejectsStageOnAnotherGroupsList) {
  const auto g = TwoGroups();
  EXPECT_THAT((Schedule{.order = {{0, 1, 2}, {}}}).Validate(g).message(),
              HasSubstr("order[0][2] = stage 2 (g1 F mb0.0 c0 m0); belongs to group 1"));
}

TEST(Schedule, RejectsMissingAndDuplicateStages) {
  const auto g = TwoGroups();
  EXPECT_THAT((Schedule{.order = {{0}, {2}}}).Validate(g).message(), HasSubstr("misses stage 1"));
  EXPECT_THAT((Schedule{.order = {{0, 1, 0}, {2}}}).Validate(g).message(),
              HasSubstr("already listed at order[0][0]"));
  EXPECT_THAT((Schedule{.order = {{0, 1}}}).Validate(g).message(), HasSubstr("order.size() = 1"));
}

TEST(Schedule, RejectsSameGroupOrderAgainstDependencies) {
  const auto g = TwoGroups();
  EXPECT_THAT((Schedule{.order = {{1, 0}, {2}}}).Validate(g).message(),
              HasSubstr("runs before its input"));
}

TEST(Schedule, CheckDeadlockFreeNamesWhereEachGroupWaits) {
  graph::StageGraph g;
  g.AddGroup({});
  g.AddGroup({.first_gpu = 1});
  g.AddStage({.group = 0});                   // 0
  g.AddStage({.group = 0, .microbatch = 1});  // 1
  g.AddStage({.group = 1});                   // 2
  g.AddStage({.group = 1, .microbatch = 1});  // 3
  g.AddEdge(0, 3);
  g.AddEdge(2, 1);
  ASSERT_TRUE(g.Finalize().ok());
  EXPECT_TRUE((Schedule{.order = {{0, 1}, {2, 3}}}).CheckDeadlockFree(g).ok());
  EXPECT_TRUE((Schedule{.order = {{0, 1}, {3, 2}}}).CheckDeadlockFree(g).ok());
  const Status status = (Schedule{.order = {{1, 0}, {3, 2}}}).CheckDeadlockFree(g);
  EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(),
              HasSubstr("group 0 waits at order[0][0] = stage 1 (g0 F mb1.0 c0 m0) for stage 2"));
  EXPECT_THAT(status.message(), HasSubstr("group 1 waits at order[1][0] = stage 3"));
}

}  // namespace
}  // namespace weft::sched
