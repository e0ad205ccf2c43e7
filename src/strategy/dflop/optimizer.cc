#include "weft/strategy/dflop/optimizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "weft/data/workload.h"
#include "weft/planning/iteration.h"
#include "weft/sched/generators.h"
#include "weft/strategy/common.h"

namespace weft::strategy::dflop {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// Backward factor of a module from its frozen status: 1 (trainable), 0.5 (input gradients only:
// roughly half of a full backward), 0 (no backward).
StatusOr<double> BackwardFactor(const spec::ModelSpec& model, int module) {
  WEFT_ASSIGN_OR_RETURN(cost::BackwardMode mode, cost::BackwardModeOf(model, module));
  switch (mode) {
    case cost::BackwardMode::kFull:
      return 1.0;
    case cost::BackwardMode::kInputOnly:
      return 0.5;
    case cost::BackwardMode::kNone:
      return 0.0;
  }
  return 1.0;
}

std::vector<int> EvenLayers(int layers, int pp) {
  std::vector<int> out(pp, layers / pp);
  for (int k = 0; k < layers % pp; ++k) ++out[k];
  return out;
}

// One profile batch, summarized for O(1) pricing of a config.
struct BatchSummary {
  int items = 0;
  double sum_units = 0;
  double max_units = 0;
  double sum_tokens = 0;
  // Per LLM TP: Σ_d A_d and the items on the upper envelope of (s_d, A_d) (the only ones that
  // can be the longest LLM item for some price per token), where A_d = Σ_segments attention
  // seconds of one layer (forward + backward·factor).
  std::map<int, double> sum_attention_s;
  std::map<int, std::vector<std::pair<double, double>>> llm_front;  // (s_d, A_d)
};

std::vector<std::pair<double, double>> UpperFront(std::vector<std::pair<double, double>> points) {
  // Keep the points not dominated in both coordinates.
  std::sort(points.begin(), points.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second > b.second;
  });
  std::vector<std::pair<double, double>> front;
  double best_a = -1;
  for (const auto& p : points) {
    if (p.second > best_a) {
      front.push_back(p);
      best_a = p.second;
    }
  }
  return front;
}

// The LLM stage that bounds the pipeline under an even layer split (planning: PlacementOf): the
// first stage holds ceil(L/pp) layers, the last floor(L/pp) layers and the output extras (LM
// head, loss); one stage holds all. Compared at one microbatch's layer and head times.
struct LlmStage {
  double layers = 0;
  bool with_head = false;
};
LlmStage BottleneckStage(int layers, int pp, double layer_s, double head_s) {
  if (pp <= 1) return {.layers = static_cast<double>(layers), .with_head = true};
  const int first = (layers + pp - 1) / pp;
  const int last = layers / pp;
  if (last * layer_s + head_s >= first * layer_s) {
    return {.layers = static_cast<double>(last), .with_head = true};
  }
  return {.layers = static_cast<double>(first), .with_head = false};
}

struct ModuleMemory {
  double state_bytes_per_layer = 0;  // at the config's TP and DP
  double activation_bytes_per_unit_layer = 0;
};

}  // namespace

std::string Config::Describe() const {
  return fmt::format("E tp{} pp{} dp{} | L tp{} pp{} dp{} | N_mb {}", encoder.tp, encoder.pp,
                     encoder.dp, llm.tp, llm.pp, llm.dp, num_microbatches);
}

StatusOr<Roles> FindRoles(const spec::ModelSpec& model) {
  Roles roles;
  for (int m = 0; m < static_cast<int>(model.modules.size()); ++m) {
    const auto& module = model.modules[m];
    int* slot = nullptr;
    std::string_view what;
    if (module.IsEncoder()) {
      slot = &roles.encoder, what = "encoder";
    } else if (module.kind == spec::ModuleKind::kLlm) {
      slot = &roles.llm, what = "LLM";
    } else if (module.kind == spec::ModuleKind::kMlpProjector) {
      slot = &roles.projector, what = "projector";
    } else {
      return FailedPreconditionError(
          fmt::format("dflop trains one encoder (+ projector) and one LLM; module '{}' is a {}",
                      module.name, spec::ModuleKindName(module.kind)));
    }
    if (*slot >= 0) {
      return FailedPreconditionError(fmt::format(
          "dflop trains one encoder (+ projector) and one LLM; model '{}' has a second {} ('{}')",
          model.name, what, module.name));
    }
    *slot = m;
  }
  if (roles.encoder < 0 || roles.llm < 0) {
    return FailedPreconditionError(
        fmt::format("dflop trains one encoder (+ projector) and one LLM; model '{}' lacks {}",
                    model.name, roles.encoder < 0 ? "an encoder" : "an LLM"));
  }
  return roles;
}

