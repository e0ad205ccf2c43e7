#include "weft/plan/plan_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "weft/common/strict_input.h"
#include "weft/common/text.h"

namespace weft::plan {

namespace {

using nlohmann::json;

constexpr graph::Recompute kAllRecompute[] = {graph::Recompute::kNone, graph::Recompute::kSelective,
                                              graph::Recompute::kFull, graph::Recompute::kOffload};
constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxShapeDim = kMaxInt32;  // 2^31 - 1
constexpr size_t kMaxShapeRank = 8;

// Writes a plan's JSON by appending to one string. The bytes are those nlohmann::json's dump()
// gives for the same values (the writer used to build a json tree per buffer and action, which
// cost several times the rest of `weft plan --out`): objects list their keys in byte order
// (nlohmann's std::map), integers in decimal, doubles in nlohmann's own shortest round-trip form
// ("null" when not finite), strings escaped as dump() escapes them. Fixed text (keys and
// punctuation) is appended as whole literals.
class JsonWriter {
 public:
  explicit JsonWriter(std::string& out) : out_(out) {}

  void Raw(std::string_view text) { out_.append(text); }
  void Int(int64_t value) {
    if (value >= 0 && value < 10) {  // most stage fields and many ids
      out_.push_back(static_cast<char>('0' + value));
      return;
    }
    char buffer[24];
    const auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
    out_.append(buffer, static_cast<size_t>(end - buffer));
  }
  void Double(double value) {
    if (!std::isfinite(value)) {
      out_.append("null");
      return;
    }
    // What nlohmann's serializer calls for a double (its buffer holds 64 characters too).
    char buffer[64];
    const char* end = nlohmann::detail::to_chars(buffer, buffer + sizeof(buffer), value);
    out_.append(buffer, static_cast<size_t>(end - buffer));
  }
  void String(std::string_view text) {
    // Printable ASCII other than '"' and '\\' is written as is; anything else (escapes, UTF-8,
    // which dump() also checks) goes through nlohmann.
    const bool plain = std::all_of(text.begin(), text.end(), [](char c) {
      return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
    });
    if (!plain) {
      out_.append(json(text).dump());
      return;
    }
    out_.push_back('"');
    out_.append(text);
    out_.push_back('"');
  }
  template <typename Range>
  void IntList(const Range& values) {
    out_.push_back('[');
    bool first = true;
    for (const auto value : values) {
      if (!first) out_.push_back(',');
      first = false;
      Int(value);
    }
    out_.push_back(']');
  }

  // {"chunk":..,"mb":..,"module":..,["pass":"..",]["rank":..,]"sub":..}: a StageRef; with its
  // compute pass for non-compute actions and buffer ends, with its rank for buffer ends.
  void Stage(const StageRef& s, bool with_pass, const int* rank = nullptr) {
    Raw(R"({"chunk":)");
    Int(s.chunk);
    Raw(R"(,"mb":)");
    Int(s.microbatch);
    Raw(R"(,"module":)");
    Int(s.module);
    if (with_pass) {
      Raw(R"(,"pass":)");
      String(ActionKindName(ComputeKindOf(s.pass)));
    }
    if (rank != nullptr) {
      Raw(R"(,"rank":)");
      Int(*rank);
    }
    Raw(R"(,"sub":)");
    Int(s.sub_microbatch);
    Raw("}");
  }

