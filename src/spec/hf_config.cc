// Hugging Face config.json -> ModelSpec (include/weft/spec/hf_config.h).
#include "weft/spec/hf_config.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <utility>

#include "weft/common/strict_input.h"
#include "weft/common/text.h"

namespace weft::spec {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kConfigFileName = "config.json";
constexpr std::string_view kPreprocessorFileName = "preprocessor_config.json";
// Qwen2VLImageProcessor's max_pixels when the checkpoint has no preprocessor_config.json.
constexpr int64_t kQwen2VlDefaultMaxPixels = 12845056;  // 16384 x 28 x 28
// Size fields: widths and counts up to 2^20, layers up to 4096, vocabularies up to 2^24 (the
// YAML schema's ranges; parameter counts stay far from int64 overflow).
constexpr int64_t kMaxWidth = int64_t{1} << 20;
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxVocab = int64_t{1} << 24;
// Configs nest 2-3 levels; deeper input is refused before parsing (no deep recursion).
constexpr int kMaxJsonDepth = 32;

// A JSON value as it appears in a message: short, one line.
std::string Shown(const Json* value) {
  if (value == nullptr) return "(missing)";
  std::string text = value->dump(-1, ' ', true, Json::error_handler_t::replace);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

// The deepest nesting of [ and { outside strings; stops counting past `limit`.
int JsonDepth(std::string_view text, int limit) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

StatusOr<Json> ParseJson(std::string_view text, std::string_view source) {
  if (JsonDepth(text, kMaxJsonDepth) > kMaxJsonDepth) {
    return InvalidArgumentError(fmt::format("{}: nesting deeper than {} levels; not a model config",
                                            source, kMaxJsonDepth));
  }
  Json doc = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return InvalidArgumentError(fmt::format("{}: malformed JSON", source));
  }
  return doc;
}

// A JSON object and its path prefix in messages ("" or "vision_config.").
struct Obj {
  const Json* json = nullptr;
  std::string prefix;
  std::string Path(std::string_view key) const { return prefix + std::string(key); }
  const Json* Find(std::string_view key) const {
    if (json == nullptr || !json->is_object()) return nullptr;
    auto it = json->find(std::string(key));
    return it == json->end() || it->is_null() ? nullptr : &*it;
  }
};

class Importer {
 public:
  Importer(std::string source, const HfImportOptions& options)
      : source_(std::move(source)), options_(options) {}

  StatusOr<HfImport> Run(const Json& root, std::string_view preprocessor_text);

 private:
  Status Error(std::string_view path, const Json* value, std::string_view rule) const {
    return InvalidArgumentError(fmt::format("{}: {} = {}; {}", source_, path, Shown(value), rule));
  }

  // Required size field: an integer in [1, max].
  StatusOr<int> Int(const Obj& o, std::string_view key, int64_t max = kMaxWidth) const {
    const Json* v = o.Find(key);
    if (v == nullptr || !v->is_number_integer() || v->get<int64_t>() < 1 ||
        v->get<int64_t>() > max) {
      return Error(o.Path(key), v, fmt::format("must be an integer in [1, {}]", max));
    }
    return static_cast<int>(v->get<int64_t>());
  }
  // Optional size field (absent or null = nullopt).
  StatusOr<std::optional<int>> OptInt(const Obj& o,
                                      std::string_view key,
                                      int64_t max = kMaxWidth) const {
    if (o.Find(key) == nullptr) return std::optional<int>();
    WEFT_ASSIGN_OR_RETURN(int value, Int(o, key, max));
    return std::optional<int>(value);
  }
  StatusOr<double> Number(const Obj& o, std::string_view key, double lo, double hi) const {
    const Json* v = o.Find(key);
    if (v == nullptr || !v->is_number() || !(v->get<double>() >= lo && v->get<double>() <= hi)) {
      return Error(o.Path(key), v, fmt::format("must be a number in [{}, {}]", lo, hi));
    }
    return v->get<double>();
  }
  StatusOr<std::optional<bool>> OptBool(const Obj& o, std::string_view key) const {
    const Json* v = o.Find(key);
    if (v == nullptr) return std::optional<bool>();
    if (!v->is_boolean()) return Error(o.Path(key), v, "must be true or false");
    return std::optional<bool>(v->get<bool>());
  }
  StatusOr<std::optional<std::string>> OptString(const Obj& o, std::string_view key) const {
    const Json* v = o.Find(key);
    if (v == nullptr) return std::optional<std::string>();
    if (!v->is_string()) return Error(o.Path(key), v, "must be a string");
    return std::optional<std::string>(v->get<std::string>());
  }
  StatusOr<std::string> String(const Obj& o, std::string_view key, std::string_view rule) const {
    const Json* v = o.Find(key);
    if (v == nullptr || !v->is_string()) return Error(o.Path(key), v, rule);
    return v->get<std::string>();
  }
  StatusOr<Obj> Sub(const Obj& o, std::string_view key) const {
    const Json* v = o.Find(key);
    if (v == nullptr || !v->is_object()) {
      return Error(o.Path(key), v, "must be an object (the nested config)");
    }
    return Obj{v, o.Path(key) + "."};
  }
  // An integer given as a number or as a [n, n] pair (transformers-native InternVL).
  StatusOr<int> SquareInt(const Obj& o, std::string_view key) const {
    const Json* v = o.Find(key);
    if (v != nullptr && v->is_array()) {
      if (v->size() != 2 || !(*v)[0].is_number_integer() || (*v)[0] != (*v)[1] ||
          (*v)[0].get<int64_t>() < 1 || (*v)[0].get<int64_t>() > kMaxWidth) {
        return Error(o.Path(key), v, "must be a positive integer or a square [n, n] pair");
      }
      return static_cast<int>((*v)[0].get<int64_t>());
    }
    return Int(o, key);
  }
  StatusOr<Activation> Act(const Obj& o,
                           std::string_view key,
                           Activation absent,
                           int module,
                           std::string_view absent_rule) {
    WEFT_ASSIGN_OR_RETURN(std::optional<std::string> name, OptString(o, key));
    if (!name) {
      From(module, "activation", std::string(absent_rule));
      return absent;
    }
    From(module, "activation", o.Path(key));
    if (*name == "silu" || *name == "swish") return Activation::kSilu;
    if (*name == "gelu" || *name == "gelu_new" || *name == "gelu_pytorch_tanh" ||
        *name == "gelu_fast" || *name == "gelu_python") {
      return Activation::kGelu;
    }
    if (*name == "quick_gelu") return Activation::kQuickGelu;
    if (*name == "relu") return Activation::kRelu;
    return Error(o.Path(key), o.Find(key), "must be silu, gelu (any variant), quick_gelu or relu");
  }
  // `heads` divides `hidden` (unless head_dim is given) and `kv` divides `heads`.
  Status CheckHeads(const Obj& o,
                    std::string_view hidden_key,
                    int hidden,
                    std::string_view heads_key,
                    int heads,
                    std::string_view kv_key,
                    int kv,
                    bool has_head_dim) const {
    if (!has_head_dim && hidden % heads != 0) {
      return Error(o.Path(hidden_key), o.Find(hidden_key),
                   fmt::format("must be divisible by {} ({})", o.Path(heads_key), heads));
    }
    if (heads % kv != 0) {
      return Error(o.Path(kv_key), o.Find(kv_key),
                   fmt::format("must divide {} ({})", o.Path(heads_key), heads));
    }
    return OkStatus();
  }

