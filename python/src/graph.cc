// Bindings: the stage graph a strategy plans on, and re-simulating any per-group stage order on
// it with weft's simulator. Used by bench/dip_optimality.py and bench/test_dip_optimality.py
// to compare the search strategies with an exact CP-SAT optimum under the simulator's semantics.
//
//   r = _weft.plan_graph("dip-reorder", "tiny-vlm", gpus=4, pipeline_size=4, work_budget=64)
//   g = r["graph"]                      # StageGraph: to_dict(), simulate(order)
//   g.simulate(r["order"])["iteration_time_s"] == r["iteration_time_s"]
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "plan_dict.h"
#include "weft/graph/stage_graph.h"
#include "weft/sched/schedule.h"
#include "weft/sim/simulator.h"
#include "weft/cost/cost_model.h"
#include "weft/spec/cluster.h"
#include "weft/strategy/common.h"
#include "weft/strategy/compare.h"
#include "weft/planning/planner.h"
#include "weft/strategy/strategy.h"

namespace weft::python {

namespace {

// A finalized stage graph together with the (sized) cluster it is simulated on.
struct GraphHandle {
  graph::StageGraph graph;
  spec::ClusterSpec cluster;
};

py::dict TimelineToDict(const sim::Timeline& t) {
  py::dict d;
  d["iteration_time_s"] = t.iteration_time_s;
  d["pipeline_span_s"] = t.pipeline_span_s;
  d["lower_bound_s"] = t.lower_bound_s;
  d["critical_path_s"] = t.critical_path_s;
  d["busiest_group_work_s"] = t.busiest_group_work_s;
  d["bubble_ratio"] = t.bubble_ratio;
  d["capacity_bytes"] = t.capacity_bytes;
  d["oom"] = !t.oom.empty();
  std::vector<int64_t> peak_bytes;
  for (const auto& g : t.groups) peak_bytes.push_back(g.peak_bytes);
  d["peak_bytes"] = peak_bytes;
  std::vector<double> start_s, end_s;
  start_s.reserve(t.stages.size());
  end_s.reserve(t.stages.size());
  for (const auto& s : t.stages) {
    start_s.push_back(s.start_s);
    end_s.push_back(s.end_s);
  }
  d["start_s"] = start_s;
  d["end_s"] = end_s;
  return d;
}

py::dict GraphToDict(const GraphHandle& h) {
  const auto& g = h.graph;
  py::list stages, edges, groups;
  for (int s = 0; s < g.num_stages(); ++s) {
    const graph::Stage& st = g.stage(s);
    py::dict d;
    d["id"] = s;
    d["name"] = g.StageName(s);
    d["group"] = st.group;
    d["module"] = st.module;
    d["chunk"] = st.chunk;
    d["microbatch"] = st.microbatch;
    d["sub_microbatch"] = st.sub_microbatch;
    d["pass"] = std::string(spec::PassShortName(st.pass));
    d["latency_s"] = st.latency_s;
    d["activation_alloc_bytes"] = st.activation_alloc_bytes;
    d["activation_free_bytes"] = st.activation_free_bytes;
    stages.append(d);
  }
  for (int e = 0; e < g.num_edges(); ++e) {
    const graph::Edge& edge = g.edge(e);
    const graph::GroupId a = g.stage(edge.from).group;
    const graph::GroupId b = g.stage(edge.to).group;
    // Same formula as sim::Simulate: free on one group, else latency + bytes / bandwidth of the
    // link between the two groups (transfers on one directed group pair serialize there).
    const sim::LinkKind link = a == b ? sim::LinkKind::kSameGroup
                                      : sim::LinkBetween(g.group(a), g.group(b), h.cluster);
    py::dict d;
    d["from"] = edge.from;
    d["to"] = edge.to;
    d["bytes"] = edge.bytes;
    d["transfer_s"] = sim::TransferTimeS(edge.bytes, link, h.cluster);
    d["link"] = std::string(sim::LinkKindName(link));
    edges.append(d);
  }
  for (int gi = 0; gi < g.num_groups(); ++gi) {
    const graph::DeviceGroup& group = g.group(gi);
    py::dict d;
    d["label"] = group.label;
    d["static_bytes"] = group.static_bytes;
    const double sync_s = sim::GradSyncTimeS(group, h.cluster);
    const double opt_s = sim::OptimizerStepTimeS(group, h.cluster);
    d["grad_sync_s"] = sync_s;
    d["optimizer_s"] = opt_s;
    d["tail_s"] = sync_s + opt_s;  // after the group's last stage, part of the iteration time
    groups.append(d);
  }
  py::dict out;
  out["stages"] = stages;
  out["edges"] = edges;
  out["groups"] = groups;
  out["capacity_bytes"] = h.cluster.gpu.UsableMemoryBytes();  // what plans may use
  out["card_capacity_bytes"] = h.cluster.gpu.memory_capacity_bytes;
  out["module_names"] = g.module_names();
  return out;
}

struct PlanGraphOutput {
  std::shared_ptr<GraphHandle> handle;
  sched::Schedule schedule;
  sim::Timeline timeline;
  std::string description, notes, model_name;
  double plan_time_s = 0;
  int pipeline_size = 0, dp = 0, num_replicas = 0;
};

Status RunPlanGraph(const std::string& strategy_name, const planning::JobOptions& job_options,
                    int64_t iteration, const planning::PlanBudget& budget, int replica,
                    PlanGraphOutput& out) {
  // No recomputation, stated explicitly (memory policy kFixed: an unset static-plan recompute
  // becomes kNone): strategies that would pick a level per replica (the DIP variants) then all
  // order the same graph.
  planning::PlannerOptions options{.budget = budget,
                                   .memory_policy = planning::MemoryPolicy::kFixed};
  options.sim.record_transfers = false;
  WEFT_ASSIGN_OR_RETURN(auto planner,
                        strategy::MakePlanner(job_options, strategy_name, options));
  const planning::JobSetup* setup = &planner->setup();
  const planning::StaticPlan& fixed = planner->static_plan();
  WEFT_ASSIGN_OR_RETURN(auto batches, planner->Batches(iteration, 1));
  WEFT_ASSIGN_OR_RETURN(auto planned, planner->Plan(batches.at(0)));
  auto& plan = planned.plan;
  if (replica < 0 || replica >= static_cast<int>(plan.replicas.size())) {
    return InvalidArgumentError("replica = " + std::to_string(replica) + "; the plan has " +
                                std::to_string(plan.replicas.size()) + " replica(s)");
  }
  out.handle = std::make_shared<GraphHandle>();
  out.handle->graph = std::move(plan.replicas[replica].graph);
  out.handle->cluster = setup->job.cluster;
  out.schedule = std::move(plan.replicas[replica].schedule);
  out.timeline = std::move(planned.evaluation.timelines[replica]);
  out.description = fixed.description;
  out.notes = plan.notes;
  out.model_name = setup->model_name;
  out.plan_time_s = plan.plan_time_s;
  out.pipeline_size = setup->job.PipelineSize();
  out.dp = setup->job.DataParallelSize();
  out.num_replicas = static_cast<int>(plan.replicas.size());
  return OkStatus();
}

}  // namespace

void RegisterGraph(py::module_& m) {
  py::class_<GraphHandle, std::shared_ptr<GraphHandle>>(
      m, "StageGraph",
      "A finalized stage graph of one DP replica and the cluster it is simulated on.")
      .def_property_readonly("num_stages", [](const GraphHandle& h) { return h.graph.num_stages(); })
      .def_property_readonly("num_groups", [](const GraphHandle& h) { return h.graph.num_groups(); })
      .def_property_readonly("num_edges", [](const GraphHandle& h) { return h.graph.num_edges(); })
      .def("to_dict", &GraphToDict,
           "stages (group, pass, latency_s, activation alloc/free bytes, ...), edges (from, to, "
           "bytes, transfer_s as the simulator prices it, link), groups (static_bytes, tail_s = "
           "grad sync + optimizer step), capacity_bytes (per GPU).")
      .def(
          "simulate",
          [](const GraphHandle& h, const std::vector<std::vector<int>>& order) {
            sched::Schedule schedule;
            schedule.name = "given";
            schedule.order = order;
            StatusOr<sim::Timeline> t = [&] {
              py::gil_scoped_release release;
              sim::SimOptions o;
              o.record_transfers = false;
              return sim::Simulate(h.graph, schedule, h.cluster, o);
            }();
            if (!t.ok()) ThrowStatus(t.status());
            return TimelineToDict(*t);
          },
          py::arg("order"),
          "Simulates a per-group stage order (order[g] = stage ids of group g) with weft's "
          "simulator; returns iteration_time_s, lower_bound_s, oom, peak_bytes per group and "
          "start_s/end_s per stage. ValueError for an invalid order or a deadlock.");
  m.def(
      "plan_graph",
      [](const std::string& strategy_name, const std::string& model, const std::string& cluster,
         int gpus, const std::string& data, int64_t iteration, uint64_t seed,
         int num_microbatches, int sequences_per_batch, int pipeline_size, double budget_s,
         int64_t work_budget, int threads, int replica) {
        auto job = MakeJobOptions(model, cluster, gpus, data, num_microbatches,
                                  sequences_per_batch, seed, pipeline_size);
        planning::PlanBudget budget;
        budget.time_budget_s = budget_s;
        budget.work_budget = work_budget;
        budget.threads = threads;
        PlanGraphOutput out;
        Status status;
        {
          py::gil_scoped_release release;
          status = RunPlanGraph(strategy_name, job, iteration, budget, replica, out);
        }
        Check(status);
        py::dict d = TimelineToDict(out.timeline);
        d["strategy"] = strategy_name;
        d["model"] = out.model_name;
        d["schedule_name"] = out.schedule.name;
        d["order"] = out.schedule.order;
        d["graph"] = out.handle;
        d["description"] = out.description;
        d["notes"] = out.notes;
        d["plan_time_s"] = out.plan_time_s;
        d["pipeline_size"] = out.pipeline_size;
        d["dp"] = out.dp;
        d["num_replicas"] = out.num_replicas;
        d["replica"] = replica;
        return d;
      },
      py::arg("strategy"), py::arg("model"), py::arg("cluster") = "", py::arg("gpus") = 0,
      py::arg("data") = "mixed", py::arg("iteration") = 0, py::arg("seed") = 1,
      py::arg("num_microbatches") = 0, py::arg("sequences_per_batch") = 0,
      py::arg("pipeline_size") = 0, py::arg("budget_s") = 1.0, py::arg("work_budget") = 0,
      py::arg("threads") = 1, py::arg("replica") = 0,
      "Plans one iteration with a strategy (PlanIteration, no recompute fallback) and returns "
      "replica `replica`'s StageGraph (graph), its per-group order (order), schedule_name and "
      "that replica's simulated iteration_time_s, lower_bound_s, oom, peak_bytes. work_budget > 0 "
      "= deterministic search budget (MCTS expansions; set budget_s large so it binds).");
}

}  // namespace weft::python
