#include "weft/spec/hf_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace weft::spec {
namespace {

using ::testing::HasSubstr;

const std::string kHfDir = std::string(WEFT_SOURCE_DIR) + "/tests/data/hf/";

HfImport Import(const std::string& model, const HfImportOptions& options = {}) {
  StatusOr<HfImport> imported = LoadHfConfig(kHfDir + model, options);
  EXPECT_TRUE(imported.ok()) << imported.status().message();
  return imported.ok() ? *std::move(imported) : HfImport{};
}

const ModuleSpec& Module(const ModelSpec& model, std::string_view name) {
  std::optional<int> i = model.FindModule(name);
  EXPECT_TRUE(i.has_value()) << name;
  static const ModuleSpec kEmpty;
  return i ? model.modules[*i] : kEmpty;
}

double RelativeDelta(int64_t a, int64_t b) {
  return std::fabs(static_cast<double>(a) - static_cast<double>(b)) / static_cast<double>(b);
}

// ---------------------------------------------------------------------------------------------
// Every preset that describes a public model, against the published config.json
// (tests/data/hf/README.md names each source and explains the differences listed here).

struct PresetCase {
  std::string dir;     // tests/data/hf/<dir>/config.json
  std::string preset;  // preset name
  // Imported module -> preset module compared field by field (shape and parameters).
  std::vector<std::pair<std::string, std::string>> modules;
};

// Differences between a published config and the preset, each explained in the README.
struct KnownDifference {
  std::string dir;
  std::string module;
  std::string field;
};
const std::vector<KnownDifference> kKnown = {
    // LLaVA drops SigLIP's last layer (the HF checkpoint stores 26); the preset counts all 27.
    {"llava-onevision-qwen2-7b", "vision", "num_layers"},
    {"llava-onevision-qwen2-72b", "vision", "num_layers"},
    // Vocabularies resized for the added image/video tokens; the presets use the base LLM's.
    {"llava-onevision-qwen2-7b", "llm", "vocab_size"},
    {"llava-onevision-qwen2-72b", "llm", "vocab_size"},
    {"internvl2.5-78b", "llm", "vocab_size"},
};

bool Known(const std::string& dir, const std::string& module, const std::string& field) {
  for (const auto& k : kKnown) {
    if (k.dir == dir && k.module == module && (field.empty() || k.field == field)) return true;
  }
  return false;
}

const std::vector<PresetCase> kPresetCases = {
    {"llama3-8b", "llama3-8b", {{"llm", "llm"}}},
    {"llama3-70b", "llama3-70b", {{"llm", "llm"}}},
    {"qwen2.5-7b", "qwen2.5-7b", {{"llm", "llm"}}},
    {"qwen2.5-32b", "qwen2-32b", {{"llm", "llm"}}},
    {"qwen2-72b", "qwen2-72b", {{"llm", "llm"}}},
    {"qwen3-4b", "qwen3-4b", {{"llm", "llm"}}},
    {"qwen3-32b", "qwen3-32b", {{"llm", "llm"}}},
    {"siglip-so400m", "siglip-so400m", {{"vision", "vision"}}},
    {"internvit-6b", "internvit-6b", {{"vision", "vision"}}},
    {"qwen2.5-vl-7b", "qwen2.5-vl-vit", {{"vision", "vision"}}},
    {"qwen2.5-vl-7b", "qwen2.5-7b", {{"llm", "llm"}}},
    {"llava-onevision-qwen2-7b",
     "llava-ov-qwen2.5-7b",
     {{"vision", "vision"}, {"projector", "projector"}, {"llm", "llm"}}},
    {"llava-onevision-qwen2-72b",
     "llava-ov-qwen2.5-72b",
     {{"vision", "vision"}, {"projector", "projector"}, {"llm", "llm"}}},
    {"internvl2.5-78b",
     "internvl2.5-qwen2.5-72b",
     {{"vision", "vision"}, {"projector", "projector"}, {"llm", "llm"}}},
};

TEST(HfConfig, PublishedConfigsImportToThePresets) {
  for (const PresetCase& c : kPresetCases) {
    SCOPED_TRACE(c.dir + " vs preset " + c.preset);
    const HfImport imported = Import(c.dir);
    StatusOr<ModelPreset> preset = LoadModel(c.preset);
    ASSERT_TRUE(preset.ok()) << preset.status().message();
    int64_t imported_total = 0;
    int64_t preset_total = 0;
    for (const auto& names : c.modules) {
      // Named copies, not a structured binding: clang's C++20 cannot capture those in a lambda.
      const std::string mine = names.first, theirs = names.second;
      SCOPED_TRACE("module " + mine);
      const ModuleSpec& a = Module(imported.preset.model, mine);
      const ModuleSpec& b = Module(preset->model, theirs);
      auto check = [&](const char* field, int64_t got, int64_t want) {
        if (Known(c.dir, mine, field)) {
          EXPECT_NE(got, want) << field << ": listed as a known difference but equal";
        } else {
          EXPECT_EQ(got, want) << field;
        }
      };
      EXPECT_EQ(a.kind, b.kind);
      check("num_layers", a.num_layers, b.num_layers);
      check("hidden_size", a.hidden_size, b.hidden_size);
      check("ffn_hidden_size", a.ffn_hidden_size, b.ffn_hidden_size);
      check("num_attention_heads", a.num_attention_heads, b.num_attention_heads);
      check("num_kv_groups", a.num_kv_groups, b.num_kv_groups);
      check("head_dim", a.HeadDim(), b.HeadDim());
      check("vocab_size", a.vocab_size, b.vocab_size);
      check("input_size", a.input_size, b.input_size);
      check("output_size", a.output_size, b.output_size);
      EXPECT_EQ(a.gated_mlp, b.gated_mlp);
      EXPECT_EQ(a.tied_embeddings, b.tied_embeddings);
      EXPECT_EQ(a.qk_norm, b.qk_norm);
      EXPECT_EQ(a.rms_norm, b.rms_norm);
      if (!Known(c.dir, mine, "")) {
        EXPECT_EQ(a.qkv_bias, b.qkv_bias);
        EXPECT_EQ(a.linear_bias, b.linear_bias);
        EXPECT_LE(RelativeDelta(a.ParameterCount(), b.ParameterCount()), 0.005)
            << a.ParameterCount() << " vs " << b.ParameterCount();
      }
      imported_total += a.ParameterCount();
      preset_total += b.ParameterCount();
    }
    EXPECT_LE(RelativeDelta(imported_total, preset_total), 0.005)
        << imported_total << " vs " << preset_total;
  }
}

// Published totals of checkpoints without a preset (the model cards' sizes).
TEST(HfConfig, CheckpointsWithoutPresetMatchTheirPublishedSize) {
  struct Case {
    std::string dir;
    double published_params;
  };
  for (const Case& c : std::vector<Case>{{"qwen2-vl-7b", 8.29e9}, {"qwen2-audio-7b", 8.40e9}}) {
    SCOPED_TRACE(c.dir);
    const HfImport imported = Import(c.dir);
    EXPECT_LE(
        std::fabs(imported.preset.model.ParameterCount() - c.published_params) / c.published_params,
        0.005)
        << imported.preset.model.ParameterCount();
  }
}

TEST(HfConfig, Qwen25VlMapsVisionMergerAndWorkloadRule) {
  const HfImport imported = Import("qwen2.5-vl-7b");
  const ModelSpec& model = imported.preset.model;
  EXPECT_EQ(model.name, "qwen2.5-vl-7b");
  ASSERT_EQ(model.modules.size(), 3u);
  const ModuleSpec& vit = model.modules[0];
  EXPECT_EQ(vit.resize_rule, ResizeRule::kNative);
  EXPECT_EQ(vit.max_pixels, 12845056);  // preprocessor_config.json
  EXPECT_EQ(vit.spatial_merge, 2);
  EXPECT_EQ(vit.temporal_patch, 2);
  const ModuleSpec& merger = model.modules[1];
  EXPECT_EQ(merger.input_size, 5120);
  EXPECT_EQ(merger.ffn_hidden_size, 5120);
  EXPECT_EQ(merger.output_size, 3584);
  ASSERT_EQ(model.edges.size(), 2u);
  EXPECT_EQ(model.edges[0], (ModuleEdge{"vision", "projector"}));
  // Window attention: 112 px windows = (112 / 14)^2 = 64 patches; 4 full-attention layers.
  EXPECT_EQ(vit.attention_window_px, 112);
  EXPECT_EQ(vit.WindowPatches(), 64);
  EXPECT_EQ(vit.full_attention_layers, (std::vector<int>{7, 15, 23, 31}));
  EXPECT_TRUE(vit.WindowedLayer(0));
  EXPECT_FALSE(vit.WindowedLayer(7));
}

TEST(HfConfig, Qwen2VlDerivesWidthsFromEmbedDimAndMlpRatio) {
  const HfImport imported = Import("qwen2-vl-7b");
  const ModuleSpec& vit = imported.preset.model.modules[0];
  EXPECT_EQ(vit.hidden_size, 1280);
  EXPECT_EQ(vit.ffn_hidden_size, 5120);
  EXPECT_EQ(vit.activation, Activation::kQuickGelu);
  EXPECT_FALSE(vit.gated_mlp);
  EXPECT_EQ(vit.max_pixels, 12845056);  // the processor's default: no preprocessor_config.json
  HfImportOptions options;
  options.max_pixels = 1003520;
  EXPECT_EQ(Import("qwen2-vl-7b", options).preset.model.modules[0].max_pixels, 1003520);
}

TEST(HfConfig, WorkloadRulesPerFamily) {
  // LLaVA-OV: AnyRes over 384 px crops (729 tokens each), 36 pinpoints, anyres_max_9.
  const ModuleSpec llava = Import("llava-onevision-qwen2-7b").preset.model.modules[0];
  EXPECT_EQ(llava.FixedImageTokens(), 729);
  EXPECT_EQ(llava.resize_rule, ResizeRule::kAnyRes);
  ASSERT_EQ(llava.grid_pinpoints.size(), 36u);
  EXPECT_EQ(llava.grid_pinpoints[1], (GridPinpoint{384, 768}));
  EXPECT_EQ(llava.anyres_max_tiles, 9);
  // InternVL 2.5: dynamic 448 px tiles (256 tokens each), 1..12 tiles + a thumbnail.
  const HfImport internvl = Import("internvl2.5-78b");
  const ModuleSpec& tiles = internvl.preset.model.modules[0];
  EXPECT_EQ(tiles.FixedImageTokens(), 256);
  EXPECT_EQ(tiles.resize_rule, ResizeRule::kTiles);
  EXPECT_EQ(tiles.min_tiles, 1);
  EXPECT_EQ(tiles.max_tiles, 12);
  EXPECT_TRUE(tiles.thumbnail);
  EXPECT_EQ(internvl.preset.model.modules[1].input_size, 12800);
  // The transformers-native layout ([n, n] sizes, text_config).
  const HfImport native = Import("internvl3-1b-hf");
  EXPECT_EQ(native.preset.model.modules[0].FixedImageTokens(), 256);
  EXPECT_EQ(native.preset.model.modules[0].hidden_size, 1024);
  EXPECT_FALSE(native.preset.model.modules[2].tied_embeddings);
  EXPECT_NEAR(native.preset.model.ParameterCount(), 0.938e9, 0.005 * 0.938e9);
}

TEST(HfConfig, AudioEncoderOfQwen2Audio) {
  const HfImport imported = Import("qwen2-audio-7b");
  const ModelSpec& model = imported.preset.model;
  const ModuleSpec& audio = Module(model, "audio");
  EXPECT_EQ(audio.kind, ModuleKind::kAudioEncoder);
  EXPECT_EQ(audio.mel_bins, 128);
  EXPECT_EQ(audio.hidden_size, 1280);
  const ModuleSpec& proj = Module(model, "audio_projector");
  EXPECT_EQ(proj.num_layers, 1);
  EXPECT_EQ(proj.input_size, 1280);
  EXPECT_EQ(proj.output_size, 4096);
  EXPECT_EQ(audio.output_pool, 2);  // AvgPool1d(2): 50 -> 25 tokens/s
}

std::string ErrorOf(const std::string& json);  // below

TEST(HfConfig, PreprocessingFieldsAreCheckedNamingTheField) {
  auto edited = [](const std::string& dir, const std::string& needle, const std::string& with) {
    std::ifstream in(kHfDir + dir + "/config.json");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find(needle), std::string::npos) << needle;
    if (text.find(needle) != std::string::npos)
      text.replace(text.find(needle), needle.size(), with);
    return text;
  };
  EXPECT_THAT(ErrorOf(edited("qwen2.5-vl-7b", "\"window_size\": 112", "\"window_size\": 100")),
              HasSubstr("vision_config.window_size = 100; must be a multiple of "
                        "vision_config.patch_size x vision_config.spatial_merge_size (28 px)"));
  EXPECT_THAT(
      ErrorOf(edited("qwen2.5-vl-7b", "23,\n      31", "23,\n      32")),
      HasSubstr("vision_config.fullatt_block_indexes = [7,15,23,32]; must be increasing layer "
                "indexes in [0, 32)"));
  EXPECT_THAT(ErrorOf(edited("llava-onevision-qwen2-7b", "384,\n      768", "384,\n      700")),
              HasSubstr("image_grid_pinpoints = "));
  EXPECT_THAT(ErrorOf(edited("llava-onevision-qwen2-7b", "anyres_max_9", "anyres_max_x")),
              HasSubstr("vision_aspect_ratio = \"anyres_max_x\"; must be anyres or anyres_max_N"));
  EXPECT_THAT(
      ErrorOf(edited("internvl2.5-78b", "\"max_dynamic_patch\": 12", "\"max_dynamic_patch\": 0")),
      HasSubstr("max_dynamic_patch = 0; must be an integer in [1, 1024]"));
  // dynamic_image_size false: one tile per image, said in a note.
  const StatusOr<HfImport> fixed = ParseHfConfig(
      edited("internvl2.5-78b", "\"dynamic_image_size\": true", "\"dynamic_image_size\": false"),
      "x/config.json");
  ASSERT_TRUE(fixed.ok()) << fixed.status().message();
  EXPECT_EQ(fixed->preset.model.modules[0].resize_rule, ResizeRule::kFixed);
}

