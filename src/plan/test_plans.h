#pragma once
// Hand-made plans shared by the plan module's tests.
#include "weft/plan/plan.h"

namespace weft::plan::testing {

// Builder helpers: append one action to a rank.
inline Action Compute(ActionKind kind, int mb, std::vector<BufferId> inputs,
                      std::vector<BufferId> outputs, int chunk = 0, int module = 0) {
  Action a;
  a.kind = kind;
  a.stage = StageRef{.module = module, .chunk = chunk, .microbatch = mb, .sub_microbatch = 0,
                     .pass = PassOf(kind)};
  a.inputs = std::move(inputs);
  a.outputs = std::move(outputs);
  a.latency_s = 0.001;
  return a;
}

inline Action Comm(ActionKind kind, BufferId buffer, int peer, int mb, graph::Pass pass,
                   int chunk = 0, int module = 0) {
  Action a;
  a.kind = kind;
  a.stage = StageRef{.module = module, .chunk = chunk, .microbatch = mb, .sub_microbatch = 0,
                     .pass = pass};
  a.buffer = buffer;
  a.peer = peer;
  return a;
}

inline Action Free(BufferId buffer, int mb, graph::Pass pass) {
  return Comm(ActionKind::kFree, buffer, -1, mb, pass);
}

inline TensorSpec Act() { return TensorSpec{{16, 8}, DType::kBf16}; }

// A valid 2-rank 1F1B plan with 2 microbatches (stage 0 on rank 0, stage 1 on rank 1):
//   rank 0: F0 F1 B0 B1      rank 1: F0 B0 F1 B1
// Buffers: activations 0,1 (rank 0) -> 10,11 (rank 1); gradients 20,21 (rank 1) -> 30,31 (rank 0).
inline ExecutionPlan TwoRankOneFOneB() {
  using enum ActionKind;
  constexpr auto F = graph::Pass::kForward;
  constexpr auto B = graph::Pass::kBackward;
  ExecutionPlan plan;
  plan.model = "toy";
  plan.strategy = "1f1b";
  plan.module_names = {"llm"};
  plan.ranks.resize(2);
  RankPlan& r0 = plan.ranks[0];
  r0.label = "pp0";
  r0.buffers = {{0, Act(), "act0"}, {1, Act(), "act1"}, {30, Act(), "grad0"}, {31, Act(), "grad1"}};
  r0.actions = {
      Compute(kForward, 0, {}, {0}),   // 0
      Comm(kIsend, 0, 1, 0, F),        // 1
      Compute(kForward, 1, {}, {1}),   // 2
      Comm(kIsend, 1, 1, 1, F),        // 3
      Comm(kIrecv, 30, 1, 0, B),       // 4
      Comm(kWaitRecv, 30, 1, 0, B),    // 5
      Compute(kBackward, 0, {30}, {}), // 6
      Free(30, 0, B),                  // 7
      Comm(kIrecv, 31, 1, 1, B),       // 8
      Comm(kWaitRecv, 31, 1, 1, B),    // 9
      Compute(kBackward, 1, {31}, {}), // 10
      Free(31, 1, B),                  // 11
      Comm(kWaitSend, 0, 1, 0, F),     // 12
      Free(0, 0, F),                   // 13
      Comm(kWaitSend, 1, 1, 1, F),     // 14
      Free(1, 1, F),                   // 15
  };
  RankPlan& r1 = plan.ranks[1];
  r1.label = "pp1";
  r1.buffers = {{10, Act(), "act0"}, {11, Act(), "act1"}, {20, Act(), "grad0"}, {21, Act(), "grad1"}};
  r1.actions = {
      Comm(kIrecv, 10, 0, 0, F),                  // 0
      Comm(kWaitRecv, 10, 0, 0, F),               // 1
      Compute(kForward, 0, {10}, {}, 0),          // 2
      Free(10, 0, F),                             // 3
      Compute(kBackward, 0, {}, {20}),            // 4
      Comm(kIsend, 20, 0, 0, B),                  // 5
      Comm(kIrecv, 11, 0, 1, F),                  // 6
      Comm(kWaitRecv, 11, 0, 1, F),               // 7
      Compute(kForward, 1, {11}, {}),             // 8
      Free(11, 1, F),                             // 9
      Compute(kBackward, 1, {}, {21}),            // 10
      Comm(kIsend, 21, 0, 1, B),                  // 11
      Comm(kWaitSend, 20, 0, 0, B),               // 12
      Free(20, 0, B),                             // 13
      Comm(kWaitSend, 21, 0, 1, B),               // 14
      Free(21, 1, B),                             // 15
  };
  return plan;
}

}  // namespace weft::plan::testing
