// ParallelConfig: per-module lookup and validation against a model (and a cluster).
#include "weft/spec/parallel.h"

#include <fmt/format.h>

namespace weft::spec {
namespace {

Status FieldError(std::string_view field, const auto& value, std::string_view rule) {
  return InvalidArgumentError(fmt::format("{} = {}; {}", field, value, rule));
}

}  // namespace

ModuleParallel ParallelConfig::For(std::string_view module) const {
  for (const ModuleParallel& entry : modules) {
    if (entry.module == module) return entry;
  }
  ModuleParallel defaults;
  defaults.module = std::string(module);
  return defaults;
}

Status ParallelConfig::Validate(const ModelSpec& model) const {
  if (num_microbatches <= 0) {
    return FieldError("parallel.num_microbatches", num_microbatches, "must be > 0");
  }
  if (global_batch_size < 0) {
    return FieldError("parallel.global_batch_size", global_batch_size,
                      "must be >= 0 (0 = from data)");
  }
  for (size_t i = 0; i < modules.size(); ++i) {
    const ModuleParallel& entry = modules[i];
    const std::string prefix = fmt::format("parallel.modules[{}]", i);
    const std::optional<int> index = model.FindModule(entry.module);
    if (!index) {
      return FieldError(prefix + ".module", fmt::format("\"{}\"", entry.module),
                        fmt::format("must name a module of model '{}'", model.name));
    }
    for (size_t j = 0; j < i; ++j) {
      if (modules[j].module == entry.module) {
        return FieldError(prefix + ".module", fmt::format("\"{}\"", entry.module),
                          fmt::format("must be unique (also parallel.modules[{}])", j));
      }
    }
    const struct {
      const char* field;
      int value;
    } sizes[] = {{"tp", entry.tp}, {"pp", entry.pp}, {"dp", entry.dp}, {"cp", entry.cp}};
    for (const auto& size : sizes) {
      if (size.value <= 0) return FieldError(prefix + "." + size.field, size.value, "must be > 0");
    }
    const ModuleSpec& module = model.modules[*index];
    if (module.IsTransformer()) {
      if (module.num_attention_heads % entry.tp != 0) {
        return FieldError(prefix + ".tp", entry.tp,
                          fmt::format("must divide num_attention_heads ({}) of module '{}'",
                                      module.num_attention_heads, module.name));
      }
      if (module.num_kv_groups % entry.tp != 0 && entry.tp % module.num_kv_groups != 0) {
        return FieldError(
            prefix + ".tp", entry.tp,
            fmt::format("must divide num_kv_groups ({}) of module '{}' or be a multiple of it",
                        module.num_kv_groups, module.name));
      }
    }
  }
  return OkStatus();
}

Status ParallelConfig::Validate(const ModelSpec& model, const ClusterSpec& cluster) const {
  WEFT_RETURN_IF_ERROR(Validate(model));
  const int total = cluster.TotalGpus();
  for (size_t i = 0; i < modules.size(); ++i) {
    const ModuleParallel& entry = modules[i];
    if (entry.Gpus() > total) {
      return FieldError(fmt::format("parallel.modules[{}]", i),
                        fmt::format("tp {} x pp {} x dp {} x cp {} = {} GPUs", entry.tp, entry.pp,
                                    entry.dp, entry.cp, entry.Gpus()),
                        fmt::format("must fit the {} GPUs of cluster '{}'", total, cluster.name));
    }
  }
  return OkStatus();
}

}  // namespace weft::spec