  void From(int module, std::string field, std::string from) {
    out_.provenance.push_back({module, std::move(field), std::move(from)});
  }
  void Note(std::string note) { out_.notes.push_back(std::move(note)); }

  // The LLM of `c` (model_type `family`); `top` holds tie_word_embeddings in nested layouts.
  StatusOr<ModuleSpec> ReadLlm(const Obj& c, std::string family, const Obj& top, int index);
  // Vision towers.
  StatusOr<ModuleSpec> ReadSiglip(const Obj& v,
                                  int index,
                                  std::optional<int> feature_layer,
                                  std::string_view feature_key);
  StatusOr<ModuleSpec> ReadQwenVit(const Obj& v,
                                   bool qwen2_5,
                                   int index,
                                   std::string_view preprocessor_text);
  StatusOr<ModuleSpec> ReadInternVit(const Obj& v, const Obj& top, bool native, int index);
  // Qwen2.5-VL: window_size / fullatt_block_indexes -> attention_window_px / full_attention_layers.
  Status ReadWindowAttention(const Obj& v, int index, ModuleSpec& m);
  // LLaVA-OneVision AnyRes: image_grid_pinpoints / vision_aspect_ratio -> resize_rule anyres.
  Status ReadAnyRes(const Obj& top, int index, ModuleSpec& vit);
  // InternVL (remote code) dynamic tiles: dynamic_image_size, min/max_dynamic_patch,
  // use_thumbnail -> resize_rule tiles.
  Status ReadDynamicTiles(const Obj& top, int index, ModuleSpec& vit);
  StatusOr<ModuleSpec> FinishInternVit(const Obj& v, bool native, int index, ModuleSpec m);
  StatusOr<ModuleSpec> ReadWhisper(const Obj& a, int index);
  // A projector from `from`'s output to `to_width` with `layers` linears (2: through `mid`).
  ModuleSpec Projector(std::string name,
                       const ModuleSpec& from,
                       int mid,
                       int to_width,
                       int layers,
                       int index,
                       std::string_view mid_from,
                       std::string_view out_from);
  // The text config of a VLM: `key` nested, or the top level for flat layouts.
  StatusOr<std::pair<Obj, std::string>> TextConfig(const Obj& top,
                                                   std::string_view key,
                                                   std::string_view flat_family);
  Status ApplyOptions();