TEST(HfConfig, YamlCarriesProvenanceAndParsesBack) {
  for (const std::string dir : {"qwen2.5-vl-7b", "llava-onevision-qwen2-7b", "internvl2.5-78b",
                                "qwen3-4b", "qwen2-audio-7b"}) {
    SCOPED_TRACE(dir);
    const HfImport imported = Import(dir);
    const std::string yaml = HfImportToYaml(imported);
    StatusOr<ModelPreset> back = ParseModelYaml(yaml, dir + ".yaml");
    ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << yaml;
    EXPECT_EQ(back->model, imported.preset.model);
  }
  const std::string yaml = HfImportToYaml(Import("qwen2.5-vl-7b"));
  EXPECT_THAT(yaml, HasSubstr("num_layers: 32  # vision_config.depth"));
  EXPECT_THAT(yaml, HasSubstr("input_size: 5120  # vision width x spatial_merge^2 (1280 x 4)"));
  EXPECT_THAT(yaml, HasSubstr("qkv_bias: true  # model_type qwen2: q/k/v projections have biases"));
  EXPECT_THAT(yaml, HasSubstr("attention_window_px: 112  # vision_config.window_size (windows of "
                              "(112 / 14)^2 = 64 patches)"));
  EXPECT_THAT(yaml, HasSubstr("full_attention_layers: [7, 15, 23, 31]  # "
                              "vision_config.fullatt_block_indexes"));
  EXPECT_THAT(yaml, HasSubstr("num_kv_groups: 16  # = num_attention_heads (MHA)"));
  EXPECT_THAT(yaml, HasSubstr("gated_mlp: true  # the family's architecture (see kind)"));
}

