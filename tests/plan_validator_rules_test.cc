// The validator refuses plans that cannot run (issue 34 item 6): each test takes a plan the
// planner compiled (with its data tables, as `weft plan` writes it), applies one mutation, and
// checks that validation fails with a one-line message naming the rank, the action (or buffer)
// and the rule, also after the plan went through JSON (what `weft validate` reads).
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "weft/plan/plan_json.h"
#include "weft/plan/validator.h"
#include "weft/planning/planner.h"
#include "weft/strategy/compare.h"

namespace weft {
namespace {

using plan::Action;
using plan::ActionKind;
using plan::ExecutionPlan;
using ::testing::HasSubstr;

// The world plan of iteration 0 of tiny-vlm on 4 GPUs (PP 2, DP 2) under `strategy`.
ExecutionPlan CompiledPlan(const std::string& strategy) {
  auto planner = strategy::MakePlanner(
      {.model = "tiny-vlm", .cluster = "", .gpus = 4, .pipeline_size = 2, .data = "coco-llava"},
      strategy);
  EXPECT_TRUE(planner.ok()) << planner.status().ToString();
  if (!planner.ok()) return {};
  auto batches = (*planner)->Batches(0, 1);
  EXPECT_TRUE(batches.ok()) << batches.status().ToString();
  if (!batches.ok()) return {};
  auto planned = (*planner)->Plan((*batches)[0]);
  EXPECT_TRUE(planned.ok()) << planned.status().ToString();
  if (!planned.ok()) return {};
  auto world = (*planner)->CompileWorld(*planned);
  EXPECT_TRUE(world.ok()) << world.status().ToString();
  return world.ok() ? *std::move(world) : ExecutionPlan{};
}

// The validator's message for `plan`, checking that the JSON form (what `weft validate` reads)
// gets the same one.
std::string Refusal(const ExecutionPlan& plan) {
  auto report = plan::ValidatePlan(plan);
  if (report.ok()) return "OK";
  EXPECT_EQ(report.status().code(), StatusCode::kInvalidArgument);
  auto back = plan::PlanFromJson(plan::PlanToJson(plan));
  EXPECT_TRUE(back.ok()) << back.status().ToString();
  if (back.ok()) EXPECT_EQ(plan::ValidatePlan(*back).status().message(), report.status().message());
  const std::string message(report.status().message());
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  return message;
}

// The first action on a rank of `plan` (rank, index) for which `pick` holds; {-1, -1} if none.
template <typename Pick>
std::pair<int, int> Find(const ExecutionPlan& plan, Pick pick) {
  for (int r = 0; r < plan.num_ranks(); ++r) {
    const auto& actions = plan.ranks[r].actions;
    for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
      if (pick(r, actions[i])) return {r, i};
    }
  }
  return {-1, -1};
}

// The index of the compute of `kind` of `stage` on `rank`, or -1.
int ComputeOf(const ExecutionPlan& plan, int rank, ActionKind kind, const plan::StageRef& stage) {
  const auto& actions = plan.ranks[rank].actions;
  for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
    const Action& a = actions[i];
    if (a.kind == kind && a.stage.module == stage.module && a.stage.chunk == stage.chunk &&
        a.stage.microbatch == stage.microbatch && a.stage.sub_microbatch == stage.sub_microbatch) {
      return i;
    }
  }
  return -1;
}

TEST(ValidatorRules, CompiledPlansValidate) {
  for (const char* strategy : {"megatron-1f1b", "zb-h1", "megatron-vpp", "dip"}) {
    const ExecutionPlan plan = CompiledPlan(strategy);
    EXPECT_EQ(Refusal(plan), "OK") << strategy;
  }
}

TEST(ValidatorRules, AForwardRemovedWhileItsBackwardStaysIsRefused) {
  ExecutionPlan plan = CompiledPlan("megatron-1f1b");
  ASSERT_EQ(Refusal(plan), "OK");
  // The last forward of rank 1 (the LLM's last stage: its output only feeds its own backward).
  auto [r, f] = std::pair<int, int>{1, -1};
  for (int i = 0; i < static_cast<int>(plan.ranks[r].actions.size()); ++i) {
    if (plan.ranks[r].actions[i].kind == ActionKind::kForward) f = i;
  }
  ASSERT_GE(f, 0);
  const plan::StageRef stage = plan.ranks[r].actions[f].stage;
  plan.ranks[r].actions.erase(plan.ranks[r].actions.begin() + f);
  const int b = ComputeOf(plan, r, ActionKind::kBackward, stage);
  ASSERT_GE(b, 0);
  EXPECT_EQ(Refusal(plan), plan::ActionLocation(plan, r, b) +
                               ": no forward of this stage runs earlier on rank 1; a backward "
                               "needs its forward");
}

TEST(ValidatorRules, ABackwardWeightRemovedIsRefused) {
  ExecutionPlan plan = CompiledPlan("zb-h1");
  ASSERT_EQ(Refusal(plan), "OK");
  auto [r, w] =
      Find(plan, [](int, const Action& a) { return a.kind == ActionKind::kBackwardWeight; });
  ASSERT_GE(r, 0) << "zb-h1 splits the backward";
  const plan::StageRef stage = plan.ranks[r].actions[w].stage;
  plan.ranks[r].actions.erase(plan.ranks[r].actions.begin() + w);
  const int bi = ComputeOf(plan, r, ActionKind::kBackwardInput, stage);
  ASSERT_GE(bi, 0);
  int others = 0;  // the chunk's weight gradients left on the rank
  for (const Action& a : plan.ranks[r].actions) {
    others += a.kind == ActionKind::kBackwardWeight && a.stage.module == stage.module &&
              a.stage.chunk == stage.chunk;
  }
  ASSERT_GT(others, 0);
  EXPECT_EQ(Refusal(plan), plan::ActionLocation(plan, r, bi) +
                               fmt::format(": no backward_weight of this stage follows on rank {} "
                                           "while {} other split backwards of module {} chunk {} "
                                           "have one (the weight gradient is never computed)",
                                           r, others, stage.module, stage.chunk));
}

