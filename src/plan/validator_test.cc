#include "weft/plan/validator.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "test_plans.h"
#include "weft/plan/compiler.h"
#include "weft/sched/generators.h"
#include "weft/sim/simulator.h"

namespace weft::plan {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::TwoRankOneFOneB;
using enum ActionKind;

// Static memory above capacity is refused, also on a rank that has no actions.
TEST(ValidatePlan, StaticMemoryAboveCapacityIsRefusedOnARankWithoutActions) {
  ExecutionPlan plan = TwoRankOneFOneB();
  RankPlan idle;
  idle.label = "idle";
  idle.memory_capacity_bytes = 1000;
  idle.static_bytes = 2000;
  plan.ranks.push_back(idle);
  auto report = ValidatePlan(plan);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().message().find("static memory"), std::string::npos)
      << report.status().message();
  plan.ranks.back().static_bytes = 500;
  EXPECT_TRUE(ValidatePlan(plan).ok()) << ValidatePlan(plan).status().ToString();
}

TEST(ValidatePlan, AcceptsHandMadeTwoRankOneFOneB) {
  auto report = ValidatePlan(TwoRankOneFOneB());
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->num_transfers, 4);
  EXPECT_EQ(report->p2p_bytes, 4 * 16 * 8 * 2);
  ASSERT_EQ(report->ranks.size(), 2u);
  EXPECT_EQ(report->ranks[0].num_compute, 4);
  EXPECT_EQ(report->ranks[0].num_isend, 2);
  EXPECT_EQ(report->ranks[1].num_irecv, 2);
  // Rank 0 holds both activations plus one gradient at most: 3 buffers of 256 bytes.
  EXPECT_EQ(report->ranks[0].peak_buffer_bytes, 3 * 256);
  EXPECT_THAT(report->BriefReport(), StartsWith("valid plan: 2 ranks, 34 actions (8 compute, 4 transfers"));
}

TEST(ValidatePlan, MissingIrecvIsReportedAsNeverReceived) {
  ExecutionPlan plan = TwoRankOneFOneB();
  auto& a = plan.ranks[1].actions;
  a.erase(a.begin() + 6, a.begin() + 8);  // irecv 11 + wait_recv 11
  auto report = ValidatePlan(plan);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(report.status().message(),
            "rank 0 action 3 (isend buf 1 to rank 1): never received (rank 1 posts 1 irecvs from "
            "rank 0; this is send #2)");
}

TEST(ValidatePlan, MissingIsendIsReportedAsNeverSent) {
  ExecutionPlan plan = TwoRankOneFOneB();
  auto& a = plan.ranks[0].actions;
  a.erase(a.begin() + 14);  // wait_send 1
  a.erase(a.begin() + 3);   // isend 1
  auto report = ValidatePlan(plan);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().message(),
            "rank 1 action 6 (irecv buf 11 from rank 0): never sent (rank 0 posts 1 isends to "
            "rank 1; this is receive #2)");
}

TEST(ValidatePlan, ShapeMismatchNamesBothEnds) {
  ExecutionPlan plan = TwoRankOneFOneB();
  plan.ranks[1].buffers[1].tensor.shape = {16, 4};  // buffer 11
  auto report = ValidatePlan(plan);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().message(),
            "rank 1 action 6 (irecv buf 11 from rank 0): receives [16,4] bf16 but the matching "
            "send #2 (rank 0 action 3 (isend buf 1 to rank 1)) is [16,8] bf16");
}

TEST(ValidatePlan, DtypeMismatchIsAnError) {
  ExecutionPlan plan = TwoRankOneFOneB();
  plan.ranks[0].buffers[2].tensor.dtype = DType::kFp32;  // buffer 30
  auto report = ValidatePlan(plan);
  ASSERT_FALSE(report.ok());
  EXPECT_THAT(report.status().message(),
              AllOf(StartsWith("rank 0 action 4 (irecv buf 30 from rank 1)"), HasSubstr("fp32")));
}

