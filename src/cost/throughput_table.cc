#include "weft/cost/throughput_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "weft/common/strict_input.h"
#include "weft/data/workload.h"

namespace weft::cost {
namespace {

using nlohmann::json;

// Reference instance of a native-resolution ViT (no fixed resize size): a 448 px square image.
constexpr int kNativeReferencePx = 448;

Status IncreasingPositive(const std::vector<double>& v, std::string_view field) {
  if (v.empty())
    return InvalidArgumentError(fmt::format("{} is empty; list at least one value", field));
  for (size_t i = 0; i < v.size(); ++i) {
    if (!std::isfinite(v[i]) || v[i] <= 0) {
      return InvalidArgumentError(
          fmt::format("{}[{}] = {}; values must be finite and > 0", field, i, v[i]));
    }
    if (i > 0 && v[i] <= v[i - 1]) {
      return InvalidArgumentError(
          fmt::format("{}[{}] = {} after {}; values must increase", field, i, v[i], v[i - 1]));
    }
  }
  return OkStatus();
}

// Piecewise-linear in x over the points' (x, y); outside, y of the nearest point × (x/x_end)^power.
template <typename Point, typename X, typename Y>
double Interpolate(const std::vector<Point>& points, double x, X get_x, Y get_y, double power) {
  if (points.empty() || x <= 0) return 0;
  const Point& first = points.front();
  const Point& last = points.back();
  if (x <= get_x(first)) return get_y(first) * std::pow(x / get_x(first), power);
  if (x >= get_x(last)) return get_y(last) * std::pow(x / get_x(last), power);
  auto it = std::lower_bound(points.begin(), points.end(), x,
                             [&](const Point& p, double v) { return get_x(p) < v; });
  const Point& hi = *it;
  const Point& lo = *(it - 1);
  const double t = (x - get_x(lo)) / (get_x(hi) - get_x(lo));
  return get_y(lo) + t * (get_y(hi) - get_y(lo));
}

int TableLayer(const spec::ModuleSpec& module) {
  return module.num_layers >= 3 ? module.num_layers / 2 : 0;
}

bool TpFits(const spec::ModuleSpec& module, int tp) {
  if (tp < 1 || module.num_attention_heads % tp != 0) return false;
  const int kv = module.num_kv_groups > 0 ? module.num_kv_groups : module.num_attention_heads;
  return kv % tp == 0 || tp % kv == 0;
}

StatusOr<int64_t> ReferenceTokensPerInstance(const spec::ModuleSpec& module) {
  if (module.kind == spec::ModuleKind::kAudioEncoder) return module.max_source_positions;
  spec::ImageMeta image;
  if (module.image_size_px <= 0) image.width_px = image.height_px = kNativeReferencePx;
  return data::VitPatchTokensForImage(module, image);
}

std::optional<ProfileRole> RoleOf(const spec::ModuleSpec& module) {
  if (module.IsEncoder()) return ProfileRole::kEncoder;
  if (module.kind == spec::ModuleKind::kLlm) return ProfileRole::kLlm;
  return std::nullopt;
}

template <typename T>
StatusOr<T> ReadNumber(const json& obj, std::string_view key, std::string_view path) {
  auto it = obj.find(std::string(key));
  if (it == obj.end()) return InvalidArgumentError(fmt::format("{}.{} is missing", path, key));
  if (!it->is_number())
    return InvalidArgumentError(fmt::format("{}.{} must be a number", path, key));
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < 0) {
    return InvalidArgumentError(fmt::format("{}.{} = {}; must be finite and >= 0", path, key, v));
  }
  if constexpr (std::is_integral_v<T>) {
    if (v != std::floor(v) || v > 1e9) {
      return InvalidArgumentError(fmt::format("{}.{} = {}; must be a whole number", path, key, v));
    }
  }
  return static_cast<T>(v);
}

}  // namespace

std::string_view ProfileRoleName(ProfileRole role) {
  return role == ProfileRole::kEncoder ? "encoder" : "llm";
}

Status ProfileGrid::Validate() const {
  WEFT_RETURN_IF_ERROR(IncreasingPositive(encoder_batch, "grid.encoder_batch"));
  WEFT_RETURN_IF_ERROR(IncreasingPositive(llm_seq_tokens, "grid.llm_seq"));
  std::vector<double> tps(tp.begin(), tp.end());
  return IncreasingPositive(tps, "grid.tp");
}

