// Presets: YAML/JSON parsing of models (with `use:` combinations and an optional `setup:`) and
// clusters, YAML emission, and lookup of the embedded presets.
//
// Every yaml-cpp exception is caught here: nothing throws across the library boundary.
#include "weft/spec/preset.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <type_traits>
#include <variant>

#include <fmt/format.h>

#include "weft/common/strict_input.h"
#include "weft/common/text.h"
#include "weft/spec/embedded_presets.h"
#include "weft/spec/hf_config.h"

namespace weft::spec {
namespace {

// ---------------------------------------------------------------------------------------------
// Small helpers

// Input text as it appears in a message: as is when it is short printable ASCII, else quoted
// with control bytes escaped and cut (QuoteForMessage), so an error stays one line.
std::string Shown(std::string_view text) {
  const bool plain = text.size() <= 80 && std::all_of(text.begin(), text.end(), [](char c) {
                       return c >= 0x20 && c < 0x7f;
                     });
  return plain ? std::string(text) : QuoteForMessage(text, 60);
}

std::string NodeText(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "null";
  if (node.IsScalar()) return node.Scalar();
  YAML::Emitter out;
  out << YAML::Flow << node;
  std::string text = out.c_str();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool LooksLikePath(std::string_view s) {
  return s.find('/') != std::string_view::npos || EndsWith(s, ".yaml") ||
         EndsWith(s, ".yml") || EndsWith(s, ".json");
}

// ---------------------------------------------------------------------------------------------
// Quantities with units ("80GiB", "200 GB/s", "200Gbps", "989TFLOPS", "8us"); plain numbers
// are taken in the field's base unit.

enum class Unit { kNone, kBytes, kBytesPerS, kFlopsPerS, kSeconds };

struct UnitSuffix {
  std::string_view suffix;
  int decimal_exponent;  // value = mantissa * 10^exp ...
  int binary_exponent;   // ... * 2^exp
  double divisor;        // ... / divisor (bits -> bytes)
};

const std::vector<UnitSuffix>& SuffixesFor(Unit unit) {
  static const std::vector<UnitSuffix> kBytes = {
      {"B", 0, 0, 1},    {"KB", 3, 0, 1},   {"MB", 6, 0, 1},   {"GB", 9, 0, 1},
      {"TB", 12, 0, 1},  {"KiB", 0, 10, 1}, {"MiB", 0, 20, 1}, {"GiB", 0, 30, 1},
      {"TiB", 0, 40, 1},
  };
  static const std::vector<UnitSuffix> kRate = {
      {"B/s", 0, 0, 1},   {"KB/s", 3, 0, 1},  {"MB/s", 6, 0, 1},  {"GB/s", 9, 0, 1},
      {"TB/s", 12, 0, 1}, {"GiB/s", 0, 30, 1}, {"b/s", 0, 0, 8},  {"Mb/s", 6, 0, 8},
      {"Gb/s", 9, 0, 8},  {"Tb/s", 12, 0, 8}, {"Mbps", 6, 0, 8},  {"Gbps", 9, 0, 8},
      {"Tbps", 12, 0, 8},
  };
  static const std::vector<UnitSuffix> kFlops = {
      {"FLOPS", 0, 0, 1},   {"GFLOPS", 9, 0, 1},   {"TFLOPS", 12, 0, 1},
      {"PFLOPS", 15, 0, 1}, {"FLOP/s", 0, 0, 1},   {"GFLOP/s", 9, 0, 1},
      {"TFLOP/s", 12, 0, 1}, {"PFLOP/s", 15, 0, 1},
  };
  static const std::vector<UnitSuffix> kSeconds = {
      {"s", 0, 0, 1}, {"ms", -3, 0, 1}, {"us", -6, 0, 1}, {"ns", -9, 0, 1},
  };
  static const std::vector<UnitSuffix> kNone;
  switch (unit) {
    case Unit::kBytes: return kBytes;
    case Unit::kBytesPerS: return kRate;
    case Unit::kFlopsPerS: return kFlops;
    case Unit::kSeconds: return kSeconds;
    case Unit::kNone: return kNone;
  }
  return kNone;
}

std::string_view UnitRule(Unit unit) {
  switch (unit) {
    case Unit::kBytes: return "must be a number of bytes (e.g. 85899345920 or 80GiB or 80GB)";
    case Unit::kBytesPerS: return "must be a rate in bytes/s (e.g. 2e11 or 200GB/s or 400Gbps)";
    case Unit::kFlopsPerS: return "must be FLOP/s (e.g. 9.89e14 or 989TFLOPS)";
    case Unit::kSeconds: return "must be seconds (e.g. 1e-5 or 10us)";
    case Unit::kNone: return "must be a number";
  }
  return "must be a number";
}

std::optional<double> ParseNumber(std::string_view text) {
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  if (text.empty()) return std::nullopt;
  const std::string copy(text);
  char* end = nullptr;
  const double value = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

std::optional<double> ParseQuantity(std::string_view text, Unit unit) {
  if (auto plain = ParseNumber(text)) return plain;
  // Longest suffix first so "GB/s" is not read as "B/s".
  const UnitSuffix* best = nullptr;
  for (const UnitSuffix& s : SuffixesFor(unit)) {
    if (EndsWith(text, s.suffix) && (!best || s.suffix.size() > best->suffix.size())) best = &s;
  }
  if (!best) return std::nullopt;
  std::string mantissa(text.substr(0, text.size() - best->suffix.size()));
  while (!mantissa.empty() && mantissa.back() == ' ') mantissa.pop_back();
  if (!ParseNumber(mantissa)) return std::nullopt;
  // Decimal scaling through the exponent keeps "3.35TB/s" == 3.35e12 exactly.
  std::optional<double> value = ParseNumber(fmt::format("{}e{}", mantissa, best->decimal_exponent));
  if (!value) return std::nullopt;
  return std::ldexp(*value, best->binary_exponent) / best->divisor;
}

// Shortest text for `value` that parses back to exactly `value`, with a readable unit if one
// round-trips (e.g. "80GiB", "200GB/s", "989TFLOPS").
std::string FormatQuantity(double value, Unit unit) {
  struct Candidate {
    std::string_view suffix;
    double scale;
  };
  std::vector<Candidate> candidates;
  switch (unit) {
    case Unit::kBytes: candidates = {{"GiB", std::ldexp(1.0, 30)}, {"MiB", std::ldexp(1.0, 20)}}; break;
    case Unit::kBytesPerS: candidates = {{"TB/s", 1e12}, {"GB/s", 1e9}, {"MB/s", 1e6}}; break;
    case Unit::kFlopsPerS: candidates = {{"PFLOPS", 1e15}, {"TFLOPS", 1e12}}; break;
    case Unit::kSeconds: candidates = {{"us", 1e-6}, {"ms", 1e-3}}; break;
    case Unit::kNone: break;
  }
  for (const Candidate& c : candidates) {
    const double mantissa = value / c.scale;
    if (mantissa < 1 || mantissa >= 100000) continue;
    const std::string text = fmt::format("{}{}", mantissa, c.suffix);
    if (text.size() > 14) continue;
    if (auto parsed = ParseQuantity(text, unit); parsed && *parsed == value) return text;
  }
  return fmt::format("{}", value);
}

// ---------------------------------------------------------------------------------------------
// Reading scalars; errors are "<source>: <path> = <value>; <rule>".

struct Context {
  std::string source;    // file path or "preset:<name>"
  std::string base_dir;  // for relative `use:` paths ("" for embedded presets)
  int depth = 0;         // `use:` nesting
  bool cluster = false;  // a cluster document (else a model document)
};

Context SourceContext(std::string source) {
  Context ctx;
  ctx.source = std::move(source);
  return ctx;
}

// `value` is user input (shown safely); `rule` is weft's text (it may quote input through Shown).
Status Error(const Context& ctx, std::string_view path, std::string_view value,
             std::string_view rule) {
  return InvalidArgumentError(
      fmt::format("{}: {} = {}; {}", ctx.source, Shown(path), Shown(value), rule));
}

std::string Join(std::string_view prefix, std::string_view key) {
  return prefix.empty() ? std::string(key) : fmt::format("{}.{}", prefix, key);
}

StatusOr<int64_t> ReadInt64(const Context& ctx, const YAML::Node& node, std::string_view path,
                            Unit unit = Unit::kNone) {
  if (!node.IsScalar()) return Error(ctx, path, NodeText(node), "must be an integer");
  const std::string& text = node.Scalar();
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc() && ptr == text.data() + text.size()) return value;
  if (unit != Unit::kNone) {
    if (auto q = ParseQuantity(text, unit)) {
      if (*q == std::floor(*q) && std::fabs(*q) < 9.2e18) return static_cast<int64_t>(*q);
      return Error(ctx, path, text, "must be a whole number of bytes");
    }
    return Error(ctx, path, text, UnitRule(unit));
  }
  return Error(ctx, path, text, "must be an integer");
}

StatusOr<int> ReadInt(const Context& ctx, const YAML::Node& node, std::string_view path) {
  WEFT_ASSIGN_OR_RETURN(int64_t value, ReadInt64(ctx, node, path));
  if (value < -2147483647 || value > 2147483647) {
    return Error(ctx, path, NodeText(node), "must fit in a 32-bit integer");
  }
  return static_cast<int>(value);
}

StatusOr<double> ReadDouble(const Context& ctx, const YAML::Node& node, std::string_view path,
                            Unit unit) {
  if (!node.IsScalar()) return Error(ctx, path, NodeText(node), UnitRule(unit));
  if (auto q = ParseQuantity(node.Scalar(), unit)) return *q;
  return Error(ctx, path, node.Scalar(), UnitRule(unit));
}

StatusOr<bool> ReadBool(const Context& ctx, const YAML::Node& node, std::string_view path) {
  if (node.IsScalar()) {
    const std::string& t = node.Scalar();
    if (t == "true" || t == "True" || t == "yes") return true;
    if (t == "false" || t == "False" || t == "no") return false;
  }
  return Error(ctx, path, NodeText(node), "must be true or false");
}

StatusOr<std::string> ReadString(const Context& ctx, const YAML::Node& node,
                                 std::string_view path) {
  if (!node.IsScalar()) return Error(ctx, path, NodeText(node), "must be a string");
  return node.Scalar();
}

Status RequireMap(const Context& ctx, const YAML::Node& node, std::string_view path) {
  if (node.IsMap()) return OkStatus();
  return Error(ctx, path.empty() ? "(document)" : path, NodeText(node), "must be a mapping");
}

// ---------------------------------------------------------------------------------------------
// Table-driven struct fields: key <-> member (+ unit for quantities).

// Valid range of a number field, checked by the reader before any arithmetic uses the value (so a
// spec cannot overflow a product downstream or print inf): [min, max], or exactly 0 when
// zero_ok (0 = "unset"/"none" for optional quantities).
struct Range {
  double min = 0;
  double max = 0;
  bool zero_ok = false;
};

// Default ranges: counts and sizes of a model / cluster / setup, and physical quantities.
constexpr double kMaxCount = 1 << 20;  // hidden sizes, heads, sizes in px, GPUs ...
Range DefaultRange(Unit unit, bool is_int) {
  switch (unit) {
    case Unit::kBytes: return {0, std::ldexp(1.0, 50)};           // up to 1 PiB
    case Unit::kBytesPerS: return {1e3, 1e16, /*zero_ok=*/true};  // 1 KB/s .. 10 PB/s
    case Unit::kFlopsPerS: return {1e9, 1e19};                    // 1 GFLOP/s .. 10 EFLOP/s
    case Unit::kSeconds: return {0, 3600};
    case Unit::kNone: break;
  }
  if (is_int) return {0, kMaxCount};
  return {1e-6, 1e6, /*zero_ok=*/true};
}

template <typename T>
struct Field {
  std::string_view key;
  std::variant<int T::*, int64_t T::*, bool T::*, double T::*, std::string T::*> member;
  Unit unit = Unit::kNone;
  std::optional<Range> range = std::nullopt;  // DefaultRange(unit) when unset
};

std::string RangeRule(const Range& r, Unit unit) {
  const std::string_view unit_name = unit == Unit::kBytes       ? " bytes"
                                     : unit == Unit::kBytesPerS ? " bytes/s"
                                     : unit == Unit::kFlopsPerS ? " FLOP/s"
                                     : unit == Unit::kSeconds   ? " s"
                                                                : "";
  return fmt::format("must be {}in [{}, {}]{}", r.zero_ok && r.min > 0 ? "0 or " : "",
                     NumberForMessage(r.min), NumberForMessage(r.max), unit_name);
}

Status CheckRange(const Context& ctx, const YAML::Node& node, std::string_view path, double value,
                  const Range& r, Unit unit) {
  if ((r.zero_ok && value == 0) || (value >= r.min && value <= r.max)) return OkStatus();
  return Error(ctx, path, NodeText(node), RangeRule(r, unit));
}

template <typename T>
Status ReadField(const Context& ctx, const Field<T>& field, const YAML::Node& node,
                 const std::string& path, T& out) {
  return std::visit(
      [&](auto member) -> Status {
        using M = std::remove_reference_t<decltype(out.*member)>;
        const Range range = field.range.value_or(
            DefaultRange(field.unit, !std::is_same_v<M, double>));
        if constexpr (std::is_same_v<M, int>) {
          WEFT_ASSIGN_OR_RETURN(int value, ReadInt(ctx, node, path));
          WEFT_RETURN_IF_ERROR(CheckRange(ctx, node, path, value, range, field.unit));
          out.*member = value;
        } else if constexpr (std::is_same_v<M, int64_t>) {
          WEFT_ASSIGN_OR_RETURN(int64_t value, ReadInt64(ctx, node, path, field.unit));
          WEFT_RETURN_IF_ERROR(
              CheckRange(ctx, node, path, static_cast<double>(value), range, field.unit));
          out.*member = value;
        } else if constexpr (std::is_same_v<M, bool>) {
          WEFT_ASSIGN_OR_RETURN(out.*member, ReadBool(ctx, node, path));
        } else if constexpr (std::is_same_v<M, double>) {
          WEFT_ASSIGN_OR_RETURN(double value, ReadDouble(ctx, node, path, field.unit));
          WEFT_RETURN_IF_ERROR(CheckRange(ctx, node, path, value, range, field.unit));
          out.*member = value;
        } else {
          WEFT_ASSIGN_OR_RETURN(out.*member, ReadString(ctx, node, path));
        }
        return OkStatus();
      },
      field.member);
}

template <typename T>
void EmitField(YAML::Emitter& out, const Field<T>& field, const T& value) {
  out << YAML::Key << std::string(field.key) << YAML::Value;
  std::visit(
      [&](auto member) {
        using M = std::remove_cv_t<std::remove_reference_t<decltype(value.*member)>>;
        if constexpr (std::is_same_v<M, int64_t>) {
          if (field.unit == Unit::kBytes) {
            out << FormatQuantity(static_cast<double>(value.*member), field.unit);
          } else {
            out << value.*member;
          }
        } else if constexpr (std::is_same_v<M, double>) {
          out << FormatQuantity(value.*member, field.unit);
        } else if constexpr (std::is_same_v<M, std::string>) {
          out << YAML::DoubleQuoted << value.*member;
        } else {
          out << value.*member;
        }
      },
      field.member);
}

template <typename T>
bool FieldEquals(const Field<T>& field, const T& a, const T& b) {
  return std::visit([&](auto member) { return a.*member == b.*member; }, field.member);
}

template <typename T>
std::vector<std::string> Keys(const std::vector<Field<T>>& fields,
                              const std::vector<std::string_view>& extra = {}) {
  std::vector<std::string> keys;
  for (const auto& f : fields) keys.emplace_back(f.key);
  for (auto k : extra) keys.emplace_back(k);
  return keys;
}

// " (`key:` belongs under <section>; check its indentation)" when `key` is valid in another
// section of the document than where it was found (defined below the schemas), else "".
std::string MisplacedHint(std::string_view key, std::string_view path, bool cluster);

Status UnknownKey(const Context& ctx, std::string_view path, const YAML::Node& value,
                  std::string_view key, const std::vector<std::string>& known) {
  std::string hint = DidYouMean(key, known);
  if (hint.empty()) hint = MisplacedHint(key, path, ctx.cluster);
  return Error(ctx, path, NodeText(value), fmt::format("unknown key '{}'{}", Shown(key), hint));
}

// Reads every key of `node` into `out` through `fields`; keys in `handled` are skipped
// (the caller reads them); any other key is an error.
template <typename T>
Status ReadFields(const Context& ctx, const YAML::Node& node, std::string_view prefix,
                  const std::vector<Field<T>>& fields,
                  const std::vector<std::string_view>& handled, T& out) {
  WEFT_RETURN_IF_ERROR(RequireMap(ctx, node, prefix));
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    if (std::find(handled.begin(), handled.end(), key) != handled.end()) continue;
    const std::string path = Join(prefix, key);
    auto it = std::find_if(fields.begin(), fields.end(),
                           [&](const Field<T>& f) { return f.key == key; });
    if (it == fields.end()) return UnknownKey(ctx, path, kv.second, key, Keys(fields, handled));
    WEFT_RETURN_IF_ERROR(ReadField(ctx, *it, kv.second, path, out));
  }
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Module schema

const std::vector<Field<ModuleSpec>>& ModuleFields() {
  using M = ModuleSpec;
  static const std::vector<Field<M>> kFields = {
      {"name", &M::name},
      {"frozen", &M::frozen},
      {"num_layers", &M::num_layers, Unit::kNone, Range{0, 4096}},
      {"hidden_size", &M::hidden_size},
      {"ffn_hidden_size", &M::ffn_hidden_size},
      {"num_attention_heads", &M::num_attention_heads},
      {"num_kv_groups", &M::num_kv_groups},
      {"head_dim", &M::head_dim},
      {"gated_mlp", &M::gated_mlp},
      {"causal_attention", &M::causal_attention},
      {"qkv_bias", &M::qkv_bias},
      {"linear_bias", &M::linear_bias},
      {"qk_norm", &M::qk_norm},
      {"rms_norm", &M::rms_norm},
      {"learned_position_embeddings", &M::learned_position_embeddings, Unit::kNone,
       Range{0, 1 << 24}},
      {"vocab_size", &M::vocab_size, Unit::kNone, Range{0, 1 << 24}},
      {"tied_embeddings", &M::tied_embeddings},
      {"patch_size", &M::patch_size},
      {"spatial_merge", &M::spatial_merge},
      {"image_size_px", &M::image_size_px},
      {"max_pixels", &M::max_pixels, Unit::kNone, Range{0, 1 << 28}},
      {"in_channels", &M::in_channels},
      {"temporal_patch", &M::temporal_patch},
      {"anyres_max_tiles", &M::anyres_max_tiles},
      {"min_tiles", &M::min_tiles},
      {"max_tiles", &M::max_tiles},
      {"thumbnail", &M::thumbnail},
      {"attention_window_px", &M::attention_window_px},
      {"vae_spatial_downsample", &M::vae_spatial_downsample},
      {"vae_temporal_downsample", &M::vae_temporal_downsample},
      {"text_condition_hidden", &M::text_condition_hidden},
      {"shared_adaln", &M::shared_adaln},
      {"mel_bins", &M::mel_bins},
      {"frames_per_second", &M::frames_per_second},
      {"conv_downsample", &M::conv_downsample},
      {"max_source_positions", &M::max_source_positions},
      {"output_pool", &M::output_pool},
      {"input_size", &M::input_size},
      {"output_size", &M::output_size},
  };
  return kFields;
}

// Keys of a module entry that are not plain fields.
const std::vector<std::string_view> kModuleSpecialKeys = {
    "use",        "module",      "kind",           "modality",
    "activation", "resize_rule", "grid_pinpoints", "full_attention_layers"};

// A YAML sequence of at most `max` entries at `path`.
Status RequireSequence(const Context& ctx,
                       const YAML::Node& node,
                       const std::string& path,
                       size_t max) {
  if (!node.IsSequence()) return Error(ctx, path, NodeText(node), "must be a list");
  if (node.size() > max) {
    return Error(ctx, path, fmt::format("[{} entries]", node.size()),
                 fmt::format("must have at most {} entries", max));
  }
  return OkStatus();
}

// An integer in [0, 2^20] (the schema's range for sizes and indexes).
StatusOr<int> ReadSize(const Context& ctx, const YAML::Node& node, const std::string& path) {
  WEFT_ASSIGN_OR_RETURN(int value, ReadInt(ctx, node, path));
  if (value < 0 || value > (1 << 20)) {
    return Error(ctx, path, NodeText(node), fmt::format("must be in [0, {}]", 1 << 20));
  }
  return value;
}

// grid_pinpoints: [[height_px, width_px], ...]; full_attention_layers: [layer, ...].
Status ReadModuleLists(const Context& ctx,
                       const YAML::Node& node,
                       const std::string& prefix,
                       ModuleSpec& module) {
  constexpr size_t kMaxListEntries = 4096;
  if (const YAML::Node n = node["grid_pinpoints"]) {
    const std::string path = prefix + ".grid_pinpoints";
    WEFT_RETURN_IF_ERROR(RequireSequence(ctx, n, path, kMaxListEntries));
    module.grid_pinpoints.clear();
    for (size_t i = 0; i < n.size(); ++i) {
      const std::string item = fmt::format("{}[{}]", path, i);
      if (!n[i].IsSequence() || n[i].size() != 2) {
        return Error(ctx, item, NodeText(n[i]), "must be a [height_px, width_px] pair");
      }
      GridPinpoint p;
      WEFT_ASSIGN_OR_RETURN(p.height_px, ReadSize(ctx, n[i][0], item + "[0]"));
      WEFT_ASSIGN_OR_RETURN(p.width_px, ReadSize(ctx, n[i][1], item + "[1]"));
      module.grid_pinpoints.push_back(p);
    }
  }
  if (const YAML::Node n = node["full_attention_layers"]) {
    const std::string path = prefix + ".full_attention_layers";
    WEFT_RETURN_IF_ERROR(RequireSequence(ctx, n, path, kMaxListEntries));
    module.full_attention_layers.clear();
    for (size_t i = 0; i < n.size(); ++i) {
      WEFT_ASSIGN_OR_RETURN(int layer, ReadSize(ctx, n[i], fmt::format("{}[{}]", path, i)));
      module.full_attention_layers.push_back(layer);
    }
  }
  return OkStatus();
}

// The defaults a module of `kind` starts from when it is written out in full (no `use:`).
ModuleSpec KindDefaults(ModuleKind kind) {
  ModuleSpec m;
  m.kind = kind;
  switch (kind) {
    case ModuleKind::kLlm:
      m.modality = Modality::kText;
      m.causal_attention = true;
      m.gated_mlp = true;
      m.activation = Activation::kSilu;
      m.rms_norm = true;
      break;
    case ModuleKind::kVit: m.modality = Modality::kImage; break;
    case ModuleKind::kDit: m.modality = Modality::kVideo; break;
    case ModuleKind::kAudioEncoder: m.modality = Modality::kAudio; break;
    case ModuleKind::kMlpProjector: m.num_layers = 1; break;
  }
  return m;
}

// The "<rule>" part of a "<field> = <value>; <rule>" message.
std::string RuleOf(const Status& status) {
  const std::string& m = status.message();
  const size_t cut = m.find("; ");
  return cut == std::string::npos ? m : m.substr(cut + 2);
}

// Forward declaration: `use:` loads other model presets.
StatusOr<ModelPreset> LoadModelWithContext(std::string_view name_or_path, const Context& parent);

StatusOr<ModuleSpec> ReadModule(const Context& ctx, const YAML::Node& node,
                                const std::string& prefix) {
  WEFT_RETURN_IF_ERROR(RequireMap(ctx, node, prefix));
  ModuleSpec module;
  if (const YAML::Node use = node["use"]) {
    WEFT_ASSIGN_OR_RETURN(std::string ref, ReadString(ctx, use, prefix + ".use"));
    if (ctx.depth >= 8) {
      return Error(ctx, prefix + ".use", ref, "`use:` references nest too deeply (a cycle?)");
    }
    StatusOr<ModelPreset> base = LoadModelWithContext(ref, ctx);
    if (!base.ok()) {
      if (base.status().code() == StatusCode::kNotFound) {
        return Error(ctx, prefix + ".use", ref, base.status().message());
      }
      return base.status();
    }
    const std::vector<ModuleSpec>& candidates = base->model.modules;
    if (const YAML::Node which = node["module"]) {
      WEFT_ASSIGN_OR_RETURN(std::string wanted, ReadString(ctx, which, prefix + ".module"));
      auto index = base->model.FindModule(wanted);
      if (!index) {
        std::vector<std::string> names;
        for (const auto& m : candidates) names.push_back(m.name);
        return Error(ctx, prefix + ".module", wanted,
                     fmt::format("must name a module of '{}'{}", ref, DidYouMean(wanted, names)));
      }
      module = candidates[*index];
    } else if (candidates.size() == 1) {
      module = candidates[0];
    } else {
      return Error(ctx, prefix + ".use", ref,
                   fmt::format("has {} modules; add `module: <name>` to pick one",
                               candidates.size()));
    }
  } else if (node["module"]) {
    return Error(ctx, prefix + ".module", NodeText(node["module"]), "is only valid with `use:`");
  } else {
    const YAML::Node kind = node["kind"];
    if (!kind) return Error(ctx, prefix + ".kind", "null", "is required (or `use: <preset>`)");
    WEFT_ASSIGN_OR_RETURN(std::string kind_name, ReadString(ctx, kind, prefix + ".kind"));
    StatusOr<ModuleKind> parsed = ParseModuleKind(kind_name);
    if (!parsed.ok()) return Error(ctx, prefix + ".kind", kind_name, RuleOf(parsed.status()));
    module = KindDefaults(*parsed);
  }
  if (const YAML::Node kind = node["kind"]; kind && node["use"]) {
    WEFT_ASSIGN_OR_RETURN(std::string kind_name, ReadString(ctx, kind, prefix + ".kind"));
    StatusOr<ModuleKind> parsed = ParseModuleKind(kind_name);
    if (!parsed.ok() || *parsed != module.kind) {
      return Error(ctx, prefix + ".kind", kind_name,
                   fmt::format("must match the kind of the used module ({})",
                               ModuleKindName(module.kind)));
    }
  }
  if (const YAML::Node n = node["modality"]) {
    WEFT_ASSIGN_OR_RETURN(std::string text, ReadString(ctx, n, prefix + ".modality"));
    StatusOr<Modality> parsed = ParseModality(text);
    if (!parsed.ok()) return Error(ctx, prefix + ".modality", text, RuleOf(parsed.status()));
    module.modality = *parsed;
  }
  if (const YAML::Node n = node["activation"]) {
    WEFT_ASSIGN_OR_RETURN(std::string text, ReadString(ctx, n, prefix + ".activation"));
    StatusOr<Activation> parsed = ParseActivation(text);
    if (!parsed.ok()) return Error(ctx, prefix + ".activation", text, RuleOf(parsed.status()));
    module.activation = *parsed;
  }
  if (const YAML::Node n = node["resize_rule"]) {
    WEFT_ASSIGN_OR_RETURN(std::string text, ReadString(ctx, n, prefix + ".resize_rule"));
    StatusOr<ResizeRule> parsed = ParseResizeRule(text);
    if (!parsed.ok()) return Error(ctx, prefix + ".resize_rule", text, RuleOf(parsed.status()));
    module.resize_rule = *parsed;
  }
  WEFT_RETURN_IF_ERROR(ReadModuleLists(ctx, node, prefix, module));
  WEFT_RETURN_IF_ERROR(ReadFields(ctx, node, prefix, ModuleFields(), kModuleSpecialKeys, module));
  // Shorthands: MHA when num_kv_groups is omitted; a projector's hidden_size is its output.
  if (module.IsTransformer() && module.num_kv_groups == 0) {
    module.num_kv_groups = module.num_attention_heads;
  }
  if (module.kind == ModuleKind::kMlpProjector && !node["hidden_size"]) {
    module.hidden_size = module.output_size;
  }
  return module;
}

void EmitModule(YAML::Emitter& out, const ModuleSpec& m) {
  const ModuleSpec defaults = KindDefaults(m.kind);
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << m.name;
  out << YAML::Key << "kind" << YAML::Value << std::string(ModuleKindName(m.kind));
  if (m.modality != defaults.modality) {
    out << YAML::Key << "modality" << YAML::Value << std::string(ModalityName(m.modality));
  }
  if (m.activation != defaults.activation) {
    out << YAML::Key << "activation" << YAML::Value << std::string(ActivationName(m.activation));
  }
  if (m.resize_rule != defaults.resize_rule) {
    out << YAML::Key << "resize_rule" << YAML::Value << std::string(ResizeRuleName(m.resize_rule));
  }
  for (const Field<ModuleSpec>& field : ModuleFields()) {
    if (field.key == "name" || FieldEquals(field, m, defaults)) continue;
    EmitField(out, field, m);
  }
  if (!m.grid_pinpoints.empty()) {
    out << YAML::Key << "grid_pinpoints" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const GridPinpoint& p : m.grid_pinpoints) {
      out << YAML::Flow << YAML::BeginSeq << p.height_px << p.width_px << YAML::EndSeq;
    }
    out << YAML::EndSeq;
  }
  if (!m.full_attention_layers.empty()) {
    out << YAML::Key << "full_attention_layers" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (int layer : m.full_attention_layers) out << layer;
    out << YAML::EndSeq;
  }
  out << YAML::EndMap;
}

// ---------------------------------------------------------------------------------------------
// Setup schema

const std::vector<Field<ModuleParallel>>& ModuleParallelFields() {
  using P = ModuleParallel;
  static const std::vector<Field<P>> kFields = {
      {"module", &P::module}, {"tp", &P::tp}, {"pp", &P::pp},
      {"dp", &P::dp},         {"cp", &P::cp}, {"sequence_parallel", &P::sequence_parallel},
  };
  return kFields;
}

const std::vector<Field<TrainingSetup>>& SetupFields() {
  using S = TrainingSetup;
  static const std::vector<Field<S>> kFields = {
      {"cluster", &S::cluster},
      {"gpus", &S::gpus},
      {"context_tokens", &S::context_tokens, Unit::kNone, Range{0, 1 << 30}},
      {"global_batch_sequences", &S::global_batch_sequences, Unit::kNone, Range{0, 1 << 24}},
      {"data_profile", &S::data_profile},
      {"max_video_frames", &S::max_video_frames},
      {"max_clip_s", &S::max_clip_s},
      {"long_clips", &S::long_clips},
  };
  return kFields;
}

// tp x pp x dp x cp fits int (ModuleParallel::Gpus) and a sane cluster: each factor is at most
// 2^20 and the running product is checked after each step (so it stays below 2^44).
constexpr int64_t kMaxParallelGpus = int64_t{1} << 24;
Status CheckGpuProduct(const Context& ctx, const std::string& path, const ModuleParallel& p) {
  int64_t product = 1;
  for (int factor : {p.tp, p.pp, p.dp, p.cp}) {
    product *= std::max(factor, 1);  // each <= 2^20 and product <= 2^24 before: no overflow
    if (product > kMaxParallelGpus) {
      return Error(ctx, path, fmt::format("tp {} x pp {} x dp {} x cp {}", p.tp, p.pp, p.dp, p.cp),
                   fmt::format("must be at most {} GPUs", kMaxParallelGpus));
    }
  }
  return OkStatus();
}

// Where each expanded entry of setup.parallel was written (ReadParallel expands `all:` and the
// `modules:` list into one entry per module): its list index (-1 = from `all:` alone) and the
// keys written there and under `all:`, so messages name what the user wrote.
struct ParallelSources {
  std::vector<int> list_index;                      // per expanded entry
  std::vector<std::vector<std::string>> list_keys;  // per list item: its keys
  std::vector<std::string> all_keys;                // the keys under `all:`