TEST(ValidatePlan, WaitingBeforeSendingDeadlocksAndNamesStuckRanks) {
  // Both ranks wait for the other's data before producing their own.
  ExecutionPlan plan = TwoRankOneFOneB();
  constexpr auto F = spec::Pass::kForward;
  constexpr auto B = spec::Pass::kBackward;
  plan.ranks[0].buffers = {{0, testing::Act(), ""}, {30, testing::Act(), ""}};
  plan.ranks[0].actions = {
      testing::Comm(kIrecv, 30, 1, 0, B),    testing::Comm(kWaitRecv, 30, 1, 0, B),
      testing::Compute(kForward, 0, {}, {0}), testing::Comm(kIsend, 0, 1, 0, F),
      testing::Comm(kWaitSend, 0, 1, 0, F),  testing::Free(0, 0, F),
      testing::Compute(kBackward, 0, {30}, {}), testing::Free(30, 0, B)};
  plan.ranks[1].buffers = {{10, testing::Act(), ""}, {20, testing::Act(), ""}};
  plan.ranks[1].actions = {
      testing::Comm(kIrecv, 10, 0, 0, F),      testing::Comm(kWaitRecv, 10, 0, 0, F),
      testing::Compute(kForward, 0, {10}, {}), testing::Free(10, 0, F),
      testing::Compute(kBackward, 0, {}, {20}), testing::Comm(kIsend, 20, 0, 0, B),
      testing::Comm(kWaitSend, 20, 0, 0, B),   testing::Free(20, 0, B)};
  testing::SetBufferEnds(plan);
  auto report = ValidatePlan(plan);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().message(),
            "deadlock: 2 of 2 ranks stuck: rank 0 action 1 (wait_recv buf 30 from rank 1) waits "
            "for rank 1; rank 1 action 1 (wait_recv buf 10 from rank 0) waits for rank 0");
}

TEST(ValidatePlan, RendezvousDeadlockOnWaitSend) {
  // rank 0: isend a; wait_send a; irecv g; wait_recv g.   rank 1: isend g; wait_send g; irecv a
  // ... Both wait_sends block because neither receiver has posted its irecv.
  constexpr auto F = spec::Pass::kForward;
  constexpr auto B = spec::Pass::kBackward;
  ExecutionPlan plan;
  plan.ranks.resize(2);
  plan.ranks[0].buffers = {{0, testing::Act(), ""}, {1, testing::Act(), ""}};
  plan.ranks[0].actions = {testing::Compute(kForward, 0, {}, {0}),
                           testing::Comm(kIsend, 0, 1, 0, F),
                           testing::Comm(kWaitSend, 0, 1, 0, F),
                           testing::Free(0, 0, F),
                           testing::Comm(kIrecv, 1, 1, 0, B),
                           testing::Comm(kWaitRecv, 1, 1, 0, B),
                           testing::Compute(kBackward, 0, {1}, {}),
                           testing::Free(1, 0, B)};
  plan.ranks[1].buffers = {{2, testing::Act(), ""}, {3, testing::Act(), ""}};
  plan.ranks[1].actions = {
      testing::Compute(kForward, 1, {}, {2}), testing::Comm(kIsend, 2, 0, 1, F),
      testing::Comm(kWaitSend, 2, 0, 1, F),   testing::Comm(kFree, 2, -1, 1, F),
      testing::Comm(kIrecv, 3, 0, 0, F),      testing::Comm(kWaitRecv, 3, 0, 0, F),
      testing::Compute(kForward, 0, {3}, {}), testing::Free(3, 0, F)};
  plan.module_names = {"llm"};
  testing::SetBufferEnds(plan);
  auto report = ValidatePlan(plan);
  ASSERT_FALSE(report.ok());
  EXPECT_THAT(report.status().message(),
              AllOf(StartsWith("deadlock: 2 of 2 ranks stuck"),
                    HasSubstr("rank 0 action 2 (wait_send buf 0 to rank 1)"),
                    HasSubstr("rank 1 action 2 (wait_send buf 2 to rank 0)")));
}

TEST(ValidatePlan, UseAfterFreeNamesTheFree) {
  ExecutionPlan plan = TwoRankOneFOneB();
  auto& a = plan.ranks[1].actions;
  std::swap(a[2], a[3]);  // free 10 before forward mb0 reads it
  auto report = ValidatePlan(plan);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().message(),
            "rank 1 action 3 (forward m0 c0 mb0): input buf 10 is used after free (freed at "
            "action 2)");
}

