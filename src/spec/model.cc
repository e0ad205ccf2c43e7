// ModelSpec / ModuleSpec: names, derived parameter counts, DAG queries and validation.
#include "weft/spec/model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <queue>
#include <set>

namespace weft::spec {
namespace {

struct KindName {
  ModuleKind kind;
  std::string_view name;
};
constexpr KindName kKindNames[] = {
    {ModuleKind::kVit, "vit"},
    {ModuleKind::kLlm, "llm"},
    {ModuleKind::kDit, "dit"},
    {ModuleKind::kAudioEncoder, "audio_encoder"},
    {ModuleKind::kMlpProjector, "mlp_projector"},
};

struct ActivationEntry {
  Activation activation;
  std::string_view name;
};
constexpr ActivationEntry kActivationNames[] = {
    {Activation::kGelu, "gelu"},
    {Activation::kSilu, "silu"},
    {Activation::kRelu, "relu"},
    {Activation::kQuickGelu, "quick_gelu"},
};

struct ModalityEntry {
  Modality modality;
  std::string_view name;
};
constexpr ModalityEntry kModalityNames[] = {
    {Modality::kText, "text"},
    {Modality::kImage, "image"},
    {Modality::kVideo, "video"},
    {Modality::kAudio, "audio"},
};

template <typename Table>
std::string JoinNames(const Table& table) {
  std::string out;
  for (const auto& entry : table) {
    if (!out.empty()) out += ", ";
    out += entry.name;
  }
  return out;
}

Status FieldError(std::string_view field, const auto& value, std::string_view rule) {
  return InvalidArgumentError(fmt::format("{} = {}; {}", field, value, rule));
}

Status RequirePositive(std::string_view field, int64_t value) {
  if (value > 0) return OkStatus();
  return FieldError(field, value, "must be > 0");
}

// Parameters of one (self- or cross-) attention block: q and o are h x (H*d), k and v are
// c x (G*d), where c is the width of the keys/values' source.
int64_t AttentionParameters(const ModuleSpec& m, int64_t kv_source_width, int64_t kv_heads) {
  const int64_t h = m.hidden_size;
  const int64_t d = m.HeadDim();
  const int64_t heads = m.num_attention_heads;
  int64_t params = h * heads * d                         // q
                   + 2 * kv_source_width * kv_heads * d  // k, v
                   + heads * d * h;                      // o
  if (m.linear_bias) {
    params += heads * d + 2 * kv_heads * d + h;
  } else if (m.qkv_bias) {
    params += heads * d + 2 * kv_heads * d;
  }
  if (m.qk_norm) params += (m.rms_norm ? 1 : 2) * 2 * d;
  return params;
}

int64_t NormParameters(const ModuleSpec& m) {
  return (m.rms_norm ? 1 : 2) * static_cast<int64_t>(m.hidden_size);
}

}  // namespace

std::string_view ModuleKindName(ModuleKind kind) {
  for (const auto& entry : kKindNames) {
    if (entry.kind == kind) return entry.name;
  }
  return "unknown";
}

StatusOr<ModuleKind> ParseModuleKind(std::string_view name) {
  for (const auto& entry : kKindNames) {
    if (entry.name == name) return entry.kind;
  }
  return InvalidArgumentError(
      fmt::format("kind = {}; must be one of {}", name, JoinNames(kKindNames)));
}

std::string_view ActivationName(Activation a) {
  for (const auto& entry : kActivationNames) {
    if (entry.activation == a) return entry.name;
  }
  return "unknown";
}

StatusOr<Activation> ParseActivation(std::string_view name) {
  for (const auto& entry : kActivationNames) {
    if (entry.name == name) return entry.activation;
  }
  return InvalidArgumentError(
      fmt::format("activation = {}; must be one of {}", name, JoinNames(kActivationNames)));
}

std::string_view ResizeRuleName(ResizeRule rule) {
  switch (rule) {
    case ResizeRule::kFixed:
      return "fixed";
    case ResizeRule::kNative:
      return "native";
    case ResizeRule::kAnyRes:
      return "anyres";
    case ResizeRule::kTiles:
      return "tiles";
  }
  return "unknown";
}

StatusOr<ResizeRule> ParseResizeRule(std::string_view name) {
  for (ResizeRule rule :
       {ResizeRule::kFixed, ResizeRule::kNative, ResizeRule::kAnyRes, ResizeRule::kTiles}) {
    if (ResizeRuleName(rule) == name) return rule;
  }
  return InvalidArgumentError(
      fmt::format("resize_rule = {}; must be one of fixed, native, anyres, tiles", name));
}

std::string_view ModalityName(Modality m) {
  for (const auto& entry : kModalityNames) {
    if (entry.modality == m) return entry.name;
  }
  return "unknown";
}

StatusOr<Modality> ParseModality(std::string_view name) {
  for (const auto& entry : kModalityNames) {
    if (entry.name == name) return entry.modality;
  }
  return InvalidArgumentError(
      fmt::format("modality = {}; must be one of {}", name, JoinNames(kModalityNames)));
}

// ---------------------------------------------------------------------------------------------
// ModuleSpec

int64_t ModuleSpec::ParametersPerLayer() const {
  if (kind == ModuleKind::kMlpProjector) {
    return num_layers > 0 ? ParameterCount() / num_layers : 0;
  }
  const int64_t h = hidden_size;
  const int64_t f = ffn_hidden_size;
  int64_t params = AttentionParameters(*this, h, num_kv_groups);
  params += (gated_mlp ? 3 : 2) * h * f;
  if (linear_bias) params += (gated_mlp ? 2 : 1) * f + h;
  params += 2 * NormParameters(*this);  // pre-attention and pre-MLP norms
  if (kind == ModuleKind::kDit) {
    if (text_condition_hidden > 0) {
      // Cross-attention over the text condition (MHA) and its norm.
      params += AttentionParameters(*this, text_condition_hidden, num_attention_heads);
      params += NormParameters(*this);
    }
    // adaLN modulation: shift/scale/gate for attention and MLP (6·h per token).
    params += shared_adaln ? 6 * h : 6 * h * h + 6 * h;
  }
  return params;
}

int64_t ModuleSpec::EmbeddingParameters() const {
  const int64_t h = hidden_size;
  switch (kind) {
    case ModuleKind::kLlm: {
      int64_t params = static_cast<int64_t>(vocab_size) * h;                 // token embedding
      if (!tied_embeddings) params += static_cast<int64_t>(vocab_size) * h;  // LM head
      params += static_cast<int64_t>(learned_position_embeddings) * h;
      params += NormParameters(*this);  // final norm
      return params;
    }
    case ModuleKind::kVit: {
      const int64_t patch_in =
          static_cast<int64_t>(in_channels) * patch_size * patch_size * temporal_patch;
      int64_t params = patch_in * h + (linear_bias ? h : 0);
      params += static_cast<int64_t>(learned_position_embeddings) * h;
      params += NormParameters(*this);  // final (post) norm
      return params;
    }
    case ModuleKind::kDit: {
      const int64_t patch_elems =
          static_cast<int64_t>(in_channels) * patch_size * patch_size * temporal_patch;
      int64_t params = patch_elems * h + h;  // patch embedding (conv with bias)
      params += 256 * h + h + h * h + h;     // timestep embedder: 256-dim frequencies -> MLP
      if (shared_adaln) params += 6 * h * h + 6 * h;  // the one shared modulation MLP
      params += static_cast<int64_t>(learned_position_embeddings) * h;
      params += NormParameters(*this) + h * patch_elems + patch_elems;  // final norm + linear
      return params;
    }
    case ModuleKind::kAudioEncoder: {
      // Two 1-D convolutions with kernel 3 (mel -> h, h -> h stride 2), then a final norm.
      int64_t params = static_cast<int64_t>(mel_bins) * h * 3 + h + h * h * 3 + h;
      params += static_cast<int64_t>(learned_position_embeddings) * h;
      params += NormParameters(*this);
      return params;
    }
    case ModuleKind::kMlpProjector:
      return 0;
  }
  return 0;
}

int64_t ModuleSpec::ParameterCount() const {
  if (kind == ModuleKind::kMlpProjector) {
    const int64_t in = input_size;
    const int64_t out = output_size;
    const int64_t bias = linear_bias ? 1 : 0;
    if (num_layers <= 1) return in * out + bias * out;
    const int64_t mid = ffn_hidden_size;
    // First linear, then (num_layers - 2) mid x mid linears, then the last.
    return in * mid + bias * mid + (num_layers - 2) * (mid * mid + bias * mid) + mid * out +
           bias * out;
  }
  return static_cast<int64_t>(num_layers) * ParametersPerLayer() + EmbeddingParameters();
}

int ModuleSpec::FixedImageTokens() const {
  if (kind != ModuleKind::kVit || patch_size <= 0 || spatial_merge <= 0) return 0;
  const int side = image_size_px / patch_size / spatial_merge;
  return side * side;
}

int ModuleSpec::AudioTokens(double seconds) const {
  if (kind != ModuleKind::kAudioEncoder || conv_downsample <= 0) return 0;
  const double frames = seconds * frames_per_second;
  const int tokens = static_cast<int>(std::ceil(frames / conv_downsample));
  return std::clamp(tokens, 0, max_source_positions);
}

bool ModuleSpec::WindowedLayer(int layer) const {
  return attention_window_px > 0 &&
         !std::binary_search(full_attention_layers.begin(), full_attention_layers.end(), layer);
}

int64_t ModuleSpec::WindowPatches() const {
  if (attention_window_px <= 0 || patch_size <= 0) return 0;
  const int64_t side = attention_window_px / patch_size;
  return side * side;
}

Status ModuleSpec::Validate() const {
  if (name.empty()) return FieldError("name", "\"\"", "must be non-empty");
  for (char c : name) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
    if (!ok) {
      return FieldError("name", fmt::format("\"{}\"", name),
                        "may only contain letters, digits, '_', '-' and '.'");
    }
  }
  if (kind == ModuleKind::kMlpProjector) {
    if (num_layers < 1 || num_layers > 2) {
      return FieldError("num_layers", num_layers, "must be 1 or 2 for an mlp_projector");
    }
    WEFT_RETURN_IF_ERROR(RequirePositive("input_size", input_size));
    WEFT_RETURN_IF_ERROR(RequirePositive("output_size", output_size));
    if (num_layers == 2) WEFT_RETURN_IF_ERROR(RequirePositive("ffn_hidden_size", ffn_hidden_size));
    if (hidden_size != output_size) {
      return FieldError(
          "hidden_size", hidden_size,
          fmt::format("must equal output_size ({}) for an mlp_projector", output_size));
    }
    return OkStatus();
  }