TEST(HfConfig, FreezeIsAnOption) {
  HfImportOptions options;
  options.freeze = {"vision"};
  const HfImport imported = Import("llava-onevision-qwen2-7b", options);
  EXPECT_TRUE(imported.preset.model.modules[0].frozen);
  EXPECT_FALSE(imported.preset.model.modules[2].frozen);
  EXPECT_FALSE(Import("llava-onevision-qwen2-7b").preset.model.modules[0].frozen);
  options.freeze = {"encoder"};
  StatusOr<HfImport> bad = LoadHfConfig(kHfDir + "llava-onevision-qwen2-7b", options);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("freeze = \"encoder\"; must name a module (vision, projector, llm)"));
}

// ---------------------------------------------------------------------------------------------
// Errors: one line naming the file, the field and the rule.

std::string ErrorOf(const std::string& json) {
  StatusOr<HfImport> r = ParseHfConfig(json, "x/config.json");
  EXPECT_FALSE(r.ok()) << json;
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
  return r.status().message();
}

constexpr const char* kLlama =
    R"({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64,
        "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
        "vocab_size": 1000})";

TEST(HfConfig, ErrorsNameFileFieldAndRule) {
  ASSERT_TRUE(ParseHfConfig(kLlama, "x/config.json").ok());
  EXPECT_THAT(ErrorOf(R"({"model_type": "gpt2"})"),
              HasSubstr("x/config.json: model_type = \"gpt2\"; must be one of llama"));
  EXPECT_THAT(ErrorOf(R"({"hidden_size": 1})"),
              HasSubstr("x/config.json: model_type = (missing); must name the architecture"));
  EXPECT_THAT(ErrorOf(R"({"model_type": "llama", "num_hidden_layers": 2})"),
              HasSubstr("x/config.json: hidden_size = (missing); must be an integer in [1, "));
  EXPECT_THAT(ErrorOf(R"({"model_type": "qwen2", "num_hidden_layers": 2, "hidden_size": 66,
                          "intermediate_size": 8, "num_attention_heads": 4, "vocab_size": 9})"),
              HasSubstr("hidden_size = 66; must be divisible by num_attention_heads (4)"));
  EXPECT_THAT(ErrorOf(R"({"model_type": "qwen2", "num_hidden_layers": 2, "hidden_size": 64,
                          "intermediate_size": 8, "num_attention_heads": 4,
                          "num_key_value_heads": 3, "vocab_size": 9})"),
              HasSubstr("num_key_value_heads = 3; must divide num_attention_heads (4)"));
  EXPECT_THAT(ErrorOf(R"({"model_type": "llama", "num_hidden_layers": 2.5})"),
              HasSubstr("num_hidden_layers = 2.5; must be an integer"));
  EXPECT_THAT(ErrorOf("{\"model_type\": \"llama\""), HasSubstr("x/config.json: malformed JSON"));
  EXPECT_THAT(ErrorOf("[1, 2]"), HasSubstr("(top level) = [1,2]; must be a JSON object"));
  EXPECT_THAT(ErrorOf(std::string(100, '[') + std::string(100, ']')),
              HasSubstr("nesting deeper than 32 levels"));
  // A merger that does not produce the LLM's width.
  std::ifstream in(kHfDir + "qwen2.5-vl-7b/config.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string needle = "\"out_hidden_size\": 3584";
  ASSERT_NE(text.find(needle), std::string::npos);
  text.replace(text.find(needle), needle.size(), "\"out_hidden_size\": 4096");
  EXPECT_THAT(ErrorOf(text), HasSubstr("vision_config.out_hidden_size = 4096; must equal the LLM "
                                       "width hidden_size (3584)"));
  // A nested text config of an unsupported family.
  EXPECT_THAT(ErrorOf(R"({"model_type": "llava_onevision", "vision_config": {
                  "model_type": "siglip_vision_model", "num_hidden_layers": 2,
                  "hidden_size": 64, "intermediate_size": 8, "num_attention_heads": 4,
                  "patch_size": 14, "image_size": 28}, "text_config": {"model_type": "gemma"}})"),
              HasSubstr("text_config.model_type = \"gemma\"; must be one of llama"));
}