StatusOr<ThroughputTable> ThroughputTable::Analytical(const spec::ModelSpec& model,
                                                      const CostModel& cost_model,
                                                      const ProfileGrid& grid) {
  WEFT_RETURN_IF_ERROR(grid.Validate());
  ThroughputTable table;
  table.source_ = "analytical";
  table.model_name_ = model.name;
  table.grid_ = grid;
  table.provenance_json_ =
      json{{"device", cost_model.cluster().name},
           {"notes",
            "weft's operator-level cost model (docs/cost_model.md), TP collectives "
            "included; one middle layer per module"}}
          .dump();
  for (int m = 0; m < static_cast<int>(model.modules.size()); ++m) {
    const spec::ModuleSpec& module = model.modules[m];
    const auto role = RoleOf(module);
    if (!role) continue;
    ModuleTable t{.name = module.name, .module = m, .role = *role, .layers = module.num_layers};
    if (*role == ProfileRole::kEncoder) {
      WEFT_ASSIGN_OR_RETURN(t.tokens_per_instance, ReferenceTokensPerInstance(module));
    }
    const int layer = TableLayer(module);
    for (int tp : grid.tp) {
      if (!TpFits(module, tp)) continue;
      spec::ModuleParallel parallel{.module = module.name, .tp = tp};
      auto price = [&](const TokenShape& shape) {
        return cost_model.ModuleLayer(module, layer, shape, parallel, BackwardMode::kFull);
      };
      double units = 0;
      LayerCost largest;
      if (*role == ProfileRole::kEncoder) {
        auto& points = t.encoder[tp];
        for (double b : grid.encoder_batch) {
          const int instances = std::max(1, static_cast<int>(std::lround(b)));
          WEFT_ASSIGN_OR_RETURN(LayerCost c,
                                price(TokenShape::Uniform(t.tokens_per_instance, instances)));
          points.push_back({.batch = static_cast<double>(instances),
                            .forward_s = c.forward_s,
                            .backward_s = c.backward_input_s + c.backward_weight_s});
          units = instances;
          largest = std::move(c);
        }
      } else {
        auto& points = t.llm[tp];
        for (double s : grid.llm_seq_tokens) {
          const auto tokens = static_cast<int64_t>(std::llround(s));
          WEFT_ASSIGN_OR_RETURN(LayerCost c, price(TokenShape::Uniform(tokens, 1)));
          LlmPoint p{.seq_tokens = static_cast<double>(tokens)};
          for (const Op& op : c.ops) {
            if (op.kind != OpKind::kAttention) continue;
            (op.pass == spec::Pass::kForward ? p.attention_forward_s : p.attention_backward_s) +=
                op.latency_s;
          }
          // Output extras: the last layer minus a middle one at the same shape.
          if (module.num_layers >= 2) {
            WEFT_ASSIGN_OR_RETURN(LayerCost last,
                                  cost_model.ModuleLayer(module, module.num_layers - 1,
                                                         TokenShape::Uniform(tokens, 1), parallel,
                                                         BackwardMode::kFull));
            t.head[tp].push_back(
                {.seq_tokens = static_cast<double>(tokens),
                 .forward_s = std::max(0.0, last.forward_s - c.forward_s),
                 .backward_s = std::max(0.0, last.backward_input_s + last.backward_weight_s -
                                                 c.backward_input_s - c.backward_weight_s)});
          }
          p.linear_forward_s = std::max(0.0, c.forward_s - p.attention_forward_s);
          p.linear_backward_s =
              std::max(0.0, c.backward_input_s + c.backward_weight_s - p.attention_backward_s);
          points.push_back(p);
          units = static_cast<double>(tokens);
          largest = std::move(c);
        }
      }
      t.memory[tp] = {.parameters_per_layer = static_cast<double>(largest.parameters),
                      .activation_bytes_per_unit =
                          units > 0 ? largest.ActivationBytes(spec::Recompute::kNone) / units : 0};
    }
    if (!t.memory.empty()) table.modules_.push_back(std::move(t));
  }
  if (table.modules_.empty()) {
    return FailedPreconditionError(fmt::format(
        "model '{}' has no encoder or LLM module whose heads a grid TP divides; nothing to table",
        model.name));
  }
  return table;
}

