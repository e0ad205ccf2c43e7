#pragma once
// Hand-made plans shared by the plan module's tests.
#include <algorithm>
#include <vector>

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

inline Action Comm(ActionKind kind,
                   BufferId buffer,
                   int peer,
                   int mb,
                   spec::Pass pass,
                   int chunk = 0,
                   int module = 0) {
  Action a;
  a.kind = kind;
  a.stage = StageRef{.module = module, .chunk = chunk, .microbatch = mb, .sub_microbatch = 0,
                     .pass = pass};
  a.buffer = buffer;
  a.peer = peer;
  return a;
}

inline Action Free(BufferId buffer, int mb, spec::Pass pass) {
  return Comm(ActionKind::kFree, buffer, -1, mb, pass);
}

inline Action AllReduceGrads(int module, int64_t bytes, int dp) {
  Action a;
  a.kind = ActionKind::kAllReduceGrads;
  a.stage = StageRef{.module = module};
  a.bytes = bytes;
  a.dp = dp;
  return a;
}

inline TensorSpec Act() { return TensorSpec{{16, 8}, DType::kBf16}; }

// Fills every buffer's producer / consumer of a hand-made plan from its actions: the compute
// that writes / reads it, across a transfer the stage at the other end (k-th isend a -> b pairs
// with the k-th irecv on b from a), else the stage of an action that names the buffer on its
// rank. Leaves samples / rows as they are.
inline void SetBufferEnds(ExecutionPlan& plan) {
  const int n = plan.num_ranks();
  auto find = [&](int r, BufferId id) -> Buffer* {
    for (Buffer& b : plan.ranks[r].buffers) {
      if (b.id == id) return &b;
    }
    return nullptr;
  };
  for (int r = 0; r < n; ++r) {
    for (Buffer& b : plan.ranks[r].buffers) b.producer = b.consumer = BufferEnd{};
    for (const Action& a : plan.ranks[r].actions) {
      if (!IsCompute(a.kind)) continue;
      for (BufferId id : a.outputs) {
        if (Buffer* b = find(r, id)) b->producer = {r, a.stage};
      }
      for (BufferId id : a.inputs) {
        if (Buffer* b = find(r, id); b && b->consumer.rank < 0) b->consumer = {r, a.stage};
      }
    }
  }
  for (int r = 0; r < n; ++r) {
    for (const Action& a : plan.ranks[r].actions) {
      Buffer* b = a.buffer >= 0 ? find(r, a.buffer) : nullptr;
      if (b == nullptr) continue;
      if (a.kind == ActionKind::kIsend && b->producer.rank < 0) b->producer = {r, a.stage};
      if (a.kind == ActionKind::kIrecv && b->consumer.rank < 0) b->consumer = {r, a.stage};
    }
  }
  for (int src = 0; src < n; ++src) {
    for (int dst = 0; dst < n; ++dst) {
      std::vector<Buffer*> sends, recvs;
      for (const Action& a : plan.ranks[src].actions) {
        if (a.kind == ActionKind::kIsend && a.peer == dst) sends.push_back(find(src, a.buffer));
      }
      for (const Action& a : plan.ranks[dst].actions) {
        if (a.kind == ActionKind::kIrecv && a.peer == src) recvs.push_back(find(dst, a.buffer));
      }
      for (size_t k = 0; k < std::min(sends.size(), recvs.size()); ++k) {
        if (sends[k] == nullptr || recvs[k] == nullptr) continue;
        sends[k]->consumer = recvs[k]->consumer;
        recvs[k]->producer = sends[k]->producer;
      }
    }
  }
  for (int r = 0; r < n; ++r) {
    for (const Action& a : plan.ranks[r].actions) {
      Buffer* b = a.buffer >= 0 ? find(r, a.buffer) : nullptr;
      if (b == nullptr) continue;
      if (b->producer.rank < 0) b->producer = {r, a.stage};
      if (b->consumer.rank < 0) b->consumer = {r, a.stage};
    }
    for (Buffer& b : plan.ranks[r].buffers) {
      if (b.producer.rank < 0) b.producer = {r, StageRef{}};
      if (b.consumer.rank < 0) b.consumer = {r, StageRef{}};
    }
  }
}

// A valid 2-rank 1F1B plan with 2 microbatches (stage 0 on rank 0, stage 1 on rank 1), two
// data-parallel replicas (each rank ends with the gradient all-reduce of module 0):
//   rank 0: F0 F1 B0 B1 AR      rank 1: F0 B0 F1 B1 AR
// Buffers: activations 0,1 (rank 0) -> 10,11 (rank 1); gradients 20,21 (rank 1) -> 30,31 (rank 0).
inline ExecutionPlan TwoRankOneFOneB() {
  using enum ActionKind;
  constexpr auto F = spec::Pass::kForward;
  constexpr auto B = spec::Pass::kBackward;
  ExecutionPlan plan;
  plan.model = "toy";
  plan.strategy = "1f1b";
  plan.module_names = {"llm"};
  plan.num_replicas = 2;
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
      AllReduceGrads(0, 1024, 2),      // 16
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
      AllReduceGrads(0, 1024, 2),                 // 16
  };
  SetBufferEnds(plan);
  return plan;
}

// TwoRankOneFOneB with its data tables (plan_data.h): 4 samples packed into 2 sequences of 2,
// microbatch mb = sequence mb (replica 0), one LLM instance each whose segments are its two
// samples; rank r holds layers [2r, 2r + 2) of module 0 in slot 0. Every compute names its
// microbatch's samples and its one instance.
inline ExecutionPlan TwoRankOneFOneBWithData() {
  ExecutionPlan plan = TwoRankOneFOneB();
  PlanData& d = plan.data;
  for (int i = 0; i < 4; ++i) d.samples.push_back({.id = 100 + i, .text_tokens = 10 + i});
  d.sequences = {{.samples = {0, 1}, .llm_tokens = 21}, {.samples = {2, 3}, .llm_tokens = 25}};
  for (int mb = 0; mb < 2; ++mb) {
    InstanceData llm{.tokens = {10 + 2 * mb, 11 + 2 * mb},
                     .samples = {2 * mb, 2 * mb + 1},
                     .item = -1,
                     .unpadded_tokens = 21 + 4 * mb};
    d.microbatches.push_back(
        {.replica = 0, .microbatch = mb, .sequences = {mb}, .instances = {{llm}}});
  }
  for (int r = 0; r < 2; ++r) {
    d.ranks.push_back({.replica = 0,
                       .group = r,
                       .chunks = {{.module = 0, .chunk = 0, .first_layer = 2 * r,
                                   .num_layers = 2, .module_replica = 0}}});
    for (Action& a : plan.ranks[r].actions) {
      if (!IsCompute(a.kind)) continue;
      a.samples = {2 * a.stage.microbatch, 2 * a.stage.microbatch + 1};
      a.instance_begin = 0;
      a.instance_end = 1;
    }
  }
  return plan;
}

}  // namespace weft::plan::testing
