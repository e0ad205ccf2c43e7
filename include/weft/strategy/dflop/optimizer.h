#pragma once
// DFLOP's data-aware 3D parallelism optimizer (../shared/papers/dflop.txt §3.3, Algorithm 1) and
// the per-item stage durations its online scheduler balances (§3.4).
//
// DFLOP trains one modality encoder (with its projector) and one LLM on GPU groups of their own:
// θ = (E_tp, E_pp, E_dp, L_tp, L_pp, L_dp, N_mb) with E_tp·E_pp·E_dp + L_tp·L_pp·L_dp = N_gpus,
// TP inside a node and dividing the module's heads, PP at most the module's layers, N_mb
// microbatches per LLM replica (m = N_mb·L_dp buckets per global batch of GBS items). The
// makespan model is the paper's: T = (N_mb + E_pp + L_pp − 1) · max(E_dur, L_dur), with stage
// durations priced from the throughput tables (cost/throughput_table.h: measured or analytical).
//
// Per-item durations (ItemDurations), additive over the items of a bucket:
//   E_dur(d) = (L_dp / E_dp) · (E_layers / E_pp) · t_E(b_mb) / b_mb · u(d)
//   L_dur(d) = (L_layers / L_pp) · ( t_lin(s_mb) / s_mb · s(d) + Σ_segments t_attn(segment) )
// u(d) = the item's encoder tokens / the table's tokens per instance (effective batch), s(d) its
// LLM tokens; t_E, t_lin at the mean microbatch size b_mb / s_mb (the throughput the bucket runs
// at), attention per segment (the samples packed in the item: block-diagonal masks). Frozen
// modules: backward dropped (nothing trainable upstream) or halved (input gradients only).
// Projector, embedding and LM head are left out of the formula (small); the simulator re-rank
// prices them.
//
// DP sizes: one of E_dp, L_dp divides the other (the inter-model communicator moves whole
// replicas' shares; Fig. 6 has 4 → 2).
//
// Memory (eqs. 4–5): state = parameters per layer × layers/pp × (2 bytes, + gradient and
// optimizer bytes when trainable, optimizer / DP under ZeRO-1), + the embedding / LM head on the
// LLM's worst stage; activations per layer × layers/pp × microbatch units, held for E_pp + L_pp
// microbatches on the encoder (its outputs wait for the whole pipeline) and L_pp on the LLM
// (1F1B). Both must fit the GPU's usable memory.
//
// Objectives:
//  - kPaper: Algorithm 1 as printed — T of the mean item (every item the dataset mean).
//  - kExpected (weft's default, beyond the paper): the mean over the profile batches of T with
//    max(E_dur, L_dur) replaced by the balanced-bucket lower bound of that batch,
//    max(ΣE/m, ΣL/m, max_d max(E_d, L_d)): what the online scheduler can reach, so a batch with
//    one long video or many images is priced as it runs, not as the mean.
// The best `rerank_top_k` configs of the objective are then simulated by weft's event simulator
// on the profile batches (1F1B over the E_pp + L_pp stages, the real inter-model communication,
// the caller's bucket assignment) and re-ranked by the mean simulated iteration.
//
// `accept_within` reproduces the public code's acceptance rule: among configs within that
// fraction of the best objective, the one with the fewest microbatches (0 = off, plain argmin).
//
// Deterministic: enumeration order is fixed (E_gpus ascending, then E tp, pp; L tp, pp; N_mb),
// ties keep the first. Thread-safety: pure functions.
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "weft/common/status.h"
#include "weft/cost/throughput_table.h"
#include "weft/planning/parallel_space.h"
#include "weft/planning/placement_file.h"
#include "weft/planning/strategy.h"

