#pragma once
// Setting up a Job from names (model, cluster, GPUs, data) and drawing its global batches: what
// every front end does before planning (docs/architecture.md "The planner").
// Thread-safety: functions are reentrant; results are value types.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"
#include "weft/cost/cost_model.h"
#include "weft/data/packing.h"
#include "weft/planning/strategy.h"
#include "weft/spec/preset.h"

namespace weft::planning {

// A size given for every module (`all`, e.g. --tp 4) and/or per module by name (--tp vision=1);
// a module's own entry wins. 0 / empty = the setup's.
struct ModuleSizes {
  int all = 0;
  std::map<std::string, int> by_module = {};
  bool empty() const { return all == 0 && by_module.empty(); }
  bool operator==(const ModuleSizes&) const = default;
};
// "4" -> all = 4; "vision=1" -> by_module["vision"] = 1 (repeatable). InvalidArgument naming the
// flag and the rule (an integer in [1, max], a module name before '=').
Status AddModuleSize(std::string_view flag, std::string_view text, int max, ModuleSizes& sizes);

struct JobOptions {
  std::string model = "vlm-s";  // preset name or YAML/JSON path
  std::string cluster = "";     // preset name or path; "" = the model's setup cluster
  int gpus = 0;                 // total GPUs; 0 = the model's setup
  int pipeline_size = 0;        // pipeline ranks P of the backbone; 0 = the setup's pp
  std::string data = "";        // generator profile or data file; "" = the setup's profile
  int sequences_per_batch = 0;  // packed sequences per global batch; 0 = 2·P·m·DP default
  int num_microbatches = 0;     // per DP replica; 0 = setup's, else 2·P
  int context_tokens = 0;       // 0 = the setup's (8192 when unset)
  uint64_t seed = 1;
  int profile_batches = 2;          // batches the static strategies may look at
  std::string placement = "";       // user placement file (strategy `manual`); "" = none
  bool charge_idle_gpus = true;     // Job::charge_idle_gpus
  std::vector<std::string> freeze;  // modules marked frozen on top of the spec's (--freeze)
  int64_t pool_bytes = 0;           // Job::pool_capacity_bytes (--pool-bytes); 0 = the strategy's
  // --tp / --cp: tensor / context parallel size of every module or of one (ModuleSizes). With
  // `all`, a module whose heads that TP does not divide takes the largest TP below it that does
  // (said in JobSetup::notes); a per-module size is taken as given (and validated).
  ModuleSizes tensor_size = {}, context_size = {};
  // --dp: data-parallel replicas of the backbone (every module shares them); 0 = as many as
  // fill the GPUs. tp·cp·pp·dp must fit the GPUs; GPUs left over idle (said in notes).
  int data_parallel_size = 0;
  // --micro-batch-size (Megatron's name): packed sequences per microbatch; sets the microbatches
  // per replica to global batch / (size · DP), which must divide. 0 = --microbatches decides.
  int micro_batch_sequences = 0;
  // --recompute-granularity (Megatron's name): the lowest uniform recompute level the memory
  // policy tries ("" = none first, then selective, then full; the first that fits is kept).
  std::string recompute = "";
  // --decoder-first/last-pipeline-num-layers (Megatron's names): the backbone layers the plan must
  // put on the first / last pipeline rank; checked against the strategy's plan by
  // Planner::Create (weft's strategies choose the split; the flags verify an emitted config).
  int first_stage_llm_layers = 0, last_stage_llm_layers = 0;
  // Accepted from a Megatron argument list and checked by the CLI (weft models SP with TP > 1,
  // uniform recompute of every layer): no effect on the job.
  bool sequence_parallel_flag = false;
  std::string recompute_method = "";
  int recompute_num_layers = 0;

  // The valid ranges (docs/cli.md): beyond them a run would exhaust memory or take far longer
  // than a planning session, so they are refused before any work.
  static constexpr int64_t kMaxPoolBytes = int64_t{1} << 50;  // 1 PiB
  static constexpr int kMaxGpus = 16384;  // simulate: ~2.4 s per iteration (vlm-s)
  static constexpr int kMaxPipelineSize = 1024;
  static constexpr int kMaxSequencesPerBatch = 65536;  // vlm-s: ~13 s, ~0.4 GB per iteration
  static constexpr int kMaxMicrobatches = 4096;
  static constexpr int kMaxContextTokens = 1 << 20;
  static constexpr int kMaxParallelSize = 16384;
  // First out-of-range field, named with its value and range ("gpus = -1; must be in [0, 16384]
  // (0 = the model's setup)"); OK otherwise. MakeJobSetup calls it.
  Status Validate() const;
};

// An owned Job with its cost model and where it came from.
struct JobSetup {
  Job job;
  std::unique_ptr<cost::CostModel> cost_model;  // job.cost_model points here
  std::string model_name, cluster_name, data_name;
  int context_tokens = 8192;
  int sequences_per_batch = 0;
  data::LongClipRule long_clips = data::LongClipRule::kTruncate;  // the model setup's rule
  std::string notes;                                              // given vs used
  // The lowest uniform recompute level the planner's memory policy tries (JobOptions::recompute;
  // rule-based strategies only: Planner::Create refuses it for one that manages memory).
  spec::Recompute recompute_floor = spec::Recompute::kNone;
  int first_stage_llm_layers = 0, last_stage_llm_layers = 0;  // JobOptions' (0 = unchecked)
};
StatusOr<std::unique_ptr<JobSetup>> MakeJobSetup(const JobOptions& options);

// Global batches for iterations [first, first + count): a generator profile draws fresh samples
// per iteration (iteration mixed into the seed); a file is read once and cut into batches, cycled.
// A data file is read once: malformed records are skipped, samples packing cannot place are
// rejected, and a short last batch is dropped (no strategy fails on a 1-sequence batch). When
// any record was malformed, more than 1% of the samples were not used, or a batch was dropped,
// `warning` (if given) receives one line saying what was given and what was used.
StatusOr<std::vector<spec::Batch>> MakeIterationBatches(const JobSetup& setup,
                                                        int64_t first,
                                                        int count,
                                                        std::string* warning = nullptr);
// Representative batches: the same distribution with another seed (data the static strategies
// and weft tune see before training, not the batches they are measured on). Batches
// [0, JobOptions::profile_batches) are the job's profile batches; later indices are more of the
// same stream (weft tune's memory-check batches). A data file has one order: its batches.
StatusOr<std::vector<spec::Batch>> MakeProfileBatches(const JobSetup& setup, int64_t first,
                                                      int count);

}  // namespace weft::planning