  std::string source_;
  HfImportOptions options_;
  HfImport out_;
};

// The LLM families and their architecture rules.
bool IsLlmFamily(std::string_view t) {
  return t == "llama" || t == "mistral" || t == "qwen2" || t == "qwen3" || t == "internlm2";
}

StatusOr<ModuleSpec> Importer::ReadLlm(const Obj& c,
                                       std::string family,
                                       const Obj& top,
                                       int index) {
  ModuleSpec m;
  m.name = "llm";
  m.kind = ModuleKind::kLlm;
  m.modality = Modality::kText;
  m.causal_attention = true;
  m.gated_mlp = true;
  m.rms_norm = true;
  const std::string rule = fmt::format("model_type {}", family);
  From(index, "kind", rule + ": decoder-only LLM, SwiGLU MLP, RMSNorm");
  WEFT_ASSIGN_OR_RETURN(m.num_layers, Int(c, "num_hidden_layers", kMaxLayers));
  From(index, "num_layers", c.Path("num_hidden_layers"));
  WEFT_ASSIGN_OR_RETURN(m.hidden_size, Int(c, "hidden_size"));
  From(index, "hidden_size", c.Path("hidden_size"));
  WEFT_ASSIGN_OR_RETURN(m.ffn_hidden_size, Int(c, "intermediate_size"));
  From(index, "ffn_hidden_size", c.Path("intermediate_size"));
  WEFT_ASSIGN_OR_RETURN(m.num_attention_heads, Int(c, "num_attention_heads"));
  From(index, "num_attention_heads", c.Path("num_attention_heads"));
  WEFT_ASSIGN_OR_RETURN(std::optional<int> kv, OptInt(c, "num_key_value_heads"));
  m.num_kv_groups = kv.value_or(m.num_attention_heads);
  From(index, "num_kv_groups",
       kv ? c.Path("num_key_value_heads")
          : c.Path("num_attention_heads") + " (num_key_value_heads absent: MHA)");
  WEFT_ASSIGN_OR_RETURN(std::optional<int> head_dim, OptInt(c, "head_dim"));
  WEFT_RETURN_IF_ERROR(CheckHeads(c, "hidden_size", m.hidden_size, "num_attention_heads",
                                  m.num_attention_heads, "num_key_value_heads", m.num_kv_groups,
                                  head_dim.has_value()));
  if (head_dim && (m.hidden_size % m.num_attention_heads != 0 ||
                   *head_dim != m.hidden_size / m.num_attention_heads)) {
    m.head_dim = *head_dim;
    From(index, "head_dim", c.Path("head_dim"));
  }
  WEFT_ASSIGN_OR_RETURN(m.vocab_size, Int(c, "vocab_size", kMaxVocab));
  From(index, "vocab_size", c.Path("vocab_size"));
  WEFT_ASSIGN_OR_RETURN(std::optional<bool> tied, OptBool(c, "tie_word_embeddings"));
  if (tied) {
    From(index, "tied_embeddings", c.Path("tie_word_embeddings"));
  } else if (c.json != top.json) {
    WEFT_ASSIGN_OR_RETURN(tied, OptBool(top, "tie_word_embeddings"));
    if (tied) From(index, "tied_embeddings", top.Path("tie_word_embeddings"));
  }
  if (!tied) From(index, "tied_embeddings", "tie_word_embeddings absent: untied (" + rule + ")");
  m.tied_embeddings = tied.value_or(false);
  WEFT_ASSIGN_OR_RETURN(m.activation, Act(c, "hidden_act", Activation::kSilu, index,
                                          "hidden_act absent: silu (" + rule + ")"));
  if (family == "qwen2") {
    m.qkv_bias = true;
    From(index, "qkv_bias", rule + ": q/k/v projections have biases");
  } else {
    const std::string_view key = family == "internlm2" ? "bias" : "attention_bias";
    WEFT_ASSIGN_OR_RETURN(std::optional<bool> bias, OptBool(c, key));
    m.qkv_bias = bias.value_or(false);
    From(index, "qkv_bias", bias ? c.Path(key) : std::string(key) + " absent: no biases");
  }
  if (family == "qwen3") {
    m.qk_norm = true;
    From(index, "qk_norm", rule + ": RMSNorm on q and k per head");
  }
  WEFT_ASSIGN_OR_RETURN(std::optional<bool> mlp_bias, OptBool(c, "mlp_bias"));
  if (mlp_bias.value_or(false)) {
    Note(c.Path("mlp_bias") + " = true: MLP biases are not counted (a few parameters per layer)");
  }
  return m;
}

StatusOr<ModuleSpec> Importer::ReadSiglip(const Obj& v,
                                          int index,
                                          std::optional<int> feature_layer,
                                          std::string_view feature_key) {
  ModuleSpec m;
  m.name = "vision";
  m.kind = ModuleKind::kVit;
  m.modality = Modality::kImage;
  m.linear_bias = true;
  From(index, "kind", "SigLIP vision tower: LayerNorm, biases, learned positions");
  WEFT_ASSIGN_OR_RETURN(int layers, Int(v, "num_hidden_layers", kMaxLayers));
  m.num_layers = layers;
  From(index, "num_layers", v.Path("num_hidden_layers"));
  if (feature_layer && *feature_layer < -1) {
    // Layers after the selected one do not reach the LLM (LLaVA drops them).
    m.num_layers = layers + 1 + *feature_layer;
    if (m.num_layers < 1) {
      return Error(std::string(feature_key), nullptr,
                   fmt::format("must select one of the {} layers", layers));
    }
    From(index, "num_layers",
         fmt::format("{} + 1 + {} ({})", v.Path("num_hidden_layers"), feature_key, *feature_layer));
  }
  WEFT_ASSIGN_OR_RETURN(m.hidden_size, Int(v, "hidden_size"));
  From(index, "hidden_size", v.Path("hidden_size"));
  WEFT_ASSIGN_OR_RETURN(m.ffn_hidden_size, Int(v, "intermediate_size"));
  From(index, "ffn_hidden_size", v.Path("intermediate_size"));
  WEFT_ASSIGN_OR_RETURN(m.num_attention_heads, Int(v, "num_attention_heads"));
  m.num_kv_groups = m.num_attention_heads;
  From(index, "num_attention_heads", v.Path("num_attention_heads"));
  WEFT_RETURN_IF_ERROR(CheckHeads(v, "hidden_size", m.hidden_size, "num_attention_heads",
                                  m.num_attention_heads, "num_attention_heads", m.num_kv_groups,
                                  false));
  WEFT_ASSIGN_OR_RETURN(m.patch_size, Int(v, "patch_size"));
  From(index, "patch_size", v.Path("patch_size"));
  WEFT_ASSIGN_OR_RETURN(m.image_size_px, Int(v, "image_size"));
  From(index, "image_size_px", v.Path("image_size") + " (one fixed-size crop)");
  if (m.image_size_px < m.patch_size) {
    return Error(v.Path("image_size"), v.Find("image_size"),
                 fmt::format("must be at least {} ({})", v.Path("patch_size"), m.patch_size));
  }
  const int side = m.image_size_px / m.patch_size;
  m.learned_position_embeddings = side * side;
  From(index, "learned_position_embeddings",
       fmt::format("({} / {})^2", v.Path("image_size"), v.Path("patch_size")));
  WEFT_ASSIGN_OR_RETURN(m.activation, Act(v, "hidden_act", Activation::kGelu, index,
                                          "hidden_act absent: gelu (SiglipVisionConfig)"));
  WEFT_ASSIGN_OR_RETURN(std::optional<bool> head, OptBool(v, "vision_use_head"));
  if (head.value_or(false)) {
    Note(v.Path("vision_use_head") + " = true: the attention-pooling head is not counted");
  }
  return m;
}

StatusOr<ModuleSpec> Importer::ReadQwenVit(const Obj& v,
                                           bool qwen2_5,
                                           int index,
                                           std::string_view preprocessor_text) {
  ModuleSpec m;
  m.name = "vision";
  m.kind = ModuleKind::kVit;
  m.modality = Modality::kImage;
  m.linear_bias = true;
  m.resize_rule = ResizeRule::kNative;
  WEFT_ASSIGN_OR_RETURN(m.num_layers, Int(v, "depth", kMaxLayers));
  From(index, "num_layers", v.Path("depth"));
  WEFT_ASSIGN_OR_RETURN(m.num_attention_heads, Int(v, "num_heads"));
  m.num_kv_groups = m.num_attention_heads;
  From(index, "num_attention_heads", v.Path("num_heads"));
  std::string_view width_key;
  if (qwen2_5) {
    From(index, "kind", "Qwen2.5-VL ViT: SwiGLU MLP, RMSNorm, biases, native resolution");
    width_key = "hidden_size";
    WEFT_ASSIGN_OR_RETURN(m.hidden_size, Int(v, "hidden_size"));
    From(index, "hidden_size", v.Path("hidden_size"));
    WEFT_ASSIGN_OR_RETURN(m.ffn_hidden_size, Int(v, "intermediate_size"));
    From(index, "ffn_hidden_size", v.Path("intermediate_size"));
    m.gated_mlp = true;
    m.rms_norm = true;
    WEFT_ASSIGN_OR_RETURN(m.activation, Act(v, "hidden_act", Activation::kSilu, index,
                                            "hidden_act absent: silu (Qwen2.5-VL)"));
  } else {
    From(index, "kind", "Qwen2-VL ViT: LayerNorm, 2-matrix MLP, biases, native resolution");
    width_key = "embed_dim";
    WEFT_ASSIGN_OR_RETURN(m.hidden_size, Int(v, "embed_dim"));
    From(index, "hidden_size", v.Path("embed_dim"));
    WEFT_ASSIGN_OR_RETURN(double ratio, Number(v, "mlp_ratio", 0.0625, 64));
    const double ffn = m.hidden_size * ratio;
    if (ffn != std::floor(ffn)) {
      return Error(v.Path("mlp_ratio"), v.Find("mlp_ratio"),
                   fmt::format("must make {} x mlp_ratio an integer", v.Path("embed_dim")));
    }
    m.ffn_hidden_size = static_cast<int>(ffn);
    From(index, "ffn_hidden_size",
         fmt::format("{} x {}", v.Path("embed_dim"), v.Path("mlp_ratio")));
    WEFT_ASSIGN_OR_RETURN(m.activation, Act(v, "hidden_act", Activation::kQuickGelu, index,
                                            "hidden_act absent: quick_gelu (Qwen2-VL)"));
  }
  WEFT_RETURN_IF_ERROR(CheckHeads(v, width_key, m.hidden_size, "num_heads", m.num_attention_heads,
                                  "num_heads", m.num_kv_groups, false));
  WEFT_ASSIGN_OR_RETURN(m.patch_size, Int(v, "patch_size"));
  From(index, "patch_size", v.Path("patch_size"));
  WEFT_ASSIGN_OR_RETURN(m.spatial_merge, Int(v, "spatial_merge_size"));
  From(index, "spatial_merge", v.Path("spatial_merge_size"));
  WEFT_ASSIGN_OR_RETURN(m.temporal_patch, Int(v, "temporal_patch_size"));
  From(index, "temporal_patch", v.Path("temporal_patch_size"));
  const std::string_view channels_key = v.Find("in_chans") ? "in_chans" : "in_channels";
  WEFT_ASSIGN_OR_RETURN(std::optional<int> channels, OptInt(v, channels_key));
  m.in_channels = channels.value_or(3);
  if (channels) From(index, "in_channels", v.Path(channels_key));
  // The workload rule: native resolution, area capped at max_pixels.
  if (options_.max_pixels > 0) {
    m.max_pixels = options_.max_pixels;
    From(index, "max_pixels", "option max_pixels");
  } else {
    std::optional<int64_t> from_file;
    if (!preprocessor_text.empty()) {
      const std::string pre_source = fmt::format("{} (beside {})", kPreprocessorFileName, source_);
      WEFT_ASSIGN_OR_RETURN(Json pre, ParseJson(preprocessor_text, pre_source));
      Obj p{&pre, ""};
      std::string key = "max_pixels";
      const Json* value = p.Find("max_pixels");
      if (value == nullptr) {
        if (const Json* size = p.Find("size"); size != nullptr && size->is_object()) {
          auto it = size->find("longest_edge");
          if (it != size->end()) {
            value = &*it;
            key = "size.longest_edge";
          }
        }
      }
      if (value != nullptr) {
        if (!value->is_number_integer() || value->get<int64_t>() < 1 ||
            value->get<int64_t>() > (int64_t{1} << 28)) {
          return InvalidArgumentError(fmt::format("{}: {} = {}; must be an integer in [1, {}]",
                                                  pre_source, key, Shown(value), int64_t{1} << 28));
        }
        from_file = value->get<int64_t>();
        From(index, "max_pixels", fmt::format("{} {}", kPreprocessorFileName, key));
      }
    }
    if (from_file) {
      m.max_pixels = *from_file;
    } else {
      m.max_pixels = kQwen2VlDefaultMaxPixels;
      From(index, "max_pixels",
           "no preprocessor_config.json: Qwen2VLImageProcessor default 16384 x 28^2 px");
    }
  }
  From(index, "resize_rule", "Qwen2-VL preprocessing: sides rounded to patch x merge");
  if (qwen2_5) WEFT_RETURN_IF_ERROR(ReadWindowAttention(v, index, m));
  return m;
}

Status Importer::ReadWindowAttention(const Obj& v, int index, ModuleSpec& m) {
  const Json* full = v.Find("fullatt_block_indexes");
  const Json* window = v.Find("window_size");
  if (full == nullptr && window == nullptr) return OkStatus();
  WEFT_ASSIGN_OR_RETURN(m.attention_window_px, Int(v, "window_size"));
  const int unit = m.patch_size * m.spatial_merge;
  if (m.attention_window_px % unit != 0) {
    return Error(v.Path("window_size"), window,
                 fmt::format("must be a multiple of {} x {} ({} px)", v.Path("patch_size"),
                             v.Path("spatial_merge_size"), unit));
  }
  From(index, "attention_window_px",
       fmt::format("{} (windows of ({} / {})^2 = {} patches)", v.Path("window_size"),
                   m.attention_window_px, m.patch_size, m.WindowPatches()));
  if (full == nullptr || !full->is_array() || full->size() > static_cast<size_t>(m.num_layers)) {
    return Error(v.Path("fullatt_block_indexes"), full,
                 fmt::format("must be a list of at most {} layer indexes", m.num_layers));
  }
  for (size_t i = 0; i < full->size(); ++i) {
    const Json& e = (*full)[i];
    if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= m.num_layers ||
        (i > 0 && e.get<int64_t>() <= (*full)[i - 1].get<int64_t>())) {
      return Error(v.Path("fullatt_block_indexes"), full,
                   fmt::format("must be increasing layer indexes in [0, {})", m.num_layers));
    }
    m.full_attention_layers.push_back(static_cast<int>(e.get<int64_t>()));
  }
  From(index, "full_attention_layers",
       v.Path("fullatt_block_indexes") + " (the other layers attend within windows)");
  return OkStatus();
}

