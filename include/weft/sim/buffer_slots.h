#pragma once
// The boundary-buffer slot rule: when a compiled plan allocates and frees the buffers of a
// graph's edges, in slots of a rank's action list (slot j = just before the rank's j-th compute,
// slot n = after its last one). One home for the rule that two floors apply: plan::CompilePlan
// places its actions by it, and sim::Simulate counts the same buffers at the same slots in its
// memory replay (the peaks must agree byte for byte: src/plan/sim_plan_memory_property_test.cc).
//
//  - a local buffer (same-group edge with bytes > 0) and a send buffer (cross-group edge) are
//    outputs of the producing compute;
//  - a local or receive buffer is freed in the slot after its reader (FreeSlot);
//  - a send buffer is waited for and freed in the first slot after the producer whose compute
//    starts, in the timeline, at or after the transfer arrives, else in the last slot
//    (WaitSendSlot);
//  - a receive buffer is allocated by its irecv in the first slot whose compute ends, in the
//    timeline, after the sender posts (the producer's end), at the latest in the reader's slot
//    (IrecvSlot); along each channel (directed group pair) the irecvs keep the sender's order
//    (producer position, then edge id): walking that order backwards, a slot is lowered to the
//    slot of the receive after it (KeepChannelOrder), since NCCL matches in order.
// Times are compared with a tolerance of kSlotTimeEpsS (a transfer that arrives within it of a
// compute's start counts as arrived). The searches take the compute times by position; both
// sequences must be non-decreasing along a rank's order (a rank computes one stage at a time).
// Thread-safety: pure functions.
#include <algorithm>
#include <cstdint>

namespace weft::sim {

inline constexpr double kSlotTimeEpsS = 1e-12;

namespace internal {

// First position in [lo, hi) of a monotone predicate (false … false true … true), or hi,
// probing from lo upwards in doubling steps, then bisecting: cost log of the distance to the
// answer.
template <typename Pred>
int32_t FirstPositionFromLow(int32_t lo, int32_t hi, Pred pred) {
  int32_t probe = lo, step = 1;
  while (probe < hi && !pred(probe)) {
    lo = probe + 1;
    probe += step;
    step *= 2;
  }
  hi = std::min(probe, hi);
  while (lo < hi) {
    const int32_t mid = lo + (hi - lo) / 2;
    if (pred(mid)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

}  // namespace internal

// Slot of the free of a local or receive buffer read by the compute at `reader_position`.
inline int32_t FreeSlot(int32_t reader_position) { return reader_position + 1; }

// Slot of the wait_send (and free) of a send buffer whose transfer arrives at `arrival_s`: the
// first q in [first, last) with start_s_at(q) >= arrival_s − kSlotTimeEpsS, else `last` (the
// slot after the rank's last compute). first = the producer's position + 1.
template <typename StartAt>
int32_t WaitSendSlot(int32_t first, int32_t last, double arrival_s, StartAt start_s_at) {
  const double arrived_s = arrival_s - kSlotTimeEpsS;
  return internal::FirstPositionFromLow(first, last,
                                        [&](int32_t q) { return start_s_at(q) >= arrived_s; });
}

// Slot of the irecv of a receive buffer whose sender posts at `post_s` (the producer's end):
// the first q in [first, reader) with end_s_at(q) > post_s + kSlotTimeEpsS, else `reader` (the
// reader's position). `first` may skip slots known to end by post_s (0 = none known).
template <typename EndAt>
int32_t IrecvSlot(int32_t first, int32_t reader, double post_s, EndAt end_s_at) {
  const double posted_s = post_s + kSlotTimeEpsS;
  return internal::FirstPositionFromLow(first, reader,
                                        [&](int32_t q) { return end_s_at(q) > posted_s; });
}

// One step of the channel order, walking a channel's receives backwards in the sender's order:
// the receive's irecv slot is at most the one after it; `later_slot` (start: the largest int32)
// becomes this receive's slot.
inline int32_t KeepChannelOrder(int32_t irecv_slot, int32_t& later_slot) {
  later_slot = std::min(irecv_slot, later_slot);
  return later_slot;
}

}  // namespace weft::sim
