#include "weft/strategy/tune.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "weft/data/workload.h"
#include "weft/planning/planner.h"
#include "weft/planning/window.h"
#include "weft/strategy/compare.h"
#include "weft/strategy/strategy.h"

namespace weft::strategy {
namespace {

using Clock = std::chrono::steady_clock;
using planning::JobSetup;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

std::string FirstLine(std::string_view text, size_t max_chars = 160) {
  std::string s(text.substr(0, text.find('\n')));
  if (s.size() > max_chars) s = s.substr(0, max_chars - 3) + "...";
  return s;
}

// A candidate's job: MakeJobSetup of its options without drawing profile batches, then the base
// job's profile batches and cost model (same GPUs, data, global batch and context: the batches
// are the same, and the cost model's cache is shared across candidates).
StatusOr<std::shared_ptr<const JobSetup>> CandidateSetup(const JobSetup& base,
                                                         planning::JobOptions options) {
  options.profile_batches = 0;
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<JobSetup> setup, planning::MakeJobSetup(options));
  setup->job.profile_batches = base.job.profile_batches;
  setup->job.cost_model = base.job.cost_model;
  setup->cost_model.reset();
  return std::shared_ptr<const JobSetup>(std::move(setup));
}

// What makes two static plans the same plan (a strategy that ignores the backbone's sizes gives
// the same one for every candidate).
std::string PlanSignature(const planning::Planner& planner) {
  const planning::StaticPlan& plan = planner.static_plan();
  // The placement says the DP (folded groups' dp, unfolded replicas); the microbatches are the
  // static plan's when it sets them (DFLOP's optimizer), else the job's.
  std::string s = plan.placement.Describe(planner.job().model);
  s += fmt::format("|mb{}", plan.num_microbatches > 0 ? plan.num_microbatches
                                                      : planner.job().parallel.num_microbatches);
  for (const auto& p : plan.placement.parallel) {
    s += fmt::format("|{}:{}:{}:{}:{}", p.module, p.tp, p.cp, p.pp, p.dp);
  }
  for (const auto& g : plan.placement.groups) s += fmt::format("|g{}x{}", g.num_gpus, g.dp);
  s += fmt::format("|mb{}", plan.num_microbatches);
  return s;
}

struct Evaluated {
  double time_s = 0;
  bool oom = false;
  spec::Recompute recompute = spec::Recompute::kNone;
  int64_t peak_memory_bytes = 0;
};

// The strategy's own plans of every profile batch: the mean iteration time (a streaming plan over
// its window, as weft compare evaluates it).
StatusOr<Evaluated> PlanWithStrategy(const planning::Planner& planner,
                                     const planning::PlanBudget& budget) {
  const planning::Job& job = planner.job();
  Evaluated out;
  std::vector<planning::IterationPlan> plans;
  double sum_s = 0;
  for (const spec::Batch& batch : job.profile_batches) {
    WEFT_ASSIGN_OR_RETURN(planning::PlannedIteration planned, planner.Plan(batch, budget));
    sum_s += planned.evaluation.iteration_time_s;
    out.oom = out.oom || planned.evaluation.oom;
    out.peak_memory_bytes = std::max(out.peak_memory_bytes, planned.evaluation.peak_memory_bytes);
    out.recompute = std::max(out.recompute, planned.recompute_used);
    plans.push_back(std::move(planned.plan));
  }
  out.time_s = sum_s / std::max<size_t>(1, job.profile_batches.size());
  if (planner.static_plan().pool.has_value()) {
    std::vector<const planning::IterationPlan*> ptrs;
    for (const auto& p : plans) ptrs.push_back(&p);
    WEFT_ASSIGN_OR_RETURN(
        planning::WindowEvaluation w,
        planning::EvaluateWindow(job, planner.static_plan(), ptrs, plans.size() > 1 ? 1 : 0));
    double s = 0;
    for (double t : w.iteration_time_s) s += t;
    out.time_s = s / std::max<size_t>(1, w.iteration_time_s.size());
    out.oom = false;
    out.peak_memory_bytes = 0;
    for (const auto& t : w.window.iterations) {
      out.oom = out.oom || !t.oom.empty();
      for (const auto& g : t.groups) out.peak_memory_bytes = std::max(out.peak_memory_bytes, g.peak_bytes);
    }
  }
  return out;
}

std::vector<int> Divisors(int n) {
  std::vector<int> out;
  for (int d = 1; d <= n; ++d) {
    if (n % d == 0) out.push_back(d);
  }
  return out;
}

// The recompute the memory policy kept, for reports: the strategy's own when it manages memory.
std::string RecomputeText(const planning::Planner& planner, spec::Recompute r) {
  if (planner.memory_policy() == planning::MemoryPolicy::kStrategy) return "strategy's own";
  if (planner.memory_policy() == planning::MemoryPolicy::kFixed) return "static plan's";
  return std::string(spec::RecomputeName(r));
}

bool Better(const TuneCandidate& a, const TuneCandidate& b) {
  // Fits memory first, then time; ties keep enumeration order (stable sort).
  const bool a_ok = a.error.empty() && a.time_s >= 0 && !a.oom;
  const bool b_ok = b.error.empty() && b.time_s >= 0 && !b.oom;
  if (a_ok != b_ok) return a_ok;
  return a.time_s < b.time_s;
}

StrategyTuning TuneOne(const std::string& name, const TuneOptions& options,
                       const JobSetup& base, const std::vector<spec::Batch>& check_batches) {
  const auto start = Clock::now();
  StrategyTuning t;
  t.strategy = name;
  const planning::Job& job = base.job;
  const int gpus = job.cluster.TotalGpus();
  const int node = std::max(1, job.cluster.gpus_per_node);
  const int gbs = base.sequences_per_batch;
  const int llm = data::FirstLlmModule(job.model);
  const spec::ModuleSpec& llm_spec = job.model.modules[llm];
  const spec::ModuleParallel lp = job.parallel.For(llm_spec.name);
  const double usable_bytes = static_cast<double>(job.cluster.gpu.UsableMemoryBytes());
  const cost::CostOptions& cost_options = job.cost_model->options();

  // The job as given.
  TuneCandidate def{.tp = lp.tp,
                    .cp = lp.cp,
                    .pp = lp.pp,
                    .dp = job.DataParallelSize(),
                    .microbatches = job.parallel.num_microbatches,
                    .is_default = true};

  auto make_planner = [&](const TuneCandidate& c)
      -> StatusOr<std::unique_ptr<planning::Planner>> {
    const planning::JobOptions o = c.Apply(options.job, gbs);
    WEFT_ASSIGN_OR_RETURN(auto setup, CandidateSetup(base, o));
    WEFT_ASSIGN_OR_RETURN(auto strategy, MakeStrategyForJob(name, o, setup->job));
    return planning::Planner::Create(setup, std::move(strategy), {.budget = options.budget});
  };

  // Enumeration: CP, then the backbone's (tp, pp, dp) over the GPUs CP leaves (DFLOP's rule),
  // then the microbatch counts.
  std::vector<TuneCandidate> candidates;
  for (int cp : options.context_parallel_sizes) {
    if (cp < 1 || gpus % cp != 0) {
      ++t.rejected["cp does not divide the GPUs"];
      continue;
    }
    if (cp > 1 && base.context_tokens % (2 * cp) != 0) {
      ++t.rejected["cp: context not a multiple of 2·cp"];
      continue;
    }
    for (const planning::ModuleLayout& l : planning::EnumerateModuleLayouts(
             llm_spec, gpus / cp, node, nullptr, "LLM", &t.rejected)) {
      if (gbs % l.dp != 0) {
        ++t.rejected["global batch not a multiple of dp"];
        continue;
      }
      if (planning::StateBytesLowerBound(llm_spec, l.tp, l.pp, l.dp, cost_options) >
          usable_bytes) {
        ++t.rejected["memory: LLM state / (tp·pp) above usable"];
        continue;
      }
      for (int mb : Divisors(gbs / l.dp)) {
        if (mb > planning::JobOptions::kMaxMicrobatches) break;
        candidates.push_back(
            {.tp = l.tp, .cp = cp, .pp = l.pp, .dp = l.dp, .microbatches = mb});
      }
    }
  }
  t.enumerated = static_cast<int64_t>(candidates.size());

  // The default first: it always runs with the strategy.
  auto default_planner = make_planner(def);
  if (!default_planner.ok()) {
    t.default_config = def;
    t.default_config.error = FirstLine(default_planner.status().message());
  } else {
    t.default_config = def;
    t.default_config.plan = (*default_planner)->static_plan().description;
  }

  // A strategy that searches its own configuration: the same static plan whatever the backbone's
  // sizes (probe a candidate that differs from the default in TP or PP).
  bool own_search = false;
  if (default_planner.ok()) {
    const std::string def_sig =
        PlanSignature(**default_planner);
    for (const TuneCandidate& c : candidates) {
      if (c.tp == def.tp && c.pp == def.pp) continue;
      auto probe = make_planner(c);
      if (!probe.ok()) continue;
      own_search = PlanSignature(**probe) == def_sig;
      break;
    }
  }

  // Screen: the strategy's own plan of the first profile batch at the smallest search budget
  // (rule-based strategies give their real plan, search strategies one step of their search).
  // Two levels: every (tp, cp, pp, dp) layout at its most microbatches, then every microbatch
  // count of the best `expand` layouts.
  std::vector<TuneCandidate> screened;
  std::set<std::string> seen_plans;
  auto screen = [&](TuneCandidate c) {
    auto planner = make_planner(c);
    if (!planner.ok()) {
      ++t.rejected["refused by the strategy"];
      return;
    }
    if (!seen_plans.insert(PlanSignature(**planner)).second) {
      ++t.rejected["same static plan as an earlier candidate"];
      return;
    }
    if (options.exhaustive) {
      screened.push_back(c);
      return;
    }
    planning::PlanBudget screen_budget = options.budget;
    screen_budget.time_budget_s = 0;
    screen_budget.work_budget = 1;
    // Every profile batch, as the final ranking (a streaming plan's window is left to it).
    double sum_s = 0;
    for (const spec::Batch& batch : job.profile_batches) {
      auto plan = (*planner)->Plan(batch, screen_budget);
      if (!plan.ok()) {
        ++t.rejected["screen plan failed"];
        return;
      }
      sum_s += plan->evaluation.iteration_time_s;
      c.oom = c.oom || plan->evaluation.oom;
    }
    ++t.screened;
    c.screen_s = sum_s / static_cast<double>(job.profile_batches.size());
    screened.push_back(c);
  };
  auto by_screen = [](const TuneCandidate& a, const TuneCandidate& b) {
    if (a.oom != b.oom) return !a.oom;  // fits first, then time; stable: enumeration order
    return a.screen_s < b.screen_s;
  };
  auto same_layout = [](const TuneCandidate& a, const TuneCandidate& b) {
    return a.tp == b.tp && a.cp == b.cp && a.pp == b.pp && a.dp == b.dp;
  };
  if (!own_search && !job.profile_batches.empty()) {
    if (options.exhaustive) {
      for (const TuneCandidate& c : candidates) screen(c);
    } else {
      // Level 1: one candidate per layout, at its most microbatches (one sequence each: the
      // least activation memory and the smallest pipeline bubble; candidates are enumerated
      // with microbatch counts ascending, so it is the layout's last).
      std::vector<TuneCandidate> firsts;
      for (size_t i = 0; i < candidates.size(); ++i) {
        if (i + 1 == candidates.size() || !same_layout(candidates[i + 1], candidates[i])) {
          firsts.push_back(candidates[i]);
        }
      }
      for (const TuneCandidate& c : firsts) screen(c);
      std::vector<TuneCandidate> level1 = screened;
      std::stable_sort(level1.begin(), level1.end(), by_screen);
      // Level 2: the other microbatch counts of the best layouts.
      const size_t expand = static_cast<size_t>(std::max(3, 2 * options.max_simulations));
      int64_t level2 = 0;
      for (size_t k = 0; k < level1.size() && k < expand; ++k) {
        for (const TuneCandidate& c : candidates) {
          if (same_layout(c, level1[k]) && c.microbatches != level1[k].microbatches) {
            screen(c);
            ++level2;
          }
        }
      }
      const int64_t skipped = static_cast<int64_t>(candidates.size() - firsts.size()) - level2;
      if (skipped > 0) {
        t.rejected["not screened: microbatch counts of layouts outside the best " +
                   std::to_string(expand)] += skipped;
      }
    }
    std::stable_sort(screened.begin(), screened.end(), by_screen);
  } else if (own_search) {
    t.note = "searches its own configuration: the backbone's sizes do not change its plan; run "
             "at the job's";
  }

  // Plan: the default, then the best of the screen up to the budget (all of them when
  // exhaustive).
  auto plan_one = [&](TuneCandidate c) {
    auto planner = c.is_default && default_planner.ok()
                       ? StatusOr<std::unique_ptr<planning::Planner>>(
                             std::move(*default_planner))
                       : make_planner(c);
    if (!planner.ok()) {
      c.error = FirstLine(planner.status().message());
      return c;
    }
    c.plan = (*planner)->static_plan().description;
    auto e = PlanWithStrategy(**planner, options.budget);
    ++t.planned;
    if (!e.ok()) {
      c.error = FirstLine(e.status().message());
      return c;
    }
    c.time_s = e->time_s;
    c.oom = e->oom;
    c.peak_memory_bytes = e->peak_memory_bytes;
    c.recompute = RecomputeText(**planner, e->recompute);
    return c;
  };
  if (t.default_config.error.empty()) t.default_config = plan_one(def);
  t.planned_candidates.push_back(t.default_config);
  const size_t limit = options.exhaustive ? screened.size()
                                          : static_cast<size_t>(std::max(0, options.max_simulations - 1));
  size_t taken = 0;
  for (const TuneCandidate& c : screened) {
    if (taken >= limit) break;
    if (c.tp == def.tp && c.cp == def.cp && c.pp == def.pp && c.dp == def.dp &&
        c.microbatches == def.microbatches) {
      continue;  // the default ran already
    }
    t.planned_candidates.push_back(plan_one(c));
    ++taken;
  }
  if (!options.exhaustive && screened.size() > taken) {
    t.rejected["not planned: below the best " + std::to_string(options.max_simulations) +
               " of the screen"] += static_cast<int64_t>(screened.size() - taken);
  }
  std::stable_sort(t.planned_candidates.begin(), t.planned_candidates.end(), Better);
  // The memory check: the fastest candidate that fits the profile batches must fit the check
  // batches too (planned at the screen's budget); else it is out of memory and the next one is
  // checked.
  if (!check_batches.empty()) {
    planning::PlanBudget check_budget = options.budget;
    check_budget.time_budget_s = 0;
    check_budget.work_budget = 1;
    for (TuneCandidate& c : t.planned_candidates) {
      if (!c.error.empty() || c.oom || c.time_s < 0) break;  // fitting ones come first
      auto planner = make_planner(c);
      if (!planner.ok()) {
        c.error = FirstLine(planner.status().message());
        continue;
      }
      for (size_t k = 0; k < check_batches.size() && c.memory_check.empty(); ++k) {
        auto planned = (*planner)->Plan(check_batches[k], check_budget);
        if (!planned.ok()) {
          c.error = "memory check batch " + std::to_string(k) + ": " +
                    FirstLine(planned.status().message());
          c.memory_check = "failed";
        } else if (planned->evaluation.oom) {
          c.oom = true;
          c.memory_check = fmt::format(
              "out of memory on check batch {} of {} (peak {:.2f} GiB)", k,
              check_batches.size(),
              static_cast<double>(planned->evaluation.peak_memory_bytes) / (1 << 30));
          ++t.rejected["memory: out of memory on a check batch"];
        }
      }
      if (c.memory_check.empty()) {
        c.memory_check = fmt::format("fits {} check batches", check_batches.size());
        break;
      }
    }
    std::stable_sort(t.planned_candidates.begin(), t.planned_candidates.end(), Better);
  }
  for (const TuneCandidate& c : t.planned_candidates) {
    if (!c.error.empty()) ++t.rejected["refused by the strategy"];
    else if (c.oom && c.memory_check.rfind("out of memory", 0) != 0) {
      ++t.rejected["memory (simulated)"];
    }
  }
  const TuneCandidate& top = t.planned_candidates.front();
  if (!top.error.empty() || top.time_s < 0) {
    t.error = top.error.empty() ? "no candidate ran" : top.error;
  }
  t.best = top;
  t.wall_s = Seconds(start);
  return t;
}

}  // namespace

