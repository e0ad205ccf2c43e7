#include "weft/planning/configuration.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "weft/cost/cost_model.h"

namespace weft::planning {
namespace {

unsigned Bit(spec::Recompute level) { return 1u << static_cast<unsigned>(level); }

// "none", "selective+full", ... in spec::kAllRecompute order; "" for no bits.
std::string LevelNames(unsigned bits) {
  std::string out;
  for (spec::Recompute level : spec::kAllRecompute) {
    if ((bits & Bit(level)) == 0) continue;
    if (!out.empty()) out += "+";
    out += spec::RecomputeName(level);
  }
  return out;
}

void AddMicrobatches(int count, ConfigurationUsage& usage) {
  if (count <= 0) return;
  usage.microbatches_min =
      usage.microbatches_min > 0 ? std::min(usage.microbatches_min, count) : count;
  usage.microbatches_max = std::max(usage.microbatches_max, count);
}

}  // namespace

void ConfigurationUsage::Add(const IterationPlan& plan) {
  for (const ReplicaPlan& replica : plan.replicas) {
    for (const graph::Stage& stage : replica.graph.stages()) {
      if (stage.module < 0) continue;
      if (static_cast<size_t>(stage.module) >= recompute_levels.size()) {
        recompute_levels.resize(stage.module + 1, 0);
      }
      unsigned bits = 0;
      for (spec::Recompute level : spec::kAllRecompute) {
        if (stage.recompute_layers[static_cast<int>(level)] > 0) bits |= Bit(level);
      }
      recompute_levels[stage.module] |= bits != 0 ? bits : Bit(stage.recompute);
    }
  }
  if (!plan.assignment.replicas.empty()) {
    for (const Microbatches& mbs : plan.assignment.replicas) {
      AddMicrobatches(static_cast<int>(mbs.size()), *this);
    }
  } else {
    for (const ReplicaPlan& replica : plan.replicas) {
      AddMicrobatches(static_cast<int>(replica.microbatches.size()), *this);
    }
  }
}

report::StrategyConfiguration DescribeConfiguration(const Job& job,
                                                    const StaticPlan& plan,
                                                    const ConfigurationUsage* usage) {
  const Placement& placement = plan.placement;
  report::StrategyConfiguration config;
  const int num_modules = static_cast<int>(job.model.modules.size());
  for (int m = 0; m < num_modules; ++m) {
    report::ModuleConfiguration mc;
    mc.module = job.model.modules[m].name;
    if (m < static_cast<int>(placement.parallel.size())) {
      mc.tp = placement.parallel[m].tp;
      mc.cp = placement.parallel[m].cp;
    }
    const std::vector<int> chunks = placement.ChunksOf(m);
    std::set<graph::GroupId> groups;
    for (int c : chunks) groups.insert(placement.chunks[c].group);
    if (placement.IsReplicated(m)) {
      // One full copy per group: one stage of the whole module, `copies` times.
      mc.pp = chunks.empty() ? 0 : 1;
      mc.copies = std::max(1, static_cast<int>(groups.size()));
      if (!chunks.empty()) mc.layers_per_stage = {placement.chunks[chunks.front()].num_layers};
    } else {
      mc.pp = static_cast<int>(groups.size());
      for (int c : chunks) mc.layers_per_stage.push_back(placement.chunks[c].num_layers);
      std::map<graph::GroupId, int> chunks_on_group;
      for (int c : chunks) {
        mc.chunks_per_rank =
            std::max(mc.chunks_per_rank, ++chunks_on_group[placement.chunks[c].group]);
      }
    }
    if (placement.unfolded) {
      mc.dp = std::max(1, placement.NumReplicas(m));
    } else if (!chunks.empty()) {
      const graph::GroupId g = placement.chunks[chunks.front()].group;
      if (g >= 0 && g < static_cast<int>(placement.groups.size())) {
        mc.dp = std::max(1, placement.groups[g].dp);
      }
    }
    const unsigned used = usage != nullptr && m < static_cast<int>(usage->recompute_levels.size())
                              ? usage->recompute_levels[m]
                              : 0u;
    if (used != 0) {
      mc.recompute = LevelNames(used);
    } else {
      mc.recompute = m < static_cast<int>(plan.recompute.size())
                         ? std::string(spec::RecomputeName(plan.recompute[m]))
                         : std::string(spec::RecomputeName(spec::Recompute::kNone));
    }
    config.modules.push_back(std::move(mc));
  }
  if (usage != nullptr && usage->microbatches_max > 0) {
    config.microbatches_min = usage->microbatches_min;
    config.microbatches_max = usage->microbatches_max;
  } else {
    const int n = plan.num_microbatches > 0 ? plan.num_microbatches : job.parallel.num_microbatches;
    config.microbatches_min = config.microbatches_max = std::max(0, n);
  }
  return config;
}

std::vector<int> ModuleLayersPerGroup(const Placement& placement, int module) {
  std::vector<int> layers(placement.groups.size(), 0);
  for (const Chunk& c : placement.chunks) {
    if (c.module == module && c.replica == 0) layers[c.group] += c.num_layers;
  }
  return layers;
}

}  // namespace weft::planning
