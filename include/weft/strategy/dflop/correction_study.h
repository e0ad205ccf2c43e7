#pragma once
// The Fig. 15 analogue of DFLOP's adaptive correction (../shared/papers/dflop.txt §5.3.7) in
// simulation, through the planner's feedback path: a "measured" side = the cost model's stage
// times (without the planner's correction) plus latency injected into the LLM forward of every
// pipeline stage for each item whose shape bucket (LlmShapeBucket) was chosen anomalous, with
// optional multiplicative noise; each iteration is planned (Planner::Plan), "measured" (the
// injected graphs simulated by the event simulator), and fed back (Planner::Observe).
//
// Anomalous shapes: among the shape buckets of the run's batches whose item share is at most
// `rate`, in a seeded random order, taken while their cumulative item share stays ≤ rate (at least
// one): rare shapes, about `rate` of the items. Injected latency per anomalous item per LLM
// stage: latency_fraction × the maximum stage duration of the first iteration's uncorrected plan.
//
// Three arms plan the same batches: without correction, with correction always on, and with the
// cost–benefit toggle. An iteration's time is the simulated (injected) iteration time, plus the
// modelled tracking cost (CorrectionOptions::tracking_cost_fraction of it) while tracking is on.
// Net speedup of an arm = Σ time without / Σ time of the arm − 1.
//
// Deterministic given the seeds (work-budgeted planning, seeded choices and noise).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "weft/common/status.h"
#include "weft/planning/planner.h"
#include "weft/strategy/dflop/correction.h"

namespace weft::strategy::dflop {

// The synthetic measured side.
struct InjectedDeviations {
  std::vector<int> anomalous_buckets;  // LlmShapeBucket values, ascending
  double item_share = 0;               // of the run's items in them
  double latency_s = 0;                // per anomalous item per LLM pipeline stage (forward)
  double noise_sigma = 0;              // log-normal noise of every measured stage
  uint64_t seed = 1;
};
// The anomalous buckets of `batches` for `rate` (see above); `latency_s` left 0.
StatusOr<InjectedDeviations> ChooseAnomalousShapes(const planning::Job& job,
                                                   const std::vector<spec::Batch>& batches,
                                                   double rate,
                                                   uint64_t seed);
// The maximum stage latency of `planned`'s graphs.
double MaxStageSeconds(const planning::IterationPlan& planned);

// What the injected side measured for one planned iteration: per graph stage its measured
// seconds, and the iteration's simulated time with them. `planned` was planned in `state`
// (its stage latencies carry the state's cost correction, which the measured side removes).
struct MeasuredRun {
  std::vector<planning::MeasuredStage> stages;
  double iteration_time_s = 0;
};
StatusOr<MeasuredRun> MeasureInjected(const planning::Planner& planner,
                                      const planning::PlanState& state,
                                      const planning::PlannedIteration& planned,
                                      const InjectedDeviations& injected,
                                      int64_t iteration);

struct CorrectionStudyOptions {
  std::string model = "llava-ov-llama3-8b";
  std::string cluster = "a100";
  int gpus = 16;
  std::string data = "mixed";
  int iterations = 12;
  std::vector<double> rates = {0.01, 0.03, 0.05};
  std::vector<double> latency_fractions = {0.25, 0.5, 0.75, 1.0};
  std::vector<uint64_t> seeds = {1, 2, 3};
  double noise_sigma = 0.02;
  CorrectionOptions correction = {};
  Status Validate() const;
};

struct CorrectionCell {
  double rate = 0, latency_fraction = 0;
  double item_share = 0;     // mean over seeds
  double without_s = 0;      // mean per iteration, over seeds
  double always_on_s = 0;    // incl. tracking cost
  double toggle_s = 0;       // incl. tracking cost while on
  double gain = 0;           // Σ without / Σ always-on without its cost − 1 (mean over seeds)
  double net_always_on = 0;  // mean over seeds
  double net_toggle = 0;     // mean over seeds
  int seeds_on = 0;          // seeds whose toggle ended on
  int seeds = 0;
  double mean_benefit = 0;  // the toggle's last window B, mean over seeds
};
struct CorrectionStudy {
  std::vector<CorrectionCell> cells;
  double observe_wall_s_per_iteration = 0;  // real CPU cost of Observe (median), not a result
  std::string ToMarkdown(const CorrectionStudyOptions& options) const;
};
using StudyProgress = std::function<void(const std::string&)>;
StatusOr<CorrectionStudy> RunCorrectionStudy(const CorrectionStudyOptions& options,
                                             const StudyProgress& progress = {});

}  // namespace weft::strategy::dflop