StatusOr<ThroughputTable> ThroughputTable::ParseJson(std::string_view text,
                                                     std::string_view source,
                                                     const spec::ModelSpec& model) {
  auto fail = [&](const Status& s) {
    return OneLineStatus(InvalidArgumentError(fmt::format("{}: {}", source, s.message())));
  };
  json doc;
  if (Status s = ParseJsonRejectingDuplicates(text, &doc); !s.ok()) return fail(s);
  if (!doc.is_object()) return fail(InvalidArgumentError("the document must be a JSON object"));
  if (const auto* key =
          FirstUnknownKey(doc, {"schema", "model", "source", "provenance", "grid", "modules"})) {
    return fail(InvalidArgumentError(fmt::format("unknown key '{}' at the top level", *key)));
  }
  if (!doc.contains("schema") || doc["schema"] != kProfileSchema) {
    return fail(InvalidArgumentError(
        fmt::format("schema must be \"{}\" (a file of `python -m weft.profile` or `weft profile`)",
                    kProfileSchema)));
  }
  ThroughputTable table;
  if (!doc.contains("source") || !doc["source"].is_string() ||
      (doc["source"] != "measured" && doc["source"] != "analytical")) {
    return fail(InvalidArgumentError("source must be \"measured\" or \"analytical\""));
  }
  table.source_ = doc["source"].get<std::string>();
  if (doc.contains("model")) {
    if (!doc["model"].is_string()) return fail(InvalidArgumentError("model must be a string"));
    table.model_name_ = doc["model"].get<std::string>();
  }
  if (doc.contains("provenance")) {
    if (!doc["provenance"].is_object()) {
      return fail(InvalidArgumentError("provenance must be an object"));
    }
    table.provenance_json_ = doc["provenance"].dump();
  }
  if (!doc.contains("modules") || !doc["modules"].is_array() || doc["modules"].empty()) {
    return fail(InvalidArgumentError("modules must be a non-empty array"));
  }
  for (size_t i = 0; i < doc["modules"].size(); ++i) {
    const json& mj = doc["modules"][i];
    const std::string path = fmt::format("modules[{}]", i);
    if (!mj.is_object()) return fail(InvalidArgumentError(path + " must be an object"));
    if (const auto* key = FirstUnknownKey(mj, {"name", "role", "tokens_per_instance", "layers",
                                               "time", "memory", "head", "notes"})) {
      return fail(InvalidArgumentError(fmt::format("unknown key '{}' in {}", *key, path)));
    }
    if (!mj.contains("name") || !mj["name"].is_string()) {
      return fail(InvalidArgumentError(path + ".name must be a string"));
    }
    ModuleTable t;
    t.name = mj["name"].get<std::string>();
    const auto m = model.FindModule(t.name);
    if (!m) {
      return fail(InvalidArgumentError(
          fmt::format("{}.name = '{}': model '{}' has no such module", path, t.name, model.name)));
    }
    t.module = *m;
    const auto role = RoleOf(model.modules[*m]);
    if (!mj.contains("role") || !mj["role"].is_string() ||
        (mj["role"] != "encoder" && mj["role"] != "llm")) {
      return fail(InvalidArgumentError(path + ".role must be \"encoder\" or \"llm\""));
    }
    t.role = mj["role"] == "encoder" ? ProfileRole::kEncoder : ProfileRole::kLlm;
    if (!role || *role != t.role) {
      return fail(InvalidArgumentError(fmt::format("{}.role = '{}' but module '{}' is a {}", path,
                                                   ProfileRoleName(t.role), t.name,
                                                   spec::ModuleKindName(model.modules[*m].kind))));
    }
    if (mj.contains("layers")) {
      auto layers = ReadNumber<int>(mj, "layers", path);
      if (!layers.ok()) return fail(layers.status());
      t.layers = *layers;
    } else {
      t.layers = model.modules[*m].num_layers;
    }
    if (t.role == ProfileRole::kEncoder) {
      auto tpi = ReadNumber<int64_t>(mj, "tokens_per_instance", path);
      if (!tpi.ok()) return fail(tpi.status());
      if (*tpi <= 0) return fail(InvalidArgumentError(path + ".tokens_per_instance must be > 0"));
      t.tokens_per_instance = *tpi;
    }
    if (!mj.contains("time") || !mj["time"].is_array() || mj["time"].empty()) {
      return fail(InvalidArgumentError(path + ".time must be a non-empty array"));
    }
    for (size_t k = 0; k < mj["time"].size(); ++k) {
      const json& pj = mj["time"][k];
      const std::string pp = fmt::format("{}.time[{}]", path, k);
      if (!pj.is_object()) return fail(InvalidArgumentError(pp + " must be an object"));
      auto tp = ReadNumber<int>(pj, "tp", pp);
      if (!tp.ok()) return fail(tp.status());
      if (*tp < 1) return fail(InvalidArgumentError(pp + ".tp must be >= 1"));
      if (t.role == ProfileRole::kEncoder) {
        if (const auto* key = FirstUnknownKey(pj, {"tp", "batch", "forward_s", "backward_s"})) {
          return fail(InvalidArgumentError(fmt::format("unknown key '{}' in {}", *key, pp)));
        }
        EncoderPoint p;
        for (auto [key, out] : {std::pair{"batch", &p.batch}, std::pair{"forward_s", &p.forward_s},
                                std::pair{"backward_s", &p.backward_s}}) {
          auto v = ReadNumber<double>(pj, key, pp);
          if (!v.ok()) return fail(v.status());
          *out = *v;
        }
        if (p.batch <= 0) return fail(InvalidArgumentError(pp + ".batch must be > 0"));
        t.encoder[*tp].push_back(p);
      } else {
        if (const auto* key =
                FirstUnknownKey(pj, {"tp", "seq", "attention_forward_s", "attention_backward_s",
                                     "linear_forward_s", "linear_backward_s"})) {
          return fail(InvalidArgumentError(fmt::format("unknown key '{}' in {}", *key, pp)));
        }
        LlmPoint p;
        for (auto [key, out] : {std::pair{"seq", &p.seq_tokens},
                                std::pair{"attention_forward_s", &p.attention_forward_s},
                                std::pair{"attention_backward_s", &p.attention_backward_s},
                                std::pair{"linear_forward_s", &p.linear_forward_s},
                                std::pair{"linear_backward_s", &p.linear_backward_s}}) {
          auto v = ReadNumber<double>(pj, key, pp);
          if (!v.ok()) return fail(v.status());
          *out = *v;
        }
        if (p.seq_tokens <= 0) return fail(InvalidArgumentError(pp + ".seq must be > 0"));
        t.llm[*tp].push_back(p);
      }
    }
    // Sorted, no repeated grid point.
    auto check_sorted = [&](auto& series, auto get_x, std::string_view what) -> Status {
      for (auto& [tp, points] : series) {
        std::sort(points.begin(), points.end(),
                  [&](const auto& a, const auto& b) { return get_x(a) < get_x(b); });
        for (size_t k = 1; k < points.size(); ++k) {
          if (get_x(points[k]) == get_x(points[k - 1])) {
            return InvalidArgumentError(
                fmt::format("{}.time has {} {} twice at tp {}", path, what, get_x(points[k]), tp));
          }
        }
      }
      return OkStatus();
    };
    if (Status s = check_sorted(
            t.encoder, [](const EncoderPoint& p) { return p.batch; }, "batch");
        !s.ok()) {
      return fail(s);
    }
    if (Status s = check_sorted(
            t.llm, [](const LlmPoint& p) { return p.seq_tokens; }, "seq");
        !s.ok()) {
      return fail(s);
    }
    if (mj.contains("head")) {
      if (t.role != ProfileRole::kLlm || !mj["head"].is_array()) {
        return fail(InvalidArgumentError(path + ".head must be an array, on an LLM module only"));
      }
      for (size_t k = 0; k < mj["head"].size(); ++k) {
        const json& pj = mj["head"][k];
        const std::string pp = fmt::format("{}.head[{}]", path, k);
        if (!pj.is_object()) return fail(InvalidArgumentError(pp + " must be an object"));
        if (const auto* key = FirstUnknownKey(pj, {"tp", "seq", "forward_s", "backward_s"})) {
          return fail(InvalidArgumentError(fmt::format("unknown key '{}' in {}", *key, pp)));
        }
        auto tp = ReadNumber<int>(pj, "tp", pp);
        if (!tp.ok()) return fail(tp.status());
        HeadPoint h;
        for (auto [key, out] :
             {std::pair{"seq", &h.seq_tokens}, std::pair{"forward_s", &h.forward_s},
              std::pair{"backward_s", &h.backward_s}}) {
          auto v = ReadNumber<double>(pj, key, pp);
          if (!v.ok()) return fail(v.status());
          *out = *v;
        }
        if (h.seq_tokens <= 0) return fail(InvalidArgumentError(pp + ".seq must be > 0"));
        t.head[*tp].push_back(h);
      }
      for (auto& [tp, points] : t.head) {
        std::sort(points.begin(), points.end(), [](const HeadPoint& a, const HeadPoint& b) {
          return a.seq_tokens < b.seq_tokens;
        });
        for (size_t k = 1; k < points.size(); ++k) {
          if (points[k].seq_tokens == points[k - 1].seq_tokens) {
            return fail(InvalidArgumentError(
                fmt::format("{}.head has seq {} twice at tp {}", path, points[k].seq_tokens, tp)));
          }
        }
      }
    }
    if (!mj.contains("memory") || !mj["memory"].is_array()) {
      return fail(InvalidArgumentError(path + ".memory must be an array"));
    }
    for (size_t k = 0; k < mj["memory"].size(); ++k) {
      const json& pj = mj["memory"][k];
      const std::string pp = fmt::format("{}.memory[{}]", path, k);
      if (!pj.is_object()) return fail(InvalidArgumentError(pp + " must be an object"));
      const char* per_unit = t.role == ProfileRole::kEncoder
                                 ? "activation_bytes_per_layer_per_instance"
                                 : "activation_bytes_per_layer_per_token";
      if (const auto* key = FirstUnknownKey(
              pj, {"tp", "parameters_per_layer", per_unit, "state_linear_in_layers"})) {
        return fail(InvalidArgumentError(fmt::format("unknown key '{}' in {}", *key, pp)));
      }
      auto tp = ReadNumber<int>(pj, "tp", pp);
      if (!tp.ok()) return fail(tp.status());
      auto params = ReadNumber<double>(pj, "parameters_per_layer", pp);
      if (!params.ok()) return fail(params.status());
      auto act = ReadNumber<double>(pj, per_unit, pp);
      if (!act.ok()) return fail(act.status());
      if (t.memory.contains(*tp)) {
        return fail(InvalidArgumentError(fmt::format("{}.memory has tp {} twice", path, *tp)));
      }
      t.memory[*tp] = {.parameters_per_layer = *params, .activation_bytes_per_unit = *act};
    }
    for (const auto& [tp, points] : t.encoder) {
      if (!t.memory.contains(tp)) {
        return fail(
            InvalidArgumentError(fmt::format("{}: tp {} has times but no memory entry", path, tp)));
      }
    }
    for (const auto& [tp, points] : t.llm) {
      if (!t.memory.contains(tp)) {
        return fail(
            InvalidArgumentError(fmt::format("{}: tp {} has times but no memory entry", path, tp)));
      }
    }
    for (const auto& other : table.modules_) {
      if (other.module == t.module) {
        return fail(
            InvalidArgumentError(fmt::format("{}: module '{}' appears twice", path, t.name)));
      }
    }
    table.modules_.push_back(std::move(t));
  }
  std::sort(table.modules_.begin(), table.modules_.end(),
            [](const ModuleTable& a, const ModuleTable& b) { return a.module < b.module; });
  if (doc.contains("grid") && doc["grid"].is_object()) {
    const json& g = doc["grid"];
    auto read_list = [&](const char* key, auto* out) {
      if (!g.contains(key) || !g[key].is_array()) return;
      out->clear();
      for (const auto& v : g[key]) {
        if (v.is_number())
          out->push_back(v.get<typename std::decay_t<decltype(*out)>::value_type>());
      }
    };
    read_list("encoder_batch", &table.grid_.encoder_batch);
    read_list("llm_seq", &table.grid_.llm_seq_tokens);
    read_list("tp", &table.grid_.tp);
  }
  return table;
}

