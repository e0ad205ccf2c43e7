#pragma once
// `megatron-1f1b-lpt`: Megatron-LM 1F1B whose data assignment is balanced — the example of the
// assignment seam (planning::Strategy::Assign). Everything but the assignment is megatron-1f1b's;
// the assignment deals sequences, heaviest first by LLM tokens, to the least loaded of the
// DP × microbatch buckets (longest processing time first). A new system that owns its sample →
// microbatch assignment (DFLOP's buckets, FlowTrain's packer) plugs in the same way, without
// touching planning/.
#include <memory>
#include <vector>

#include "weft/common/status.h"
#include "weft/strategy/strategy.h"

namespace weft::strategy::lpt_assign {

// The LPT assignment: `loads[s]` is sequence s's weight (LLM tokens); `dp` × `m` buckets (fewer
// microbatches when a replica would get none, said in notes). Each microbatch lists its
// sequences in ascending index order. Deterministic: ties go to the lower bucket index.
StatusOr<Assignment> LptAssignment(const std::vector<int64_t>& loads, int dp, int m);

std::unique_ptr<Strategy> MakeLptAssignStrategy();

}  // namespace weft::strategy::lpt_assign