TEST(ValidatePlan, ReadingBeforeWaitRecvIsAnError) {
  ExecutionPlan plan = TwoRankOneFOneB();
  auto& a = plan.ranks[1].actions;
  std::swap(a[1], a[2]);  // forward before wait_recv
  auto report = ValidatePlan(plan);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().message(),
            "rank 1 action 1 (forward m0 c0 mb0): input buf 10 is used before its wait_recv "
            "(irecv at action 0)");
}

TEST(ValidatePlan, FreeingWhileSendInFlightIsAnError) {
  ExecutionPlan plan = TwoRankOneFOneB();
  auto& a = plan.ranks[0].actions;
  std::swap(a[12], a[13]);  // free 0 before wait_send 0
  auto report = ValidatePlan(plan);
  ASSERT_FALSE(report.ok());
  EXPECT_THAT(report.status().message(),
              StartsWith("rank 0 action 12 (free buf 0): buf 0 is freed while an isend"));
}

TEST(ValidatePlan, UnwaitedIsendsNameTheLeastBufferId) {
  ExecutionPlan plan = TwoRankOneFOneB();
  RankPlan& rank = plan.ranks[0];
  // Rank 0 sends buf 5 (action 1), then buf 1 (action 3), and never waits for either.
  rank.buffers[0].id = 5;
  rank.actions[0].outputs = {5};
  rank.actions[1].buffer = 5;
  rank.actions.erase(rank.actions.begin() + 12, rank.actions.begin() + 16);
  auto report = ValidatePlan(plan);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().message(),
            "rank 0 action 3 (isend buf 1 to rank 1): isend is never waited for (no wait_send)");
}

TEST(ValidatePlan, WaitSendBeforeItsIsendIsAnError) {
  ExecutionPlan plan = TwoRankOneFOneB();
  auto& a = plan.ranks[1].actions;
  std::rotate(a.begin() + 5, a.begin() + 12, a.begin() + 13);  // wait_send 20 before isend 20
  auto report = ValidatePlan(plan);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().message(),
            "rank 1 action 5 (wait_send buf 20 to rank 0): no pending isend of buf 20 to rank 0");
}

TEST(ValidatePlan, MemoryOverCapacityIsResourceExhausted) {
  ExecutionPlan plan = TwoRankOneFOneB();
  for (RankPlan& rank : plan.ranks) {
    rank.memory_capacity_bytes = 10'000;
    rank.static_bytes = 4'000;
    for (Action& a : rank.actions) {
      if (a.kind == kForward) a.activation_alloc_bytes = 2'900;
      if (a.kind == kBackward) a.activation_free_bytes = 2'900;
    }
  }
  // Rank 1 runs F B F B: at most 2900 live. Rank 0 runs F F B B: 5800 + buffers > 10000 - 4000.
  auto report = ValidatePlan(plan);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(report.status().message(),
            "rank 0 action 2 (forward m0 c0 mb1): memory 10.07 KiB > capacity 9.77 KiB (static "
            "3.91 KiB, activations 5.66 KiB, buffers 512 B)");
  // The same plan fits once the capacity allows both stashes.
  for (RankPlan& rank : plan.ranks) rank.memory_capacity_bytes = 11'000;
  auto ok = ValidatePlan(plan);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  // Peak: both stashes, both activations and the first gradient's receive buffer.
  EXPECT_EQ(ok->ranks[0].peak_bytes, 4'000 + 2 * 2'900 + 3 * 256);
  EXPECT_EQ(ok->ranks[0].peak_action, 4);
  // Memory checking can be turned off.
  for (RankPlan& rank : plan.ranks) rank.memory_capacity_bytes = 10'000;
  EXPECT_TRUE(ValidatePlan(plan, {.check_memory = false}).ok());
}

TEST(ValidatePlan, BuffersNeverFreedAreReported) {
  ExecutionPlan plan = TwoRankOneFOneB();
  plan.ranks[0].actions.erase(plan.ranks[0].actions.begin() + 15);  // free 1
  auto report = ValidatePlan(plan);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().message(), "rank 0 action 2 (forward m0 c0 mb1): buf 1 is never freed");
  EXPECT_TRUE(ValidatePlan(plan, {.require_all_freed = false}).ok());
}