  void WriteAction(const Action& a) {
    if (a.kind == ActionKind::kAllReduceGrads) {
      Raw(R"({"bytes":)");
      Int(a.bytes);
      Raw(R"(,"dp":)");
      Int(a.dp);
      Raw(R"(,"module":)");
      Int(a.stage.module);
      Raw(R"(,"op":)");
      String(ActionKindName(a.kind));
      if (!a.ranks.empty()) {
        Raw(R"(,"ranks":)");
        IntList(a.ranks);
      }
    } else if (IsCompute(a.kind)) {
      Raw(R"({"activation_alloc_bytes":)");
      Int(a.activation_alloc_bytes);
      Raw(R"(,"activation_free_bytes":)");
      Int(a.activation_free_bytes);
      Raw(R"(,"inputs":)");
      IntList(a.inputs);
      Raw(R"(,"instances":)");
      IntList(std::array<int32_t, 2>{a.instance_begin, a.instance_end});
      Raw(R"(,"latency_s":)");
      Double(a.latency_s);
      Raw(R"(,"op":)");
      String(ActionKindName(a.kind));
      Raw(R"(,"outputs":)");
      IntList(a.outputs);
      Raw(R"(,"recompute":)");
      String(graph::RecomputeName(a.recompute));
      if (a.recompute_layers != std::array<int16_t, 4>{}) {
        Raw(R"(,"recompute_layers":)");  // [none, selective, full, offload] layers
        IntList(a.recompute_layers);
      }
      Raw(R"(,"samples":)");
      IntList(a.samples);
      Raw(R"(,"stage":)");
      Stage(a.stage, /*with_pass=*/false);
    } else {
      Raw(R"({"buffer":)");
      Int(a.buffer);
      if (IsP2pPost(a.kind)) {
        Raw(R"(,"group":)");
        Int(a.group);
      }
      Raw(R"(,"op":)");
      String(ActionKindName(a.kind));
      if (a.kind != ActionKind::kFree) {
        Raw(R"(,"peer":)");
        Int(a.peer);
      }
      Raw(R"(,"stage":)");
      Stage(a.stage, /*with_pass=*/true);
    }
    Raw("}");
  }

  void WriteBuffer(const Buffer& b) {
    Raw(R"({"consumer":)");
    Stage(b.consumer.stage, /*with_pass=*/true, &b.consumer.rank);
    Raw(R"(,"dtype":)");
    String(DTypeName(b.tensor.dtype));
    Raw(R"(,"id":)");
    Int(b.id);
    if (!b.name.empty()) {
      Raw(R"(,"name":)");
      String(b.name);
    }
    Raw(R"(,"producer":)");
    Stage(b.producer.stage, /*with_pass=*/true, &b.producer.rank);
    Raw(R"(,"rows":)");
    Int(b.rows);
    Raw(R"(,"samples":)");
    IntList(b.samples);
    Raw(R"(,"shape":)");
    IntList(b.tensor.shape);
    Raw("}");
  }

