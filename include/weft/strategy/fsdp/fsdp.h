#pragma once
// Baseline `fsdp`: PyTorch FullyShardedDataParallel with full sharding (ZeRO-3), the data-parallel
// baseline of DIP's Table 4. No pipeline: every rank (the job's TP×CP GPUs, 1×1 when the setup
// gives none) holds the whole model's computation, encoders and LLM, and runs its microbatches one
// after another (gradient accumulation); the model is sharded over the DP ranks, which fill every
// GPU of the cluster.
//
// Cost model (docs/strategies.md "FSDP"):
//  - FSDP unit = one layer unit of the chain (a transformer layer with its first/last-layer extras,
//    a projector as one unit). Before each unit's forward its bf16 parameters are all-gathered
//    over the DP ranks, again before its backward; after a trainable unit's backward its
//    gradients are reduce-scattered. Each collective costs cost::CollectiveLatency (ring:
//    (d−1)/d · bytes / (bandwidth · efficiency) + (d−1) · link latency + NCCL base) on NVLink
//    when the DP ranks lie in one node, else on the network. Gradient bytes are the cost model's (the bytes other strategies
//    all-reduce); there is no end-of-iteration all-reduce (grad_sync_bytes = 0).
//  - Prefetch (ExposedStepTimes): one compute stream, one communication stream that runs the
//    collectives in issue order; a unit's all-gather is issued when the previous unit's compute
//    starts (at most two units unsharded), its reduce-scatter when its own compute ends.
//  - The collectives synchronize the ranks unit by unit, so the ranks run in lockstep: each unit
//    pass takes the slowest rank's compute time. Every rank runs every unit in every microbatch
//    (a rank without images still joins the vision encoder's all-gathers, as FSDP requires).
//  - Memory per GPU: parameters, gradients and optimizer state / DP, plus two units' unsharded
//    parameters and gradients (the unit computing and the one prefetched or reducing), plus the
//    activations of one microbatch under the memory policy's recompute level.
//  - Microbatch size: the job's (sequences per DP replica / microbatches), so each rank runs
//    ⌈DP_job · m / DP⌉ microbatches.
// The stage graph has one stage per (microbatch, unit, pass) on one group; a stage's latency is
// the time the lockstep ranks advance over it (compute plus the communication it exposes), so
// the simulated iteration is the FSDP iteration plus the sharded optimizer step.
//
// Thread-safety: the strategy is immutable; Prepare and PlanIteration are const.
#include <memory>
#include <span>
#include <vector>

#include "weft/common/status.h"
#include "weft/strategy/strategy.h"

namespace weft::strategy::fsdp {

// How FSDP runs a job.
struct FsdpLayout {
  int tp = 1;                // per rank: the job's LLM TP and CP
  int cp = 1;
  int dp = 1;                // ranks the model is sharded over: cluster GPUs / (tp · cp)
  int num_microbatches = 1;  // per rank (gradient accumulation steps)
};
// FailedPrecondition when the cluster has fewer GPUs than tp · cp.
StatusOr<FsdpLayout> LayoutOf(const Job& job);
// The job as FSDP plans it: every module with pp 1 and dp = layout.dp.
Job FsdpJob(const Job& job, const FsdpLayout& layout);

// One unit pass in execution order (all microbatches of the iteration).
struct UnitStep {
  double compute_s = 0;         // the slowest rank's compute of the pass
  double all_gather_s = 0;      // before the compute; 0 = no gather (nothing to gather)
  double reduce_scatter_s = 0;  // after the compute; 0 = none (forward, frozen units)
};
// The time each step advances the ranks under the prefetch rule above: step i ends when its
// compute ends (the last step also waits for the last collective). The durations sum to the
// iteration's compute-and-communication time; each is >= the step's compute.
std::vector<double> ExposedStepTimes(std::span<const UnitStep> steps);

// Collective times of one FSDP unit (`num_layers` layers of `module` from `first_layer`) per
// microbatch pass, with the bytes they move per GPU.
struct UnitCollectives {
  int64_t parameter_bytes = 0;  // bf16 parameters of the unit on one TP rank (all-gathered)
  int64_t gradient_bytes = 0;   // its gradients on one TP rank (reduce-scattered; 0 if frozen)
  double all_gather_s = 0;
  double reduce_scatter_s = 0;  // 0 when gradient_bytes is 0
};
StatusOr<UnitCollectives> UnitCollectivesOf(const Job& job, const FsdpLayout& layout, int module,
                                            int first_layer, int num_layers);

std::unique_ptr<Strategy> MakeFsdpStrategy();

}  // namespace weft::strategy::fsdp
