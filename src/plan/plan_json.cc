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

#include "json_io.h"
#include "weft/common/strict_input.h"
#include "weft/common/text.h"

namespace weft::plan {

namespace {

using internal::CheckDepth;
using internal::json;
using internal::kMaxInt32;
using internal::Reader;

constexpr int64_t kMaxShapeDim = kMaxInt32;  // 2^31 - 1
constexpr size_t kMaxShapeRank = 8;

// The plan's own parts (stages, actions, buffers, data tables) on top of the shared writer.
class PlanWriter : public internal::JsonWriter {
 public:
  using JsonWriter::JsonWriter;

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
      String(spec::RecomputeName(a.recompute));
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

  // ,\n  "data": {samples, sequences, microbatches, ranks}: one sample / sequence / microbatch /
  // rank a line, keys in byte order like every object of the plan.
  void WriteData(const PlanData& d) {
    auto list = [&](std::string_view key, const auto& entries, auto write_entry, bool last) {
      Raw("    \"");
      Raw(key);
      Raw("\": [");
      for (size_t i = 0; i < entries.size(); ++i) {
        Raw(i == 0 ? "\n      " : ",\n      ");
        write_entry(entries[i], i);
      }
      Raw(entries.empty() ? "]" : "\n    ]");
      Raw(last ? "\n" : ",\n");
    };
    Raw(",\n  \"data\": {\n");
    list("samples", d.samples, [&](const SampleData& s, size_t) {
      Raw(R"({"id":)");
      Int(s.id);
      Raw(R"(,"text_tokens":)");
      Int(s.text_tokens);
      Raw("}");
    }, false);
    list("sequences", d.sequences, [&](const SequenceData& q, size_t) {
      Raw(R"({"llm_tokens":)");
      Int(q.llm_tokens);
      Raw(R"(,"samples":)");
      IntList(q.samples);
      Raw("}");
    }, false);
    list("microbatches", d.microbatches, [&](const MicrobatchData& m, size_t) {
      Raw(R"({"instances":[)");
      for (size_t module = 0; module < m.instances.size(); ++module) {
        if (module > 0) Raw(",");
        Raw("[");
        for (size_t k = 0; k < m.instances[module].size(); ++k) {
          if (k > 0) Raw(",");
          WriteInstance(m.instances[module][k]);
        }
        Raw("]");
      }
      Raw(R"(],"microbatch":)");
      Int(m.microbatch);
      Raw(R"(,"replica":)");
      Int(m.replica);
      Raw(R"(,"sequences":)");
      IntList(m.sequences);
      Raw("}");
    }, false);
    list("ranks", d.ranks, [&](const RankData& r, size_t index) {
      Raw(R"({"chunks":[)");
      for (size_t c = 0; c < r.chunks.size(); ++c) {
        const ChunkData& chunk = r.chunks[c];
        Raw(c == 0 ? R"({"chunk":)" : R"(,{"chunk":)");
        Int(chunk.chunk);
        Raw(R"(,"first_layer":)");
        Int(chunk.first_layer);
        Raw(R"(,"module":)");
        Int(chunk.module);
        Raw(R"(,"module_replica":)");
        Int(chunk.module_replica);
        Raw(R"(,"num_layers":)");
        Int(chunk.num_layers);
        Raw("}");
      }
      Raw(R"(],"group":)");
      Int(r.group);
      Raw(R"(,"rank":)");
      Int(static_cast<int64_t>(index));
      Raw(R"(,"replica":)");
      Int(r.replica);
      Raw("}");
    }, true);
    Raw("  }");
  }

