#include "weft/strategy/dflop/correction_study.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <random>

#include "weft/planning/graph_builder.h"
#include "weft/planning/job_setup.h"
#include "weft/strategy/dflop/dflop.h"

namespace weft::strategy::dflop {
namespace {

// Items of `batch` as sample → item (sequences when packed, else samples).
std::vector<int> ItemOfSample(const spec::Batch& batch) {
  std::vector<int> out(batch.samples.size(), -1);
  if (batch.sequences.empty()) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int>(i);
  } else {
    for (size_t i = 0; i < batch.sequences.size(); ++i) {
      for (int s : batch.sequences[i].sample_indices) out[s] = static_cast<int>(i);
    }
  }
  return out;
}

std::vector<int64_t> ItemLlmTokens(const planning::Job& job,
                                   const spec::Batch& batch,
                                   const Roles& roles) {
  const int n =
      static_cast<int>(batch.sequences.empty() ? batch.samples.size() : batch.sequences.size());
  std::vector<int64_t> out(n, 0);
  for (int i = 0; i < n; ++i) {
    const int index[1] = {i};
    auto w = data::DeriveModuleWorkload(job.model, roles.llm, batch, index, job.workload);
    if (w.ok()) out[i] = w->TotalTokens();
  }
  return out;
}

}  // namespace

StatusOr<InjectedDeviations> ChooseAnomalousShapes(const planning::Job& job,
                                                   const std::vector<spec::Batch>& batches,
                                                   double rate,
                                                   uint64_t seed) {
  if (!std::isfinite(rate) || rate <= 0 || rate >= 1) {
    return InvalidArgumentError(fmt::format("anomaly rate = {}; must be in (0, 1)", rate));
  }
  WEFT_ASSIGN_OR_RETURN(Roles roles, FindRoles(job.model));
  std::map<int, int64_t> count;
  int64_t total = 0;
  for (const spec::Batch& b : batches) {
    for (int64_t t : ItemLlmTokens(job, b, roles)) {
      ++count[LlmShapeBucket(t)];
      ++total;
    }
  }
  if (total == 0) return FailedPreconditionError("anomalous shapes: the batches have no items");
  std::vector<int> rare;
  for (const auto& [bucket, c] : count) {
    if (static_cast<double>(c) <= rate * static_cast<double>(total)) rare.push_back(bucket);
  }
  if (rare.empty()) {  // every shape is common: the rarest one
    rare.push_back(std::min_element(count.begin(), count.end(), [](const auto& a, const auto& b) {
                     return a.second < b.second;
                   })->first);
  }
  std::mt19937_64 rng(seed * 7919ULL + 17);
  std::shuffle(rare.begin(), rare.end(), rng);
  InjectedDeviations out;
  out.seed = seed;
  int64_t taken = 0;
  for (int bucket : rare) {
    if (!out.anomalous_buckets.empty() &&
        static_cast<double>(taken + count[bucket]) > rate * static_cast<double>(total)) {
      continue;
    }
    out.anomalous_buckets.push_back(bucket);
    taken += count[bucket];
  }
  std::sort(out.anomalous_buckets.begin(), out.anomalous_buckets.end());
  out.item_share = static_cast<double>(taken) / static_cast<double>(total);
  return out;
}

double MaxStageSeconds(const planning::IterationPlan& planned) {
  double m = 0;
  for (const auto& r : planned.replicas) {
    for (graph::StageId id = 0; id < r.graph.num_stages(); ++id) {
      m = std::max(m, r.graph.stage(id).latency_s);
    }
  }
  return m;
}