  std::string Path(size_t entry, std::string_view field) const {
    auto has = [&](const std::vector<std::string>& keys) {
      return std::find(keys.begin(), keys.end(), field) != keys.end();
    };
    const int item = entry < list_index.size() ? list_index[entry] : -1;
    std::string base = item >= 0 ? fmt::format("parallel.modules[{}]", item) : "parallel.all";
    if (field.empty()) return base;
    // A field the list item does not set but `all:` does was written under `all:`.
    if (item >= 0 && !has(list_keys[item]) && has(all_keys)) base = "parallel.all";
    return fmt::format("{}.{}", base, field);
  }
};

StatusOr<ParallelConfig> ReadParallel(const Context& ctx, const YAML::Node& node,
                                      const ModelSpec& model, ParallelSources& sources) {
  const std::string prefix = "setup.parallel";
  WEFT_RETURN_IF_ERROR(RequireMap(ctx, node, prefix));
  ParallelConfig parallel;
  ModuleParallel all;
  bool expand = false;
  auto keys_of = [](const YAML::Node& map) {
    std::vector<std::string> keys;
    if (map.IsMap()) {
      for (const auto& kv : map) keys.push_back(kv.first.Scalar());
    }
    return keys;
  };
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    const std::string path = Join(prefix, key);
    if (key == "num_microbatches") {
      WEFT_ASSIGN_OR_RETURN(parallel.num_microbatches, ReadInt(ctx, kv.second, path));
    } else if (key == "global_batch_size") {
      WEFT_ASSIGN_OR_RETURN(parallel.global_batch_size, ReadInt(ctx, kv.second, path));
    } else if (key == "all") {
      if (kv.second["module"]) {
        return Error(ctx, path + ".module", NodeText(kv.second["module"]),
                     "is not allowed under `all:` (it applies to every module)");
      }
      WEFT_RETURN_IF_ERROR(ReadFields(ctx, kv.second, path, ModuleParallelFields(), {}, all));
      WEFT_RETURN_IF_ERROR(CheckGpuProduct(ctx, path, all));
      sources.all_keys = keys_of(kv.second);
      expand = true;
    } else if (key != "modules") {
      return UnknownKey(ctx, path, kv.second, key,
                        {"num_microbatches", "global_batch_size", "all", "modules"});
    }
  }
  std::vector<ModuleParallel> entries;
  if (const YAML::Node list = node["modules"]) {
    if (!list.IsSequence()) {
      return Error(ctx, prefix + ".modules", NodeText(list), "must be a list");
    }
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string path = fmt::format("{}.modules[{}]", prefix, i);
      ModuleParallel entry = all;
      WEFT_RETURN_IF_ERROR(ReadFields(ctx, list[i], path, ModuleParallelFields(), {}, entry));
      if (!list[i]["module"]) return Error(ctx, path + ".module", "null", "is required");
      WEFT_RETURN_IF_ERROR(CheckGpuProduct(ctx, path, entry));
      if (!model.FindModule(entry.module)) {
        std::vector<std::string> names;
        for (const auto& m : model.modules) names.push_back(m.name);
        return Error(ctx, path + ".module", entry.module,
                     fmt::format("must name a module of the model{}",
                                 DidYouMean(entry.module, names)));
      }
      entries.push_back(entry);
      sources.list_keys.push_back(keys_of(list[i]));
    }
    expand = true;
  }
  if (expand) {
    // One complete entry per module, in model order.
    for (const ModuleSpec& m : model.modules) {
      auto it = std::find_if(entries.begin(), entries.end(),
                             [&](const ModuleParallel& e) { return e.module == m.name; });
      ModuleParallel entry = it != entries.end() ? *it : all;
      entry.module = m.name;
      parallel.modules.push_back(entry);
      sources.list_index.push_back(it != entries.end() ? static_cast<int>(it - entries.begin())
                                                       : -1);
    }
    // Duplicates would be silently merged above: reject them.
    for (size_t i = 0; i < entries.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        if (entries[i].module == entries[j].module) {
          return Error(ctx, fmt::format("{}.modules[{}].module", prefix, i), entries[i].module,
                       fmt::format("must be unique (also {}.modules[{}])", prefix, j));
        }
      }
    }
  }
  return parallel;
}

