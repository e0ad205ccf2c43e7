#pragma once
// Private helpers of the plan module.
#include <cstdint>
#include <string>

namespace weft::plan::internal {

// "1.50 GiB", "12.00 MiB", "512 B" (binary units).
std::string FormatBytes(int64_t bytes);

}  // namespace weft::plan::internal