StatusOr<ThroughputTable> ThroughputTable::Load(const std::string& path,
                                                const spec::ModelSpec& model) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(fmt::format("{}: cannot open the profile file", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return ParseJson(buffer.str(), path, model);
}

std::string ThroughputTable::ToJson() const {
  json doc;
  doc["schema"] = kProfileSchema;
  doc["model"] = model_name_;
  doc["source"] = source_;
  doc["provenance"] = json::parse(provenance_json_);
  doc["grid"] = {
      {"encoder_batch", grid_.encoder_batch}, {"llm_seq", grid_.llm_seq_tokens}, {"tp", grid_.tp}};
  json modules = json::array();
  for (const ModuleTable& t : modules_) {
    json mj{{"name", t.name}, {"role", ProfileRoleName(t.role)}, {"layers", t.layers}};
    if (t.role == ProfileRole::kEncoder) mj["tokens_per_instance"] = t.tokens_per_instance;
    json time = json::array();
    for (const auto& [tp, points] : t.encoder) {
      for (const auto& p : points) {
        time.push_back({{"tp", tp},
                        {"batch", p.batch},
                        {"forward_s", p.forward_s},
                        {"backward_s", p.backward_s}});
      }
    }
    for (const auto& [tp, points] : t.llm) {
      for (const auto& p : points) {
        time.push_back({{"tp", tp},
                        {"seq", p.seq_tokens},
                        {"attention_forward_s", p.attention_forward_s},
                        {"attention_backward_s", p.attention_backward_s},
                        {"linear_forward_s", p.linear_forward_s},
                        {"linear_backward_s", p.linear_backward_s}});
      }
    }
    mj["time"] = std::move(time);
    if (!t.head.empty()) {
      json head = json::array();
      for (const auto& [tp, points] : t.head) {
        for (const auto& p : points) {
          head.push_back({{"tp", tp},
                          {"seq", p.seq_tokens},
                          {"forward_s", p.forward_s},
                          {"backward_s", p.backward_s}});
        }
      }
      mj["head"] = std::move(head);
    }
    json memory = json::array();
    for (const auto& [tp, mem] : t.memory) {
      memory.push_back({{"tp", tp},
                        {"parameters_per_layer", mem.parameters_per_layer},
                        {t.role == ProfileRole::kEncoder ? "activation_bytes_per_layer_per_instance"
                                                         : "activation_bytes_per_layer_per_token",
                         mem.activation_bytes_per_unit}});
    }
    mj["memory"] = std::move(memory);
    modules.push_back(std::move(mj));
  }
  doc["modules"] = std::move(modules);
  return doc.dump(1);
}

std::string ThroughputTable::ToText() const {
  std::string out = fmt::format("throughput tables of {} ({}), seconds per layer on one TP rank\n",
                                model_name_, source_);
  for (const ModuleTable& t : modules_) {
    out += fmt::format("\n{} ({}, {} layers{})\n", t.name, ProfileRoleName(t.role), t.layers,
                       t.role == ProfileRole::kEncoder
                           ? fmt::format(", {} tokens per instance", t.tokens_per_instance)
                           : "");
    if (t.role == ProfileRole::kEncoder) {
      out += fmt::format("  {:>4} {:>8} {:>12} {:>12} {:>16}\n", "tp", "batch", "forward_ms",
                         "backward_ms", "instances/s");
      for (const auto& [tp, points] : t.encoder) {
        for (const auto& p : points) {
          const double total = p.forward_s + p.backward_s;
          out +=
              fmt::format("  {:>4} {:>8g} {:>12.4f} {:>12.4f} {:>16.1f}\n", tp, p.batch,
                          p.forward_s * 1e3, p.backward_s * 1e3, total > 0 ? p.batch / total : 0.0);
        }
      }
    } else {
      out += fmt::format("  {:>4} {:>8} {:>12} {:>12} {:>12} {:>12}\n", "tp", "seq", "attn_fwd_ms",
                         "attn_bwd_ms", "lin_fwd_ms", "lin_bwd_ms");
      for (const auto& [tp, points] : t.llm) {
        for (const auto& p : points) {
          out +=
              fmt::format("  {:>4} {:>8g} {:>12.4f} {:>12.4f} {:>12.4f} {:>12.4f}\n", tp,
                          p.seq_tokens, p.attention_forward_s * 1e3, p.attention_backward_s * 1e3,
                          p.linear_forward_s * 1e3, p.linear_backward_s * 1e3);
        }
      }
    }
    for (const auto& [tp, mem] : t.memory) {
      out += fmt::format(
          "  tp {}: {:.4g} parameters per layer, {:.4g} activation bytes per layer "
          "per {}\n",
          tp, mem.parameters_per_layer, mem.activation_bytes_per_unit,
          t.role == ProfileRole::kEncoder ? "instance" : "token");
    }
  }
  return out;
}

const ModuleTable* ThroughputTable::Find(int module) const {
  for (const ModuleTable& t : modules_) {
    if (t.module == module) return &t;
  }
  return nullptr;
}

std::vector<int> ThroughputTable::TpValues(int module) const {
  std::vector<int> out;
  if (const ModuleTable* t = Find(module)) {
    for (const auto& [tp, mem] : t->memory) {
      if (t->encoder.contains(tp) || t->llm.contains(tp)) out.push_back(tp);
    }
  }
  return out;
}

StatusOr<LayerTime> ThroughputTable::EncoderLayerTime(int module, int tp, double batch) const {
  const ModuleTable* t = Find(module);
  if (!t || t->role != ProfileRole::kEncoder) {
    return NotFoundError(fmt::format("no encoder table for module {}", module));
  }
  auto it = t->encoder.find(tp);
  if (it == t->encoder.end()) {
    return NotFoundError(fmt::format("module '{}' has no table at tp {}", t->name, tp));
  }
  auto x = [](const EncoderPoint& p) { return p.batch; };
  return LayerTime{
      .forward_s = Interpolate(
          it->second, batch, x, [](const EncoderPoint& p) { return p.forward_s; }, 1),
      .backward_s = Interpolate(
          it->second, batch, x, [](const EncoderPoint& p) { return p.backward_s; }, 1)};
}

StatusOr<LayerTime> ThroughputTable::LlmLinearTime(int module, int tp, double tokens) const {
  const ModuleTable* t = Find(module);
  if (!t || t->role != ProfileRole::kLlm) {
    return NotFoundError(fmt::format("no LLM table for module {}", module));
  }
  auto it = t->llm.find(tp);
  if (it == t->llm.end()) {
    return NotFoundError(fmt::format("module '{}' has no table at tp {}", t->name, tp));
  }
  auto x = [](const LlmPoint& p) { return p.seq_tokens; };
  return LayerTime{
      .forward_s = Interpolate(
          it->second, tokens, x, [](const LlmPoint& p) { return p.linear_forward_s; }, 1),
      .backward_s = Interpolate(
          it->second, tokens, x, [](const LlmPoint& p) { return p.linear_backward_s; }, 1)};
}

StatusOr<LayerTime> ThroughputTable::LlmAttentionTime(int module,
                                                      int tp,
                                                      double segment_tokens) const {
  const ModuleTable* t = Find(module);
  if (!t || t->role != ProfileRole::kLlm) {
    return NotFoundError(fmt::format("no LLM table for module {}", module));
  }
  auto it = t->llm.find(tp);
  if (it == t->llm.end()) {
    return NotFoundError(fmt::format("module '{}' has no table at tp {}", t->name, tp));
  }
  auto x = [](const LlmPoint& p) { return p.seq_tokens; };
  return LayerTime{.forward_s = Interpolate(
                       it->second, segment_tokens, x,
                       [](const LlmPoint& p) { return p.attention_forward_s; }, 2),
                   .backward_s = Interpolate(
                       it->second, segment_tokens, x,
                       [](const LlmPoint& p) { return p.attention_backward_s; }, 2)};
}

LayerTime ThroughputTable::LlmHeadTime(int module, int tp, double tokens) const {
  const ModuleTable* t = Find(module);
  if (!t) return {};
  auto it = t->head.find(tp);
  if (it == t->head.end()) return {};
  auto x = [](const HeadPoint& p) { return p.seq_tokens; };
  return LayerTime{.forward_s = Interpolate(
                       it->second, tokens, x, [](const HeadPoint& p) { return p.forward_s; }, 1),
                   .backward_s = Interpolate(
                       it->second, tokens, x, [](const HeadPoint& p) { return p.backward_s; }, 1)};
}

bool ThroughputTable::HasHead(int module, int tp) const {
  const ModuleTable* t = Find(module);
  return t && t->head.contains(tp);
}

StatusOr<LayerMemory> ThroughputTable::Memory(int module, int tp) const {
  const ModuleTable* t = Find(module);
  if (!t) return NotFoundError(fmt::format("no table for module {}", module));
  auto it = t->memory.find(tp);
  if (it == t->memory.end()) {
    return NotFoundError(fmt::format("module '{}' has no memory entry at tp {}", t->name, tp));
  }
  return it->second;
}

}  // namespace weft::cost
