// DIP Fig. 11 analogue: best simulated iteration time found vs elapsed search time, for three
// searchers over the SAME §5.1 segment-priority space of one VLM-L batch graph
// (strategy::dip::MakeSegmentOrderSearch): MCTS (algo::MctsSearch, 2 threads), pure random search
// (uniformly random legal orders, keep the best) and DFS (depth-first enumeration of legal orders
// in the fixed action order, keep the best). Each run lasts kBudgetS seconds of wall time; the
// best cost at each checkpoint is reported as a counter (best_at_<t>s, seconds of iteration time)
// and printed as one CSV line per run:
//   curve,<searcher>,<seed>,<default_s>,<oom|fits>,<best at each checkpoint...>,<evaluations>
// Costs are DIP's search score: simulated iteration time in seconds, ×10 when the schedule runs
// out of memory. Run: build/<dir>/dip_search_benchmark (4 searchers × 3 seeds × kBudgetS s).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "weft/algo/mcts.h"
#include "weft/strategy/compare.h"
#include "weft/strategy/dip/dip.h"
#include "weft/strategy/graph_builder.h"
#include "weft/strategy/strategy.h"

namespace {

constexpr double kBudgetS = 5.0;
constexpr double kCheckpointsS[] = {0.1, 0.3, 1.0, 3.0, 5.0};

struct CurvePoint {
  double elapsed_s;
  double best_cost_s;
};

// The VLM-L job and the stage graph of DP replica 0 of its first batch under the DIP static plan.
struct Problem {
  std::unique_ptr<weft::strategy::JobSetup> setup;
  weft::graph::StageGraph graph;
};

std::unique_ptr<Problem> MakeProblem() {
  using namespace weft::strategy;
  auto p = std::make_unique<Problem>();
  JobOptions options;
  options.model = "vlm-l";
  options.data = "mixed";
  auto setup = MakeJobSetup(options);
  if (!setup.ok()) return nullptr;
  p->setup = std::move(*setup);
  const Job& job = p->setup->job;
  auto batches = MakeIterationBatches(*p->setup, 0, 1);
  auto strategy = MakeStrategy("dip");
  if (!batches.ok() || !strategy.ok()) return nullptr;
  auto plan = (*strategy)->Prepare(job);
  if (!plan.ok()) return nullptr;
  auto split = SplitBatch((*batches)[0], job.DataParallelSize(), job.parallel.num_microbatches);
  if (!split.ok()) return nullptr;
  GraphBuildOptions o{.sub_microbatch_size = plan->sub_microbatch_size,
                      .recompute = plan->recompute,
                      .split_backward = false};
  auto g = BuildStageGraph(job.model, plan->placement, (*batches)[0], split->replicas[0],
                           *job.cost_model, job.workload, o);
  if (!g.ok()) return nullptr;
  p->graph = std::move(*g);
  return p;
}

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Random search: uniformly random legal action at every step; keep the best complete order.
std::vector<CurvePoint> RandomSearch(const weft::algo::MctsProblem& problem, uint64_t seed,
                                     int64_t& evaluations) {
  std::mt19937_64 rng(seed);
  std::vector<CurvePoint> curve;
  double best = std::numeric_limits<double>::infinity();
  const auto start = std::chrono::steady_clock::now();
  std::vector<int> order, actions;
  while (Seconds(start) < kBudgetS) {
    order.clear();
    for (;;) {
      problem.legal_actions(order, actions);
      if (actions.empty()) break;
      order.push_back(actions[std::uniform_int_distribution<size_t>(0, actions.size() - 1)(rng)]);
    }
    const double cost = problem.cost(order);
    ++evaluations;
    if (cost < best) {
      best = cost;
      curve.push_back({Seconds(start), best});
    }
  }
  return curve;
}

// DFS: depth-first enumeration of legal orders, actions tried in the order legal_actions gives.
std::vector<CurvePoint> DepthFirstSearch(const weft::algo::MctsProblem& problem,
                                         int64_t& evaluations) {
  std::vector<CurvePoint> curve;
  double best = std::numeric_limits<double>::infinity();
  const auto start = std::chrono::steady_clock::now();
  std::vector<int> order;
  std::function<bool()> visit = [&]() -> bool {  // false = out of time
    std::vector<int> actions;
    problem.legal_actions(order, actions);
    if (actions.empty()) {
      const double cost = problem.cost(order);
      ++evaluations;
      if (cost < best) {
        best = cost;
        curve.push_back({Seconds(start), best});
      }
      return Seconds(start) < kBudgetS;
    }
    for (int a : actions) {
      order.push_back(a);
      const bool go_on = visit();
      order.pop_back();
      if (!go_on) return false;
    }
    return true;
  };
  visit();
  return curve;
}

std::vector<CurvePoint> Mcts(const weft::algo::MctsProblem& problem, uint64_t seed, int threads,
                             int64_t& evaluations) {
  const weft::strategy::dip::DipOptions defaults;
  weft::algo::MctsOptions o;
  o.alpha = defaults.mcts_alpha;
  o.beta = defaults.mcts_beta;
  o.rollouts_per_expansion = defaults.mcts_rollouts;
  o.time_budget_s = kBudgetS;
  o.seed = seed;
  o.threads = threads;
  std::vector<CurvePoint> curve;
  auto r = weft::algo::MctsSearch(problem, o);
  if (!r.ok()) return curve;
  evaluations = r->evaluations;
  for (const auto& p : r->curve) curve.push_back({p.elapsed_s, p.best_cost});
  return curve;
}

double BestAt(const std::vector<CurvePoint>& curve, double t_s) {
  double best = std::numeric_limits<double>::infinity();
  for (const auto& p : curve) {
    if (p.elapsed_s <= t_s) best = p.best_cost_s;
  }
  return best;
}

// kMcts1: MCTS on one thread, the same evaluation throughput as random search and DFS.
enum Searcher { kMcts = 0, kRandom = 1, kDfs = 2, kMcts1 = 3 };
constexpr const char* kSearcherNames[] = {"mcts", "random", "dfs", "mcts-1thread"};

void BM_SegmentOrderSearch(benchmark::State& state) {
  const auto searcher = static_cast<Searcher>(state.range(0));
  const auto seed = static_cast<uint64_t>(state.range(1));
  const auto problem = MakeProblem();
  if (problem == nullptr) {
    state.SkipWithError("could not build the VLM-L problem");
    return;
  }
  auto search = weft::strategy::dip::MakeSegmentOrderSearch(problem->setup->job, problem->graph);
  if (!search.ok()) {
    state.SkipWithError(search.status().ToString().c_str());
    return;
  }
  std::vector<CurvePoint> curve;
  int64_t evaluations = 0;
  for (auto _ : state) {
    switch (searcher) {
      case kMcts: curve = Mcts(search->problem, seed, 2, evaluations); break;
      case kMcts1: curve = Mcts(search->problem, seed, 1, evaluations); break;
      case kRandom: curve = RandomSearch(search->problem, seed, evaluations); break;
      case kDfs: curve = DepthFirstSearch(search->problem, evaluations); break;
    }
  }
  state.SetLabel(kSearcherNames[searcher]);
  state.counters["default_s"] = search->default_cost_s;
  state.counters["default_oom"] = search->default_oom ? 1 : 0;
  state.counters["segments"] = search->num_segments;
  state.counters["evaluations"] = static_cast<double>(evaluations);
  std::string line = std::string("curve,") + kSearcherNames[searcher] + "," +
                     std::to_string(seed) + "," + std::to_string(search->default_cost_s) + "," +
                     (search->default_oom ? "oom" : "fits");
  for (double t : kCheckpointsS) {
    const double best = BestAt(curve, t);
    char name[32];
    std::snprintf(name, sizeof(name), "best_at_%gs", t);
    state.counters[name] = best;
    line += "," + std::to_string(best);
  }
  line += "," + std::to_string(evaluations);
  std::printf("%s\n", line.c_str());
}

BENCHMARK(BM_SegmentOrderSearch)
    ->ArgsProduct({{kMcts, kRandom, kDfs, kMcts1}, {1, 2, 3}})
    ->Iterations(1)
    ->Unit(benchmark::kSecond)
    ->UseRealTime();

}  // namespace
