#pragma once
// FlowTrain's heterogeneous parallel allocator (../shared/papers/flowtrain.txt §3.3, eq. 1–2):
// once the pool decouples them, producers (frozen encoders) and the consumer (the LLM backbone)
// run at their own rates, so the allocation maximizes the throughput of the flow instead of
// balancing pipeline stages.
//
// Candidates per module: producers TP × DP (forward only, one stage), the backbone TP × PP × DP.
// Rules (each rejection counted by name): TP within a node and dividing the module's heads (a TP
// the throughput tables hold), PP ≤ layers, backbone DP ≤ the global batch's microbatches (every
// replica trains at least one), memory within the GPU's usable bytes. Among candidates of one
// module with the same GPU count only the fastest is kept (the MILP and the exhaustive search
// see the same sets; the throughput optimum is unchanged by that).
//
// Rates in samples/s, from the throughput tables (analytical from the cost model, or a measured
// weft.profile/v1 file) and the job's profile batches:
//   producer e:  P_e = dp · k / t_fwd(tp)  with k samples per packed microbatch and t_fwd the
//                cost model's forward of the whole encoder on their mean shape (tokens, Σ s² of
//                the images: high-resolution images pay their attention);
//   backbone:    C = B / ((m + pp − 1) · t_stage)   per global batch of B samples packed into
//                M = ⌈B · s̄ / capacity⌉ microbatches, m = ⌈M / dp⌉ per replica, t_stage = the
//                slower of the first stage (⌈L/pp⌉ layers) and the last (⌊L/pp⌋ layers + head)
//                on one full microbatch (linear on its tokens, attention per sample, the glue
//                (projector) on the first stage), forward + backward; 1F1B's fill and drain are
//                in (m + pp − 1); the gradient all-reduce and optimizer step of the first stage
//                are added once per batch.
// Objective (lexicographic): maximize T = min(min_e P_e, C); then minimize Σ_e |P_e − C|; then
// fewer GPUs. AllocateMilp solves it with CBC in two solves; AllocateExhaustive enumerates every
// combination (the oracle). Two baselines price the same candidates:
//   AllocateByParameterShare — GPUs split by the modules' parameter shares, each module's fastest
//                candidate within its share (the `flowtrain-no-allocator` ablation);
//   AllocateDistTrain        — DistTrain's rule as FlowTrain describes it ("optimize the worst
//                pipeline stage"): maximize the slowest per-microbatch stage rate, the backbone
//                priced per stage without 1F1B's fill and drain, producers as above.
// Not modelled: the fetch of embeddings from the pool; the encoder's effective batch (the
// profile batches' mean microbatch shape, not the distribution).
// Thread-safety: pure functions.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "weft/common/status.h"
#include "weft/cost/throughput_table.h"
#include "weft/planning/strategy.h"
#include "weft/strategy/flowtrain/flowtrain.h"

namespace weft::strategy::flowtrain {

struct AllocatorOptions {
  int64_t capacity_tokens = 0;  // packed microbatch; 0 = the job's context tokens (else 8192)
  int max_gpus = 0;             // device budget; 0 = the cluster's
  Status Validate() const;
};

struct ModuleCandidate {
  ModuleLayout layout;
  double rate_samples_per_s = 0;  // P_e or C (the DistTrain stage rate for AllocateDistTrain)
  double memory_bytes = 0;        // per GPU, the busiest
};

// The workload an allocation prices (means over the job's profile batches).
struct FlowWorkload {
  double samples_per_batch = 0;          // B
  double llm_tokens_per_sample = 0;      // s̄
  std::vector<double> units_per_sample;  // per producer: encoder units per sample
  // Per producer, then per glue module (Roles order): mean tokens, Σ s² (attention segments)
  // and instances per sample, to price a microbatch's shape with the cost model.
  std::vector<double> producer_tokens, producer_sum_squared, producer_instances;
  std::vector<double> glue_tokens, glue_sum_squared, glue_instances;
  std::vector<int64_t> sample_tokens;    // every profile sample's LLM tokens (attention)
  int64_t capacity_tokens = 8192;
};

struct AllocationResult {
  std::vector<ModuleCandidate> modules;  // producers (Roles::producers order), then the backbone
  double throughput_samples_per_s = 0;   // T
  double imbalance_samples_per_s = 0;    // Σ_e |P_e − C|
  int gpus = 0;
  bool has_runner_up = false;  // the best allocation with another split
  std::vector<ModuleCandidate> runner_up;
  double runner_up_throughput_samples_per_s = 0;
  std::map<std::string, int64_t> rejected;  // rule -> candidates
  int64_t candidates = 0;                   // kept over all modules
  std::string method;                       // "milp", "exhaustive", "parameter share", "disttrain"

  std::vector<ModuleLayout> Layouts() const;
  // "vision tp1 dp40 (P 51.2 samples/s) | llm tp4 pp2 dp27 (C 50.9 samples/s): T 50.9 samples/s
  //  on 256 GPUs; runner-up ...; rejected: ..."
  std::string Describe(const spec::ModelSpec& model) const;
};

// The workload summary of the job's profile batches.
StatusOr<FlowWorkload> SummarizeWorkload(const planning::Job& job,
                                         const Roles& roles,
                                         const cost::ThroughputTable& tables,
                                         const AllocatorOptions& options);

// Candidates of every role module (producers, then the backbone), rates as above (stage rates
// for the backbone when `disttrain_stage_rate`). Rejections are added to `rejected`.
StatusOr<std::vector<std::vector<ModuleCandidate>>> ModuleCandidates(
    const planning::Job& job,
    const Roles& roles,
    const cost::ThroughputTable& tables,
    const FlowWorkload& workload,
    const AllocatorOptions& options,
    bool disttrain_stage_rate,
    std::map<std::string, int64_t>& rejected);

StatusOr<AllocationResult> AllocateMilp(const planning::Job& job,
                                        const Roles& roles,
                                        const cost::ThroughputTable& tables,
                                        const AllocatorOptions& options = {});
StatusOr<AllocationResult> AllocateExhaustive(const planning::Job& job,
                                              const Roles& roles,
                                              const cost::ThroughputTable& tables,
                                              const AllocatorOptions& options = {});
StatusOr<AllocationResult> AllocateByParameterShare(const planning::Job& job,
                                                    const Roles& roles,
                                                    const cost::ThroughputTable& tables,
                                                    const AllocatorOptions& options = {});
StatusOr<AllocationResult> AllocateDistTrain(const planning::Job& job,
                                             const Roles& roles,
                                             const cost::ThroughputTable& tables,
                                             const AllocatorOptions& options = {});

}  // namespace weft::strategy::flowtrain