StatusOr<std::vector<ItemShape>> ItemShapes(const spec::ModelSpec& model,
                                            const Roles& roles,
                                            const cost::ThroughputTable& tables,
                                            const spec::Batch& batch,
                                            const data::WorkloadOptions& workload) {
  const cost::ModuleTable* enc = tables.Find(roles.encoder);
  if (!enc) {
    return FailedPreconditionError(fmt::format("the throughput tables have no encoder '{}'",
                                               model.modules[roles.encoder].name));
  }
  const int n =
      static_cast<int>(batch.sequences.empty() ? batch.samples.size() : batch.sequences.size());
  std::vector<ItemShape> items(n);
  for (int i = 0; i < n; ++i) {
    const int index[1] = {i};
    WEFT_ASSIGN_OR_RETURN(data::ModuleWorkload ew,
                          data::DeriveModuleWorkload(model, roles.encoder, batch, index, workload));
    WEFT_ASSIGN_OR_RETURN(data::ModuleWorkload lw,
                          data::DeriveModuleWorkload(model, roles.llm, batch, index, workload));
    items[i].encoder_units =
        static_cast<double>(ew.TotalTokens()) / static_cast<double>(enc->tokens_per_instance);
    items[i].llm_tokens = lw.TotalTokens();
    for (const auto& instance : lw.instances) {
      for (int32_t s : instance.segment_tokens) items[i].llm_segments.push_back(s);
    }
  }
  return items;
}

StatusOr<DurationModel> DurationModel::Create(const spec::ModelSpec& model,
                                              const Roles& roles,
                                              const cost::ThroughputTable& tables,
                                              const Config& config,
                                              int global_items,
                                              double mean_encoder_units,
                                              double mean_llm_tokens) {
  DurationModel d;
  d.tables_ = &tables;
  d.llm_ = roles.llm;
  d.llm_tp_ = config.llm.tp;
  const int mb = std::max(1, config.num_microbatches);
  const auto& enc = model.modules[roles.encoder];
  const auto& llm = model.modules[roles.llm];
  WEFT_ASSIGN_OR_RETURN(double enc_bwf, BackwardFactor(model, roles.encoder));
  WEFT_ASSIGN_OR_RETURN(d.llm_backward_factor_, BackwardFactor(model, roles.llm));
  const double b_mb = std::max(
      1e-9, mean_encoder_units * global_items / (static_cast<double>(mb) * config.encoder.dp));
  WEFT_ASSIGN_OR_RETURN(cost::LayerTime et,
                        tables.EncoderLayerTime(roles.encoder, config.encoder.tp, b_mb));
  d.encoder_s_per_unit_ = static_cast<double>(enc.num_layers) / config.encoder.pp *
                          (et.forward_s + enc_bwf * et.backward_s) / b_mb *
                          (static_cast<double>(config.llm.dp) / config.encoder.dp);
  const double s_mb =
      std::max(1.0, mean_llm_tokens * global_items / (static_cast<double>(mb) * config.llm.dp));
  WEFT_ASSIGN_OR_RETURN(cost::LayerTime lt, tables.LlmLinearTime(roles.llm, config.llm.tp, s_mb));
  const cost::LayerTime ht = tables.LlmHeadTime(roles.llm, config.llm.tp, s_mb);
  const LlmStage stage = BottleneckStage(llm.num_layers, config.llm.pp,
                                         lt.forward_s + d.llm_backward_factor_ * lt.backward_s,
                                         ht.forward_s + d.llm_backward_factor_ * ht.backward_s);
  d.llm_layers_per_stage_ = stage.layers;
  d.llm_s_per_token_ =
      (stage.layers * (lt.forward_s + d.llm_backward_factor_ * lt.backward_s) +
       (stage.with_head ? ht.forward_s + d.llm_backward_factor_ * ht.backward_s : 0.0)) /
      s_mb;
  return d;
}

