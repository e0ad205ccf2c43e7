#include "weft/plan/plan_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace weft::plan {

namespace {

using nlohmann::json;

constexpr graph::Recompute kAllRecompute[] = {graph::Recompute::kNone, graph::Recompute::kSelective,
                                              graph::Recompute::kFull, graph::Recompute::kOffload};

json StageToJson(const Action& a) {
  json j = json::object();
  j["module"] = a.stage.module;
  j["chunk"] = a.stage.chunk;
  j["mb"] = a.stage.microbatch;
  j["sub"] = a.stage.sub_microbatch;
  return j;
}

json ActionToJson(const Action& a) {
  json j = json::object();
  j["op"] = ActionKindName(a.kind);
  j["stage"] = StageToJson(a);
  if (IsCompute(a.kind)) {
    j["inputs"] = a.inputs;
    j["outputs"] = a.outputs;
    j["recompute"] = graph::RecomputeName(a.recompute);
    if (a.recompute_layers != std::array<int16_t, 4>{}) {
      j["recompute_layers"] = a.recompute_layers;  // [none, selective, full, offload] layers
    }
    j["activation_alloc_bytes"] = a.activation_alloc_bytes;
    j["activation_free_bytes"] = a.activation_free_bytes;
    j["latency_s"] = a.latency_s;
  } else {
    j["stage"]["pass"] = ActionKindName(ComputeKindOf(a.stage.pass));
    j["buffer"] = a.buffer;
    if (a.kind != ActionKind::kFree) j["peer"] = a.peer;
    if (IsP2pPost(a.kind)) j["group"] = a.group;
  }
  return j;
}

// Field access with path-named, one-line errors.
class Reader {
 public:
  static std::string Show(const json& v) {
    std::string s = v.dump();
    if (s.size() > 60) s = s.substr(0, 57) + "...";
    return s;
  }
  static Status Bad(const std::string& path, const json& v, std::string_view rule) {
    return InvalidArgumentError(fmt::format("{} = {}; {}", path, Show(v), rule));
  }
  static std::string Join(const std::string& path, std::string_view key) {
    return path.empty() ? std::string(key) : path + "." + std::string(key);
  }

  static StatusOr<const json*> Get(const json& obj, const std::string& path, std::string_view key,
                                   bool required = true) {
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (!required) return static_cast<const json*>(nullptr);
      return InvalidArgumentError(fmt::format("{}: missing", Join(path, key)));
    }
    return &*it;
  }

  template <typename Int>
  static Status Integer(const json& obj, const std::string& path, std::string_view key, Int* out,
                        bool required = true, int64_t min_value = INT64_MIN) {
    WEFT_ASSIGN_OR_RETURN(const json* v, Get(obj, path, key, required));
    if (v == nullptr) return OkStatus();
    if (!v->is_number_integer()) return Bad(Join(path, key), *v, "must be an integer");
    int64_t x = v->get<int64_t>();
    if (x < min_value) return Bad(Join(path, key), *v, fmt::format("must be >= {}", min_value));
    *out = static_cast<Int>(x);
    return OkStatus();
  }

  static Status Number(const json& obj, const std::string& path, std::string_view key, double* out,
                       bool required = true) {
    WEFT_ASSIGN_OR_RETURN(const json* v, Get(obj, path, key, required));
    if (v == nullptr) return OkStatus();
    if (!v->is_number()) return Bad(Join(path, key), *v, "must be a number");
    *out = v->get<double>();
    return OkStatus();
  }

  static Status String(const json& obj, const std::string& path, std::string_view key,
                       std::string* out, bool required = true) {
    WEFT_ASSIGN_OR_RETURN(const json* v, Get(obj, path, key, required));
    if (v == nullptr) return OkStatus();
    if (!v->is_string()) return Bad(Join(path, key), *v, "must be a string");
    *out = v->get<std::string>();
    return OkStatus();
  }

  static StatusOr<const json*> Array(const json& obj, const std::string& path, std::string_view key,
                                     bool required = true) {
    WEFT_ASSIGN_OR_RETURN(const json* v, Get(obj, path, key, required));
    if (v == nullptr) return v;
    if (!v->is_array()) return Bad(Join(path, key), *v, "must be an array");
    return v;
  }

