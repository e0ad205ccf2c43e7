#include "weft/strategy/flowtrain/allocator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "weft/algo/milp.h"
#include "weft/data/workload.h"
#include "weft/sim/simulator.h"
#include "weft/strategy/dflop/optimizer.h"

namespace weft::strategy::flowtrain {

namespace {

double Full(const cost::LayerTime& t) { return t.forward_s + t.backward_s; }

// The shape of one microbatch of `samples` samples at the per-sample means.
cost::TokenShape MeanShape(double samples, double tokens, double sum_squared, double instances) {
  cost::TokenShape s;
  s.tokens = static_cast<int64_t>(std::llround(samples * tokens));
  s.sum_squared_tokens = std::clamp(samples * sum_squared, static_cast<double>(s.tokens),
                                    static_cast<double>(s.tokens) * static_cast<double>(s.tokens));
  s.instances = std::max(1, static_cast<int>(std::lround(samples * instances)));
  return s;
}

// Lexicographic order of allocations: higher T, then lower imbalance, then fewer GPUs.
struct Score {
  double throughput = 0;
  double imbalance = 0;
  int gpus = 0;
};
bool Better(const Score& a, const Score& b) {
  const double tol = 1e-9 * std::max(std::abs(a.throughput), std::abs(b.throughput));
  if (std::abs(a.throughput - b.throughput) > tol) return a.throughput > b.throughput;
  const double itol = 1e-9 * std::max({std::abs(a.imbalance), std::abs(b.imbalance), 1e-12});
  if (std::abs(a.imbalance - b.imbalance) > itol) return a.imbalance < b.imbalance;
  return a.gpus < b.gpus;
}

Score ScoreOf(const std::vector<const ModuleCandidate*>& pick) {
  Score s;
  s.throughput = std::numeric_limits<double>::infinity();
  const double consumption = pick.back()->rate_samples_per_s;
  for (size_t i = 0; i < pick.size(); ++i) {
    s.throughput = std::min(s.throughput, pick[i]->rate_samples_per_s);
    s.gpus += pick[i]->layout.Gpus();
    // A producer without work in the workload (rate +inf) never limits nor imbalances the flow.
    if (i + 1 < pick.size() && std::isfinite(pick[i]->rate_samples_per_s)) {
      s.imbalance += std::abs(pick[i]->rate_samples_per_s - consumption);
    }
  }
  return s;
}

AllocationResult ResultOf(const std::vector<const ModuleCandidate*>& pick, std::string method) {
  AllocationResult r;
  for (const auto* c : pick) r.modules.push_back(*c);
  const Score s = ScoreOf(pick);
  r.throughput_samples_per_s = s.throughput;
  r.imbalance_samples_per_s = s.imbalance;
  r.gpus = s.gpus;
  r.method = std::move(method);
  return r;
}

int Budget(const planning::Job& job, const AllocatorOptions& options) {
  return options.max_gpus > 0 ? options.max_gpus : job.cluster.TotalGpus();
}

StatusOr<std::vector<std::vector<ModuleCandidate>>> Prepare(
    const planning::Job& job,
    const Roles& roles,
    const cost::ThroughputTable& tables,
    const AllocatorOptions& options,
    bool disttrain,
    std::map<std::string, int64_t>& rejected) {
  WEFT_RETURN_IF_ERROR(options.Validate());
  WEFT_ASSIGN_OR_RETURN(FlowWorkload w, SummarizeWorkload(job, roles, tables, options));
  return ModuleCandidates(job, roles, tables, w, options, disttrain, rejected);
}

}  // namespace

Status AllocatorOptions::Validate() const {
  if (capacity_tokens < 0) {
    return InvalidArgumentError(
        fmt::format("allocator.capacity_tokens = {}; must be >= 0", capacity_tokens));
  }
  if (max_gpus < 0) {
    return InvalidArgumentError(fmt::format("allocator.max_gpus = {}; must be >= 0", max_gpus));
  }
  return OkStatus();
}

std::vector<ModuleLayout> AllocationResult::Layouts() const {
  std::vector<ModuleLayout> out;
  for (const auto& m : modules) out.push_back(m.layout);
  return out;
}

std::string AllocationResult::Describe(const spec::ModelSpec& model) const {
  auto split = [&](const std::vector<ModuleCandidate>& mods) {
    std::string s;
    for (size_t i = 0; i < mods.size(); ++i) {
      const auto& l = mods[i].layout;
      s += fmt::format("{}{} tp{}{} dp{} ({} {:.4g} samples/s)", i ? " | " : "",
                       model.modules[l.module].name, l.tp,
                       i + 1 == mods.size() ? fmt::format(" pp{}", l.pp) : "", l.dp,
                       i + 1 == mods.size() ? "C" : "P", mods[i].rate_samples_per_s);
    }
    return s;
  };
  std::string out =
      fmt::format("{} allocation {}: T {:.4g} samples/s, imbalance {:.3g} on {} GPUs", method,
                  split(modules), throughput_samples_per_s, imbalance_samples_per_s, gpus);
  if (has_runner_up) {
    out += fmt::format("; runner-up {} (T {:.4g})", split(runner_up),
                       runner_up_throughput_samples_per_s);
  }
  out += fmt::format("; {} candidates", candidates);
  if (!rejected.empty()) {
    out += ", rejected:";
    for (const auto& [rule, n] : rejected) out += fmt::format(" {} {};", rule, n);
    out.pop_back();
  }
  return out;
}

StatusOr<FlowWorkload> SummarizeWorkload(const planning::Job& job,
                                         const Roles& roles,
                                         const cost::ThroughputTable& tables,
                                         const AllocatorOptions& options) {
  if (job.profile_batches.empty()) {
    return FailedPreconditionError("flowtrain allocator: the job has no profile batches");
  }
  FlowWorkload w;
  w.capacity_tokens = options.capacity_tokens > 0 ? options.capacity_tokens
                      : job.context_tokens > 0    ? job.context_tokens
                                                  : 8192;
  w.units_per_sample.assign(roles.producers.size(), 0.0);
  w.producer_tokens.assign(roles.producers.size(), 0.0);
  w.producer_sum_squared.assign(roles.producers.size(), 0.0);
  w.producer_instances.assign(roles.producers.size(), 0.0);
  w.glue_tokens.assign(roles.glue.size(), 0.0);
  w.glue_sum_squared.assign(roles.glue.size(), 0.0);
  w.glue_instances.assign(roles.glue.size(), 0.0);
  double samples = 0, tokens = 0;
  for (const spec::Batch& batch : job.profile_batches) {
    spec::Batch unpacked = batch;
    unpacked.sequences.clear();  // one item per sample
    std::vector<int> all(unpacked.samples.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
    auto add_shape = [&](int module, double& t, double& q, double& n) -> Status {
      WEFT_ASSIGN_OR_RETURN(data::ModuleWorkload mw,
                            data::DeriveModuleWorkload(job.model, module, unpacked, all,
                                                       job.workload));
      t += static_cast<double>(mw.TotalTokens());
      q += mw.SumSquaredTokens();
      n += mw.NumInstances();
      return OkStatus();
    };
    for (size_t e = 0; e < roles.producers.size(); ++e) {
      WEFT_RETURN_IF_ERROR(add_shape(roles.producers[e], w.producer_tokens[e],
                                     w.producer_sum_squared[e], w.producer_instances[e]));
    }
    for (size_t g = 0; g < roles.glue.size(); ++g) {
      WEFT_RETURN_IF_ERROR(
          add_shape(roles.glue[g], w.glue_tokens[g], w.glue_sum_squared[g], w.glue_instances[g]));
    }
    for (size_t e = 0; e < roles.producers.size(); ++e) {
      const dflop::Roles r{.encoder = roles.producers[e], .projector = -1, .llm = roles.backbone};
      WEFT_ASSIGN_OR_RETURN(auto items,
                            dflop::ItemShapes(job.model, r, tables, unpacked, job.workload));
      for (const auto& item : items) {
        w.units_per_sample[e] += item.encoder_units;
        if (e == 0) {
          const int64_t t = std::clamp<int64_t>(item.llm_tokens, 1, w.capacity_tokens);
          w.sample_tokens.push_back(t);
          tokens += static_cast<double>(t);
        }
      }
    }
    samples += static_cast<double>(batch.samples.size());
  }
  if (samples <= 0) return FailedPreconditionError("flowtrain allocator: empty profile batches");
  for (auto* v : {&w.units_per_sample, &w.producer_tokens, &w.producer_sum_squared,
                  &w.producer_instances, &w.glue_tokens, &w.glue_sum_squared, &w.glue_instances}) {
    for (double& x : *v) x /= samples;
  }
  w.samples_per_batch = samples / static_cast<double>(job.profile_batches.size());
  w.llm_tokens_per_sample = tokens / samples;
  return w;
}

StatusOr<std::vector<std::vector<ModuleCandidate>>> ModuleCandidates(
    const planning::Job& job,
    const Roles& roles,
    const cost::ThroughputTable& tables,
    const FlowWorkload& w,
    const AllocatorOptions& options,
    bool disttrain_stage_rate,
    std::map<std::string, int64_t>& rejected) {
  const int budget = Budget(job, options);
  const int node = std::max(1, job.cluster.gpus_per_node);
  const double usable = static_cast<double>(job.cluster.gpu.UsableMemoryBytes());
  const auto& copt = job.cost_model->options();
  const double capacity = static_cast<double>(w.capacity_tokens);
  // Samples per packed microbatch and microbatches per global batch (fill 1: the packer's
  // padding is ~1% on the workloads measured, docs/strategies_flowtrain.md).
  const double per_mb = std::max(1e-9, capacity / w.llm_tokens_per_sample);
  const int microbatches =
      std::max(1, static_cast<int>(std::ceil(w.samples_per_batch / per_mb - 1e-9)));
  std::vector<std::vector<ModuleCandidate>> out;
  auto keep_fastest_per_gpus = [](std::vector<ModuleCandidate> all) {
    std::map<int, ModuleCandidate> best;
    for (auto& c : all) {
      auto it = best.find(c.layout.Gpus());
      if (it == best.end() || c.rate_samples_per_s > it->second.rate_samples_per_s) {
        best[c.layout.Gpus()] = c;
      }
    }
    std::vector<ModuleCandidate> kept;
    for (auto& [g, c] : best) kept.push_back(c);
    return kept;
  };
  auto tps_of = [&](int module, const std::string& who) {
    std::vector<int> tps;
    for (int tp : tables.TpValues(module)) {
      if (tp > node) {
        ++rejected[who + " tp across nodes"];
        continue;
      }
      tps.push_back(tp);
    }
    return tps;
  };
  for (size_t e = 0; e < roles.producers.size(); ++e) {
    const int m = roles.producers[e];
    const auto& module = job.model.modules[m];
    const std::string who = module.name;
    std::vector<ModuleCandidate> all;
    const double b = std::max(1e-9, w.units_per_sample[e] * per_mb);  // effective batch
    const cost::TokenShape shape = MeanShape(per_mb, w.producer_tokens[e],
                                             w.producer_sum_squared[e], w.producer_instances[e]);
    for (int tp : tps_of(m, who)) {
      WEFT_ASSIGN_OR_RETURN(cost::LayerMemory mem, tables.Memory(m, tp));
      WEFT_ASSIGN_OR_RETURN(cost::ChunkCost chunk,
                            job.cost_model->Chunk(job.model, m, 0, module.num_layers, shape,
                                                  spec::ModuleParallel{.tp = tp}));
      const double forward_s = chunk.forward_s;
      const double memory = mem.parameters_per_layer * module.num_layers * 2.0 +
                            2.0 * mem.activation_bytes_per_unit * b;
      if (memory > usable) {
        ++rejected[who + " memory"];
        continue;
      }
      for (int dp = 1; tp * dp <= budget; ++dp) {
        // No work in the profile batches (e.g. no audio in the data): an unbounded rate, so its
        // smallest layout is kept and it never limits the flow.
        all.push_back({.layout = {.module = m, .tp = tp, .pp = 1, .dp = dp},
                       .rate_samples_per_s = forward_s > 0
                                                 ? dp * per_mb / forward_s
                                                 : std::numeric_limits<double>::infinity(),
                       .memory_bytes = memory});
        if (!(forward_s > 0)) break;
      }
    }
    out.push_back(keep_fastest_per_gpus(std::move(all)));
  }
  // The backbone.
  const int m = roles.backbone;
  const auto& module = job.model.modules[m];
  const std::string who = module.name;
  std::vector<ModuleCandidate> all;
  double glue_params = 0;
  for (int g : roles.glue)
    glue_params += static_cast<double>(job.model.modules[g].ParameterCount());
  for (int tp : tps_of(m, who)) {
    // The glue (projector) runs on the first stage, forward and backward.
    double glue_s = 0;
    for (size_t g = 0; g < roles.glue.size(); ++g) {
      const int gm = roles.glue[g];
      const cost::TokenShape shape =
          MeanShape(per_mb, w.glue_tokens[g], w.glue_sum_squared[g], w.glue_instances[g]);
      if (shape.tokens == 0) continue;
      WEFT_ASSIGN_OR_RETURN(cost::ChunkCost chunk,
                            job.cost_model->Chunk(job.model, gm, 0,
                                                  job.model.modules[gm].num_layers, shape,
                                                  spec::ModuleParallel{.tp = tp}));
      glue_s += chunk.forward_s + chunk.BackwardS();
    }
    double attention_per_sample = 0;
    for (int64_t t : w.sample_tokens) {
      WEFT_ASSIGN_OR_RETURN(cost::LayerTime a,
                            tables.LlmAttentionTime(m, tp, static_cast<double>(t)));
      attention_per_sample += Full(a);
    }
    attention_per_sample /= std::max<size_t>(1, w.sample_tokens.size());
    WEFT_ASSIGN_OR_RETURN(cost::LayerTime lin, tables.LlmLinearTime(m, tp, capacity));
    WEFT_ASSIGN_OR_RETURN(cost::LayerMemory mem, tables.Memory(m, tp));
    const double layer_s = Full(lin) + per_mb * attention_per_sample;
    const double head_s = Full(tables.LlmHeadTime(m, tp, capacity));
    const double embedding_params =
        static_cast<double>(module.vocab_size) * module.hidden_size / tp;
    for (int pp = 1; pp * tp <= budget; ++pp) {
      if (pp > module.num_layers) {
        ++rejected[who + " pp > layers"];
        break;
      }
      const int first = (module.num_layers + pp - 1) / pp;
      const int last = module.num_layers / pp;
      const double stage_s = pp == 1 ? module.num_layers * layer_s + head_s + glue_s
                                     : std::max(first * layer_s + glue_s, last * layer_s + head_s);
      for (int dp = 1; tp * pp * dp <= budget; ++dp) {
        if (dp > microbatches) {
          ++rejected[who + " dp > microbatches"];
          break;
        }
        const int per_replica = (microbatches + dp - 1) / dp;
        const double bytes_per_param = 2.0 + copt.gradient_bytes_per_param +
                                       copt.optimizer_bytes_per_param / (copt.zero1 ? dp : 1);
        const double memory =
            (mem.parameters_per_layer * first + embedding_params + glue_params / tp) *
                bytes_per_param +
            mem.activation_bytes_per_unit * capacity * first * std::min(pp, per_replica);
        if (memory > usable) {
          ++rejected[who + " memory"];
          continue;
        }
        // Once per batch: the first stage's gradient all-reduce and optimizer step.
        const double stage_params =
            mem.parameters_per_layer * first + embedding_params + glue_params / tp;
        graph::DeviceGroup group{.num_gpus = tp, .dp = dp};
        group.grad_sync_bytes = static_cast<int64_t>(stage_params * copt.gradient_bytes_per_param);
        group.optimizer_bytes = static_cast<int64_t>(stage_params * bytes_per_param);
        const double tail_s =
            sim::GradSyncTimeS(group, job.cluster) + sim::OptimizerStepTimeS(group, job.cluster);
        const double rate =
            disttrain_stage_rate
                ? dp * per_mb / stage_s
                : w.samples_per_batch / ((per_replica + pp - 1) * stage_s + tail_s);
        all.push_back({.layout = {.module = m, .tp = tp, .pp = pp, .dp = dp},
                       .rate_samples_per_s = rate,
                       .memory_bytes = memory});
      }
    }
  }
  out.push_back(keep_fastest_per_gpus(std::move(all)));
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].empty()) {
      const int mi = i + 1 == out.size() ? roles.backbone : roles.producers[i];
      return FailedPreconditionError(
          fmt::format("flowtrain allocator: no layout of '{}' fits ({} GPUs of {:.1f} GiB usable)",
                      job.model.modules[mi].name, budget, usable / double(int64_t{1} << 30)));
    }
  }
  return out;
}