Status TuneOptions::Validate() const {
  if (memory_check_batches < 0 || memory_check_batches > kMaxMemoryCheckBatches) {
    return InvalidArgumentError(fmt::format("--memory-check-batches = {}; must be in [0, {}]",
                                            memory_check_batches, kMaxMemoryCheckBatches));
  }
  if (max_simulations < 1 || max_simulations > kMaxSimulations) {
    return InvalidArgumentError(fmt::format("--max-simulations = {}; must be in [1, {}]",
                                            max_simulations, kMaxSimulations));
  }
  for (int cp : context_parallel_sizes) {
    if (cp < 1 || cp > planning::JobOptions::kMaxParallelSize) {
      return InvalidArgumentError(fmt::format("--cp-sizes: {}; each must be in [1, {}]", cp,
                                              planning::JobOptions::kMaxParallelSize));
    }
  }
  return budget.Validate();
}

std::string TuneCandidate::Describe() const {
  return fmt::format("tp{} cp{} pp{} dp{} mb{}", tp, cp, pp, dp, microbatches);
}

planning::JobOptions TuneCandidate::Apply(const planning::JobOptions& base,
                                          int global_batch_sequences) const {
  if (is_default) return base;
  planning::JobOptions o = base;
  o.tensor_size = {.all = tp, .by_module = {}};
  o.context_size = {.all = cp, .by_module = {}};
  o.pipeline_size = pp;
  o.data_parallel_size = dp;
  o.num_microbatches = microbatches;
  o.micro_batch_sequences = 0;
  o.sequences_per_batch = global_batch_sequences;
  return o;
}

