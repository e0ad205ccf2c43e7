#pragma once
// Strategy `manual`: a user placement (planning/placement_file.h) as given, the same static
// schedule rule for every batch.
#include <memory>

#include "weft/planning/placement_file.h"
#include "weft/strategy/strategy.h"

namespace weft::strategy::manual {

std::unique_ptr<Strategy> MakeManualStrategy(planning::PlacementSpec spec);

}  // namespace weft::strategy::manual