StatusOr<AllocationResult> AllocateExhaustive(const planning::Job& job,
                                              const Roles& roles,
                                              const cost::ThroughputTable& tables,
                                              const AllocatorOptions& options) {
  std::map<std::string, int64_t> rejected;
  WEFT_ASSIGN_OR_RETURN(auto cands, Prepare(job, roles, tables, options, false, rejected));
  const int budget = Budget(job, options);
  std::vector<const ModuleCandidate*> pick(cands.size()), best, second;
  Score best_score{-1, 0, 0}, second_score{-1, 0, 0};
  std::function<void(size_t, int)> rec = [&](size_t i, int used) {
    if (i == cands.size()) {
      const Score s = ScoreOf(pick);
      if (best.empty() || Better(s, best_score)) {
        second = best, second_score = best_score;
        best = pick, best_score = s;
      } else if (second.empty() || Better(s, second_score)) {
        second = pick, second_score = s;
      }
      return;
    }
    for (const auto& c : cands[i]) {
      if (used + c.layout.Gpus() > budget) break;  // sorted by GPUs
      pick[i] = &c;
      rec(i + 1, used + c.layout.Gpus());
    }
  };
  rec(0, 0);
  if (best.empty()) {
    return FailedPreconditionError(
        fmt::format("flowtrain allocator: no allocation fits {} GPUs", budget));
  }
  AllocationResult r = ResultOf(best, "exhaustive");
  if (!second.empty()) {
    r.has_runner_up = true;
    for (const auto* c : second) r.runner_up.push_back(*c);
    r.runner_up_throughput_samples_per_s = second_score.throughput;
  }
  r.rejected = std::move(rejected);
  for (const auto& c : cands) r.candidates += static_cast<int64_t>(c.size());
  return r;
}

