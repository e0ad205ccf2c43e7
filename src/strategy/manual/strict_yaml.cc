#include "strict_yaml.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>
#include <stdexcept>

namespace weft::strategy::manual::internal {

Status CheckMapKeys(const YAML::Node& node, std::string_view source, std::string_view path,
                    const std::vector<std::string>& known) {
  if (!node.IsMap()) return InvalidArgumentError(fmt::format("{}: {} must be a map", source, path));
  std::set<std::string> seen;
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>("");
    if (!seen.insert(key).second) {
      return InvalidArgumentError(
          fmt::format("{}: {}.{} appears twice; keys must be unique", source, path, key));
    }
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      return InvalidArgumentError(fmt::format("{}: {}.{} is not a known key; known: {}", source,
                                              path, key, fmt::join(known, ", ")));
    }
  }
  return OkStatus();
}

StatusOr<int> ReadBoundedInt(const YAML::Node& node, std::string_view source,
                             std::string_view path, int min_value, int max_value) {
  if (!node.IsScalar()) {
    return InvalidArgumentError(fmt::format("{}: {} must be an integer", source, path));
  }
  long long v = 0;
  try {
    size_t used = 0;
    const std::string text = node.Scalar();
    v = std::stoll(text, &used);
    if (used != text.size()) throw std::invalid_argument("trailing");
  } catch (...) {
    return InvalidArgumentError(fmt::format("{}: {} = '{}'; must be an integer", source, path,
                                            node.Scalar().substr(0, 40)));
  }
  if (v < min_value || v > max_value) {
    return InvalidArgumentError(fmt::format("{}: {} = {}; must be in [{}, {}]", source, path, v,
                                            min_value, max_value));
  }
  return static_cast<int>(v);
}

}  // namespace weft::strategy::manual::internal