double StrategyTuning::SpeedupOverDefault() const {
  // Never a speedup over a default that does not fit memory, or for a best that does not.
  if (!error.empty() || best.time_s <= 0 || best.oom || default_config.time_s <= 0 ||
      default_config.oom || !default_config.error.empty()) {
    return 0;
  }
  return default_config.time_s / best.time_s;
}

std::vector<std::string> TuneResult::Rules() {
  return {
      "TP inside a node and dividing the LLM's heads and KV groups; PP at most its layers "
      "(DFLOP's enumeration, planning/parallel_space.h)",
      "CP divides the GPUs and 2·CP divides the context",
      "DP divides the global batch (fixed: every candidate trains the same sequences); "
      "microbatches divide the replica's share",
      "memory: the LLM's parameters, gradients and optimizer state / (tp·pp) alone above the "
      "GPU's usable memory (a lower bound of every stage layout)",
      "a candidate whose static plan equals an earlier one's is not run twice",
      "screen: the strategy's own plan of the profile batches at the smallest search budget (1 "
      "work unit: rule-based strategies give their plan, search strategies one step), every "
      "layout at its most microbatches, then every microbatch count of the best 2·max "
      "layouts; "
      "the job's own configuration and the best of the screen are planned by the strategy at "
      "the full budget on every profile batch; the fastest that fits memory wins",
      "memory check: the winner must also fit more batches of the profile stream (never the "
      "measured ones) at the screen's budget; one that does not is out of memory and the next "
      "is checked"};
}