StatusOr<MeasuredRun> MeasureInjected(const planning::Planner& planner,
                                      const planning::PlanState& state,
                                      const planning::PlannedIteration& planned,
                                      const InjectedDeviations& injected,
                                      int64_t iteration) {
  const planning::Job& job = planner.job();
  if (planned.plan.batch == nullptr) {
    return InvalidArgumentError("MeasureInjected: the planned iteration carries no batch");
  }
  const spec::Batch& batch = *planned.plan.batch;
  WEFT_ASSIGN_OR_RETURN(Roles roles, FindRoles(job.model));
  const std::vector<int> item_of_sample = ItemOfSample(batch);
  const std::vector<int64_t> tokens = ItemLlmTokens(job, batch, roles);
  std::vector<char> anomalous(tokens.size(), 0);
  for (size_t i = 0; i < tokens.size(); ++i) {
    anomalous[i] = std::binary_search(injected.anomalous_buckets.begin(),
                                      injected.anomalous_buckets.end(), LlmShapeBucket(tokens[i]));
  }
  std::mt19937_64 rng(injected.seed * 1000003ULL + static_cast<uint64_t>(iteration) * 7 + 3);
  std::normal_distribution<double> normal(0.0, 1.0);
  MeasuredRun out;
  planning::IterationPlan measured_plan = planned.plan;
  const cost::CostCorrection empty;
  const cost::CostCorrection& factors = state.correction ? *state.correction : empty;
  for (int r = 0; r < static_cast<int>(measured_plan.replicas.size()); ++r) {
    planning::ReplicaPlan& replica = measured_plan.replicas[r];
    std::vector<graph::Stage> stages(replica.graph.stages().begin(), replica.graph.stages().end());
    for (graph::StageId id = 0; id < static_cast<graph::StageId>(stages.size()); ++id) {
      graph::Stage& st = stages[id];
      double factor = 1;
      if (st.latency_s > 0) {
        WEFT_ASSIGN_OR_RETURN(
            factor, PlannerCorrectionFactor(job, batch, replica.microbatches, factors, st));
      }
      double t = st.latency_s / factor;
      if (st.module == roles.llm && st.pass == spec::Pass::kForward) {
        std::vector<int> items;
        for (int32_t s : replica.graph.sample_set(st.samples)) {
          if (s >= 0 && s < static_cast<int32_t>(item_of_sample.size())) {
            items.push_back(item_of_sample[s]);
          }
        }
        std::sort(items.begin(), items.end());
        items.erase(std::unique(items.begin(), items.end()), items.end());
        for (int i : items) {
          if (i >= 0 && anomalous[i]) t += injected.latency_s;
        }
      }
      const double z = normal(rng);
      if (t > 0 && injected.noise_sigma > 0) t *= std::exp(injected.noise_sigma * z);
      st.latency_s = t;
      if (t > 0) out.stages.push_back({.replica = r, .stage = id, .measured_s = t});
    }
    WEFT_ASSIGN_OR_RETURN(replica.graph, replica.graph.WithStages(std::move(stages)));
  }
  WEFT_ASSIGN_OR_RETURN(planning::IterationEvaluation eval, planner.Evaluate(measured_plan));
  out.iteration_time_s = eval.iteration_time_s;
  return out;
}

Status CorrectionStudyOptions::Validate() const {
  WEFT_RETURN_IF_ERROR(correction.Validate());
  if (iterations < 1 || iterations > 1000) {
    return InvalidArgumentError(fmt::format("iterations = {}; must be in [1, 1000]", iterations));
  }
  if (rates.empty() || latency_fractions.empty() || seeds.empty()) {
    return InvalidArgumentError("rates, latency fractions and seeds must be non-empty");
  }
  for (double r : rates) {
    if (!std::isfinite(r) || r <= 0 || r >= 1) {
      return InvalidArgumentError(fmt::format("rate = {}; must be in (0, 1)", r));
    }
  }
  for (double f : latency_fractions) {
    if (!std::isfinite(f) || f < 0 || f > 10) {
      return InvalidArgumentError(fmt::format("latency fraction = {}; must be in [0, 10]", f));
    }
  }
  if (!std::isfinite(noise_sigma) || noise_sigma < 0 || noise_sigma > 1) {
    return InvalidArgumentError(fmt::format("noise sigma = {}; must be in [0, 1]", noise_sigma));
  }
  return OkStatus();
}

