#include "weft/spec/work.h"

#include <fmt/format.h>

namespace weft::spec {

std::string_view PassShortName(Pass pass) {
  switch (pass) {
    case Pass::kForward:
      return "F";
    case Pass::kBackward:
      return "B";
    case Pass::kBackwardInput:
      return "Bi";
    case Pass::kBackwardWeight:
      return "W";
  }
  return "?";
}

std::string_view PassName(Pass pass) {
  switch (pass) {
    case Pass::kForward:
      return "fwd";
    case Pass::kBackward:
      return "bwd";
    case Pass::kBackwardInput:
      return "bwd_input";
    case Pass::kBackwardWeight:
      return "bwd_weight";
  }
  return "?";
}

std::span<const Pass> PassParts(Pass pass) {
  static constexpr std::array<Pass, 3> kParts = {Pass::kForward, Pass::kBackwardInput,
                                                 Pass::kBackwardWeight};
  switch (pass) {
    case Pass::kForward:
      return std::span<const Pass>(kParts).subspan(0, 1);
    case Pass::kBackward:
      return std::span<const Pass>(kParts).subspan(1, 2);
    case Pass::kBackwardInput:
      return std::span<const Pass>(kParts).subspan(1, 1);
    case Pass::kBackwardWeight:
      return std::span<const Pass>(kParts).subspan(2, 1);
  }
  return {};
}

std::string_view RecomputeName(Recompute recompute) {
  switch (recompute) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
    case Recompute::kOffload:
      return "offload";
  }
  return "?";
}

StatusOr<Recompute> ParseRecompute(std::string_view name) {
  for (Recompute r : kAllRecompute) {
    if (RecomputeName(r) == name) return r;
  }
  return InvalidArgumentError(
      fmt::format("recompute = '{}'; must be one of none, selective, full, offload", name));
}

}  // namespace weft::spec
