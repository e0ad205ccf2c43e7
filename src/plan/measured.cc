#include "weft/plan/measured.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include "json_io.h"
#include "weft/common/strict_input.h"

namespace weft::plan {

namespace {

using internal::json;
using internal::kMaxInt32;
using internal::Reader;

void WriteStage(internal::JsonWriter& w, const MeasuredStage& s) {
  w.Raw(R"({"action":)");
  w.Int(s.action);
  w.Raw(R"(,"group":)");
  w.Int(s.group);
  w.Raw(R"(,"instances":)");
  w.IntList(std::vector<int32_t>{s.instance_begin, s.instance_end});
  w.Raw(R"(,"measured_s":)");
  w.Double(s.measured_s);
  w.Raw(R"(,"planned_s":)");
  w.Double(s.planned_s);
  w.Raw(R"(,"rank":)");
  w.Int(s.rank);
  w.Raw(R"(,"replica":)");
  w.Int(s.replica);
  w.Raw(R"(,"stage":{"chunk":)");
  w.Int(s.stage.chunk);
  w.Raw(R"(,"mb":)");
  w.Int(s.stage.microbatch);
  w.Raw(R"(,"module":)");
  w.Int(s.stage.module);
  w.Raw(R"(,"pass":)");
  w.String(ActionKindName(ComputeKindOf(s.stage.pass)));
  w.Raw(R"(,"sub":)");
  w.Int(s.stage.sub_microbatch);
  w.Raw(R"(},"tokens":)");
  w.Int(s.tokens);
  w.Raw("}");
}

// A time in seconds: finite and >= 0.
Status Seconds(const json& obj, const std::string& path, std::string_view key, double* out) {
  return Reader::Number(obj, path, key, out);
}

StatusOr<MeasuredStage> StageFromJson(const json& j, const std::string& path, int num_modules,
                                      const Reader& reader) {
  if (!j.is_object()) return Reader::Bad(path, j, "must be an object");
  WEFT_RETURN_IF_ERROR(Reader::KnownKeys(j, path,
                                         {"rank", "action", "replica", "group", "stage",
                                          "instances", "tokens", "planned_s", "measured_s"}));
  MeasuredStage s;
  WEFT_RETURN_IF_ERROR(Reader::Int(j, path, "rank", &s.rank));
  WEFT_RETURN_IF_ERROR(Reader::Int(j, path, "action", &s.action));
  WEFT_RETURN_IF_ERROR(Reader::Int(j, path, "replica", &s.replica));
  WEFT_RETURN_IF_ERROR(Reader::Int(j, path, "group", &s.group));
  WEFT_ASSIGN_OR_RETURN(const json* stage, Reader::Object(j, path, "stage"));
  const std::string spath = path + ".stage";
  WEFT_RETURN_IF_ERROR(Reader::KnownKeys(*stage, spath, {"module", "chunk", "mb", "sub", "pass"}));
  WEFT_RETURN_IF_ERROR(Reader::Int(*stage, spath, "module", &s.stage.module));
  if (s.stage.module >= num_modules) {
    return Reader::Bad(spath + ".module", (*stage)["module"],
                       fmt::format("must be < {} (the number of modules)", num_modules));
  }
  WEFT_RETURN_IF_ERROR(Reader::Int(*stage, spath, "chunk", &s.stage.chunk));
  WEFT_RETURN_IF_ERROR(Reader::Int(*stage, spath, "mb", &s.stage.microbatch));
  WEFT_RETURN_IF_ERROR(Reader::Int(*stage, spath, "sub", &s.stage.sub_microbatch));
  std::string pass;
  WEFT_RETURN_IF_ERROR(Reader::String(*stage, spath, "pass", &pass));
  auto kind = ParseActionKind(pass);
  if (!kind.ok() || !IsCompute(*kind)) {
    return Reader::Bad(spath + ".pass", (*stage)["pass"],
                       "must be one of forward, backward, backward_input, backward_weight");
  }
  s.stage.pass = PassOf(*kind);
  std::vector<int32_t> instances;
  WEFT_RETURN_IF_ERROR(reader.IntList(j, path, "instances", &instances, 0, kMaxInt32));
  if (instances.size() != 2 || instances[0] > instances[1]) {
    return Reader::Bad(path + ".instances", j["instances"],
                       "must be [begin, end] with begin <= end");
  }
  s.instance_begin = instances[0];
  s.instance_end = instances[1];
  WEFT_RETURN_IF_ERROR(Reader::Bytes(j, path, "tokens", &s.tokens));
  WEFT_RETURN_IF_ERROR(Seconds(j, path, "planned_s", &s.planned_s));
  WEFT_RETURN_IF_ERROR(Seconds(j, path, "measured_s", &s.measured_s));
  return s;
}

StatusOr<MeasuredIteration> IterationFromJson(const json& j, const std::string& path,
                                              const Reader& reader) {
  if (!j.is_object()) return Reader::Bad(path, j, "must be an object");
  WEFT_RETURN_IF_ERROR(Reader::KnownKeys(
      j, path, {"model", "strategy", "iteration", "modules", "stages", "ranks"}));
  const ReadOptions& options = reader.options();
  MeasuredIteration it;
  WEFT_RETURN_IF_ERROR(Reader::String(j, path, "model", &it.model, false));
  WEFT_RETURN_IF_ERROR(Reader::String(j, path, "strategy", &it.strategy, false));
  WEFT_RETURN_IF_ERROR(Reader::Bytes(j, path, "iteration", &it.iteration));
  WEFT_ASSIGN_OR_RETURN(const json* modules, Reader::Array(j, path, "modules", options.max_modules,
                                                           "ReadOptions::max_modules"));
  for (size_t m = 0; m < modules->size(); ++m) {
    if (!(*modules)[m].is_string()) {
      return Reader::Bad(fmt::format("{}.modules[{}]", path, m), (*modules)[m],
                         "must be a string");
    }
    it.module_names.push_back((*modules)[m].get<std::string>());
  }
  WEFT_ASSIGN_OR_RETURN(const json* ranks, Reader::Array(j, path, "ranks", options.max_ranks,
                                                         "ReadOptions::max_ranks"));
  for (size_t r = 0; r < ranks->size(); ++r) {
    const std::string rpath = fmt::format("{}.ranks[{}]", path, r);
    const json& rj = (*ranks)[r];
    if (!rj.is_object()) return Reader::Bad(rpath, rj, "must be an object");
    WEFT_RETURN_IF_ERROR(Reader::KnownKeys(rj, rpath, {"rank", "wall_s"}));
    MeasuredRank rank;
    WEFT_RETURN_IF_ERROR(Reader::Int(rj, rpath, "rank", &rank.rank));
    if (rank.rank != static_cast<int>(r)) {
      return Reader::Bad(rpath + ".rank", rj["rank"],
                         fmt::format("must equal its position ({})", r));
    }
    WEFT_RETURN_IF_ERROR(Seconds(rj, rpath, "wall_s", &rank.wall_s));
    it.ranks.push_back(rank);
  }
  WEFT_ASSIGN_OR_RETURN(const json* stages,
                        Reader::Array(j, path, "stages", options.max_actions_per_rank,
                                      "ReadOptions::max_actions_per_rank"));
  it.stages.reserve(stages->size());
  for (size_t k = 0; k < stages->size(); ++k) {
    const std::string spath = fmt::format("{}.stages[{}]", path, k);
    WEFT_ASSIGN_OR_RETURN(
        MeasuredStage s,
        StageFromJson((*stages)[k], spath, static_cast<int>(it.module_names.size()), reader));
    if (s.rank >= static_cast<int>(it.ranks.size())) {
      return Reader::Bad(spath + ".rank", (*stages)[k]["rank"],
                         fmt::format("must be < {} (the number of ranks)", it.ranks.size()));
    }
    if (!it.stages.empty() && std::tie(s.rank, s.action) <= std::tie(it.stages.back().rank,
                                                                      it.stages.back().action)) {
      return Reader::Bad(spath + ".action", (*stages)[k]["action"],
                         fmt::format("stages must be sorted by (rank, action) without repeats; "
                                     "the previous one is (rank {}, action {})",
                                     it.stages.back().rank, it.stages.back().action));
    }
    it.stages.push_back(s);
  }
  return it;
}

StatusOr<std::vector<MeasuredIteration>> MeasuredFromJsonUnchecked(std::string_view text,
                                                                   const ReadOptions& options) {
  if (static_cast<int64_t>(text.size()) > options.max_file_bytes) {
    return InvalidArgumentError(fmt::format(
        "{} bytes; larger than {} bytes (ReadOptions::max_file_bytes)", text.size(),
        options.max_file_bytes));
  }
  WEFT_RETURN_IF_ERROR(internal::CheckDepth(text, options.max_depth));
  json doc;
  WEFT_RETURN_IF_ERROR(ParseJsonRejectingDuplicates(text, &doc));
  if (!doc.is_object()) return Reader::Bad("(top level)", doc, "must be an object");
  WEFT_RETURN_IF_ERROR(Reader::KnownKeys(doc, "", {"schema", "iterations"}));
  std::string schema;
  WEFT_RETURN_IF_ERROR(Reader::String(doc, "", "schema", &schema));
  if (schema != kMeasuredSchemaVersion) {
    return Reader::Bad("schema", doc["schema"],
                       fmt::format("expected \"{}\"", kMeasuredSchemaVersion));
  }
  const Reader reader(options);
  WEFT_ASSIGN_OR_RETURN(const json* iterations,
                        Reader::Array(doc, "", "iterations", options.max_list_length,
                                      "ReadOptions::max_list_length"));
  std::vector<MeasuredIteration> out;
  out.reserve(iterations->size());
  for (size_t i = 0; i < iterations->size(); ++i) {
    WEFT_ASSIGN_OR_RETURN(MeasuredIteration it,
                          IterationFromJson((*iterations)[i], fmt::format("iterations[{}]", i),
                                            reader));
    out.push_back(std::move(it));
  }
  return out;
}

std::string DescribeStage(const MeasuredStage& s) {
  Action a;
  a.kind = ComputeKindOf(s.stage.pass);
  a.stage = s.stage;
  return fmt::format("rank {} action {} ({})", s.rank, s.action, DescribeAction(a));
}

}  // namespace

std::string MeasuredToJson(const std::vector<MeasuredIteration>& iterations) {
  std::string out;
  internal::JsonWriter w(out);
  w.Raw("{\n  \"iterations\": [");
  for (size_t i = 0; i < iterations.size(); ++i) {
    const MeasuredIteration& it = iterations[i];
    w.Raw(i == 0 ? "\n    {\n" : ",\n    {\n");
    w.Raw("      \"iteration\": ");
    w.Int(it.iteration);
    w.Raw(",\n      \"model\": ");
    w.String(it.model);
    w.Raw(",\n      \"modules\": [");
    for (size_t m = 0; m < it.module_names.size(); ++m) {
      if (m > 0) w.Raw(",");
      w.String(it.module_names[m]);
    }
    w.Raw("],\n      \"ranks\": [");
    for (size_t r = 0; r < it.ranks.size(); ++r) {
      w.Raw(r == 0 ? R"({"rank":)" : R"(,{"rank":)");
      w.Int(it.ranks[r].rank);
      w.Raw(R"(,"wall_s":)");
      w.Double(it.ranks[r].wall_s);
      w.Raw("}");
    }
    w.Raw("],\n      \"stages\": [");
    for (size_t k = 0; k < it.stages.size(); ++k) {
      w.Raw(k == 0 ? "\n        " : ",\n        ");
      WriteStage(w, it.stages[k]);
    }
    w.Raw(it.stages.empty() ? "],\n" : "\n      ],\n");
    w.Raw("      \"strategy\": ");
    w.String(it.strategy);
    w.Raw("\n    }");
  }
  w.Raw(iterations.empty() ? "],\n" : "\n  ],\n");
  w.Raw("  \"schema\": ");
  w.String(kMeasuredSchemaVersion);
  w.Raw("\n}\n");
  return out;
}

StatusOr<std::vector<MeasuredIteration>> MeasuredFromJson(std::string_view text,
                                                          const ReadOptions& options) {
  auto out = MeasuredFromJsonUnchecked(text, options);
  if (!out.ok()) return OneLineStatus(out.status());
  return out;
}

StatusOr<std::vector<MeasuredIteration>> ReadMeasuredFile(const std::string& path,
                                                          const ReadOptions& options) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return NotFoundError(path + ": cannot open measured file (" + ec.message() + ")");
  if (static_cast<int64_t>(size) > options.max_file_bytes) {
    return InvalidArgumentError(fmt::format("{}: {} bytes; larger than {} bytes "
                                            "(ReadOptions::max_file_bytes)",
                                            path, size, options.max_file_bytes));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(path + ": cannot open measured file");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  auto out = MeasuredFromJson(buffer.str(), options);
  if (!out.ok()) return out.status().WithPrefix(path);
  return out;
}

StatusOr<MeasuredStage> MeasuredStageOf(const ExecutionPlan& plan, int rank, int action) {
  if (rank < 0 || rank >= plan.num_ranks() || action < 0 ||
      action >= static_cast<int>(plan.ranks[rank].actions.size())) {
    return InvalidArgumentError(
        fmt::format("rank {} action {}: not an action of the plan", rank, action));
  }
  const Action& a = plan.ranks[rank].actions[action];
  if (!IsCompute(a.kind)) {
    return InvalidArgumentError(fmt::format("{}: not a compute action",
                                            ActionLocation(plan, rank, action)));
  }
  MeasuredStage s;
  s.rank = rank;
  s.action = action;
  s.stage = a.stage;
  s.instance_begin = a.instance_begin;
  s.instance_end = a.instance_end;
  s.planned_s = a.latency_s;
  if (rank < static_cast<int>(plan.data.ranks.size())) {
    const RankData& rd = plan.data.ranks[rank];
    s.replica = rd.replica;
    s.group = rd.group;
    s.tokens = InstanceTokens(plan.data, plan.data.FindMicrobatch(rd.replica, a.stage.microbatch),
                              a.stage.module, a.instance_begin, a.instance_end);
  } else {
    s.group = rank;  // a plan without data tables: one replica, rank = group
    s.replica = plan.replica;
  }
  return s;
}

Status CheckMeasuredAgainstPlan(const MeasuredIteration& measured, const ExecutionPlan& plan) {
  if (measured.module_names != plan.module_names) {
    return InvalidArgumentError(fmt::format("measured modules [{}] are not the plan's [{}]",
                                            fmt::join(measured.module_names, ", "),
                                            fmt::join(plan.module_names, ", ")));
  }
  if (static_cast<int>(measured.ranks.size()) != plan.num_ranks()) {
    return InvalidArgumentError(fmt::format("measured {} ranks; the plan has {}",
                                            measured.ranks.size(), plan.num_ranks()));
  }
  for (const MeasuredStage& s : measured.stages) {
    auto want = MeasuredStageOf(plan, s.rank, s.action);
    if (!want.ok()) return want.status();
    const bool same = want->stage == s.stage && want->replica == s.replica &&
                      want->group == s.group && want->instance_begin == s.instance_begin &&
                      want->instance_end == s.instance_end && want->tokens == s.tokens;
    if (!same) {
      return InvalidArgumentError(fmt::format(
          "measured {} (replica {}, group {}, instances [{}, {}), {} tokens) is not the plan's "
          "{} (replica {}, group {}, instances [{}, {}), {} tokens)",
          DescribeStage(s), s.replica, s.group, s.instance_begin, s.instance_end, s.tokens,
          DescribeStage(*want), want->replica, want->group, want->instance_begin,
          want->instance_end, want->tokens));
    }
  }
  return OkStatus();
}

}  // namespace weft::plan
