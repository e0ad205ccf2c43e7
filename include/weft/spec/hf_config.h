#pragma once
// Hugging Face config.json -> ModelSpec. A user's checkpoint config is a model spec: the reader
// maps each family's published fields onto weft's module DAG (encoder -> projector -> LLM) and
// records, per derived value, which config field (or architecture rule) it came from, so that
// `weft import hf` can write the equivalent YAML with a comment on every line.
//
// Families (top-level `model_type`), with the flat and nested (`text_config` / `llm_config` /
// `vision_config` / `audio_config`) layouts published checkpoints use:
//   llama, mistral, qwen2, qwen3, internlm2   text-only LLM ("llm")
//   qwen2_vl, qwen2_5_vl                       native-resolution ViT + 2x2 merger MLP + LLM
//   llava_onevision                            SigLIP (384 px crops) + 2-layer MLP + LLM
//   internvl_chat (remote code), internvl      InternViT (448 px tiles, pixel shuffle) + MLP + LLM
//   qwen2_audio                                Whisper-style encoder + linear projector + LLM
//   siglip, siglip_vision_model, intern_vit_6b a vision tower alone
// Preprocessing becomes the model's workload rule: Qwen2-VL resizes natively (sides rounded to
// 28 px, area capped at max_pixels: preprocessor_config.json beside the config, else
// HfImportOptions::max_pixels, else Qwen2VLImageProcessor's default 12845056) and Qwen2.5-VL's
// window attention (window_size, fullatt_block_indexes) prices the windowed ViT layers; LLaVA-OV
// AnyRes (image_grid_pinpoints, vision_aspect_ratio anyres_max_N: resize_rule anyres);
// InternVL dynamic tiles (dynamic_image_size, min/max_dynamic_patch, use_thumbnail: resize_rule
// tiles, 256 tokens a 448 px tile); Qwen2-Audio's 2x pooling (output_pool 2, 25 tokens/s).
// What weft does not model (the transformers-native InternVL processor's tiling, which lives in
// its preprocessor config) is reported in `notes` rather than approximated silently.
//
// Nothing size-like is defaulted: an unknown model_type, a missing size field or contradictory
// ones (heads not dividing the width, a merger output that is not the LLM width) is
// InvalidArgument "<source>: <field> = <value>; <rule>", one line. Training choices (frozen
// modules) are options, never guesses.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"
#include "weft/spec/preset.h"

namespace weft::spec {

struct HfImportOptions {
  std::vector<std::string> freeze;  // module names to mark frozen: vision, projector, llm, audio
  int64_t max_pixels = 0;           // native-resolution ViT area cap (0 = from the checkpoint)
  std::string name;                 // model name (empty = the config's directory name)
};

// One emitted value and its origin: modules[module].field came from `from` (a config field
// path such as "vision_config.depth", or a rule such as "model_type qwen2: q/k/v biases").
struct HfProvenance {
  int module = 0;
  std::string field;  // ModuleSpec YAML key
  std::string from;
};

struct HfImport {
  ModelPreset preset;      // validated; no setup
  std::string model_type;  // top-level model_type
  std::vector<HfProvenance> provenance;
  std::vector<std::string> notes;  // config facts weft does not model
};

// A directory holding config.json, or a .json file whose top level is an object with a
// "model_type" and no "modules" (weft's own JSON spec schema). Reads the file.
bool IsHfConfigPath(std::string_view path);

// Parses config.json text. `source` names the file in errors; `preprocessor_text` is the
// checkpoint's preprocessor_config.json ("" = none).
StatusOr<HfImport> ParseHfConfig(std::string_view json_text,
                                 std::string_view source,
                                 const HfImportOptions& options = {},
                                 std::string_view preprocessor_text = "");

// Reads `path` (config.json or a directory holding one, plus preprocessor_config.json beside it
// when present) and parses it.
StatusOr<HfImport> LoadHfConfig(std::string_view path, const HfImportOptions& options = {});

// The import as weft YAML (ModelToYaml, parses back to an equal preset) with a comment naming
// the source of every derived value and the notes as a header.
std::string HfImportToYaml(const HfImport& import);

}  // namespace weft::spec