  static StatusOr<const json*> Object(const json& obj, const std::string& path,
                                      std::string_view key) {
    WEFT_ASSIGN_OR_RETURN(const json* v, Get(obj, path, key));
    if (!v->is_object()) return Bad(Join(path, key), *v, "must be an object");
    return v;
  }

  static Status IntArray(const json& obj, const std::string& path, std::string_view key,
                         std::vector<int64_t>* out) {
    WEFT_ASSIGN_OR_RETURN(const json* arr, Array(obj, path, key));
    out->clear();
    for (size_t i = 0; i < arr->size(); ++i) {
      const json& e = (*arr)[i];
      if (!e.is_number_integer()) {
        return Bad(fmt::format("{}[{}]", Join(path, key), i), e, "must be an integer");
      }
      out->push_back(e.get<int64_t>());
    }
    return OkStatus();
  }
};

StatusOr<graph::Pass> ParsePass(const std::string& path, const json& v) {
  if (v.is_string()) {
    auto kind = ParseActionKind(v.get<std::string>());
    if (kind.ok() && IsCompute(*kind)) return PassOf(*kind);
  }
  return Reader::Bad(path, v, "must be one of forward, backward, backward_input, backward_weight");
}

StatusOr<Action> ActionFromJson(const json& j, const std::string& path) {
  if (!j.is_object()) return Reader::Bad(path, j, "must be an object");
  Action a;
  std::string op;
  WEFT_RETURN_IF_ERROR(Reader::String(j, path, "op", &op));
  auto kind = ParseActionKind(op);
  if (!kind.ok()) return InvalidArgumentError(path + ".op = " + kind.status().message());
  a.kind = *kind;

  const std::string stage_path = path + ".stage";
  WEFT_ASSIGN_OR_RETURN(const json* stage, Reader::Object(j, path, "stage"));
  WEFT_RETURN_IF_ERROR(Reader::Integer(*stage, stage_path, "module", &a.stage.module, true, 0));
  WEFT_RETURN_IF_ERROR(Reader::Integer(*stage, stage_path, "chunk", &a.stage.chunk, true, 0));
  WEFT_RETURN_IF_ERROR(Reader::Integer(*stage, stage_path, "mb", &a.stage.microbatch, true, 0));
  WEFT_RETURN_IF_ERROR(Reader::Integer(*stage, stage_path, "sub", &a.stage.sub_microbatch, true, 0));

  if (IsCompute(a.kind)) {
    a.stage.pass = PassOf(a.kind);
    WEFT_RETURN_IF_ERROR(Reader::IntArray(j, path, "inputs", &a.inputs));
    WEFT_RETURN_IF_ERROR(Reader::IntArray(j, path, "outputs", &a.outputs));
    std::string recompute = "none";
    WEFT_RETURN_IF_ERROR(Reader::String(j, path, "recompute", &recompute, false));
    bool found = false;
    for (graph::Recompute r : kAllRecompute) {
      if (graph::RecomputeName(r) == recompute) {
        a.recompute = r;
        found = true;
      }
    }
    if (!found) {
      return Reader::Bad(path + ".recompute", recompute,
                         "must be one of none, selective, full, offload");
    }
    WEFT_RETURN_IF_ERROR(
        Reader::Integer(j, path, "activation_alloc_bytes", &a.activation_alloc_bytes, false, 0));
    WEFT_RETURN_IF_ERROR(
        Reader::Integer(j, path, "activation_free_bytes", &a.activation_free_bytes, false, 0));
    WEFT_RETURN_IF_ERROR(Reader::Number(j, path, "latency_s", &a.latency_s, false));
    if (j.contains("recompute_layers")) {
      std::vector<int64_t> layers;
      WEFT_RETURN_IF_ERROR(Reader::IntArray(j, path, "recompute_layers", &layers));
      if (layers.size() != a.recompute_layers.size() ||
          std::any_of(layers.begin(), layers.end(),
                      [](int64_t n) { return n < 0 || n > 32767; })) {
        return Reader::Bad(path + ".recompute_layers", j["recompute_layers"],
                           "must be 4 layer counts [none, selective, full, offload], each 0..32767");
      }
      for (size_t i = 0; i < layers.size(); ++i) {
        a.recompute_layers[i] = static_cast<int16_t>(layers[i]);
      }
    }
  } else {
    WEFT_ASSIGN_OR_RETURN(const json* pass, Reader::Get(*stage, stage_path, "pass"));
    WEFT_ASSIGN_OR_RETURN(a.stage.pass, ParsePass(stage_path + ".pass", *pass));
    WEFT_RETURN_IF_ERROR(Reader::Integer(j, path, "buffer", &a.buffer, true, 0));
    if (a.kind != ActionKind::kFree) {
      WEFT_RETURN_IF_ERROR(Reader::Integer(j, path, "peer", &a.peer, true, 0));
    }
    if (IsP2pPost(a.kind)) WEFT_RETURN_IF_ERROR(Reader::Integer(j, path, "group", &a.group, false, -1));
  }
  return a;
}

