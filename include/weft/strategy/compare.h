#pragma once
// Setting up a Job from names (model, cluster, GPUs, data) and running a strategy comparison:
// what `weft compare` and `weft simulate` do, as a library call.
// Thread-safety: functions are reentrant; results are value types.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "weft/common/status.h"
#include "weft/cost/cost_model.h"
#include "weft/data/packing.h"
#include "weft/report/comparison.h"
#include "weft/sim/timeline.h"
#include "weft/spec/preset.h"
#include "weft/strategy/strategy.h"

namespace weft::strategy {

struct JobOptions {
  std::string model = "vlm-s";     // preset name or YAML/JSON path
  std::string cluster = "";        // preset name or path; "" = the model's setup cluster
  int gpus = 0;                    // total GPUs; 0 = the model's setup
  int pipeline_size = 0;           // pipeline ranks P of the backbone; 0 = the setup's pp
  std::string data = "";           // generator profile or data file; "" = the setup's profile
  int sequences_per_batch = 0;     // packed sequences per global batch; 0 = 2·P·m·DP default
  int num_microbatches = 0;        // per DP replica; 0 = setup's, else 2·P
  int context_tokens = 0;          // 0 = the setup's (8192 when unset)
  uint64_t seed = 1;
  int profile_batches = 2;         // batches the static strategies may look at
  std::string placement = "";      // user placement file (strategy `manual`); "" = none
  bool charge_idle_gpus = true;    // Job::charge_idle_gpus

  // The valid ranges (docs/cli.md): beyond them a run would exhaust memory or take far longer
  // than a planning session, so they are refused before any work.
  static constexpr int kMaxGpus = 16384;                 // simulate: ~2.4 s per iteration (vlm-s)
  static constexpr int kMaxPipelineSize = 1024;
  static constexpr int kMaxSequencesPerBatch = 65536;    // vlm-s: ~13 s, ~0.4 GB per iteration
  static constexpr int kMaxMicrobatches = 4096;
  static constexpr int kMaxContextTokens = 1 << 20;
  // First out-of-range field, named with its value and range ("gpus = -1; must be in [0, 16384]
  // (0 = the model's setup)"); OK otherwise. MakeJobSetup calls it.
  Status Validate() const;
};

// The strategy `name` for a job: a registered strategy, or `manual` built from
// options.placement (read and checked against the job's model and cluster).
StatusOr<std::unique_ptr<Strategy>> MakeStrategyForJob(std::string_view name,
                                                       const JobOptions& options, const Job& job);

// An owned Job with its cost model and where it came from.
struct JobSetup {
  Job job;
  std::unique_ptr<cost::CostModel> cost_model;  // job.cost_model points here
  std::string model_name, cluster_name, data_name;
  int context_tokens = 8192;
  int sequences_per_batch = 0;
  data::LongClipRule long_clips = data::LongClipRule::kTruncate;  // the model setup's rule
  std::string notes;  // given vs used
};
StatusOr<std::unique_ptr<JobSetup>> MakeJobSetup(const JobOptions& options);

// Global batches for iterations [first, first + count): a generator profile draws fresh samples
// per iteration (iteration mixed into the seed); a file is read once and cut into batches, cycled.
// A data file is read once: malformed records are skipped, samples packing cannot place are
// rejected, and a short last batch is dropped (no strategy fails on a 1-sequence batch). When
// any record was malformed, more than 1% of the samples were not used, or a batch was dropped,
// `warning` (if given) receives one line saying what was given and what was used.
StatusOr<std::vector<spec::Batch>> MakeIterationBatches(const JobSetup& setup, int64_t first,
                                                        int count, std::string* warning = nullptr);

struct CompareOptions {
  JobOptions job;
  int iterations = 10;
  std::vector<std::string> strategies;  // empty = all registered
  std::string baseline = "megatron-1f1b";
  PlanBudget budget;
  int keep_timeline_of_iteration = -1;  // iteration whose graph+timeline is kept (-1 = last)
  // Called after each (strategy, iteration) with a one-line progress message.
  std::function<void(const std::string&)> progress;
};

// A kept graph + timeline of one iteration of one strategy (for traces and the HTML report).
struct KeptTimeline {
  std::string strategy;
  int iteration = 0;
  int replica = 0;       // the DP replica kept: the slowest one of the iteration
  int num_replicas = 1;
  graph::StageGraph graph;
  sim::Timeline timeline;
};

struct CompareRun {
  report::Comparison comparison;
  std::string data_warning;  // MakeIterationBatches' warning ("" = every sample used)
  std::vector<KeptTimeline> timelines;  // one per strategy that succeeded
  std::vector<std::string> static_plans;  // per strategy: its static plan description or error
};

// Runs every strategy on the same batches. A strategy that fails on this input gets an error
// entry (the run goes on); a bad job (unknown model, malformed file) fails the call.
StatusOr<CompareRun> RunComparison(const CompareOptions& options);

}  // namespace weft::strategy
