#pragma once
// Strict YAML reading shared by the placement and MIMO-config readers: every failure is one line
// "SOURCE: PATH <rule>". Internal to strategy/manual.
#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"

namespace weft::strategy::manual::internal {

// `node` is a map whose keys are unique and all in `known`.
Status CheckMapKeys(const YAML::Node& node, std::string_view source, std::string_view path,
                    const std::vector<std::string>& known);

// `node` is a whole integer scalar in [min_value, max_value].
StatusOr<int> ReadBoundedInt(const YAML::Node& node, std::string_view source,
                             std::string_view path, int min_value, int max_value);

}  // namespace weft::strategy::manual::internal