  // {"item":..,"samples":[..],"tokens":[..][,"unpadded_tokens":..]}: unpadded_tokens only for a
  // padded instance (else it equals Σ tokens).
  void WriteInstance(const InstanceData& inst) {
    Raw(R"({"item":)");
    Int(inst.item);
    Raw(R"(,"samples":)");
    IntList(inst.samples);
    Raw(R"(,"tokens":)");
    IntList(inst.tokens);
    if (inst.unpadded_tokens != inst.TotalTokens()) {
      Raw(R"(,"unpadded_tokens":)");
      Int(inst.unpadded_tokens);
    }
    Raw("}");
  }
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
  const PlanData& d = plan.data;
  bytes += 128 + 40 * d.samples.size();
  for (const SequenceData& q : d.sequences) bytes += 40 + 8 * q.samples.size();
  for (const MicrobatchData& m : d.microbatches) {
    bytes += 80 + 8 * m.sequences.size();
    for (const auto& list : m.instances) {
      for (const InstanceData& inst : list) bytes += 48 + 16 * inst.tokens.size();
    }
  }
  for (const RankData& r : d.ranks) bytes += 64 + 96 * r.chunks.size();
  return bytes;
}

StatusOr<spec::Pass> ParsePass(const std::string& path, const json& v) {
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
    for (spec::Recompute r : spec::kAllRecompute) {
      if (spec::RecomputeName(r) == recompute) {
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

// An array entry that must be an object with only `known` keys.
Status EntryObject(const json& j, const std::string& path, const std::vector<std::string>& known) {
  if (!j.is_object()) return Reader::Bad(path, j, "must be an object");
  return Reader::KnownKeys(j, path, known);
}

StatusOr<InstanceData> InstanceFromJson(const json& j, const std::string& path,
                                        const Reader& reader) {
  WEFT_RETURN_IF_ERROR(EntryObject(j, path, {"item", "samples", "tokens", "unpadded_tokens"}));
  InstanceData inst;
  WEFT_RETURN_IF_ERROR(Reader::Int(j, path, "item", &inst.item, -1));
  WEFT_RETURN_IF_ERROR(reader.IntList(j, path, "tokens", &inst.tokens, 0, kMaxInt32));
  WEFT_RETURN_IF_ERROR(reader.IntList(j, path, "samples", &inst.samples, 0, kMaxInt32));
  if (inst.samples.size() != inst.tokens.size()) {
    return Reader::Bad(path + ".samples", j["samples"],
                       fmt::format("must have one sample per segment ({}, as tokens)",
                                   inst.tokens.size()));
  }
  const int64_t total = inst.TotalTokens();
  inst.unpadded_tokens = total;
  WEFT_RETURN_IF_ERROR(
      Reader::Integer(j, path, "unpadded_tokens", &inst.unpadded_tokens, false, 0, total));
  return inst;
}

StatusOr<MicrobatchData> MicrobatchFromJson(const json& j, const std::string& path,
                                            const Reader& reader, const PlanContext& ctx) {
  WEFT_RETURN_IF_ERROR(
      EntryObject(j, path, {"replica", "microbatch", "sequences", "instances"}));
  MicrobatchData m;
  WEFT_RETURN_IF_ERROR(Reader::Int(j, path, "replica", &m.replica));
  WEFT_RETURN_IF_ERROR(Reader::Int(j, path, "microbatch", &m.microbatch));
  WEFT_RETURN_IF_ERROR(reader.IntList(j, path, "sequences", &m.sequences, 0, kMaxInt32));
  WEFT_ASSIGN_OR_RETURN(const json* modules,
                        Reader::Array(j, path, "instances", ctx.num_modules, "len(modules)"));
  if (static_cast<int>(modules->size()) != ctx.num_modules) {
    return Reader::Bad(path + ".instances", *modules,
                       fmt::format("must have one list per module ({})", ctx.num_modules));
  }
  m.instances.resize(modules->size());
  for (size_t module = 0; module < modules->size(); ++module) {
    const std::string mpath = fmt::format("{}.instances[{}]", path, module);
    const json& list = (*modules)[module];
    if (!list.is_array()) return Reader::Bad(mpath, list, "must be an array");
    if (static_cast<int64_t>(list.size()) > reader.options().max_list_length) {
      return InvalidArgumentError(fmt::format("{} has {} entries; more than {} ({})", mpath,
                                              list.size(), reader.options().max_list_length,
                                              "ReadOptions::max_list_length"));
    }
    m.instances[module].reserve(list.size());
    for (size_t k = 0; k < list.size(); ++k) {
      WEFT_ASSIGN_OR_RETURN(InstanceData inst,
                            InstanceFromJson(list[k], fmt::format("{}[{}]", mpath, k), reader));
      m.instances[module].push_back(std::move(inst));
    }
  }
  return m;
}

StatusOr<RankData> RankDataFromJson(const json& j, const std::string& path, int index,
                                    const Reader& reader, const PlanContext& ctx) {
  WEFT_RETURN_IF_ERROR(EntryObject(j, path, {"rank", "replica", "group", "chunks"}));
  RankData rank;
  int declared_index = index;
  WEFT_RETURN_IF_ERROR(Reader::Int(j, path, "rank", &declared_index));
  if (declared_index != index) {
    return Reader::Bad(path + ".rank", j["rank"],
                       fmt::format("must equal its position ({})", index));
  }
  WEFT_RETURN_IF_ERROR(Reader::Int(j, path, "replica", &rank.replica));
  WEFT_RETURN_IF_ERROR(Reader::Int(j, path, "group", &rank.group));
  WEFT_ASSIGN_OR_RETURN(const json* chunks,
                        Reader::Array(j, path, "chunks", reader.options().max_list_length,
                                      "ReadOptions::max_list_length"));
  for (size_t c = 0; c < chunks->size(); ++c) {
    const std::string cpath = fmt::format("{}.chunks[{}]", path, c);
    const json& cj = (*chunks)[c];
    WEFT_RETURN_IF_ERROR(EntryObject(
        cj, cpath, {"module", "chunk", "first_layer", "num_layers", "module_replica"}));
    ChunkData chunk;
    WEFT_RETURN_IF_ERROR(Reader::Int(cj, cpath, "module", &chunk.module));
    WEFT_RETURN_IF_ERROR(ModuleInRange(cj, cpath, chunk.module, ctx.num_modules));
    WEFT_RETURN_IF_ERROR(Reader::Int(cj, cpath, "chunk", &chunk.chunk));
    WEFT_RETURN_IF_ERROR(Reader::Int(cj, cpath, "first_layer", &chunk.first_layer));
    WEFT_RETURN_IF_ERROR(Reader::Int(cj, cpath, "num_layers", &chunk.num_layers));
    WEFT_RETURN_IF_ERROR(Reader::Int(cj, cpath, "module_replica", &chunk.module_replica));
    rank.chunks.push_back(chunk);
  }
  return rank;
}

// The "data" object (plan_data.h). Formats and ranges only; how the tables fit the actions is
// ValidatePlan's.
StatusOr<PlanData> DataFromJson(const json& doc, const Reader& reader, const PlanContext& ctx) {
  WEFT_ASSIGN_OR_RETURN(const json* d, Reader::Object(doc, "", "data"));
  WEFT_RETURN_IF_ERROR(
      Reader::KnownKeys(*d, "data", {"samples", "sequences", "microbatches", "ranks"}));
  const int64_t limit = reader.options().max_list_length;
  constexpr std::string_view kLimitName = "ReadOptions::max_list_length";
  PlanData data;
  WEFT_ASSIGN_OR_RETURN(const json* samples,
                        Reader::Array(*d, "data", "samples", limit, kLimitName));
  data.samples.reserve(samples->size());
  for (size_t i = 0; i < samples->size(); ++i) {
    const std::string path = fmt::format("data.samples[{}]", i);
    const json& j = (*samples)[i];
    WEFT_RETURN_IF_ERROR(EntryObject(j, path, {"id", "text_tokens"}));
    SampleData s;
    WEFT_RETURN_IF_ERROR(Reader::Integer(j, path, "id", &s.id, true,
                                         std::numeric_limits<int64_t>::min(),
                                         std::numeric_limits<int64_t>::max()));
    WEFT_RETURN_IF_ERROR(Reader::Int(j, path, "text_tokens", &s.text_tokens));
    data.samples.push_back(s);
  }
  WEFT_ASSIGN_OR_RETURN(const json* sequences,
                        Reader::Array(*d, "data", "sequences", limit, kLimitName));
  data.sequences.reserve(sequences->size());
  for (size_t i = 0; i < sequences->size(); ++i) {
    const std::string path = fmt::format("data.sequences[{}]", i);
    const json& j = (*sequences)[i];
    WEFT_RETURN_IF_ERROR(EntryObject(j, path, {"samples", "llm_tokens"}));
    SequenceData q;
    WEFT_RETURN_IF_ERROR(reader.IntList(j, path, "samples", &q.samples, 0, kMaxInt32));
    WEFT_RETURN_IF_ERROR(Reader::Bytes(j, path, "llm_tokens", &q.llm_tokens));
    data.sequences.push_back(std::move(q));
  }
  WEFT_ASSIGN_OR_RETURN(const json* microbatches,
                        Reader::Array(*d, "data", "microbatches", limit, kLimitName));
  data.microbatches.reserve(microbatches->size());
  for (size_t i = 0; i < microbatches->size(); ++i) {
    WEFT_ASSIGN_OR_RETURN(MicrobatchData m,
                          MicrobatchFromJson((*microbatches)[i],
                                             fmt::format("data.microbatches[{}]", i), reader, ctx));
    data.microbatches.push_back(std::move(m));
  }
  WEFT_ASSIGN_OR_RETURN(const json* ranks,
                        Reader::Array(*d, "data", "ranks", reader.options().max_ranks,
                                      "ReadOptions::max_ranks"));
  if (!ranks->empty() && static_cast<int>(ranks->size()) != ctx.num_ranks) {
    return Reader::Bad("data.ranks", *ranks,
                       fmt::format("must have one entry per rank ({}) or none", ctx.num_ranks));
  }
  data.ranks.reserve(ranks->size());
  for (size_t r = 0; r < ranks->size(); ++r) {
    WEFT_ASSIGN_OR_RETURN(RankData rank,
                          RankDataFromJson((*ranks)[r], fmt::format("data.ranks[{}]", r),
                                           static_cast<int>(r), reader, ctx));
    data.ranks.push_back(std::move(rank));
  }
  return data;
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
  PlanWriter w(out);
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
  w.Raw(plan.ranks.empty() ? "]" : "\n  ]");
  w.WriteData(plan.data);
  w.Raw("\n}\n");
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
                                                   "modules", "ranks", "data"}));
  const Reader reader(options);
  ExecutionPlan plan;
  WEFT_RETURN_IF_ERROR(Reader::String(doc, "", "schema", &plan.version));
  if (plan.version == kPlanSchemaVersionV1 || plan.version == kPlanSchemaVersionV2) {
    return InvalidArgumentError(fmt::format(
        "{} is no longer read; regenerate it with `weft plan ... --out FILE` (writes {})",
        plan.version, kPlanSchemaVersion));
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
  WEFT_ASSIGN_OR_RETURN(plan.data, DataFromJson(doc, reader, ctx));
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