TEST(ValidatePlan, BatchGroupsMustBeContiguousPosts) {
  ExecutionPlan plan = TwoRankOneFOneB();
  auto& a = plan.ranks[0].actions;
  a[3].group = 0;  // isend 1
  a[4].group = 0;  // irecv 30: contiguous, fine
  EXPECT_TRUE(ValidatePlan(plan).ok());
  a[8].group = 0;  // irecv 31, far away
  auto report = ValidatePlan(plan);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().message(),
            "rank 0 action 8 (irecv buf 31 from rank 1): batch group 0 is not contiguous (also at "
            "action 4)");
}

TEST(ValidatePlan, StructuralErrorsNameTheField) {
  ExecutionPlan plan = TwoRankOneFOneB();
  plan.ranks[0].actions[1].peer = 5;
  EXPECT_EQ(ValidatePlan(plan).status().message(),
            "rank 0 action 1 (isend buf 0 to rank 5): peer 5 is not a rank (plan has 2 ranks)");
  plan = TwoRankOneFOneB();
  plan.ranks[0].actions[0].outputs = {99};
  EXPECT_EQ(ValidatePlan(plan).status().message(),
            "rank 0 action 0 (forward m0 c0 mb0): output buf 99 is not declared on rank 0");
  plan = TwoRankOneFOneB();
  plan.ranks[1].buffers.push_back(plan.ranks[1].buffers[0]);
  EXPECT_EQ(ValidatePlan(plan).status().message(),
            "ranks[1].buffers[4].id = 10; declared twice on rank 1");
  EXPECT_FALSE(ValidatePlan(ExecutionPlan{}).ok());
}

TEST(ValidatePlan, ComputesMustBeTheEndsOfTheBuffersTheyTouch) {
  ExecutionPlan plan = TwoRankOneFOneB();
  plan.ranks[1].buffers[0].consumer.stage.microbatch = 1;  // buf 10 claims mb 1 reads it
  EXPECT_EQ(ValidatePlan(plan).status().message(),
            "rank 1 action 2 (forward m0 c0 mb0): reads buf 10 whose consumer is rank 1 forward m0 "
            "c0 mb1");
  plan = TwoRankOneFOneB();
  plan.ranks[0].buffers[0].producer.stage.pass = spec::Pass::kBackward;
  EXPECT_EQ(ValidatePlan(plan).status().message(),
            "rank 0 action 0 (forward m0 c0 mb0): writes buf 0 whose producer is rank 0 backward "
            "m0 c0 mb0");
  plan = TwoRankOneFOneB();
  plan.ranks[0].buffers[0].consumer.rank = 0;  // a local buffer that is sent
  EXPECT_EQ(ValidatePlan(plan).status().message(),
            "rank 0 action 1 (isend buf 0 to rank 1): sends buf 0 (rank 0 forward m0 c0 mb0 -> "
            "rank 0 forward m0 c0 mb0) from rank 0 to rank 1");
  plan = TwoRankOneFOneB();
  plan.ranks[1].buffers[0].producer.rank = 1;
  plan.ranks[1].buffers[0].consumer.rank = 0;
  EXPECT_EQ(ValidatePlan(plan).status().message(),
            "rank 1 action 0 (irecv buf 10 from rank 0): receives buf 10 (rank 1 forward m0 c0 mb0 "
            "-> rank 0 forward m0 c0 mb0) from rank 0 on rank 1");
  plan = TwoRankOneFOneB();
  plan.ranks[1].buffers[0].producer.rank = 0;
  plan.ranks[1].buffers[0].consumer.rank = 0;
  EXPECT_EQ(ValidatePlan(plan).status().message(),
            "ranks[1].buffers[0] (buf 10): neither end is on rank 1 (producer rank 0 forward m0 c0 "
            "mb0, consumer rank 0 forward m0 c0 mb0)");
  plan = TwoRankOneFOneB();
  plan.ranks[0].buffers[0].producer.rank = 7;
  EXPECT_EQ(ValidatePlan(plan).status().message(),
            "ranks[0].buffers[0].producer.rank = 7; must be in [0, 2) (the ranks)");
}

