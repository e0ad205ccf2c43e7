#pragma once
// PlanData: the data an ExecutionPlan runs on, shipped inside the plan so that a runtime needs
// the plan and the tensors only — never a batch on the side, nor a copy of a C++ data rule
// (docs/plan_schema.md, "Data tables"). Four tables:
//  - samples: the iteration's global batch (spec::Batch::samples; index = the sample id every
//    `samples` list of the plan names): each sample's Sample::id (what a runtime seeds its
//    tensors with) and its text tokens;
//  - sequences: the batch's packed LLM sequences (spec::Batch::sequences; one per sample, in
//    sample order, when the batch is not packed): their samples in packing order and LLM tokens;
//  - microbatches: every microbatch the plan's ranks run, keyed by (replica, microbatch): an
//    action's `mb` on rank r names microbatch (ranks[r].replica, mb). Each lists its sequences
//    and, per module with a chunk in the plan, the module's workload instances in
//    data::DeriveModuleWorkload order (the list a compute's [instance_begin, instance_end)
//    indexes): per instance the tokens and sample of each segment, the item of its sample (image,
//    audio clip, video; -1 for an LLM sequence) and, for a padded instance (a Whisper window
//    padded to max_source_positions), the tokens that hold data;
//  - ranks: per rank of the plan the DP replica whose microbatches it runs, the placement group
//    it runs (rank r of a folded world plan runs group r % G of replica r / G) and that group's
//    chunks (module, slot, layers).
// A plan compiled from a bare stage graph (plan::CompilePlan alone: no batch, no placement)
// has empty tables (PlanData::empty()); the validator checks the tables only when present and a
// runtime refuses a plan without them.
// Thread-safety: value types; MakePlanData is a pure function.
#include <cstdint>
#include <vector>

#include "weft/common/status.h"
#include "weft/data/workload.h"
#include "weft/spec/model.h"
#include "weft/spec/workload.h"

namespace weft::plan {

struct SampleData {
  int64_t id = 0;           // spec::Sample::id
  int32_t text_tokens = 0;  // text tokens, without modality tokens
  friend bool operator==(const SampleData&, const SampleData&) = default;
};

struct SequenceData {
  std::vector<int32_t> samples;  // sample ids, in packing order (the LLM instance's segments)
  int64_t llm_tokens = 0;        // text + modality tokens of its samples, as packed
  friend bool operator==(const SequenceData&, const SequenceData&) = default;
};

// One attention unit of a module in a microbatch (data::WorkloadInstance).
struct InstanceData {
  std::vector<int32_t> tokens;   // per segment
  std::vector<int32_t> samples;  // per segment: the sample id (same length as tokens)
  int32_t item = -1;             // the item of its sample (per-module numbering); -1 = none
  // Tokens that hold data, <= Σ tokens: less only for a padded instance (an audio window padded
  // to max_source_positions holds ⌈real frames / conv_downsample⌉ tokens of data).
  int64_t unpadded_tokens = 0;

  int64_t TotalTokens() const;  // Σ tokens
  friend bool operator==(const InstanceData&, const InstanceData&) = default;
};

struct MicrobatchData {
  int replica = 0;     // the replica whose ranks' `mb` indices name it
  int microbatch = 0;  // its index in the replica (an action's `mb`)
  std::vector<int32_t> sequences;  // sequence ids
  // [module] (size = the plan's modules): the module's instances; empty for a module without
  // work in the microbatch or without a chunk in the plan.
  std::vector<std::vector<InstanceData>> instances;
  friend bool operator==(const MicrobatchData&, const MicrobatchData&) = default;
};

// Consecutive layers of one module in one pipeline slot of a rank (strategy::Chunk).
struct ChunkData {
  int module = 0;
  int chunk = 0;  // slot index on the rank (an action's stage.chunk)
  int first_layer = 0;
  int num_layers = 0;
  int module_replica = 0;  // the module's DP replica (unfolded placements; else 0)
  friend bool operator==(const ChunkData&, const ChunkData&) = default;
};

struct RankData {
  int replica = 0;  // the DP replica whose microbatches the rank runs
  int group = 0;    // the placement's device group it runs (a stage graph's group)
  std::vector<ChunkData> chunks;  // the group's chunks, in placement order
  friend bool operator==(const RankData&, const RankData&) = default;
};

struct PlanData {
  std::vector<SampleData> samples;
  std::vector<SequenceData> sequences;
  // Sorted by (replica, microbatch); each replica's microbatches are 0, 1, ... without gaps.
  std::vector<MicrobatchData> microbatches;
  std::vector<RankData> ranks;  // index = rank of the plan

  bool empty() const {
    return samples.empty() && sequences.empty() && microbatches.empty() && ranks.empty();
  }
  // Index into `microbatches` of (replica, microbatch), or -1 (binary search).
  int FindMicrobatch(int replica, int microbatch) const;
  friend bool operator==(const PlanData&, const PlanData&) = default;
};

// The tables of a plan whose rank r runs group ranks[r].group of replica ranks[r].replica (its
// `chunks` given by the caller): samples and sequences of `batch`, and for every replica some
// rank runs its microbatches (microbatches_by_replica[q][mb] = sequence ids: indices into
// batch.sequences, or batch.samples when the batch is not packed) with the instances of every
// module that has a chunk on some rank, derived with `workload` (the job's options: the
// planner's stage graphs were built with them). Errors: InvalidArgument naming the first
// out-of-range replica, sequence or sample; a data::DeriveModuleWorkload error as it is.
StatusOr<PlanData> MakePlanData(const spec::ModelSpec& model, const spec::Batch& batch,
                                const std::vector<std::vector<std::vector<int>>>&
                                    microbatches_by_replica,
                                std::vector<RankData> ranks,
                                const data::WorkloadOptions& workload = {});

// Σ tokens of instances [begin, end) of `module` in microbatch `index` of `data` (0 when out of
// range): the shape of a compute stage as the plan's tables give it.
int64_t InstanceTokens(const PlanData& data, int index, int module, int begin, int end);

}  // namespace weft::plan