StatusOr<ModuleSpec> Importer::ReadInternVit(const Obj& v, const Obj& top, bool native, int index) {
  ModuleSpec m;
  m.name = "vision";
  m.kind = ModuleKind::kVit;
  m.modality = Modality::kImage;
  m.linear_bias = true;
  From(index, "kind", "InternViT: biases on projections and MLP, learned positions + cls");
  WEFT_ASSIGN_OR_RETURN(m.num_layers, Int(v, "num_hidden_layers", kMaxLayers));
  From(index, "num_layers", v.Path("num_hidden_layers"));
  const std::string_view select_key = native ? "vision_feature_layer" : "select_layer";
  if (const Json* select = top.Find(select_key)) {
    if (!select->is_number_integer() || select->get<int64_t>() >= 0 ||
        select->get<int64_t>() < -m.num_layers) {
      return Error(top.Path(select_key), select,
                   fmt::format("must be a negative layer index in [-{}, -1]", m.num_layers));
    }
    const int layer = static_cast<int>(select->get<int64_t>());
    if (layer < -1) {
      m.num_layers += 1 + layer;
      From(index, "num_layers",
           fmt::format("{} + 1 + {} ({})", v.Path("num_hidden_layers"), top.Path(select_key),
                       layer));
    }
  }
  WEFT_ASSIGN_OR_RETURN(m.hidden_size, Int(v, "hidden_size"));
  From(index, "hidden_size", v.Path("hidden_size"));
  WEFT_ASSIGN_OR_RETURN(m.ffn_hidden_size, Int(v, "intermediate_size"));
  From(index, "ffn_hidden_size", v.Path("intermediate_size"));
  WEFT_ASSIGN_OR_RETURN(m.num_attention_heads, Int(v, "num_attention_heads"));
  m.num_kv_groups = m.num_attention_heads;
  From(index, "num_attention_heads", v.Path("num_attention_heads"));
  WEFT_RETURN_IF_ERROR(CheckHeads(v, "hidden_size", m.hidden_size, "num_attention_heads",
                                  m.num_attention_heads, "num_attention_heads", m.num_kv_groups,
                                  false));
  WEFT_ASSIGN_OR_RETURN(m.patch_size, SquareInt(v, "patch_size"));
  From(index, "patch_size", v.Path("patch_size"));
  // The tile size: force_image_size (remote code) overrides the tower's image_size.
  if (!native && top.Find("force_image_size") != nullptr) {
    WEFT_ASSIGN_OR_RETURN(m.image_size_px, Int(top, "force_image_size"));
    From(index, "image_size_px", top.Path("force_image_size") + " (one tile)");
  } else {
    WEFT_ASSIGN_OR_RETURN(m.image_size_px, SquareInt(v, "image_size"));
    From(index, "image_size_px", v.Path("image_size") + " (one tile)");
  }
  if (m.image_size_px < m.patch_size) {
    return Error(v.Path("image_size"), v.Find("image_size"),
                 fmt::format("must be at least {} ({})", v.Path("patch_size"), m.patch_size));
  }
  const int side = m.image_size_px / m.patch_size;
  m.learned_position_embeddings = side * side + 1;
  From(index, "learned_position_embeddings",
       fmt::format("({} / {})^2 + 1 (cls)", v.Path("image_size"), v.Path("patch_size")));
  // Pixel shuffle: downsample_ratio 0.5 merges 2x2 patches into one token. Only a tower alone
  // (intern_vit_6b at the top level) may lack it.
  if (top.Find("downsample_ratio") == nullptr && top.json == v.json) {
    From(index, "spatial_merge", "downsample_ratio absent: no pixel shuffle (the tower alone)");
    return FinishInternVit(v, native, index, std::move(m));
  }
  WEFT_ASSIGN_OR_RETURN(double ratio, Number(top, "downsample_ratio", 1e-3, 1));
  const double merge = 1 / ratio;
  if (std::fabs(merge - std::round(merge)) > 1e-9) {
    return Error(top.Path("downsample_ratio"), top.Find("downsample_ratio"),
                 "must be 1/n for an integer n (pixel shuffle merges n x n patches)");
  }
  m.spatial_merge = static_cast<int>(std::lround(merge));
  From(index, "spatial_merge", fmt::format("1 / {}", top.Path("downsample_ratio")));
  if (side % m.spatial_merge != 0) {
    return Error(top.Path("downsample_ratio"), top.Find("downsample_ratio"),
                 fmt::format("must merge a whole number of patches per side ({} per side)", side));
  }
  return FinishInternVit(v, native, index, std::move(m));
}

