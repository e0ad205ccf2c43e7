#pragma once
// The baseline strategies weft compares against (docs/strategies.md):
//  megatron-1f1b / megatron-vpp / gpipe / zb-h1 — the encoder+LLM chain split into P (or P·v)
//    stages balanced by parameter counts (encoders on the first stages), scheduled by rule;
//  optimus    — encoder and backbone chains each over all P ranks; on every rank all encoder
//               forward work of the batch runs before backbone work (coarse-grained, Optimus);
//  colocated  — Cornstarch's encoders-colocated: every encoder split into the same c stages
//               (run sequentially inside a stage), the LLM on the other P−c, balanced by
//               forward time assuming backward = 2× forward (frozen-status unaware);
//  replicated — Cornstarch's encoders-replicated: the LLM over P stages, full copies of all
//               encoders and projectors on every stage;
//  nnscaler   — one static partition of the chain by fwd+bwd latency on a representative
//               batch (the job's profile batches), 1F1B, reused for every batch.
#include <memory>

#include "weft/sched/generators.h"
#include "weft/strategy/strategy.h"

namespace weft::strategy {

std::unique_ptr<Strategy> MakeMegatronStrategy(std::string name, sched::ScheduleKind kind,
                                               int virtual_chunks);
std::unique_ptr<Strategy> MakeOptimusStrategy();
std::unique_ptr<Strategy> MakeColocatedStrategy();
std::unique_ptr<Strategy> MakeReplicatedStrategy();
std::unique_ptr<Strategy> MakeNnScalerStrategy();

}  // namespace weft::strategy