StatusOr<TrainingSetup> ReadSetup(const Context& ctx, const YAML::Node& node,
                                  const ModelSpec& model, ParallelSources& sources) {
  TrainingSetup setup;
  WEFT_RETURN_IF_ERROR(ReadFields(ctx, node, "setup", SetupFields(), {"parallel"}, setup));
  if (const YAML::Node parallel = node["parallel"]) {
    WEFT_ASSIGN_OR_RETURN(setup.parallel, ReadParallel(ctx, parallel, model, sources));
  }
  return setup;
}

// ---------------------------------------------------------------------------------------------
// Model documents

std::string DefaultName(std::string_view source) {
  if (source.rfind("preset:", 0) == 0) return std::string(source.substr(7));
  return std::filesystem::path(std::string(source)).stem().string();
}

// Parses `text` as one strict YAML document (LoadStrictYaml: one document, aliases bounded,
// unique keys); every error names the file, line and column.
StatusOr<YAML::Node> LoadYaml(std::string_view text, const Context& ctx) {
  return LoadStrictYaml(text, ctx.source);
}

StatusOr<ModelPreset> ParseModelDocument(std::string_view text, const Context& ctx) {
  WEFT_ASSIGN_OR_RETURN(YAML::Node root, LoadYaml(text, ctx));
  try {
    WEFT_RETURN_IF_ERROR(RequireMap(ctx, root, ""));
    ModelPreset preset;
    ModelSpec& model = preset.model;
    model.name = DefaultName(ctx.source);
    for (const auto& kv : root) {
      const std::string key = kv.first.Scalar();
      if (key == "name") {
        WEFT_ASSIGN_OR_RETURN(model.name, ReadString(ctx, kv.second, key));
      } else if (key == "description") {
        WEFT_ASSIGN_OR_RETURN(model.description, ReadString(ctx, kv.second, key));
      } else if (key != "modules" && key != "edges" && key != "setup") {
        return UnknownKey(ctx, key, kv.second, key,
                          {"name", "description", "modules", "edges", "setup"});
      }
    }
    const YAML::Node modules = root["modules"];
    if (!modules || !modules.IsSequence()) {
      return Error(ctx, "modules", NodeText(modules), "must be a list of modules");
    }
    for (size_t i = 0; i < modules.size(); ++i) {
      WEFT_ASSIGN_OR_RETURN(ModuleSpec module,
                            ReadModule(ctx, modules[i], fmt::format("modules[{}]", i)));
      model.modules.push_back(std::move(module));
    }
    if (const YAML::Node edges = root["edges"]) {
      if (!edges.IsSequence()) return Error(ctx, "edges", NodeText(edges), "must be a list");
      for (size_t i = 0; i < edges.size(); ++i) {
        const std::string path = fmt::format("edges[{}]", i);
        const YAML::Node e = edges[i];
        ModuleEdge edge;
        if (e.IsScalar()) {  // "vision -> projector"
          const std::string& t = e.Scalar();
          const size_t arrow = t.find("->");
          if (arrow == std::string::npos) {
            return Error(ctx, path, t, "must be `from -> to` or {from: a, to: b}");
          }
          auto trim = [](std::string s) {
            s.erase(0, s.find_first_not_of(' '));
            s.erase(s.find_last_not_of(' ') + 1);
            return s;
          };
          edge.from = trim(t.substr(0, arrow));
          edge.to = trim(t.substr(arrow + 2));
        } else {
          const std::vector<Field<ModuleEdge>> fields = {{"from", &ModuleEdge::from},
                                                         {"to", &ModuleEdge::to}};
          WEFT_RETURN_IF_ERROR(ReadFields(ctx, e, path, fields, {}, edge));
          if (!e["from"] || !e["to"]) {
            return Error(ctx, path, NodeText(e), "must have both `from` and `to`");
          }
        }
        model.edges.push_back(std::move(edge));
      }
    }
    Status valid = model.Validate();
    if (!valid.ok()) return valid.WithPrefix(ctx.source);
    if (const YAML::Node setup = root["setup"]) {
      ParallelSources sources;
      WEFT_ASSIGN_OR_RETURN(TrainingSetup parsed, ReadSetup(ctx, setup, model, sources));
      Status setup_valid = parsed.Validate(model, [&sources](size_t entry, std::string_view field) {
        return sources.Path(entry, field);
      });
      if (!setup_valid.ok()) {
        return Status(setup_valid.code(),
                      fmt::format("{}: setup.{}", ctx.source, setup_valid.message()));
      }
      preset.setup = std::move(parsed);
    }
    return preset;
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError(fmt::format("{}:{}:{}: invalid YAML: {}", ctx.source,
                                            e.mark.line + 1, e.mark.column + 1, Shown(e.msg)));
  }
}