StatusOr<CorrectionStudy> RunCorrectionStudy(const CorrectionStudyOptions& options,
                                             const StudyProgress& progress) {
  WEFT_RETURN_IF_ERROR(options.Validate());
  CorrectionStudy study;
  std::map<std::pair<double, double>, CorrectionCell> cells;
  std::vector<double> observe_s;
  for (uint64_t seed : options.seeds) {
    planning::JobOptions jo;
    jo.model = options.model;
    jo.cluster = options.cluster;
    jo.gpus = options.gpus;
    jo.data = options.data;
    jo.seed = seed;
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<planning::JobSetup> made, planning::MakeJobSetup(jo));
    std::shared_ptr<const planning::JobSetup> setup(std::move(made));
    CorrectionOptions off = options.correction;
    off.enabled = false;
    CorrectionOptions always = options.correction;
    always.toggle = false;
    auto first = MakeDflopStrategy(Variant::kDflop, off);
    WEFT_ASSIGN_OR_RETURN(planning::StaticPlan static_plan, first->Prepare(setup->job));
    WEFT_ASSIGN_OR_RETURN(auto p_off,
                          planning::Planner::Create(setup, std::move(first), static_plan));
    WEFT_ASSIGN_OR_RETURN(
        auto p_on,
        planning::Planner::Create(setup, MakeDflopStrategy(Variant::kDflop, always), static_plan));
    WEFT_ASSIGN_OR_RETURN(
        auto p_toggle,
        planning::Planner::Create(setup, MakeDflopStrategy(Variant::kDflop, options.correction),
                                  static_plan));
    WEFT_ASSIGN_OR_RETURN(std::vector<spec::Batch> batches, p_off->Batches(0, options.iterations));
    // The latency scale: the longest stage of the first iteration as planned without feedback.
    WEFT_ASSIGN_OR_RETURN(planning::PlannedIteration first_plan, p_off->Plan(batches.front()));
    const double max_stage_s = MaxStageSeconds(first_plan.plan);
    for (double rate : options.rates) {
      WEFT_ASSIGN_OR_RETURN(InjectedDeviations injected,
                            ChooseAnomalousShapes(setup->job, batches, rate, seed));
      injected.noise_sigma = options.noise_sigma;
      for (double fraction : options.latency_fractions) {
        injected.latency_s = fraction * max_stage_s;
        double without = 0, always_s = 0, always_raw = 0, toggled = 0;
        // The arm without the scheduler's correction gets the same measured feedback (the
        // planner's stage-level cost correction, Planner::Observe): only the scheduler's
        // per-shape penalties and their toggle differ between the arms.
        planning::PlanState off_state;
        for (int it = 0; it < options.iterations; ++it) {
          WEFT_ASSIGN_OR_RETURN(planning::PlannedStep step, p_off->Plan(batches[it], off_state));
          WEFT_ASSIGN_OR_RETURN(MeasuredRun m,
                                MeasureInjected(*p_off, off_state, step.planned, injected, it));
          without += m.iteration_time_s;
          WEFT_ASSIGN_OR_RETURN(off_state, p_off->Observe(step.next, step.planned, m.stages));
        }
        const CorrectionState* last_toggle = nullptr;
        planning::PlanState toggle_final;
        for (int arm = 0; arm < 2; ++arm) {
          const planning::Planner& planner = arm == 0 ? *p_on : *p_toggle;
          planning::PlanState state;
          for (int it = 0; it < options.iterations; ++it) {
            const CorrectionState* c = CorrectionOf(state);
            const bool tracking = c == nullptr || c->Tracking();
            WEFT_ASSIGN_OR_RETURN(planning::PlannedStep step, planner.Plan(batches[it], state));
            WEFT_ASSIGN_OR_RETURN(MeasuredRun m,
                                  MeasureInjected(planner, state, step.planned, injected, it));
            const double cost = tracking ? options.correction.tracking_cost_fraction : 0.0;
            if (arm == 0) {
              always_raw += m.iteration_time_s;
              always_s += m.iteration_time_s * (1 + cost);
            } else {
              toggled += m.iteration_time_s * (1 + cost);
            }
            const auto t0 = std::chrono::steady_clock::now();
            WEFT_ASSIGN_OR_RETURN(state, planner.Observe(step.next, step.planned, m.stages));
            observe_s.push_back(
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
          }
          if (arm == 1) toggle_final = state;
        }
        last_toggle = CorrectionOf(toggle_final);
        CorrectionCell& cell = cells[{rate, fraction}];
        cell.rate = rate;
        cell.latency_fraction = fraction;
        const double k = static_cast<double>(options.iterations);
        cell.item_share += injected.item_share;
        cell.without_s += without / k;
        cell.always_on_s += always_s / k;
        cell.toggle_s += toggled / k;
        cell.gain += without / always_raw - 1;
        cell.net_always_on += without / always_s - 1;
        cell.net_toggle += without / toggled - 1;
        cell.seeds_on += last_toggle != nullptr && last_toggle->Tracking() ? 1 : 0;
        cell.mean_benefit += last_toggle != nullptr ? last_toggle->last_window_benefit : 0.0;
        ++cell.seeds;
        if (progress) {
          progress(
              fmt::format("seed {} rate {:.0f}% latency {:.0f}%: without {:.4g} s, toggle "
                          "{:.4g} s, {}",
                          seed, 100 * rate, 100 * fraction, without / k, toggled / k,
                          last_toggle ? last_toggle->Describe(options.correction) : "no state"));
        }
      }
    }
  }
  for (auto& [key, c] : cells) {
    const double s = c.seeds;
    c.item_share /= s;
    c.without_s /= s;
    c.always_on_s /= s;
    c.toggle_s /= s;
    c.gain /= s;
    c.net_always_on /= s;
    c.net_toggle /= s;
    c.mean_benefit /= s;
    study.cells.push_back(c);
  }
  if (!observe_s.empty()) {
    std::sort(observe_s.begin(), observe_s.end());
    study.observe_wall_s_per_iteration = observe_s[observe_s.size() / 2];
  }
  return study;
}