TEST(ValidatePlan, MatchedTransfersCarryTheSameEndsSamplesAndRows) {
  ExecutionPlan plan = TwoRankOneFOneB();
  plan.ranks[0].buffers[1].consumer.stage.sub_microbatch = 1;  // buf 1 (send of mb 1)
  EXPECT_EQ(
      ValidatePlan(plan).status().message(),
      "rank 1 action 6 (irecv buf 11 from rank 0): receives rank 0 forward m0 c0 mb1 -> rank "
      "1 forward m0 c0 mb1 but the matching send #2 (rank 0 action 3 (isend buf 1 to rank 1)) "
      "carries rank 0 forward m0 c0 mb1 -> rank 1 forward m0 c0 mb1.1");
  plan = TwoRankOneFOneB();
  plan.ranks[0].buffers[0].samples = {0, 1};
  plan.ranks[0].buffers[0].rows = 32;
  EXPECT_EQ(ValidatePlan(plan).status().message(),
            "rank 1 action 0 (irecv buf 10 from rank 0): receives samples [] (-1 rows) but the "
            "matching send #1 (rank 0 action 1 (isend buf 0 to rank 1)) carries samples [0,1] (32 "
            "rows)");
  plan.ranks[1].buffers[0].samples = {0, 1};
  plan.ranks[1].buffers[0].rows = 32;
  EXPECT_TRUE(ValidatePlan(plan).ok());
}

TEST(ValidatePlan, SamplesInstancesModulesAndReplicaAreChecked) {
  ExecutionPlan plan = TwoRankOneFOneB();
  plan.ranks[0].actions[0].samples = {2, 2};
  EXPECT_EQ(ValidatePlan(plan).status().message(),
            "rank 0 action 0 (forward m0 c0 mb0): samples [1] = 2; must be > the previous entry "
            "(2): samples are strictly ascending");
  plan = TwoRankOneFOneB();
  plan.ranks[0].buffers[0].samples = {-1};
  EXPECT_EQ(ValidatePlan(plan).status().message(),
            "ranks[0].buffers[0].samples[0] = -1; must be >= 0");
  plan = TwoRankOneFOneB();
  plan.ranks[0].actions[0].instance_begin = 3;
  EXPECT_EQ(ValidatePlan(plan).status().message(),
            "rank 0 action 0 (forward m0 c0 mb0): instances [3, 0); need 0 <= begin <= end");
  plan = TwoRankOneFOneB();
  plan.ranks[0].actions[12].stage.module = 1;
  EXPECT_EQ(ValidatePlan(plan).status().message(),
            "rank 0 action 12 (wait_send buf 0 to rank 1): module 1 is not in modules (the plan "
            "names 1)");
  plan = TwoRankOneFOneB();
  plan.replica = 2;
  EXPECT_EQ(ValidatePlan(plan).status().message(),
            "replica = 2, num_replicas = 2; need 0 <= replica < num_replicas");
}

TEST(ValidatePlan, GradientAllReduceFollowsTheModulesLastWeightGradientOncePerRank) {
  ExecutionPlan plan = TwoRankOneFOneB();
  auto& a = plan.ranks[0].actions;
  // Before B1 (action 10): the module's gradients are not complete.
  std::rotate(a.begin() + 7, a.begin() + 16, a.end());
  EXPECT_EQ(ValidatePlan(plan).status().message(),
            "rank 0 action 7 (all_reduce_grads m0): comes before the module's last "
            "weight-gradient compute (rank 0 action 11 (backward m0 c0 mb1)); its gradients are "
            "not complete yet");
  plan = TwoRankOneFOneB();
  plan.ranks[0].actions.push_back(testing::AllReduceGrads(0, 1024, 2));
  EXPECT_EQ(ValidatePlan(plan).status().message(),
            "rank 0 action 17 (all_reduce_grads m0): module 0 is all-reduced twice on rank 0 (also "
            "at action 16)");
  plan = TwoRankOneFOneB();
  plan.ranks[0].actions[16].dp = 0;
  EXPECT_EQ(ValidatePlan(plan).status().message(),
            "rank 0 action 16 (all_reduce_grads m0): dp = 0; must be >= 1");
  plan = TwoRankOneFOneB();
  plan.module_names.push_back("vit");
  plan.ranks[0].actions[16].stage.module = 1;
  EXPECT_EQ(ValidatePlan(plan).status().message(),
            "rank 0 action 16 (all_reduce_grads m1): module 1 has no backward / backward_weight "
            "on rank 0; no gradients to all-reduce");
  // Its position and the memory it does not take are all the validator needs.
  plan = TwoRankOneFOneB();
  auto report = ValidatePlan(plan);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->ranks[0].num_actions, 17);
}