// ---------------------------------------------------------------------------------------------
// Cluster documents

const std::vector<Field<ClusterSpec>>& ClusterFields() {
  using C = ClusterSpec;
  static const std::vector<Field<C>> kFields = {
      {"name", &C::name},
      {"description", &C::description},
      {"num_nodes", &C::num_nodes, Unit::kNone, Range{0, 1 << 16}},
      {"gpus_per_node", &C::gpus_per_node, Unit::kNone, Range{0, 1024}},
      {"planning_cpu_cores", &C::planning_cpu_cores},
      {"host_memory_bytes_per_gpu", &C::host_memory_bytes_per_gpu, Unit::kBytes},
      {"host_memory_bytes_per_node", &C::host_memory_bytes_per_node, Unit::kBytes},
      {"host_link_bandwidth_bytes_per_s", &C::host_link_bandwidth_bytes_per_s, Unit::kBytesPerS},
      {"host_link_d2h_bandwidth_bytes_per_s", &C::host_link_d2h_bandwidth_bytes_per_s,
       Unit::kBytesPerS},
      {"host_bandwidth_bytes_per_s_per_node", &C::host_bandwidth_bytes_per_s_per_node,
       Unit::kBytesPerS},
      {"nic_shares_host_link", &C::nic_shares_host_link},
  };
  return kFields;
}

