#include "bench/dip/experiments.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "weft/report/svg.h"
#include "weft/strategy/common.h"
#include "weft/planning/graph_builder.h"
#include "weft/planning/planner.h"

namespace weft::bench::dip {

// The experiments drive the strategy module's public API (they used to live inside it).
using strategy::CompareOptions;
using strategy::CompareRun;
using planning::JobOptions;
using planning::JobSetup;
using planning::MakeIterationBatches;
using planning::MakeJobSetup;
using planning::MemoryPolicy;
using planning::PlanBudget;
using planning::PlannedIteration;
using planning::Planner;
using strategy::RunComparison;
using planning::StaticPlan;
using strategy::dip::DipOptions;
using strategy::dip::DipVariant;
using strategy::dip::MakeDipStrategy;
using strategy::dip::MakeSegmentOrderSearch;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kInf = std::numeric_limits<double>::infinity();

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double Median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  return report::Percentile(v, 0.5);
}

// Fixed `digits` decimals, or 5 significant digits when digits < 0.
std::string Num(double v, int digits = -1) {
  if (std::isnan(v)) return "n/a";
  if (std::isinf(v)) return "-";
  if (digits < 0) return fmt::format("{:.5g}", v);
  return fmt::format("{:.{}f}", v, digits);
}

std::string Pct(double v, int digits = 1) {
  if (std::isnan(v) || std::isinf(v)) return "n/a";
  return fmt::format("{:+.{}f}%", 100.0 * v, digits);
}

void Progress(const ExperimentOptions& o, const std::string& m) {
  if (o.progress) o.progress(m);
}

std::vector<uint64_t> SeedsOf(const ExperimentOptions& o) {
  return o.seeds.empty() ? std::vector<uint64_t>{1, 2, 3} : o.seeds;
}

nlohmann::json CurveJson(const std::vector<SearchCurvePoint>& curve) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& p : curve) j.push_back({p.elapsed_s, p.evaluations, p.best_cost});
  return j;
}

// A staircase from the search curve for the line chart (starts at the first improvement).
report::ChartSeries CurveSeries(const std::string& name, const std::vector<SearchCurvePoint>& curve,
                                double end_s) {
  report::ChartSeries s;
  s.name = name;
  for (const auto& p : curve) {
    s.x.push_back(p.elapsed_s);
    s.y.push_back(p.best_cost);
  }
  if (!curve.empty()) {
    s.x.push_back(std::max(end_s, curve.back().elapsed_s));
    s.y.push_back(curve.back().best_cost);
  }
  return s;
}

}  // namespace

// ---------------------------------------------------------------- searchers

namespace {

constexpr Searcher kAllSearchers[] = {Searcher::kMcts, Searcher::kMctsRandomRollouts,
                                      Searcher::kRandom, Searcher::kDfs};

bool IsMcts(Searcher s) { return s == Searcher::kMcts || s == Searcher::kMctsRandomRollouts; }

}  // namespace

StatusOr<std::unique_ptr<SearchInstance>> MakeSearchInstance(const JobOptions& job_options,
                                                             int batch_index) {
  auto inst = std::make_unique<SearchInstance>();
  // DIP's placement and sub-microbatches without recomputation; the graph of replica 0 as the
  // planner builds it (its fallback plan: the rule order is discarded, the search reorders).
  WEFT_ASSIGN_OR_RETURN(
      inst->planner,
      strategy::MakePlanner(job_options, "dip", {.memory_policy = MemoryPolicy::kFixed}));
  WEFT_ASSIGN_OR_RETURN(auto batches, inst->planner->Batches(batch_index, 1));
  WEFT_ASSIGN_OR_RETURN(PlannedIteration planned, inst->planner->Fallback(batches[0]));
  inst->graph = std::move(planned.plan.replicas.at(0).graph);
  WEFT_ASSIGN_OR_RETURN(inst->search, MakeSegmentOrderSearch(inst->planner->job(), inst->graph));
  return inst;
}

std::string_view SearcherName(Searcher searcher) {
  switch (searcher) {
    case Searcher::kMcts: return "mcts";
    case Searcher::kMctsRandomRollouts: return "mcts-random-rollouts";
    case Searcher::kRandom: return "random";
    case Searcher::kDfs: return "dfs";
  }
  return "?";
}

StatusOr<Searcher> ParseSearcher(std::string_view name) {
  for (Searcher s : kAllSearchers) {
    if (SearcherName(s) == name) return s;
  }
  return InvalidArgumentError(fmt::format(
      "searcher \"{}\": must be mcts, mcts-random-rollouts, random or dfs", name));
}

StatusOr<SearchRun> RunSearcher(const algo::MctsProblem& problem,
                                const SearchRunOptions& options) {
  if (options.budget_s <= 0 && options.max_evaluations <= 0) {
    return InvalidArgumentError("search run: set budget_s > 0 or max_evaluations > 0");
  }
  if (options.threads < 1) {
    return InvalidArgumentError(fmt::format("search run: threads = {}; must be >= 1",
                                            options.threads));
  }
  if (!problem.legal_actions || !problem.cost) {
    return InvalidArgumentError("search run: the problem has no callbacks");
  }
  SearchRun run;
  const auto start = std::chrono::steady_clock::now();
  if (IsMcts(options.searcher)) {
    const DipOptions defaults;
    algo::MctsOptions o;
    o.alpha = defaults.mcts_alpha;
    o.beta = defaults.mcts_beta;
    o.rollouts_per_expansion = defaults.mcts_rollouts;
    o.incumbent_rollout_probability =
        options.searcher == Searcher::kMcts ? defaults.mcts_incumbent_rollouts : 0.0;
    o.time_budget_s = std::max(0.0, options.budget_s);
    // MCTS counts expansions, not evaluations: each expansion costs rollouts_per_expansion.
    const int64_t per_expansion = o.rollouts_per_expansion;
    o.max_iterations = options.max_evaluations > 0
                           ? std::max<int64_t>(1, options.max_evaluations / per_expansion)
                           : 0;
    o.seed = options.seed;
    o.threads = options.threads;
    WEFT_ASSIGN_OR_RETURN(algo::MctsResult r, algo::MctsSearch(problem, o));
    for (const auto& p : r.curve) run.curve.push_back({p.elapsed_s, p.evaluations, p.best_cost});
    run.best_cost = r.best_cost;
    run.evaluations = r.evaluations;
    run.exhausted = r.stop_reason == algo::MctsStopReason::kExhausted;
    run.elapsed_s = SecondsSince(start);
    return run;
  }
  double best = kInf;
  auto out_of_budget = [&]() {
    return (options.max_evaluations > 0 && run.evaluations >= options.max_evaluations) ||
           (options.budget_s > 0 && SecondsSince(start) >= options.budget_s);
  };
  auto evaluate = [&](std::span<const int> order) {
    const double cost = problem.cost(order);
    ++run.evaluations;
    if (cost < best) {
      best = cost;
      run.curve.push_back({SecondsSince(start), run.evaluations, best});
    }
  };
  std::vector<int> order;
  if (options.searcher == Searcher::kRandom) {
    std::mt19937_64 rng(options.seed);
    std::vector<int> actions;
    while (!out_of_budget()) {
      order.clear();
      for (;;) {
        problem.legal_actions(order, actions);
        if (actions.empty()) break;
        order.push_back(actions[std::uniform_int_distribution<size_t>(0, actions.size() - 1)(rng)]);
      }
      evaluate(order);
    }
  } else {  // DFS
    std::function<bool()> visit = [&]() -> bool {  // false = out of budget
      std::vector<int> actions;
      problem.legal_actions(order, actions);
      if (actions.empty()) {
        evaluate(order);
        return !out_of_budget();
      }
      for (int a : actions) {
        order.push_back(a);
        const bool go_on = visit();
        order.pop_back();
        if (!go_on) return false;
      }
      return true;
    };
    run.exhausted = visit();
  }
  run.best_cost = best;
  run.elapsed_s = SecondsSince(start);
  if (!std::isfinite(best)) {
    return ResourceExhaustedError("search run: no feasible complete assignment found");
  }
  return run;
}

double BestAt(std::span<const SearchCurvePoint> curve, double t_s) {
  double best = kInf;
  for (const auto& p : curve) {
    if (p.elapsed_s <= t_s) best = std::min(best, p.best_cost);
  }
  return best;
}

double TimeToReach(std::span<const SearchCurvePoint> curve, double target_cost) {
  for (const auto& p : curve) {
    if (p.best_cost <= target_cost) return p.elapsed_s;
  }
  return -1;
}

// ---------------------------------------------------------------- comparison tables

std::string ComparisonMarkdown(const report::Comparison& c) {
  std::string md =
      "| strategy | mean s | p50 s | p90 s | MFU % | speedup vs " + c.baseline +
      " | peak GiB | OOM | plan s |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& s : c.strategies) {
    if (!s.ok()) {
      md += fmt::format("| {} | failed: {} | | | | | | | |\n", s.name,
                        s.error.value_or("no iterations"));
      continue;
    }
    const auto sum = s.Summary();
    const auto speedup = c.SpeedupVsBaseline(s);
    md += fmt::format("| {} | {} | {} | {} | {:.1f} | {} | {:.1f} | {} | {} |\n", s.name,
                      Num(sum.iteration_time_mean_s), Num(sum.iteration_time_p50_s),
                      Num(sum.iteration_time_p90_s), 100.0 * sum.mfu,
                      sum.any_oom ? "oom"
                      : speedup   ? fmt::format("{:.2f}x", *speedup)
                                  : "n/a",
                      static_cast<double>(sum.peak_memory_bytes) / kGiB, sum.any_oom ? "yes" : "no",
                      Num(sum.plan_time_mean_s));
  }
  return md;
}

