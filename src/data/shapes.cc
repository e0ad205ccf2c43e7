#include "weft/data/shapes.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "weft/common/strict_input.h"
#include "weft/common/text.h"
#include "weft/data/readers.h"

namespace weft::data {
namespace internal {

StatusOr<SampleShapes> ComputeSampleShapes(std::span<const spec::Sample> samples,
                                           const spec::ModelSpec& model,
                                           const WorkloadOptions& options,
                                           std::vector<std::vector<double>>* instance_tokens) {
  SampleShapes shapes;
  shapes.model = model.name;
  std::vector<int> modules;  // non-LLM module indices
  for (size_t m = 0; m < model.modules.size(); ++m) {
    if (model.modules[m].kind == spec::ModuleKind::kLlm) continue;
    modules.push_back(static_cast<int>(m));
    shapes.module_names.push_back(model.modules[m].name);
  }
  if (instance_tokens != nullptr) instance_tokens->assign(modules.size(), {});
  const int llm = FirstLlmModule(model);
  std::optional<LlmTokenCounter> counter;
  if (llm >= 0) {
    WEFT_ASSIGN_OR_RETURN(LlmTokenCounter c, LlmTokenCounter::Create(model, llm));
    counter.emplace(std::move(c));
  }
  spec::Batch batch;
  batch.samples.assign(samples.begin(), samples.end());
  shapes.samples.reserve(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    SampleShape shape{.id = samples[i].id, .text_tokens = samples[i].text_tokens};
    if (counter) {
      WEFT_ASSIGN_OR_RETURN(shape.llm_tokens, counter->Tokens(samples[i], options));
    }
    const int index = static_cast<int>(i);
    for (size_t k = 0; k < modules.size(); ++k) {
      WEFT_ASSIGN_OR_RETURN(
          ModuleWorkload w,
          DeriveModuleWorkload(model, modules[k], batch, std::span<const int>(&index, 1), options));
      ModuleShape ms{.instances = w.NumInstances()};
      for (const auto& inst : w.instances) {
        int64_t tokens = 0;
        for (int32_t t : inst.segment_tokens) tokens += t;
        ms.tokens += tokens;
        ms.sum_sq_tokens += tokens * tokens;
        ms.max_instance_tokens = std::max(ms.max_instance_tokens, tokens);
        if (instance_tokens != nullptr)
          (*instance_tokens)[k].push_back(static_cast<double>(tokens));
      }
      shape.modules.push_back(ms);
    }
    shapes.samples.push_back(std::move(shape));
  }
  return shapes;
}

}  // namespace internal

StatusOr<SampleShapes> ComputeSampleShapes(std::span<const spec::Sample> samples,
                                           const spec::ModelSpec& model,
                                           const WorkloadOptions& options,
                                           std::string_view model_label,
                                           std::string_view source) {
  WEFT_ASSIGN_OR_RETURN(SampleShapes shapes,
                        internal::ComputeSampleShapes(samples, model, options, nullptr));
  if (!model_label.empty()) shapes.model = std::string(model_label);
  shapes.source = std::string(source);
  return shapes;
}

std::string SampleShapesToJsonl(const SampleShapes& shapes) {
  std::string out;
  nlohmann::ordered_json header;
  header["schema"] = kSampleShapesSchema;
  header["model"] = shapes.model;
  header["source"] = shapes.source;
  header["num_samples"] = shapes.samples.size();
  header["modules"] = shapes.module_names;
  out += header.dump() + "\n";
  for (const auto& s : shapes.samples) {
    nlohmann::ordered_json j;
    j["id"] = s.id;
    j["text_tokens"] = s.text_tokens;
    j["llm_tokens"] = s.llm_tokens;
    auto& mods = j["modules"] = nlohmann::ordered_json::object();
    for (size_t k = 0; k < s.modules.size() && k < shapes.module_names.size(); ++k) {
      const ModuleShape& m = s.modules[k];
      mods[shapes.module_names[k]] = {{"instances", m.instances},
                                      {"tokens", m.tokens},
                                      {"sum_sq_tokens", m.sum_sq_tokens},
                                      {"max_instance_tokens", m.max_instance_tokens}};
    }
    out += j.dump() + "\n";
  }
  return out;
}

namespace {

// "SOURCE:LINE: message" as InvalidArgument, made one safe line.
Status LineError(std::string_view source, int64_t line, const std::string& message) {
  return OneLineStatus(
      InvalidArgumentError(std::string(source) + ":" + std::to_string(line) + ": " + message));
}

Status CheckKeys(const nlohmann::json& obj,
                 const std::vector<std::string>& known,
                 std::string_view source,
                 int64_t line,
                 const std::string& prefix) {
  if (const std::string* unknown = FirstUnknownKey(obj, known)) {
    return LineError(
        source, line,
        prefix + *unknown + ": unknown field" + DidYouMean(*unknown, known) + "; allowed: " + [&] {
          std::string all;
          for (const auto& k : known) all += (all.empty() ? "" : ", ") + k;
          return all;
        }());
  }
  for (const auto& k : known) {
    if (!obj.contains(k))
      return LineError(source, line, prefix + k + " is missing; it is required");
  }
  return OkStatus();
}

// A non-negative integer below 2^53 (exact in every JSON reader).
StatusOr<int64_t> ReadCount(const nlohmann::json& obj,
                            const std::string& key,
                            std::string_view source,
                            int64_t line,
                            const std::string& prefix) {
  const nlohmann::json& v = obj.at(key);
  constexpr int64_t kMax = int64_t{1} << 53;
  if (v.is_number_unsigned() && v.get<uint64_t>() < static_cast<uint64_t>(kMax)) {
    return static_cast<int64_t>(v.get<uint64_t>());
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < kMax)
    return v.get<int64_t>();
  return LineError(source, line,
                   prefix + key + " = " + v.dump() + "; must be an integer in [0, 2^53)");
}

}  // namespace

StatusOr<SampleShapes> ParseSampleShapes(std::string_view content, std::string_view source) {
  SampleShapes shapes;
  int64_t line_no = 0, declared = -1;
  size_t pos = 0;
  bool header_seen = false;
  while (pos < content.size()) {
    size_t end = content.find('\n', pos);
    if (end == std::string_view::npos) end = content.size();
    std::string_view line = content.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) {
      return LineError(source, line_no, "empty line; every line is one JSON object");
    }
    nlohmann::json j;
    if (Status s = ParseJsonRejectingDuplicates(line, &j); !s.ok()) {
      return LineError(source, line_no, std::string(s.message()));
    }
    if (!j.is_object()) return LineError(source, line_no, "line is not a JSON object");
    if (!header_seen) {
      header_seen = true;
      WEFT_RETURN_IF_ERROR(CheckKeys(j, {"schema", "model", "source", "num_samples", "modules"},
                                     source, line_no, ""));
      if (!j["schema"].is_string() || j["schema"].get<std::string>() != kSampleShapesSchema) {
        return LineError(source, line_no,
                         "schema = " + j["schema"].dump() + "; must be \"" +
                             std::string(kSampleShapesSchema) + "\"");
      }
      for (const char* key : {"model", "source"}) {
        if (!j[key].is_string())
          return LineError(source, line_no,
                           std::string(key) + " = " + j[key].dump() + "; must be a string");
      }
      shapes.model = j["model"].get<std::string>();
      shapes.source = j["source"].get<std::string>();
      WEFT_ASSIGN_OR_RETURN(declared, ReadCount(j, "num_samples", source, line_no, ""));
      const nlohmann::json& mods = j["modules"];
      if (!mods.is_array())
        return LineError(source, line_no,
                         "modules = " + mods.dump() + "; must be an array of module names");
      for (const auto& m : mods) {
        if (!m.is_string() || m.get<std::string>().empty()) {
          return LineError(source, line_no,
                           "modules entry " + m.dump() + "; must be a non-empty string");
        }
        if (std::find(shapes.module_names.begin(), shapes.module_names.end(),
                      m.get<std::string>()) != shapes.module_names.end()) {
          return LineError(source, line_no,
                           "modules entry " + m.dump() + " appears twice; names must be unique");
        }
        shapes.module_names.push_back(m.get<std::string>());
      }
      shapes.samples.reserve(static_cast<size_t>(std::min<int64_t>(declared, 1 << 24)));
      continue;
    }
    if (static_cast<int64_t>(shapes.samples.size()) >= declared) {
      return LineError(
          source, line_no,
          "more sample lines than the header's num_samples = " + std::to_string(declared));
    }
    WEFT_RETURN_IF_ERROR(
        CheckKeys(j, {"id", "text_tokens", "llm_tokens", "modules"}, source, line_no, ""));
    SampleShape s;
    if (!j["id"].is_number_integer())
      return LineError(source, line_no, "id = " + j["id"].dump() + "; must be an integer");
    s.id = j["id"].get<int64_t>();
    WEFT_ASSIGN_OR_RETURN(s.text_tokens, ReadCount(j, "text_tokens", source, line_no, ""));
    WEFT_ASSIGN_OR_RETURN(s.llm_tokens, ReadCount(j, "llm_tokens", source, line_no, ""));
    if (s.llm_tokens != 0 && s.llm_tokens < s.text_tokens) {
      return LineError(source, line_no,
                       "llm_tokens = " + std::to_string(s.llm_tokens) +
                           "; must be >= text_tokens = " + std::to_string(s.text_tokens) +
                           " (or 0: no LLM)");
    }
    const nlohmann::json& mods = j["modules"];
    if (!mods.is_object())
      return LineError(source, line_no, "modules = " + mods.dump() + "; must be an object");
    WEFT_RETURN_IF_ERROR(CheckKeys(mods, shapes.module_names, source, line_no, "modules."));
    for (const auto& name : shapes.module_names) {
      const nlohmann::json& m = mods[name];
      const std::string prefix = "modules." + name + ".";
      if (!m.is_object())
        return LineError(source, line_no,
                         "modules." + name + " = " + m.dump() + "; must be an object");
      WEFT_RETURN_IF_ERROR(
          CheckKeys(m, {"instances", "tokens", "sum_sq_tokens", "max_instance_tokens"}, source,
                    line_no, prefix));
      ModuleShape ms;
      WEFT_ASSIGN_OR_RETURN(ms.instances, ReadCount(m, "instances", source, line_no, prefix));
      WEFT_ASSIGN_OR_RETURN(ms.tokens, ReadCount(m, "tokens", source, line_no, prefix));
      WEFT_ASSIGN_OR_RETURN(ms.sum_sq_tokens,
                            ReadCount(m, "sum_sq_tokens", source, line_no, prefix));
      WEFT_ASSIGN_OR_RETURN(ms.max_instance_tokens,
                            ReadCount(m, "max_instance_tokens", source, line_no, prefix));
      if (ms.instances == 0 && (ms.tokens | ms.sum_sq_tokens | ms.max_instance_tokens) != 0) {
        return LineError(
            source, line_no,
            prefix + "tokens = " + std::to_string(ms.tokens) +
                "; must be 0 when instances = 0 (as sum_sq_tokens, max_instance_tokens)");
      }
      if (ms.max_instance_tokens > ms.tokens) {
        return LineError(source, line_no,
                         prefix +
                             "max_instance_tokens = " + std::to_string(ms.max_instance_tokens) +
                             "; must be <= tokens = " + std::to_string(ms.tokens));
      }
      s.modules.push_back(ms);
    }
    shapes.samples.push_back(std::move(s));
  }
  if (!header_seen)
    return OneLineStatus(InvalidArgumentError(std::string(source) +
                                              ": the file is empty; expected a \"" +
                                              std::string(kSampleShapesSchema) + "\" header line"));
  if (static_cast<int64_t>(shapes.samples.size()) != declared) {
    return LineError(source, line_no,
                     "num_samples = " + std::to_string(declared) + " in the header but " +
                         std::to_string(shapes.samples.size()) +
                         " sample lines; they must agree (truncated file?)");
  }
  return shapes;
}

StatusOr<SampleShapes> ReadSampleShapes(const std::string& path) {
  WEFT_RETURN_IF_ERROR(CheckInputFile(path, kMaxDataFileBytes, "shape file"));
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(path + ": cannot open file");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return NotFoundError(path + ": read failed");
  return ParseSampleShapes(buffer.str(), path);
}

}  // namespace weft::data
