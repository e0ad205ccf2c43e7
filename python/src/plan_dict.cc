// Shared by weft.plan and weft.PlannerService: see plan_dict.h.
#include "plan_dict.h"

#include "weft/plan/plan_json.h"
#include "weft/plan/validator.h"

namespace weft::python {

planning::JobOptions MakeJobOptions(const std::string& model, const std::string& cluster,
                                    int gpus, const std::string& data, int num_microbatches,
                                    int sequences_per_batch, uint64_t seed,
                                    int pipeline_size, const std::string& placement) {
  planning::JobOptions o;
  o.placement = placement;
  o.pipeline_size = pipeline_size;
  o.model = model;
  o.cluster = cluster;
  o.gpus = gpus;
  o.data = data;
  o.num_microbatches = num_microbatches;
  o.sequences_per_batch = sequences_per_batch;
  o.seed = seed;
  return o;
}

Status CompileReplica0(const planning::Planner& planner, int64_t iteration,
                       const planning::PlannedIteration& planned, CompiledReplica& out) {
  if (planned.plan.replicas.empty()) return InvalidArgumentError("the plan has no replicas");
  out.microbatches = planned.plan.replicas[0].microbatches;
  plan::ValidationReport report;
  WEFT_ASSIGN_OR_RETURN(auto compiled, planner.Compile(planned, 0, iteration, &report));
  out.validation = report.BriefReport();
  out.plan_json = plan::PlanToJson(compiled);
  out.world = false;
  out.num_ranks = out.ranks_per_replica = compiled.num_ranks();
  return OkStatus();
}

Status CompileWorldPlan(const planning::Planner& planner, int64_t iteration,
                        const planning::PlannedIteration& planned, CompiledReplica& out) {
  const int replicas = static_cast<int>(planned.plan.replicas.size());
  if (replicas == 0) return InvalidArgumentError("the plan has no replicas");
  plan::ValidationReport report;
  WEFT_ASSIGN_OR_RETURN(auto world, planner.CompileWorld(planned, iteration, &report));
  out.microbatches.clear();
  for (const auto& r : planned.plan.replicas) {
    out.microbatches.insert(out.microbatches.end(), r.microbatches.begin(),
                            r.microbatches.end());
  }
  out.validation = report.BriefReport();
  out.plan_json = plan::PlanToJson(world);
  out.world = true;
  out.num_ranks = world.num_ranks();
  out.ranks_per_replica = out.num_ranks / replicas;
  // Rank r of the world plan runs group r % groups of replica r / groups (CompileWorld).
  const int groups = static_cast<int>(planner.static_plan().placement.groups.size());
  if (out.ranks_per_replica * replicas != out.num_ranks || out.ranks_per_replica != groups) {
    return InternalError("world plan of " + std::to_string(out.num_ranks) + " ranks for " +
                         std::to_string(replicas) + " replicas of a placement with " +
                         std::to_string(groups) + " groups");
  }
  return OkStatus();
}

void FillSummary(py::dict& d, const planning::PlannedIteration& p) {
  const auto& e = p.evaluation;
  d["iteration_time_s"] = e.iteration_time_s;
  d["lower_bound_s"] = e.lower_bound_s;
  d["bubble_ratio"] = e.bubble_ratio;
  d["mfu"] = e.mfu;
  d["samples_per_s"] = e.samples_per_s;
  d["tokens_per_s"] = e.tokens_per_s;
  d["peak_memory_bytes"] = e.peak_memory_bytes;
  d["oom"] = e.oom;
  d["plan_time_s"] = p.plan.plan_time_s;
  d["recompute_used"] = std::string(spec::RecomputeName(p.recompute_used));
  d["num_replicas"] = static_cast<int>(p.plan.replicas.size());
  d["slowest_replica"] = e.slowest_replica;
  d["notes"] = p.plan.notes;
}

py::list CorrectionList(const planning::Planner& planner, const planning::PlanState& state) {
  py::list out;
  if (state.correction == nullptr) return out;
  for (const cost::CorrectionEntry& e : state.correction->entries()) {
    py::dict d;
    d["module"] = planner.job().model.modules.at(e.key.module).name;
    d["pass"] = std::string(spec::PassName(e.key.pass));
    d["tokens_bucket"] = e.key.bucket.tokens;
    d["segment_bucket"] = e.key.bucket.mean_segment;
    d["factor"] = e.factor;
    d["observations"] = e.observations;
    out.append(d);
  }
  return out;
}

py::dict PlannedIterationDict(const planning::Planner& planner, int64_t iteration,
                              const planning::PlannedIteration& planned, const spec::Batch& batch,
                              const CompiledReplica& compiled) {
  const planning::JobSetup& setup = planner.setup();
  const planning::StaticPlan& fixed = planner.static_plan();
  const std::string strategy_name(planner.strategy().Name());
  py::dict d;
  d["strategy"] = strategy_name;
  d["model"] = setup.model_name;
  d["cluster"] = setup.cluster_name;
  d["data"] = setup.data_name;
  d["iteration"] = iteration;
  d["description"] = fixed.description;
  d["memory_policy"] = std::string(planning::MemoryPolicyName(planner.memory_policy()));
  FillSummary(d, planned);
  d["plan_json"] = compiled.plan_json;
  d["validation"] = compiled.validation;
  // The plan's layout: a folded placement runs `groups` pipeline ranks per replica and one replica
  // per data-parallel copy (a strategy may choose its own, e.g. fsdp: 1 rank x all GPUs); an
  // unfolded placement's sizes are the job's (its LLM's).
  const bool folded = !fixed.placement.unfolded;
  d["pipeline_size"] = folded ? static_cast<int>(fixed.placement.groups.size())
                              : setup.job.PipelineSize();
  d["dp"] = folded ? static_cast<int>(planned.plan.replicas.size())
                   : setup.job.DataParallelSize();
  // For reading; the runtime takes all of it from plan_json's data tables.
  d["num_microbatches"] = static_cast<int>(compiled.microbatches.size());
  d["microbatches"] = compiled.microbatches;
  d["world"] = compiled.world;
  d["num_ranks"] = compiled.num_ranks;
  d["batch"] = BatchToDict(batch);
  py::list modules, chunks;
  for (const auto& mod : setup.job.model.modules) modules.append(mod.name);
  for (const auto& ch : fixed.placement.chunks) {
    py::dict c;
    c["module"] = ch.module;
    c["module_name"] = setup.job.model.modules.at(ch.module).name;
    c["first_layer"] = ch.first_layer;
    c["num_layers"] = ch.num_layers;
    c["group"] = ch.group;
    c["chunk"] = ch.chunk;
    c["replica"] = ch.replica;  // the module's DP replica (unfolded placements; else 0)
    chunks.append(c);
  }
  d["modules"] = modules;
  d["chunks"] = chunks;
  d["placement"] = fixed.placement.Describe(setup.job.model);
  return d;
}

}  // namespace weft::python