namespace {

double MeanTime(const report::Comparison& c, std::string_view name) {
  const int i = c.FindStrategy(name);
  if (i < 0 || !c.strategies[i].ok()) return std::nan("");
  return c.strategies[i].Summary().iteration_time_mean_s;
}

// A named comparison setup (model, data, GPUs, PP, strategies).
struct Setup {
  std::string title;
  std::string model;
  std::string data;
  int gpus = 0;
  int pp = 0;
  std::vector<std::string> strategies;
};

std::string SetupCommand(const Setup& s, int iterations, double budget_s) {
  std::string cmd = "weft compare --model " + s.model;
  if (!s.data.empty()) cmd += " --data " + s.data;
  if (s.gpus > 0) cmd += " --gpus " + std::to_string(s.gpus);
  if (s.pp > 0) cmd += " --pp " + std::to_string(s.pp);
  cmd += " --iterations " + std::to_string(iterations);
  cmd += fmt::format(" --budget-ms {:g}", budget_s * 1000);
  cmd += " --strategies ";
  for (size_t i = 0; i < s.strategies.size(); ++i) cmd += (i ? "," : "") + s.strategies[i];
  return cmd;
}

StatusOr<CompareRun> RunSetup(const Setup& s, int iterations, double budget_s, int threads,
                              const ExperimentOptions& o) {
  CompareOptions co;
  co.job.model = s.model;
  co.job.data = s.data;
  co.job.gpus = s.gpus;
  co.job.pipeline_size = s.pp;
  co.iterations = iterations;
  co.strategies = s.strategies;
  co.budget.time_budget_s = budget_s;
  co.budget.threads = threads;
  if (o.progress) {
    co.progress = [&o, title = s.title](const std::string& m) { o.progress(title + ": " + m); };
  }
  return RunComparison(co);
}

const std::vector<std::string> kVlmStrategies = {"megatron-1f1b", "megatron-vpp", "nnscaler",
                                                 "optimus", "dip"};
const std::vector<std::string> kT2vStrategies = {"megatron-1f1b", "megatron-vpp", "nnscaler",
                                                 "dip"};

// Best baseline (every strategy except the dip ones) by mean time.
std::pair<std::string, double> BestBaseline(const report::Comparison& c) {
  std::pair<std::string, double> best{"", kInf};
  for (const auto& s : c.strategies) {
    if (!s.ok() || s.name.rfind("dip", 0) == 0) continue;
    const double t = s.Summary().iteration_time_mean_s;
    if (t < best.second) best = {s.name, t};
  }
  return best;
}

std::vector<Setup> FilterSetups(std::vector<Setup> setups, const ExperimentOptions& o) {
  if (o.model.empty()) return setups;
  std::vector<Setup> out;
  for (auto& s : setups) {
    if (s.model == o.model) out.push_back(s);
  }
  if (out.empty()) {  // a model the experiment does not list: its own setup
    Setup s{o.model, o.model, o.data, 0, 0, setups.empty() ? kVlmStrategies : setups[0].strategies};
    out.push_back(s);
  }
  for (auto& s : out) {
    if (!o.data.empty()) s.data = o.data;
  }
  return out;
}

// ---------------------------------------------------------------- search (Fig. 11)

StatusOr<ExperimentResult> SearchExperiment(const ExperimentOptions& o) {
  const double budget_s = o.budget_s < 0 ? 60.0 : o.budget_s;
  if (budget_s <= 0) return InvalidArgumentError("search: --budget-s must be > 0");
  JobOptions job;
  job.model = o.model.empty() ? "vlm-l" : o.model;
  job.data = o.data.empty() ? "mixed" : o.data;
  Progress(o, "search: building the " + job.model + " problem");
  WEFT_ASSIGN_OR_RETURN(auto inst, MakeSearchInstance(job));
  const auto seeds = SeedsOf(o);
  std::vector<double> checkpoints;
  for (double t : {0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 60.0, 120.0, 300.0}) {
    if (t < budget_s * 0.999) checkpoints.push_back(t);
  }
  checkpoints.push_back(budget_s);

  struct Row {
    Searcher searcher;
    int threads;
    uint64_t seed;
    SearchRun run;
  };
  std::vector<Row> rows;
  for (Searcher s : kAllSearchers) {
    // DFS is deterministic: one run.
    const std::vector<uint64_t> run_seeds =
        s == Searcher::kDfs ? std::vector<uint64_t>{seeds[0]} : seeds;
    for (uint64_t seed : run_seeds) {
      Progress(o, fmt::format("search: {} seed {} ({:g} s)", SearcherName(s), seed, budget_s));
      SearchRunOptions ro;
      ro.searcher = s;
      ro.seed = seed;
      ro.threads = IsMcts(s) ? o.threads : 1;
      ro.budget_s = budget_s;
      WEFT_ASSIGN_OR_RETURN(SearchRun run, RunSearcher(inst->search.problem, ro));
      rows.push_back({s, ro.threads, seed, std::move(run)});
    }
  }

  ExperimentResult r;
  r.name = "search";
  const auto& ss = inst->search;
  std::string& md = r.markdown;
  md += fmt::format(
      "Search space: the §5.1 segment orders of one {} batch graph (data {}, batch 0, DP "
      "replica 0, dip static plan, no recomputation): {} segment groups, {} stages. Cost = DIP's "
      "search score = simulated iteration time in s of the dual-queue schedule with those "
      "priorities (x10 when it runs out of memory). Default dual-queue order: {} s{}.\n\n",
      job.model, job.data, ss.num_segments, inst->graph.stages().size(), Num(ss.default_cost_s),
      ss.default_oom ? " (out of memory, x10 included)" : "");
  md += fmt::format("Median over seeds {{{}}} of the best cost found by each time (s); budget "
                    "{:g} s per run; MCTS on {} threads, random and DFS on 1 (DFS is "
                    "deterministic: one run). `mcts` is `dip`'s search: rollout steps follow "
                    "the best order found so far with probability 0.5 (beyond the paper); "
                    "`mcts-random-rollouts` is the paper's MCTS with uniformly random "
                    "rollouts.\n\n",
                    fmt::join(seeds, ","), budget_s, o.threads);
  md += "| searcher | threads |";
  std::string sep = "|---|---|";
  for (double t : checkpoints) {
    md += fmt::format(" {:g} s |", t);
    sep += "---|";
  }
  md += " evaluations (median) |\n" + sep + "---|\n";
  for (Searcher s : kAllSearchers) {
    int threads = 1;
    std::vector<double> evals;
    std::vector<std::vector<double>> at(checkpoints.size());
    for (const auto& row : rows) {
      if (row.searcher != s) continue;
      threads = row.threads;
      evals.push_back(static_cast<double>(row.run.evaluations));
      for (size_t k = 0; k < checkpoints.size(); ++k) {
        at[k].push_back(BestAt(row.run.curve, checkpoints[k]));
      }
    }
    md += fmt::format("| {} | {} |", SearcherName(s), threads);
    for (auto& v : at) md += " " + Num(Median(v)) + " |";
    md += fmt::format(" {:.0f} |\n", Median(evals));
  }
  // The Fig. 11 claim: MCTS within 1% of its full-budget result after 1 s.
  md += fmt::format(
      "\nMCTS at 1 s vs its own {:g}-s result (the issue's \"within 1% at 1 s\"):\n\n", budget_s);
  md += "| searcher | seed | best at 1 s | best at end | gap | within 1% |\n"
        "|---|---|---|---|---|---|\n";
  int within = 0, n_mcts = 0, within_paper = 0, n_paper = 0;
  std::vector<double> gaps, gaps_paper;
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& row : rows) {
    runs.push_back({{"searcher", SearcherName(row.searcher)},
                    {"seed", row.seed},
                    {"threads", row.threads},
                    {"best_cost", row.run.best_cost},
                    {"evaluations", row.run.evaluations},
                    {"elapsed_s", row.run.elapsed_s},
                    {"exhausted", row.run.exhausted},
                    {"curve", CurveJson(row.run.curve)}});
    if (!IsMcts(row.searcher)) continue;
    const double at1 = BestAt(row.run.curve, 1.0);
    const double end = row.run.best_cost;
    const double gap = at1 / end - 1;
    const bool guided = row.searcher == Searcher::kMcts;
    ++(guided ? n_mcts : n_paper);
    (guided ? within : within_paper) += gap <= 0.01 ? 1 : 0;
    (guided ? gaps : gaps_paper).push_back(gap);
    md += fmt::format("| {} | {} | {} | {} | {} | {} |\n", SearcherName(row.searcher), row.seed,
                      Num(at1), Num(end), Pct(gap, 2), gap <= 0.01 ? "yes" : "no");
  }
  md += fmt::format(
      "\n**Answer (measured): MCTS (`dip`'s search) is within 1% of its {:g}-s result at 1 s on "
      "{} of {} seeds (median gap {}); with the paper's random rollouts on {} of {} (median gap "
      "{}).**\n",
      budget_s, within, n_mcts, Pct(Median(gaps), 2), within_paper, n_paper,
      Pct(Median(gaps_paper), 2));
  r.json = {{"experiment", "search"},
            {"model", job.model},
            {"data", job.data},
            {"budget_s", budget_s},
            {"threads", o.threads},
            {"num_segments", ss.num_segments},
            {"default_cost", ss.default_cost_s},
            {"default_oom", ss.default_oom},
            {"checkpoints_s", checkpoints},
            {"mcts_within_1pct_at_1s", within},
            {"mcts_runs", n_mcts},
            {"mcts_random_rollouts_within_1pct_at_1s", within_paper},
            {"mcts_random_rollouts_runs", n_paper},
            {"runs", runs}};
  std::vector<report::ChartSeries> series;
  for (const auto& row : rows) {
    series.push_back(CurveSeries(fmt::format("{} seed {}", SearcherName(row.searcher), row.seed),
                                 row.run.curve, budget_s));
  }
  report::LineChartOptions lo;
  lo.title = fmt::format("Fig. 11 analogue: best schedule found vs search time ({})", job.model);
  lo.x_label = "search time (s)";
  lo.y_label = "best cost (s)";
  lo.step = true;
  lo.y_from_zero = false;
  lo.markers = false;
  WEFT_ASSIGN_OR_RETURN(std::string svg, report::LineChartSvg(series, lo));
  r.figures.push_back({"dip_search_" + job.model + ".svg", std::move(svg)});
  return r;
}