 private:
  std::string& out_;
};

// Roughly the bytes PlanToJson writes (ints taken as 8 characters with their comma), so that the
// output is allocated about once instead of doubling through ~25 copies of a 15 MB plan.
size_t EstimatedJsonBytes(const ExecutionPlan& plan) {
  size_t bytes = 1024;
  for (const RankPlan& rank : plan.ranks) {
    bytes += 256;
    for (const Buffer& b : rank.buffers) bytes += 240 + b.name.size() + 8 * b.samples.size();
    for (const Action& a : rank.actions) {
      bytes += 200 + 8 * (a.inputs.size() + a.outputs.size() + a.samples.size() + a.ranks.size());
    }
  }
  return bytes;
}

// Rejects text nested deeper than `max_depth` before any tree is built: a scan of the brackets
// outside strings. (nlohmann's parser and the destructor of its tree recurse per level, so an
// 80,000-deep array would overflow the stack.)
Status CheckDepth(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
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
      if (++depth > max_depth) {
        return InvalidArgumentError(fmt::format(
            "byte {}: JSON nested deeper than {} levels (ReadOptions::max_depth)", i, max_depth));
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return OkStatus();
}

std::string MaxText(int64_t max_value) {
  if (max_value == kMaxPlanBytes) return fmt::format("{} (2^50)", max_value);
  return fmt::format("{}", max_value);
}

// Field access with path-named, one-line errors.
class Reader {
 public:
  explicit Reader(const ReadOptions& options) : options_(options) {}

  static std::string Show(const json& v) {
    std::string s;
    if (v.is_array() && v.size() > 16) {
      s = fmt::format("[... {} entries]", v.size());
    } else if (v.is_object() && v.size() > 16) {
      s = fmt::format("{{... {} keys}}", v.size());
    } else {
      s = v.dump();
    }
    if (s.size() > 60) s = s.substr(0, 57) + "...";
    return Shown(s);
  }
  // Input text in a message: printable ASCII as is, other bytes escaped (one line, no raw bytes).
  static std::string Shown(std::string_view s) {
    const bool plain = std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
    return plain ? std::string(s) : QuoteForMessage(s, 60);
  }
  static Status Bad(const std::string& path, const json& v, std::string_view rule) {
    return InvalidArgumentError(fmt::format("{} = {}; {}", path, Show(v), rule));
  }
  static std::string Join(const std::string& path, std::string_view key) {
    return path.empty() ? std::string(key) : path + "." + std::string(key);
  }

  // Every key of object `obj` is in `known` (a misspelt optional field is not silently dropped).
  static Status KnownKeys(const json& obj, const std::string& path,
                          const std::vector<std::string>& known) {
    const std::string* key = FirstUnknownKey(obj, known);
    if (key == nullptr) return OkStatus();
    return Bad(Join(path, Shown(*key)), obj[*key],
               fmt::format("unknown key{}", DidYouMean(*key, known)));
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

  // An integer in [min_value, max_value] (max_value must fit Int); values that do not fit are
  // refused, never wrapped.
  template <typename Int>
  static Status IntegerValue(const json& v, const std::string& path, Int* out, int64_t min_value,
                             int64_t max_value) {
    if (!v.is_number_integer()) return Bad(path, v, "must be an integer");
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(max_value)) {
        return Bad(path, v, fmt::format("must be <= {}", MaxText(max_value)));
      }
      if (static_cast<int64_t>(u) < min_value) {
        return Bad(path, v, fmt::format("must be >= {}", min_value));
      }
      *out = static_cast<Int>(u);
      return OkStatus();
    }
    const int64_t x = v.get<int64_t>();
    if (x < min_value) return Bad(path, v, fmt::format("must be >= {}", min_value));
    if (x > max_value) return Bad(path, v, fmt::format("must be <= {}", MaxText(max_value)));
    *out = static_cast<Int>(x);
    return OkStatus();
  }

  template <typename Int>
  static Status Integer(const json& obj, const std::string& path, std::string_view key, Int* out,
                        bool required, int64_t min_value, int64_t max_value) {
    static_assert(sizeof(Int) >= 4);
    WEFT_ASSIGN_OR_RETURN(const json* v, Get(obj, path, key, required));
    if (v == nullptr) return OkStatus();
    return IntegerValue(*v, Join(path, key), out, min_value, max_value);
  }
  // An int field (int32 range).
  static Status Int(const json& obj, const std::string& path, std::string_view key, int* out,
                    int64_t min_value = 0, bool required = true) {
    return Integer(obj, path, key, out, required, min_value, kMaxInt32);
  }
  // A byte count (or another int64 quantity) in [min_value, 2^50].
  static Status Bytes(const json& obj, const std::string& path, std::string_view key, int64_t* out,
                      bool required = true, int64_t min_value = 0) {
    return Integer(obj, path, key, out, required, min_value, kMaxPlanBytes);
  }

  static Status Number(const json& obj, const std::string& path, std::string_view key, double* out,
                       bool required = true) {
    WEFT_ASSIGN_OR_RETURN(const json* v, Get(obj, path, key, required));
    if (v == nullptr) return OkStatus();
    if (!v->is_number()) return Bad(Join(path, key), *v, "must be a number");
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < 0) return Bad(Join(path, key), *v, "must be finite and >= 0");
    *out = x;
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

  // An array of at most `limit` entries (`limit_name` names the ReadOptions field).
  static StatusOr<const json*> Array(const json& obj, const std::string& path, std::string_view key,
                                     int64_t limit, std::string_view limit_name,
                                     bool required = true) {
    WEFT_ASSIGN_OR_RETURN(const json* v, Get(obj, path, key, required));
    if (v == nullptr) return v;
    if (!v->is_array()) return Bad(Join(path, key), *v, "must be an array");
    if (static_cast<int64_t>(v->size()) > limit) {
      return InvalidArgumentError(fmt::format("{} has {} entries; more than {} ({})",
                                              Join(path, key), v->size(), limit, limit_name));
    }
    return v;
  }

  static StatusOr<const json*> Object(const json& obj, const std::string& path,
                                      std::string_view key) {
    WEFT_ASSIGN_OR_RETURN(const json* v, Get(obj, path, key));
    if (!v->is_object()) return Bad(Join(path, key), *v, "must be an object");
    return v;
  }

  // A list of integers in [min_value, max_value], at most max_list_length long.
  template <typename Int>
  Status IntList(const json& obj, const std::string& path, std::string_view key,
                 std::vector<Int>* out, int64_t min_value, int64_t max_value) const {
    WEFT_ASSIGN_OR_RETURN(const json* arr, Array(obj, path, key, options_.max_list_length,
                                                 "ReadOptions::max_list_length"));
    out->clear();
    out->reserve(arr->size());
    for (size_t i = 0; i < arr->size(); ++i) {
      Int x = 0;
      WEFT_RETURN_IF_ERROR(IntegerValue((*arr)[i], fmt::format("{}[{}]", Join(path, key), i), &x,
                                        min_value, max_value));
      out->push_back(x);
    }
    return OkStatus();
  }

  // Sample ids: int32 >= 0, strictly ascending.
  Status Samples(const json& obj, const std::string& path, std::vector<int32_t>* out) const {
    WEFT_RETURN_IF_ERROR(IntList(obj, path, "samples", out, 0, kMaxInt32));
    for (size_t i = 1; i < out->size(); ++i) {
      if ((*out)[i] <= (*out)[i - 1]) {
        return Bad(fmt::format("{}.samples[{}]", path, i), (*out)[i],
                   fmt::format("must be > the previous entry ({}): samples are strictly ascending",
                               (*out)[i - 1]));
      }
    }
    return OkStatus();
  }

  const ReadOptions& options() const { return options_; }

 private:
  const ReadOptions& options_;
};

StatusOr<graph::Pass> ParsePass(const std::string& path, const json& v) {
  if (v.is_string()) {
    auto kind = ParseActionKind(v.get<std::string>());
    if (kind.ok() && IsCompute(*kind)) return PassOf(*kind);
  }
  return Reader::Bad(path, v, "must be one of forward, backward, backward_input, backward_weight");
}

// What every part of a plan is checked against.
struct PlanContext {
  int num_ranks = 0;
  int num_modules = 0;
};

Status ModuleInRange(const json& obj, const std::string& path, int module, int num_modules) {
  if (module >= num_modules) {
    return Reader::Bad(Reader::Join(path, "module"), obj["module"],
                       fmt::format("must be < {} (the number of modules)", num_modules));
  }
  return OkStatus();
}

// {module, chunk, mb, sub} plus `pass` when with_pass.
Status StageFromJson(const json& j, const std::string& path, bool with_pass,
                     const PlanContext& ctx, StageRef* out) {
  if (!j.is_object()) return Reader::Bad(path, j, "must be an object");
  WEFT_RETURN_IF_ERROR(Reader::Int(j, path, "module", &out->module));
  WEFT_RETURN_IF_ERROR(ModuleInRange(j, path, out->module, ctx.num_modules));
  WEFT_RETURN_IF_ERROR(Reader::Int(j, path, "chunk", &out->chunk));
  WEFT_RETURN_IF_ERROR(Reader::Int(j, path, "mb", &out->microbatch));
  WEFT_RETURN_IF_ERROR(Reader::Int(j, path, "sub", &out->sub_microbatch));
  if (with_pass) {
    WEFT_ASSIGN_OR_RETURN(const json* pass, Reader::Get(j, path, "pass"));
    WEFT_ASSIGN_OR_RETURN(out->pass, ParsePass(path + ".pass", *pass));
  }
  return OkStatus();
}

Status RankInRange(const json& obj, const std::string& path, std::string_view key, int rank,
                   int num_ranks) {
  if (rank >= num_ranks) {
    return Reader::Bad(Reader::Join(path, key), obj[std::string(key)],
                       fmt::format("must be < {} (the number of ranks)", num_ranks));
  }
  return OkStatus();
}

Status EndFromJson(const json& buffer, const std::string& path, std::string_view key,
                   const PlanContext& ctx, BufferEnd* out) {
  WEFT_ASSIGN_OR_RETURN(const json* j, Reader::Object(buffer, path, key));
  const std::string end_path = Reader::Join(path, key);
  WEFT_RETURN_IF_ERROR(
      Reader::KnownKeys(*j, end_path, {"rank", "module", "chunk", "mb", "sub", "pass"}));
  WEFT_RETURN_IF_ERROR(Reader::Int(*j, end_path, "rank", &out->rank));
  WEFT_RETURN_IF_ERROR(RankInRange(*j, end_path, "rank", out->rank, ctx.num_ranks));
  return StageFromJson(*j, end_path, /*with_pass=*/true, ctx, &out->stage);
}

StatusOr<Buffer> BufferFromJson(const json& bj, const std::string& bpath, const Reader& reader,
                                const PlanContext& ctx) {
  if (!bj.is_object()) return Reader::Bad(bpath, bj, "must be an object");
  WEFT_RETURN_IF_ERROR(Reader::KnownKeys(
      bj, bpath, {"id", "shape", "dtype", "name", "producer", "consumer", "rows", "samples"}));
  Buffer b;
  WEFT_RETURN_IF_ERROR(Reader::Bytes(bj, bpath, "id", &b.id));
  WEFT_RETURN_IF_ERROR(reader.IntList(bj, bpath, "shape", &b.tensor.shape, 0, kMaxShapeDim));
  if (b.tensor.shape.size() > kMaxShapeRank) {
    return Reader::Bad(bpath + ".shape", bj["shape"],
                       fmt::format("must have at most {} dims", kMaxShapeRank));
  }
  std::string dtype;
  WEFT_RETURN_IF_ERROR(Reader::String(bj, bpath, "dtype", &dtype));
  auto parsed = ParseDType(dtype);
  if (!parsed.ok()) return InvalidArgumentError(bpath + ".dtype = " + parsed.status().message());
  b.tensor.dtype = *parsed;
  // Elements × dtype size, overflow-checked (each dim < 2^31, but up to 8 of them).
  int64_t bytes = DTypeBytes(b.tensor.dtype);
  for (int64_t d : b.tensor.shape) {
    if (__builtin_mul_overflow(bytes, d, &bytes) || bytes > kMaxPlanBytes) {
      return Reader::Bad(bpath + ".shape", bj["shape"],
                         fmt::format("{} bytes exceeds {} (2^50)", DTypeName(b.tensor.dtype),
                                     kMaxPlanBytes));
    }
  }
  WEFT_RETURN_IF_ERROR(Reader::String(bj, bpath, "name", &b.name, false));
  WEFT_RETURN_IF_ERROR(EndFromJson(bj, bpath, "producer", ctx, &b.producer));
  WEFT_RETURN_IF_ERROR(EndFromJson(bj, bpath, "consumer", ctx, &b.consumer));
  WEFT_RETURN_IF_ERROR(reader.Samples(bj, bpath, &b.samples));
  WEFT_RETURN_IF_ERROR(Reader::Bytes(bj, bpath, "rows", &b.rows, true, -1));
  return b;
}

StatusOr<Action> ActionFromJson(const json& j, const std::string& path, const Reader& reader,
                                const PlanContext& ctx) {
  if (!j.is_object()) return Reader::Bad(path, j, "must be an object");
  WEFT_RETURN_IF_ERROR(Reader::KnownKeys(
      j, path,
      {"op", "stage", "module", "bytes", "dp", "group", "ranks", "peer", "buffer", "inputs",
       "outputs", "instances", "samples", "recompute", "recompute_layers",
       "activation_alloc_bytes", "activation_free_bytes", "latency_s"}));
  Action a;
  std::string op;
  WEFT_RETURN_IF_ERROR(Reader::String(j, path, "op", &op));
  auto kind = ParseActionKind(op);
  if (!kind.ok()) return InvalidArgumentError(path + ".op = " + kind.status().message());
  a.kind = *kind;

  if (a.kind == ActionKind::kAllReduceGrads) {
    WEFT_RETURN_IF_ERROR(Reader::Int(j, path, "module", &a.stage.module));
    WEFT_RETURN_IF_ERROR(ModuleInRange(j, path, a.stage.module, ctx.num_modules));
    WEFT_RETURN_IF_ERROR(Reader::Bytes(j, path, "bytes", &a.bytes));
    WEFT_RETURN_IF_ERROR(Reader::Int(j, path, "dp", &a.dp, 1));
    if (j.contains("ranks")) {
      WEFT_RETURN_IF_ERROR(
          reader.IntList(j, path, "ranks", &a.ranks, 0, std::max(0, ctx.num_ranks - 1)));
    }
    return a;
  }

  WEFT_ASSIGN_OR_RETURN(const json* stage, Reader::Object(j, path, "stage"));
  WEFT_RETURN_IF_ERROR(
      Reader::KnownKeys(*stage, path + ".stage", {"module", "chunk", "mb", "sub", "pass"}));
  WEFT_RETURN_IF_ERROR(
      StageFromJson(*stage, path + ".stage", /*with_pass=*/!IsCompute(a.kind), ctx, &a.stage));

  if (IsCompute(a.kind)) {
    a.stage.pass = PassOf(a.kind);
    WEFT_RETURN_IF_ERROR(reader.IntList(j, path, "inputs", &a.inputs, 0, kMaxPlanBytes));
    WEFT_RETURN_IF_ERROR(reader.IntList(j, path, "outputs", &a.outputs, 0, kMaxPlanBytes));
    WEFT_RETURN_IF_ERROR(reader.Samples(j, path, &a.samples));
    std::vector<int32_t> instances;
    WEFT_RETURN_IF_ERROR(reader.IntList(j, path, "instances", &instances, 0, kMaxInt32));
    if (instances.size() != 2 || instances[0] > instances[1]) {
      return Reader::Bad(path + ".instances", j["instances"], "must be [begin, end] with begin <= end");
    }
    a.instance_begin = instances[0];
    a.instance_end = instances[1];
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
        Reader::Bytes(j, path, "activation_alloc_bytes", &a.activation_alloc_bytes, false));
    WEFT_RETURN_IF_ERROR(
        Reader::Bytes(j, path, "activation_free_bytes", &a.activation_free_bytes, false));
    WEFT_RETURN_IF_ERROR(Reader::Number(j, path, "latency_s", &a.latency_s, false));
    if (j.contains("recompute_layers")) {
      std::vector<int32_t> layers;
      WEFT_RETURN_IF_ERROR(reader.IntList(j, path, "recompute_layers", &layers, 0, 32767));
      if (layers.size() != a.recompute_layers.size()) {
        return Reader::Bad(path + ".recompute_layers", j["recompute_layers"],
                           "must be 4 layer counts [none, selective, full, offload], each 0..32767");
      }
      for (size_t i = 0; i < layers.size(); ++i) {
        a.recompute_layers[i] = static_cast<int16_t>(layers[i]);
      }
    }
  } else {
    WEFT_RETURN_IF_ERROR(Reader::Bytes(j, path, "buffer", &a.buffer));
    if (a.kind != ActionKind::kFree) {
      WEFT_RETURN_IF_ERROR(Reader::Int(j, path, "peer", &a.peer));
      WEFT_RETURN_IF_ERROR(RankInRange(j, path, "peer", a.peer, ctx.num_ranks));
    }
    if (IsP2pPost(a.kind)) WEFT_RETURN_IF_ERROR(Reader::Int(j, path, "group", &a.group, -1, false));
  }
  return a;
}

StatusOr<RankPlan> RankFromJson(const json& j, const std::string& path, int index,
                                const Reader& reader, const PlanContext& ctx) {
  if (!j.is_object()) return Reader::Bad(path, j, "must be an object");
  WEFT_RETURN_IF_ERROR(Reader::KnownKeys(j, path, {"rank", "label", "memory_capacity_bytes",
                                                   "static_bytes", "buffers", "actions"}));
  RankPlan rank;
  int declared_index = index;
  WEFT_RETURN_IF_ERROR(Reader::Int(j, path, "rank", &declared_index));
  if (declared_index != index) {
    return Reader::Bad(path + ".rank", j["rank"], fmt::format("must equal its position ({})", index));
  }
  WEFT_RETURN_IF_ERROR(Reader::String(j, path, "label", &rank.label, false));
  WEFT_RETURN_IF_ERROR(Reader::Bytes(j, path, "memory_capacity_bytes", &rank.memory_capacity_bytes));
  WEFT_RETURN_IF_ERROR(Reader::Bytes(j, path, "static_bytes", &rank.static_bytes));
  WEFT_ASSIGN_OR_RETURN(const json* buffers,
                        Reader::Array(j, path, "buffers", reader.options().max_buffers_per_rank,
                                      "ReadOptions::max_buffers_per_rank"));
  rank.buffers.reserve(buffers->size());
  for (size_t i = 0; i < buffers->size(); ++i) {
    WEFT_ASSIGN_OR_RETURN(Buffer b, BufferFromJson((*buffers)[i],
                                                   fmt::format("{}.buffers[{}]", path, i), reader,
                                                   ctx));
    rank.buffers.push_back(std::move(b));
  }
  WEFT_ASSIGN_OR_RETURN(const json* actions,
                        Reader::Array(j, path, "actions", reader.options().max_actions_per_rank,
                                      "ReadOptions::max_actions_per_rank"));
  rank.actions.reserve(actions->size());
  for (size_t i = 0; i < actions->size(); ++i) {
    WEFT_ASSIGN_OR_RETURN(Action a, ActionFromJson((*actions)[i],
                                                   fmt::format("{}.actions[{}]", path, i), reader,
                                                   ctx));
    rank.actions.push_back(std::move(a));
  }
  return rank;
}

Status SizeWithinLimit(int64_t size_bytes, const ReadOptions& options) {
  if (size_bytes > options.max_file_bytes) {
    return InvalidArgumentError(fmt::format("{} bytes; larger than {} bytes (ReadOptions::max_file_bytes)",
                                            size_bytes, options.max_file_bytes));
  }
  return OkStatus();
}

}  // namespace

