#include "weft/strategy/registry.h"

#include "weft/common/strict_input.h"

#include "weft/strategy/baselines.h"
#include "weft/strategy/cornstarch/cornstarch.h"
#include "weft/strategy/dflop/dflop.h"
#include "weft/strategy/dip/dip.h"
#include "weft/strategy/flowtrain/flowtrain.h"
#include "weft/strategy/fsdp/fsdp.h"
#include "weft/strategy/lpt_assign/lpt_assign.h"
#include "weft/strategy/megatron_mimo/megatron_mimo.h"

namespace weft::strategy::internal {

const std::vector<RegistryEntry>& Registry() {
  static const std::vector<RegistryEntry> kRegistry = {
      {"megatron-1f1b",
       [] { return MakeMegatronStrategy("megatron-1f1b", sched::ScheduleKind::kOneFOneB, 1); }},
      {"megatron-vpp",
       [] {
         return MakeMegatronStrategy("megatron-vpp", sched::ScheduleKind::kInterleavedOneFOneB, 2);
       }},
      {"megatron-mimo", [] { return megatron_mimo::MakeMegatronMimoStrategy(); }},
      {"gpipe", [] { return MakeMegatronStrategy("gpipe", sched::ScheduleKind::kGPipe, 1); }},
      {"zb-h1",
       [] { return MakeMegatronStrategy("zb-h1", sched::ScheduleKind::kZeroBubbleH1, 1); }},
      {"optimus", [] { return MakeOptimusStrategy(); }},
      {"colocated", [] { return MakeColocatedStrategy(); }},
      {"replicated", [] { return MakeReplicatedStrategy(); }},
      {"cornstarch",
       [] { return cornstarch::MakeCornstarchStrategy(cornstarch::Weighting::kFrozenAware); }},
      {"cornstarch-frozen-unaware",
       [] { return cornstarch::MakeCornstarchStrategy(cornstarch::Weighting::kFrozenUnaware); }},
      {"nnscaler", [] { return MakeNnScalerStrategy(); }},
      {"fsdp", [] { return fsdp::MakeFsdpStrategy(); }},
      {"dip-partition-only", [] { return dip::MakeDipStrategy(dip::DipVariant::kPartitionOnly); }},
      {"dip-interleave", [] { return dip::MakeDipStrategy(dip::DipVariant::kInterleave); }},
      {"dip-reorder", [] { return dip::MakeDipStrategy(dip::DipVariant::kReorder); }},
      {"dip", [] { return dip::MakeDipStrategy(dip::DipVariant::kFull); }},
      {"megatron-1f1b-lpt", [] { return lpt_assign::MakeLptAssignStrategy(); }},
      {"dflop", [] { return dflop::MakeDflopStrategy(dflop::Variant::kDflop); }},
      {"dflop-paper", [] { return dflop::MakeDflopStrategy(dflop::Variant::kPaper); }},
      {"dflop-optimizer-only",
       [] { return dflop::MakeDflopStrategy(dflop::Variant::kOptimizerOnly); }},
      {"flowtrain", [] { return flowtrain::MakeFlowTrainStrategy(flowtrain::Variant::kFlowTrain); }},
      {"flowtrain-no-pool",
       [] { return flowtrain::MakeFlowTrainStrategy(flowtrain::Variant::kNoPool); }},
      {"flowtrain-no-allocator",
       [] { return flowtrain::MakeFlowTrainStrategy(flowtrain::Variant::kNoAllocator); }},
      {"flowtrain-no-scheduler",
       [] { return flowtrain::MakeFlowTrainStrategy(flowtrain::Variant::kNoScheduler); }},
      {"disttrain", [] { return flowtrain::MakeFlowTrainStrategy(flowtrain::Variant::kDistTrain); }},
  };
  return kRegistry;
}

}  // namespace weft::strategy::internal

namespace weft::strategy {

std::vector<std::string> StrategyNames() {
  std::vector<std::string> names;
  for (const auto& entry : internal::Registry()) names.emplace_back(entry.name);
  return names;
}

StatusOr<std::unique_ptr<Strategy>> MakeStrategy(std::string_view name) {
  for (const auto& entry : internal::Registry()) {
    if (entry.name == name) return entry.make();
  }
  std::string known;
  for (const auto& entry : internal::Registry()) {
    known += (known.empty() ? "" : ", ") + std::string(entry.name);
  }
  return NotFoundError("unknown strategy '" + std::string(name) + "'" +
                       DidYouMean(name, StrategyNames()) + "; known: " + known);
}

}  // namespace weft::strategy
