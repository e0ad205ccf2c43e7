#pragma once
// Loading specs from the built-in presets (embedded YAML) or from YAML/JSON files, and writing
// them back as YAML. Free functions; thread-safe.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"
#include "weft/spec/cluster.h"
#include "weft/spec/model.h"
#include "weft/spec/parallel.h"

namespace weft::spec {

// A spec file (model, cluster, placement YAML or JSON) is small: a regular file of at most 16 MiB.
inline constexpr int64_t kMaxSpecFileBytes = int64_t{16} << 20;

// The setup a paper used for a model combination (optional `setup:` section of a model preset).
struct TrainingSetup {
  std::string cluster;           // cluster preset name
  int gpus = 0;                  // total GPUs
  ParallelConfig parallel;       // TP/PP/DP per module, microbatches
  int context_tokens = 0;        // packed LLM sequence length (e.g. 8192)
  int global_batch_sequences = 0;  // sequences per iteration
  std::string data_profile;      // default synthetic profile name
  // Videos longer than the model takes (docs/data.md): a ViT samples at most max_video_frames
  // frames per clip (0 = no cap; a sample that still overflows the context is frame-sampled to
  // fit); a DiT trains on clips of at most max_clip_s seconds (0 = 16 s, DIP §7.1), longer ones
  // handled by long_clips: "truncate" (default) or "split".
  int max_video_frames = 0;
  double max_clip_s = 0;
  std::string long_clips;
  bool operator==(const TrainingSetup&) const = default;
  // gpus > 0, the cluster preset loads, parallel.Validate(model) and every entry fits `gpus`.
  // `paths` name where each parallel entry was written (ParallelConfig::Validate).
  Status Validate(const ModelSpec& model, const ParallelEntryPaths& paths = {}) const;
};

struct ModelPreset {
  ModelSpec model;
  std::optional<TrainingSetup> setup;
  bool operator==(const ModelPreset&) const = default;
};

enum class PresetKind { kModel, kCluster };

struct PresetInfo {
  PresetKind kind;
  std::string name;
  std::string description;
  int64_t parameter_count = 0;   // models only (0 for clusters)
  int total_gpus = 0;            // clusters only (0 for models)
};
std::string_view PresetKindName(PresetKind kind);  // "model", "cluster"

// All built-in presets, models first, each group sorted by name.
std::vector<PresetInfo> ListPresets();
// The embedded YAML text of a preset, or NotFound naming the closest names.
StatusOr<std::string> PresetYaml(std::string_view name);

// `name_or_path`: a preset name ("vlm-s") or a path to a .yaml/.yml/.json file with the same
// schema. Errors name the file, the field path, the value and the rule.
StatusOr<ModelPreset> LoadModel(std::string_view name_or_path);
StatusOr<ClusterSpec> LoadCluster(std::string_view name_or_path);

// Parsing from text; `source` names the file (or "preset:<name>") in error messages.
StatusOr<ModelPreset> ParseModelYaml(std::string_view text, std::string_view source);
StatusOr<ClusterSpec> ParseClusterYaml(std::string_view text, std::string_view source);

// Names of the built-in presets of one kind, sorted.
std::vector<std::string> PresetNames(PresetKind kind);

// Emitted YAML is fully expanded (no `use:` references) and parses back to an equal value.
std::string ModelToYaml(const ModelPreset& preset);
std::string ClusterToYaml(const ClusterSpec& cluster);

}  // namespace weft::spec
