#include "weft/plan/plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>

namespace weft::plan {

namespace {

constexpr std::array<std::string_view, 10> kActionKindNames = {
    "forward", "backward",  "backward_input", "backward_weight", "isend",
    "irecv",   "wait_send", "wait_recv",      "free",            "all_reduce_grads"};

}  // namespace

std::string_view ActionKindName(ActionKind kind) {
  return kActionKindNames[static_cast<size_t>(kind)];
}

StatusOr<ActionKind> ParseActionKind(std::string_view name) {
  for (size_t i = 0; i < kActionKindNames.size(); ++i) {
    if (kActionKindNames[i] == name) return static_cast<ActionKind>(i);
  }
  return InvalidArgumentError(fmt::format(
      "\"{}\"; must be one of forward, backward, backward_input, backward_weight, isend, irecv, "
      "wait_send, wait_recv, free, all_reduce_grads",
      name));
}

bool IsCompute(ActionKind kind) {
  return kind == ActionKind::kForward || kind == ActionKind::kBackward ||
         kind == ActionKind::kBackwardInput || kind == ActionKind::kBackwardWeight;
}

bool IsP2pPost(ActionKind kind) { return kind == ActionKind::kIsend || kind == ActionKind::kIrecv; }

bool IsWeightGradient(ActionKind kind) {
  return kind == ActionKind::kBackward || kind == ActionKind::kBackwardWeight;
}

ActionKind ComputeKindOf(spec::Pass pass) {
  switch (pass) {
    case spec::Pass::kForward:
      return ActionKind::kForward;
    case spec::Pass::kBackward:
      return ActionKind::kBackward;
    case spec::Pass::kBackwardInput:
      return ActionKind::kBackwardInput;
    case spec::Pass::kBackwardWeight:
      return ActionKind::kBackwardWeight;
  }
  return ActionKind::kForward;
}

spec::Pass PassOf(ActionKind compute_kind) {
  switch (compute_kind) {
    case ActionKind::kBackward:
      return spec::Pass::kBackward;
    case ActionKind::kBackwardInput:
      return spec::Pass::kBackwardInput;
    case ActionKind::kBackwardWeight:
      return spec::Pass::kBackwardWeight;
    default:
      return spec::Pass::kForward;
  }
}

std::string_view DTypeName(DType dtype) { return dtype == DType::kBf16 ? "bf16" : "fp32"; }

StatusOr<DType> ParseDType(std::string_view name) {
  if (name == "bf16") return DType::kBf16;
  if (name == "fp32") return DType::kFp32;
  return InvalidArgumentError(fmt::format("\"{}\"; must be bf16 or fp32", name));
}

int64_t DTypeBytes(DType dtype) { return dtype == DType::kBf16 ? 2 : 4; }

int64_t TensorSpec::NumElements() const {
  // Saturates instead of overflowing (the reader refuses such shapes; this keeps hand-made
  // plans from wrapping).
  int64_t n = 1;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n)) return INT64_MAX;
  }
  return n;
}

int64_t TensorSpec::Bytes() const {
  int64_t bytes = 0;
  if (__builtin_mul_overflow(NumElements(), DTypeBytes(dtype), &bytes)) return INT64_MAX;
  return bytes;
}

std::string TensorSpec::ToString() const {
  return fmt::format("[{}] {}", fmt::join(shape, ","), DTypeName(dtype));
}

const Buffer* ExecutionPlan::FindBuffer(int rank, BufferId id) const {
  if (rank < 0 || rank >= num_ranks()) return nullptr;
  for (const Buffer& buffer : ranks[rank].buffers) {
    if (buffer.id == id) return &buffer;
  }
  return nullptr;
}

std::string DescribeAction(const Action& action) {
  const StageRef& s = action.stage;
  switch (action.kind) {
    case ActionKind::kForward:
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput:
    case ActionKind::kBackwardWeight:
      if (s.sub_microbatch != 0) {
        return fmt::format("{} m{} c{} mb{}.{}", ActionKindName(action.kind), s.module, s.chunk,
                           s.microbatch, s.sub_microbatch);
      }
      return fmt::format("{} m{} c{} mb{}", ActionKindName(action.kind), s.module, s.chunk,
                         s.microbatch);
    case ActionKind::kIsend:
    case ActionKind::kWaitSend:
      return fmt::format("{} buf {} to rank {}", ActionKindName(action.kind), action.buffer,
                         action.peer);
    case ActionKind::kIrecv:
    case ActionKind::kWaitRecv:
      return fmt::format("{} buf {} from rank {}", ActionKindName(action.kind), action.buffer,
                         action.peer);
    case ActionKind::kFree:
      return fmt::format("free buf {}", action.buffer);
    case ActionKind::kAllReduceGrads:
      if (action.ranks.size() > 1) {
        return fmt::format("all_reduce_grads m{} over ranks [{}]", s.module,
                           fmt::join(action.ranks, ","));
      }
      return fmt::format("all_reduce_grads m{}", s.module);
  }
  return "?";
}

std::string DescribeBufferEnd(const BufferEnd& end) {
  Action a;
  a.kind = ComputeKindOf(end.stage.pass);
  a.stage = end.stage;
  return fmt::format("rank {} {}", end.rank, DescribeAction(a));
}

std::string ActionLocation(const ExecutionPlan& plan, int rank, int index) {
  if (rank < 0 || rank >= plan.num_ranks() || index < 0 ||
      index >= static_cast<int>(plan.ranks[rank].actions.size())) {
    return fmt::format("rank {} action {}", rank, index);
  }
  return fmt::format("rank {} action {} ({})", rank, index,
                     DescribeAction(plan.ranks[rank].actions[index]));
}

PlanStats ComputePlanStats(const ExecutionPlan& plan) {
  PlanStats stats;
  for (int r = 0; r < plan.num_ranks(); ++r) {
    const RankPlan& rank = plan.ranks[r];
    stats.num_buffers += static_cast<int>(rank.buffers.size());
    for (const Action& action : rank.actions) {
      ++stats.num_actions;
      if (IsCompute(action.kind)) ++stats.num_compute;
      if (action.kind == ActionKind::kIsend) {
        ++stats.num_transfers;
        if (const Buffer* buffer = plan.FindBuffer(r, action.buffer)) {
          stats.p2p_bytes += buffer->tensor.Bytes();
        }
      }
    }
  }
  return stats;
}

}  // namespace weft::plan