  // Transformer shape shared by vit / llm / dit / audio_encoder.
  WEFT_RETURN_IF_ERROR(RequirePositive("num_layers", num_layers));
  WEFT_RETURN_IF_ERROR(RequirePositive("hidden_size", hidden_size));
  WEFT_RETURN_IF_ERROR(RequirePositive("ffn_hidden_size", ffn_hidden_size));
  WEFT_RETURN_IF_ERROR(RequirePositive("num_attention_heads", num_attention_heads));
  if (head_dim < 0) return FieldError("head_dim", head_dim, "must be >= 0 (0 = hidden/heads)");
  if (head_dim == 0 && hidden_size % num_attention_heads != 0) {
    return FieldError(
        "hidden_size", hidden_size,
        fmt::format("must be divisible by num_attention_heads ({})", num_attention_heads));
  }
  WEFT_RETURN_IF_ERROR(RequirePositive("num_kv_groups", num_kv_groups));
  if (num_attention_heads % num_kv_groups != 0) {
    return FieldError("num_kv_groups", num_kv_groups,
                      fmt::format("must divide num_attention_heads ({})", num_attention_heads));
  }
  if (learned_position_embeddings < 0) {
    return FieldError("learned_position_embeddings", learned_position_embeddings, "must be >= 0");
  }