namespace {
bool Feasible(const StrategyTuning& s) {
  return s.error.empty() && !s.best.oom && s.best.time_s > 0;
}
}  // namespace

const StrategyTuning* TuneResult::Best() const {
  for (const StrategyTuning& s : strategies) {
    if (Feasible(s)) return &s;
  }
  return nullptr;
}

const StrategyTuning* TuneResult::RunnerUp() const {
  const StrategyTuning* best = Best();
  for (const StrategyTuning& s : strategies) {
    if (&s != best && Feasible(s)) return &s;
  }
  return nullptr;
}

std::string TuneResult::ToText() const {
  std::string out = fmt::format(
      "weft tune: {} on {} x {} GPUs ({} per node), data {}, global batch {} sequences of {} "
      "tokens, {} profile batches, {} memory-check batches, {} per strategy\n",
      model, gpus, cluster, gpus_per_node, data, global_batch_sequences, context_tokens,
      profile_batches, memory_check_batches,
      exhaustive ? std::string("every candidate planned (exhaustive)")
                 : fmt::format("at most {} planned", max_simulations));
  out += "pruning rules:\n";
  for (const std::string& r : Rules()) out += "  - " + r + "\n";
  out += fmt::format("\n{:<26} {:>10} {:>10} {:>8}  {:<22} {:<22} {}\n", "strategy", "tuned s",
                     "default s", "x dflt", "best", "default", "formed / planned / left out");
  const StrategyTuning* best = Best();
  for (const StrategyTuning& s : strategies) {
    const std::string mark = &s == best ? "* " : "  ";
    if (!s.error.empty()) {
      out += fmt::format("{}{:<24} error: {}\n", mark, s.strategy, s.error);
      continue;
    }
    int64_t rejected = 0;
    for (const auto& [rule, n] : s.rejected) rejected += n;
    const double speedup = s.SpeedupOverDefault();
    out += fmt::format(
        "{}{:<24} {:>10} {:>10} {:>8}  {:<22} {:<22} {} / {} / {}\n", mark, s.strategy,
        s.best.oom ? "oom" : fmt::format("{:.3f}", s.best.time_s),
        !s.default_config.error.empty() ? "error"
        : s.default_config.oom          ? "oom"
                                        : fmt::format("{:.3f}", s.default_config.time_s),
        speedup > 0 ? fmt::format("{:.2f}x", speedup) : "-", s.best.Describe(),
        s.default_config.Describe(), s.enumerated, s.planned, rejected);
  }
  out += "\n";
  for (const StrategyTuning& s : strategies) {
    out += fmt::format("{} ({:.1f} s):", s.strategy, s.wall_s);
    if (!s.note.empty()) out += " " + s.note + ";";
    if (s.error.empty()) {
      out += fmt::format(" best {} recompute {}", s.best.Describe(), s.best.recompute);
      if (!s.best.memory_check.empty()) out += "; memory check: " + s.best.memory_check;
      if (!s.best.plan.empty()) out += " [" + FirstLine(s.best.plan, 120) + "]";
    }
    out += "\n";
    for (const auto& [rule, n] : s.rejected) out += fmt::format("    rejected {}: {}\n", n, rule);
  }
  if (best) {
    out += fmt::format("\nbest: {} at {} ({:.3f} s/iteration)", best->strategy,
                       best->best.Describe(), best->best.time_s);
    if (const StrategyTuning* r = RunnerUp()) {
      out += fmt::format("; runner-up {} at {} ({:.3f} s, {:.1f}% slower)", r->strategy,
                         r->best.Describe(), r->best.time_s,
                         100.0 * (r->best.time_s / best->best.time_s - 1));
    }
    out += "\n";
  }
  return out;
}