std::string CorrectionStudy::ToMarkdown(const CorrectionStudyOptions& options) const {
  std::string out = fmt::format(
      "{} on {} × {} GPUs, data {}, {} iterations per run, seeds {}, noise σ {:.0f}%, tracking "
      "cost C {:.1f}% of an iteration (modelled), decision window I = {}, threshold {:.0f}%\n\n",
      options.model, options.cluster, options.gpus, options.data, options.iterations,
      fmt::join(options.seeds, ","), 100 * options.noise_sigma,
      100 * options.correction.tracking_cost_fraction, options.correction.window_iterations,
      100 * options.correction.threshold);
  out +=
      "| anomaly rate | items hit | latency (of max stage) | without s/it | gain (no cost) | net, "
      "always on | net, with toggle | mean B (last window) | toggle on |\n"
      "|---|---|---|---|---|---|---|---|---|\n";
  for (const CorrectionCell& c : cells) {
    out += fmt::format(
        "| {:.0f}% | {:.1f}% | {:.0f}% | {:.4g} | {:+.2f}% | {:+.2f}% | {:+.2f}% | {:.2f}% | {} of "
        "{} |\n",
        100 * c.rate, 100 * c.item_share, 100 * c.latency_fraction, c.without_s, 100 * c.gain,
        100 * c.net_always_on, 100 * c.net_toggle, 100 * c.mean_benefit, c.seeds_on, c.seeds);
  }
  return out;
}

}  // namespace weft::strategy::dflop