const std::vector<Field<GpuSpec>>& GpuFields() {
  using G = GpuSpec;
  static const std::vector<Field<G>> kFields = {
      {"name", &G::name},
      {"peak_bf16_flops_per_s", &G::peak_bf16_flops_per_s, Unit::kFlopsPerS},
      {"hbm_bandwidth_bytes_per_s", &G::hbm_bandwidth_bytes_per_s, Unit::kBytesPerS},
      {"memory_capacity_bytes", &G::memory_capacity_bytes, Unit::kBytes},
      {"reserved_memory_bytes", &G::reserved_memory_bytes, Unit::kBytes},
  };
  return kFields;
}

const std::vector<Field<LinkSpec>>& LinkFields() {
  using L = LinkSpec;
  static const std::vector<Field<L>> kFields = {
      {"bandwidth_bytes_per_s", &L::bandwidth_bytes_per_s, Unit::kBytesPerS},
      {"latency_s", &L::latency_s, Unit::kSeconds},
  };
  return kFields;
}

const std::vector<Field<EfficiencyFactors>>& EfficiencyFields() {
  using E = EfficiencyFactors;
  static const std::vector<Field<E>> kFields = {
      {"compute", &E::compute, Unit::kNone, Range{1e-3, 1}},
      {"memory", &E::memory, Unit::kNone, Range{1e-3, 1}},
      {"network", &E::network, Unit::kNone, Range{1e-3, 1}},
      {"memory_kernels", &E::memory_kernels, Unit::kNone, Range{1e-3, kMaxKernelClassEfficiency}},
      {"residual", &E::residual, Unit::kNone, Range{1e-3, kMaxKernelClassEfficiency, true}},
      {"embedding", &E::embedding, Unit::kNone, Range{1e-3, kMaxKernelClassEfficiency, true}}};
  return kFields;
}

