#pragma once
// DFLOP's adaptive correction (../shared/papers/dflop.txt §3.4.3) inside the online scheduler.
//
// Kernels switch algorithms with tensor shapes, so a few rare input shapes run consistently
// slower (or faster) than the throughput tables predict. The correction learns an additive
// penalty per input-shape bucket from measured stage times and adds it to the scheduler's
// per-item duration, so later batches are balanced with it.
//
// Shape bucket: an item's LLM sequence length s(d) on the log grid of cost::ShapeBucketOf
// (bucket = floor(4·log2 s), a factor 2^(1/4) ≈ 1.19 per bucket). Only the LLM is tracked: an
// LLM stage holds whole items (an encoder stage may hold a share of one item's instances when
// E_dp > L_dp, so its excess cannot be charged to items without the instance split).
//
// Feedback (Planner::Observe → Strategy::Observe → PlanState::feedback, the planner's one
// measured-feedback path): per LLM pipeline stage of each microbatch (graph stages of one
// (replica, group, chunk, microbatch), passes summed) the measured time M against the planned
// time P (the graph's latency without the planner's own cost correction) and the items in it.
// Residual r = M − P − Σ_items penalty(item). A stage with |r| ≤ clean_tolerance·P is clean: its
// items' shapes are confirmed (each item observes its penalty + its share of r). In the other
// stages, the shapes not confirmed by a clean stage of the same iteration are the suspects; r is
// split evenly over the suspect items (each observes its penalty + r / suspects); a deviating
// stage without suspects teaches nothing. Per shape the penalty is the exponentially weighted
// mean of its observations (k observations in one iteration weigh 1 − (1 − α)^k). A shape's
// penalty is applied by the scheduler when |penalty| / its mean predicted item time exceeds
// `threshold` (the paper's "edge cases").
//
// Cost–benefit (eq. 7): after each observed iteration the benefit B of the iteration is the
// scheduler's C_max on that batch without penalties minus with them, both priced with the
// penalties (what the correction is worth on that batch), over C_max with them. Every `window`
// observed iterations the mean B is compared with the tracking cost C (tracking_cost_fraction of
// an iteration; a stated, modelled overhead: the paper measures ≈ 4% for its monitoring — weft's
// own bookkeeping costs milliseconds, see docs/strategies_dflop.md): mean B < C switches tracking
// off for the rest of the job (no more observations, no penalties: the plain scheduler), else it
// stays on. The decision is printed in the assignment's notes.
//
// Deterministic: no clocks, no randomness; shapes in a sorted map. Thread-safety: immutable
// state, pure functions.
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "weft/algo/bucket_balance.h"
#include "weft/common/status.h"
#include "weft/planning/graph_builder.h"
#include "weft/planning/strategy.h"
#include "weft/strategy/dflop/optimizer.h"

namespace weft::strategy::dflop {

struct CorrectionOptions {
  bool enabled = true;            // false: no tracking at all (Observe keeps no state)
  double threshold = 0.10;        // |penalty| / predicted item time beyond which it is applied
  double clean_tolerance = 0.05;  // |residual| / planned stage time within which a stage is clean
  double alpha = 0.6;             // weight of one observation, in (0, 1]
  int window_iterations = 4;      // I: iterations per cost–benefit decision (≥ 1)
  double tracking_cost_fraction = 0.04;  // C: tracking's overhead per iteration, of its time
  bool toggle = true;                    // false: tracking never switches off (the always-on arm)
  // Every field in range; InvalidArgument naming the field and its range otherwise.
  Status Validate() const;
};

// The LLM shape bucket of an item with `llm_tokens` tokens (cost::ShapeBucketOf's token bucket).
int LlmShapeBucket(int64_t llm_tokens);

struct ShapePenalty {
  double penalty_s = 0;      // learned extra seconds per item on one LLM pipeline stage
  double predicted_s = 0;    // mean predicted item time (scheduler's L_dur) of the shape's items
  int64_t observations = 0;  // item observations (one per item per LLM stage)
  int64_t iterations = 0;    // iterations in which the shape was observed
  // Whether the scheduler applies it: observed and |penalty| / predicted > threshold.
  bool Applied(double threshold) const {
    return observations > 0 && predicted_s > 0 && std::abs(penalty_s) > threshold * predicted_s;
  }
};

enum class TrackingDecision { kUndecided, kOn, kOff };

class CorrectionState final : public planning::StrategyFeedback {
 public:
  std::map<int, ShapePenalty> penalties;  // by LlmShapeBucket
  TrackingDecision decision = TrackingDecision::kUndecided;
  int64_t iterations_observed = 0;
  int64_t window_observed = 0;  // iterations in the current window
  double window_benefit_sum = 0;
  double last_window_benefit = 0;  // mean B of the last closed window
  double last_benefit = 0;         // B of the last observed iteration
  int64_t stages_clean = 0, stages_deviating = 0, stages_unexplained = 0;  // last iteration

  bool Tracking() const { return decision != TrackingDecision::kOff; }
  // The penalty the scheduler adds to an item of `llm_tokens` tokens (0 when not applied or
  // tracking is off).
  double AppliedPenalty(int64_t llm_tokens, double threshold) const;
  int AppliedShapes(double threshold) const;
  // "correction: tracking on (B 6.1% ≥ C 4.0% over 4 iterations), 2 shapes penalised" etc.
  std::string Describe(const CorrectionOptions& options) const;
};

// The feedback of `state` as DFLOP's correction state (null when none or another kind).
const CorrectionState* CorrectionOf(const planning::PlanState& state);

// Per-item scheduler durations of `batch` under `config` (ItemShapes + DurationModel), the
// penalties of `correction` added to the LLM time of items whose shape has one applied
// (correction may be null).
struct ItemDurations {
  std::vector<ItemShape> items;
  std::vector<TwoStage> durations;  // without penalties
  std::vector<double> penalty_s;    // applied penalty per item (0 = none)
};
StatusOr<ItemDurations> DurationsOf(const Job& job,
                                    const Config& config,
                                    const cost::ThroughputTable& tables,
                                    const spec::Batch& batch,
                                    const CorrectionState* correction,
                                    const CorrectionOptions& options);

// The observation step (see the header comment): the state after `planned` (planned in `state`,
// with `config`) ran and its stages took `measured`. `schedule` re-balances a batch under given
// durations (the strategy's scheduler) for the benefit B. Returns `before` unchanged when
// tracking is off or the options disable it.
using BalanceFn = std::function<StatusOr<std::vector<int>>(
    const std::vector<algo::TwoResourceItem>& durations, int buckets)>;
// The factor the planner's stage-shape correction applied to `stage` (1 when `factors` is
// empty): planned / factor is the stage's time as the uncorrected cost model prices it.
StatusOr<double> PlannerCorrectionFactor(const Job& job, const spec::Batch& batch,
                                         const planning::Microbatches& microbatches,
                                         const cost::CostCorrection& factors,
                                         const graph::Stage& stage);

StatusOr<std::shared_ptr<const CorrectionState>> ObserveCorrection(
    const Job& job,
    const Config& config,
    const cost::ThroughputTable& tables,
    const CorrectionOptions& options,
    const planning::PlanState& state,
    const planning::IterationPlan& planned,
    const std::vector<planning::MeasuredStage>& measured,
    const BalanceFn& balance);

// C_max = max over buckets of max(Σ first, Σ second) of an assignment (bucket per item).
double BucketMakespan(const std::vector<algo::TwoResourceItem>& durations,
                      const std::vector<int>& bucket_of,
                      int buckets);

}  // namespace weft::strategy::dflop