// ---------------------------------------------------------------- scalability (Fig. 12)

StatusOr<ExperimentResult> ScalabilityExperiment(const ExperimentOptions& o) {
  const double budget_s = o.budget_s < 0 ? 10.0 : o.budget_s;
  if (budget_s <= 0) return InvalidArgumentError("scalability: --budget-s must be > 0");
  const std::vector<int> counts = o.sweep.empty() ? std::vector<int>{8, 16, 32, 64, 128} : o.sweep;
  for (int m : counts) {
    if (m < 1) return InvalidArgumentError(fmt::format("scalability: microbatch count {} < 1", m));
  }
  const auto seeds = SeedsOf(o);
  JobOptions job;
  job.model = o.model.empty() ? "vlm-s" : o.model;
  job.data = o.data.empty() ? "mixed" : o.data;

  ExperimentResult r;
  r.name = "scalability";
  std::string& md = r.markdown;
  md += fmt::format(
      "Model {} (data {}), one batch per microbatch count m (batch 0, DP replica 0, dip static "
      "plan). Per m: {} MCTS runs (seeds {{{}}}, {} threads, {:g} s each). **Quality target**: "
      "within 1% of the best cost any of those runs found (reference = min over runs); "
      "\"time to target\" is when each run's best first reaches it (median over runs; the "
      "reference run reaches it by definition, so this is the time to get within 1% of what "
      "{:g} s of search finds). The default (dual-queue, no priorities) is given for scale.\n\n",
      job.model, job.data, seeds.size(), fmt::join(seeds, ","), o.threads, budget_s, budget_s);
  md += "| microbatches | segment groups | stages | default cost s | best cost s | gain vs default "
        "| time to target s (median) | per run | evaluations/s |\n"
        "|---|---|---|---|---|---|---|---|---|\n";
  nlohmann::json rows = nlohmann::json::array();
  std::vector<report::ChartSeries> series(1);
  series[0].name = "MCTS time to within 1% (median)";
  for (int m : counts) {
    job.num_microbatches = m;
    Progress(o, fmt::format("scalability: m = {}", m));
    WEFT_ASSIGN_OR_RETURN(auto inst, MakeSearchInstance(job));
    std::vector<SearchRun> runs;
    for (uint64_t seed : seeds) {
      Progress(o, fmt::format("scalability: m = {} seed {}", m, seed));
      SearchRunOptions ro;
      ro.seed = seed;
      ro.threads = o.threads;
      ro.budget_s = budget_s;
      WEFT_ASSIGN_OR_RETURN(SearchRun run, RunSearcher(inst->search.problem, ro));
      runs.push_back(std::move(run));
    }
    double best = kInf, evals = 0, elapsed = 0;
    for (const auto& run : runs) {
      best = std::min(best, run.best_cost);
      evals += static_cast<double>(run.evaluations);
      elapsed += run.elapsed_s;
    }
    const double target = best * 1.01;
    std::vector<double> times;
    std::string per_run;
    for (const auto& run : runs) {
      const double t = TimeToReach(run.curve, target);
      per_run += (per_run.empty() ? "" : ", ") + (t < 0 ? std::string("never") : Num(t, 3));
      times.push_back(t < 0 ? kInf : t);
    }
    const double med = Median(times);
    const double def = inst->search.default_cost_s;
    md += fmt::format("| {} | {} | {} | {}{} | {} | {} | {} | {} | {:.0f} |\n", m,
                      inst->search.num_segments, inst->graph.stages().size(), Num(def),
                      inst->search.default_oom ? " (OOM)" : "", Num(best), Pct(best / def - 1),
                      std::isinf(med) ? "never" : Num(med, 3), per_run,
                      elapsed > 0 ? evals / elapsed : 0.0);
    nlohmann::json jr = {{"microbatches", m},
                         {"segments", inst->search.num_segments},
                         {"stages", inst->graph.stages().size()},
                         {"default_cost", def},
                         {"default_oom", inst->search.default_oom},
                         {"best_cost", best},
                         {"target_cost", target},
                         {"evaluations_per_s", elapsed > 0 ? evals / elapsed : 0.0}};
    jr["time_to_target_s"] = nlohmann::json::array();
    for (double t : times) {
      jr["time_to_target_s"].push_back(std::isinf(t) ? nlohmann::json(nullptr) : nlohmann::json(t));
    }
    rows.push_back(jr);
    if (std::isfinite(med)) {
      series[0].x.push_back(m);
      series[0].y.push_back(med);
    }
  }
  r.json = {{"experiment", "scalability"}, {"model", job.model}, {"data", job.data},
            {"budget_s", budget_s},       {"threads", o.threads}, {"seeds", seeds},
            {"rows", rows}};
  report::LineChartOptions lo;
  lo.title = fmt::format("Fig. 12 analogue: search time to within 1% vs microbatches ({})",
                         job.model);
  lo.x_label = "microbatches";
  lo.y_label = "time to target (s)";
  WEFT_ASSIGN_OR_RETURN(std::string svg, report::LineChartSvg(series, lo));
  r.figures.push_back({"dip_scalability_" + job.model + ".svg", std::move(svg)});
  return r;
}

// ---------------------------------------------------------------- subbatch (Fig. 9)

