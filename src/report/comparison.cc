#include "weft/report/comparison.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

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
  if (b < 0 || !strategies[b].ok() || !strategy.ok()) return std::nullopt;
  const double base_s = strategies[b].Summary().iteration_time_mean_s;
  const double mine_s = strategy.Summary().iteration_time_mean_s;
  if (!(base_s > 0) || !(mine_s > 0)) return std::nullopt;
  return base_s / mine_s;
}

}  // namespace weft::report