namespace {

// Max T (stage 1), then min Σ|P_e − C| at that T (stage 2), over one binary per candidate;
// `exclude` (a pick of one candidate index per module) is cut off when given.
StatusOr<std::vector<int>> SolveFlowMilp(const std::vector<std::vector<ModuleCandidate>>& cands,
                                         int budget,
                                         const std::vector<int>* exclude,
                                         double* throughput) {
  auto build = [&](algo::MilpModel& model, std::vector<std::vector<int>>& x, int& t) {
    std::vector<algo::LinearTerm> gpus;
    x.assign(cands.size(), {});
    double max_rate = 0;
    for (const auto& mod : cands) {
      for (const auto& c : mod) {
        if (std::isfinite(c.rate_samples_per_s)) max_rate = std::max(max_rate, c.rate_samples_per_s);
      }
    }
    t = model.AddContinuous(0, max_rate, "T");
    for (size_t i = 0; i < cands.size(); ++i) {
      std::vector<algo::LinearTerm> one, rate;
      bool bounded = true;
      for (size_t c = 0; c < cands[i].size(); ++c) {
        const int v = model.AddBinary();
        x[i].push_back(v);
        one.push_back({v, 1.0});
        bounded = bounded && std::isfinite(cands[i][c].rate_samples_per_s);
        if (bounded) rate.push_back({v, cands[i][c].rate_samples_per_s});
        gpus.push_back({v, static_cast<double>(cands[i][c].layout.Gpus())});
      }
      model.AddEqual(one, 1.0);
      if (bounded) {  // an idle producer (+inf) never bounds T
        rate.push_back({t, -1.0});
        model.AddGreaterEqual(rate, 0.0);  // rate_i >= T
      }
    }
    model.AddLessEqual(gpus, budget);
    if (exclude) {
      std::vector<algo::LinearTerm> cut;
      for (size_t i = 0; i < cands.size(); ++i) cut.push_back({x[i][(*exclude)[i]], 1.0});
      model.AddLessEqual(cut, static_cast<double>(cands.size()) - 1);
    }
  };
  auto read = [&](const algo::MilpResult& res, const std::vector<std::vector<int>>& x) {
    std::vector<int> pick(cands.size(), 0);
    for (size_t i = 0; i < cands.size(); ++i) {
      for (size_t c = 0; c < x[i].size(); ++c) {
        if (res.values[x[i][c]] > 0.5) pick[i] = static_cast<int>(c);
      }
    }
    return pick;
  };
  algo::MilpModel m1;
  std::vector<std::vector<int>> x;
  int t = 0;
  build(m1, x, t);
  m1.SetObjective({{t, 1.0}}, algo::ObjectiveSense::kMaximize);
  // Warm start (CBC's lightweight branch and bound starts from it): every module's smallest
  // candidate, which fits whenever anything does (candidates are sorted by GPUs).
  std::vector<double> start(m1.num_variables(), 0.0);
  double start_t = std::numeric_limits<double>::infinity();
  int start_gpus = 0;
  for (size_t i = 0; i < cands.size(); ++i) {
    start[x[i][0]] = 1.0;
    start_t = std::min(start_t, cands[i][0].rate_samples_per_s);
    start_gpus += cands[i][0].layout.Gpus();
  }
  start[t] = start_t;
  algo::MilpOptions o1{.lightweight = true};
  if (start_gpus <= budget && !exclude) o1.warm_start = start;
  WEFT_ASSIGN_OR_RETURN(algo::MilpResult r1, algo::SolveMilp(m1, o1));
  if (!r1.has_solution()) return NotFoundError("no allocation fits: " + r1.BriefReport());
  const std::vector<int> first = read(r1, x);
  double t_star = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < cands.size(); ++i) {
    t_star = std::min(t_star, cands[i][first[i]].rate_samples_per_s);
  }
  *throughput = t_star;
  if (cands.size() < 2) return first;
  // Stage 2: every module at least T* (a hair below, for rounding), minimize Σ_e d_e.
  algo::MilpModel m2;
  build(m2, x, t);
  std::vector<algo::LinearTerm> objective;
  const size_t backbone = cands.size() - 1;
  std::vector<size_t> bounded_producers;
  for (size_t e = 0; e < backbone; ++e) {
    if (std::isfinite(cands[e].front().rate_samples_per_s)) bounded_producers.push_back(e);
  }
  for (size_t e : bounded_producers) {
    const int d = m2.AddContinuous(0, algo::kMilpInfinity);
    objective.push_back({d, 1.0});
    for (double sign : {1.0, -1.0}) {  // d >= sign · (P_e − C)
      std::vector<algo::LinearTerm> terms = {{d, 1.0}};
      for (size_t c = 0; c < cands[e].size(); ++c) {
        terms.push_back({x[e][c], -sign * cands[e][c].rate_samples_per_s});
      }
      for (size_t c = 0; c < cands[backbone].size(); ++c) {
        terms.push_back({x[backbone][c], sign * cands[backbone][c].rate_samples_per_s});
      }
      m2.AddGreaterEqual(terms, 0.0);
    }
  }
  m2.AddGreaterEqual({{t, 1.0}}, t_star * (1 - 1e-9));
  m2.SetObjective(objective, algo::ObjectiveSense::kMinimize);
  // Warm start: stage 1's solution with its imbalances.
  std::vector<double> start2(m2.num_variables(), 0.0);
  for (size_t i = 0; i < cands.size(); ++i) start2[x[i][first[i]]] = 1.0;
  start2[t] = t_star;
  {
    const double c = cands[backbone][first[backbone]].rate_samples_per_s;
    for (size_t k = 0; k < bounded_producers.size(); ++k) {
      const size_t e = bounded_producers[k];
      start2[objective[k].variable] = std::abs(cands[e][first[e]].rate_samples_per_s - c);
    }
  }
  WEFT_ASSIGN_OR_RETURN(algo::MilpResult r2,
                        algo::SolveMilp(m2, {.warm_start = start2, .lightweight = true}));
  if (!r2.has_solution()) return first;
  return read(r2, x);
}