namespace weft::strategy::dflop {

using planning::Job;

// DFLOP's two modules: one encoder (kVit / kAudioEncoder), its projector (optional), one LLM.
struct Roles {
  int encoder = -1;
  int projector = -1;
  int llm = -1;
};
// FailedPrecondition naming the rule when the model is not one encoder (+ projector) + one LLM.
StatusOr<Roles> FindRoles(const spec::ModelSpec& model);

// One module's (tp, pp, dp): the enumeration and state-memory rule are planning/parallel_space.h,
// shared with the per-strategy tuner (strategy/tune.h).
using ModuleConfig = planning::ModuleLayout;

struct Config {
  ModuleConfig encoder;
  ModuleConfig llm;
  int num_microbatches = 1;  // N_mb per LLM replica
  int PipelineDepth() const { return encoder.pp + llm.pp; }
  bool operator==(const Config&) const = default;
  // "E tp1 pp1 dp8 | L tp4 pp2 dp3 | N_mb 16"
  std::string Describe() const;
};

// What one item (a sequence of the batch, or a sample when unpacked) asks of the two modules.
struct ItemShape {
  double encoder_units = 0;           // effective batch: encoder tokens / tokens per instance
  int64_t llm_tokens = 0;             // s(d)
  std::vector<int64_t> llm_segments;  // the samples packed in it (attention units)
};
// The items of `batch` (its sequences, else its samples), in index order.
StatusOr<std::vector<ItemShape>> ItemShapes(const spec::ModelSpec& model,
                                            const Roles& roles,
                                            const cost::ThroughputTable& tables,
                                            const spec::Batch& batch,
                                            const data::WorkloadOptions& workload);

// Per-item stage seconds under `config` for a global batch of `global_items` items whose mean
// encoder units and LLM tokens are `mean` (sets b_mb and s_mb).
struct TwoStage {
  double encoder_s = 0;
  double llm_s = 0;
};
class DurationModel {
 public:
  static StatusOr<DurationModel> Create(const spec::ModelSpec& model,
                                        const Roles& roles,
                                        const cost::ThroughputTable& tables,
                                        const Config& config,
                                        int global_items,
                                        double mean_encoder_units,
                                        double mean_llm_tokens);
  TwoStage Item(const ItemShape& item) const;
  double encoder_s_per_unit() const { return encoder_s_per_unit_; }
  double llm_s_per_token() const { return llm_s_per_token_; }

 private:
  const cost::ThroughputTable* tables_ = nullptr;
  int llm_ = -1;
  int llm_tp_ = 1;
  double encoder_s_per_unit_ = 0;
  double llm_s_per_token_ = 0;
  double llm_layers_per_stage_ = 0;
  double llm_backward_factor_ = 1;
};

enum class Objective { kPaper, kExpected };
std::string_view ObjectiveName(Objective objective);  // "paper", "expected"
StatusOr<Objective> ParseObjective(std::string_view name);

struct OptimizerOptions {
  Objective objective = Objective::kExpected;
  int rerank_top_k = 8;      // 0 = the formula's argmin, no simulation
  double accept_within = 0;  // public code's rule: 0.10 = fewest microbatches within 10%
  int max_microbatches = 0;  // 0 = GBS / L_dp (the paper's bound)
  // Skip (E, L, N_mb) whose work lower bound (the tables' cheapest per-unit times, the bubble
  // factor, the longest item) cannot beat what is kept: same argmins and re-rank set as without.
  bool prune = true;
  Status Validate() const;
};

struct Candidate {
  Config config;
  double paper_s = 0;       // Algorithm 1's T (mean item)
  double expected_s = 0;    // weft's expected makespan (balanced-bucket bound, mean over batches)
  double simulated_s = -1;  // mean simulated iteration (-1 = not simulated)
  bool simulated_oom = false;
  std::string simulation_error;  // why it was not simulated (empty when it was, or not asked)
  double encoder_memory_bytes = 0;
  double llm_memory_bytes = 0;
};

struct OptimizerResult {
  Config best;
  std::vector<Candidate> top;  // by the objective (then re-ranked when simulated), best first
  int64_t module_configs = 0;  // (E, L) pairs enumerated
  int64_t evaluated = 0;       // (E, L, N_mb) priced
  int64_t pruned = 0;          // (E, L) pairs skipped whole by the lower bound
  std::map<std::string, int64_t> rejected;  // reason -> count (e.g. "encoder memory")
  // Argmins of the three rankings among the top candidates (the simulated one when simulated).
  Config argmin_paper, argmin_expected, argmin_simulated;
  double summary_wall_s = 0;  // item shapes and per-TP attention of the profile batches
  double formula_wall_s = 0;  // enumeration and pricing (Algorithm 1's phases)
  double rerank_wall_s = 0;
  int global_items = 0;
  std::string ToText() const;
};

// Builds the placement of `config` (encoder + projector on GPUs [0, E_gpus), LLM after; layers
// even; 1F1B; N_mb microbatches) as a user could write it.
StatusOr<planning::PlacementSpec> PlacementOf(const Config& config,
                                              const spec::ModelSpec& model,
                                              const Roles& roles);

// Prices one iteration's assignment for the re-rank (the strategy passes its scheduler).
using AssignFn = std::function<StatusOr<planning::Assignment>(
    const Job&, const planning::StaticPlan&, const Config&, const spec::Batch&)>;

// Algorithm 1 (objective per options) over job.cluster's GPUs and job.profile_batches, then the
// simulator re-rank with `assign` (nullptr = the default round-robin assignment).
StatusOr<OptimizerResult> Optimize(const Job& job,
                                   const cost::ThroughputTable& tables,
                                   const OptimizerOptions& options,
                                   const AssignFn& assign = {});

}  // namespace weft::strategy::dflop
