#include "weft/sched/generators.h"

#include <string>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace weft::sched {
namespace {

using graph::StageGraph;
using graph::StageId;
using spec::Pass;
using ::testing::HasSubstr;

// "F0 F1 B0 ..." (pass and microbatch; chunk appended as ":c" when > 0) for one group's order.
std::string Describe(const StageGraph& g, const std::vector<StageId>& order) {
  std::string out;
  for (StageId s : order) {
    const graph::Stage& st = g.stage(s);
    std::string pass(spec::PassShortName(st.pass));
    if (pass == "Bi") pass = "B";
    out += fmt::format("{}{}{} ", pass, st.microbatch, st.chunk > 0 ? fmt::format(":{}", st.chunk) : "");
  }
  if (!out.empty()) out.pop_back();
  return out;
}

StageGraph Pipeline(int p, int v, int m, bool split = false) {
  auto graph = BuildPipelineGraph(
      {.num_groups = p, .chunks_per_group = v, .num_microbatches = m, .split_backward = split});
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  return *std::move(graph);
}

TEST(BuildPipelineGraph, HasOneForwardAndBackwardPerVirtualStageAndMicrobatch) {
  const StageGraph g = Pipeline(4, 2, 3);
  EXPECT_EQ(g.num_groups(), 4);
  EXPECT_EQ(g.num_stages(), 3 * 8 * 2);
  // Per microbatch: 7 forward sends, 7 backward sends, 8 F→B.
  EXPECT_EQ(g.num_edges(), 3 * (7 + 7 + 8));
  const StageGraph zb = Pipeline(4, 1, 3, /*split=*/true);
  EXPECT_EQ(zb.num_stages(), 3 * 4 * 3);
  // Virtual stage 5 of the interleaved pipeline lives on group 1 as chunk 1.
  EXPECT_EQ(g.stage(5).group, 1);
  EXPECT_EQ(g.stage(5).chunk, 1);
}

TEST(BuildPipelineGraph, RejectsBadShapeNamingTheField) {
  auto bad = BuildPipelineGraph({.num_groups = 2, .num_microbatches = 0});
  EXPECT_THAT(bad.status().message(), HasSubstr("num_microbatches = 0"));
  auto bad_costs = BuildPipelineGraph({.num_groups = 2, .costs = {{}, {}, {}}});
  EXPECT_THAT(bad_costs.status().message(), HasSubstr("costs.size() = 3"));
}

TEST(OneFOneB, FollowsMegatronWarmupRule) {
  const StageGraph g = Pipeline(4, 1, 6);
  auto s = MakeSchedule(ScheduleKind::kOneFOneB, g);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE(s->Validate(g).ok());
  EXPECT_EQ(Describe(g, s->order[0]), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(Describe(g, s->order[2]), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5");
  EXPECT_EQ(Describe(g, s->order[3]), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
}

TEST(OneFOneB, WarmupIsCappedByMicrobatches) {
  const StageGraph g = Pipeline(4, 1, 2);
  auto s = MakeSchedule(ScheduleKind::kOneFOneB, g);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(Describe(g, s->order[0]), "F0 F1 B0 B1");
}

TEST(GPipe, RunsAllForwardsThenAllBackwards) {
  const StageGraph g = Pipeline(2, 1, 3);
  auto s = MakeSchedule(ScheduleKind::kGPipe, g);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(Describe(g, s->order[1]), "F0 F1 F2 B0 B1 B2");
}

TEST(Interleaved, FollowsMegatronVirtualMicrobatchOrder) {
  const StageGraph g = Pipeline(2, 2, 4);
  auto s = MakeSchedule(ScheduleKind::kInterleavedOneFOneB, g);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE(s->Validate(g).ok());
  EXPECT_EQ(s->name, "interleaved-1f1b(v=2)");
  // Rank 0: warmup (2-0-1)*2 + (2-1)*2 = 4 forwards.
  EXPECT_EQ(Describe(g, s->order[0]),
            "F0 F1 F0:1 F1:1 F2 B0:1 F3 B1:1 F2:1 B0 F3:1 B1 B2:1 B3:1 B2 B3");
  // Rank 1: warmup 2.
  EXPECT_EQ(Describe(g, s->order[1]),
            "F0 F1 F0:1 B0:1 F1:1 B1:1 F2 B0 F3 B1 F2:1 B2:1 F3:1 B3:1 B2 B3");
}

TEST(Interleaved, RequiresMicrobatchesDivisibleByPipelineSize) {
  const StageGraph g = Pipeline(4, 2, 6);
  auto s = MakeSchedule(ScheduleKind::kInterleavedOneFOneB, g);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.status().message(),
              HasSubstr("num_microbatches (6) divisible by the pipeline size P (4)"));
}

TEST(Interleaved, WithOneChunkIsPlainOneFOneB) {
  const StageGraph g = Pipeline(4, 1, 6);
  auto a = MakeSchedule(ScheduleKind::kInterleavedOneFOneB, g);
  auto b = MakeSchedule(ScheduleKind::kOneFOneB, g);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->order, b->order);
}

TEST(ZeroBubbleH1, DefersWeightGradientsByTheRankOnEachRank) {
  const StageGraph g = Pipeline(3, 1, 4, /*split=*/true);
  auto s = MakeSchedule(ScheduleKind::kZeroBubbleH1, g);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE(s->Validate(g).ok());
  EXPECT_EQ(Describe(g, s->order[0]), "F0 F1 F2 B0 W0 F3 B1 W1 B2 W2 B3 W3");
  EXPECT_EQ(Describe(g, s->order[1]), "F0 F1 B0 F2 B1 W0 F3 B2 W1 B3 W2 W3");
  EXPECT_EQ(Describe(g, s->order[2]), "F0 B0 F1 B1 F2 B2 W0 F3 B3 W1 W2 W3");
}

TEST(ZeroBubbleH1, NeedsSplitBackward) {
  const StageGraph g = Pipeline(3, 1, 4);
  auto s = MakeSchedule(ScheduleKind::kZeroBubbleH1, g);
  EXPECT_THAT(s.status().message(), HasSubstr("kBackwardInput"));
}

TEST(OneFOneB, OnSplitBackwardRunsWeightRightAfterInputGradient) {
  const StageGraph g = Pipeline(2, 1, 2, /*split=*/true);
  auto s = MakeSchedule(ScheduleKind::kOneFOneB, g);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(Describe(g, s->order[0]), "F0 F1 B0 W0 B1 W1");
}

TEST(OneFOneB, RefusesChunksThatRevisitGroupsInsteadOfDeadlocking) {
  const StageGraph g = Pipeline(4, 2, 8);
  auto s = MakeSchedule(ScheduleKind::kOneFOneB, g);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.status().message(), HasSubstr("needs interleaved-1f1b"));
  EXPECT_THAT(s.status().message(), HasSubstr("deadlock: "));
  EXPECT_TRUE(MakeSchedule(ScheduleKind::kGPipe, g).ok());  // GPipe never deadlocks
}

TEST(ScheduleKind, ParsesItsOwnNames) {
  for (ScheduleKind k : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB,
                         ScheduleKind::kInterleavedOneFOneB, ScheduleKind::kZeroBubbleH1}) {
    auto parsed = ParseScheduleKind(ScheduleKindName(k));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, k);
  }
  EXPECT_THAT(ParseScheduleKind("2f2b").status().message(), HasSubstr("'2f2b'"));
}