TwoStage DurationModel::Item(const ItemShape& item) const {
  double attention_s = 0;
  for (int64_t s : item.llm_segments) {
    auto a = tables_->LlmAttentionTime(llm_, llm_tp_, static_cast<double>(s));
    if (a.ok()) attention_s += a->forward_s + llm_backward_factor_ * a->backward_s;
  }
  return {.encoder_s = encoder_s_per_unit_ * item.encoder_units,
          .llm_s = llm_s_per_token_ * static_cast<double>(item.llm_tokens) +
                   llm_layers_per_stage_ * attention_s};
}

std::string_view ObjectiveName(Objective objective) {
  return objective == Objective::kPaper ? "paper" : "expected";
}

StatusOr<Objective> ParseObjective(std::string_view name) {
  if (name == "paper") return Objective::kPaper;
  if (name == "expected") return Objective::kExpected;
  return InvalidArgumentError(fmt::format(
      "--objective = '{}'; expected 'expected' (weft: mean makespan over the profile batches) or "
      "'paper' (Algorithm 1: makespan of the mean item)",
      name));
}

Status OptimizerOptions::Validate() const {
  if (rerank_top_k < 0 || rerank_top_k > 256) {
    return InvalidArgumentError(
        fmt::format("rerank_top_k = {}; must be in [0, 256]", rerank_top_k));
  }
  if (!std::isfinite(accept_within) || accept_within < 0 || accept_within > 1) {
    return InvalidArgumentError(
        fmt::format("accept_within = {}; must be in [0, 1]", accept_within));
  }
  if (max_microbatches < 0) {
    return InvalidArgumentError(
        fmt::format("max_microbatches = {}; must be >= 0 (0 = GBS / L_dp)", max_microbatches));
  }
  return OkStatus();
}

std::string OptimizerResult::ToText() const {
  std::string out = fmt::format(
      "{} (E, L) configs ({} skipped whole by the lower bound), {} (E, L, N_mb) priced in {:.2f} "
      "ms (profile batches summarized in {:.2f} ms); simulator re-rank {:.2f} s; global batch {} "
      "items\n",
      module_configs, pruned, evaluated, formula_wall_s * 1e3, summary_wall_s * 1e3, rerank_wall_s,
      global_items);
  if (!rejected.empty()) {
    out += "rejected:";
    for (const auto& [reason, count] : rejected) out += fmt::format(" {} {};", reason, count);
    out += "\n";
  }
  out += fmt::format("  {:<3} {:<40} {:>11} {:>12} {:>13} {:>9} {:>9}\n", "#", "config", "paper_s",
                     "expected_s", "simulated_s", "E_GiB", "L_GiB");
  for (size_t k = 0; k < top.size(); ++k) {
    const Candidate& c = top[k];
    out += fmt::format("  {:<3} {:<40} {:>11.4f} {:>12.4f} {:>13} {:>9.1f} {:>9.1f}\n", k + 1,
                       c.config.Describe(), c.paper_s, c.expected_s,
                       c.simulated_s < 0
                           ? std::string("-")
                           : fmt::format("{:.4f}{}", c.simulated_s, c.simulated_oom ? " OOM" : ""),
                       c.encoder_memory_bytes / (1 << 30), c.llm_memory_bytes / (1 << 30));
  }
  for (size_t k = 0; k < top.size(); ++k) {
    if (!top[k].simulation_error.empty()) {
      out +=
          fmt::format("  #{} not simulated: {}\n", k + 1, top[k].simulation_error.substr(0, 3000));
    }
  }
  out +=
      fmt::format("argmin paper: {}\nargmin expected: {}\nargmin simulated: {}\n",
                  argmin_paper.Describe(), argmin_expected.Describe(), argmin_simulated.Describe());
  return out;
}

StatusOr<planning::PlacementSpec> PlacementOf(const Config& config,
                                              const spec::ModelSpec& model,
                                              const Roles& roles) {
  planning::PlacementSpec spec;
  spec.source = "dflop";
  spec.schedule = sched::ScheduleKind::kOneFOneB;
  spec.num_microbatches = config.num_microbatches;
  for (int m = 0; m < static_cast<int>(model.modules.size()); ++m) {
    planning::ModulePlacement p;
    p.module = model.modules[m].name;
    if (m == roles.encoder) {
      p.tp = config.encoder.tp, p.dp = config.encoder.dp;
      p.layers = EvenLayers(model.modules[m].num_layers, config.encoder.pp);
      p.first_gpu = 0;
    } else if (m == roles.llm) {
      p.tp = config.llm.tp, p.dp = config.llm.dp;
      p.layers = EvenLayers(model.modules[m].num_layers, config.llm.pp);
      p.first_gpu = config.encoder.Gpus();
    } else {
      p.on = model.modules[roles.encoder].name;
      p.first_gpu = -1;
      p.layers = {model.modules[m].num_layers};
    }
    spec.modules.push_back(std::move(p));
  }
  return spec;
}

