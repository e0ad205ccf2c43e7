#pragma once
// Streaming plans over many iterations (FlowTrain §3.2): a static plan with a pool (PoolSpec)
// has its producers' outputs handed to the consumers through one bounded buffer. Its iteration
// plans keep the ordinary coupled graphs (they compile, validate and run in lockstep); the pool
// is applied when they are evaluated together:
//
//   DecoupleThroughPool — every forward edge from a stage of a producer module to a stage of
//     another module is cut; its producer stage puts the embedding bytes into the pool, its
//     consumer stage gets them. Pool bytes of an edge are the whole embedding once (the tokens
//     it carries × the producer's output width × 2 bytes, bf16), not the per-GPU share the edge
//     sends. The consumer still fetches those bytes from the producer's GPUs: the edge's
//     transfer time on its link (sim::TransferTimeS) is added to the consuming stage's latency —
//     not overlapped, so the pool never makes a transfer free.
//   EvaluateWindow — the decoupled iterations simulated as one sim::SimulateWindow: a group
//     starts iteration k+1 when its own iteration-k work (and, for trainable modules, gradient
//     sync and optimizer step) is done, so frozen producers run ahead until the pool is full;
//     the consumers' updates stay synchronous per global batch (the backbone's groups still end
//     every iteration with its sync and step). Per iteration k its time is end(k) − end(k − 1)
//     (end(−1) = the window's start), so the times add up to the window.
//
// A producer must be frozen (no gradient comes back to it): FailedPrecondition otherwise.
// Thread-safety: pure functions.
#include <span>
#include <vector>

#include "weft/common/status.h"
#include "weft/graph/stage_graph.h"
#include "weft/planning/strategy.h"
#include "weft/sim/window.h"

namespace weft::planning {

struct DecoupledGraph {
  graph::StageGraph graph;                  // the edges cut, consumer latencies with the fetch
  std::vector<sim::BufferUse> buffer_uses;  // buffer 0 = the pool
  int edges_cut = 0;
  int64_t pool_bytes = 0;  // put (= got) in this iteration
  double fetch_s = 0;      // Σ fetch time added to consumer stages
};

StatusOr<DecoupledGraph> DecoupleThroughPool(const spec::ModelSpec& model,
                                             const spec::ClusterSpec& cluster,
                                             const PoolSpec& pool,
                                             const graph::StageGraph& graph);

struct WindowEvaluation {
  sim::WindowResult window;
  std::vector<double> iteration_time_s;  // per iteration: end(k) − end(k − 1)
  std::vector<DecoupledGraph> graphs;    // per iteration (kept for traces)
  int warmup_iterations = 0;
  bool warmup_by_mser = false;   // chosen by kAutoWarmup (sim::MserTruncation)
  bool steady_not_shown = false;  // MSER's truncation at its cap: the window may be too short
  int gpus_used = 0, gpus_charged = 0;
  double mfu = 0;  // steady state, over gpus_charged (Job::charge_idle_gpus)
  // "window of 8 iterations (warm-up 1): steady 1.23 s/iteration, pool peak 3.1 of 40 GiB, ..."
  std::string Brief() const;
};

// Simulates the plans of consecutive iterations of a static plan with a pool as one window.
// Every plan must have one replica (an unfolded placement: the whole iteration in one graph);
// warmup_iterations < plans.size(), or kAutoWarmup: at least the first iteration when there are
// several (the pool fills), more when sim::MserTruncation of the per-iteration times says the
// transient lasts longer (then the window is simulated again with that warm-up; the times do not
// change, only the steady-state figures). `options` as for EvaluateIteration (recording etc.).
inline constexpr int kAutoWarmup = -1;
StatusOr<WindowEvaluation> EvaluateWindow(const Job& job,
                                          const StaticPlan& plan,
                                          std::span<const IterationPlan* const> iterations,
                                          int warmup_iterations,
                                          const sim::SimOptions& options = {});

}  // namespace weft::planning