StatusOr<ExperimentResult> SubbatchExperiment(const ExperimentOptions& o) {
  const double budget_s = o.budget_s < 0 ? 1.0 : o.budget_s;
  const int iterations = o.iterations > 0 ? o.iterations : 5;
  std::vector<int> sizes = o.sweep.empty() ? std::vector<int>{1, 2, 4, 8, 16, 32} : o.sweep;
  for (int s : sizes) {
    if (s < 1) return InvalidArgumentError(fmt::format("subbatch: size {} < 1", s));
  }
  JobOptions job;
  job.model = o.model.empty() ? "vlm-m" : o.model;
  job.data = o.data.empty() ? "mixed" : o.data;
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<JobSetup> owned, MakeJobSetup(job));
  std::shared_ptr<const JobSetup> setup(std::move(owned));
  WEFT_ASSIGN_OR_RETURN(auto batches, MakeIterationBatches(*setup, 0, iterations));
  const auto& model = setup->job.model;
  std::vector<int> encoders;
  for (size_t i = 0; i < model.modules.size(); ++i) {
    const auto k = model.modules[i].kind;
    if (k == spec::ModuleKind::kVit || k == spec::ModuleKind::kAudioEncoder) {
      encoders.push_back(static_cast<int>(i));
    }
  }
  if (encoders.empty()) {
    return InvalidArgumentError("subbatch: model " + job.model + " has no encoder module");
  }
  WEFT_ASSIGN_OR_RETURN(auto auto_strategy, MakeDipStrategy(DipVariant::kFull));
  WEFT_ASSIGN_OR_RETURN(StaticPlan auto_plan, auto_strategy->Prepare(setup->job));
  const int chosen = auto_plan.sub_microbatch_size[encoders[0]];
  if (std::find(sizes.begin(), sizes.end(), chosen) == sizes.end()) sizes.push_back(chosen);
  std::sort(sizes.begin(), sizes.end());

  PlanBudget budget;
  budget.time_budget_s = budget_s;
  budget.threads = o.threads;
  struct Row {
    int size;
    std::vector<double> times;
    double plan_s = 0;
    bool oom = false;
  };
  std::vector<Row> rows;
  for (int size : sizes) {
    Progress(o, fmt::format("subbatch: B = {}", size));
    DipOptions opts;
    opts.sub_microbatch_size_override.assign(model.modules.size(), 0);
    for (int e : encoders) opts.sub_microbatch_size_override[e] = size;
    WEFT_ASSIGN_OR_RETURN(auto dip, MakeDipStrategy(DipVariant::kFull, opts));
    WEFT_ASSIGN_OR_RETURN(auto planner, Planner::Create(setup, std::move(dip), {.budget = budget}));
    Row row{size, {}, 0, false};
    for (const auto& batch : batches) {
      WEFT_ASSIGN_OR_RETURN(PlannedIteration p, planner->Plan(batch));
      row.times.push_back(p.evaluation.iteration_time_s);
      row.plan_s += p.plan.plan_time_s / static_cast<double>(batches.size());
      row.oom = row.oom || p.evaluation.oom;
    }
    rows.push_back(std::move(row));
  }
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0.0 : s / static_cast<double>(v.size());
  };
  double chosen_mean = 0, best_mean = kInf;
  int best_size = 0;
  for (const auto& row : rows) {
    const double m = mean(row.times);
    if (row.size == chosen) chosen_mean = m;
    if (m < best_mean) {
      best_mean = m;
      best_size = row.size;
    }
  }
  std::string names;
  for (int e : encoders) names += (names.empty() ? "" : ", ") + model.modules[e].name;
  ExperimentResult r;
  r.name = "subbatch";
  std::string& md = r.markdown;
  md += fmt::format(
      "`dip` on {} (data {}, {} iterations of fresh batches, planning budget {:g} s per iteration, "
      "{} threads); the sub-microbatch size B of the encoder module(s) ({}) is fixed through "
      "DipOptions::sub_microbatch_size_override, every other choice is dip's own. The §4 "
      "partitioner (smallest size with >= 95% of the best cost-model efficiency) picks B = {}.\n\n",
      job.model, job.data, iterations, budget_s, o.threads, names, chosen);
  md += "| encoder B | mean iteration s | vs §4 choice | min s | max s | OOM | plan s |\n"
        "|---|---|---|---|---|---|---|\n";
  nlohmann::json jrows = nlohmann::json::array();
  report::ChartSeries series{"dip", {}, {}};
  for (const auto& row : rows) {
    const double m = mean(row.times);
    md += fmt::format("| {}{} | {} | {} | {} | {} | {} | {} |\n", row.size,
                      row.size == chosen ? " (§4 choice)" : "", Num(m), Pct(m / chosen_mean - 1),
                      Num(*std::min_element(row.times.begin(), row.times.end())),
                      Num(*std::max_element(row.times.begin(), row.times.end())),
                      row.oom ? "yes" : "no", Num(row.plan_s, 2));
    jrows.push_back({{"size", row.size},
                     {"chosen", row.size == chosen},
                     {"iteration_time_s", row.times},
                     {"mean_s", m},
                     {"oom", row.oom},
                     {"plan_time_s", row.plan_s}});
    series.x.push_back(row.size);
    series.y.push_back(m);
  }
  md += fmt::format("\nFastest: B = {} ({} s); the §4 choice B = {} is {} from it.\n", best_size,
                    Num(best_mean), chosen, Pct(chosen_mean / best_mean - 1));
  r.json = {{"experiment", "subbatch"}, {"model", job.model}, {"data", job.data},
            {"iterations", iterations}, {"budget_s", budget_s}, {"chosen_size", chosen},
            {"best_size", best_size},   {"rows", jrows}};
  report::LineChartOptions lo;
  lo.title = fmt::format("Fig. 9 analogue: dip iteration time vs encoder sub-microbatch size ({})",
                         job.model);
  lo.x_label = "encoder sub-microbatch size (instances)";
  lo.y_label = "mean iteration time (s)";
  lo.y_from_zero = false;
  // The §4 choice as its own one-point series, so the figure marks it.
  report::ChartSeries choice{fmt::format("§4 choice (B = {})", chosen), {}, {}};
  choice.x.push_back(chosen);
  choice.y.push_back(chosen_mean);
  std::vector<report::ChartSeries> all{series, choice};
  WEFT_ASSIGN_OR_RETURN(std::string svg, report::LineChartSvg(all, lo));
  r.figures.push_back({"dip_subbatch_" + job.model + ".svg", std::move(svg)});
  return r;
}

// ---------------------------------------------------------------- memory (Fig. 10)

StatusOr<ExperimentResult> MemoryExperiment(const ExperimentOptions& o) {
  const double budget_s = o.budget_s < 0 ? 1.0 : o.budget_s;
  Setup s{"memory", o.model.empty() ? "vlm-m" : o.model, o.data.empty() ? "mixed" : o.data, 0, 0,
          {"megatron-1f1b", "dip-reorder", "dip"}};
  WEFT_ASSIGN_OR_RETURN(CompareRun run, RunSetup(s, 1, budget_s, o.threads, o));
  ExperimentResult r;
  r.name = "memory";
  std::string& md = r.markdown;
  md += fmt::format(
      "{} (data {}), iteration 0, planning budget {:g} s. Memory per GPU of rank 0 (device group "
      "0) over the iteration, from the simulator's memory curve. `dip-reorder` is DIP without the "
      "§5.3 per-layer memory optimization (the paper's \"non-adaptive\" line).\n\n",
      s.model, s.data, budget_s);
  md += "| strategy | iteration s | rank-0 peak GiB | capacity GiB | peak / capacity | rank-0 "
        "time-weighted mean GiB | OOM (any rank) |\n|---|---|---|---|---|---|---|\n";
  std::vector<report::ChartSeries> series;
  nlohmann::json jrows = nlohmann::json::array();
  double capacity_gib = 0;
  for (const auto& kept : run.timelines) {
    const auto& tl = kept.timeline;
    if (tl.groups.empty() || tl.groups[0].memory.empty()) continue;
    const auto& mem = tl.groups[0].memory;
    capacity_gib = static_cast<double>(tl.capacity_bytes) / kGiB;
    report::ChartSeries cs;
    cs.name = kept.strategy;
    double area = 0;
    for (size_t i = 0; i < mem.size(); ++i) {
      cs.x.push_back(mem[i].time_s);
      cs.y.push_back(static_cast<double>(mem[i].bytes) / kGiB);
      const double next_t = i + 1 < mem.size() ? mem[i + 1].time_s : tl.iteration_time_s;
      area += static_cast<double>(mem[i].bytes) * std::max(0.0, next_t - mem[i].time_s);
    }
    const double peak_gib = static_cast<double>(tl.groups[0].peak_bytes) / kGiB;
    const double mean_gib = tl.iteration_time_s > 0 ? area / tl.iteration_time_s / kGiB : 0;
    md += fmt::format("| {} | {} | {:.1f} | {:.1f} | {:.0f}% | {:.1f} | {} |\n", kept.strategy,
                      Num(tl.iteration_time_s), peak_gib, capacity_gib,
                      100.0 * peak_gib / capacity_gib, mean_gib, tl.oom.empty() ? "no" : "yes");
    nlohmann::json curve = nlohmann::json::array();
    for (const auto& p : mem) curve.push_back({p.time_s, p.bytes});
    jrows.push_back({{"strategy", kept.strategy},
                     {"iteration_time_s", tl.iteration_time_s},
                     {"rank0_peak_bytes", tl.groups[0].peak_bytes},
                     {"capacity_bytes", tl.capacity_bytes},
                     {"rank0_mean_bytes", mean_gib * kGiB},
                     {"oom", !tl.oom.empty()},
                     {"rank0_memory", curve}});
    series.push_back(std::move(cs));
  }
  for (const auto& sr : run.comparison.strategies) {
    if (!sr.ok()) md += fmt::format("\n{} failed: {}\n", sr.name, sr.error.value_or("?"));
  }
  if (series.empty()) return InternalError("memory: no strategy produced a memory curve");
  r.json = {{"experiment", "memory"}, {"model", s.model}, {"data", s.data},
            {"budget_s", budget_s},   {"rows", jrows}};
  report::LineChartOptions lo;
  lo.title = fmt::format("Fig. 10 analogue: memory of rank 0 ({})", s.model);
  lo.x_label = "time (s)";
  lo.y_label = "memory per GPU (GiB)";
  lo.step = true;
  lo.markers = false;
  lo.reference_y = capacity_gib;
  lo.reference_label = "GPU capacity";
  WEFT_ASSIGN_OR_RETURN(std::string svg, report::LineChartSvg(series, lo));
  r.figures.push_back({"dip_memory_" + s.model + ".svg", std::move(svg)});
  return r;
}

// ---------------------------------------------------------------- comparisons (xl, e2e, ...)