const std::vector<std::string_view> kClusterSections = {"gpu", "intra_node", "inter_node",
                                                        "efficiency"};

template <typename T>
bool HasKey(const std::vector<Field<T>>& fields, std::string_view key) {
  return std::any_of(fields.begin(), fields.end(), [&](const auto& f) { return f.key == key; });
}

std::string MisplacedHint(std::string_view key, std::string_view path, bool cluster) {
  auto in = [&](std::initializer_list<std::string_view> keys) {
    return std::find(keys.begin(), keys.end(), key) != keys.end();
  };
  std::vector<std::string> sections;
  auto add = [&](bool known_there, std::string_view section) {
    // Only where the key was not found (path ends in ".key" or is "key" at the top).
    const std::string here = path.size() > key.size() + 1
                                 ? std::string(path.substr(0, path.size() - key.size() - 1))
                                 : std::string();
    std::string here_generic = here;
    for (size_t open = here_generic.find('['); open != std::string::npos;
         open = here_generic.find('[', open + 1)) {
      const size_t close = here_generic.find(']', open);
      if (close == std::string::npos) break;
      here_generic.replace(open + 1, close - open - 1, "");
    }
    if (known_there && here_generic != section && !(section == "the top level" && here.empty())) {
      sections.emplace_back(section);
    }
  };
  if (!cluster) {
    add(in({"name", "description", "modules", "edges", "setup"}), "the top level");
    add(HasKey(ModuleFields(), key) ||
            std::find(kModuleSpecialKeys.begin(), kModuleSpecialKeys.end(), key) !=
                kModuleSpecialKeys.end(),
        "modules[]");
    add(HasKey(SetupFields(), key) || key == "parallel", "setup");
    add(in({"num_microbatches", "global_batch_size", "all", "modules"}), "setup.parallel");
    add(HasKey(ModuleParallelFields(), key), "setup.parallel.modules[]");
  } else {
    add(HasKey(ClusterFields(), key) ||
            std::find(kClusterSections.begin(), kClusterSections.end(), key) !=
                kClusterSections.end(),
        "the top level");
    add(HasKey(GpuFields(), key), "gpu");
    add(HasKey(LinkFields(), key), "intra_node");
    add(HasKey(LinkFields(), key), "inter_node");
    add(HasKey(EfficiencyFields(), key), "efficiency");
  }
  if (sections.empty()) return "";
  std::string list;
  for (size_t i = 0; i < sections.size(); ++i) list += (i ? " or " : "") + sections[i];
  return fmt::format(" (`{}:` belongs under {}; check its indentation)", key, list);
}