  switch (kind) {
    case ModuleKind::kLlm:
      WEFT_RETURN_IF_ERROR(RequirePositive("vocab_size", vocab_size));
      if (modality != Modality::kText) {
        return FieldError("modality", ModalityName(modality), "must be text for an llm");
      }
      break;
    case ModuleKind::kVit:
      if (modality != Modality::kImage && modality != Modality::kVideo) {
        return FieldError("modality", ModalityName(modality), "must be image or video for a vit");
      }
      WEFT_RETURN_IF_ERROR(RequirePositive("patch_size", patch_size));
      WEFT_RETURN_IF_ERROR(RequirePositive("spatial_merge", spatial_merge));
      WEFT_RETURN_IF_ERROR(RequirePositive("in_channels", in_channels));
      WEFT_RETURN_IF_ERROR(RequirePositive("temporal_patch", temporal_patch));
      if (resize_rule != ResizeRule::kNative) {
        WEFT_RETURN_IF_ERROR(RequirePositive("image_size_px", image_size_px));
        const int patches_per_side = image_size_px / patch_size;
        if (patches_per_side == 0 || patches_per_side % spatial_merge != 0) {
          return FieldError("image_size_px", image_size_px,
                            fmt::format("must give a patch grid side (image_size_px / patch_size "
                                        "= {}) divisible by spatial_merge ({})",
                                        patches_per_side, spatial_merge));
        }
      } else if (max_pixels < 0) {
        return FieldError("max_pixels", max_pixels, "must be >= 0 (0 = no cap)");
      }
      WEFT_RETURN_IF_ERROR(ValidateTiling());
      WEFT_RETURN_IF_ERROR(ValidateWindows());
      break;
    case ModuleKind::kDit:
      if (modality != Modality::kVideo && modality != Modality::kImage) {
        return FieldError("modality", ModalityName(modality), "must be video or image for a dit");
      }
      WEFT_RETURN_IF_ERROR(RequirePositive("patch_size", patch_size));
      WEFT_RETURN_IF_ERROR(RequirePositive("in_channels", in_channels));
      WEFT_RETURN_IF_ERROR(RequirePositive("temporal_patch", temporal_patch));
      WEFT_RETURN_IF_ERROR(RequirePositive("vae_spatial_downsample", vae_spatial_downsample));
      WEFT_RETURN_IF_ERROR(RequirePositive("vae_temporal_downsample", vae_temporal_downsample));
      if (text_condition_hidden < 0) {
        return FieldError("text_condition_hidden", text_condition_hidden,
                          "must be >= 0 (0 = no cross-attention)");
      }
      break;
    case ModuleKind::kAudioEncoder:
      if (modality != Modality::kAudio) {
        return FieldError("modality", ModalityName(modality), "must be audio for an audio_encoder");
      }
      WEFT_RETURN_IF_ERROR(RequirePositive("mel_bins", mel_bins));
      WEFT_RETURN_IF_ERROR(RequirePositive("frames_per_second", frames_per_second));
      WEFT_RETURN_IF_ERROR(RequirePositive("conv_downsample", conv_downsample));
      WEFT_RETURN_IF_ERROR(RequirePositive("max_source_positions", max_source_positions));
      WEFT_RETURN_IF_ERROR(RequirePositive("output_pool", output_pool));
      break;
    case ModuleKind::kMlpProjector:
      break;
  }
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// ModelSpec

std::optional<int> ModelSpec::FindModule(std::string_view module_name) const {
  for (size_t i = 0; i < modules.size(); ++i) {
    if (modules[i].name == module_name) return static_cast<int>(i);
  }
  return std::nullopt;
}

std::vector<int> ModelSpec::Predecessors(int module) const {
  std::vector<int> out;
  for (const ModuleEdge& edge : edges) {
    if (edge.to != modules[module].name) continue;
    if (auto from = FindModule(edge.from)) out.push_back(*from);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<int> ModelSpec::Successors(int module) const {
  std::vector<int> out;
  for (const ModuleEdge& edge : edges) {
    if (edge.from != modules[module].name) continue;
    if (auto to = FindModule(edge.to)) out.push_back(*to);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<int> ModelSpec::TopologicalOrder() const {
  const int n = static_cast<int>(modules.size());
  std::vector<int> in_degree(n, 0);
  std::vector<std::vector<int>> successors(n);
  for (int i = 0; i < n; ++i) {
    successors[i] = Successors(i);
    for (int s : successors[i]) ++in_degree[s];
  }
  // Kahn's algorithm with a min-heap on the declaration index: ties go to the earlier module.
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  for (int i = 0; i < n; ++i) {
    if (in_degree[i] == 0) ready.push(i);
  }
  std::vector<int> order;
  order.reserve(n);
  while (!ready.empty()) {
    const int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int s : successors[i]) {
      if (--in_degree[s] == 0) ready.push(s);
    }
  }
  return order;  // shorter than n only if there is a cycle (Validate rejects that)
}

bool ModelSpec::HasTrainableUpstream(int module) const {
  std::vector<bool> seen(modules.size(), false);
  std::vector<int> stack = Predecessors(module);
  while (!stack.empty()) {
    const int i = stack.back();
    stack.pop_back();
    if (seen[i]) continue;
    seen[i] = true;
    if (!modules[i].frozen) return true;
    for (int p : Predecessors(i)) stack.push_back(p);
  }
  return false;
}

int64_t ModelSpec::ParameterCount() const {
  int64_t total = 0;
  for (const ModuleSpec& m : modules) total += m.ParameterCount();
  return total;
}

int64_t ModelSpec::TrainableParameterCount() const {
  int64_t total = 0;
  for (const ModuleSpec& m : modules) {
    if (!m.frozen) total += m.ParameterCount();
  }
  return total;
}

namespace {

// The width of the activations `producer` hands to the next module per token.
int64_t OutputWidth(const ModuleSpec& producer) {
  if (producer.kind == ModuleKind::kVit) {
    return static_cast<int64_t>(producer.hidden_size) * producer.spatial_merge *
           producer.spatial_merge;
  }
  return producer.hidden_size;
}

// Shape agreement along one edge (OK when the pair of kinds has no rule).
Status CheckEdgeShapes(int from_index, const ModuleSpec& from, int to_index, const ModuleSpec& to) {
  const std::string prefix = fmt::format("modules[{}]", to_index);
  if (to.kind == ModuleKind::kMlpProjector) {
    const int64_t width = OutputWidth(from);
    if (to.input_size != width) {
      return FieldError(
          prefix + ".input_size", to.input_size,
          fmt::format("must equal the output width of upstream module '{}' ({}{})", from.name,
                      width,
                      from.kind == ModuleKind::kVit && from.spatial_merge > 1
                          ? fmt::format(" = hidden_size {} x spatial_merge^2 {}", from.hidden_size,
                                        from.spatial_merge * from.spatial_merge)
                          : ""));
    }
    return OkStatus();
  }
  if (from.kind == ModuleKind::kMlpProjector && to.kind == ModuleKind::kLlm &&
      from.output_size != to.hidden_size) {
    return FieldError(fmt::format("modules[{}].output_size", from_index), from.output_size,
                      fmt::format("must equal hidden_size ({}) of downstream module '{}'",
                                  to.hidden_size, to.name));
  }
  if (to.kind == ModuleKind::kDit &&
      (from.kind == ModuleKind::kLlm || from.kind == ModuleKind::kMlpProjector) &&
      to.text_condition_hidden != from.hidden_size) {
    return FieldError(prefix + ".text_condition_hidden", to.text_condition_hidden,
                      fmt::format("must equal hidden_size ({}) of upstream module '{}'",
                                  from.hidden_size, from.name));
  }
  return OkStatus();
}

}  // namespace

Status ModelSpec::Validate() const {
  if (modules.empty()) return FieldError("modules", "[]", "must list at least one module");
  for (size_t i = 0; i < modules.size(); ++i) {
    Status status = modules[i].Validate();
    if (!status.ok()) {
      return Status(status.code(), fmt::format("modules[{}].{}", i, status.message()));
    }
    for (size_t j = 0; j < i; ++j) {
      if (modules[j].name == modules[i].name) {
        return FieldError(fmt::format("modules[{}].name", i),
                          fmt::format("\"{}\"", modules[i].name),
                          fmt::format("must be unique (also modules[{}].name)", j));
      }
    }
  }
  std::set<std::pair<std::string, std::string>> seen_edges;
  for (size_t e = 0; e < edges.size(); ++e) {
    const ModuleEdge& edge = edges[e];
    if (!FindModule(edge.from)) {
      return FieldError(fmt::format("edges[{}].from", e), fmt::format("\"{}\"", edge.from),
                        "must name a module of the model");
    }
    if (!FindModule(edge.to)) {
      return FieldError(fmt::format("edges[{}].to", e), fmt::format("\"{}\"", edge.to),
                        "must name a module of the model");
    }
    if (edge.from == edge.to) {
      return FieldError(fmt::format("edges[{}]", e), fmt::format("{} -> {}", edge.from, edge.to),
                        "must connect two different modules");
    }
    if (!seen_edges.insert({edge.from, edge.to}).second) {
      return FieldError(fmt::format("edges[{}]", e), fmt::format("{} -> {}", edge.from, edge.to),
                        "must not repeat an earlier edge");
    }
  }
  const std::vector<int> order = TopologicalOrder();
  if (order.size() != modules.size()) {
    std::vector<bool> placed(modules.size(), false);
    for (int i : order) placed[i] = true;
    std::string cyclic;
    for (size_t i = 0; i < modules.size(); ++i) {
      if (placed[i]) continue;
      if (!cyclic.empty()) cyclic += ", ";
      cyclic += modules[i].name;
    }
    return FieldError("edges", fmt::format("[cycle through {}]", cyclic), "must form a DAG");
  }
  for (const ModuleEdge& edge : edges) {
    const int from = *FindModule(edge.from);
    const int to = *FindModule(edge.to);
    WEFT_RETURN_IF_ERROR(CheckEdgeShapes(from, modules[from], to, modules[to]));
  }
  return CheckDataFlow();
}

// A model that trains an LLM or a DiT: every module's output must reach one (a branch cut off
// from them would be placed and timed as dead work), and a projector must have an encoder
// upstream (it has no input otherwise). Both refused the same way (issue 34 item 10).
Status ModelSpec::CheckDataFlow() const {
  const auto is_output = [&](size_t i) {
    return modules[i].kind == ModuleKind::kLlm || modules[i].kind == ModuleKind::kDit;
  };
  bool any_output = false;
  for (size_t i = 0; i < modules.size(); ++i) any_output |= is_output(i);
  if (!any_output) return OkStatus();  // an encoder alone (a building block): nothing to reach
  std::vector<std::vector<int>> out(modules.size()), in(modules.size());
  for (const ModuleEdge& e : edges) {
    out[*FindModule(e.from)].push_back(*FindModule(e.to));
    in[*FindModule(e.to)].push_back(*FindModule(e.from));
  }
  // reaches[i]: module i is an output or feeds one (edges form a DAG: memoized search).
  std::vector<int> reaches(modules.size(), -1);
  std::function<bool(int)> reach = [&](int i) {
    if (reaches[i] < 0) {
      reaches[i] = is_output(i) ? 1 : 0;
      for (int j : out[i]) reaches[i] = reaches[i] || reach(j);
    }
    return reaches[i] == 1;
  };
  for (size_t i = 0; i < modules.size(); ++i) {
    if (!reach(static_cast<int>(i))) {
      return FieldError("edges",
                        fmt::format("[module '{}' ({}) feeds {}]", modules[i].name,
                                    ModuleKindName(modules[i].kind),
                                    out[i].empty() ? "nothing" : "no llm or dit"),
                        "every module must reach an llm or dit module (its work would be dead); "
                        "add the missing edge or remove the module");
    }
    if (modules[i].kind == ModuleKind::kMlpProjector) {
      std::vector<int> stack(in[i].begin(), in[i].end());
      std::set<int> seen;
      bool encoder = false;
      while (!stack.empty() && !encoder) {
        const int j = stack.back();
        stack.pop_back();
        if (!seen.insert(j).second) continue;
        encoder = modules[j].IsEncoder();
        stack.insert(stack.end(), in[j].begin(), in[j].end());
      }
      if (!encoder) {
        return FieldError(
            "edges",
            fmt::format("[module '{}' (mlp_projector) has no encoder upstream]", modules[i].name),
            "a projector must have a vit or audio_encoder module upstream (it has "
            "no input otherwise); add the missing edge or remove the module");
      }
    }
  }
  return OkStatus();
}

Status ModuleSpec::ValidateTiling() const {
  const bool anyres = resize_rule == ResizeRule::kAnyRes;
  const bool tiles = resize_rule == ResizeRule::kTiles;
  if (!anyres && !grid_pinpoints.empty()) {
    return FieldError("grid_pinpoints", fmt::format("[{} entries]", grid_pinpoints.size()),
                      "only apply with resize_rule anyres");
  }
  if (anyres) {
    if (grid_pinpoints.empty()) {
      return FieldError("grid_pinpoints", "[]", "must list at least one resolution for anyres");
    }
    for (size_t i = 0; i < grid_pinpoints.size(); ++i) {
      const GridPinpoint& p = grid_pinpoints[i];
      if (p.height_px <= 0 || p.width_px <= 0 || p.height_px % image_size_px != 0 ||
          p.width_px % image_size_px != 0) {
        return FieldError(
            fmt::format("grid_pinpoints[{}]", i), fmt::format("[{}, {}]", p.height_px, p.width_px),
            fmt::format("must be positive multiples of image_size_px ({})", image_size_px));
      }
      const int64_t tiles =
          static_cast<int64_t>(p.height_px / image_size_px) * (p.width_px / image_size_px);
      if (tiles > kMaxTilesPerImage) {
        return FieldError(fmt::format("grid_pinpoints[{}]", i),
                          fmt::format("[{}, {}]", p.height_px, p.width_px),
                          fmt::format("must make at most {} tiles of image_size_px ({})",
                                      kMaxTilesPerImage, image_size_px));
      }
    }
  }
  if (anyres_max_tiles < 0 || anyres_max_tiles > kMaxTilesPerImage) {
    return FieldError("anyres_max_tiles", anyres_max_tiles,
                      fmt::format("must be in [0, {}] (0 = no cap)", kMaxTilesPerImage));
  }
  if (tiles) {
    WEFT_RETURN_IF_ERROR(RequirePositive("min_tiles", min_tiles));
    if (max_tiles < min_tiles) {
      return FieldError("max_tiles", max_tiles,
                        fmt::format("must be >= min_tiles ({})", min_tiles));
    }
    if (max_tiles > kMaxTilesPerImage) {
      return FieldError("max_tiles", max_tiles,
                        fmt::format("must be at most {}", kMaxTilesPerImage));
    }
  }
  return OkStatus();
}

Status ModuleSpec::ValidateWindows() const {
  if (attention_window_px < 0) {
    return FieldError("attention_window_px", attention_window_px, "must be >= 0 (0 = none)");
  }
  if (attention_window_px == 0) {
    if (!full_attention_layers.empty()) {
      return FieldError("full_attention_layers",
                        fmt::format("[{} entries]", full_attention_layers.size()),
                        "only apply with attention_window_px > 0");
    }
    return OkStatus();
  }
  const int unit = patch_size * spatial_merge;
  if (attention_window_px % unit != 0) {
    return FieldError("attention_window_px", attention_window_px,
                      fmt::format("must be a multiple of patch_size x spatial_merge ({})", unit));
  }
  for (size_t i = 0; i < full_attention_layers.size(); ++i) {
    const int layer = full_attention_layers[i];
    if (layer < 0 || layer >= num_layers) {
      return FieldError(fmt::format("full_attention_layers[{}]", i), layer,
                        fmt::format("must be a layer index in [0, {})", num_layers));
    }
    if (i > 0 && layer <= full_attention_layers[i - 1]) {
      return FieldError(fmt::format("full_attention_layers[{}]", i), layer,
                        "must be increasing (no repeats)");
    }
  }
  return OkStatus();
}

}  // namespace weft::spec