StatusOr<ExperimentResult> SetupsExperiment(const std::string& name, std::vector<Setup> setups,
                                            int default_iterations, const ExperimentOptions& o,
                                            const std::string& intro) {
  const double budget_s = o.budget_s < 0 ? 1.0 : o.budget_s;
  const int iterations = o.iterations > 0 ? o.iterations : default_iterations;
  setups = FilterSetups(std::move(setups), o);
  ExperimentResult r;
  r.name = name;
  std::string& md = r.markdown;
  md += intro + fmt::format(" {} iteration(s) of fresh batches per setup, planning budget {:g} s "
                            "per iteration, {} threads.\n\n",
                            iterations, budget_s, o.threads);
  // Summary table: one row per setup.
  std::set<std::string> all;
  std::vector<std::string> columns;
  for (const auto& s : setups) {
    for (const auto& n : s.strategies) {
      if (all.insert(n).second) columns.push_back(n);
    }
  }
  std::string summary = "| setup |";
  std::string sep = "|---|";
  for (const auto& c : columns) {
    summary += " " + c + " |";
    sep += "---|";
  }
  summary +=
      " dip vs best baseline | dip vs megatron-1f1b | dip MFU % | dip plan s | run wall s |\n" +
      sep + "---|---|---|---|---|\n";
  std::string details;
  nlohmann::json jsetups = nlohmann::json::array();
  for (const auto& s : setups) {
    const auto start = std::chrono::steady_clock::now();
    WEFT_ASSIGN_OR_RETURN(CompareRun run, RunSetup(s, iterations, budget_s, o.threads, o));
    const double wall_s = SecondsSince(start);
    const auto& c = run.comparison;
    summary += "| " + s.title + " |";
    for (const auto& col : columns) {
      const int i = c.FindStrategy(col);
      if (i < 0) {
        summary += " |";
      } else if (!c.strategies[i].ok()) {
        summary += " failed |";
      } else {
        const auto sum = c.strategies[i].Summary();
        summary += " " + Num(sum.iteration_time_mean_s) + (sum.any_oom ? " (OOM)" : "") + " |";
      }
    }
    const double dip = MeanTime(c, "dip");
    const auto [best_name, best_t] = BestBaseline(c);
    const double mega = MeanTime(c, "megatron-1f1b");
    const int di = c.FindStrategy("dip");
    const auto dsum = di >= 0 && c.strategies[di].ok() ? c.strategies[di].Summary()
                                                       : report::StrategySummary{};
    summary += fmt::format(" {} | {} | {:.1f} | {} | {:.0f} |\n",
                           std::isfinite(best_t) && !std::isnan(dip)
                               ? fmt::format("{:.2f}x ({})", best_t / dip, best_name)
                               : "n/a",
                           !std::isnan(dip) && !std::isnan(mega)
                               ? fmt::format("{:.2f}x", mega / dip)
                               : "n/a",
                           100.0 * dsum.mfu, Num(dsum.plan_time_mean_s, 2), wall_s);
    details += fmt::format("### {}\n\n`{}`\n\n{}\n", s.title, SetupCommand(s, iterations, budget_s),
                           ComparisonMarkdown(c));
    for (const auto& line : run.static_plans) details += "- " + line + "\n";
    details += "\n";
    nlohmann::json js = {{"title", s.title},   {"model", s.model}, {"data", s.data},
                         {"gpus", c.num_gpus}, {"pp", s.pp},       {"wall_s", wall_s}};
    js["comparison"] = nlohmann::json::object();
    js["comparison"]["strategies"] = nlohmann::json::array();
    for (const auto& sr : c.strategies) {
      nlohmann::json st = {{"name", sr.name}, {"error", sr.error ? *sr.error : ""}};
      if (sr.ok()) {
        const auto sum = sr.Summary();
        st["iteration_time_mean_s"] = sum.iteration_time_mean_s;
        st["mfu"] = sum.mfu;
        st["oom"] = sum.any_oom;
        st["plan_time_mean_s"] = sum.plan_time_mean_s;
        std::vector<double> times;
        for (const auto& it : sr.iterations) times.push_back(it.iteration_time_s);
        st["iteration_time_s"] = times;
      }
      js["comparison"]["strategies"].push_back(st);
    }
    jsetups.push_back(js);
  }
  md += summary + "\n" + details;
  r.json = {{"experiment", name},
            {"iterations", iterations},
            {"budget_s", budget_s},
            {"threads", o.threads},
            {"setups", jsetups}};
  return r;
}

StatusOr<ExperimentResult> XlExperiment(const ExperimentOptions& o) {
  std::vector<Setup> setups = {
      {"VLM-XL-8k (DP128 TP8 PP8, 8192 H100)", "vlm-xl", "", 8192, 8, kVlmStrategies},
      {"VLM-XL-16k (DP128 TP8 PP16, 16384 H100)", "vlm-xl", "", 16384, 16, kVlmStrategies},
      {"T2V-XL-3k (DP96 TP8 PP4, 3072 H100)", "t2v-xl", "", 3072, 4, kT2vStrategies},
      {"T2V-XL-6k (DP96 TP8 PP8, 6144 H100)", "t2v-xl", "", 6144, 8, kT2vStrategies},
  };
  return SetupsExperiment(
      "xl", setups, 1, o,
      "DIP Table 6 setups (presets vlm-xl, t2v-xl; data = each preset's setup profile: "
      "rise-and-fall for VLM-XL, video for T2V-XL), simulated; mean iteration time (s) per "
      "strategy.");
}

StatusOr<ExperimentResult> E2eExperiment(const ExperimentOptions& o) {
  std::vector<Setup> setups = {
      {"VLM-S, mixed", "vlm-s", "mixed", 0, 0, kVlmStrategies},
      {"VLM-M, mixed", "vlm-m", "mixed", 0, 0, kVlmStrategies},
      {"VLM-L, mixed", "vlm-l", "mixed", 0, 0, kVlmStrategies},
      {"T2V-S, video", "t2v-s", "video", 0, 0, kT2vStrategies},
      {"T2V-L, video", "t2v-l", "video", 0, 0, kT2vStrategies},
  };
  return SetupsExperiment("e2e", setups, 10, o,
                          "Fig. 8a analogue: the Table 3 presets on their setup clusters; mean "
                          "iteration time (s) per strategy.");
}

StatusOr<ExperimentResult> AblationExperiment(const ExperimentOptions& o) {
  const std::vector<std::string> variants = {"megatron-1f1b", "dip-partition-only",
                                             "dip-interleave", "dip-reorder", "dip"};
  std::vector<Setup> setups = {{"VLM-S, mixed", "vlm-s", "mixed", 0, 0, variants},
                               {"T2V-S, video", "t2v-s", "video", 0, 0, variants}};
  for (auto& s : setups) s.strategies = variants;
  WEFT_ASSIGN_OR_RETURN(ExperimentResult r,
                        SetupsExperiment("ablation", setups, 10, o,
                                         "Table 5 analogue: the four DIP variants (each adds one "
                                         "technique) against megatron-1f1b."));
  // The check: each variant is not slower than the previous one.
  std::string checks = "\nStep check (each DIP variant not slower than the previous one):\n\n"
                       "| setup | step | before s | after s | change | ok |\n"
                       "|---|---|---|---|---|---|\n";
  for (const auto& js : r.json["setups"]) {
    std::map<std::string, double> t;
    for (const auto& st : js["comparison"]["strategies"]) {
      if (st.contains("iteration_time_mean_s")) {
        t[st["name"].get<std::string>()] = st["iteration_time_mean_s"].get<double>();
      }
    }
    for (size_t i = 2; i < variants.size(); ++i) {
      if (!t.count(variants[i - 1]) || !t.count(variants[i])) continue;
      const double a = t[variants[i - 1]], b = t[variants[i]];
      checks += fmt::format("| {} | {} -> {} | {} | {} | {} | {} |\n",
                            js["title"].get<std::string>(), variants[i - 1], variants[i], Num(a),
                            Num(b), Pct(b / a - 1, 2), b <= a * (1 + 1e-9) ? "yes" : "**no**");
    }
  }
  r.markdown += checks;
  return r;
}

StatusOr<ExperimentResult> DynamicExperiment(const ExperimentOptions& o) {
  const double budget_s = o.budget_s < 0 ? 1.0 : o.budget_s;
  const int iterations = o.iterations > 0 ? o.iterations : 40;
  Setup s{"dynamic", o.model.empty() ? "vlm-s" : o.model,
          o.data.empty() ? "rise-and-fall" : o.data, 0, 0, kVlmStrategies};
  WEFT_ASSIGN_OR_RETURN(CompareRun run, RunSetup(s, iterations, budget_s, o.threads, o));
  const auto& c = run.comparison;
  ExperimentResult r;
  r.name = "dynamic";
  std::string& md = r.markdown;
  md += fmt::format("Fig. 8b analogue: {} on data {}, {} iterations, planning budget {:g} s. "
                    "`{}`\n\nSimulated iteration time (s) per iteration:\n\n",
                    s.model, s.data, iterations, budget_s, SetupCommand(s, iterations, budget_s));
  md += "| iteration |";
  std::string sep = "|---|";
  std::vector<const report::StrategyResult*> ok;
  for (const auto& sr : c.strategies) {
    if (!sr.ok()) {
      md.insert(0, fmt::format("{} failed: {}\n\n", sr.name, sr.error.value_or("?")));
      continue;
    }
    ok.push_back(&sr);
    md += " " + sr.name + " |";
    sep += "---|";
  }
  md += "\n" + sep + "\n";
  int dip_fastest = 0;
  std::vector<report::ChartSeries> series;
  for (const auto* sr : ok) series.push_back({sr->name, {}, {}});
  for (int it = 0; it < iterations; ++it) {
    md += fmt::format("| {} |", it);
    double best = kInf, dip = kInf;
    for (size_t k = 0; k < ok.size(); ++k) {
      if (it >= static_cast<int>(ok[k]->iterations.size())) {
        md += " |";
        continue;
      }
      const double t = ok[k]->iterations[it].iteration_time_s;
      md += " " + Num(t) + " |";
      series[k].x.push_back(it);
      series[k].y.push_back(t);
      if (ok[k]->name == "dip") {
        dip = t;
      } else {
        best = std::min(best, t);
      }
    }
    md += "\n";
    dip_fastest += dip <= best ? 1 : 0;
  }
  md += "| mean |";
  for (const auto* sr : ok) md += " **" + Num(sr->Summary().iteration_time_mean_s) + "** |";
  md += fmt::format("\n\ndip is the fastest strategy in {} of {} iterations.\n", dip_fastest,
                    iterations);
  nlohmann::json strategies = nlohmann::json::array();
  for (const auto* sr : ok) {
    std::vector<double> times;
    for (const auto& it : sr->iterations) times.push_back(it.iteration_time_s);
    strategies.push_back({{"name", sr->name}, {"iteration_time_s", times}});
  }
  r.json = {{"experiment", "dynamic"}, {"model", s.model},          {"data", s.data},
            {"iterations", iterations}, {"budget_s", budget_s},     {"dip_fastest", dip_fastest},
            {"strategies", strategies}};
  report::LineChartOptions lo;
  lo.title = fmt::format("Fig. 8b analogue: {} on {}", s.model, s.data);
  lo.x_label = "iteration";
  lo.y_label = "iteration time (s)";
  lo.x_integer_ticks = true;
  WEFT_ASSIGN_OR_RETURN(std::string svg, report::LineChartSvg(series, lo));
  r.figures.push_back({"dip_dynamic_" + s.model + ".svg", std::move(svg)});
  return r;
}

