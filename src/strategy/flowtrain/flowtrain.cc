#include "weft/strategy/flowtrain/flowtrain.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "weft/algo/balance.h"
#include "weft/cost/throughput_table.h"
#include "weft/planning/iteration.h"
#include "weft/sched/generators.h"
#include "weft/strategy/common.h"
#include "weft/strategy/dflop/optimizer.h"
#include "weft/strategy/flowtrain/allocator.h"
#include "weft/strategy/flowtrain/packer.h"

namespace weft::strategy::flowtrain {

namespace {

std::vector<int> EvenLayers(int layers, int stages) {
  std::vector<int> out(stages, layers / stages);
  for (int k = 0; k < layers % stages; ++k) ++out[k];
  return out;
}

}  // namespace

StatusOr<Roles> FindRoles(const spec::ModelSpec& model) {
  Roles roles;
  for (int m = 0; m < static_cast<int>(model.modules.size()); ++m) {
    const auto& module = model.modules[m];
    if (module.kind == spec::ModuleKind::kLlm) {
      if (roles.backbone >= 0) {
        return FailedPreconditionError(
            fmt::format("flowtrain trains one LLM backbone; model '{}' has a second ('{}')",
                        model.name, module.name));
      }
      roles.backbone = m;
    } else if (module.IsEncoder() && module.frozen && !model.HasTrainableUpstream(m)) {
      roles.producers.push_back(m);
    } else {
      roles.glue.push_back(m);
    }
  }
  if (roles.backbone < 0) {
    return FailedPreconditionError(
        fmt::format("flowtrain needs an LLM backbone; model '{}' has none", model.name));
  }
  if (roles.producers.empty()) {
    return FailedPreconditionError(fmt::format(
        "flowtrain streams frozen encoders into a pool; model '{}' has no frozen encoder (freeze "
        "one with --freeze NAME)",
        model.name));
  }
  return roles;
}

StatusOr<planning::PlacementSpec> PlacementOfLayouts(const spec::ModelSpec& model,
                                                     const Roles& roles,
                                                     const std::vector<ModuleLayout>& layouts) {
  planning::PlacementSpec spec;
  spec.source = "flowtrain";
  spec.schedule = sched::ScheduleKind::kOneFOneB;
  auto layout_of = [&](int m) -> const ModuleLayout* {
    for (const auto& l : layouts) {
      if (l.module == m) return &l;
    }
    return nullptr;
  };
  int next_gpu = 0;
  std::vector<int> order = roles.producers;
  order.push_back(roles.backbone);
  std::vector<int> first_gpu(model.modules.size(), -1);
  for (int m : order) {
    const ModuleLayout* l = layout_of(m);
    if (!l) {
      return InvalidArgumentError(
          fmt::format("flowtrain: no layout for module '{}'", model.modules[m].name));
    }
    if (l->tp < 1 || l->pp < 1 || l->dp < 1 || l->pp > model.modules[m].num_layers) {
      return InvalidArgumentError(fmt::format(
          "flowtrain: module '{}' layout tp {} pp {} dp {}; need sizes >= 1 and pp <= {} layers",
          model.modules[m].name, l->tp, l->pp, l->dp, model.modules[m].num_layers));
    }
    first_gpu[m] = next_gpu;
    next_gpu += l->Gpus();
  }
  for (int m = 0; m < static_cast<int>(model.modules.size()); ++m) {
    planning::ModulePlacement p;
    p.module = model.modules[m].name;
    if (first_gpu[m] >= 0) {
      const ModuleLayout& l = *layout_of(m);
      p.tp = l.tp, p.dp = l.dp;
      p.layers = EvenLayers(model.modules[m].num_layers, l.pp);
      p.first_gpu = first_gpu[m];
    } else {
      p.on = model.modules[roles.backbone].name;
      p.layers = {model.modules[m].num_layers};
    }
    spec.modules.push_back(std::move(p));
  }
  return spec;
}

planning::PoolSpec PoolOf(const planning::Job& job,
                          const planning::Placement& placement,
                          const Roles& roles) {
  const std::set<int> producers(roles.producers.begin(), roles.producers.end());
  std::set<graph::GroupId> groups;
  for (const auto& c : placement.chunks) {
    if (producers.count(c.module)) groups.insert(c.group);
  }
  const int64_t usable = job.cluster.gpu.UsableMemoryBytes();
  const int64_t host_per_gpu =
      job.cluster.HostMemoryBytesPerNode() / std::max(1, job.cluster.gpus_per_node);
  int64_t hbm = 0, dram = 0;
  int gpus = 0;
  for (graph::GroupId g : groups) {
    const auto& group = placement.groups[g];
    const int n = group.TotalGpus();
    gpus += n;
    hbm += n * std::max<int64_t>(0, (usable - group.static_bytes) / 2);
    dram += n * (host_per_gpu / 2);
  }
  planning::PoolSpec pool;
  pool.producer_modules = roles.producers;
  constexpr double kGiB = double(int64_t{1} << 30);
  if (job.pool_capacity_bytes > 0) {
    pool.capacity_bytes = job.pool_capacity_bytes;
    pool.description = fmt::format("pool {} B over {} producer GPUs, set by --pool-bytes",
                                   pool.capacity_bytes, gpus);
    return pool;
  }
  pool.capacity_bytes = std::max<int64_t>(1, hbm + dram);
  pool.description = fmt::format(
      "pool {:.1f} GiB over {} producer GPUs: HBM tier {:.1f} GiB (half of each GPU's usable "
      "memory after the encoder's state), DRAM tier {:.1f} GiB (half of each GPU's host share)",
      pool.capacity_bytes / kGiB, gpus, hbm / kGiB, dram / kGiB);
  return pool;
}

namespace {

std::string_view VariantName(Variant v) {
  switch (v) {
    case Variant::kFlowTrain:
      return "flowtrain";
    case Variant::kNoPool:
      return "flowtrain-no-pool";
    case Variant::kNoAllocator:
      return "flowtrain-no-allocator";
    case Variant::kNoScheduler:
      return "flowtrain-no-scheduler";
    case Variant::kDistTrain:
      return "disttrain";
  }
  return "flowtrain";
}

class FlowTrainStrategy : public planning::Strategy {
 public:
  explicit FlowTrainStrategy(Variant variant) : variant_(variant) {}
  std::string_view Name() const override { return VariantName(variant_); }
  std::string_view Description() const override {
    switch (variant_) {
      case Variant::kFlowTrain:
        return "FlowTrain: frozen encoders on own groups stream embeddings into a bounded pool "
               "(HBM + DRAM), throughput-matched allocation (MILP), packed microbatches with "
               "zig-zag dispatch, 1F1B backbone with synchronous updates";
      case Variant::kNoPool:
        return "FlowTrain without the pool: its allocation and packing, batch-synchronized";
      case Variant::kNoAllocator:
        return "FlowTrain without the allocator: GPUs split by parameter share, pool, packing";
      case Variant::kNoScheduler:
        return "FlowTrain without the packing scheduler: first-fit packing, round-robin dispatch";
      case Variant::kDistTrain:
        return "DistTrain: disaggregated encoder / backbone groups sized to balance the slowest "
               "stage, batch-synchronized 1F1B";
    }
    return "";
  }