// The candidates that can be in a lexicographic optimum with one producer (two modules): those
// that fit beside the other module's smallest; then, with t_max = the smaller of the two
// modules' fastest rates (T cannot exceed it), every candidate below t_max, and of those at or
// above it (in GPU order) only one slower than every earlier one — a faster candidate with more
// GPUs cannot raise T and only widens |P − C| and the GPUs. Several producers: fit only.
std::vector<std::vector<ModuleCandidate>> Useful(
    const std::vector<std::vector<ModuleCandidate>>& cands, int budget) {
  std::vector<int> smallest;
  int total_smallest = 0;
  for (const auto& mod : cands) {
    smallest.push_back(mod.empty() ? 0 : mod.front().layout.Gpus());  // sorted by GPUs
    total_smallest += smallest.back();
  }
  std::vector<std::vector<ModuleCandidate>> out(cands.size());
  double t_max = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < cands.size(); ++i) {
    double fastest = 0;
    for (const auto& c : cands[i]) {
      if (c.layout.Gpus() + total_smallest - smallest[i] > budget) continue;
      out[i].push_back(c);
      fastest = std::max(fastest, c.rate_samples_per_s);
    }
    t_max = std::min(t_max, fastest);
  }
  if (cands.size() != 2) return out;
  for (auto& mod : out) {
    std::vector<ModuleCandidate> kept;
    bool any_above = false;
    double slowest_above = 0;
    for (auto& c : mod) {
      if (c.rate_samples_per_s < t_max) {
        kept.push_back(c);
      } else if (!any_above || c.rate_samples_per_s < slowest_above) {
        any_above = true;
        slowest_above = c.rate_samples_per_s;
        kept.push_back(c);
      }
    }
    mod = std::move(kept);
  }
  return out;
}