StatusOr<ClusterSpec> ParseClusterDocument(std::string_view text, const Context& cluster_ctx) {
  Context ctx = cluster_ctx;
  ctx.cluster = true;
  WEFT_ASSIGN_OR_RETURN(YAML::Node root, LoadYaml(text, ctx));
  try {
    ClusterSpec cluster;
    cluster.name = DefaultName(ctx.source);
    WEFT_RETURN_IF_ERROR(ReadFields(ctx, root, "", ClusterFields(), kClusterSections, cluster));
    if (const YAML::Node n = root["gpu"]) {
      WEFT_RETURN_IF_ERROR(ReadFields(ctx, n, "gpu", GpuFields(), {}, cluster.gpu));
      if (!n["reserved_memory_bytes"]) {
        cluster.gpu.reserved_memory_bytes =
            DefaultReservedMemoryBytes(cluster.gpu.memory_capacity_bytes);
      }
    }
    if (const YAML::Node n = root["intra_node"]) {
      WEFT_RETURN_IF_ERROR(ReadFields(ctx, n, "intra_node", LinkFields(), {}, cluster.intra_node));
    }
    if (const YAML::Node n = root["inter_node"]) {
      WEFT_RETURN_IF_ERROR(ReadFields(ctx, n, "inter_node", LinkFields(), {}, cluster.inter_node));
    }
    if (const YAML::Node n = root["efficiency"]) {
      WEFT_RETURN_IF_ERROR(
          ReadFields(ctx, n, "efficiency", EfficiencyFields(), {}, cluster.efficiency));
    }
    Status valid = cluster.Validate();
    if (!valid.ok()) return valid.WithPrefix(ctx.source);
    return cluster;
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError(fmt::format("{}:{}:{}: invalid YAML: {}", ctx.source,
                                            e.mark.line + 1, e.mark.column + 1, Shown(e.msg)));
  }
}

// ---------------------------------------------------------------------------------------------
// Lookup

std::string_view KindFolder(PresetKind kind) {
  return kind == PresetKind::kModel ? "models" : "clusters";
}

// The preset's name: a top-level `name:` line if the file has one, else the embedded file
// name. (Preset names may contain dots, "qwen2.5-7b"; a file-name stem cut at the first dot
// would lose them, so such files state their name.)
std::string_view EmbeddedName(const internal::EmbeddedPreset& p) {
  std::string_view text = p.yaml;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    if (line.rfind("name:", 0) == 0) {
      line.remove_prefix(5);
      while (!line.empty() && (line.front() == ' ' || line.front() == '"')) line.remove_prefix(1);
      while (!line.empty() && (line.back() == ' ' || line.back() == '"' || line.back() == '\r')) {
        line.remove_suffix(1);
      }
      if (!line.empty()) return line;
    }
    if (eol == std::string_view::npos) break;
    text.remove_prefix(eol + 1);
  }
  return p.name;
}

const internal::EmbeddedPreset* FindEmbedded(PresetKind kind, std::string_view name) {
  for (const auto& p : internal::EmbeddedPresets()) {
    if (p.kind == KindFolder(kind) && EmbeddedName(p) == name) return &p;
  }
  return nullptr;
}

std::vector<std::string> AllPresetNames() {
  std::vector<std::string> names;
  for (const auto& p : internal::EmbeddedPresets()) names.emplace_back(EmbeddedName(p));
  return names;
}

// Whether `path` exists; false (not an exception) for a name the OS cannot even look up (too long,
// a component that is not a directory, ...).
bool PathExists(std::string_view path) {
  std::error_code ec;
  return std::filesystem::exists(std::filesystem::path(std::string(path)), ec) && !ec;
}