std::string TuneResult::ToJson() const {
  using nlohmann::ordered_json;
  auto candidate = [](const TuneCandidate& c) {
    ordered_json j{{"tp", c.tp},
                   {"cp", c.cp},
                   {"pp", c.pp},
                   {"dp", c.dp},
                   {"microbatches", c.microbatches},
                   {"is_default", c.is_default}};
    if (c.time_s >= 0) j["iteration_time_s"] = c.time_s;
    if (c.screen_s >= 0) j["screen_time_s"] = c.screen_s;
    j["oom"] = c.oom;
    if (!c.recompute.empty()) j["recompute"] = c.recompute;
    if (c.peak_memory_bytes > 0) j["peak_memory_bytes"] = c.peak_memory_bytes;
    if (!c.plan.empty()) j["plan"] = c.plan;
    if (!c.memory_check.empty()) j["memory_check"] = c.memory_check;
    if (!c.error.empty()) j["error"] = c.error;
    return j;
  };
  ordered_json j{{"schema", "weft.tune/v1"},
                 {"model", model},
                 {"cluster", cluster},
                 {"gpus", gpus},
                 {"gpus_per_node", gpus_per_node},
                 {"data", data},
                 {"global_batch_sequences", global_batch_sequences},
                 {"context_tokens", context_tokens},
                 {"profile_batches", profile_batches},
                 {"memory_check_batches", memory_check_batches},
                 {"max_simulations", max_simulations},
                 {"exhaustive", exhaustive},
                 {"rules", Rules()}};
  const StrategyTuning* best = Best();
  j["best"] = best ? ordered_json(best->strategy) : ordered_json(nullptr);
  ordered_json rows = ordered_json::array();
  for (const StrategyTuning& s : strategies) {
    ordered_json r{{"strategy", s.strategy}};
    if (!s.error.empty()) r["error"] = s.error;
    if (!s.note.empty()) r["note"] = s.note;
    r["best"] = candidate(s.best);
    r["default"] = candidate(s.default_config);
    if (s.SpeedupOverDefault() > 0) r["speedup_over_default"] = s.SpeedupOverDefault();
    r["enumerated"] = s.enumerated;
    r["screened"] = s.screened;
    r["planned"] = s.planned;
    r["rejected"] = s.rejected;
    ordered_json planned = ordered_json::array();
    for (const auto& c : s.planned_candidates) planned.push_back(candidate(c));
    r["planned_candidates"] = planned;
    r["wall_s"] = s.wall_s;
    rows.push_back(r);
  }
  j["strategies"] = rows;
  return j.dump(2);
}