StatusOr<OptimizerResult> Optimize(const Job& job,
                                   const cost::ThroughputTable& tables,
                                   const OptimizerOptions& options,
                                   const AssignFn& assign) {
  WEFT_RETURN_IF_ERROR(options.Validate());
  if (job.profile_batches.empty()) {
    return InvalidArgumentError(
        "the dflop optimizer prices the job's profile batches; it has none");
  }
  const auto start = Clock::now();
  const spec::ModelSpec& model = job.model;
  WEFT_ASSIGN_OR_RETURN(Roles roles, FindRoles(model));
  const auto& enc = model.modules[roles.encoder];
  const auto& llm = model.modules[roles.llm];
  const int gpus = job.cluster.TotalGpus();
  const int node = std::max(1, job.cluster.gpus_per_node);
  if (gpus < 2) {
    return FailedPreconditionError(
        fmt::format("dflop puts the encoder and the LLM on GPUs of their own; {} GPU(s)", gpus));
  }
  const double capacity_bytes = static_cast<double>(job.cluster.gpu.UsableMemoryBytes());
  const cost::CostOptions& cost_options = job.cost_model->options();
  WEFT_ASSIGN_OR_RETURN(double enc_bwf, BackwardFactor(model, roles.encoder));
  WEFT_ASSIGN_OR_RETURN(double llm_bwf, BackwardFactor(model, roles.llm));
  const cost::ModuleTable* enc_table = tables.Find(roles.encoder);
  const cost::ModuleTable* llm_table = tables.Find(roles.llm);
  if (!enc_table || !llm_table) {
    return FailedPreconditionError(fmt::format("the throughput tables ({}) lack module '{}'",
                                               tables.source(), (!enc_table ? enc : llm).name));
  }

  // Profile batches summarized once.
  double result_summary_wall_s = 0;
  std::vector<int> llm_tps;
  for (int tp : tables.TpValues(roles.llm)) {
    if (tp <= node && planning::TpFitsHeads(llm, tp)) llm_tps.push_back(tp);
  }
  std::vector<BatchSummary> batches;
  double total_items = 0, total_units = 0, total_tokens = 0;
  std::map<int, double> total_attention_s;
  for (const auto& batch : job.profile_batches) {
    WEFT_ASSIGN_OR_RETURN(auto items, ItemShapes(model, roles, tables, batch, job.workload));
    BatchSummary s;
    s.items = static_cast<int>(items.size());
    for (const auto& it : items) {
      s.sum_units += it.encoder_units;
      s.max_units = std::max(s.max_units, it.encoder_units);
      s.sum_tokens += static_cast<double>(it.llm_tokens);
    }
    for (int tp : llm_tps) {
      std::vector<std::pair<double, double>> points;
      double sum = 0;
      for (const auto& it : items) {
        double a = 0;
        for (int64_t seg : it.llm_segments) {
          WEFT_ASSIGN_OR_RETURN(auto t, tables.LlmAttentionTime(roles.llm, tp, seg));
          a += t.forward_s + llm_bwf * t.backward_s;
        }
        sum += a;
        points.emplace_back(static_cast<double>(it.llm_tokens), a);
      }
      s.sum_attention_s[tp] = sum;
      total_attention_s[tp] += sum;
      s.llm_front[tp] = UpperFront(std::move(points));
    }
    total_items += s.items;
    total_units += s.sum_units;
    total_tokens += s.sum_tokens;
    batches.push_back(std::move(s));
  }
  if (total_items <= 0) return InvalidArgumentError("the profile batches hold no items");
  const int gbs = static_cast<int>(std::lround(total_items / batches.size()));
  result_summary_wall_s = Seconds(start);
  const auto formula_start = Clock::now();
  const double mean_units = total_units / total_items;
  const double mean_tokens = total_tokens / total_items;

  // Module configurations per GPU count.
  OptimizerResult result;
  result.global_items = gbs;
  auto module_configs = [&](const spec::ModuleSpec& module, int module_gpus, int module_index,
                            std::string_view who) {
    const auto tps = tables.TpValues(module_index);
    return planning::EnumerateModuleLayouts(
        module, module_gpus, node,
        [&](int tp) { return std::find(tps.begin(), tps.end(), tp) != tps.end(); }, who,
        &result.rejected);
  };
  auto bytes_per_param = [&](const spec::ModuleSpec& module, int dp) {
    return planning::StateBytesPerParameter(module, dp, cost_options);
  };
  const double projector_params =
      roles.projector >= 0 ? static_cast<double>(model.modules[roles.projector].ParameterCount())
                           : 0.0;

  // Kept by the objective: the best `keep` candidates with at most kPerPair microbatch counts
  // of one (E, L) pair (the re-rank set); everything within accept_within of the best when the
  // acceptance rule is on.
  constexpr int kPerPair = 3;
  const bool accept_rule = options.accept_within > 0;
  const size_t keep = accept_rule ? 100000 : static_cast<size_t>(std::max(options.rerank_top_k, 1));
  Candidate best_paper_candidate, best_expected_candidate;
  std::vector<Candidate> top;  // sorted by the objective
  double best_paper = std::numeric_limits<double>::infinity();
  double best_expected = std::numeric_limits<double>::infinity();
  auto objective_of = [&](const Candidate& c) {
    return options.objective == Objective::kPaper ? c.paper_s : c.expected_s;
  };
  auto same_pair = [](const Candidate& a, const Config& b) {
    return a.config.encoder == b.encoder && a.config.llm == b.llm;
  };
  // Below this primary objective a candidate can still enter `top`.
  auto primary_threshold = [&]() {
    if (top.empty()) return std::numeric_limits<double>::infinity();
    if (accept_rule) return objective_of(top.front()) * (1 + options.accept_within);
    return top.size() < keep ? std::numeric_limits<double>::infinity() : objective_of(top.back());
  };

  // Lower bounds for pruning (options.prune): the cheapest per-unit and per-token time a table
  // holds (between grid points time is linear in the batch, so time / batch is monotone there;
  // outside it is constant), per TP.
  std::map<int, double> min_e_per_unit, min_l_per_token;
  for (const auto& [tp, points] : enc_table->encoder) {
    double best = std::numeric_limits<double>::infinity();
    for (const auto& p : points)
      best = std::min(best, (p.forward_s + enc_bwf * p.backward_s) / p.batch);
    min_e_per_unit[tp] = best;
  }
  for (const auto& [tp, points] : llm_table->llm) {
    double best = std::numeric_limits<double>::infinity();
    for (const auto& p : points) {
      best = std::min(best, (p.linear_forward_s + llm_bwf * p.linear_backward_s) / p.seq_tokens);
    }
    min_l_per_token[tp] = best;
  }
  std::map<int, double> min_head_per_token;  // 0 where the table has no output extras
  for (const auto& [tp, points] : llm_table->head) {
    double best = std::numeric_limits<double>::infinity();
    for (const auto& p : points) {
      best = std::min(best, (p.forward_s + llm_bwf * p.backward_s) / p.seq_tokens);
    }
    min_head_per_token[tp] = points.empty() ? 0.0 : best;
  }
  const double num_batches = static_cast<double>(batches.size());

  for (int e_gpus = 1; e_gpus < gpus; ++e_gpus) {
    const int l_gpus = gpus - e_gpus;
    const auto e_configs = module_configs(enc, e_gpus, roles.encoder, "encoder");
    const auto l_configs = module_configs(llm, l_gpus, roles.llm, "LLM");
    for (const ModuleConfig& e : e_configs) {
      WEFT_ASSIGN_OR_RETURN(cost::LayerMemory em, tables.Memory(roles.encoder, e.tp));
      const double e_layers = static_cast<double>(enc.num_layers) / e.pp;
      const double e_state = em.parameters_per_layer * e_layers * bytes_per_param(enc, e.dp) +
                             projector_params / e.tp * 2.0;
      for (const ModuleConfig& l : l_configs) {
        if (e.dp % l.dp != 0 && l.dp % e.dp != 0) {
          // The inter-model communicator gathers from / scatters to whole replicas: one DP
          // must divide the other (weft's graph routes contiguous shares, as DFLOP's Fig. 6).
          ++result.rejected["DP sizes not dividing"];
          continue;
        }
        ++result.module_configs;
        WEFT_ASSIGN_OR_RETURN(cost::LayerMemory lm, tables.Memory(roles.llm, l.tp));
        const double l_layers = static_cast<double>(llm.num_layers) / l.pp;
        const double l_state = lm.parameters_per_layer * l_layers * bytes_per_param(llm, l.dp) +
                               static_cast<double>(llm.EmbeddingParameters()) / l.tp /
                                   (l.pp > 1 ? 2 : 1) * bytes_per_param(llm, l.dp);
        const int max_mb_l = gbs / l.dp;
        const int max_mb_e = gbs / e.dp;
        int max_mb = std::min(max_mb_l, max_mb_e);
        if (options.max_microbatches > 0) max_mb = std::min(max_mb, options.max_microbatches);
        if (max_mb < 1) {
          ++result.rejected["DP above the global batch"];
          continue;
        }
        const int depth = e.pp + l.pp;
        const double mean_attention = total_attention_s[l.tp] / total_items;
        // Work lower bounds of this pair, independent of N_mb: T(N_mb) >= (1 + (depth-1)/N_mb)
        // x work (both objectives); the expected one also >= (N_mb + depth - 1) x longest item.
        const double e_unit_lb = e_layers * min_e_per_unit[e.tp] * l.dp / e.dp;
        // Every LLM stage bounds the pipeline: the first (ceil(L/pp) layers) and the last
        // (floor(L/pp) layers + the output extras); each gives a lower bound, the larger is kept.
        const int first_layers = (llm.num_layers + l.pp - 1) / l.pp;
        const int last_layers = l.pp > 1 ? llm.num_layers / l.pp : llm.num_layers;
        double paper_work_lb = 0, expected_work_lb = 0, expected_item_lb = 0;
        for (auto [n, head_lb] :
             {std::pair{static_cast<double>(first_layers), 0.0},
              std::pair{static_cast<double>(last_layers), min_head_per_token[l.tp]}}) {
          if (l.pp == 1 && head_lb == 0) continue;
          const double l_token_lb = n * min_l_per_token[l.tp] + head_lb;
          paper_work_lb = std::max(
              paper_work_lb,
              static_cast<double>(gbs) / l.dp *
                  std::max(e_unit_lb * mean_units, l_token_lb * mean_tokens + n * mean_attention));
          double work = 0, item_sum = 0;
          for (const BatchSummary& b : batches) {
            work += std::max(e_unit_lb * b.sum_units,
                             l_token_lb * b.sum_tokens + n * b.sum_attention_s.at(l.tp)) /
                    l.dp;
            double item = e_unit_lb * b.max_units;
            for (const auto& [s_d, a_d] : b.llm_front.at(l.tp)) {
              item = std::max(item, l_token_lb * s_d + n * a_d);
            }
            item_sum += item;
          }
          expected_work_lb = std::max(expected_work_lb, work / num_batches);
          expected_item_lb = std::max(expected_item_lb, item_sum / num_batches);
        }
        auto prunable = [&](int mb) {
          if (!options.prune) return false;
          const double f = 1.0 + static_cast<double>(depth - 1) / mb;
          const double paper_lb = f * paper_work_lb;
          const double expected_lb =
              std::max(f * expected_work_lb, (mb + depth - 1) * expected_item_lb);
          const double primary_lb = options.objective == Objective::kPaper ? paper_lb : expected_lb;
          return paper_lb >= best_paper && expected_lb >= best_expected &&
                 primary_lb >= primary_threshold();
        };
        if (prunable(max_mb)) {
          // Even the smallest bubble factor cannot beat what is kept (the item term only grows).
          const double f = 1.0 + static_cast<double>(depth - 1) / max_mb;
          if (f * paper_work_lb >= best_paper && f * expected_work_lb >= best_expected &&
              (options.objective == Objective::kPaper ? f * paper_work_lb : f * expected_work_lb) >=
                  primary_threshold()) {
            ++result.pruned;
            continue;
          }
        }
        bool any_fit = false;
        bool e_oom = false, l_oom = false;
        for (int mb = 1; mb <= max_mb; ++mb) {
          const Config config{.encoder = e, .llm = l, .num_microbatches = mb};
          const double b_mb = std::max(1e-9, mean_units * gbs / (static_cast<double>(mb) * e.dp));
          const double s_mb = std::max(1.0, mean_tokens * gbs / (static_cast<double>(mb) * l.dp));
          const double e_mem = e_state + depth * em.activation_bytes_per_unit * b_mb * e_layers;
          const double l_mem = l_state + l.pp * lm.activation_bytes_per_unit * s_mb * l_layers;
          if (e_mem > capacity_bytes) {
            e_oom = true;
            continue;
          }
          if (l_mem > capacity_bytes) {
            l_oom = true;
            continue;
          }
          any_fit = true;
          if (prunable(mb)) continue;
          ++result.evaluated;
          WEFT_ASSIGN_OR_RETURN(cost::LayerTime et,
                                tables.EncoderLayerTime(roles.encoder, e.tp, b_mb));
          WEFT_ASSIGN_OR_RETURN(cost::LayerTime lt, tables.LlmLinearTime(roles.llm, l.tp, s_mb));
          const double e_per_unit = e_layers * (et.forward_s + enc_bwf * et.backward_s) / b_mb *
                                    (static_cast<double>(l.dp) / e.dp);
          // Both candidate bottleneck stages of the LLM (first: ceil(L/pp) layers; last:
          // floor(L/pp) layers + the output extras; one stage when pp = 1): every LLM term below
          // is the larger of the two, so a batch heavy in attention is priced at the first
          // stage and one heavy in tokens at the last.
          const cost::LayerTime ht = tables.LlmHeadTime(roles.llm, l.tp, s_mb);
          const double lin_tok = (lt.forward_s + llm_bwf * lt.backward_s) / s_mb;
          const double head_tok = (ht.forward_s + llm_bwf * ht.backward_s) / s_mb;
          auto l_cost = [&](double tokens, double attention) {
            const double last =
                (last_layers * lin_tok + head_tok) * tokens + last_layers * attention;
            if (l.pp == 1) return last;
            return std::max(last, first_layers * (lin_tok * tokens + attention));
          };
          const double m = static_cast<double>(mb) * l.dp;  // buckets
          const double stages = mb + depth - 1;
          Candidate c;
          c.config = config;
          c.encoder_memory_bytes = e_mem;
          c.llm_memory_bytes = l_mem;
          // Paper: every item the mean item; GBS / m items per bucket.
          const double items_per_bucket = gbs / m;
          c.paper_s = stages * items_per_bucket *
                      std::max(e_per_unit * mean_units, l_cost(mean_tokens, mean_attention));
          // Expected: mean over batches of the balanced-bucket bound.
          double sum_t = 0;
          for (const BatchSummary& b : batches) {
            double bound = std::max(e_per_unit * b.sum_units,
                                    l_cost(b.sum_tokens, b.sum_attention_s.at(l.tp))) /
                           m;
            bound = std::max(bound, e_per_unit * b.max_units);
            for (const auto& [s_d, a_d] : b.llm_front.at(l.tp)) {
              bound = std::max(bound, l_cost(s_d, a_d));
            }
            sum_t += stages * bound;
          }
          c.expected_s = sum_t / num_batches;
          if (c.paper_s < best_paper) {
            best_paper = c.paper_s;
            result.argmin_paper = config;
            best_paper_candidate = c;
          }
          if (c.expected_s < best_expected) {
            best_expected = c.expected_s;
            result.argmin_expected = config;
            best_expected_candidate = c;
          }
          const double obj = objective_of(c);
          if (!(obj < primary_threshold() || top.size() < keep)) continue;
          if (!accept_rule) {
            // At most kPerPair entries of one pair: replace the pair's worst when better.
            int same = 0;
            auto worst = top.end();
            for (auto it = top.begin(); it != top.end(); ++it) {
              if (same_pair(*it, config)) {
                ++same;
                worst = it;  // sorted: the last one of the pair is its worst
              }
            }
            if (same >= kPerPair) {
              if (!(obj < objective_of(*worst))) continue;
              top.erase(worst);
            }
          }
          auto pos =
              std::upper_bound(top.begin(), top.end(), obj,
                               [&](double v, const Candidate& x) { return v < objective_of(x); });
          top.insert(pos, c);
          if (top.size() > keep) top.pop_back();
        }
        if (!any_fit) ++result.rejected[e_oom ? "encoder memory" : (l_oom ? "LLM memory" : "none")];
      }
    }
  }
  result.formula_wall_s = Seconds(formula_start);
  result.summary_wall_s = result_summary_wall_s;
  if (top.empty()) {
    std::string reasons;
    for (const auto& [reason, count] : result.rejected) {
      reasons += fmt::format("{}{} {}", reasons.empty() ? "" : ", ", reason, count);
    }
    return FailedPreconditionError(
        fmt::format("dflop: no configuration of {} GPUs fits (rejected: {})", gpus, reasons));
  }
  if (options.accept_within > 0) {
    // The public code's rule: the fewest microbatches within accept_within of the best.
    const double limit = objective_of(top.front()) * (1 + options.accept_within);
    // Only the candidates within the limit stay (the set does not depend on the order in which
    // the enumeration met them).
    top.erase(std::find_if(top.begin(), top.end(),
                           [&](const Candidate& c) { return objective_of(c) > limit; }),
              top.end());
    auto chosen = top.begin();
    for (auto it = top.begin(); it != top.end() && objective_of(*it) <= limit; ++it) {
      if (it->config.num_microbatches < chosen->config.num_microbatches) chosen = it;
    }
    std::rotate(top.begin(), chosen, chosen + 1);
  }
  if (accept_rule) {
    top.resize(std::min(top.size(), static_cast<size_t>(std::max(options.rerank_top_k, 1))));
  }
  if (options.rerank_top_k > 0) {
    // The simulator also sees the other objective's choice.
    const Candidate& other =
        options.objective == Objective::kPaper ? best_expected_candidate : best_paper_candidate;
    if (std::none_of(top.begin(), top.end(),
                     [&](const Candidate& x) { return x.config == other.config; })) {
      top.push_back(other);
    }
  }
  result.argmin_simulated = top.front().config;

  if (options.rerank_top_k > 0) {
    const auto rerank_start = Clock::now();
    for (Candidate& c : top) {
      // One simulated mean over the profile batches; an error leaves the candidate unsimulated
      // with the reason (printed).
      auto simulate = [&]() -> Status {
        WEFT_ASSIGN_OR_RETURN(planning::PlacementSpec spec, PlacementOf(c.config, model, roles));
        WEFT_ASSIGN_OR_RETURN(planning::Placement placement,
                              planning::BuildPlacement(spec, model, job.cluster, *job.cost_model));
        planning::StaticPlan plan = MakeStaticPlan(std::move(placement), "dflop", model);
        plan.num_microbatches = c.config.num_microbatches;
        double total_s = 0;
        bool oom = false;
        for (const auto& batch : job.profile_batches) {
          WEFT_ASSIGN_OR_RETURN(planning::Assignment assignment,
                                assign ? assign(job, plan, c.config, batch)
                                       : planning::DefaultAssignmentFor(job, plan, batch));
          WEFT_ASSIGN_OR_RETURN(planning::IterationPlan it,
                                planning::PlanReplicas(
                                    job, plan, {.batch = batch, .assignment = assignment},
                                    [](const graph::StageGraph& g) {
                                      return sched::MakeSchedule(sched::ScheduleKind::kOneFOneB, g);
                                    }));
          WEFT_ASSIGN_OR_RETURN(planning::IterationEvaluation e,
                                planning::EvaluateIteration(job, it));
          total_s += e.iteration_time_s;
          oom = oom || e.oom;
        }
        c.simulated_s = total_s / static_cast<double>(job.profile_batches.size());
        c.simulated_oom = oom;
        return OkStatus();
      };
      if (Status s = simulate(); !s.ok()) c.simulation_error = std::string(s.message());
    }
    // Re-rank: simulated and fitting first, by simulated time; the rest keep their order.
    std::stable_sort(top.begin(), top.end(), [](const Candidate& a, const Candidate& b) {
      const int ra = a.simulated_s < 0 ? 2 : (a.simulated_oom ? 1 : 0);
      const int rb = b.simulated_s < 0 ? 2 : (b.simulated_oom ? 1 : 0);
      if (ra != rb) return ra < rb;
      if (ra == 2) return false;
      return a.simulated_s < b.simulated_s;
    });
    result.argmin_simulated = top.front().config;
    result.rerank_wall_s = Seconds(rerank_start);
  }
  result.best = top.front().config;
  result.top = std::move(top);
  return result;
}

}  // namespace weft::strategy::dflop
