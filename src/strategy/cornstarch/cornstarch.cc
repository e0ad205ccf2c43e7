#include "weft/strategy/cornstarch/cornstarch.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <numeric>

#include "weft/algo/partition.h"
#include "weft/data/workload.h"
#include "weft/sched/generators.h"
#include "weft/strategy/common.h"
#include "weft/strategy/module_sets.h"

namespace weft::strategy::cornstarch {
namespace {

// A group of modules placed together: `head` has groups of its own, `hosted` sit on the head's
// last stage (projectors of an encoder) or, for the backbone, the LLM's last (or first) stage.
struct Branch {
  int head = 0;
  std::vector<int> hosted;
  std::vector<double> weight;    // per head layer, the hosted modules' weight on the last one
  std::vector<double> forward;   // per head layer (hosted on the last), seconds
  std::vector<double> backward;  // per head layer (hosted on the last), seconds
};

// Per-layer weight, forward and backward time of `modules` folded onto `head`'s layers.
Status FillWeights(const Job& job, Weighting weighting, Branch& b) {
  std::vector<int> modules = {b.head};
  modules.insert(modules.end(), b.hosted.begin(), b.hosted.end());
  const std::vector<LayerUnit> units = ChainUnits(job.model, modules);
  WEFT_ASSIGN_OR_RETURN(auto fwd3, UnitWeights(job, units, UnitWeight::kForwardLatency));
  WEFT_ASSIGN_OR_RETURN(auto step, UnitWeights(job, units, UnitWeight::kStepLatency));
  const int layers = job.model.modules[b.head].num_layers;
  b.weight.assign(layers, 0);
  b.forward.assign(layers, 0);
  b.backward.assign(layers, 0);
  for (size_t k = 0; k < units.size(); ++k) {
    const int at = units[k].module == b.head ? units[k].first_layer : layers - 1;
    const double f = fwd3[k] / 3;
    b.forward[at] += f;
    b.backward[at] += std::max(0.0, step[k] - f);
    b.weight[at] += weighting == Weighting::kFrozenAware ? step[k] : fwd3[k];
  }
  return OkStatus();
}

struct Decomposition {
  Branch llm;
  std::vector<Branch> branches;
};

StatusOr<Decomposition> Decompose(const Job& job, Weighting weighting) {
  WEFT_ASSIGN_OR_RETURN(ModuleSides sides, SplitEncoderSide(job.model));
  if (sides.encoders.empty()) {
    return FailedPreconditionError("cornstarch: model '" + job.model.name +
                                   "' has no encoder upstream of its LLM");
  }
  Decomposition d;
  // Encoder side: a module without predecessors heads a branch; every other encoder-side module
  // joins the branch of its first predecessor (a projector on its encoder's last stage).
  std::vector<int> branch_of(job.model.modules.size(), -1);
  for (int m : sides.encoders) {
    const auto preds = job.model.Predecessors(m);
    if (preds.empty()) {
      branch_of[m] = static_cast<int>(d.branches.size());
      d.branches.push_back({.head = m});
    } else {
      const int b = branch_of[preds[0]];
      if (b < 0) return InternalError("cornstarch: encoder-side module without a branch");
      branch_of[m] = b;
      d.branches[b].hosted.push_back(m);
    }
  }
  d.llm.head = std::max(0, data::FirstLlmModule(job.model));
  for (int m : sides.backbone) {
    if (m != d.llm.head) d.llm.hosted.push_back(m);
  }
  WEFT_RETURN_IF_ERROR(FillWeights(job, weighting, d.llm));
  for (Branch& b : d.branches) WEFT_RETURN_IF_ERROR(FillWeights(job, weighting, b));
  return d;
}

int RoundUp(int x, int to) { return to <= 1 ? x : (x + to - 1) / to * to; }

// The candidate for fixed stage counts: partitions, GPU layout, per-stage times.
Candidate MakeCandidate(const Job& job, const Decomposition& d,
                        const algo::ContiguousPartition& llm_part,
                        const std::vector<algo::ContiguousPartition>& enc_parts) {
  const auto parallel = ModuleParallels(job);
  const int dp = std::max(1, job.DataParallelSize());
  Candidate c;
  c.llm_stages = static_cast<int>(llm_part.part_sizes.size());
  c.target_s = llm_part.max_part_sum;
  c.spec.source = "cornstarch";
  c.spec.schedule = sched::ScheduleKind::kOneFOneB;
  c.spec.modules.resize(job.model.modules.size());
  for (size_t m = 0; m < job.model.modules.size(); ++m) {
    c.spec.modules[m].module = job.model.modules[m].name;
  }
  int cursor = 0;
  auto place = [&](const Branch& b, const algo::ContiguousPartition& part) {
    const spec::ModuleParallel& p = parallel[b.head];
    const int width = p.tp * p.cp;
    planning::ModulePlacement& mp = c.spec.modules[b.head];
    mp.tp = p.tp;
    mp.cp = p.cp;
    mp.dp = dp;
    mp.layers = part.part_sizes;
    cursor = RoundUp(cursor, width);
    mp.first_gpu = cursor;
    cursor += static_cast<int>(part.part_sizes.size()) * dp * width;
    for (int h : b.hosted) {
      planning::ModulePlacement& hp = c.spec.modules[h];
      hp.on = job.model.modules[b.head].name;
      hp.tp = p.tp;
      hp.cp = p.cp;
      hp.dp = dp;
      hp.layers = {job.model.modules[h].num_layers};
      hp.first_gpu = -1;
    }
    const std::string& name = job.model.modules[b.head].name;
    for (size_t s = 0; s < part.part_sizes.size(); ++s) {
      const int first = part.boundaries[s];
      const int last = first + part.part_sizes[s];
      StageTime t;
      t.module = name;
      t.label = fmt::format("{}[{},{})", name, first, last);
      if (s + 1 == part.part_sizes.size()) {
        for (int h : b.hosted) t.label += " " + job.model.modules[h].name;
      }
      for (int l = first; l < last; ++l) {
        t.forward_s += b.forward[l];
        t.backward_s += b.backward[l];
      }
      c.stages.push_back(std::move(t));
    }
  };
  place(d.llm, llm_part);
  for (size_t k = 0; k < d.branches.size(); ++k) {
    c.encoder_stages.push_back(static_cast<int>(enc_parts[k].part_sizes.size()));
    place(d.branches[k], enc_parts[k]);
  }
  c.gpus = cursor;
  c.feasible = c.gpus <= job.cluster.TotalGpus();
  if (!c.feasible) {
    c.why_not = fmt::format("needs {} GPUs; the budget is {}", c.gpus, job.cluster.TotalGpus());
  }
  return c;
}

// Simulates a candidate on `batch` (1F1B; first uniform recompute level that fits).
Status Simulate(const Job& job, const spec::Batch& batch, Candidate& c) {
  WEFT_ASSIGN_OR_RETURN(Placement placement,
                        planning::BuildPlacement(c.spec, job.model, job.cluster, *job.cost_model));
  StaticPlan plan = MakeStaticPlan(std::move(placement), "cornstarch candidate", job.model);
  for (spec::Recompute level :
       {spec::Recompute::kNone, spec::Recompute::kSelective, spec::Recompute::kFull}) {
    plan.recompute.assign(job.model.modules.size(), level);
    WEFT_ASSIGN_OR_RETURN(Assignment assignment, planning::DefaultAssignmentFor(job, plan, batch));
    WEFT_ASSIGN_OR_RETURN(IterationPlan it,
                          PlanReplicas(job, plan, {.batch = batch, .assignment = assignment},
                                       [](const graph::StageGraph& g) {
                            return sched::MakeSchedule(sched::ScheduleKind::kOneFOneB, g);
                          }));
    WEFT_ASSIGN_OR_RETURN(IterationEvaluation e, EvaluateIteration(job, it));
    c.iteration_s = e.iteration_time_s;
    c.samples_per_s = e.samples_per_s;
    c.oom = e.oom;
    c.recompute = std::string(spec::RecomputeName(level));
    if (!e.oom) break;
  }
  return OkStatus();
}

std::string Stages(const Algorithm1Result& r, const Candidate& c) {
  std::string out = fmt::format("L={}", c.llm_stages);
  for (size_t k = 0; k < r.branches.size(); ++k) {
    out += fmt::format(" {}={}", r.branches[k], c.encoder_stages[k]);
  }
  return out;
}

}  // namespace

StatusOr<Candidate> PartitionWithStages(const Job& job, Weighting weighting, int llm_stages,
                                        const std::vector<int>& encoder_stages) {
  WEFT_ASSIGN_OR_RETURN(Decomposition d, Decompose(job, weighting));
  if (encoder_stages.size() != d.branches.size()) {
    return InvalidArgumentError(fmt::format("encoder_stages has {} entries; the model has {} "
                                            "encoder branches",
                                            encoder_stages.size(), d.branches.size()));
  }
  WEFT_ASSIGN_OR_RETURN(auto llm_part, algo::MinMaxContiguousPartition(d.llm.weight, llm_stages));
  std::vector<algo::ContiguousPartition> enc_parts;
  for (size_t k = 0; k < d.branches.size(); ++k) {
    WEFT_ASSIGN_OR_RETURN(auto part, algo::MinMaxContiguousPartition(d.branches[k].weight,
                                                                     encoder_stages[k]));
    enc_parts.push_back(std::move(part));
  }
  return MakeCandidate(job, d, llm_part, enc_parts);
}

StatusOr<Algorithm1Result> RunAlgorithm1(const Job& job, Weighting weighting) {
  const auto start = std::chrono::steady_clock::now();
  WEFT_RETURN_IF_ERROR(job.Validate());
  WEFT_ASSIGN_OR_RETURN(Decomposition d, Decompose(job, weighting));
  Algorithm1Result r;
  for (const Branch& b : d.branches) r.branches.push_back(job.model.modules[b.head].name);
  const int llm_layers = static_cast<int>(d.llm.weight.size());
  const spec::Batch* batch = job.profile_batches.empty() ? nullptr : &job.profile_batches[0];
  // Candidates stop where the LLM's stages alone, with one stage per encoder branch, exceed
  // the budget (every larger L does too).
  const auto parallel = ModuleParallels(job);
  const int dp = std::max(1, job.DataParallelSize());
  int branch_min_gpus = 0;
  for (const Branch& b : d.branches) branch_min_gpus += dp * parallel[b.head].tp * parallel[b.head].cp;
  const int llm_width = dp * parallel[d.llm.head].tp * parallel[d.llm.head].cp;
  for (int l = 1; l <= llm_layers && l * llm_width + branch_min_gpus <= job.cluster.TotalGpus();
       ++l) {
    WEFT_ASSIGN_OR_RETURN(auto llm_part, algo::MinMaxContiguousPartition(d.llm.weight, l));
    std::vector<algo::ContiguousPartition> enc_parts;
    std::string why_not;
    for (size_t k = 0; k < d.branches.size() && why_not.empty(); ++k) {
      auto part = algo::FewestPartsUnderBound(d.branches[k].weight, llm_part.max_part_sum);
      if (!part.ok()) {
        why_not = fmt::format("{}: {}", r.branches[k], part.status().message());
      } else {
        enc_parts.push_back(*std::move(part));
      }
    }
    Candidate c;
    if (why_not.empty()) {
      c = MakeCandidate(job, d, llm_part, enc_parts);
    } else {
      c.llm_stages = l;
      c.target_s = llm_part.max_part_sum;
      c.why_not = why_not;
    }
    if (c.feasible && batch != nullptr) WEFT_RETURN_IF_ERROR(Simulate(job, *batch, c));
    r.candidates.push_back(std::move(c));
  }
  // No balanced candidate fits (Algorithm 1 wants every encoder stage under the LLM's stage
  // target, which can need more GPUs than there are): per LLM stage count, the encoder
  // branches get the stages the budget leaves, one at a time to the branch whose largest stage
  // is slowest; the imbalance is stated. A user still gets a plan.
  bool fallback = false;
  if (std::none_of(r.candidates.begin(), r.candidates.end(),
                   [](const Candidate& c) { return c.feasible; })) {
    std::vector<int> branch_width;
    for (const Branch& b : d.branches) {
      branch_width.push_back(dp * parallel[b.head].tp * parallel[b.head].cp);
    }
    for (int l = 1; l <= llm_layers && l * llm_width + branch_min_gpus <= job.cluster.TotalGpus();
         ++l) {
      WEFT_ASSIGN_OR_RETURN(auto llm_part, algo::MinMaxContiguousPartition(d.llm.weight, l));
      std::vector<int> stages(d.branches.size(), 1);
      std::vector<algo::ContiguousPartition> parts;
      for (size_t k = 0; k < d.branches.size(); ++k) {
        WEFT_ASSIGN_OR_RETURN(auto part, algo::MinMaxContiguousPartition(d.branches[k].weight, 1));
        parts.push_back(std::move(part));
      }
      int left = job.cluster.TotalGpus() - l * llm_width - branch_min_gpus;
      while (true) {
        int grow = -1;
        for (size_t k = 0; k < d.branches.size(); ++k) {
          const bool can = branch_width[k] <= left &&
                           stages[k] < static_cast<int>(d.branches[k].weight.size()) &&
                           parts[k].max_part_sum > llm_part.max_part_sum;
          if (can && (grow < 0 || parts[k].max_part_sum > parts[grow].max_part_sum)) {
            grow = static_cast<int>(k);
          }
        }
        if (grow < 0) break;
        ++stages[grow];
        left -= branch_width[grow];
        WEFT_ASSIGN_OR_RETURN(parts[grow], algo::MinMaxContiguousPartition(
                                               d.branches[grow].weight, stages[grow]));
      }
      Candidate c = MakeCandidate(job, d, llm_part, parts);
      if (c.feasible && batch != nullptr) WEFT_RETURN_IF_ERROR(Simulate(job, *batch, c));
      r.candidates.push_back(std::move(c));
    }
    fallback = true;
  }
  // The fastest feasible candidate (fitting memory first; ties: fewer GPUs). Without a profile
  // batch: the smallest (microbatches + stages on the longest path − 1) × largest stage time.
  const int m = std::max(1, job.parallel.num_microbatches);
  auto score = [&](const Candidate& c) {
    if (batch != nullptr) return c.iteration_s;
    double worst = 0;
    for (const StageTime& s : c.stages) worst = std::max(worst, s.forward_s + s.backward_s);
    const int longest = c.llm_stages + *std::max_element(c.encoder_stages.begin(),
                                                          c.encoder_stages.end());
    return (m + longest - 1) * worst;
  };
  for (int i = 0; i < static_cast<int>(r.candidates.size()); ++i) {
    const Candidate& c = r.candidates[i];
    if (!c.feasible) continue;
    if (r.winner < 0) {
      r.winner = i;
      continue;
    }
    const Candidate& w = r.candidates[r.winner];
    const auto key = [&](const Candidate& x) { return std::tuple(x.oom, score(x), x.gpus); };
    if (key(c) < key(w)) r.winner = i;
  }
  if (r.winner < 0) {
    return FailedPreconditionError(fmt::format(
        "no layout fits the budget of {} GPUs, even with one pipeline stage per encoder branch "
        "({} GPUs) and one for the LLM ({} GPUs)",
        job.cluster.TotalGpus(), branch_min_gpus, llm_width));
  }
  const Candidate& w = r.candidates[r.winner];
  int runner = -1;
  for (int i = 0; i < static_cast<int>(r.candidates.size()); ++i) {
    const Candidate& c = r.candidates[i];
    if (!c.feasible || i == r.winner) continue;
    if (runner < 0 || std::tuple(c.oom, score(c)) <
                          std::tuple(r.candidates[runner].oom, score(r.candidates[runner]))) {
      runner = i;
    }
  }
  const std::string measure = batch != nullptr ? "simulated iteration" : "estimated iteration";
  if (fallback) {
    const Candidate& w = r.candidates[r.winner];
    double encoder_s = 0;
    for (size_t k = 0; k < w.stages.size(); ++k) {
      if (static_cast<int>(k) >= w.llm_stages) {
        encoder_s = std::max(encoder_s, w.stages[k].forward_s + w.stages[k].backward_s);
      }
    }
    double llm_s = 0;
    for (int k = 0; k < w.llm_stages && k < static_cast<int>(w.stages.size()); ++k) {
      llm_s = std::max(llm_s, w.stages[k].forward_s + w.stages[k].backward_s);
    }
    r.why = fmt::format(
        "no balanced candidate fits {} GPUs; best within the budget: {} ({} {:.3f} s on {} GPUs{}; "
        "slowest encoder stage {:.1f} ms vs LLM stage {:.1f} ms, {:.2f}x imbalance)",
        job.cluster.TotalGpus(), Stages(r, w), measure, score(w), w.gpus,
        w.oom ? ", out of memory" : "", 1e3 * encoder_s, 1e3 * llm_s,
        llm_s > 0 ? encoder_s / llm_s : 0.0);
    r.run_time_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
  }
  if (runner < 0) {
    r.why = fmt::format("{} wins: {} {:.3f} s on {} GPUs{}; the only candidate within {} GPUs",
                        Stages(r, w), measure, score(w), w.gpus, w.oom ? " (out of memory)" : "",
                        job.cluster.TotalGpus());
  } else {
    const Candidate& u = r.candidates[runner];
    r.why = fmt::format(
        "{} wins: {} {:.3f} s on {} GPUs{}; runner-up {}: {:.3f} s on {} GPUs{}", Stages(r, w),
        measure, score(w), w.gpus, w.oom ? " (out of memory)" : "", Stages(r, u), score(u),
        u.gpus, u.oom ? " (out of memory)" : "");
  }
  r.run_time_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

std::string Algorithm1Result::Report() const {
  std::string out = fmt::format("{:<24} {:>10} {:>5} {:>11} {:>10} {:>14}  {}\n", "stages",
                                "target ms", "GPUs", "iteration s", "samples/s",
                                "per GPU used", "note");
  for (int i = 0; i < static_cast<int>(candidates.size()); ++i) {
    const Candidate& c = candidates[i];
    std::string stages = fmt::format("L={}", c.llm_stages);
    for (size_t k = 0; k < c.encoder_stages.size() && k < branches.size(); ++k) {
      stages += fmt::format(" {}={}", branches[k], c.encoder_stages[k]);
    }
    std::string note = i == winner ? "winner" : c.why_not;
    if (c.feasible && c.oom) note += (note.empty() ? "" : "; ") + std::string("out of memory");
    if (c.feasible && !c.recompute.empty() && c.recompute != "none") {
      note += (note.empty() ? "" : "; ") + ("recompute " + c.recompute);
    }
    if (c.feasible && c.iteration_s > 0) {
      out += fmt::format("{:<24} {:>10.1f} {:>5} {:>11.3f} {:>10.3f} {:>14.4f}  {}\n", stages,
                         1e3 * c.target_s, c.gpus, c.iteration_s, c.samples_per_s,
                         c.samples_per_s / std::max(1, c.gpus), note);
    } else {
      out += fmt::format("{:<24} {:>10.1f} {:>5} {:>11} {:>10} {:>14}  {}\n", stages,
                         1e3 * c.target_s, c.gpus > 0 ? std::to_string(c.gpus) : "-", "-", "-",
                         "-", note);
    }
  }
  out += why + "\n";
  return out;
}

namespace {

class CornstarchStrategy final : public Strategy {
 public:
  explicit CornstarchStrategy(Weighting weighting) : weighting_(weighting) {}
  std::string_view Name() const override {
    return weighting_ == Weighting::kFrozenAware ? "cornstarch" : "cornstarch-frozen-unaware";
  }
  std::string_view Description() const override {
    return weighting_ == Weighting::kFrozenAware
               ? "Cornstarch: modality parallelism (each encoder on groups of its own), layers "
                 "balanced by fwd+bwd under the frozen rule, Algorithm 1 stage counts, "
                 "cross-modality 1F1B"
               : "Cornstarch, frozen-status unaware: modality parallelism, layers balanced by "
                 "forward time (backward assumed 2x), Algorithm 1 stage counts, 1F1B";
  }

  StatusOr<StaticPlan> Prepare(const Job& job) const override {
    WEFT_ASSIGN_OR_RETURN(Algorithm1Result r, RunAlgorithm1(job, weighting_));
    const Candidate& w = r.candidates[r.winner];
    WEFT_ASSIGN_OR_RETURN(Placement placement,
                          planning::BuildPlacement(w.spec, job.model, job.cluster,
                                                 *job.cost_model));
    std::vector<std::string> tried;
    for (const Candidate& c : r.candidates) {
      std::string s = fmt::format("L{}", c.llm_stages);
      for (int e : c.encoder_stages) s += fmt::format("/{}", e);
      s += c.feasible && c.iteration_s > 0 ? fmt::format(" {:.3f}s", c.iteration_s)
           : c.feasible                    ? ""
                                           : " (over budget)";
      tried.push_back(s);
    }
    std::vector<std::string> stage_times;
    for (const StageTime& s : w.stages) {
      stage_times.push_back(
          fmt::format("{} {:.1f}+{:.1f}", s.module, 1e3 * s.forward_s, 1e3 * s.backward_s));
    }
    return MakeStaticPlan(
        std::move(placement),
        fmt::format("{}; Algorithm 1 candidates (L/encoders, iteration) {}; {}; per-stage "
                    "fwd+bwd ms {}",
                    Description(), fmt::join(tried, ", "), r.why, fmt::join(stage_times, ", ")),
        job.model);
  }

  StatusOr<IterationPlan> PlanIteration(const Job& job, const StaticPlan& plan,
                                        const IterationInput& input) const override {
    return PlanReplicas(job, plan, input, [](const graph::StageGraph& g) {
      return sched::MakeSchedule(sched::ScheduleKind::kOneFOneB, g);
    });
  }

 private:
  Weighting weighting_;
};

}  // namespace

std::unique_ptr<Strategy> MakeCornstarchStrategy(Weighting weighting) {
  return std::make_unique<CornstarchStrategy>(weighting);
}

}  // namespace weft::strategy::cornstarch