StatusOr<ModuleSpec> Importer::FinishInternVit(const Obj& v, bool native, int index, ModuleSpec m) {
  WEFT_ASSIGN_OR_RETURN(std::optional<std::string> norm, OptString(v, "norm_type"));
  m.rms_norm = norm.value_or("layer_norm") == "rms_norm";
  if (norm && *norm != "rms_norm" && *norm != "layer_norm") {
    return Error(v.Path("norm_type"), v.Find("norm_type"), "must be rms_norm or layer_norm");
  }
  From(index, "rms_norm", norm ? v.Path("norm_type") : "norm_type absent: LayerNorm");
  const std::string_view qk_key = native ? "use_qk_norm" : "qk_normalization";
  WEFT_ASSIGN_OR_RETURN(std::optional<bool> qk, OptBool(v, qk_key));
  m.qk_norm = qk.value_or(false);
  From(index, "qk_norm", qk ? v.Path(qk_key) : std::string(qk_key) + " absent: none");
  WEFT_ASSIGN_OR_RETURN(m.activation, Act(v, "hidden_act", Activation::kGelu, index,
                                          "hidden_act absent: gelu (InternViT)"));
  return m;
}

Status Importer::ReadAnyRes(const Obj& top, int index, ModuleSpec& vit) {
  const Json* pinpoints = top.Find("image_grid_pinpoints");
  if (pinpoints == nullptr) {
    Note(fmt::format("image_grid_pinpoints absent: one {} px crop ({} tokens) per image",
                     vit.image_size_px, vit.FixedImageTokens()));
    return OkStatus();
  }
  const std::string rule = fmt::format(
      "must be a list of at most {} [height, width] pairs, each a positive multiple "
      "of vision_config.image_size ({}) making at most {} tiles",
      4096, vit.image_size_px, kMaxTilesPerImage);
  if (!pinpoints->is_array() || pinpoints->empty() || pinpoints->size() > 4096) {
    return Error("image_grid_pinpoints", pinpoints, rule);
  }
  for (const Json& pair : *pinpoints) {
    if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number_integer() ||
        !pair[1].is_number_integer()) {
      return Error("image_grid_pinpoints", pinpoints, rule);
    }
    const int64_t h = pair[0].get<int64_t>(), w = pair[1].get<int64_t>();
    if (h < 1 || w < 1 || h > kMaxWidth || w > kMaxWidth || h % vit.image_size_px != 0 ||
        w % vit.image_size_px != 0 ||
        (h / vit.image_size_px) * (w / vit.image_size_px) > kMaxTilesPerImage) {
      return Error("image_grid_pinpoints", pinpoints, rule);
    }
    vit.grid_pinpoints.push_back({static_cast<int>(h), static_cast<int>(w)});
  }
  vit.resize_rule = ResizeRule::kAnyRes;
  From(index, "resize_rule",
       "LLaVA-OneVision AnyRes: best-fit pinpoint's tiles + the base image "
       "(select_best_resolution)");
  From(index, "grid_pinpoints", "image_grid_pinpoints ([height, width] px)");
  WEFT_ASSIGN_OR_RETURN(std::optional<std::string> aspect, OptString(top, "vision_aspect_ratio"));
  if (!aspect) {
    vit.anyres_max_tiles = 9;
    From(index, "anyres_max_tiles",
         "vision_aspect_ratio absent: anyres_max_9 (LlavaOnevisionConfig)");
    return OkStatus();
  }
  constexpr std::string_view kPrefix = "anyres_max_";
  if (*aspect == "anyres") {
    vit.anyres_max_tiles = 0;
    From(index, "anyres_max_tiles", "vision_aspect_ratio anyres: no feature cap");
    return OkStatus();
  }
  const std::string n = aspect->size() > kPrefix.size() && aspect->rfind(kPrefix, 0) == 0
                            ? aspect->substr(kPrefix.size())
                            : "";
  if (n.empty() || n.size() > 4 || n.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(n) < 1 || std::stoi(n) > kMaxTilesPerImage) {
    return Error(
        "vision_aspect_ratio", top.Find("vision_aspect_ratio"),
        fmt::format("must be anyres or anyres_max_N with N in [1, {}]", kMaxTilesPerImage));
  }
  vit.anyres_max_tiles = std::stoi(n);
  From(index, "anyres_max_tiles",
       "vision_aspect_ratio (features past N tiles' worth are downsampled, bilinear)");
  return OkStatus();
}

