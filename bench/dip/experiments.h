#pragma once
// The DIP evidence experiments of issue 4 (`weft bench dip <experiment>`), as library calls:
//   search       Fig. 11  best-found iteration time vs search time: MCTS, random search, DFS
//   scalability  Fig. 12  search time to a fixed quality vs microbatch count
//   subbatch     Fig. 9   dip iteration time vs the encoder's sub-microbatch size
//   memory       Fig. 10  memory timeline of rank 0, dip vs megatron-1f1b (SVG)
//   xl           Fig. 14 / Table 6  VLM-XL-8k/16k, T2V-XL-3k/6k simulated, dip vs baselines
//   e2e, ablation, dynamic  Fig. 8a, Table 5, Fig. 8b through strategy::RunComparison
//   paper        Tables 4, 5, 6 and Fig. 8a on DIP's own §7.1 data (dip-vlm, dip-t2v), side by
//                side with the paper's numbers, plus controlled experiments on the gaps
// Every experiment returns a markdown table (with the setup it ran), the same numbers as JSON and
// any figures as SVG text; nothing is written to disk here (the CLI does that).
// Thread-safety: functions are reentrant; the searchers run their own worker threads.
// Not part of weft::core: the library weft_bench_dip (bench/dip/) links it; the CLI's
// `weft bench` and bench/dip_search_benchmark.cc link weft_bench_dip.
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "weft/algo/mcts.h"
#include "weft/common/status.h"
#include "weft/graph/stage_graph.h"
#include "weft/report/comparison.h"
#include "weft/strategy/compare.h"
#include "weft/strategy/dip/dip.h"
#include "weft/planning/planner.h"

namespace weft::bench::dip {

// ---- schedule searchers over one segment-order problem (Fig. 11, Fig. 12) ----

// The §5.1 search space of one batch graph: the job, DP replica 0's stage graph of batch
// `batch_index` under the `dip` static plan (no recomputation), and the problem over it.
struct SearchInstance {
  std::unique_ptr<planning::Planner> planner;
  graph::StageGraph graph;
  // Callbacks point into planner->job() and graph (heap-stable).
  strategy::dip::SegmentOrderSearch search;
};
StatusOr<std::unique_ptr<SearchInstance>> MakeSearchInstance(const planning::JobOptions& job,
                                                             int batch_index = 0);

enum class Searcher {
  kMcts,    // algo::MctsSearch with `dip`'s defaults (DipOptions: alpha, beta, rollouts,
            // incumbent-guided rollouts)
  kMctsRandomRollouts,  // the same with the paper's uniformly random rollouts
  kRandom,  // uniformly random legal action at every step; keep the best complete order
  kDfs,     // depth-first enumeration in legal_actions order; keep the best
};
// "mcts", "mcts-random-rollouts", "random", "dfs"
std::string_view SearcherName(Searcher searcher);
StatusOr<Searcher> ParseSearcher(std::string_view name);

struct SearchCurvePoint {
  double elapsed_s = 0;
  int64_t evaluations = 0;  // cost evaluations so far
  double best_cost = 0;     // problem cost units (DIP: seconds, x10 when out of memory)
};

struct SearchRunOptions {
  Searcher searcher = Searcher::kMcts;
  uint64_t seed = 1;
  int threads = 1;              // MCTS only; random search and DFS are single-threaded
  double budget_s = 0;          // wall-clock budget (0 = none)
  int64_t max_evaluations = 0;  // deterministic budget (0 = none); at least one budget is set
};

struct SearchRun {
  std::vector<SearchCurvePoint> curve;  // one point per improvement, in time order
  double best_cost = 0;
  int64_t evaluations = 0;
  double elapsed_s = 0;
  bool exhausted = false;  // the whole space was enumerated (the best is optimal)
};

// Runs one searcher. InvalidArgument when no budget is set or threads < 1.
StatusOr<SearchRun> RunSearcher(const algo::MctsProblem& problem, const SearchRunOptions& options);

// Best cost of `curve` found at or before `t_s` (+infinity when none yet).
double BestAt(std::span<const SearchCurvePoint> curve, double t_s);
// First time the curve reaches a cost <= target (negative when it never does).
double TimeToReach(std::span<const SearchCurvePoint> curve, double target_cost);

// ---- experiments ----

struct ExperimentOptions {
  std::string model;          // "" = the experiment's default (see ExperimentHelp)
  std::string data;           // "" = the experiment's default
  double budget_s = -1;       // search budget per run / planning budget per iteration; <0 = default
  int iterations = 0;         // iterations of fresh batches; 0 = default
  std::vector<uint64_t> seeds;  // search seeds; empty = {1, 2, 3}
  int threads = 2;            // search threads (MCTS, dip planning)
  std::vector<int> sweep;     // microbatch counts (scalability), sizes (subbatch); empty = default
  // One-line progress messages (nullptr = silent).
  std::function<void(const std::string&)> progress;
};

struct ExperimentFigure {
  std::string file_name;  // e.g. "dip_memory_vlm-m.svg"
  std::string svg;
};

struct ExperimentResult {
  std::string name;
  std::string markdown;  // tables, setup and a one-paragraph reading, ready for docs
  nlohmann::json json;
  std::vector<ExperimentFigure> figures;
};

// Names of the experiments in the order `weft bench dip all` runs them.
std::vector<std::string> ExperimentNames();
// One line per experiment: its name, figure and defaults.
std::string ExperimentHelp();
// Runs one experiment. NotFound for an unknown name, InvalidArgument for bad options.
StatusOr<ExperimentResult> RunExperiment(std::string_view name, const ExperimentOptions& options);

// A markdown table of a comparison: strategy, mean/p50/p90 iteration time, MFU, speedup vs the
// baseline, peak memory, OOM, mean planning time; failed strategies print their error.
std::string ComparisonMarkdown(const report::Comparison& comparison);

}  // namespace weft::bench::dip
