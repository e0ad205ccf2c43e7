// libFuzzer target: the Hugging Face config.json reader (spec::ParseHfConfig) and, for a config
// it accepts, the YAML it writes (the commented YAML must read back to the same model). The same
// bytes also go in as a Qwen2.5-VL checkpoint's preprocessor_config.json.
#include <utility>

#include "fuzz_common.h"
#include "weft/data/workload.h"
#include "weft/spec/hf_config.h"

namespace {

// A small valid qwen2_5_vl config: the fuzz input is its preprocessor_config.json.
constexpr const char* kQwenVl = R"({"model_type": "qwen2_5_vl", "num_hidden_layers": 2,
  "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
  "num_key_value_heads": 2, "vocab_size": 1000, "vision_config": {"depth": 2,
  "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "out_hidden_size": 64,
  "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2}})";

void CheckImport(const weft::StatusOr<weft::spec::HfImport>& imported) {
  if (!imported.ok()) {
    weft::fuzz::CheckError(imported.status());
    return;
  }
  (void)imported->preset.model.ParameterCount();
  // The workload rule the import sets (tiles, windows, pooling) on a few image shapes and clips:
  // errors are fine, crashes and sanitizer reports are not.
  for (const weft::spec::ModuleSpec& m : imported->preset.model.modules) {
    for (const auto& [w, h] : {std::pair{1000, 700}, std::pair{1, 65535}, std::pair{65535, 1}}) {
      const weft::spec::ImageMeta image{.width_px = w, .height_px = h};
      if (m.kind == weft::spec::ModuleKind::kVit) {
        (void)weft::data::VitCropsForImage(m, image);
        (void)weft::data::VitPatchTokensForImage(m, image);
        (void)weft::data::LlmTokensForImage(m, image);
      }
    }
    if (m.kind == weft::spec::ModuleKind::kAudioEncoder) {
      (void)weft::data::LlmTokensForAudio(m, {.duration_s = 45.0});
    }
  }
  const std::string yaml = weft::spec::HfImportToYaml(*imported);
  weft::StatusOr<weft::spec::ModelPreset> again = weft::spec::ParseModelYaml(yaml, "again.yaml");
  if (!again.ok() || !(again->model == imported->preset.model)) {
    std::fprintf(stderr, "imported model does not read back: %s\n%s\n",
                 again.ok() ? "(different model)" : again.status().message().c_str(), yaml.c_str());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = weft::fuzz::AsText(data, size);
  CheckImport(weft::spec::ParseHfConfig(text, "fuzz/config.json"));
  CheckImport(weft::spec::ParseHfConfig(kQwenVl, "fuzz/config.json", {}, text));
  return 0;
}