Status Importer::ReadDynamicTiles(const Obj& top, int index, ModuleSpec& vit) {
  WEFT_ASSIGN_OR_RETURN(std::optional<bool> dynamic, OptBool(top, "dynamic_image_size"));
  if (!dynamic.value_or(false)) {
    Note(fmt::format("dynamic_image_size = {}: one {} px tile ({} tokens) per image",
                     dynamic ? "false" : "absent (false)", vit.image_size_px,
                     vit.FixedImageTokens()));
    return OkStatus();
  }
  vit.resize_rule = ResizeRule::kTiles;
  From(index, "resize_rule",
       "dynamic_image_size: InternVL dynamic tiles (grid closest to the aspect ratio)");
  WEFT_ASSIGN_OR_RETURN(std::optional<int> min_tiles,
                        OptInt(top, "min_dynamic_patch", kMaxTilesPerImage));
  WEFT_ASSIGN_OR_RETURN(std::optional<int> max_tiles,
                        OptInt(top, "max_dynamic_patch", kMaxTilesPerImage));
  vit.min_tiles = min_tiles.value_or(1);
  vit.max_tiles = max_tiles.value_or(6);
  From(index, "min_tiles",
       min_tiles ? top.Path("min_dynamic_patch")
                 : "min_dynamic_patch absent: 1 (InternVLChatConfig)");
  From(index, "max_tiles",
       max_tiles ? top.Path("max_dynamic_patch")
                 : "max_dynamic_patch absent: 6 (InternVLChatConfig)");
  if (vit.max_tiles < vit.min_tiles) {
    return Error(top.Path("max_dynamic_patch"), top.Find("max_dynamic_patch"),
                 fmt::format("must be >= min_dynamic_patch ({})", vit.min_tiles));
  }
  WEFT_ASSIGN_OR_RETURN(std::optional<bool> thumbnail, OptBool(top, "use_thumbnail"));
  vit.thumbnail = thumbnail.value_or(false);
  From(index, "thumbnail",
       thumbnail ? top.Path("use_thumbnail") + " (+1 tile when the grid has > 1)"
                 : "use_thumbnail absent: none (InternVLChatConfig)");
  return OkStatus();
}

StatusOr<ModuleSpec> Importer::ReadWhisper(const Obj& a, int index) {
  ModuleSpec m;
  m.name = "audio";
  m.kind = ModuleKind::kAudioEncoder;
  m.modality = Modality::kAudio;
  m.linear_bias = true;
  From(index, "kind", "Whisper encoder: 2 convolutions (stride 2), LayerNorm, biases");
  WEFT_ASSIGN_OR_RETURN(m.num_layers, Int(a, "encoder_layers", kMaxLayers));
  From(index, "num_layers", a.Path("encoder_layers"));
  WEFT_ASSIGN_OR_RETURN(m.hidden_size, Int(a, "d_model"));
  From(index, "hidden_size", a.Path("d_model"));
  WEFT_ASSIGN_OR_RETURN(m.ffn_hidden_size, Int(a, "encoder_ffn_dim"));
  From(index, "ffn_hidden_size", a.Path("encoder_ffn_dim"));
  WEFT_ASSIGN_OR_RETURN(m.num_attention_heads, Int(a, "encoder_attention_heads"));
  m.num_kv_groups = m.num_attention_heads;
  From(index, "num_attention_heads", a.Path("encoder_attention_heads"));
  WEFT_RETURN_IF_ERROR(CheckHeads(a, "d_model", m.hidden_size, "encoder_attention_heads",
                                  m.num_attention_heads, "encoder_attention_heads", m.num_kv_groups,
                                  false));
  WEFT_ASSIGN_OR_RETURN(m.mel_bins, Int(a, "num_mel_bins"));
  From(index, "mel_bins", a.Path("num_mel_bins"));
  WEFT_ASSIGN_OR_RETURN(m.max_source_positions, Int(a, "max_source_positions"));
  From(index, "max_source_positions", a.Path("max_source_positions"));
  WEFT_ASSIGN_OR_RETURN(m.activation, Act(a, "activation_function", Activation::kGelu, index,
                                          "activation_function absent: gelu (Whisper)"));
  return m;
}

ModuleSpec Importer::Projector(std::string name,
                               const ModuleSpec& from,
                               int mid,
                               int to_width,
                               int layers,
                               int index,
                               std::string_view mid_from,
                               std::string_view out_from) {
  ModuleSpec p;
  p.name = std::move(name);
  p.kind = ModuleKind::kMlpProjector;
  p.num_layers = layers;
  p.activation = Activation::kGelu;
  p.linear_bias = true;
  p.input_size = from.hidden_size *
                 (from.kind == ModuleKind::kVit ? from.spatial_merge * from.spatial_merge : 1);
  p.ffn_hidden_size = layers == 2 ? mid : 0;
  p.output_size = to_width;
  p.hidden_size = to_width;
  From(index, "kind",
       fmt::format("{}-layer MLP with biases{}", layers, layers == 2 ? ", GELU between" : ""));
  From(index, "input_size",
       from.kind == ModuleKind::kVit && from.spatial_merge > 1
           ? fmt::format("{} width x spatial_merge^2 ({} x {})", from.name, from.hidden_size,
                         from.spatial_merge * from.spatial_merge)
           : fmt::format("{} width", from.name));
  if (layers == 2) From(index, "ffn_hidden_size", std::string(mid_from));
  From(index, "output_size", std::string(out_from));
  From(index, "hidden_size", std::string(out_from));
  return p;
}

StatusOr<std::pair<Obj, std::string>> Importer::TextConfig(const Obj& top,
                                                           std::string_view key,
                                                           std::string_view flat_family) {
  if (top.Find(key) == nullptr && !flat_family.empty()) {
    return std::pair<Obj, std::string>{top, std::string(flat_family)};
  }
  WEFT_ASSIGN_OR_RETURN(Obj text, Sub(top, key));
  WEFT_ASSIGN_OR_RETURN(std::optional<std::string> type, OptString(text, "model_type"));
  std::string family = type.value_or("");
  if (family == "qwen2_vl_text" || family == "qwen2_5_vl_text") family = "qwen2";
  if (family.empty() && !flat_family.empty()) family = std::string(flat_family);
  if (!IsLlmFamily(family)) {
    return Error(text.Path("model_type"), text.Find("model_type"),
                 "must be one of llama, mistral, qwen2, qwen3, internlm2");
  }
  return std::pair<Obj, std::string>{text, family};
}