// ---------------------------------------------------------------- paper (§7.1 data)

// DIP's own setup (§7.1): VLMs on dip-vlm (LAION / OBELICS / ScienceQA, 728 px, 8192-token
// sequences, <= 48 images), T2V models on dip-t2v (16-fps clips <= 16 s, <= 8 per microbatch),
// Megatron-LM = megatron-vpp (interleaved stages, parameter-balanced chunks, §7.1 "Baselines").
// Deterministic: every search strategy plans under the CLI's default work budget.
constexpr int64_t kPaperWorkBudget = 100;  // = weft compare's --budget-work default

struct PaperRun {
  std::string key;    // row ids below refer to it
  std::string title;
  std::string model, cluster, data;
  int gpus = 0, pp = 0, microbatches = 0;
  int iterations = 0;
  std::vector<std::string> strategies;
};

std::string PaperRunCommand(const PaperRun& r) {
  std::string cmd = "weft compare --model " + r.model;
  if (!r.cluster.empty()) cmd += " --cluster " + r.cluster;
  if (r.gpus > 0) cmd += " --gpus " + std::to_string(r.gpus);
  if (r.pp > 0) cmd += " --pp " + std::to_string(r.pp);
  if (r.microbatches > 0) cmd += " --microbatches " + std::to_string(r.microbatches);
  cmd += " --data " + r.data + " --iterations " + std::to_string(r.iterations) +
         " --baseline megatron-vpp --strategies ";
  for (size_t i = 0; i < r.strategies.size(); ++i) cmd += (i ? "," : "") + r.strategies[i];
  return cmd;
}

PlanBudget PaperBudget(const ExperimentOptions& o) {
  PlanBudget b;
  b.time_budget_s = 0;
  b.work_budget = kPaperWorkBudget;
  b.threads = o.threads;
  return b;
}

StatusOr<CompareRun> RunPaperRun(const PaperRun& r, const ExperimentOptions& o) {
  CompareOptions co;
  co.job.model = r.model;
  co.job.cluster = r.cluster;
  co.job.data = r.data;
  co.job.gpus = r.gpus;
  co.job.pipeline_size = r.pp;
  co.job.num_microbatches = r.microbatches;
  co.iterations = r.iterations;
  co.strategies = r.strategies;
  co.baseline = "megatron-vpp";
  co.budget = PaperBudget(o);
  if (o.progress) {
    co.progress = [&o, title = r.title](const std::string& m) { o.progress(title + ": " + m); };
  }
  return RunComparison(co);
}

// dip alone on a job whose cost model uses `cost` (a controlled experiment: one assumption of
// the cost model changed, nothing else). Mean iteration time and MFU over `iterations`.
struct DipOnlyResult {
  double iteration_time_s = 0;
  double mfu = 0;
};
StatusOr<DipOnlyResult> RunDipWithCostOptions(const JobOptions& job, const cost::CostOptions& cost,
                                              int iterations, const ExperimentOptions& o) {
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<JobSetup> owned, MakeJobSetup(job));
  owned->cost_model = std::make_unique<cost::CostModel>(owned->job.cluster, cost);
  owned->job.cost_model = owned->cost_model.get();
  std::shared_ptr<const JobSetup> setup(std::move(owned));
  WEFT_ASSIGN_OR_RETURN(auto batches, MakeIterationBatches(*setup, 0, iterations));
  WEFT_ASSIGN_OR_RETURN(auto dip, MakeDipStrategy(DipVariant::kFull));
  WEFT_ASSIGN_OR_RETURN(auto planner,
                        Planner::Create(setup, std::move(dip), {.budget = PaperBudget(o)}));
  DipOnlyResult out;
  for (const auto& batch : batches) {
    WEFT_ASSIGN_OR_RETURN(PlannedIteration p, planner->Plan(batch));
    out.iteration_time_s += p.evaluation.iteration_time_s / static_cast<double>(batches.size());
    out.mfu += p.evaluation.mfu / static_cast<double>(batches.size());
  }
  return out;
}

// Share of one layer's time (forward + backward, one TP rank) per op group.
struct LayerShare {
  double total_s = 0;
  std::map<std::string, double> by_group_s;  // "self-attention kernel", "GEMMs", ...
};
StatusOr<LayerShare> LayerTimeShares(const JobSetup& setup, std::string_view module_name,
                                     const cost::TokenShape& shape, const cost::CostModel& cm) {
  const auto& model = setup.job.model;
  int module = -1;
  for (size_t i = 0; i < model.modules.size(); ++i) {
    if (model.modules[i].name == module_name) module = static_cast<int>(i);
  }
  if (module < 0) return NotFoundError(fmt::format("module {} not in the model", module_name));
  WEFT_ASSIGN_OR_RETURN(cost::LayerCost layer,
                        cm.Layer(model, module, 1, shape, setup.job.parallel.For(model.modules[module].name)));
  LayerShare out;
  for (const auto& op : layer.ops) {
    std::string group;
    switch (op.kind) {
      case cost::OpKind::kAttention: group = "attention kernels (" + op.name + ")"; break;
      case cost::OpKind::kGemm: group = "GEMMs"; break;
      case cost::OpKind::kMemory: group = "memory-bound kernels (norms, activations, residuals)"; break;
      case cost::OpKind::kCollective: group = "TP collectives"; break;
    }
    out.by_group_s[group] += op.latency_s;
    out.total_s += op.latency_s;
  }
  return out;
}

