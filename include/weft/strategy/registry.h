#pragma once
// The table of strategies (src/strategy/registry.cc lists every strategy/<system>/ factory).
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "weft/strategy/strategy.h"

namespace weft::strategy::internal {

struct RegistryEntry {
  std::string_view name;
  std::function<StatusOr<std::unique_ptr<Strategy>>()> make;
};

const std::vector<RegistryEntry>& Registry();

}  // namespace weft::strategy::internal
