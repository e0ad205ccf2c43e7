#pragma once
// Generic, model-agnostic Monte Carlo tree search over sequential decisions (DIP §5.1 uses it to
// order pipeline segments). A state is a partial assignment: the sequence of action ids chosen so
// far; the caller supplies the legal next actions of a partial assignment and the cost of a
// complete one (lower is better).
//
// Search loop: (1) select from the root the child maximizing UCB = s_v^alpha + beta * sqrt(ln N_x /
// N_v), where N are visit counts and s_v in [0, 1] is the node's best cost normalized so that
// HIGHER IS BETTER: s_v = (c_worst - c_v) / (c_worst - c_best), with c_v the lowest cost seen below
// v and c_best / c_worst the lowest / highest finite costs seen in the whole search (s_v = 1 when
// they are equal, 0 when v has seen no finite cost); (2) expand one untried action (chosen at
// random); (3) run several random rollouts from the new node to complete assignments; (4)
// backpropagate the BEST rollout cost to the node and its ancestors (each node keeps the best cost
// seen below it, as in DIP). Fully enumerated subtrees are never selected again; when the whole
// tree is enumerated the search stops and its answer is optimal.
//
// Thread-safety: Search() may run several worker threads; they share the tree under one mutex and
// each synchronizes once per batch of `expansions_per_sync` expansions (rollouts run outside the
// lock). The problem callbacks must then be safe to call concurrently. legal_actions is called
// under the lock when expanding (keep it cheap) and outside it during rollouts.
#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "weft/common/status.h"

namespace weft::algo {

struct MctsProblem {
  // Replaces `actions` with the legal next action ids after `partial`; empty = `partial` is a
  // complete assignment.
  std::function<void(std::span<const int> partial, std::vector<int>& actions)> legal_actions;
  // Cost of a complete assignment (any unit, lower is better); +infinity = infeasible.
  std::function<double(std::span<const int> complete)> cost;
};

struct MctsOptions {
  // Exponent alpha on the normalized score s_v (> 0; larger = greedier towards the best subtree).
  double alpha = 1.0;
  // Exploration weight beta (>= 0).
  double beta = 0.5;
  // Random rollouts per expansion (>= 1); the best one is backpropagated.
  int rollouts_per_expansion = 10;
  // Deterministic budget: number of expansions (0 = none). At least one budget must be set.
  int64_t max_iterations = 0;
  // Wall-clock budget in seconds (0 = none).
  double time_budget_s = 0.0;
  // Seed of the random choices; same seed + threads == 1 + no time budget => same result.
  uint64_t seed = 0;
  // Worker threads, in [1, kMaxThreads]; a thread the system cannot start is a
  // ResourceExhausted error, not an abort.
  int threads = 1;
  static constexpr int kMaxThreads = 256;
  // Expansions a worker selects under one lock acquisition, then rolls out without the lock.
  int expansions_per_sync = 4;
  // Beyond the paper: probability that a rollout step follows the best complete assignment found
  // so far (of the legal actions, the one that comes first in it) instead of a uniformly random
  // legal action; 0 = pure random rollouts. Workers see the incumbent of their last
  // synchronization.
  double incumbent_rollout_probability = 0.0;
  // When non-null and set to true, the search stops at the next synchronization.
  const std::atomic<bool>* cancel = nullptr;

  Status Validate() const;
};

enum class MctsStopReason {
  kExhausted,        // the whole tree was enumerated: best_cost is optimal
  kIterationBudget,  // max_iterations expansions done
  kTimeBudget,       // time_budget_s elapsed
  kCancelled,        // *cancel became true
};
std::string_view MctsStopReasonName(MctsStopReason reason);

struct MctsCurvePoint {
  int64_t iteration = 0;    // expansions completed when the improvement was found
  int64_t evaluations = 0;  // cost evaluations so far
  double elapsed_s = 0.0;   // since the start of Search()
  double best_cost = 0.0;   // new best cost
};

struct MctsResult {
  std::vector<int> best_assignment;
  double best_cost = std::numeric_limits<double>::infinity();
  MctsStopReason stop_reason = MctsStopReason::kIterationBudget;
  int64_t iterations = 0;   // expansions completed
  int64_t evaluations = 0;  // calls to problem.cost
  int64_t tree_nodes = 0;
  double elapsed_s = 0.0;
  // One point per improvement of the best cost, in order (the search curve).
  std::vector<MctsCurvePoint> curve;

  // "best 123 after 500 iterations (5000 evaluations, 1200 nodes) in 0.05 s: ITERATION_BUDGET"
  std::string BriefReport() const;
};

// Runs the search. Errors: InvalidArgument for bad options or missing callbacks; Cancelled when
// cancelled before any feasible assignment was found; ResourceExhausted when the budget ran out
// (or the tree was exhausted) without a finite-cost complete assignment.
StatusOr<MctsResult> MctsSearch(const MctsProblem& problem, const MctsOptions& options);

}  // namespace weft::algo