StatusOr<ExperimentResult> PaperExperiment(const ExperimentOptions& o) {
  const int iterations = o.iterations > 0 ? o.iterations : 3;
  const std::vector<std::string> vlm = {"megatron-vpp", "nnscaler", "optimus", "dip"};
  const std::vector<std::string> t2v = {"megatron-vpp", "nnscaler", "dip"};
  const std::vector<std::string> ablation = {"megatron-vpp",   "nnscaler",    "optimus",
                                             "dip-partition-only", "dip-interleave",
                                             "dip-reorder",    "dip"};
  std::vector<PaperRun> runs = {
      {"t4", "Table 4: VLM-S on 16 H20", "vlm-s", "h20", "dip-vlm", 0, 0, 0, iterations,
       {"megatron-vpp", "fsdp", "dip"}},
      {"vlm-s", "Table 5 / Fig. 8a: VLM-S on 16 H800", "vlm-s", "", "dip-vlm", 0, 0, 0, iterations,
       ablation},
      {"vlm-m", "Fig. 8a: VLM-M on 32 H800", "vlm-m", "", "dip-vlm", 0, 0, 0, iterations, vlm},
      {"vlm-l", "Fig. 8a: VLM-L on 64 H800", "vlm-l", "", "dip-vlm", 0, 0, 0, iterations, vlm},
      {"t2v-s", "Fig. 8a: T2V-S on 16 H800", "t2v-s", "", "dip-t2v", 0, 0, 0, iterations, t2v},
      {"t2v-l", "Fig. 8a: T2V-L on 64 H800", "t2v-l", "", "dip-t2v", 0, 0, 0, iterations, t2v},
      {"vlm-xl-8k", "Table 6: VLM-XL-8k (DP128 TP8 PP8, 8192 H100)", "vlm-xl", "", "dip-vlm", 8192,
       8, 0, 1, vlm},
      {"vlm-xl-16k", "Table 6: VLM-XL-16k (DP128 TP8 PP16, 16384 H100)", "vlm-xl", "", "dip-vlm",
       16384, 16, 0, 1, vlm},
      {"t2v-xl-3k", "Table 6: T2V-XL-3k (DP96 TP8 PP4, 3072 H100)", "t2v-xl", "", "dip-t2v", 3072, 4,
       0, 1, t2v},
      {"t2v-xl-6k", "Table 6: T2V-XL-6k (DP96 TP8 PP8, 6144 H100)", "t2v-xl", "", "dip-t2v", 6144, 8,
       0, 1, t2v},
      // Controlled experiment: the global batch (the paper does not state it; weft's default is
      // 2·P = 8 sequences per DP replica).
      {"vlm-s-m32", "Knob: VLM-S, 32 microbatches (global batch 32 sequences)", "vlm-s", "",
       "dip-vlm", 0, 0, 32, iterations,
       {"megatron-vpp", "dip-partition-only", "dip-interleave", "dip-reorder", "dip"}},
      {"t4-m32", "Knob: VLM-S on 16 H20, 32 microbatches", "vlm-s", "h20", "dip-vlm", 0, 0, 32,
       iterations, {"megatron-vpp", "fsdp", "dip"}},
  };
  // --model: a comma-separated list of the models whose runs to keep (empty = all).
  std::set<std::string> models;
  for (size_t b = 0; !o.model.empty() && b <= o.model.size();) {
    const size_t e = std::min(o.model.find(',', b), o.model.size());
    models.insert(o.model.substr(b, e - b));
    b = e + 1;
  }
  auto keep_model = [&](const std::string& m) { return models.empty() || models.count(m) > 0; };
  ExperimentResult r;
  r.name = "paper";
  std::string& md = r.markdown;
  std::map<std::string, std::map<std::string, report::StrategySummary>> got;
  std::string details;
  nlohmann::json jruns = nlohmann::json::array();
  for (const auto& run : runs) {
    if (!keep_model(run.model)) continue;
    const auto start = std::chrono::steady_clock::now();
    Progress(o, "paper: " + run.title);
    WEFT_ASSIGN_OR_RETURN(CompareRun cr, RunPaperRun(run, o));
    const double wall_s = SecondsSince(start);
    nlohmann::json js = {{"key", run.key},       {"title", run.title},
                         {"command", PaperRunCommand(run)}, {"wall_s", wall_s},
                         {"strategies", nlohmann::json::array()}};
    for (const auto& sr : cr.comparison.strategies) {
      nlohmann::json st = {{"name", sr.name}, {"error", sr.error ? *sr.error : ""}};
      if (sr.ok()) {
        const auto sum = sr.Summary();
        got[run.key][sr.name] = sum;
        st["iteration_time_mean_s"] = sum.iteration_time_mean_s;
        st["mfu"] = sum.mfu;
        st["oom"] = sum.any_oom;
        st["peak_memory_bytes"] = sum.peak_memory_bytes;
      }
      js["strategies"].push_back(st);
    }
    jruns.push_back(js);
    details += fmt::format("### {}\n\n`{}` (wall {:.0f} s)\n\n{}", run.title, PaperRunCommand(run),
                           wall_s, ComparisonMarkdown(cr.comparison));
    if (!cr.data_warning.empty()) details += "\ndata: " + cr.data_warning + "\n";
    details += "\n";
  }
  auto time_of = [&](const std::string& key, const std::string& strategy) {
    auto it = got.find(key);
    if (it == got.end()) return std::nan("");
    auto jt = it->second.find(strategy);
    return jt == it->second.end() ? std::nan("") : jt->second.iteration_time_mean_s;
  };
  auto mfu_of = [&](const std::string& key) {
    auto it = got.find(key);
    if (it == got.end() || !it->second.count("dip")) return std::nan("");
    return it->second.at("dip").mfu;
  };
  // dip's speedup over each baseline of the given runs: {min, max}.
  auto speedup_range = [&](const std::vector<std::string>& keys) {
    double lo = kInf, hi = -kInf;
    for (const auto& k : keys) {
      const double dip = time_of(k, "dip");
      for (const std::string b : {"megatron-vpp", "nnscaler", "optimus"}) {
        const double t = time_of(k, b);
        if (std::isnan(t) || std::isnan(dip)) continue;
        lo = std::min(lo, t / dip);
        hi = std::max(hi, t / dip);
      }
    }
    return std::pair<double, double>{std::isinf(lo) ? std::nan("") : lo,
                                     std::isinf(hi) ? std::nan("") : hi};
  };
  const auto vlm_range = speedup_range({"vlm-s", "vlm-m", "vlm-l"});
  const auto t2v_range = speedup_range({"t2v-s", "t2v-l"});
  const auto xl_range = speedup_range({"vlm-xl-8k", "vlm-xl-16k", "t2v-xl-3k", "t2v-xl-6k"});
  const double t5_mega = time_of("vlm-s", "megatron-vpp");
  struct Row {
    std::string what;
    double paper;
    double weft;
    std::string note = "";
  };
  // The paper's numbers: DIP (ASPLOS'26) Table 4, Table 5, §7.2 (Fig. 8a ranges), §7.5 (Table 6).
  std::vector<Row> rows = {
      {"Table 4: FSDP (fsdp), s", 40.270, time_of("t4", "fsdp")},
      {"Table 4: Megatron-LM (megatron-vpp), s", 39.053, time_of("t4", "megatron-vpp")},
      {"Table 4: FSDP / Megatron-LM", 40.270 / 39.053,
       time_of("t4", "fsdp") / time_of("t4", "megatron-vpp")},
      {"Table 4: DIP, s", 28.606, time_of("t4", "dip")},
      {"Table 4: DIP / Megatron-LM", 28.606 / 39.053,
       time_of("t4", "dip") / time_of("t4", "megatron-vpp")},
      {"Table 4 / Table 5: Megatron-LM on H20 / on H800 (derived)", 39.053 / 26.13,
       time_of("t4", "megatron-vpp") / t5_mega},
      {"Table 5: vanilla Megatron-LM (megatron-vpp), s", 26.13, t5_mega},
      {"Table 5: + partitioner (dip-partition-only), s", 22.27, time_of("vlm-s", "dip-partition-only")},
      {"Table 5: + interleaving (dip-interleave), s", 18.81, time_of("vlm-s", "dip-interleave")},
      {"Table 5: + reordering (dip-reorder), s", 17.61, time_of("vlm-s", "dip-reorder")},
      {"Table 5: + memory optimization (dip), s", 16.05, time_of("vlm-s", "dip")},
      {"Table 5: speedup of + partitioner", 26.13 / 22.27,
       t5_mega / time_of("vlm-s", "dip-partition-only")},
      {"Table 5: speedup of + interleaving", 26.13 / 18.81, t5_mega / time_of("vlm-s", "dip-interleave")},
      {"Table 5: speedup of + reordering", 26.13 / 17.61, t5_mega / time_of("vlm-s", "dip-reorder")},
      {"Table 5: speedup of + memory optimization", 26.13 / 16.05, t5_mega / time_of("vlm-s", "dip")},
      {"Fig. 8a: VLM, dip over a baseline, lowest", 1.156, vlm_range.first},
      {"Fig. 8a: VLM, dip over a baseline, highest", 1.762, vlm_range.second},
      {"Fig. 8a: T2V, dip over a baseline, lowest", 1.366, t2v_range.first},
      {"Fig. 8a: T2V, dip over a baseline, highest", 1.973, t2v_range.second},
      {"Table 6: VLM-XL-8k dip MFU", 0.36, mfu_of("vlm-xl-8k"), "not run (`--model` left it out)"},
      {"Table 6: VLM-XL-16k dip MFU", 0.36, mfu_of("vlm-xl-16k"), "not run (`--model` left it out)"},
      {"Table 6: T2V-XL-3k dip MFU", 0.39, mfu_of("t2v-xl-3k")},
      {"Table 6: T2V-XL-6k dip MFU", 0.39, mfu_of("t2v-xl-6k")},
      {"Table 6: dip over a baseline, highest (\"up to 82.8%\")", 1.828, xl_range.second},
  };
  md += fmt::format(
      "DIP on DIP's own setup (§7.1): VLMs on `dip-vlm` (LAION-like pairs, OBELICS-like documents, "
      "ScienceQA-like questions; 728 px = 169 tokens per image; 8192-token sequences, <= 48 "
      "images), T2V models on `dip-t2v` (16-fps clips <= 16 s at 768 px, <= 8 clips and 16 s per "
      "microbatch); docs/data.md states the mix and its sources. Megatron-LM = `megatron-vpp` "
      "(interleaved stages, parameter-balanced chunks, as §7.1's baseline); FSDP = `fsdp` (full "
      "shard over every GPU in ranks of the setup's TP, Megatron's microbatch size; "
      "docs/strategies.md). Planning: work budget "
      "{} units (deterministic), {} thread(s). {} iteration(s) of fresh batches per small setup, "
      "1 per Table 6 setup (the paper averages 100 iterations for Fig. 8a). The paper does not "
      "state its global batch: weft uses its default, 2·P microbatches of one packed sequence per "
      "DP replica (8 for the Table 3 setups), and the `Knob` runs repeat VLM-S with 32.\n\n",
      kPaperWorkBudget, o.threads, iterations);
  md += "Side by side (ratio = weft / paper; **bold** where more than 25% off):\n\n"
        "| paper number | paper | weft | weft / paper |\n|---|---|---|---|\n";
  nlohmann::json jrows = nlohmann::json::array();
  for (const auto& row : rows) {
    const double ratio = row.weft / row.paper;
    const bool off = !std::isnan(ratio) && std::abs(ratio - 1) > 0.25;
    md += fmt::format("| {} | {} | {} | {} |\n", row.what, Num(row.paper, 3),
                      std::isnan(row.weft) ? (row.note.empty() ? "n/a" : row.note) : Num(row.weft, 3),
                      std::isnan(ratio) ? "—" : (off ? "**" + Num(ratio, 2) + "**" : Num(ratio, 2)));
    jrows.push_back({{"what", row.what},
                     {"paper", row.paper},
                     {"weft", std::isnan(row.weft) ? nlohmann::json() : nlohmann::json(row.weft)},
                     {"off_by_more_than_25pct", off}});
  }
  // Fig. 8a per setup.
  md += "\nFig. 8a per setup (dip's speedup over each baseline; the paper prints bars, its text "
        "gives the ranges above):\n\n| setup | megatron-vpp | nnscaler | optimus | dip MFU % |\n"
        "|---|---|---|---|---|\n";
  for (const std::string k : {"vlm-s", "vlm-m", "vlm-l", "t2v-s", "t2v-l"}) {
    if (!got.count(k)) continue;
    md += "| " + k + " |";
    for (const std::string b : {"megatron-vpp", "nnscaler", "optimus"}) {
      const double t = time_of(k, b);
      md += std::isnan(t) ? " |" : fmt::format(" {:.2f}x |", t / time_of(k, "dip"));
    }
    md += fmt::format(" {:.1f} |\n", 100 * mfu_of(k));
  }
  // The global-batch knob.
  if (got.count("vlm-s-m32") && got.count("vlm-s")) {
    md += "\nKnob 1, the global batch (VLM-S; the paper does not state it): mean iteration s with "
          "8 (default) and 32 microbatches of one 8192-token sequence.\n\n"
          "| strategy | 8 microbatches | 32 microbatches | 32 / 8 | vs megatron-vpp at 32 |\n"
          "|---|---|---|---|---|\n";
    for (const std::string s :
         {"megatron-vpp", "dip-partition-only", "dip-interleave", "dip-reorder", "dip"}) {
      const double a = time_of("vlm-s", s), b = time_of("vlm-s-m32", s);
      md += fmt::format("| {} | {} | {} | {:.2f} | {:.3f}x |\n", s, Num(a), Num(b), b / a,
                        time_of("vlm-s-m32", "megatron-vpp") / b);
    }
    if (got.count("t4-m32")) {
      md += fmt::format("| H20: megatron-vpp | {} | {} | {:.2f} | |\n| H20: fsdp | {} | {} | {:.2f} | {:.3f}x |\n| H20: dip | {} | {} | {:.2f} | {:.3f}x |\n",
                        Num(time_of("t4", "megatron-vpp")), Num(time_of("t4-m32", "megatron-vpp")),
                        time_of("t4-m32", "megatron-vpp") / time_of("t4", "megatron-vpp"),
                        Num(time_of("t4", "fsdp")), Num(time_of("t4-m32", "fsdp")),
                        time_of("t4-m32", "fsdp") / time_of("t4", "fsdp"),
                        time_of("t4-m32", "megatron-vpp") / time_of("t4-m32", "fsdp"),
                        Num(time_of("t4", "dip")), Num(time_of("t4-m32", "dip")),
                        time_of("t4-m32", "dip") / time_of("t4", "dip"),
                        time_of("t4-m32", "megatron-vpp") / time_of("t4-m32", "dip"));
    }
  }
  // T2V-XL: which term dominates, and dip's MFU with one assumption changed at a time.
  if (keep_model("t2v-xl")) {
    Progress(o, "paper: T2V-XL knobs");
    JobOptions job;
    job.model = "t2v-xl";
    job.gpus = 3072;
    job.pipeline_size = 4;
    job.data = "dip-t2v";
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<JobSetup> setup, MakeJobSetup(job));
    // One DiT layer on one TP rank for one 16-s 768-px clip (73,728 tokens, MovieGen's context).
    cost::TokenShape clip = cost::TokenShape::Uniform(73728, 1);
    clip.context_tokens = 300;
    cost::CostOptions fast_attention;
    fast_attention.attention_peak_fraction = 0.6;
    const cost::CostModel fast_cm(setup->job.cluster, fast_attention);
    WEFT_ASSIGN_OR_RETURN(LayerShare base, LayerTimeShares(*setup, "dit", clip, *setup->cost_model));
    WEFT_ASSIGN_OR_RETURN(LayerShare fast, LayerTimeShares(*setup, "dit", clip, fast_cm));
    md += fmt::format(
        "\nKnob 2, T2V-XL's time: one DiT-30B layer (TP8, H100) on one 16-s 768-px clip "
        "(73,728 tokens, 300 text tokens), forward + backward, by op group; default cost model vs "
        "attention_peak_fraction 0.366 -> 0.6 (cost::CostOptions, nothing else changed):\n\n"
        "| op group | default ms | share | attention at 0.6 of peak, ms | share |\n"
        "|---|---|---|---|---|\n");
    for (const auto& [group, t] : base.by_group_s) {
      const double f = fast.by_group_s[group];
      md += fmt::format("| {} | {:.1f} | {:.0f}% | {:.1f} | {:.0f}% |\n", group, 1e3 * t,
                        100 * t / base.total_s, 1e3 * f, 100 * f / fast.total_s);
    }
    md += fmt::format("| total | {:.1f} | | {:.1f} | |\n", 1e3 * base.total_s, 1e3 * fast.total_s);
    struct Knob {
      std::string what;
      std::string data;
      cost::CostOptions cost;
    };
    const std::vector<Knob> knobs = {
        {"dip-t2v, default cost model", "dip-t2v", cost::CostOptions{}},
        {"`video` profile instead (720p/360p/1080p clips, InternVid + ShareGPT4Video lengths, cut at 16 s)",
         "video", cost::CostOptions{}},
        {"dip-t2v, attention kernels at 0.6 of peak instead of 0.366", "dip-t2v", fast_attention},
    };
    md += "\nT2V-XL-3k, dip alone, 1 iteration, one assumption changed per row:\n\n"
          "| assumption | dip iteration s | dip MFU % |\n|---|---|---|\n";
    nlohmann::json jknobs = nlohmann::json::array();
    for (const auto& k : knobs) {
      Progress(o, "paper: T2V-XL-3k knob: " + k.what);
      JobOptions kj = job;
      kj.data = k.data;
      WEFT_ASSIGN_OR_RETURN(DipOnlyResult d, RunDipWithCostOptions(kj, k.cost, 1, o));
      md += fmt::format("| {} | {} | {:.1f} |\n", k.what, Num(d.iteration_time_s), 100 * d.mfu);
      jknobs.push_back({{"what", k.what}, {"iteration_time_s", d.iteration_time_s}, {"mfu", d.mfu}});
    }
    r.json["t2v_xl_knobs"] = jknobs;
  }
  md += "\n" + details;
  r.json["experiment"] = "paper";
  r.json["iterations"] = iterations;
  r.json["work_budget"] = kPaperWorkBudget;
  r.json["threads"] = o.threads;
  r.json["runs"] = jruns;
  r.json["rows"] = jrows;
  return r;
}