// The data tables (plan_data.h): present tables must fit each other and the actions.
TEST(ValidatePlan, DataTablesMustFitTheActions) {
  const ExecutionPlan good = testing::TwoRankOneFOneBWithData();
  ASSERT_TRUE(ValidatePlan(good).ok()) << ValidatePlan(good).status().ToString();
  auto message = [](const ExecutionPlan& plan) {
    auto report = ValidatePlan(plan);
    return report.ok() ? std::string("OK") : report.status().message();
  };
  ExecutionPlan plan = good;
  plan.data.ranks.pop_back();
  EXPECT_EQ(message(plan), "data.ranks has 1 entries; the plan has 2 ranks");
  plan = good;
  plan.data.sequences[1].samples[1] = 4;
  EXPECT_EQ(message(plan),
            "data.sequences[1].samples[1] = 4; must be in [0, 4) (the samples of data.samples)");
  plan = good;
  plan.data.microbatches[1].microbatch = 2;
  EXPECT_EQ(message(plan),
            "data.microbatches[1] is (replica 0, microbatch 2); the table must be sorted by "
            "replica with each replica's microbatches numbered 0, 1, ... without gaps");
  plan = good;
  plan.data.microbatches[0].sequences = {7};
  EXPECT_EQ(message(plan), "data.microbatches[0].sequences[0] = 7; must be in [0, 2) (the "
                           "sequences of data.sequences)");
  plan = good;
  plan.data.microbatches[0].instances[0][0].samples = {0, 2};
  EXPECT_EQ(message(plan), "data.microbatches[0].instances[0][0].samples[1] = 2; not a sample "
                           "of the microbatch's sequences");
  plan = good;
  plan.data.microbatches[0].instances.push_back({});
  EXPECT_EQ(message(plan), "data.microbatches[0].instances has 2 lists; the plan has 1 modules");
  plan = good;
  plan.data.ranks[1].replica = 1;
  EXPECT_EQ(message(plan),
            "rank 1 action 0 (irecv buf 10 from rank 0): microbatch 0 of replica 1 "
            "(data.ranks[1].replica) is not in data.microbatches");
  plan = good;
  plan.ranks[0].actions[2].instance_end = 2;
  EXPECT_EQ(message(plan), "rank 0 action 2 (forward m0 c0 mb1): instances [0, 2); the "
                           "microbatch has 1 instances of module 0 (data.microbatches[1])");
  plan = good;
  plan.ranks[0].actions[2].samples = {0, 3};
  EXPECT_EQ(message(plan), "rank 0 action 2 (forward m0 c0 mb1): sample 0 is not in microbatch "
                           "1 of replica 0 (data.microbatches[1])");
  plan = good;
  plan.data.ranks[1].chunks[0].chunk = 1;
  EXPECT_EQ(message(plan),
            "rank 1 action 0 (irecv buf 10 from rank 0): the rank holds no chunk of "
            "module 0 in slot 0 (data.ranks[1].chunks)");
  plan = good;
  plan.data.ranks[0].chunks.push_back(plan.data.ranks[0].chunks[0]);
  EXPECT_EQ(message(plan), "data.ranks[0].chunks[1]: module 0 has a chunk in slot 0 already ([0])");
  plan = good;
  plan.ranks[0].buffers[0].samples = {1, 9};
  EXPECT_EQ(message(plan), "ranks[0].buffers[0].samples[1] = 9; must be in [0, 4) (the samples "
                           "of data.samples)");
  // Without tables (a plan compiled from a bare graph) nothing of this is checked.
  plan = good;
  plan.data = {};
  EXPECT_EQ(message(plan), "OK");
}

