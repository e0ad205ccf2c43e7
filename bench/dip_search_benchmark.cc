// DIP Fig. 11 analogue as a Google benchmark: best simulated iteration time found vs elapsed
// search time, for three searchers over the SAME §5.1 segment-priority space of one VLM-L batch
// graph (bench::dip::MakeSearchInstance): MCTS (2 threads and 1 thread), pure random search
// and DFS, all from bench/dip/experiments.h (the code `weft bench dip search` runs). Each run
// lasts kBudgetS seconds of wall time; the best cost at each checkpoint is reported as a counter
// (best_at_<t>s) and printed as one CSV line per run:
//   curve,<searcher>,<seed>,<default_s>,<oom|fits>,<best at each checkpoint...>,<evaluations>
// Costs are DIP's search score: simulated iteration time in seconds, ×10 when the schedule runs
// out of memory. Run: build/<dir>/dip_search_benchmark (4 searchers × 3 seeds × kBudgetS s).
// Longer budgets and tables: `weft bench dip search --budget-s 60`.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>
#include <vector>

#include "bench/dip/experiments.h"

namespace {

using weft::bench::dip::Searcher;

constexpr double kBudgetS = 5.0;
constexpr double kCheckpointsS[] = {0.1, 0.3, 1.0, 3.0, 5.0};

// kMcts1: MCTS on one thread, the same evaluation throughput as random search and DFS.
enum Variant { kMcts = 0, kRandom = 1, kDfs = 2, kMcts1 = 3 };
constexpr const char* kVariantNames[] = {"mcts", "random", "dfs", "mcts-1thread"};

void BM_SegmentOrderSearch(benchmark::State& state) {
  const auto variant = static_cast<Variant>(state.range(0));
  const auto seed = static_cast<uint64_t>(state.range(1));
  weft::planning::JobOptions job;
  job.model = "vlm-l";
  job.data = "mixed";
  auto instance = weft::bench::dip::MakeSearchInstance(job);
  if (!instance.ok()) {
    state.SkipWithError(instance.status().ToString().c_str());
    return;
  }
  const auto& search = (*instance)->search;
  weft::bench::dip::SearchRunOptions o;
  o.searcher = variant == kRandom ? Searcher::kRandom
               : variant == kDfs  ? Searcher::kDfs
                                  : Searcher::kMcts;
  o.threads = variant == kMcts ? 2 : 1;
  o.seed = seed;
  o.budget_s = kBudgetS;
  weft::bench::dip::SearchRun run;
  for (auto _ : state) {
    auto r = weft::bench::dip::RunSearcher(search.problem, o);
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      return;
    }
    run = std::move(*r);
  }
  state.SetLabel(kVariantNames[variant]);
  state.counters["default_s"] = search.default_cost_s;
  state.counters["default_oom"] = search.default_oom ? 1 : 0;
  state.counters["segments"] = search.num_segments;
  state.counters["evaluations"] = static_cast<double>(run.evaluations);
  std::string line = std::string("curve,") + kVariantNames[variant] + "," +
                     std::to_string(seed) + "," + std::to_string(search.default_cost_s) + "," +
                     (search.default_oom ? "oom" : "fits");
  for (double t : kCheckpointsS) {
    const double best = weft::bench::dip::BestAt(run.curve, t);
    char name[32];
    std::snprintf(name, sizeof(name), "best_at_%gs", t);
    state.counters[name] = best;
    line += "," + std::to_string(best);
  }
  line += "," + std::to_string(run.evaluations);
  std::printf("%s\n", line.c_str());
}

BENCHMARK(BM_SegmentOrderSearch)
    ->ArgsProduct({{kMcts, kRandom, kDfs, kMcts1}, {1, 2, 3}})
    ->Iterations(1)
    ->Unit(benchmark::kSecond)
    ->UseRealTime();

}  // namespace