Status Importer::ApplyOptions() {
  ModelSpec& model = out_.preset.model;
  for (const std::string& name : options_.freeze) {
    std::optional<int> i = model.FindModule(name);
    if (!i) {
      std::string names;
      for (const ModuleSpec& m : model.modules) names += (names.empty() ? "" : ", ") + m.name;
      return InvalidArgumentError(fmt::format("{}: freeze = {}; must name a module ({})", source_,
                                              QuoteForMessage(name, 40), names));
    }
    model.modules[*i].frozen = true;
    From(*i, "frozen", "option freeze");
  }
  return OkStatus();
}

StatusOr<HfImport> Importer::Run(const Json& root_json, std::string_view preprocessor_text) {
  const Obj top{&root_json, ""};
  if (!root_json.is_object()) return Error("(top level)", &root_json, "must be a JSON object");
  WEFT_ASSIGN_OR_RETURN(
      std::string type,
      String(top, "model_type", "must name the architecture (a Hugging Face config.json)"));
  out_.model_type = type;
  ModelSpec& model = out_.preset.model;
  auto add = [&](ModuleSpec m) { model.modules.push_back(std::move(m)); };
  auto chain = [&](std::initializer_list<std::string_view> names) {
    for (size_t i = 1; i < names.size(); ++i) {
      model.edges.push_back({std::string(names.begin()[i - 1]), std::string(names.begin()[i])});
    }
  };

  if (IsLlmFamily(type)) {
    WEFT_ASSIGN_OR_RETURN(ModuleSpec llm, ReadLlm(top, type, top, 0));
    add(std::move(llm));
  } else if (type == "qwen2_vl" || type == "qwen2_5_vl") {
    const bool qwen2_5 = type == "qwen2_5_vl";
    WEFT_ASSIGN_OR_RETURN(Obj vision, Sub(top, "vision_config"));
    WEFT_ASSIGN_OR_RETURN(ModuleSpec vit, ReadQwenVit(vision, qwen2_5, 0, preprocessor_text));
    WEFT_ASSIGN_OR_RETURN(auto text, TextConfig(top, "text_config", "qwen2"));
    WEFT_ASSIGN_OR_RETURN(ModuleSpec llm, ReadLlm(text.first, text.second, top, 2));
    const std::string_view out_key = qwen2_5 ? "out_hidden_size" : "hidden_size";
    WEFT_ASSIGN_OR_RETURN(int merger_out, Int(vision, out_key));
    if (merger_out != llm.hidden_size) {
      return Error(vision.Path(out_key), vision.Find(out_key),
                   fmt::format("must equal the LLM width {} ({})", text.first.Path("hidden_size"),
                               llm.hidden_size));
    }
    const int merged = vit.hidden_size * vit.spatial_merge * vit.spatial_merge;
    ModuleSpec merger =
        Projector("projector", vit, merged, merger_out, 2, 1,
                  fmt::format("{} width x spatial_merge^2 (Qwen2-VL PatchMerger)", vit.name),
                  vision.Path(out_key));
    add(std::move(vit));
    add(std::move(merger));
    add(std::move(llm));
    chain({"vision", "projector", "llm"});
  } else if (type == "llava_onevision") {
    WEFT_ASSIGN_OR_RETURN(Obj vision, Sub(top, "vision_config"));
    WEFT_ASSIGN_OR_RETURN(std::optional<std::string> vtype, OptString(vision, "model_type"));
    if (vtype.value_or("") != "siglip_vision_model") {
      return Error(vision.Path("model_type"), vision.Find("model_type"),
                   "must be siglip_vision_model (LLaVA-OneVision's tower)");
    }
    std::optional<int> feature_layer;
    if (const Json* f = top.Find("vision_feature_layer")) {
      if (!f->is_number_integer() || f->get<int64_t>() >= 0 || f->get<int64_t>() < -kMaxLayers) {
        return Error("vision_feature_layer", f,
                     "must be a negative layer index (a list of layers is not supported)");
      }
      feature_layer = static_cast<int>(f->get<int64_t>());
    }
    WEFT_ASSIGN_OR_RETURN(ModuleSpec vit,
                          ReadSiglip(vision, 0, feature_layer, "vision_feature_layer"));
    WEFT_ASSIGN_OR_RETURN(auto text, TextConfig(top, "text_config", ""));
    WEFT_ASSIGN_OR_RETURN(ModuleSpec llm, ReadLlm(text.first, text.second, top, 2));
    WEFT_ASSIGN_OR_RETURN(std::optional<std::string> act, OptString(top, "projector_hidden_act"));
    if (act && *act != "gelu") {
      return Error("projector_hidden_act", top.Find("projector_hidden_act"), "must be gelu");
    }
    const std::string llm_width = text.first.Path("hidden_size");
    ModuleSpec proj =
        Projector("projector", vit, llm.hidden_size, llm.hidden_size, 2, 1, llm_width, llm_width);
    WEFT_RETURN_IF_ERROR(ReadAnyRes(top, 0, vit));
    add(std::move(vit));
    add(std::move(proj));
    add(std::move(llm));
    chain({"vision", "projector", "llm"});
  } else if (type == "internvl_chat" || type == "internvl") {
    const bool native = type == "internvl";
    WEFT_ASSIGN_OR_RETURN(Obj vision, Sub(top, "vision_config"));
    WEFT_ASSIGN_OR_RETURN(ModuleSpec vit, ReadInternVit(vision, top, native, 0));
    WEFT_ASSIGN_OR_RETURN(auto text, TextConfig(top, native ? "text_config" : "llm_config", ""));
    WEFT_ASSIGN_OR_RETURN(ModuleSpec llm, ReadLlm(text.first, text.second, top, 2));
    if (native) {
      WEFT_ASSIGN_OR_RETURN(std::optional<std::string> act, OptString(top, "projector_hidden_act"));
      if (act && *act != "gelu") {
        return Error("projector_hidden_act", top.Find("projector_hidden_act"), "must be gelu");
      }
    }
    const std::string llm_width = text.first.Path("hidden_size");
    ModuleSpec proj =
        Projector("projector", vit, llm.hidden_size, llm.hidden_size, 2, 1, llm_width, llm_width);
    if (!native) {
      WEFT_RETURN_IF_ERROR(ReadDynamicTiles(top, 0, vit));
    } else {
      Note(
          fmt::format("dynamic tiling (the processor's max_patches) is not modelled; weft counts "
                      "one {} px tile ({} tokens) per image",
                      vit.image_size_px, vit.FixedImageTokens()));
    }
    Note("the projector's input LayerNorm (2 x its input width) is not counted");
    add(std::move(vit));
    add(std::move(proj));
    add(std::move(llm));
    chain({"vision", "projector", "llm"});
  } else if (type == "qwen2_audio") {
    WEFT_ASSIGN_OR_RETURN(Obj audio, Sub(top, "audio_config"));
    WEFT_ASSIGN_OR_RETURN(ModuleSpec enc, ReadWhisper(audio, 0));
    WEFT_ASSIGN_OR_RETURN(auto text, TextConfig(top, "text_config", ""));
    WEFT_ASSIGN_OR_RETURN(ModuleSpec llm, ReadLlm(text.first, text.second, top, 2));
    ModuleSpec proj = Projector("audio_projector", enc, 0, llm.hidden_size, 1, 1, "",
                                text.first.Path("hidden_size"));
    enc.output_pool = 2;
    From(0, "output_pool",
         "model_type qwen2_audio: AvgPool1d(2, stride 2) after the encoder layers (100 mel "
         "frames/s -> 50 positions/s -> 25 LLM tokens/s)");
    add(std::move(enc));
    add(std::move(proj));
    add(std::move(llm));
    chain({"audio", "audio_projector", "llm"});
  } else if (type == "siglip" || type == "siglip_vision_model") {
    Obj vision = top;
    if (type == "siglip") {
      WEFT_ASSIGN_OR_RETURN(vision, Sub(top, "vision_config"));
      Note("the SigLIP text tower is not imported (the vision tower alone)");
    }
    WEFT_ASSIGN_OR_RETURN(ModuleSpec vit, ReadSiglip(vision, 0, std::nullopt, ""));
    add(std::move(vit));
  } else if (type == "intern_vit_6b") {
    // A tower alone: InternVL's pixel shuffle (downsample_ratio) lives in the chat model's
    // config, so without one the tower hands on every patch.
    WEFT_ASSIGN_OR_RETURN(ModuleSpec vit, ReadInternVit(top, top, false, 0));
    add(std::move(vit));
  } else {
    return Error("model_type", top.Find("model_type"),
                 "must be one of llama, mistral, qwen2, qwen3, internlm2, qwen2_vl, qwen2_5_vl, "
                 "llava_onevision, internvl_chat, internvl, qwen2_audio, siglip, "
                 "siglip_vision_model, intern_vit_6b");
  }

  model.name = options_.name;
  if (model.name.empty()) {
    const std::filesystem::path p(source_);
    model.name = p.filename() == kConfigFileName && p.has_parent_path()
                     ? p.parent_path().filename().string()
                     : p.stem().string();
    if (model.name.empty()) model.name = type;
  }
  model.description = fmt::format("Imported from {} (model_type {})", source_, type);
  WEFT_RETURN_IF_ERROR(ApplyOptions());
  Status valid = model.Validate();
  if (!valid.ok()) return valid.WithPrefix(source_);
  return std::move(out_);
}