// A plan compiled from a 4-rank pipeline of 8 microbatches (no data tables): the rules that need
// only the plan's actions and buffers.
ExecutionPlan CompiledPipeline(sched::ScheduleKind kind, bool split) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  auto graph = sched::BuildPipelineGraph(
      {.num_groups = 4,
       .chunks_per_group = 1,
       .num_microbatches = 8,
       .split_backward = split,
       .costs = {sched::VirtualStageCost{.forward_s = 1e-3,
                                         .backward_input_s = 1e-3,
                                         .backward_weight_s = 1e-3,
                                         .activation_bytes = kGiB,
                                         .weight_grad_activation_bytes = split ? kGiB / 4 : 0,
                                         .send_bytes = 2048 * 4096 * 2}},
       .static_bytes_per_group = 10 * kGiB});
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  auto schedule = sched::MakeSchedule(kind, *graph);
  EXPECT_TRUE(schedule.ok()) << schedule.status().ToString();
  spec::ClusterSpec cluster;
  cluster.name = "test";
  cluster.num_nodes = 1;
  cluster.gpus_per_node = 8;
  cluster.gpu.peak_bf16_flops_per_s = 1e15;
  cluster.gpu.hbm_bandwidth_bytes_per_s = 2e12;
  cluster.gpu.memory_capacity_bytes = 80 * kGiB;
  cluster.intra_node = {.bandwidth_bytes_per_s = 200e9, .latency_s = 1e-5};
  cluster.inter_node = cluster.intra_node;
  auto timeline = sim::Simulate(*graph, *schedule, cluster);
  EXPECT_TRUE(timeline.ok()) << timeline.status().ToString();
  auto plan =
      CompilePlan(*graph, *schedule, *timeline, {.model = "toy", .hidden_size_by_module = {4096}});
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(ValidatePlan(*plan).ok()) << ValidatePlan(*plan).status().ToString();
  return *std::move(plan);
}

// The index of the first action on `rank` for which `pick` holds, or -1.
template <typename Pick>
int FindAction(const ExecutionPlan& plan, int rank, Pick pick) {
  const auto& actions = plan.ranks[rank].actions;
  for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
    if (pick(actions[i])) return i;
  }
  return -1;
}

// Issue 34 item 6: every stage of the plan runs exactly once on its rank.
TEST(ValidatePlan, CompiledPlanWithoutAForwardWhoseBackwardStaysIsRefused) {
  ExecutionPlan plan = CompiledPipeline(sched::ScheduleKind::kOneFOneB, false);
  // The last rank's forward of microbatch 3: it reads the activations rank 2 sent.
  auto forward_of = [](int mb) {
    return [mb](const Action& a) { return a.kind == kForward && a.stage.microbatch == mb; };
  };
  const int f = FindAction(plan, 3, forward_of(3));
  ASSERT_GE(f, 0);
  plan.ranks[3].actions.erase(plan.ranks[3].actions.begin() + f);
  const int b = FindAction(
      plan, 3, [](const Action& a) { return a.kind == kBackward && a.stage.microbatch == 3; });
  EXPECT_EQ(ValidatePlan(plan).status().message(),
            ActionLocation(plan, 3, b) +
                ": no forward of this stage runs earlier on rank 3; a backward needs its forward");
  // Twice is refused as well.
  plan = CompiledPipeline(sched::ScheduleKind::kOneFOneB, false);
  const int f0 = FindAction(plan, 0, forward_of(0));
  const int f1 = FindAction(plan, 0, forward_of(1));
  Action again = plan.ranks[0].actions[f0];
  again.outputs.clear();
  plan.ranks[0].actions.insert(plan.ranks[0].actions.begin() + f1, again);
  EXPECT_EQ(ValidatePlan(plan).status().message(),
            ActionLocation(plan, 0, f1) + fmt::format(": the stage's forward already ran at "
                                                      "action {}; every stage runs exactly once "
                                                      "on its rank",
                                                      f0));
}

