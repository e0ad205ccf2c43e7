#pragma once
// DFLOP (../shared/papers/dflop.txt): the data-aware 3D parallelism optimizer picks, once per
// job, the encoder's and the LLM's own TP / PP / DP and the microbatch count
// (strategy/dflop/optimizer.h); the online microbatch scheduler then assigns every global batch's
// items to the N_mb × L_dp buckets (microbatches) so that the longest encoder or LLM stage is
// short (eq. 6; algo/bucket_balance.h); the pipeline runs 1F1B over the E_pp + L_pp stages on
// their own GPU groups, encoder outputs redistributed to the LLM replicas when E_dp ≠ L_dp.
//
// Three registered variants:
//   dflop                 — weft's: expected-makespan objective, simulator re-rank of the best 8,
//                           our two-resource heuristic + MILP hybrid (≤ 50 ms) per batch.
//   dflop-paper           — the paper's: Algorithm 1's mean-item objective, no re-rank, an exact
//                           MILP with a time limit and the paper's LPT as the fallback.
//   dflop-optimizer-only  — the optimizer's config with the paper's baseline assignment: items
//                           dealt to buckets at random (seeded by the job's seed and iteration).
// Each buckets' items are the batch's sequences (or samples when unpacked); bucket j is
// microbatch j mod N_mb of LLM replica j / N_mb. Stage durations come from analytical
// throughput tables of the job's cost model (a measured weft.profile/v1 file replaces them
// through `weft optimize --profile`).
//
// Adaptive correction (§3.4.3, strategy/dflop/correction.h): `dflop` and `dflop-paper` learn a
// penalty per LLM input-shape bucket from measured stage times (Planner::Observe →
// Strategy::Observe → PlanState::feedback) and add it to the scheduler's item durations for
// later batches; a cost–benefit toggle switches tracking off when its benefit is below its cost.
// Without measured feedback nothing changes.
//
// Thread-safety: immutable; Prepare / Assign / PlanIteration are const.
#include <memory>
#include <string>

#include "weft/algo/bucket_balance.h"
#include "weft/strategy/dflop/correction.h"
#include "weft/strategy/dflop/optimizer.h"
#include "weft/strategy/strategy.h"

namespace weft::strategy::dflop {

enum class Variant { kDflop, kPaper, kOptimizerOnly };
enum class SchedulerKind { kHybrid, kPaper, kRandom };

// The config a dflop static plan stands for (read back from its placement).
StatusOr<Config> ConfigOfPlan(const Job& job, const planning::StaticPlan& plan);

// The online scheduler: `batch`'s items into N_mb × L_dp buckets of `config`, the penalties of
// `correction` (may be null) added to the items' LLM durations; the decision in the notes.
StatusOr<planning::Assignment> ScheduleBatch(const Job& job,
                                             const Config& config,
                                             const cost::ThroughputTable& tables,
                                             const spec::Batch& batch,
                                             SchedulerKind kind,
                                             algo::BucketBalanceResult* balance = nullptr,
                                             const CorrectionState* correction = nullptr,
                                             const CorrectionOptions& correction_options = {});

std::unique_ptr<planning::Strategy> MakeDflopStrategy(Variant variant,
                                                      CorrectionOptions correction = {});

}  // namespace weft::strategy::dflop
