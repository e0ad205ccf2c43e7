#include "weft/strategy/dflop/correction.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include "weft/cost/correction.h"
#include "weft/planning/graph_builder.h"

namespace weft::strategy::dflop {

Status CorrectionOptions::Validate() const {
  auto fraction = [](double v) { return std::isfinite(v) && v >= 0 && v <= 1; };
  if (!fraction(threshold)) {
    return InvalidArgumentError(
        fmt::format("correction threshold = {}; must be in [0, 1]", threshold));
  }
  if (!fraction(clean_tolerance)) {
    return InvalidArgumentError(
        fmt::format("correction clean_tolerance = {}; must be in [0, 1]", clean_tolerance));
  }
  if (!std::isfinite(alpha) || alpha <= 0 || alpha > 1) {
    return InvalidArgumentError(fmt::format("correction alpha = {}; must be in (0, 1]", alpha));
  }
  if (window_iterations < 1 || window_iterations > 1'000'000) {
    return InvalidArgumentError(fmt::format(
        "correction window_iterations = {}; must be in [1, 1000000]", window_iterations));
  }
  if (!fraction(tracking_cost_fraction)) {
    return InvalidArgumentError(fmt::format(
        "correction tracking_cost_fraction = {}; must be in [0, 1]", tracking_cost_fraction));
  }
  return OkStatus();
}

int LlmShapeBucket(int64_t llm_tokens) {
  cost::TokenShape shape;
  shape.tokens = llm_tokens;
  return cost::ShapeBucketOf(shape).tokens;
}

double CorrectionState::AppliedPenalty(int64_t llm_tokens, double threshold) const {
  if (!Tracking()) return 0;
  auto it = penalties.find(LlmShapeBucket(llm_tokens));
  if (it == penalties.end() || !it->second.Applied(threshold)) return 0;
  return it->second.penalty_s;
}

int CorrectionState::AppliedShapes(double threshold) const {
  int n = 0;
  for (const auto& [bucket, p] : penalties) n += p.Applied(threshold) ? 1 : 0;
  return n;
}

std::string CorrectionState::Describe(const CorrectionOptions& options) const {
  const double c = 100 * options.tracking_cost_fraction;
  switch (decision) {
    case TrackingDecision::kUndecided:
      return fmt::format(
          "correction: tracking on, deciding ({} of {} iterations observed, B {:.2f}% so far vs C "
          "{:.2f}%), {} shapes penalised",
          window_observed, options.window_iterations,
          window_observed > 0 ? 100 * window_benefit_sum / window_observed : 0.0, c,
          AppliedShapes(options.threshold));
    case TrackingDecision::kOn:
      return fmt::format(
          "correction: tracking on (B {:.2f}% >= C {:.2f}% over {} iterations), {} shapes "
          "penalised",
          100 * last_window_benefit, c, options.window_iterations,
          AppliedShapes(options.threshold));
    case TrackingDecision::kOff:
      return fmt::format(
          "correction: tracking off (B {:.2f}% < C {:.2f}% over {} iterations), no penalties",
          100 * last_window_benefit, c, options.window_iterations);
  }
  return "";
}

const CorrectionState* CorrectionOf(const planning::PlanState& state) {
  return dynamic_cast<const CorrectionState*>(state.feedback.get());
}

StatusOr<ItemDurations> DurationsOf(const Job& job,
                                    const Config& config,
                                    const cost::ThroughputTable& tables,
                                    const spec::Batch& batch,
                                    const CorrectionState* correction,
                                    const CorrectionOptions& options) {
  WEFT_ASSIGN_OR_RETURN(Roles roles, FindRoles(job.model));
  ItemDurations out;
  WEFT_ASSIGN_OR_RETURN(out.items, ItemShapes(job.model, roles, tables, batch, job.workload));
  const int n = static_cast<int>(out.items.size());
  if (n == 0) return out;
  double units = 0, tokens = 0;
  for (const auto& it : out.items) {
    units += it.encoder_units;
    tokens += static_cast<double>(it.llm_tokens);
  }
  WEFT_ASSIGN_OR_RETURN(DurationModel model, DurationModel::Create(job.model, roles, tables, config,
                                                                   n, units / n, tokens / n));
  out.durations.resize(n);
  out.penalty_s.assign(n, 0.0);
  for (int i = 0; i < n; ++i) {
    out.durations[i] = model.Item(out.items[i]);
    if (correction != nullptr && options.enabled) {
      out.penalty_s[i] = correction->AppliedPenalty(out.items[i].llm_tokens, options.threshold);
    }
  }
  return out;
}

double BucketMakespan(const std::vector<algo::TwoResourceItem>& durations,
                      const std::vector<int>& bucket_of,
                      int buckets) {
  std::vector<double> first(buckets, 0.0), second(buckets, 0.0);
  for (size_t i = 0; i < durations.size(); ++i) {
    first[bucket_of[i]] += durations[i].first_s;
    second[bucket_of[i]] += durations[i].second_s;
  }
  double c = 0;
  for (int b = 0; b < buckets; ++b) c = std::max({c, first[b], second[b]});
  return c;
}

namespace {

// One LLM pipeline stage of one microbatch: its graph stages' planned (uncorrected) and measured
// seconds and the items it holds.
struct StageGroup {
  double planned_s = 0;
  double measured_s = 0;
  int stages = 0;
  int measured_stages = 0;
  std::set<int> items;
};

}  // namespace

StatusOr<double> PlannerCorrectionFactor(const Job& job, const spec::Batch& batch,
                                         const planning::Microbatches& microbatches,
                                         const cost::CostCorrection& factors,
                                         const graph::Stage& stage) {
  if (factors.empty()) return 1.0;
  WEFT_ASSIGN_OR_RETURN(
      cost::TokenShape shape,
      planning::StageTokenShape(job.model, batch, microbatches, job.workload, stage));
  // A kBackward stage takes its input gradient's factor (the first of its spec::PassParts).
  return factors.Factor(stage.module, spec::PassParts(stage.pass).front(), shape);
}

StatusOr<std::shared_ptr<const CorrectionState>> ObserveCorrection(
    const Job& job,
    const Config& config,
    const cost::ThroughputTable& tables,
    const CorrectionOptions& options,
    const planning::PlanState& state,
    const planning::IterationPlan& planned,
    const std::vector<planning::MeasuredStage>& measured,
    const BalanceFn& balance) {
  WEFT_RETURN_IF_ERROR(options.Validate());
  const CorrectionState* before = CorrectionOf(state);
  if (!options.enabled) return std::shared_ptr<const CorrectionState>();
  if (before != nullptr && !before->Tracking()) {
    return std::static_pointer_cast<const CorrectionState>(state.feedback);
  }
  if (planned.batch == nullptr) {
    return InvalidArgumentError("dflop correction: the planned iteration carries no batch");
  }
  const spec::Batch& batch = *planned.batch;
  WEFT_ASSIGN_OR_RETURN(Roles roles, FindRoles(job.model));
  auto next = std::make_shared<CorrectionState>(before != nullptr ? *before : CorrectionState{});

  // Items and their scheduler durations (the prediction the penalties correct).
  WEFT_ASSIGN_OR_RETURN(ItemDurations items,
                        DurationsOf(job, config, tables, batch, before, options));
  const int n = static_cast<int>(items.items.size());
  std::vector<int> item_of_sample(batch.samples.size(), -1);
  if (batch.sequences.empty()) {
    for (int i = 0; i < n; ++i) item_of_sample[i] = i;
  } else {
    for (int i = 0; i < n; ++i) {
      for (int s : batch.sequences[i].sample_indices) item_of_sample[s] = i;
    }
  }
  std::vector<int> bucket_of_item(n);
  for (int i = 0; i < n; ++i) bucket_of_item[i] = LlmShapeBucket(items.items[i].llm_tokens);

  // Group the LLM's graph stages by (replica, group, chunk, microbatch).
  std::map<std::tuple<int, int, int, int>, StageGroup> groups;
  std::map<std::pair<int, graph::StageId>, double> measured_of;
  for (const planning::MeasuredStage& m : measured)
    measured_of[{m.replica, m.stage}] = m.measured_s;
  const cost::CostCorrection empty;
  const cost::CostCorrection& factors = state.correction ? *state.correction : empty;
  for (int r = 0; r < static_cast<int>(planned.replicas.size()); ++r) {
    const planning::ReplicaPlan& replica = planned.replicas[r];
    const graph::StageGraph& g = replica.graph;
    for (graph::StageId id = 0; id < g.num_stages(); ++id) {
      const graph::Stage& st = g.stage(id);
      if (st.module != roles.llm) continue;
      StageGroup& group = groups[{r, st.group, st.chunk, st.microbatch}];
      // The planned time without the planner's own (stage-shape) cost correction.
      WEFT_ASSIGN_OR_RETURN(
          const double factor,
          PlannerCorrectionFactor(job, batch, replica.microbatches, factors, st));
      group.planned_s += st.latency_s / factor;
      ++group.stages;
      auto found = measured_of.find({r, id});
      if (found != measured_of.end()) {
        group.measured_s += found->second;
        ++group.measured_stages;
      }
      for (int32_t s : g.sample_set(st.samples)) {
        if (s >= 0 && s < static_cast<int>(item_of_sample.size()) && item_of_sample[s] >= 0) {
          group.items.insert(item_of_sample[s]);
        }
      }
    }
  }

  // Residuals; clean stages confirm their shapes.
  auto penalty_of = [&](int item) {
    auto it = next->penalties.find(bucket_of_item[item]);
    return it == next->penalties.end() ? 0.0 : it->second.penalty_s;
  };
  struct Residual {
    const StageGroup* group;
    double residual_s;
    bool clean;
  };
  std::vector<Residual> residuals;
  std::set<int> confirmed;
  for (const auto& [key, group] : groups) {
    if (group.measured_stages != group.stages || group.planned_s <= 0 || group.items.empty()) {
      continue;
    }
    double predicted = group.planned_s;
    for (int i : group.items) predicted += penalty_of(i);
    const double r = group.measured_s - predicted;
    const bool clean = std::abs(r) <= options.clean_tolerance * group.planned_s;
    residuals.push_back({&group, r, clean});
    if (clean) {
      for (int i : group.items) confirmed.insert(bucket_of_item[i]);
    }
  }
  // Observations per shape: (sum of observed penalties, count, sum of predicted item times).
  struct Obs {
    double penalty_sum = 0;
    double predicted_sum = 0;
    int64_t count = 0;
  };
  std::map<int, Obs> obs;
  next->stages_clean = next->stages_deviating = next->stages_unexplained = 0;
  for (const Residual& res : residuals) {
    double llm_sum = 0;
    for (int i : res.group->items) llm_sum += items.durations[i].llm_s;
    if (res.clean) {
      ++next->stages_clean;
      for (int i : res.group->items) {
        const double share = llm_sum > 0 ? items.durations[i].llm_s / llm_sum : 0.0;
        Obs& o = obs[bucket_of_item[i]];
        o.penalty_sum += penalty_of(i) + res.residual_s * share;
        o.predicted_sum += items.durations[i].llm_s;
        ++o.count;
      }
      continue;
    }
    ++next->stages_deviating;
    std::vector<int> suspects;
    for (int i : res.group->items) {
      if (!confirmed.contains(bucket_of_item[i])) suspects.push_back(i);
    }
    if (suspects.empty()) {
      ++next->stages_unexplained;
      continue;
    }
    const double each = res.residual_s / static_cast<double>(suspects.size());
    for (int i : suspects) {
      Obs& o = obs[bucket_of_item[i]];
      o.penalty_sum += penalty_of(i) + each;
      o.predicted_sum += items.durations[i].llm_s;
      ++o.count;
    }
  }
  for (const auto& [bucket, o] : obs) {
    ShapePenalty& p = next->penalties[bucket];
    const double w = 1 - std::pow(1 - options.alpha, static_cast<double>(o.count));
    const double mean_penalty = o.penalty_sum / static_cast<double>(o.count);
    const double mean_predicted = o.predicted_sum / static_cast<double>(o.count);
    p.penalty_s += w * (mean_penalty - p.penalty_s);
    p.predicted_s =
        p.observations == 0 ? mean_predicted : p.predicted_s + w * (mean_predicted - p.predicted_s);
    p.observations += o.count;
    ++p.iterations;
  }

  // Benefit B of this batch: C_max without penalties minus with them, both priced with them.
  double benefit = 0;
  const int buckets = [&] {
    int b = 0;
    for (const auto& replica : planned.assignment.replicas) b += static_cast<int>(replica.size());
    return b;
  }();
  if (n > 0 && buckets > 0 && balance) {
    std::vector<algo::TwoResourceItem> plain(n), corrected(n);
    for (int i = 0; i < n; ++i) {
      plain[i] = {.first_s = items.durations[i].encoder_s, .second_s = items.durations[i].llm_s};
      corrected[i] = plain[i];
      corrected[i].second_s += next->AppliedPenalty(items.items[i].llm_tokens, options.threshold);
    }
    WEFT_ASSIGN_OR_RETURN(std::vector<int> without, balance(plain, buckets));
    WEFT_ASSIGN_OR_RETURN(std::vector<int> with, balance(corrected, buckets));
    const double c_with = BucketMakespan(corrected, with, buckets);
    const double c_without = BucketMakespan(corrected, without, buckets);
    if (c_with > 0) benefit = std::max(0.0, (c_without - c_with) / c_with);
  }
  next->last_benefit = benefit;
  ++next->iterations_observed;
  ++next->window_observed;
  next->window_benefit_sum += benefit;
  if (next->window_observed >= options.window_iterations) {
    next->last_window_benefit =
        next->window_benefit_sum / static_cast<double>(next->window_observed);
    next->decision = !options.toggle || next->last_window_benefit >= options.tracking_cost_fraction
                         ? TrackingDecision::kOn
                         : TrackingDecision::kOff;
    next->window_observed = 0;
    next->window_benefit_sum = 0;
  }
  return std::shared_ptr<const CorrectionState>(std::move(next));
}

}  // namespace weft::strategy::dflop