// Two encoders (groups 0 and 1) feed one LLM pipelined over groups 2 and 3: the encoders share
// rank 0, so P = 3 and each encoder group warms up with P − 1 = 2 forwards.
TEST(OneFOneB, OnFanInGraphRanksGroupsByForwardHops) {
  StageGraph g;
  for (int i = 0; i < 4; ++i) g.AddGroup({.first_gpu = i});
  g.SetModuleNames({"vit", "audio", "llm"});
  const int m = 4;
  for (int mb = 0; mb < m; ++mb) {
    const StageId fv = g.AddStage({.group = 0, .module = 0, .microbatch = mb});
    const StageId fa = g.AddStage({.group = 1, .module = 1, .microbatch = mb});
    const StageId f2 = g.AddStage({.group = 2, .module = 2, .microbatch = mb});
    const StageId f3 = g.AddStage({.group = 3, .module = 2, .microbatch = mb});
    const StageId b3 = g.AddStage({.group = 3, .module = 2, .microbatch = mb, .pass = Pass::kBackward});
    const StageId b2 = g.AddStage({.group = 2, .module = 2, .microbatch = mb, .pass = Pass::kBackward});
    const StageId bv = g.AddStage({.group = 0, .module = 0, .microbatch = mb, .pass = Pass::kBackward});
    const StageId ba = g.AddStage({.group = 1, .module = 1, .microbatch = mb, .pass = Pass::kBackward});
    g.AddEdge(fv, f2);
    g.AddEdge(fa, f2);
    g.AddEdge(f2, f3);
    g.AddEdge(f3, b3);
    g.AddEdge(b3, b2);
    g.AddEdge(b2, bv);
    g.AddEdge(b2, ba);
    g.AddEdge(fv, bv);
    g.AddEdge(fa, ba);
    g.AddEdge(f2, b2);
  }
  ASSERT_TRUE(g.Finalize().ok());
  auto s = MakeSchedule(ScheduleKind::kOneFOneB, g);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(Describe(g, s->order[0]), "F0 F1 F2 B0 F3 B1 B2 B3");
  EXPECT_EQ(Describe(g, s->order[1]), "F0 F1 F2 B0 F3 B1 B2 B3");
  EXPECT_EQ(Describe(g, s->order[2]), "F0 F1 B0 F2 B1 F3 B2 B3");  // rank 1 of 3
  EXPECT_EQ(Describe(g, s->order[3]), "F0 B0 F1 B1 F2 B2 F3 B3");
  EXPECT_TRUE(s->Validate(g).ok());
}

