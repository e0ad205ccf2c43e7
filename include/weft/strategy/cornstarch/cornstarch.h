#pragma once
// Cornstarch's modality parallelism with frozen-status-aware partitioning and its loosely-coupled
// auto-parallelization (../shared/papers/cornstarch.txt §4.1, §4.2, §5.2, Algorithm 1):
//
//  - every encoder branch (the encoder with its projector(s), which sit on the encoder's last
//    stage) on GPU groups of its own with its own stage count, the branches running at once;
//    the LLM's first stage waits for every branch's output of a microbatch (one unfolded stage
//    graph; cross-modality 1F1B from sched::MakeSchedule);
//  - layers split by per-layer forward + backward time under the frozen rule
//    (cost::BackwardModeOf: frozen encoders no backward, a frozen LLM before a trainable projector
//    input gradients only); recomputation costs only where a gradient is computed (the cost
//    model's recompute_s is 0 for modules without backward);
//  - Algorithm 1: for each LLM stage count L whose GPUs fit the budget, the min-max partition of
//    the LLM gives the target per-stage time t_L; every encoder branch gets the fewest stages
//    whose per-stage time is <= t_L (algo::FewestPartsUnderBound); each combination is simulated
//    on the job's first profile batch (1F1B, the planner's memory policy) and the fastest
//    iteration wins (ties: fewer GPUs).
//
// `cornstarch-frozen-unaware` is the same system weighting layers by 3 × forward time (backward
// assumed 2× forward), the paper's Table 3 comparison.
//
// Every module keeps the TP and CP of the job and the LLM's DP (each branch is replicated DP
// times); GPUs: the LLM's groups first, then each branch's, each group aligned to its width.
//
// Thread-safety: pure functions; the strategies are immutable.
#include <memory>
#include <string>
#include <vector>

#include "weft/common/status.h"
#include "weft/planning/placement_file.h"
#include "weft/strategy/strategy.h"

namespace weft::strategy::cornstarch {

enum class Weighting {
  kFrozenAware,    // forward + backward under the frozen rule
  kFrozenUnaware,  // 3 × forward (backward assumed 2× forward)
};

// One stage of a candidate: the modules' layers on it and their times for the representative
// microbatch (frozen rule; recompute none).
struct StageTime {
  std::string label;  // "vision[0,16) vision_projector[0,1)"
  std::string module;  // the stage's main module (the encoder or the LLM)
  double forward_s = 0;
  double backward_s = 0;
};

struct Candidate {
  int llm_stages = 0;
  std::vector<int> encoder_stages;  // per branch, in Branches() order
  double target_s = 0;              // the LLM partition's largest stage weight
  int gpus = 0;                     // GPUs the placement uses (all DP replicas)
  bool feasible = false;
  std::string why_not;              // when infeasible
  planning::PlacementSpec spec;       // the layout (feasible candidates)
  std::vector<StageTime> stages;    // per stage, LLM stages then each branch's
  // Simulated on the first profile batch (0 when there was none or the candidate is infeasible).
  double iteration_s = 0;
  double samples_per_s = 0;
  bool oom = false;
  std::string recompute;  // uniform level the memory policy needed ("none", ...)
};

struct Algorithm1Result {
  std::vector<std::string> branches;  // encoder names, in Candidate::encoder_stages order
  std::vector<Candidate> candidates;  // in increasing LLM stage count
  int winner = -1;                    // index into candidates
  std::string why;                    // one line: why the winner won
  double run_time_s = 0;              // wall time of the whole search
  // Multi-line table: one row per candidate (stages, target, GPUs, iteration, samples/s per
  // GPU used) and the reason.
  std::string Report() const;
};

// Runs Algorithm 1 for the job (GPU budget: job.cluster.TotalGpus()). FailedPrecondition when
// the model has no encoder upstream of its LLM or no candidate fits the budget.
StatusOr<Algorithm1Result> RunAlgorithm1(const Job& job, Weighting weighting);

// One candidate with fixed stage counts (the LLM's and each branch's, Branches() order), for
// comparisons at equal stage counts (the paper's Table 3). Not simulated.
StatusOr<Candidate> PartitionWithStages(const Job& job, Weighting weighting, int llm_stages,
                                        const std::vector<int>& encoder_stages);

// Strategies `cornstarch` (kFrozenAware) and `cornstarch-frozen-unaware`.
std::unique_ptr<Strategy> MakeCornstarchStrategy(Weighting weighting);

}  // namespace weft::strategy::cornstarch
