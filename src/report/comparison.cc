#include "weft/report/comparison.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

namespace weft::report {

double IterationResult::GapToLowerBound() const {
  return lower_bound_s > 0 ? iteration_time_s / lower_bound_s - 1.0 : 0.0;
}

IterationResult IterationResultFromTimeline(int iteration,
                                            const sim::Timeline& timeline,
                                            double plan_time_s) {
  IterationResult r;
  r.iteration = iteration;
  r.iteration_time_s = timeline.iteration_time_s;
  r.samples_per_s = timeline.samples_per_s;
  r.tokens_per_s = timeline.tokens_per_s;
  r.mfu = timeline.mfu;
  r.bubble_ratio = timeline.bubble_ratio;
  for (const sim::GroupTimeline& g : timeline.groups) {
    r.peak_memory_bytes = std::max(r.peak_memory_bytes, g.peak_bytes);
  }
  r.lower_bound_s = timeline.lower_bound_s;
  r.oom = !timeline.oom.empty();
  r.plan_time_s = plan_time_s;
  return r;
}

namespace {

// "16,16" or, past 8 entries, runs of 3+ equal values as "1x63": "7,8x7".
std::string LayerList(const std::vector<int>& layers) {
  if (layers.size() <= 8) return fmt::format("{}", fmt::join(layers, ","));
  std::string out;
  for (size_t i = 0; i < layers.size();) {
    size_t j = i;
    while (j < layers.size() && layers[j] == layers[i]) ++j;
    const size_t run = j - i;
    for (size_t k = 0; k < (run >= 3 ? 1 : run); ++k) {
      if (!out.empty()) out += ",";
      out += run >= 3 ? fmt::format("{}x{}", layers[i], run) : std::to_string(layers[i]);
    }
    i = j;
  }
  return out;
}

}  // namespace

std::string StrategyConfiguration::Brief() const {
  if (modules.empty()) return "";
  bool uniform_recompute = true;
  for (const ModuleConfiguration& m : modules) {
    uniform_recompute = uniform_recompute && m.recompute == modules.front().recompute;
  }
  std::string out;
  for (const ModuleConfiguration& m : modules) {
    if (!out.empty()) out += " | ";
    out += fmt::format("{} tp{}", m.module, m.tp);
    if (m.cp > 1) out += fmt::format(" cp{}", m.cp);
    out += fmt::format(" pp{} dp{} [{}]", m.pp, m.dp, LayerList(m.layers_per_stage));
    if (m.chunks_per_rank > 1) out += fmt::format(" {} chunks/rank", m.chunks_per_rank);
    if (m.copies > 1) out += fmt::format(" x{} copies", m.copies);
    if (!uniform_recompute && !m.recompute.empty()) out += " recompute " + m.recompute;
  }
  if (microbatches_max > 0) {
    out += microbatches_min == microbatches_max
               ? fmt::format(" | mb {}", microbatches_max)
               : fmt::format(" | mb {}-{}", microbatches_min, microbatches_max);
  }
  if (uniform_recompute && !modules.front().recompute.empty()) {
    out += " | recompute " + modules.front().recompute;
  }
  return out;
}

bool StrategyResult::feasible() const {
  return ok() && std::none_of(iterations.begin(), iterations.end(),
                              [](const IterationResult& it) { return it.oom; });
}

double Percentile(std::span<const double> values, double q) {
  if (values.empty()) return 0.0;
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  q = std::clamp(q, 0.0, 1.0);
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

StrategySummary StrategyResult::Summary() const {
  StrategySummary s;
  s.num_iterations = static_cast<int>(iterations.size());
  if (iterations.empty()) return s;
  std::vector<double> times;
  times.reserve(iterations.size());
  double total_time_s = 0, samples = 0, tokens = 0, mfu_time_s = 0, bubble_sum = 0, plan_sum_s = 0;
  double lb_sum_s = 0, gap_sum = 0;
  int num_bounds = 0;
  for (const IterationResult& it : iterations) {
    times.push_back(it.iteration_time_s);
    total_time_s += it.iteration_time_s;
    samples += it.samples_per_s * it.iteration_time_s;
    tokens += it.tokens_per_s * it.iteration_time_s;
    mfu_time_s += it.mfu * it.iteration_time_s;
    bubble_sum += it.bubble_ratio;
    plan_sum_s += it.plan_time_s;
    s.peak_memory_bytes = std::max(s.peak_memory_bytes, it.peak_memory_bytes);
    s.any_oom = s.any_oom || it.oom;
    if (it.lower_bound_s > 0) {
      lb_sum_s += it.lower_bound_s;
      gap_sum += it.GapToLowerBound();
      ++num_bounds;
    }
  }
  const double n = static_cast<double>(iterations.size());
  s.iteration_time_mean_s = total_time_s / n;
  s.iteration_time_p50_s = Percentile(times, 0.5);
  s.iteration_time_p90_s = Percentile(times, 0.9);
  if (total_time_s > 0) {
    s.samples_per_s = samples / total_time_s;
    s.tokens_per_s = tokens / total_time_s;
    s.mfu = mfu_time_s / total_time_s;
  }
  s.bubble_ratio = bubble_sum / n;
  s.plan_time_mean_s = plan_sum_s / n;
  if (num_bounds > 0) {
    s.lower_bound_mean_s = lb_sum_s / num_bounds;
    s.gap_to_lower_bound = gap_sum / num_bounds;
  }
  return s;
}

namespace {

Status CheckTime(double value, const std::string& path) {
  if (!std::isfinite(value) || value < 0) {
    return InvalidArgumentError(fmt::format("{} = {}; must be finite and >= 0", path, value));
  }
  return OkStatus();
}

}  // namespace

Status Comparison::Validate() const {
  if (num_gpus < 0) {
    return InvalidArgumentError(fmt::format("num_gpus = {}; must be >= 0", num_gpus));
  }
  for (size_t i = 0; i < strategies.size(); ++i) {
    const StrategyResult& s = strategies[i];
    if (s.name.empty()) {
      return InvalidArgumentError(fmt::format("strategies[{}].name = \"\"; must be non-empty", i));
    }
    for (size_t j = 0; j < i; ++j) {
      if (strategies[j].name == s.name) {
        return InvalidArgumentError(fmt::format(
            "strategies[{}].name = \"{}\"; must be unique (also strategies[{}])", i, s.name, j));
      }
    }
    for (size_t k = 0; k < s.iterations.size(); ++k) {
      const IterationResult& it = s.iterations[k];
      const std::string path = fmt::format("strategies[{}].iterations[{}]", i, k);
      if (k > 0 && it.iteration <= s.iterations[k - 1].iteration) {
        return InvalidArgumentError(fmt::format(
            "{}.iteration = {}; must be > the previous index ({})", path, it.iteration,
            s.iterations[k - 1].iteration));
      }
      WEFT_RETURN_IF_ERROR(CheckTime(it.iteration_time_s, path + ".iteration_time_s"));
      WEFT_RETURN_IF_ERROR(CheckTime(it.lower_bound_s, path + ".lower_bound_s"));
      WEFT_RETURN_IF_ERROR(CheckTime(it.plan_time_s, path + ".plan_time_s"));
      WEFT_RETURN_IF_ERROR(CheckTime(it.samples_per_s, path + ".samples_per_s"));
      WEFT_RETURN_IF_ERROR(CheckTime(it.tokens_per_s, path + ".tokens_per_s"));
      if (it.peak_memory_bytes < 0) {
        return InvalidArgumentError(
            fmt::format("{}.peak_memory_bytes = {}; must be >= 0", path, it.peak_memory_bytes));
      }
    }
    const StrategyConfiguration& config = s.configuration;
    for (size_t m = 0; m < config.modules.size(); ++m) {
      const ModuleConfiguration& mc = config.modules[m];
      const std::string path = fmt::format("strategies[{}].configuration.modules[{}]", i, m);
      for (const auto& [field, value] : {std::pair<const char*, int>{"tp", mc.tp},
                                         {"cp", mc.cp},
                                         {"dp", mc.dp},
                                         {"chunks_per_rank", mc.chunks_per_rank},
                                         {"copies", mc.copies}}) {
        if (value < 1) {
          return InvalidArgumentError(fmt::format("{}.{} = {}; must be >= 1", path, field, value));
        }
      }
      if (mc.pp < 0) {
        return InvalidArgumentError(fmt::format("{}.pp = {}; must be >= 0", path, mc.pp));
      }
      for (size_t k = 0; k < mc.layers_per_stage.size(); ++k) {
        if (mc.layers_per_stage[k] < 0) {
          return InvalidArgumentError(fmt::format("{}.layers_per_stage[{}] = {}; must be >= 0",
                                                  path, k, mc.layers_per_stage[k]));
        }
      }
    }
    if (config.microbatches_min < 0 || config.microbatches_min > config.microbatches_max) {
      return InvalidArgumentError(
          fmt::format("strategies[{}].configuration.microbatches_min = {}; must be in [0, "
                      "microbatches_max = {}]",
                      i, config.microbatches_min, config.microbatches_max));
    }
  }
  if (!baseline.empty() && FindStrategy(baseline) < 0) {
    return InvalidArgumentError(
        fmt::format("baseline = \"{}\"; must name one of the {} strategies", baseline,
                    strategies.size()));
  }
  return OkStatus();
}

int Comparison::FindStrategy(std::string_view name) const {
  for (size_t i = 0; i < strategies.size(); ++i) {
    if (strategies[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::optional<double> Comparison::SpeedupVsBaseline(const StrategyResult& strategy) const {
  const int b = FindStrategy(baseline);
  if (b < 0 || !strategies[b].feasible() || !strategy.feasible()) return std::nullopt;
  const double base_s = strategies[b].Summary().iteration_time_mean_s;
  const double mine_s = strategy.Summary().iteration_time_mean_s;
  if (!(base_s > 0) || !(mine_s > 0)) return std::nullopt;
  return base_s / mine_s;
}

std::vector<int> Comparison::RankedOrder() const {
  std::vector<int> order(strategies.size());
  std::vector<double> mean_s(strategies.size(), 0.0);
  std::vector<int> tier(strategies.size(), 2);  // 0 feasible, 1 out of memory, 2 failed
  for (size_t i = 0; i < strategies.size(); ++i) {
    order[i] = static_cast<int>(i);
    if (!strategies[i].ok()) continue;
    tier[i] = strategies[i].feasible() ? 0 : 1;
    mean_s[i] = strategies[i].Summary().iteration_time_mean_s;
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (tier[a] != tier[b]) return tier[a] < tier[b];
    return tier[a] < 2 && mean_s[a] < mean_s[b];
  });
  return order;
}

int Comparison::BestStrategy() const {
  const std::vector<int> order = RankedOrder();
  return !order.empty() && strategies[order.front()].feasible() ? order.front() : -1;
}

}  // namespace weft::report