StatusOr<RankPlan> RankFromJson(const json& j, const std::string& path, int index) {
  if (!j.is_object()) return Reader::Bad(path, j, "must be an object");
  RankPlan rank;
  int declared_index = index;
  WEFT_RETURN_IF_ERROR(Reader::Integer(j, path, "rank", &declared_index, true, 0));
  if (declared_index != index) {
    return Reader::Bad(path + ".rank", j["rank"], fmt::format("must equal its position ({})", index));
  }
  WEFT_RETURN_IF_ERROR(Reader::String(j, path, "label", &rank.label, false));
  WEFT_RETURN_IF_ERROR(
      Reader::Integer(j, path, "memory_capacity_bytes", &rank.memory_capacity_bytes, true, 0));
  WEFT_RETURN_IF_ERROR(Reader::Integer(j, path, "static_bytes", &rank.static_bytes, true, 0));
  WEFT_ASSIGN_OR_RETURN(const json* buffers, Reader::Array(j, path, "buffers"));
  for (size_t i = 0; i < buffers->size(); ++i) {
    const std::string bpath = fmt::format("{}.buffers[{}]", path, i);
    const json& bj = (*buffers)[i];
    if (!bj.is_object()) return Reader::Bad(bpath, bj, "must be an object");
    Buffer b;
    WEFT_RETURN_IF_ERROR(Reader::Integer(bj, bpath, "id", &b.id, true, 0));
    WEFT_RETURN_IF_ERROR(Reader::IntArray(bj, bpath, "shape", &b.tensor.shape));
    for (int64_t d : b.tensor.shape) {
      if (d < 0) return Reader::Bad(bpath + ".shape", bj["shape"], "dims must be >= 0");
    }
    std::string dtype;
    WEFT_RETURN_IF_ERROR(Reader::String(bj, bpath, "dtype", &dtype));
    auto parsed = ParseDType(dtype);
    if (!parsed.ok()) return InvalidArgumentError(bpath + ".dtype = " + parsed.status().message());
    b.tensor.dtype = *parsed;
    WEFT_RETURN_IF_ERROR(Reader::String(bj, bpath, "name", &b.name, false));
    rank.buffers.push_back(std::move(b));
  }
  WEFT_ASSIGN_OR_RETURN(const json* actions, Reader::Array(j, path, "actions"));
  rank.actions.reserve(actions->size());
  for (size_t i = 0; i < actions->size(); ++i) {
    WEFT_ASSIGN_OR_RETURN(Action a,
                          ActionFromJson((*actions)[i], fmt::format("{}.actions[{}]", path, i)));
    rank.actions.push_back(std::move(a));
  }
  return rank;
}

}  // namespace