std::string PlanToJson(const ExecutionPlan& plan) {
  std::string out;
  out.reserve(EstimatedJsonBytes(plan));
  JsonWriter w(out);
  w.Raw("{\n");
  w.Raw("  \"schema\": ");
  w.String(plan.version);
  w.Raw(",\n  \"model\": ");
  w.String(plan.model);
  w.Raw(",\n  \"strategy\": ");
  w.String(plan.strategy);
  w.Raw(",\n  \"iteration\": ");
  w.Int(plan.iteration);
  w.Raw(",\n  \"replica\": ");
  w.Int(plan.replica);
  w.Raw(",\n  \"num_replicas\": ");
  w.Int(plan.num_replicas);
  w.Raw(",\n  \"num_ranks\": ");
  w.Int(plan.num_ranks());
  w.Raw(",\n  \"modules\": [");
  for (size_t m = 0; m < plan.module_names.size(); ++m) {
    if (m > 0) w.Raw(",");
    w.String(plan.module_names[m]);
  }
  w.Raw("],\n");
  w.Raw("  \"ranks\": [");
  for (int r = 0; r < plan.num_ranks(); ++r) {
    const RankPlan& rank = plan.ranks[r];
    w.Raw(r == 0 ? "\n" : ",\n");
    w.Raw("    {\n      \"rank\": ");
    w.Int(r);
    w.Raw(",\n      \"label\": ");
    w.String(rank.label);
    w.Raw(",\n      \"memory_capacity_bytes\": ");
    w.Int(rank.memory_capacity_bytes);
    w.Raw(",\n      \"static_bytes\": ");
    w.Int(rank.static_bytes);
    w.Raw(",\n      \"buffers\": [");
    for (size_t i = 0; i < rank.buffers.size(); ++i) {
      w.Raw(i == 0 ? "\n        " : ",\n        ");
      w.WriteBuffer(rank.buffers[i]);
    }
    w.Raw(rank.buffers.empty() ? "],\n" : "\n      ],\n");
    w.Raw("      \"actions\": [");
    for (size_t i = 0; i < rank.actions.size(); ++i) {
      w.Raw(i == 0 ? "\n        " : ",\n        ");
      w.WriteAction(rank.actions[i]);
    }
    w.Raw(rank.actions.empty() ? "]\n" : "\n      ]\n");
    w.Raw("    }");
  }
  w.Raw(plan.ranks.empty() ? "]\n" : "\n  ]\n");
  w.Raw("}\n");
  return out;
}