TEST(ValidatePlan, CompiledPlanWithoutABackwardWeightIsRefused) {
  ExecutionPlan plan = CompiledPipeline(sched::ScheduleKind::kZeroBubbleH1, true);
  const int w = FindAction(plan, 1, [](const Action& a) {
    return a.kind == kBackwardWeight && a.stage.microbatch == 5;
  });
  ASSERT_GE(w, 0);
  plan.ranks[1].actions.erase(plan.ranks[1].actions.begin() + w);
  const int bi = FindAction(
      plan, 1, [](const Action& a) { return a.kind == kBackwardInput && a.stage.microbatch == 5; });
  EXPECT_EQ(ValidatePlan(plan).status().message(),
            ActionLocation(plan, 1, bi) +
                ": no backward_weight of this stage follows on rank 1 while 7 other split "
                "backwards of module 0 chunk 0 have one (the weight gradient is never computed)");
  // A backward_weight before its backward_input.
  plan = CompiledPipeline(sched::ScheduleKind::kZeroBubbleH1, true);
  auto& actions = plan.ranks[1].actions;
  const int w5 = FindAction(plan, 1, [](const Action& a) {
    return a.kind == kBackwardWeight && a.stage.microbatch == 5;
  });
  const int bi5 = FindAction(
      plan, 1, [](const Action& a) { return a.kind == kBackwardInput && a.stage.microbatch == 5; });
  ASSERT_LT(bi5, w5);
  std::rotate(actions.begin() + bi5, actions.begin() + w5, actions.begin() + w5 + 1);
  EXPECT_EQ(ValidatePlan(plan).status().message(),
            ActionLocation(plan, 1, bi5) +
                ": no backward_input of this stage runs earlier on rank 1; a backward_weight "
                "follows its backward_input");
}

TEST(ValidatePlan, CompiledPlanWithAComputesInputsEmptiedIsRefused) {
  ExecutionPlan plan = CompiledPipeline(sched::ScheduleKind::kOneFOneB, false);
  const int f = FindAction(
      plan, 2, [](const Action& a) { return a.kind == kForward && a.stage.microbatch == 2; });
  ASSERT_GE(f, 0);
  ASSERT_EQ(plan.ranks[2].actions[f].inputs.size(), 1u);
  const BufferId input = plan.ranks[2].actions[f].inputs[0];
  plan.ranks[2].actions[f].inputs.clear();
  EXPECT_EQ(ValidatePlan(plan).status().message(),
            ActionLocation(plan, 2, f) +
                fmt::format(": buf {} is not among its inputs [] but names this stage as its "
                            "consumer",
                            input));
  // Outputs alike.
  plan = CompiledPipeline(sched::ScheduleKind::kOneFOneB, false);
  const BufferId output = plan.ranks[2].actions[f].outputs.at(0);
  plan.ranks[2].actions[f].outputs.clear();
  EXPECT_EQ(ValidatePlan(plan).status().message(),
            ActionLocation(plan, 2, f) +
                fmt::format(": buf {} is not among its outputs [] but names this stage as its "
                            "producer",
                            output));
}

TEST(ValidatePlan, CompiledPlanWhoseTransferNamesAnotherStageIsRefused) {
  ExecutionPlan plan = CompiledPipeline(sched::ScheduleKind::kOneFOneB, false);
  const int s = FindAction(plan, 0, [](const Action& a) { return a.kind == kIsend; });
  ASSERT_GE(s, 0);
  Action& send = plan.ranks[0].actions[s];
  send.stage.microbatch = 999;
  const Buffer* b = plan.FindBuffer(0, send.buffer);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(
      ValidatePlan(plan).status().message(),
      ActionLocation(plan, 0, s) +
          fmt::format(": names stage forward m0 c0 mb999 which is not an end of buf {} on "
                      "rank 0 ({} -> {})",
                      send.buffer, DescribeBufferEnd(b->producer), DescribeBufferEnd(b->consumer)));
}

TEST(ValidatePlan, BufferRowsNeedAShapeThatHoldsThem) {
  ExecutionPlan plan = TwoRankOneFOneB();
  // Buf 0 (rank 0) -> buf 10 (rank 1), the activations of mb 0.
  plan.ranks[0].buffers[0].tensor.shape = plan.ranks[1].buffers[0].tensor.shape = {0};
  EXPECT_TRUE(ValidatePlan(plan).ok());  // rows unknown (-1): nothing to compare
  plan.ranks[0].buffers[0].rows = plan.ranks[1].buffers[0].rows = 144;
  EXPECT_EQ(ValidatePlan(plan).status().message(),
            "ranks[0].buffers[0] (buf 0): shape [0] bf16 holds no rows but the buffer carries 144 "
            "rows; shape and rows must agree");
  plan.ranks[0].buffers[0].tensor.shape = {0, 8};
  EXPECT_THAT(ValidatePlan(plan).status().message(), HasSubstr("shape [0,8] bf16 holds no rows"));
}

}  // namespace
}  // namespace weft::plan