  Status Applies(const Job& job) const override { return FindRoles(job.model).status(); }

  StatusOr<planning::StaticPlan> Prepare(const Job& job) const override {
    WEFT_RETURN_IF_ERROR(job.Validate());
    WEFT_ASSIGN_OR_RETURN(Roles roles, FindRoles(job.model));
    WEFT_ASSIGN_OR_RETURN(Allocation allocation, Allocate(job, roles));
    WEFT_ASSIGN_OR_RETURN(planning::PlacementSpec spec,
                          PlacementOfLayouts(job.model, roles, allocation.layouts));
    WEFT_ASSIGN_OR_RETURN(planning::Placement placement,
                          planning::BuildPlacement(spec, job.model, job.cluster, *job.cost_model));
    planning::StaticPlan plan = MakeStaticPlan(
        std::move(placement), fmt::format("{}: {}", Name(), allocation.description), job.model);
    if (variant_ != Variant::kNoPool && variant_ != Variant::kDistTrain) {
      plan.pool = PoolOf(job, plan.placement, roles);
    }
    return plan;
  }

  StatusOr<planning::Assignment> Assign(const Job& job,
                                        const planning::StaticPlan& plan,
                                        const spec::Batch& batch,
                                        const planning::PlanState& state) const override {
    WEFT_ASSIGN_OR_RETURN(Roles roles, FindRoles(job.model));
    if (variant_ == Variant::kDistTrain) {
      // DistTrain's batches as the job packed them, its encoder replicas balanced (as ours).
      WEFT_ASSIGN_OR_RETURN(planning::Assignment a, Strategy::Assign(job, plan, batch, state));
      WEFT_RETURN_IF_ERROR(BalanceProducers(job, plan, roles, batch, a));
      return a;
    }
    PackOptions options;
    options.capacity_tokens = job.context_tokens > 0 ? job.context_tokens : 8192;
    options.dp = planning::AnchorReplicas(job, plan);
    options.policy = variant_ == Variant::kNoScheduler ? PackPolicy::kFirstFitRoundRobin
                                                       : PackPolicy::kFlowTrain;
    WEFT_ASSIGN_OR_RETURN(options.cost,
                          Cost(job, roles.backbone, plan.placement.parallel[roles.backbone].tp,
                               options.capacity_tokens));
    WEFT_ASSIGN_OR_RETURN(BatchPacking packed,
                          PackBatch(job.model, batch, options, roles.backbone, job.workload));
    WEFT_RETURN_IF_ERROR(BalanceProducers(job, plan, roles, batch, packed.assignment));
    return std::move(packed.assignment);
  }