namespace {
StatusOr<ExecutionPlan> PlanFromJsonUnchecked(std::string_view text, const ReadOptions& options);
}  // namespace

// Every error leaving the reader is one safe line (OneLineStatus).
StatusOr<ExecutionPlan> PlanFromJson(std::string_view text, const ReadOptions& options) {
  StatusOr<ExecutionPlan> plan = PlanFromJsonUnchecked(text, options);
  if (!plan.ok()) return OneLineStatus(plan.status());
  return plan;
}

namespace {
StatusOr<ExecutionPlan> PlanFromJsonUnchecked(std::string_view text, const ReadOptions& options) {
  WEFT_RETURN_IF_ERROR(SizeWithinLimit(static_cast<int64_t>(text.size()), options));
  WEFT_RETURN_IF_ERROR(CheckDepth(text, options.max_depth));
  json doc;
  WEFT_RETURN_IF_ERROR(ParseJsonRejectingDuplicates(text, &doc));
  if (!doc.is_object()) return Reader::Bad("(top level)", doc, "must be an object");
  WEFT_RETURN_IF_ERROR(Reader::KnownKeys(doc, "", {"schema", "model", "strategy", "iteration",
                                                   "replica", "num_replicas", "num_ranks",
                                                   "modules", "ranks"}));
  const Reader reader(options);
  ExecutionPlan plan;
  WEFT_RETURN_IF_ERROR(Reader::String(doc, "", "schema", &plan.version));
  if (plan.version == kPlanSchemaVersionV1) {
    return InvalidArgumentError(fmt::format(
        "{} is no longer read; regenerate it with `weft plan ... --out FILE` (writes {})",
        kPlanSchemaVersionV1, kPlanSchemaVersion));
  }
  if (plan.version != kPlanSchemaVersion) {
    return Reader::Bad("schema", doc["schema"], fmt::format("expected \"{}\"", kPlanSchemaVersion));
  }
  WEFT_RETURN_IF_ERROR(Reader::String(doc, "", "model", &plan.model, false));
  WEFT_RETURN_IF_ERROR(Reader::String(doc, "", "strategy", &plan.strategy, false));
  WEFT_RETURN_IF_ERROR(Reader::Bytes(doc, "", "iteration", &plan.iteration, false));
  WEFT_RETURN_IF_ERROR(Reader::Int(doc, "", "num_replicas", &plan.num_replicas, 1));
  WEFT_RETURN_IF_ERROR(Reader::Int(doc, "", "replica", &plan.replica));
  if (plan.replica >= plan.num_replicas) {
    return Reader::Bad("replica", doc["replica"],
                       fmt::format("must be < num_replicas ({})", plan.num_replicas));
  }
  WEFT_ASSIGN_OR_RETURN(const json* modules,
                        Reader::Array(doc, "", "modules", options.max_modules,
                                      "ReadOptions::max_modules"));
  for (size_t i = 0; i < modules->size(); ++i) {
    if (!(*modules)[i].is_string()) {
      return Reader::Bad(fmt::format("modules[{}]", i), (*modules)[i], "must be a string");
    }
    plan.module_names.push_back((*modules)[i].get<std::string>());
  }
  WEFT_ASSIGN_OR_RETURN(const json* ranks,
                        Reader::Array(doc, "", "ranks", options.max_ranks, "ReadOptions::max_ranks"));
  int num_ranks = static_cast<int>(ranks->size());
  WEFT_RETURN_IF_ERROR(Reader::Integer(doc, "", "num_ranks", &num_ranks, false, 0, kMaxInt32));
  if (num_ranks != static_cast<int>(ranks->size())) {
    return Reader::Bad("num_ranks", doc["num_ranks"],
                       fmt::format("must equal the length of ranks ({})", ranks->size()));
  }
  const PlanContext ctx{.num_ranks = num_ranks,
                        .num_modules = static_cast<int>(plan.module_names.size())};
  plan.ranks.reserve(ranks->size());
  for (size_t r = 0; r < ranks->size(); ++r) {
    WEFT_ASSIGN_OR_RETURN(RankPlan rank, RankFromJson((*ranks)[r], fmt::format("ranks[{}]", r),
                                                      static_cast<int>(r), reader, ctx));
    plan.ranks.push_back(std::move(rank));
  }
  return plan;
}
}  // namespace

StatusOr<ExecutionPlan> ReadPlanFile(const std::string& path, const ReadOptions& options) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return NotFoundError(path + ": cannot open plan file (" + ec.message() + ")");
  Status size_ok = SizeWithinLimit(static_cast<int64_t>(size), options);
  if (!size_ok.ok()) return size_ok.WithPrefix(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(path + ": cannot open plan file");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  auto plan = PlanFromJson(buffer.str(), options);
  if (!plan.ok()) return plan.status().WithPrefix(path);
  return plan;
}

}  // namespace weft::plan