StatusOr<AutoChoice> ChooseAuto(const TuneResult& tuning, const planning::JobOptions& job) {
  const StrategyTuning* best = tuning.Best();
  if (!best) {
    return FailedPreconditionError("auto: no strategy fits memory on this job (weft tune shows "
                                   "each one's reason)");
  }
  AutoChoice choice;
  choice.strategy = best->strategy;
  choice.job = best->best.Apply(job, tuning.global_batch_sequences);
  choice.reason = fmt::format("auto: {} at {} ({:.4g} s/iteration on the profile batches)",
                              best->strategy, best->best.Describe(), best->best.time_s);
  if (const StrategyTuning* r = tuning.RunnerUp()) {
    choice.reason += fmt::format("; runner-up {} at {} ({:.4g} s, {:.1f}% slower)", r->strategy,
                                 r->best.Describe(), r->best.time_s,
                                 100.0 * (r->best.time_s / best->best.time_s - 1));
  }
  return choice;
}

StatusOr<AutoChoice> ChooseAuto(const TuneOptions& options) {
  WEFT_ASSIGN_OR_RETURN(TuneResult tuning, Tune(options));
  return ChooseAuto(tuning, options.job);
}

StatusOr<TunedComparison> RunTunedComparison(const CompareOptions& options, TuneOptions tune) {
  tune.job = options.job;
  tune.strategies = options.strategies;
  tune.budget = options.budget;
  TunedComparison out;
  WEFT_ASSIGN_OR_RETURN(out.tuning, Tune(tune));
  auto& merged = out.run.comparison;
  for (const StrategyTuning& s : out.tuning.strategies) {
    if (!s.error.empty()) {
      report::StrategyResult r;
      r.name = s.strategy;
      r.error = "not tuned: " + s.error;
      merged.strategies.push_back(std::move(r));
      out.run.static_plans.push_back(s.strategy + ": not tuned: " + s.error);
      continue;
    }
    CompareOptions one = options;
    one.job = s.best.Apply(options.job, out.tuning.global_batch_sequences);
    one.strategies = {s.strategy};
    one.baseline = s.strategy;
    WEFT_ASSIGN_OR_RETURN(CompareRun run, RunComparison(one));
    if (merged.model.empty()) {
      merged.model = run.comparison.model;
      merged.cluster = run.comparison.cluster;
      merged.num_gpus = run.comparison.num_gpus;
      merged.data_profile = run.comparison.data_profile;
      merged.num_iterations = run.comparison.num_iterations;
      merged.planning_budget = run.comparison.planning_budget;
      out.run.data_warning = run.data_warning;
      out.run.setup_notes = run.setup_notes;
    }
    for (auto& r : run.comparison.strategies) {
      r.description = fmt::format("[tuned {}] {}", s.best.Describe(), r.description);
      merged.strategies.push_back(std::move(r));
    }
    for (auto& p : run.static_plans) {
      out.run.static_plans.push_back(fmt::format("[tuned {}] {}", s.best.Describe(), p));
    }
    for (auto& t : run.timelines) out.run.timelines.push_back(std::move(t));
    for (auto& t : run.peak_memory_timelines) {
      out.run.peak_memory_timelines.push_back(std::move(t));
    }
  }
  if (merged.model.empty()) {
    merged.model = out.tuning.model;
    merged.cluster = out.tuning.cluster;
    merged.num_gpus = out.tuning.gpus;
    merged.data_profile = out.tuning.data;
    merged.num_iterations = options.iterations;
    merged.planning_budget = planning::DescribeBudget(options.budget);
  }
  if (merged.FindStrategy(options.baseline) >= 0) merged.baseline = options.baseline;
  return out;
}