TEST(ValidatorRules, ALocalBufferWhoseShapeHoldsNoRowsIsRefused) {
  ExecutionPlan plan = CompiledPlan("megatron-1f1b");
  ASSERT_EQ(Refusal(plan), "OK");
  for (int r = 0; r < plan.num_ranks(); ++r) {
    auto& buffers = plan.ranks[r].buffers;
    for (size_t k = 0; k < buffers.size(); ++k) {
      plan::Buffer& b = buffers[k];
      if (b.producer.rank != r || b.consumer.rank != r || b.rows <= 0) continue;
      b.tensor.shape = {0};
      EXPECT_EQ(Refusal(plan),
                fmt::format("ranks[{}].buffers[{}] (buf {}): shape [0] bf16 holds no rows but the "
                            "buffer carries {} rows; shape and rows must agree",
                            r, k, b.id, b.rows));
      return;
    }
  }
  FAIL() << "no local buffer with rows";
}

TEST(ValidatorRules, RecomputeOfLayersOutsideTheChunkIsRefused) {
  ExecutionPlan plan = CompiledPlan("megatron-1f1b");
  ASSERT_EQ(Refusal(plan), "OK");
  auto [r, i] = Find(plan, [](int, const Action& a) { return plan::IsCompute(a.kind); });
  ASSERT_GE(r, 0);
  Action& a = plan.ranks[r].actions[i];
  int slot = -1, layers = 0;
  const auto& chunks = plan.data.ranks[r].chunks;
  for (size_t c = 0; c < chunks.size(); ++c) {
    if (chunks[c].module == a.stage.module && chunks[c].chunk == a.stage.chunk) {
      slot = static_cast<int>(c);
      layers = chunks[c].num_layers;
    }
  }
  ASSERT_GE(slot, 0);
  a.recompute = spec::Recompute::kFull;
  a.recompute_layers = {0, 0, 99, 0};  // 99 layers fully recomputed
  EXPECT_EQ(Refusal(plan),
            plan::ActionLocation(plan, r, i) +
                fmt::format(": recompute_layers [0,0,99,0] cover 99 layers; the chunk (module {}, "
                            "slot {}) has {} layers (data.ranks[{}].chunks[{}])",
                            a.stage.module, a.stage.chunk, layers, r, slot));
  a.recompute_layers = {0, 0, -1, 0};  // (the JSON reader refuses it already)
  EXPECT_EQ(plan::ValidatePlan(plan).status().message(),
            plan::ActionLocation(plan, r, i) +
                ": recompute_layers [0,0,-1,0]; layer counts must be >= 0");
  a.recompute_layers = {0, 0, static_cast<int16_t>(layers), 0};  // the whole chunk: fine
  EXPECT_EQ(Refusal(plan), "OK");
}

TEST(ValidatorRules, AComputeWithItsInputsEmptiedIsRefused) {
  ExecutionPlan plan = CompiledPlan("megatron-1f1b");
  ASSERT_EQ(Refusal(plan), "OK");
  auto [r, i] = Find(plan, [](int, const Action& a) {
    return a.kind == ActionKind::kForward && !a.inputs.empty();
  });
  ASSERT_GE(r, 0);
  const plan::BufferId first = plan.ranks[r].actions[i].inputs.front();
  plan.ranks[r].actions[i].inputs.clear();
  EXPECT_EQ(Refusal(plan), plan::ActionLocation(plan, r, i) +
                               fmt::format(": buf {} is not among its inputs [] but names this "
                                           "stage as its consumer",
                                           first));
}

TEST(ValidatorRules, TransfersNamingAMicrobatchOrChunkOutsideTheTablesAreRefused) {
  const ExecutionPlan good = CompiledPlan("megatron-1f1b");
  ASSERT_EQ(Refusal(good), "OK");
  for (ActionKind kind : {ActionKind::kIsend, ActionKind::kWaitRecv, ActionKind::kWaitSend,
                          ActionKind::kIrecv, ActionKind::kFree}) {
    ExecutionPlan plan = good;
    auto [r, i] = Find(plan, [&](int, const Action& a) { return a.kind == kind; });
    ASSERT_GE(r, 0) << plan::ActionKindName(kind);
    plan.ranks[r].actions[i].stage.microbatch = 999;
    EXPECT_EQ(Refusal(plan),
              plan::ActionLocation(plan, r, i) + fmt::format(": microbatch 999 of replica {} "
                                                             "(data.ranks[{}].replica) is not in "
                                                             "data.microbatches",
                                                             plan.data.ranks[r].replica, r));
    plan = good;
    plan.ranks[r].actions[i].stage.chunk = 999;
    EXPECT_EQ(Refusal(plan), plan::ActionLocation(plan, r, i) +
                                 fmt::format(": the rank holds no chunk of module {} in slot 999 "
                                             "(data.ranks[{}].chunks)",
                                             plan.ranks[r].actions[i].stage.module, r));
    // Within the tables but not the buffer's stage: another microbatch of the replica.
    plan = good;
    Action& a = plan.ranks[r].actions[i];
    a.stage.microbatch = a.stage.microbatch == 0 ? 1 : 0;
    EXPECT_THAT(Refusal(plan),
                HasSubstr(fmt::format("which is not an end of buf {} on rank {}", a.buffer, r)));
  }
}

}  // namespace
}  // namespace weft
