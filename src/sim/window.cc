#include "weft/sim/window.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "engine.h"

namespace weft::sim {

std::string_view BufferActionName(BufferAction action) {
  switch (action) {
    case BufferAction::kPut:
      return "put";
    case BufferAction::kGet:
      return "get";
  }
  return "?";
}

Truncation MserTruncation(std::span<const double> x) {
  const int n = static_cast<int>(x.size());
  Truncation out;
  if (n < 2) return out;
  const int cap = n / 2;
  double best = std::numeric_limits<double>::infinity();
  // Suffix sums from the end: mean and squared deviations of x[d, n) for every d.
  double sum = 0, sum_sq = 0;
  std::vector<double> se(static_cast<size_t>(cap) + 1, 0.0);
  for (int i = n - 1; i >= 0; --i) {
    sum += x[i];
    sum_sq += x[i] * x[i];
    if (i <= cap) {
      const double m = static_cast<double>(n - i);
      const double dev = std::max(0.0, sum_sq - sum * sum / m);
      se[i] = dev / (m * m);
    }
  }
  for (int d = 0; d <= cap; ++d) {
    // Ties (within rounding) keep the shorter warm-up.
    if (se[d] < best * (1 - 1e-12) - 1e-300) {
      best = se[d];
      out.warmup = d;
    }
  }
  out.at_cap = n >= 4 && out.warmup == cap;
  return out;
}

Status WindowOptions::Validate() const {
  WEFT_RETURN_IF_ERROR(sim.Validate().WithPrefix("options.sim"));
  if (warmup_iterations < 0) {
    return InvalidArgumentError(
        fmt::format("options.warmup_iterations = {}; must be >= 0", warmup_iterations));
  }
  for (size_t b = 0; b < buffers.size(); ++b) {
    if (buffers[b].capacity_bytes <= 0) {
      return InvalidArgumentError(fmt::format("options.buffers[{}].capacity_bytes = {}; must be > 0",
                                              b, buffers[b].capacity_bytes));
    }
  }
  return OkStatus();
}

namespace {

bool SamePlacement(const graph::DeviceGroup& a, const graph::DeviceGroup& b) {
  return a.first_gpu == b.first_gpu && a.num_gpus == b.num_gpus && a.dp == b.dp &&
         a.DpStrideGpus() == b.DpStrideGpus();
}

// The window's inputs beyond each iteration's own (checked by the engine): one set of device
// groups, buffer uses that name stages and buffers, a carry that fits.
Status CheckWindow(std::span<const WindowIteration> iterations,
                   const WindowOptions& options,
                   const WindowCarry& carry) {
  WEFT_RETURN_IF_ERROR(options.Validate());
  if (iterations.empty()) return InvalidArgumentError("iterations is empty; need at least one");
  const int num_iterations = static_cast<int>(iterations.size());
  if (options.warmup_iterations >= num_iterations) {
    return InvalidArgumentError(fmt::format(
        "options.warmup_iterations = {}; must be < the number of iterations ({})",
        options.warmup_iterations, num_iterations));
  }
  for (int k = 0; k < num_iterations; ++k) {
    const WindowIteration& it = iterations[k];
    if (it.graph == nullptr || it.schedule == nullptr) {
      return InvalidArgumentError(
          fmt::format("iterations[{}]: graph and schedule must be set", k));
    }
    if (!it.graph->finalized()) {
      return InvalidArgumentError(
          fmt::format("iterations[{}].graph is not finalized (call Finalize())", k));
    }
  }
  const graph::StageGraph& first = *iterations[0].graph;
  if (num_iterations > 1 && first.num_groups() == 0) {
    return InvalidArgumentError("iterations[0].graph has no device groups");
  }
  for (int k = 1; k < num_iterations; ++k) {
    const graph::StageGraph& graph = *iterations[k].graph;
    if (graph.num_groups() != first.num_groups()) {
      return InvalidArgumentError(fmt::format(
          "iterations[{}].graph has {} groups; iterations[0].graph has {} (a window runs on one "
          "set of device groups)",
          k, graph.num_groups(), first.num_groups()));
    }
    for (graph::GroupId g = 0; g < graph.num_groups(); ++g) {
      if (!SamePlacement(graph.group(g), first.group(g))) {
        return InvalidArgumentError(fmt::format(
            "iterations[{}].graph group {} lies on other GPUs than in iterations[0] (first_gpu, "
            "num_gpus, dp and dp stride must match)",
            k, g));
      }
    }
  }
  for (int k = 0; k < num_iterations; ++k) {
    const WindowIteration& it = iterations[k];
    std::vector<uint8_t> used(it.graph->num_stages(), 0);
    for (size_t u = 0; u < it.buffer_uses.size(); ++u) {
      const BufferUse& use = it.buffer_uses[u];
      if (use.stage < 0 || use.stage >= it.graph->num_stages()) {
        return InvalidArgumentError(
            fmt::format("iterations[{}].buffer_uses[{}].stage = {}; must be in [0, {})", k, u,
                        use.stage, it.graph->num_stages()));
      }
      if (use.buffer < 0 || use.buffer >= static_cast<int>(options.buffers.size())) {
        return InvalidArgumentError(
            fmt::format("iterations[{}].buffer_uses[{}].buffer = {}; must be in [0, {})", k, u,
                        use.buffer, options.buffers.size()));
      }
      const int64_t capacity = options.buffers[use.buffer].capacity_bytes;
      if (use.bytes <= 0 || use.bytes > capacity) {
        return InvalidArgumentError(fmt::format(
            "iterations[{}].buffer_uses[{}].bytes = {}; must be in (0, {}] (the capacity of "
            "buffer '{}')",
            k, u, use.bytes, capacity, options.buffers[use.buffer].name));
      }
      if (used[use.stage]++) {
        return InvalidArgumentError(
            fmt::format("iterations[{}].buffer_uses[{}]: stage {} already has a buffer use; at "
                        "most one per stage",
                        k, u, use.stage));
      }
    }
  }
  if (!carry.group_free_s.empty()) {
    if (static_cast<int>(carry.group_free_s.size()) != first.num_groups()) {
      return InvalidArgumentError(
          fmt::format("carry.group_free_s has {} entries; the graphs have {} groups",
                      carry.group_free_s.size(), first.num_groups()));
    }
    for (size_t g = 0; g < carry.group_free_s.size(); ++g) {
      const double t = carry.group_free_s[g];
      if (!std::isfinite(t) || t < 0) {
        return InvalidArgumentError(
            fmt::format("carry.group_free_s[{}] = {}; must be finite and >= 0", g, t));
      }
    }
  }
  if (!carry.buffer_bytes.empty()) {
    if (carry.buffer_bytes.size() != options.buffers.size()) {
      return InvalidArgumentError(
          fmt::format("carry.buffer_bytes has {} entries; options.buffers has {}",
                      carry.buffer_bytes.size(), options.buffers.size()));
    }
    for (size_t b = 0; b < carry.buffer_bytes.size(); ++b) {
      if (carry.buffer_bytes[b] < 0 || carry.buffer_bytes[b] > options.buffers[b].capacity_bytes) {
        return InvalidArgumentError(fmt::format(
            "carry.buffer_bytes[{}] = {}; must be in [0, {}] (the buffer's capacity)", b,
            carry.buffer_bytes[b], options.buffers[b].capacity_bytes));
      }
    }
  }
  return OkStatus();
}

StatusOr<WindowResult> RunWindow(internal::Engine& engine,
                                 std::span<const WindowIteration> iterations,
                                 const spec::ClusterSpec& cluster,
                                 const WindowOptions& options,
                                 const WindowCarry& carry) {
  WEFT_RETURN_IF_ERROR(CheckWindow(iterations, options, carry));
  std::vector<internal::EngineIteration> runs;
  runs.reserve(iterations.size());
  for (const WindowIteration& it : iterations) {
    runs.push_back({.graph = it.graph,
                    .schedule = it.schedule,
                    .buffer_uses = it.buffer_uses,
                    .samples = it.samples,
                    .tokens = it.tokens});
  }
  WEFT_ASSIGN_OR_RETURN(
      internal::EngineResult engine_result,
      engine.Run(runs, cluster, options.sim, options.buffers, carry, options.warmup_iterations));
  WindowResult result;
  result.iterations = std::move(engine_result.timelines);
  result.iteration_origin_s = std::move(engine_result.origin_s);
  result.iteration_end_s = std::move(engine_result.end_s);
  result.buffers = std::move(engine_result.buffers);
  for (BufferTimeline& b : result.buffers) b.final_bytes = b.occupancy.back().bytes;
  result.carry.group_free_s = std::move(engine_result.group_end_s);
  for (const BufferTimeline& b : result.buffers) result.carry.buffer_bytes.push_back(b.final_bytes);

  WindowSteadyState& steady = result.steady;
  const int num_iterations = static_cast<int>(iterations.size());
  steady.warmup_iterations = options.warmup_iterations;
  steady.iterations = num_iterations - options.warmup_iterations;
  steady.begin_s = engine_result.steady_begin_s;
  steady.end_s = result.iteration_end_s.back();
  const double span_s = steady.end_s - steady.begin_s;
  steady.iteration_time_s = span_s / steady.iterations;
  double samples = 0, tokens = 0;
  for (int k = options.warmup_iterations; k < num_iterations; ++k) {
    samples += iterations[k].samples;
    tokens += iterations[k].tokens;
    steady.model_flops += result.iterations[k].model_flops;
  }
  const Timeline& last = result.iterations.back();
  steady.num_gpus = last.num_gpus;
  if (span_s > 0) {
    steady.samples_per_s = samples / span_s;
    steady.tokens_per_s = tokens / span_s;
    const double denom = steady.num_gpus * last.peak_flops_per_s * span_s;
    steady.mfu = denom > 0 ? steady.model_flops / denom : 0.0;
  }
  const size_t num_groups = result.carry.group_free_s.size();
  steady.group_idle_s.resize(num_groups);
  steady.group_idle_ratio.resize(num_groups);
  for (size_t g = 0; g < num_groups; ++g) {
    steady.group_idle_s[g] = std::max(0.0, span_s - engine_result.steady_busy_s[g]);
    steady.group_idle_ratio[g] = span_s > 0 ? steady.group_idle_s[g] / span_s : 0.0;
  }
  return result;
}

}  // namespace

StatusOr<WindowResult> Simulator::SimulateWindow(std::span<const WindowIteration> iterations,
                                                 const spec::ClusterSpec& cluster,
                                                 const WindowOptions& options,
                                                 const WindowCarry& carry) {
  return RunWindow(*engine_, iterations, cluster, options, carry);
}

StatusOr<WindowResult> SimulateWindow(std::span<const WindowIteration> iterations,
                                      const spec::ClusterSpec& cluster,
                                      const WindowOptions& options,
                                      const WindowCarry& carry) {
  return Simulator().SimulateWindow(iterations, cluster, options, carry);
}

std::string WindowResult::BriefReport() const {
  std::string out = fmt::format(
      "window: {} iterations ({} warm-up), {:.3f} s to {:.3f} s\n", iterations.size(),
      steady.warmup_iterations, iteration_origin_s.empty() ? 0.0 : iteration_origin_s.front(),
      iteration_end_s.empty() ? 0.0 : iteration_end_s.back());
  out += fmt::format(
      "steady state: {:.3f} ms per iteration over {} iterations, {:.1f} samples/s, {:.0f} "
      "tokens/s, MFU {:.1f}%\n",
      steady.iteration_time_s * 1e3, steady.iterations, steady.samples_per_s,
      steady.tokens_per_s, steady.mfu * 100);
  if (!steady.group_idle_ratio.empty()) {
    out += "idle per group:";
    for (size_t g = 0; g < steady.group_idle_ratio.size(); ++g) {
      out += fmt::format(" {}:{:.1f}%", g, steady.group_idle_ratio[g] * 100);
    }
    out += "\n";
  }
  for (const BufferTimeline& b : buffers) {
    out += fmt::format(
        "buffer '{}': capacity {} B, peak {} B, {} -> {} B; {} puts, {} gets; producer stall "
        "{:.3f} ms, consumer starvation {:.3f} ms\n",
        b.name, b.capacity_bytes, b.peak_bytes, b.initial_bytes, b.final_bytes, b.puts, b.gets,
        b.producer_stall_s * 1e3, b.consumer_starvation_s * 1e3);
  }
  return out;
}

}  // namespace weft::sim