StatusOr<TuneResult> Tune(const TuneOptions& options) {
  WEFT_RETURN_IF_ERROR(options.Validate());
  if (!options.job.placement.empty()) {
    return InvalidArgumentError(
        "--placement: weft tune searches the strategies' configurations; a placement file is "
        "one fixed configuration (run it with weft simulate --placement)");
  }
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<JobSetup> base, planning::MakeJobSetup(options.job));
  if (base->job.profile_batches.empty()) {
    return InvalidArgumentError("weft tune needs profile batches (JobOptions::profile_batches)");
  }
  std::vector<std::string> names =
      options.strategies.empty() ? StrategyNames() : options.strategies;
  for (const std::string& n : names) {
    WEFT_RETURN_IF_ERROR(MakeStrategy(n).status());  // unknown names before any work
  }
  TuneResult result;
  result.model = base->model_name;
  result.cluster = base->cluster_name;
  result.data = base->data_name;
  result.gpus = base->job.cluster.TotalGpus();
  result.gpus_per_node = base->job.cluster.gpus_per_node;
  result.global_batch_sequences = base->sequences_per_batch;
  result.context_tokens = base->context_tokens;
  result.profile_batches = static_cast<int>(base->job.profile_batches.size());
  std::vector<spec::Batch> check_batches;
  if (options.memory_check_batches > 0) {
    WEFT_ASSIGN_OR_RETURN(check_batches,
                          planning::MakeProfileBatches(*base, result.profile_batches,
                                                       options.memory_check_batches));
  }
  result.memory_check_batches = static_cast<int>(check_batches.size());
  result.max_simulations = options.max_simulations;
  result.exhaustive = options.exhaustive;
  for (const std::string& name : names) {
    if (options.strategies.empty()) {
      WEFT_ASSIGN_OR_RETURN(auto s, MakeStrategy(name));
      if (!s->Applies(base->job).ok()) continue;  // as compare leaves them out
    }
    StrategyTuning t = TuneOne(name, options, *base, check_batches);
    if (options.progress) {
      options.progress(fmt::format("tune {}: {} ({} planned, {:.1f} s)", name,
                                   t.error.empty() ? t.best.Describe() : "error", t.planned,
                                   t.wall_s));
    }
    result.strategies.push_back(std::move(t));
  }
  std::stable_sort(result.strategies.begin(), result.strategies.end(),
                   [](const StrategyTuning& a, const StrategyTuning& b) {
                     const bool a_ok = a.error.empty() && !a.best.oom;
                     const bool b_ok = b.error.empty() && !b.best.oom;
                     if (a_ok != b_ok) return a_ok;
                     return a.best.time_s < b.best.time_s;
                   });
  return result;
}

}  // namespace weft::strategy