using ExperimentFn = StatusOr<ExperimentResult> (*)(const ExperimentOptions&);
struct ExperimentEntry {
  const char* name;
  ExperimentFn fn;
  const char* help;
};
const ExperimentEntry kExperiments[] = {
    {"search", SearchExperiment,
     "Fig. 11: best-found cost vs search time, MCTS/random/DFS; vlm-l mixed, --budget-s 60, "
     "--seeds 1,2,3"},
    {"scalability", ScalabilityExperiment,
     "Fig. 12: MCTS time to within 1% of the best found vs microbatches; vlm-s mixed, --sweep "
     "8,16,32,64,128, --budget-s 10 per run"},
    {"subbatch", SubbatchExperiment,
     "Fig. 9: dip iteration time vs encoder sub-microbatch size; vlm-m mixed, --sweep "
     "1,2,4,8,16,32, --iterations 5, --budget-s 1"},
    {"memory", MemoryExperiment,
     "Fig. 10: rank-0 memory timeline, dip vs dip-reorder vs megatron-1f1b; vlm-m mixed (SVG)"},
    {"xl", XlExperiment,
     "Fig. 14/Table 6: VLM-XL-8k/16k, T2V-XL-3k/6k vs baselines; --iterations 1, --budget-s 1 "
     "(dip plans ~80-200 s per VLM-XL iteration on 2 cores)"},
    {"e2e", E2eExperiment,
     "Fig. 8a: VLM-S/M/L (mixed), T2V-S/L (video) vs baselines; --iterations 10"},
    {"ablation", AblationExperiment,
     "Table 5: dip-partition-only/-interleave/-reorder/dip on VLM-S and T2V-S; --iterations 10"},
    {"dynamic", DynamicExperiment,
     "Fig. 8b: rise-and-fall on VLM-S, per-iteration times (SVG); --iterations 40"},
    {"paper", PaperExperiment,
     "Tables 4, 5, 6 and Fig. 8a on DIP's own §7.1 data (dip-vlm, dip-t2v), Megatron = "
     "megatron-vpp, side by side with the paper's numbers; --iterations 3 (Table 6: 1)"},
};

}  // namespace

std::vector<std::string> ExperimentNames() {
  std::vector<std::string> names;
  for (const auto& e : kExperiments) names.emplace_back(e.name);
  return names;
}

std::string ExperimentHelp() {
  std::string s;
  for (const auto& e : kExperiments) s += fmt::format("  {:<12} {}\n", e.name, e.help);
  return s;
}

StatusOr<ExperimentResult> RunExperiment(std::string_view name, const ExperimentOptions& options) {
  if (options.threads < 1) {
    return InvalidArgumentError(fmt::format("threads = {}; must be >= 1", options.threads));
  }
  if (options.iterations < 0) {
    return InvalidArgumentError(fmt::format("iterations = {}; must be >= 1", options.iterations));
  }
  for (const auto& e : kExperiments) {
    if (name == e.name) return e.fn(options);
  }
  return NotFoundError(fmt::format("unknown experiment \"{}\"; known: {}", name,
                                   fmt::join(ExperimentNames(), ", ")));
}

}  // namespace weft::bench::dip