StatusOr<std::string> ReadSmallFile(const std::string& path, std::string_view what) {
  WEFT_RETURN_IF_ERROR(CheckInputFile(path, kMaxSpecFileBytes, what));
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(fmt::format("cannot open {} '{}'", what, path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string ConfigFile(std::string_view path) {
  std::error_code ec;
  const std::filesystem::path p{std::string(path)};
  if (std::filesystem::is_directory(p, ec)) return (p / kConfigFileName).string();
  return p.string();
}

}  // namespace

bool IsHfConfigPath(std::string_view path) {
  std::error_code ec;
  const std::filesystem::path p{std::string(path)};
  if (std::filesystem::is_directory(p, ec)) {
    return std::filesystem::is_regular_file(p / kConfigFileName, ec);
  }
  if (p.extension() != ".json" || !std::filesystem::is_regular_file(p, ec)) return false;
  StatusOr<std::string> text = ReadSmallFile(p.string(), "model file");
  if (!text.ok() || JsonDepth(*text, kMaxJsonDepth) > kMaxJsonDepth) return false;
  const Json doc = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
  return doc.is_object() && doc.contains("model_type") && !doc.contains("modules");
}

StatusOr<HfImport> ParseHfConfig(std::string_view json_text,
                                 std::string_view source,
                                 const HfImportOptions& options,
                                 std::string_view preprocessor_text) {
  WEFT_ASSIGN_OR_RETURN(Json root, ParseJson(json_text, source));
  Importer importer{std::string(source), options};
  StatusOr<HfImport> result = importer.Run(root, preprocessor_text);
  if (!result.ok()) return OneLineStatus(result.status());
  return result;
}

StatusOr<HfImport> LoadHfConfig(std::string_view path, const HfImportOptions& options) {
  const std::string file = ConfigFile(path);
  WEFT_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(file, "Hugging Face config"));
  std::string preprocessor;
  const std::filesystem::path pre =
      std::filesystem::path(file).parent_path() / kPreprocessorFileName;
  std::error_code ec;
  if (std::filesystem::is_regular_file(pre, ec)) {
    WEFT_ASSIGN_OR_RETURN(preprocessor, ReadSmallFile(pre.string(), "preprocessor config"));
  }
  return ParseHfConfig(text, file, options, preprocessor);
}

std::string HfImportToYaml(const HfImport& import) {
  std::map<std::pair<int, std::string>, std::string> from;
  for (const HfProvenance& p : import.provenance) from[{p.module, p.field}] = p.from;
  std::string out =
      fmt::format("# {}\n# by `weft import hf`; every derived value names its source.\n",
                  import.preset.model.description);
  for (const std::string& note : import.notes) out += "# note: " + note + "\n";
  const std::string yaml = ModelToYaml(import.preset);
  std::istringstream lines(yaml);
  std::string line;
  bool in_modules = false;
  int module = -1;
  while (std::getline(lines, line)) {
    if (!line.empty() && line[0] != ' ' && line[0] != '-') in_modules = line == "modules:";
    std::string key;
    if (in_modules) {
      size_t start = line.find_first_not_of(' ');
      if (start != std::string::npos && line.compare(start, 2, "- ") == 0) {
        ++module;
        start += 2;
      }
      const size_t colon = line.find(": ", start == std::string::npos ? 0 : start);
      if (start != std::string::npos && colon != std::string::npos) {
        key = line.substr(start, colon - start);
      }
    }
    auto it = from.find({module, key});
    if (in_modules && it != from.end()) {
      out += fmt::format("{}  # {}\n", line, it->second);
    } else if (in_modules && !key.empty() && key != "name") {
      // Fixed by the family's architecture (the `kind` line says which).
      out += fmt::format("{}  # {}\n", line,
                         key == "num_kv_groups" ? "= num_attention_heads (MHA)"
                                                : "the family's architecture (see kind)");
    } else {
      out += line + "\n";
    }
  }
  return out;
}

}  // namespace weft::spec