StatusOr<std::string> ReadTextFile(const std::string& path, std::string_view what) {
  WEFT_RETURN_IF_ERROR(CheckInputFile(path, kMaxSpecFileBytes, fmt::format("{} file", what)));
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(fmt::format("cannot open {} file '{}'", what, path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string UnknownPresetMessage(PresetKind kind, std::string_view name) {
  return fmt::format("unknown {} preset '{}'{}; `weft presets` lists them",
                     PresetKindName(kind), Shown(name), DidYouMean(name, PresetNames(kind)));
}

StatusOr<ModelPreset> LoadModelWithContext(std::string_view name_or_path, const Context& parent) {
  Context ctx;
  ctx.depth = parent.depth + 1;
  if (!LooksLikePath(name_or_path)) {
    if (const auto* p = FindEmbedded(PresetKind::kModel, name_or_path)) {
      ctx.source = fmt::format("preset:{}", EmbeddedName(*p));
      return ParseModelDocument(p->yaml, ctx);
    }
    if (!PathExists(name_or_path)) {
      return NotFoundError(UnknownPresetMessage(PresetKind::kModel, name_or_path));
    }
  }
  // A Hugging Face config.json (or a checkpoint directory holding one) at the top level.
  if (parent.depth < 0 && IsHfConfigPath(name_or_path)) {
    WEFT_ASSIGN_OR_RETURN(HfImport imported, LoadHfConfig(name_or_path));
    return std::move(imported.preset);
  }
  std::filesystem::path path{std::string(name_or_path)};
  if (path.is_relative() && !parent.base_dir.empty()) {
    std::filesystem::path candidate = std::filesystem::path(parent.base_dir) / path;
    if (PathExists(candidate.string())) path = candidate;
  }
  WEFT_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path.string(), "model"));
  if (parent.depth >= 0) {
    // A `use:` of a file that is not a model: say so without echoing any of its content (the
    // reference may point anywhere, e.g. ../../etc/passwd).
    bool is_model = false;
    try {
      const StatusOr<YAML::Node> doc = LoadStrictYaml(text, path.string());
      is_model = doc.ok() && doc->IsMap() && (*doc)["modules"] && (*doc)["modules"].IsSequence();
    } catch (const YAML::Exception&) {
    }
    if (!is_model) {
      return NotFoundError("is not a model file (a YAML mapping with a `modules:` list)");
    }
  }
  ctx.source = path.string();
  ctx.base_dir = path.parent_path().string();
  return ParseModelDocument(text, ctx);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Public API

std::string_view PresetKindName(PresetKind kind) {
  return kind == PresetKind::kModel ? "model" : "cluster";
}

Status TrainingSetup::Validate(const ModelSpec& model, const ParallelEntryPaths& paths) const {
  if (gpus <= 0) return InvalidArgumentError(fmt::format("gpus = {}; must be > 0", gpus));
  if (context_tokens < 0) {
    return InvalidArgumentError(
        fmt::format("context_tokens = {}; must be >= 0 (0 = unpacked)", context_tokens));
  }
  if (global_batch_sequences < 0) {
    return InvalidArgumentError(fmt::format(
        "global_batch_sequences = {}; must be >= 0 (0 = from data)", global_batch_sequences));
  }
  if (max_video_frames < 0 || max_video_frames > 100000) {
    return InvalidArgumentError(fmt::format(
        "max_video_frames = {}; must be in [0, 100000] (0 = no cap)", max_video_frames));
  }
  if (!(max_clip_s >= 0 && max_clip_s <= 86400)) {
    return InvalidArgumentError(
        fmt::format("max_clip_s = {}; must be in [0, 86400] s (0 = 16 s)", max_clip_s));
  }
  if (!long_clips.empty() && long_clips != "truncate" && long_clips != "split") {
    return InvalidArgumentError(
        fmt::format("long_clips = \"{}\"; must be truncate or split", long_clips.substr(0, 40)));
  }
  StatusOr<ClusterSpec> cluster_spec = LoadCluster(cluster);
  if (!cluster_spec.ok()) {
    return InvalidArgumentError(fmt::format("cluster = \"{}\"; must name a cluster preset or file ({})",
                                            cluster, cluster_spec.status().message()));
  }
  WEFT_ASSIGN_OR_RETURN(ClusterSpec sized, cluster_spec->WithTotalGpus(gpus));
  WEFT_RETURN_IF_ERROR(parallel.Validate(model, paths));
  // The GPUs are the setup's `gpus` (on its cluster), not the cluster preset's size: say so.
  return parallel.CheckGpusFit(sized.TotalGpus(),  // == gpus: a partial last node is kept
                               fmt::format("the setup's gpus = {} (cluster '{}')", gpus, cluster),
                               paths);
}

std::vector<std::string> PresetNames(PresetKind kind) {
  std::vector<std::string> names;
  for (const auto& p : internal::EmbeddedPresets()) {
    if (p.kind == KindFolder(kind)) names.emplace_back(EmbeddedName(p));
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<PresetInfo> ListPresets() {
  std::vector<PresetInfo> out;
  for (PresetKind kind : {PresetKind::kModel, PresetKind::kCluster}) {
    for (const std::string& name : PresetNames(kind)) {
      PresetInfo info{.kind = kind, .name = name, .description = ""};
      if (kind == PresetKind::kModel) {
        if (StatusOr<ModelPreset> m = LoadModel(name); m.ok()) {
          info.description = m->model.description;
          info.parameter_count = m->model.ParameterCount();
        } else {
          info.description = "invalid preset: " + m.status().message();
        }
      } else {
        if (StatusOr<ClusterSpec> c = LoadCluster(name); c.ok()) {
          info.description = c->description;
          info.total_gpus = c->TotalGpus();
        } else {
          info.description = "invalid preset: " + c.status().message();
        }
      }
      out.push_back(std::move(info));
    }
  }
  return out;
}

StatusOr<std::string> PresetYaml(std::string_view name) {
  for (PresetKind kind : {PresetKind::kModel, PresetKind::kCluster}) {
    if (const auto* p = FindEmbedded(kind, name)) return std::string(p->yaml);
  }
  return NotFoundError(fmt::format("unknown preset '{}'{}; `weft presets` lists them", name,
                                   DidYouMean(name, AllPresetNames())));
}

// Every error leaving the reader is one safe line, whatever path it took (OneLineStatus).
template <typename T>
StatusOr<T> OneLine(StatusOr<T> result) {
  if (result.ok()) return result;
  return OneLineStatus(result.status());
}

StatusOr<ModelPreset> LoadModel(std::string_view name_or_path) {
  Context root;
  root.depth = -1;
  return OneLine(LoadModelWithContext(name_or_path, root));
}

namespace {
StatusOr<ClusterSpec> LoadClusterUnchecked(std::string_view name_or_path) {
  if (!LooksLikePath(name_or_path)) {
    if (const auto* p = FindEmbedded(PresetKind::kCluster, name_or_path)) {
      return ParseClusterDocument(p->yaml,
                                  SourceContext(fmt::format("preset:{}", EmbeddedName(*p))));
    }
    if (!PathExists(name_or_path)) {
      return NotFoundError(UnknownPresetMessage(PresetKind::kCluster, name_or_path));
    }
  }
  const std::string path(name_or_path);
  WEFT_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path, "cluster"));
  return ParseClusterDocument(text, SourceContext(path));
}
}  // namespace

StatusOr<ClusterSpec> LoadCluster(std::string_view name_or_path) {
  return OneLine(LoadClusterUnchecked(name_or_path));
}

StatusOr<ModelPreset> ParseModelYaml(std::string_view text, std::string_view source) {
  Context ctx = SourceContext(std::string(source));
  if (source.rfind("preset:", 0) != 0) {
    ctx.base_dir = std::filesystem::path(std::string(source)).parent_path().string();
  }
  return OneLine(ParseModelDocument(text, ctx));
}

StatusOr<ClusterSpec> ParseClusterYaml(std::string_view text, std::string_view source) {
  return OneLine(ParseClusterDocument(text, SourceContext(std::string(source))));
}

std::string ModelToYaml(const ModelPreset& preset) {
  const ModelSpec& model = preset.model;
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << model.name;
  out << YAML::Key << "description" << YAML::Value << YAML::DoubleQuoted << model.description;
  out << YAML::Key << "modules" << YAML::Value << YAML::BeginSeq;
  for (const ModuleSpec& m : model.modules) EmitModule(out, m);
  out << YAML::EndSeq;
  if (!model.edges.empty()) {
    out << YAML::Key << "edges" << YAML::Value << YAML::BeginSeq;
    for (const ModuleEdge& e : model.edges) {
      out << YAML::Flow << YAML::BeginMap << YAML::Key << "from" << YAML::Value << e.from
          << YAML::Key << "to" << YAML::Value << e.to << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  if (preset.setup) {
    const TrainingSetup& s = *preset.setup;
    out << YAML::Key << "setup" << YAML::Value << YAML::BeginMap;
    for (const auto& field : SetupFields()) EmitField(out, field, s);
    out << YAML::Key << "parallel" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "num_microbatches" << YAML::Value << s.parallel.num_microbatches;
    out << YAML::Key << "global_batch_size" << YAML::Value << s.parallel.global_batch_size;
    if (!s.parallel.modules.empty()) {
      out << YAML::Key << "modules" << YAML::Value << YAML::BeginSeq;
      for (const ModuleParallel& p : s.parallel.modules) {
        out << YAML::Flow << YAML::BeginMap;
        for (const auto& field : ModuleParallelFields()) EmitField(out, field, p);
        out << YAML::EndMap;
      }
      out << YAML::EndSeq;
    }
    out << YAML::EndMap;
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::string ClusterToYaml(const ClusterSpec& cluster) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  for (const auto& field : ClusterFields()) {
    EmitField(out, field, cluster);
    if (field.key == "gpus_per_node") {
      out << YAML::Key << "gpu" << YAML::Value << YAML::BeginMap;
      for (const auto& f : GpuFields()) EmitField(out, f, cluster.gpu);
      out << YAML::EndMap;
      out << YAML::Key << "intra_node" << YAML::Value << YAML::Flow << YAML::BeginMap;
      for (const auto& f : LinkFields()) EmitField(out, f, cluster.intra_node);
      out << YAML::EndMap;
      out << YAML::Key << "inter_node" << YAML::Value << YAML::Flow << YAML::BeginMap;
      for (const auto& f : LinkFields()) EmitField(out, f, cluster.inter_node);
      out << YAML::EndMap;
      out << YAML::Key << "efficiency" << YAML::Value << YAML::Flow << YAML::BeginMap;
      for (const auto& f : EfficiencyFields()) EmitField(out, f, cluster.efficiency);
      out << YAML::EndMap;
    }
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace weft::spec