TEST(HfConfig, PathDetectionAndLoadModel) {
  EXPECT_TRUE(IsHfConfigPath(kHfDir + "qwen3-4b"));
  EXPECT_TRUE(IsHfConfigPath(kHfDir + "qwen3-4b/config.json"));
  EXPECT_FALSE(IsHfConfigPath(kHfDir));
  EXPECT_FALSE(IsHfConfigPath("qwen3-4b"));
  EXPECT_FALSE(IsHfConfigPath(std::string(WEFT_SOURCE_DIR) + "/presets/models/qwen3-4b.yaml"));
  // LoadModel takes a config.json (or its directory) wherever it takes a preset.
  StatusOr<ModelPreset> by_dir = LoadModel(kHfDir + "qwen3-4b");
  ASSERT_TRUE(by_dir.ok()) << by_dir.status().message();
  StatusOr<ModelPreset> by_file = LoadModel(kHfDir + "qwen3-4b/config.json");
  ASSERT_TRUE(by_file.ok()) << by_file.status().message();
  EXPECT_EQ(by_dir->model, by_file->model);
  EXPECT_EQ(by_dir->model.name, "qwen3-4b");
  EXPECT_FALSE(by_dir->setup.has_value());
  // A weft JSON spec (a `modules` list) still reads as one.
  const std::string weft_json = ::testing::TempDir() + "/weft_hf_test_spec.json";
  {
    std::ofstream(weft_json) << R"({"model_type": "x", "modules": [{"name": "llm", "kind": "llm",
        "num_layers": 1, "hidden_size": 64, "ffn_hidden_size": 128, "num_attention_heads": 4,
        "vocab_size": 100}]})";
  }
  EXPECT_FALSE(IsHfConfigPath(weft_json));
}

}  // namespace
}  // namespace weft::spec
