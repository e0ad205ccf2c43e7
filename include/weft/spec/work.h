#pragma once
// The kinds of work a training step is made of, shared by every module that prices, builds,
// schedules, simulates or compiles it: the pass of a stage (or of an operator) and the memory
// strategy of a layer between its forward and backward. Defined once here, below cost and graph,
// so that the cost model's keys and the stage graph's stages use the same two types.
#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "weft/common/status.h"

namespace weft::spec {

// One pass of a stage or an operator.
//  kForward        — the forward pass.
//  kBackward       — input-gradient and weight-gradient work together (a stage of a schedule
//                    that does not split the backward). The cost model prices the two parts
//                    separately: an operator (cost::Op) and a correction key are never kBackward;
//                    a kBackward stage's time is the sum of its kBackwardInput and
//                    kBackwardWeight parts (PassParts).
//  kBackwardInput  — "B" of zero-bubble schedules: the input gradient only.
//  kBackwardWeight — "W" of zero-bubble schedules: the weight gradient only.
enum class Pass : uint8_t { kForward, kBackward, kBackwardInput, kBackwardWeight };
inline constexpr int kNumPass = 4;
// "F", "B", "Bi", "W" (stage labels, traces).
std::string_view PassShortName(Pass pass);
// "fwd", "bwd", "bwd_input", "bwd_weight" (cost reports, correction keys).
std::string_view PassName(Pass pass);
// kBackward, kBackwardInput or kBackwardWeight. Inline: schedulers ask it per stage visit.
inline bool IsBackward(Pass pass) { return pass != Pass::kForward; }
// The passes the cost model prices separately that make up `pass`, in that order:
// kForward -> {kForward}; kBackward -> {kBackwardInput, kBackwardWeight}; kBackwardInput ->
// {kBackwardInput}; kBackwardWeight -> {kBackwardWeight}. Empty for a value outside the enum.
std::span<const Pass> PassParts(Pass pass);

// What a layer keeps between its forward and backward (the builder chooses one per stage; the
// cost model prices each; the graph only carries it as a label):
//  kNone      — every activation the backward needs (Korthikanti's "no recompute").
//  kSelective — the attention core and the MLP activation function are recomputed in backward:
//               their outputs (attention output O, activation output) are not stored; without
//               flash attention this also drops the s² score tensors (Korthikanti's selective).
//  kFull      — only the layer input is stored; the whole forward is recomputed in backward.
//  kOffload   — activations are copied to host memory over PCIe and back for backward:
//               GPU bytes ≈ 0, transfer time at ClusterSpec::host_link_bandwidth_bytes_per_s.
// The values index per-strategy arrays (cost::CostTotals::activation_bytes,
// graph::Stage::recompute_layers) and are ordered from least to most memory saved on the GPU.
enum class Recompute : uint8_t { kNone = 0, kSelective = 1, kFull = 2, kOffload = 3 };
inline constexpr int kNumRecompute = 4;
inline constexpr std::array<Recompute, kNumRecompute> kAllRecompute = {
    Recompute::kNone, Recompute::kSelective, Recompute::kFull, Recompute::kOffload};
std::string_view RecomputeName(Recompute recompute);  // "none", "selective", "full", "offload"
// The inverse of RecomputeName; InvalidArgument naming the accepted values otherwise.
StatusOr<Recompute> ParseRecompute(std::string_view name);

}  // namespace weft::spec