StatusOr<AllocationResult> MilpOver(const std::vector<std::vector<ModuleCandidate>>& all,
                                    int budget,
                                    std::string method) {
  const std::vector<std::vector<ModuleCandidate>> cands = Useful(all, budget);
  for (const auto& mod : cands) {
    if (mod.empty()) return NotFoundError("no allocation fits");
  }
  double t = 0;
  WEFT_ASSIGN_OR_RETURN(std::vector<int> pick, SolveFlowMilp(cands, budget, nullptr, &t));
  std::vector<const ModuleCandidate*> chosen;
  for (size_t i = 0; i < cands.size(); ++i) chosen.push_back(&cands[i][pick[i]]);
  AllocationResult r = ResultOf(chosen, std::move(method));
  double t2 = 0;
  if (auto other = SolveFlowMilp(cands, budget, &pick, &t2); other.ok()) {
    r.has_runner_up = true;
    for (size_t i = 0; i < cands.size(); ++i) r.runner_up.push_back(cands[i][(*other)[i]]);
    r.runner_up_throughput_samples_per_s = t2;
  }
  for (const auto& c : all) r.candidates += static_cast<int64_t>(c.size());
  return r;
}

}  // namespace

StatusOr<AllocationResult> AllocateMilp(const planning::Job& job,
                                        const Roles& roles,
                                        const cost::ThroughputTable& tables,
                                        const AllocatorOptions& options) {
  std::map<std::string, int64_t> rejected;
  WEFT_ASSIGN_OR_RETURN(auto cands, Prepare(job, roles, tables, options, false, rejected));
  auto r = MilpOver(cands, Budget(job, options), "milp");
  if (!r.ok()) {
    return FailedPreconditionError(
        fmt::format("flowtrain allocator: no allocation fits {} GPUs ({})", Budget(job, options),
                    r.status().message()));
  }
  r->rejected = std::move(rejected);
  return r;
}