// Cross-modality 1F1B (Cornstarch §4.1): a 1-stage audio encoder (group 0) beside a 3-stage
// vision encoder (groups 1-3), both feeding an LLM on groups 4-5. Each group warms up as many
// microbatches as the longest path of stages after it: vision 4, 3, 2, audio 2 (audio -> llm0
// -> llm1), LLM 1, 0. Counting hops from a source would put audio at rank 0 with 4 warm-up
// forwards (the vision encoder's first stage's), holding 2 more microbatches of activations.
TEST(OneFOneB, WarmupFollowsTheLongestPathToTheSinkOnEachBranch) {
  StageGraph g;
  for (int i = 0; i < 6; ++i) g.AddGroup({.first_gpu = i});
  g.SetModuleNames({"audio", "vision", "llm"});
  const int m = 6;
  for (int mb = 0; mb < m; ++mb) {
    const StageId fa = g.AddStage({.group = 0, .module = 0, .microbatch = mb});
    StageId fv[3], bv[3], fl[2], bl[2];
    for (int k = 0; k < 3; ++k) fv[k] = g.AddStage({.group = 1 + k, .module = 1, .microbatch = mb});
    for (int k = 0; k < 2; ++k) fl[k] = g.AddStage({.group = 4 + k, .module = 2, .microbatch = mb});
    for (int k = 1; k >= 0; --k) {
      bl[k] = g.AddStage({.group = 4 + k, .module = 2, .microbatch = mb, .pass = Pass::kBackward});
    }
    const StageId ba = g.AddStage({.group = 0, .module = 0, .microbatch = mb, .pass = Pass::kBackward});
    for (int k = 2; k >= 0; --k) {
      bv[k] = g.AddStage({.group = 1 + k, .module = 1, .microbatch = mb, .pass = Pass::kBackward});
    }
    g.AddEdge(fv[0], fv[1]);
    g.AddEdge(fv[1], fv[2]);
    g.AddEdge(fv[2], fl[0]);
    g.AddEdge(fa, fl[0]);
    g.AddEdge(fl[0], fl[1]);
    g.AddEdge(fl[1], bl[1]);
    g.AddEdge(bl[1], bl[0]);
    g.AddEdge(fl[0], bl[0]);
    g.AddEdge(bl[0], ba);
    g.AddEdge(bl[0], bv[2]);
    g.AddEdge(bv[2], bv[1]);
    g.AddEdge(bv[1], bv[0]);
    g.AddEdge(fa, ba);
    for (int k = 0; k < 3; ++k) g.AddEdge(fv[k], bv[k]);
  }
  ASSERT_TRUE(g.Finalize().ok());
  auto s = MakeSchedule(ScheduleKind::kOneFOneB, g);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(Describe(g, s->order[0]), "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5");  // audio: 2
  EXPECT_EQ(Describe(g, s->order[1]), "F0 F1 F2 F3 F4 B0 F5 B1 B2 B3 B4 B5");  // vision 0: 4
  EXPECT_EQ(Describe(g, s->order[2]), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");  // vision 1: 3
  EXPECT_EQ(Describe(g, s->order[3]), "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5");  // vision 2: 2
  EXPECT_EQ(Describe(g, s->order[4]), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5");  // llm 0: 1
  EXPECT_EQ(Describe(g, s->order[5]), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");  // llm 1: 0
  EXPECT_TRUE(s->Validate(g).ok());
  // The same holds for every rule that warms up by rank.
  for (ScheduleKind kind : {ScheduleKind::kInterleavedOneFOneB, ScheduleKind::kGPipe}) {
    auto other = MakeSchedule(kind, g);
    ASSERT_TRUE(other.ok()) << other.status().ToString();
    EXPECT_TRUE(other->Validate(g).ok());
  }
}

// Megatron-style uniform split of an encoder+LLM chain: group 1 holds the encoder's last layers
// and the LLM's first layers as one slot (same chunk index); they run back to back.
TEST(OneFOneB, RunsModulesSharingAChunkSlotBackToBack) {
  StageGraph g;
  g.AddGroup({});
  g.AddGroup({.first_gpu = 1});
  const int m = 3;
  for (int mb = 0; mb < m; ++mb) {
    const StageId e0 = g.AddStage({.group = 0, .module = 0, .microbatch = mb});
    const StageId e1 = g.AddStage({.group = 1, .module = 0, .microbatch = mb});
    const StageId l1 = g.AddStage({.group = 1, .module = 1, .microbatch = mb});
    const StageId bl1 = g.AddStage({.group = 1, .module = 1, .microbatch = mb, .pass = Pass::kBackward});
    const StageId be1 = g.AddStage({.group = 1, .module = 0, .microbatch = mb, .pass = Pass::kBackward});
    const StageId be0 = g.AddStage({.group = 0, .module = 0, .microbatch = mb, .pass = Pass::kBackward});
    g.AddEdge(e0, e1);
    g.AddEdge(e1, l1);
    g.AddEdge(l1, bl1);
    g.AddEdge(bl1, be1);
    g.AddEdge(e1, be1);
    g.AddEdge(be1, be0);
    g.AddEdge(e0, be0);
  }
  ASSERT_TRUE(g.Finalize().ok());
  auto s = MakeSchedule(ScheduleKind::kOneFOneB, g);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s->Validate(g).ok());
  EXPECT_EQ(Describe(g, s->order[1]), "F0 F0 B0 B0 F1 F1 B1 B1 F2 F2 B2 B2");
  EXPECT_EQ(g.stage(s->order[1][0]).module, 0);  // encoder before LLM forward
  EXPECT_EQ(g.stage(s->order[1][2]).module, 1);  // LLM before encoder backward
  EXPECT_EQ(Describe(g, s->order[0]), "F0 F1 B0 F2 B1 B2");
}

TEST(AllGenerators, ProduceValidSchedulesOnManyShapes) {
  for (int p : {1, 2, 3, 4, 8}) {
    for (int v : {1, 2, 3}) {
      for (int m : {1, 2, 4, 8, 12}) {
        for (bool split : {false, true}) {
          const StageGraph g = Pipeline(p, v, m, split);
          for (ScheduleKind k : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB,
                                 ScheduleKind::kInterleavedOneFOneB, ScheduleKind::kZeroBubbleH1}) {
            auto s = MakeSchedule(k, g);
            if (!s.ok()) {
              // Documented refusals only: interleaved m % P, ZB-H1 without split, and 1F1B-style
              // rules on chunks that revisit groups.
              EXPECT_TRUE(k == ScheduleKind::kInterleavedOneFOneB ? m % p != 0
                          : k == ScheduleKind::kZeroBubbleH1      ? (!split || v > 1)
                                                                  : v > 1)
                  << ScheduleKindName(k) << " p=" << p << " v=" << v << " m=" << m << ": "
                  << s.status().ToString();
              continue;
            }
            EXPECT_TRUE(s->CheckDeadlockFree(g).ok());
            EXPECT_TRUE(s->Validate(g).ok())
                << ScheduleKindName(k) << " p=" << p << " v=" << v << " m=" << m
                << " split=" << split << ": " << s->Validate(g).ToString();
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace weft::sched
