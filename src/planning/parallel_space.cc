#include "weft/planning/parallel_space.h"

#include <fmt/format.h>

#include <algorithm>

namespace weft::planning {

bool TpFitsHeads(const spec::ModuleSpec& module, int tp) {
  if (tp <= 0 || module.num_attention_heads % tp != 0) return false;
  const int kv = module.num_kv_groups > 0 ? module.num_kv_groups : module.num_attention_heads;
  return kv % tp == 0 || tp % kv == 0;
}

std::vector<ModuleLayout> EnumerateModuleLayouts(const spec::ModuleSpec& module,
                                                 int module_gpus,
                                                 int gpus_per_node,
                                                 const std::function<bool(int tp)>& tp_allowed,
                                                 std::string_view who,
                                                 RejectCounts* rejected) {
  std::vector<ModuleLayout> out;
  auto reject = [&](std::string_view rule) {
    if (rejected) ++(*rejected)[fmt::format("{} {}", who, rule)];
  };
  for (int tp = 1; tp <= std::min(gpus_per_node, module_gpus); ++tp) {
    if (module_gpus % tp != 0) continue;
    if (!TpFitsHeads(module, tp) || (tp_allowed && !tp_allowed(tp))) {
      reject("tp (heads / table)");
      continue;
    }
    const int rest = module_gpus / tp;
    for (int pp = 1; pp <= rest; ++pp) {
      if (rest % pp != 0) continue;
      if (pp > module.num_layers) {
        reject("pp > layers");
        continue;
      }
      out.push_back({.tp = tp, .pp = pp, .dp = rest / pp});
    }
  }
  return out;
}

double StateBytesPerParameter(const spec::ModuleSpec& module, int dp,
                              const cost::CostOptions& options) {
  if (module.frozen) return 2.0;
  return 2.0 + options.gradient_bytes_per_param +
         options.optimizer_bytes_per_param / (options.zero1 ? std::max(1, dp) : 1);
}

double StateBytesLowerBound(const spec::ModuleSpec& module, int tp, int pp, int dp,
                            const cost::CostOptions& options) {
  const double params = static_cast<double>(module.ParameterCount());
  return params / (static_cast<double>(std::max(1, tp)) * std::max(1, pp)) *
         StateBytesPerParameter(module, dp, options);
}

}  // namespace weft::planning