StatusOr<AllocationResult> AllocateDistTrain(const planning::Job& job,
                                             const Roles& roles,
                                             const cost::ThroughputTable& tables,
                                             const AllocatorOptions& options) {
  std::map<std::string, int64_t> rejected;
  WEFT_ASSIGN_OR_RETURN(auto cands, Prepare(job, roles, tables, options, true, rejected));
  auto r = MilpOver(cands, Budget(job, options), "disttrain (slowest stage)");
  if (!r.ok()) {
    return FailedPreconditionError(
        fmt::format("disttrain allocator: no allocation fits {} GPUs", Budget(job, options)));
  }
  r->rejected = std::move(rejected);
  return r;
}

StatusOr<AllocationResult> AllocateByParameterShare(const planning::Job& job,
                                                    const Roles& roles,
                                                    const cost::ThroughputTable& tables,
                                                    const AllocatorOptions& options) {
  std::map<std::string, int64_t> rejected;
  WEFT_ASSIGN_OR_RETURN(auto cands, Prepare(job, roles, tables, options, false, rejected));
  const int budget = Budget(job, options);
  std::vector<double> params;
  double total = 0;
  for (int p : roles.producers) {
    params.push_back(static_cast<double>(job.model.modules[p].ParameterCount()));
  }
  double backbone = static_cast<double>(job.model.modules[roles.backbone].ParameterCount());
  for (int g : roles.glue) backbone += static_cast<double>(job.model.modules[g].ParameterCount());
  params.push_back(backbone);
  for (double p : params) total += p;
  std::vector<const ModuleCandidate*> pick;
  for (size_t i = 0; i < cands.size(); ++i) {
    const int share = std::max(1, static_cast<int>(std::floor(budget * params[i] / total)));
    const ModuleCandidate* best = nullptr;
    for (const auto& c : cands[i]) {  // the fastest within the share (else the smallest)
      if (c.layout.Gpus() <= share && (!best || c.rate_samples_per_s > best->rate_samples_per_s)) {
        best = &c;
      }
    }
    pick.push_back(best ? best : &cands[i].front());
  }
  AllocationResult r = ResultOf(pick, "parameter share");
  if (r.gpus > budget) {
    return FailedPreconditionError(fmt::format(
        "flowtrain parameter-share split needs {} GPUs; the budget is {}", r.gpus, budget));
  }
  r.rejected = std::move(rejected);
  for (const auto& c : cands) r.candidates += static_cast<int64_t>(c.size());
  return r;
}

}  // namespace weft::strategy::flowtrain
