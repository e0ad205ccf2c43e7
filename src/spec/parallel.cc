// ParallelConfig: per-module lookup and validation against a model (and a cluster).
#include "weft/spec/parallel.h"

#include <fmt/format.h>

namespace weft::spec {
namespace {

Status FieldError(std::string_view field, const auto& value, std::string_view rule) {
  return InvalidArgumentError(fmt::format("{} = {}; {}", field, value, rule));
}

// Where entry i's `field` was written: `paths` when given, else "parallel.modules[i].field".
std::string EntryPath(const ParallelEntryPaths& paths, size_t i, std::string_view field = {}) {
  if (paths) return paths(i, field);
  return field.empty() ? fmt::format("parallel.modules[{}]", i)
                       : fmt::format("parallel.modules[{}].{}", i, field);
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

Status ParallelConfig::Validate(const ModelSpec& model, const ParallelEntryPaths& paths) const {
  if (num_microbatches <= 0) {
    return FieldError("parallel.num_microbatches", num_microbatches, "must be > 0");
  }
  if (global_batch_size < 0) {
    return FieldError("parallel.global_batch_size", global_batch_size,
                      "must be >= 0 (0 = from data)");
  }
  for (size_t i = 0; i < modules.size(); ++i) {
    const ModuleParallel& entry = modules[i];
    const std::optional<int> index = model.FindModule(entry.module);
    if (!index) {
      return FieldError(EntryPath(paths, i, "module"), fmt::format("\"{}\"", entry.module),
                        fmt::format("must name a module of model '{}'", model.name));
    }
    for (size_t j = 0; j < i; ++j) {
      if (modules[j].module == entry.module) {
        return FieldError(EntryPath(paths, i, "module"), fmt::format("\"{}\"", entry.module),
                          fmt::format("must be unique (also {})", EntryPath(paths, j)));
      }
    }
    const struct {
      const char* field;
      int value;
    } sizes[] = {{"tp", entry.tp}, {"pp", entry.pp}, {"dp", entry.dp}, {"cp", entry.cp}};
    for (const auto& size : sizes) {
      if (size.value <= 0) {
        return FieldError(EntryPath(paths, i, size.field), size.value, "must be > 0");
      }
    }
    const ModuleSpec& module = model.modules[*index];
    if (module.IsTransformer()) {
      if (module.num_attention_heads % entry.tp != 0) {
        return FieldError(EntryPath(paths, i, "tp"), entry.tp,
                          fmt::format("must divide num_attention_heads ({}) of module '{}'",
                                      module.num_attention_heads, module.name));
      }
      if (module.num_kv_groups % entry.tp != 0 && entry.tp % module.num_kv_groups != 0) {
        return FieldError(
            EntryPath(paths, i, "tp"), entry.tp,
            fmt::format("must divide num_kv_groups ({}) of module '{}' or be a multiple of it",
                        module.num_kv_groups, module.name));
      }
    }
  }
  return OkStatus();
}

Status ParallelConfig::Validate(const ModelSpec& model, const ClusterSpec& cluster,
                                const ParallelEntryPaths& paths) const {
  WEFT_RETURN_IF_ERROR(Validate(model, paths));
  return CheckGpusFit(cluster.TotalGpus(),
                      fmt::format("the {} GPUs of cluster '{}'", cluster.TotalGpus(), cluster.name),
                      paths);
}

Status ParallelConfig::CheckGpusFit(int total_gpus, std::string_view what,
                                    const ParallelEntryPaths& paths) const {
  for (size_t i = 0; i < modules.size(); ++i) {
    const ModuleParallel& entry = modules[i];
    if (entry.Gpus() > total_gpus) {
      return FieldError(EntryPath(paths, i),
                        fmt::format("tp {} x pp {} x dp {} x cp {} = {} GPUs", entry.tp, entry.pp,
                                    entry.dp, entry.cp, entry.Gpus()),
                        fmt::format("must fit {}", what));
    }
  }
  return OkStatus();
}

}  // namespace weft::spec