std::string PlanToJson(const ExecutionPlan& plan) {
  std::ostringstream out;
  auto str = [](const auto& v) { return json(v).dump(); };
  out << "{\n";
  out << "  \"schema\": " << str(plan.version) << ",\n";
  out << "  \"model\": " << str(plan.model) << ",\n";
  out << "  \"strategy\": " << str(plan.strategy) << ",\n";
  out << "  \"iteration\": " << plan.iteration << ",\n";
  out << "  \"num_ranks\": " << plan.num_ranks() << ",\n";
  out << "  \"modules\": " << str(plan.module_names) << ",\n";
  out << "  \"ranks\": [";
  for (int r = 0; r < plan.num_ranks(); ++r) {
    const RankPlan& rank = plan.ranks[r];
    out << (r == 0 ? "\n" : ",\n") << "    {\n";
    out << "      \"rank\": " << r << ",\n";
    out << "      \"label\": " << str(rank.label) << ",\n";
    out << "      \"memory_capacity_bytes\": " << rank.memory_capacity_bytes << ",\n";
    out << "      \"static_bytes\": " << rank.static_bytes << ",\n";
    out << "      \"buffers\": [";
    for (size_t i = 0; i < rank.buffers.size(); ++i) {
      const Buffer& b = rank.buffers[i];
      json bj = {{"id", b.id}, {"shape", b.tensor.shape}, {"dtype", DTypeName(b.tensor.dtype)}};
      if (!b.name.empty()) bj["name"] = b.name;
      out << (i == 0 ? "\n" : ",\n") << "        " << bj.dump();
    }
    out << (rank.buffers.empty() ? "],\n" : "\n      ],\n");
    out << "      \"actions\": [";
    for (size_t i = 0; i < rank.actions.size(); ++i) {
      out << (i == 0 ? "\n" : ",\n") << "        " << ActionToJson(rank.actions[i]).dump();
    }
    out << (rank.actions.empty() ? "]\n" : "\n      ]\n");
    out << "    }";
  }
  out << (plan.ranks.empty() ? "]\n" : "\n  ]\n");
  out << "}\n";
  return out.str();
}

StatusOr<ExecutionPlan> PlanFromJson(std::string_view text) {
  json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    // Re-parse with exceptions only to obtain the position of the syntax error.
    try {
      json reparsed = json::parse(text.begin(), text.end());
      (void)reparsed;
    } catch (const json::parse_error& e) {
      return InvalidArgumentError(fmt::format("not valid JSON (byte {}): {}", e.byte, e.what()));
    }
    return InvalidArgumentError("not valid JSON");
  }
  if (!doc.is_object()) return Reader::Bad("(top level)", doc, "must be an object");
  ExecutionPlan plan;
  WEFT_RETURN_IF_ERROR(Reader::String(doc, "", "schema", &plan.version));
  if (plan.version != kPlanSchemaVersion) {
    return Reader::Bad("schema", doc["schema"], fmt::format("expected \"{}\"", kPlanSchemaVersion));
  }
  WEFT_RETURN_IF_ERROR(Reader::String(doc, "", "model", &plan.model, false));
  WEFT_RETURN_IF_ERROR(Reader::String(doc, "", "strategy", &plan.strategy, false));
  WEFT_RETURN_IF_ERROR(Reader::Integer(doc, "", "iteration", &plan.iteration, false, 0));
  if (const auto* modules = doc.contains("modules") ? &doc["modules"] : nullptr) {
    if (!modules->is_array()) return Reader::Bad("modules", *modules, "must be an array of strings");
    for (size_t i = 0; i < modules->size(); ++i) {
      if (!(*modules)[i].is_string()) {
        return Reader::Bad(fmt::format("modules[{}]", i), (*modules)[i], "must be a string");
      }
      plan.module_names.push_back((*modules)[i].get<std::string>());
    }
  }
  WEFT_ASSIGN_OR_RETURN(const json* ranks, Reader::Array(doc, "", "ranks"));
  int num_ranks = static_cast<int>(ranks->size());
  WEFT_RETURN_IF_ERROR(Reader::Integer(doc, "", "num_ranks", &num_ranks, false, 0));
  if (num_ranks != static_cast<int>(ranks->size())) {
    return Reader::Bad("num_ranks", doc["num_ranks"],
                       fmt::format("must equal the length of ranks ({})", ranks->size()));
  }
  for (size_t r = 0; r < ranks->size(); ++r) {
    WEFT_ASSIGN_OR_RETURN(RankPlan rank,
                          RankFromJson((*ranks)[r], fmt::format("ranks[{}]", r), static_cast<int>(r)));
    plan.ranks.push_back(std::move(rank));
  }
  return plan;
}

StatusOr<ExecutionPlan> ReadPlanFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(path + ": cannot open plan file");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  auto plan = PlanFromJson(buffer.str());
  if (!plan.ok()) return plan.status().WithPrefix(path);
  return plan;
}

}  // namespace weft::plan
