#pragma once
// Baseline `megatron-mimo`: today's Megatron for multimodal models (Megatron-LM's MIMO models with
// a multimodule 1F1B schedule, Megatron-Bridge's MIMO parallelism config). Every module (each
// encoder with its projector, and the LLM) sits on a rank range of its own with its own TP / PP /
// CP / DP; layers are split evenly within each module; one static 1F1B schedule across the
// modules' stages serves every batch, with encoder outputs sent (and redistributed across DP
// sizes) to the LLM replicas as real transfers.
//
// The config is chosen once, before training, by the rule a user tuning MIMO by hand follows:
// TP and CP of each module as in the job's setup (what fits the module's weights); every split
// of the GPUs over the modules (rank ranges in data-flow order, tiling the world) and every
// PP × DP of each module that passes Megatron-Bridge's checks and weft's
// (planning::CheckMimoConfig) is simulated with 1F1B on the job's profile batches, with the first
// uniform recompute level that fits (none, selective, full); the fastest mean iteration among
// those that fit wins (the fastest overall if none fits). At most 256 configs are enumerated:
// beyond, each module's GPU count moves in steps of 2, 4, ... × its TP·CP (large clusters). The placement is built through
// planning::PlacementSpec + planning::BuildPlacement, so it is exactly one a user could write (and
// `weft plan --emit-mimo-config` writes back): the job's microbatches per LLM replica (the batch's
// sequences split over the LLM's DP first, so fewer when that leaves fewer), every microbatch
// through the stages of the modules it has data for.
//
// Thread-safety: the strategy is immutable; Prepare and PlanIteration are const.
#include <memory>
#include <string>
#include <vector>

#include "weft/common/status.h"
#include "weft/planning/mimo_config.h"
#include "weft/strategy/strategy.h"

namespace weft::strategy::megatron_mimo {

struct MimoCandidate {
  planning::MimoConfig config;
  double mean_iteration_s = 0;
  bool fits = false;
};

struct MimoChoice {
  planning::MimoConfig config;
  planning::PlacementSpec spec;
  double mean_iteration_s = 0;  // over the profile batches, with `recompute`
  spec::Recompute recompute = spec::Recompute::kNone;  // first uniform level that fit
  bool fits = false;
  int configs_evaluated = 0;  // passed the checks and simulated
  int configs_rejected = 0;   // enumerated but failed Megatron-Bridge's or weft's checks
  int gpu_step = 1;  // each module's GPU count moved in steps of gpu_step × its TP·CP
  std::vector<MimoCandidate> candidates;  // every config simulated, in enumeration order
};

// The search described above. Needs job.profile_batches.
StatusOr<MimoChoice> ChooseMimoConfig(const Job& job);

std::unique_ptr<Strategy> MakeMegatronMimoStrategy();

}  // namespace weft::strategy::megatron_mimo
