#pragma once
// `weft tune`: a parallel-configuration search per strategy (docs/tune.md). For each strategy,
// the backbone's TP (inside a node, dividing the heads), CP, PP and DP over the job's GPUs and the
// microbatch count (dividing the replica's share of the fixed global batch) are enumerated with
// DFLOP's enumeration (planning/parallel_space.h), pruned by divisibility and a model-state
// memory bound (sound: no placement of the backbone on tp·pp GPUs holds less), screened by the
// strategy's own plans of the profile batches at the smallest search budget (1 work unit:
// rule-based strategies give their real plan, DIP's MCTS one step) in two levels (every layout at
// its most microbatches, then every microbatch count of the best 2·max_simulations layouts), and
// the best `max_simulations` of the screen — the job's own configuration always among them — are
// planned by the strategy at the full budget on every profile batch; the fastest that fits memory
// wins. The recompute level is the planner's memory policy's (the first uniform level that fits,
// or the strategy's own choice). A strategy whose static plan does not follow the backbone's
// sizes (DFLOP, Megatron MIMO: they search their own) is run at the job's configuration only,
// said in its row.
//
// Deterministic: fixed enumeration order, ties keep the first, search strategies under a work
// budget. Thread-safety: reentrant.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "weft/common/status.h"
#include "weft/planning/job_setup.h"
#include "weft/planning/parallel_space.h"
#include "weft/planning/strategy.h"
#include "weft/strategy/compare.h"

namespace weft::strategy {

struct TuneOptions {
  planning::JobOptions job;             // the job; its own configuration is the untuned default
  std::vector<std::string> strategies;  // empty = every registered strategy that applies
  int max_simulations = 4;              // per strategy: candidates the strategy plans itself
  bool exhaustive = false;              // plan every candidate with the strategy (the oracle)
  std::vector<int> context_parallel_sizes = {1, 2};  // CP sizes tried (each must divide GPUs)
  // More batches of the profile stream (never the batches a comparison is measured on) that the
  // winner must fit at the smallest search budget; one that does not is out of memory and the
  // next candidate is checked (0 = no check). Memory varies with the batch; two profile batches
  // alone chose configurations within 0.2% of the usable memory that later batches overflowed.
  int memory_check_batches = 8;
  planning::PlanBudget budget = {.time_budget_s = 0, .work_budget = 100};
  std::function<void(const std::string&)> progress;  // one line per strategy

  static constexpr int kMaxSimulations = 1000;
  static constexpr int kMaxMemoryCheckBatches = 256;
  Status Validate() const;
};

struct TuneCandidate {
  int tp = 1, cp = 1, pp = 1, dp = 1, microbatches = 1;
  bool is_default = false;   // the job as given
  double screen_s = -1;      // the screen's mean over the profile batches (-1 = not screened)
  double time_s = -1;        // mean over the profile batches, planned by the strategy (-1 = not)
  bool oom = false;
  std::string recompute = "";  // the level the memory policy kept ("" = the strategy's own)
  int64_t peak_memory_bytes = 0;
  std::string error = "";    // the strategy refused it (one line)
  std::string plan = "";     // the static plan's one-line description
  // The memory check on the check batches: "" = not checked, else "fits N check batches" or
  // "out of memory on check batch K (peak X GiB)".
  std::string memory_check = "";

  std::string Describe() const;  // "tp4 cp1 pp2 dp2 mb8"
  // The job options that run this candidate (the default returns `base` unchanged).
  planning::JobOptions Apply(const planning::JobOptions& base, int global_batch_sequences) const;
};

struct StrategyTuning {
  std::string strategy;
  std::string error;  // no candidate ran ("" = tuned)
  std::string note;   // e.g. "searches its own configuration: run at the job's"
  TuneCandidate best;
  TuneCandidate default_config;
  int64_t enumerated = 0;  // candidates formed (after the enumeration's own rules)
  int64_t screened = 0;    // rule plans simulated
  int64_t planned = 0;     // planned by the strategy
  planning::RejectCounts rejected;  // rule -> count
  std::vector<TuneCandidate> planned_candidates;  // fastest first
  double wall_s = 0;
  // Default time / best time (>= 1 when both ran; 0 when either did not).
  double SpeedupOverDefault() const;
};

struct TuneResult {
  std::string model, cluster, data;
  int gpus = 0;
  int gpus_per_node = 0;
  int global_batch_sequences = 0;
  int context_tokens = 0;
  int profile_batches = 0;
  int memory_check_batches = 0;
  int max_simulations = 0;
  bool exhaustive = false;
  std::vector<StrategyTuning> strategies;  // fastest tuned first, errors last
  // The rules every strategy's space is pruned by, one line each.
  static std::vector<std::string> Rules();
  std::string ToText() const;
  std::string ToJson() const;  // weft.tune/v1
  // The fastest tuned strategy that fits memory, and the next one; nullptr when there is none.
  const StrategyTuning* Best() const;
  const StrategyTuning* RunnerUp() const;
};

StatusOr<TuneResult> Tune(const TuneOptions& options);

// `weft compare --tune`: Tune over options.strategies (tune.job and tune.strategies are taken
// from `options`), then every tuned strategy compared at its own best configuration on the same
// iteration batches (the global batch, context, data and seed are fixed, so the batches are the
// same); a strategy that could not be tuned keeps its error row.
struct TunedComparison {
  CompareRun run;
  TuneResult tuning;
};
StatusOr<TunedComparison> RunTunedComparison(const CompareOptions& options, TuneOptions tune);

// `auto` (weft compare --strategies auto, weft simulate / plan --strategy auto): the best tuned
// strategy of the job and the options that run it; `reason` names it with its configuration,
// the runner-up and the margin ("auto: dip at tp1 cp2 pp8 dp1 mb8 (3.918 s/iteration); runner-up
// dip-reorder ... 6.1% slower").
struct AutoChoice {
  std::string strategy;
  planning::JobOptions job;
  std::string reason;
};
StatusOr<AutoChoice> ChooseAuto(const TuneResult& tuning, const planning::JobOptions& job);
StatusOr<AutoChoice> ChooseAuto(const TuneOptions& options);

}  // namespace weft::strategy
