#include "weft/planning/window.h"

#include <fmt/format.h>

#include <algorithm>

#include "weft/cost/cost_model.h"
#include "weft/sim/simulator.h"

namespace weft::planning {

StatusOr<DecoupledGraph> DecoupleThroughPool(const spec::ModelSpec& model,
                                             const spec::ClusterSpec& cluster,
                                             const PoolSpec& pool,
                                             const graph::StageGraph& g) {
  if (!g.finalized()) return InvalidArgumentError("DecoupleThroughPool: graph not finalized");
  if (pool.capacity_bytes <= 0) {
    return InvalidArgumentError(
        fmt::format("pool.capacity_bytes = {}; must be > 0", pool.capacity_bytes));
  }
  const int num_modules = static_cast<int>(model.modules.size());
  std::vector<char> producer(num_modules, 0);
  for (int m : pool.producer_modules) {
    if (m < 0 || m >= num_modules) {
      return InvalidArgumentError(
          fmt::format("pool.producer_modules: {} not in [0, {})", m, num_modules));
    }
    producer[m] = 1;
  }
  auto is_producer = [&](int module) {
    return module >= 0 && module < num_modules && producer[module];
  };
  // Producers on groups of their own: a group runs producer stages only or none.
  std::vector<int> group_kind(g.num_groups(), -1);
  for (const graph::Stage& s : g.stages()) {
    const int kind = is_producer(s.module) ? 1 : 0;
    if (group_kind[s.group] >= 0 && group_kind[s.group] != kind) {
      return FailedPreconditionError(fmt::format(
          "pool: group {} ({}) runs producer and consumer stages; a pool needs its producers on "
          "groups of their own",
          s.group, g.group(s.group).label));
    }
    group_kind[s.group] = kind;
  }
  DecoupledGraph out;
  std::vector<graph::Stage> stages(g.stages().begin(), g.stages().end());
  std::vector<int64_t> put(g.num_stages(), 0), get(g.num_stages(), 0);
  std::vector<graph::EdgeId> cut;
  for (graph::EdgeId e = 0; e < g.num_edges(); ++e) {
    const graph::Edge& edge = g.edge(e);
    const graph::Stage& from = g.stage(edge.from);
    const graph::Stage& to = g.stage(edge.to);
    if (is_producer(from.module) == is_producer(to.module)) continue;
    if (!is_producer(from.module)) {
      return FailedPreconditionError(fmt::format(
          "pool: producer '{}' receives from '{}' ({} -> {}): only frozen modules whose "
          "gradients do not come back can stream through the pool",
          model.modules[to.module].name, model.modules[from.module].name, g.StageName(edge.from),
          g.StageName(edge.to)));
    }
    if (from.pass != spec::Pass::kForward || to.pass != spec::Pass::kForward) {
      return FailedPreconditionError(fmt::format(
          "pool: edge {} -> {} leaves producer '{}' from a {} stage; a pool decouples frozen "
          "(forward-only) producers",
          g.StageName(edge.from), g.StageName(edge.to), model.modules[from.module].name,
          spec::PassShortName(from.pass)));
    }
    int64_t bytes = edge.bytes;
    if (edge.rows >= 0) {
      cost::TokenShape shape;
      shape.tokens = edge.rows;
      bytes = static_cast<int64_t>(
          cost::OutputActivationBytes(model.modules[from.module], shape, spec::ModuleParallel{}));
    }
    cut.push_back(e);
    put[edge.from] += bytes;
    get[edge.to] += bytes;
    const double fetch_s = sim::TransferTimeS(
        edge.bytes, sim::LinkBetween(g.group(from.group), g.group(to.group), cluster), cluster);
    stages[edge.to].latency_s += fetch_s;
    out.fetch_s += fetch_s;
  }
  for (graph::StageId s = 0; s < g.num_stages(); ++s) {
    for (auto [bytes, action] :
         {std::pair{put[s], sim::BufferAction::kPut}, std::pair{get[s], sim::BufferAction::kGet}}) {
      if (bytes == 0) continue;
      if (bytes > pool.capacity_bytes) {
        return FailedPreconditionError(fmt::format(
            "pool: stage {} {}s {:.3f} GiB, more than the pool's capacity of {:.3f} GiB",
            g.StageName(s), sim::BufferActionName(action), bytes / double(int64_t{1} << 30),
            pool.capacity_bytes / double(int64_t{1} << 30)));
      }
      out.buffer_uses.push_back(
          sim::BufferUse{.stage = s, .buffer = 0, .action = action, .bytes = bytes});
      if (action == sim::BufferAction::kPut) out.pool_bytes += bytes;
    }
  }
  out.edges_cut = static_cast<int>(cut.size());
  WEFT_ASSIGN_OR_RETURN(out.graph, g.WithoutEdges(cut, std::move(stages)));
  return out;
}

StatusOr<WindowEvaluation> EvaluateWindow(const Job& job,
                                          const StaticPlan& plan,
                                          std::span<const IterationPlan* const> iterations,
                                          int warmup_iterations,
                                          const sim::SimOptions& options) {
  if (!plan.pool) return InvalidArgumentError("EvaluateWindow: the static plan has no pool");
  if (iterations.empty()) return InvalidArgumentError("EvaluateWindow: no iterations");
  const bool automatic = warmup_iterations == kAutoWarmup;
  if (automatic) warmup_iterations = iterations.size() > 1 ? 1 : 0;
  if (warmup_iterations < 0 || warmup_iterations >= static_cast<int>(iterations.size())) {
    return InvalidArgumentError(fmt::format("warm-up iterations = {}; must be in [0, {})",
                                            warmup_iterations, iterations.size()));
  }
  WindowEvaluation out;
  out.warmup_iterations = warmup_iterations;
  out.graphs.reserve(iterations.size());
  std::vector<sim::WindowIteration> window;
  window.reserve(iterations.size());
  for (size_t k = 0; k < iterations.size(); ++k) {
    const IterationPlan& it = *iterations[k];
    if (it.replicas.size() != 1) {
      return InvalidArgumentError(fmt::format(
          "EvaluateWindow: iteration {} has {} replica graphs; a pool needs an unfolded "
          "placement (one graph for the whole iteration)",
          k, it.replicas.size()));
    }
    WEFT_ASSIGN_OR_RETURN(DecoupledGraph d, DecoupleThroughPool(job.model, job.cluster, *plan.pool,
                                                                it.replicas[0].graph));
    out.graphs.push_back(std::move(d));
  }
  for (size_t k = 0; k < iterations.size(); ++k) {
    window.push_back(sim::WindowIteration{.graph = &out.graphs[k].graph,
                                          .schedule = &iterations[k]->replicas[0].schedule,
                                          .buffer_uses = out.graphs[k].buffer_uses,
                                          .samples = iterations[k]->replicas[0].samples,
                                          .tokens = iterations[k]->replicas[0].tokens});
  }
  sim::WindowOptions wo;
  wo.sim = options;
  wo.buffers.push_back(
      sim::BoundedBuffer{.name = "pool", .capacity_bytes = plan.pool->capacity_bytes});
  wo.warmup_iterations = warmup_iterations;
  sim::Simulator simulator;  // for both runs (the second after MSER): scratch allocated once
  WEFT_ASSIGN_OR_RETURN(out.window, simulator.SimulateWindow(window, job.cluster, wo, {}));
  double previous_end_s =
      out.window.iteration_origin_s.empty() ? 0 : out.window.iteration_origin_s[0];
  for (double end_s : out.window.iteration_end_s) {
    out.iteration_time_s.push_back(end_s - previous_end_s);
    previous_end_s = end_s;
  }
  if (automatic) {
    out.warmup_by_mser = true;
    const sim::Truncation t = sim::MserTruncation(out.iteration_time_s);
    out.steady_not_shown = t.at_cap;
    if (t.warmup > warmup_iterations) {
      warmup_iterations = t.warmup;
      out.warmup_iterations = warmup_iterations;
      wo.warmup_iterations = warmup_iterations;
      WEFT_ASSIGN_OR_RETURN(out.window, simulator.SimulateWindow(window, job.cluster, wo, {}));
    }
  }
  for (const auto& g : out.graphs[0].graph.groups()) out.gpus_used += g.TotalGpus();
  out.gpus_charged =
      job.charge_idle_gpus ? std::max(out.gpus_used, job.cluster.TotalGpus()) : out.gpus_used;
  const auto& steady = out.window.steady;
  const double span_s = steady.end_s - steady.begin_s;
  const double peak = job.cluster.gpu.peak_bf16_flops_per_s;
  if (span_s > 0 && peak > 0 && out.gpus_charged > 0) {
    out.mfu = steady.model_flops / (out.gpus_charged * peak * span_s);
  }
  return out;
}

std::string WindowEvaluation::Brief() const {
  const auto& s = window.steady;
  std::string line = fmt::format(
      "window of {} iterations (warm-up {}{}): steady {:.4g} s/iteration, {:.4g} samples/s, "
      "MFU {:.1f}%",
      window.iterations.size(), warmup_iterations, warmup_by_mser ? " by MSER truncation" : "",
      s.iteration_time_s, s.samples_per_s, 100 * mfu);
  if (steady_not_shown) {
    line += "; no steady state shown within the window (the truncation sits at half the "
            "window): run more iterations";
  }
  if (!window.buffers.empty()) {
    const auto& b = window.buffers[0];
    constexpr double kGiB = double(int64_t{1} << 30);
    line += fmt::format(
        "; pool peak {:.2f} of {:.2f} GiB, producer stall {:.4g} s, consumer starvation {:.4g} s",
        b.peak_bytes / kGiB, b.capacity_bytes / kGiB, b.producer_stall_s, b.consumer_starvation_s);
  }
  return line;
}

}  // namespace weft::planning