  StatusOr<planning::IterationPlan> PlanIteration(
      const Job& job,
      const planning::StaticPlan& plan,
      const planning::IterationInput& input) const override {
    return planning::PlanReplicas(job, plan, input, [](const graph::StageGraph& g) {
      return sched::MakeSchedule(sched::ScheduleKind::kOneFOneB, g);
    });
  }

 private:
  struct Allocation {
    std::vector<ModuleLayout> layouts;
    std::string description;
  };
  StatusOr<Allocation> Allocate(const Job& job, const Roles& roles) const;

  // The pool lets any producer replica encode any sample (DistTrain balances its encoder
  // replicas too): each microbatch's encoder work goes
  // to one replica of each producer, longest first to the least loaded (LPT on the encoder
  // units of its samples), instead of the default rule that splits every microbatch's images
  // over all its serving replicas (balanced by cost, graph_builder.cc PlanDispatch).
  static Status BalanceProducers(const Job& job,
                                 const planning::StaticPlan& plan,
                                 const Roles& roles,
                                 const spec::Batch& batch,
                                 planning::Assignment& assignment) {
    spec::Batch unpacked = batch;
    unpacked.sequences.clear();
    WEFT_ASSIGN_OR_RETURN(cost::ThroughputTable tables,
                          cost::ThroughputTable::Analytical(job.model, *job.cost_model));
    assignment.producers.assign(job.model.modules.size(), {});
    for (int m : roles.producers) {
      const int replicas = plan.placement.NumReplicas(m);
      const dflop::Roles r{.encoder = m, .projector = -1, .llm = roles.backbone};
      WEFT_ASSIGN_OR_RETURN(auto items,
                            dflop::ItemShapes(job.model, r, tables, unpacked, job.workload));
      struct Work {
        double units = 0;
        int replica = 0, microbatch = 0;
      };
      std::vector<Work> work;
      auto& table = assignment.producers[m];
      table.resize(assignment.replicas.size());
      for (size_t a = 0; a < assignment.replicas.size(); ++a) {
        table[a].resize(assignment.replicas[a].size());
        for (size_t j = 0; j < assignment.replicas[a].size(); ++j) {
          Work w{.replica = static_cast<int>(a), .microbatch = static_cast<int>(j)};
          for (int q : assignment.replicas[a][j]) {
            const auto& sequences =
                assignment.sequences.empty() ? batch.sequences : assignment.sequences;
            if (sequences.empty()) {  // an unpacked batch: indices are samples
              w.units += items[q].encoder_units;
              continue;
            }
            for (int sample : sequences[q].sample_indices) w.units += items[sample].encoder_units;
          }
          work.push_back(w);
        }
      }
      // One LPT for every dispatch of encoder work (algo/balance.h; the graph builder's default
      // uses its eligible-bins form): largest microbatch first, onto the least-loaded replica.
      std::vector<double> units;
      for (const Work& w : work) units.push_back(w.units);
      WEFT_ASSIGN_OR_RETURN(algo::BalanceResult lpt,
                            algo::LongestProcessingTimeFirst(units, replicas));
      for (size_t k = 0; k < work.size(); ++k) {
        table[work[k].replica][work[k].microbatch] = {lpt.bin_of_item[k]};
      }
    }
    return OkStatus();
  }

  // Eq. 3 with weft's per-microbatch constant (fixed_term: held-out error ≤ 0.12% vs 22% for
  // the paper's two terms at 2K, docs/strategies_flowtrain.md), fitted on the job's cost model.
  static StatusOr<PackCost> Cost(const Job& job, int module, int tp, int64_t capacity) {
    WEFT_ASSIGN_OR_RETURN(
        PackCostFit fit,
        FitPackCost(job.model, module, tp, *job.cost_model,
                    PackCostFitOptions{.capacity_tokens = capacity, .fixed_term = true}));
    return fit.cost;
  }

  Variant variant_;
};

StatusOr<FlowTrainStrategy::Allocation> FlowTrainStrategy::Allocate(const Job& job,
                                                                    const Roles& roles) const {
  WEFT_ASSIGN_OR_RETURN(cost::ThroughputTable tables,
                        cost::ThroughputTable::Analytical(job.model, *job.cost_model));
  StatusOr<AllocationResult> result = [&]() -> StatusOr<AllocationResult> {
    switch (variant_) {
      case Variant::kNoAllocator:
        return AllocateByParameterShare(job, roles, tables);
      case Variant::kDistTrain:
        return AllocateDistTrain(job, roles, tables);
      default:
        return AllocateMilp(job, roles, tables);
    }
  }();
  if (!result.ok()) return result.status();
  return Allocation{.layouts = result->Layouts(), .description = result->Describe(job.model)};
}

}  // namespace

std::unique_ptr<planning::Strategy> MakeFlowTrainStrategy(Variant variant) {
  return std::make_unique<FlowTrainStrategy>(variant);
}

}  // namespace weft::strategy::flowtrain
