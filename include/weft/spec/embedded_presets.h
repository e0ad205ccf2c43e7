#pragma once
// The preset YAML files compiled into the binary (generated from presets/ by CMake).
#include <string_view>
#include <vector>

namespace weft::spec::internal {

struct EmbeddedPreset {
  std::string_view kind;  // sub-folder of presets/: "models", "clusters", ...
  std::string_view name;  // file name without extension, e.g. "vlm-s"
  std::string_view yaml;  // file content
};

// All embedded presets, sorted by (kind, name). Thread-safe; the storage is static.
const std::vector<EmbeddedPreset>& EmbeddedPresets();

}  // namespace weft::spec::internal
