// DIP §5.3: per-pair memory candidates and the per-rank selection (see memory.h).
#include "weft/strategy/dip/memory.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "weft/algo/knapsack.h"

namespace weft::strategy::dip {
namespace {

constexpr int kOffload = static_cast<int>(graph::Recompute::kOffload);

// The backward stage that frees `f`'s activations (same group, module, chunk and slice).
int FreeingStage(const graph::StageGraph& g, int f) {
  const graph::Stage& fs = g.stage(f);
  for (graph::EdgeId e : g.out_edges(f)) {
    const int to = g.edge(e).to;
    const graph::Stage& ts = g.stage(to);
    if (graph::IsBackward(ts.pass) && ts.group == fs.group && ts.module == fs.module &&
        ts.chunk == fs.chunk && ts.microbatch == fs.microbatch &&
        ts.sub_microbatch == fs.sub_microbatch &&
        ts.activation_free_bytes == fs.activation_alloc_bytes) {
      return to;
    }
  }
  return -1;
}

// The selections of SelectMemoryBucketCandidates over `layers` copies of `layer`, through `cache`.
StatusOr<std::shared_ptr<const std::vector<std::vector<int>>>> BucketChoices(
    const algo::KnapsackGroup& layer, int layers, int num_candidates, PairCandidateCache& cache) {
  PairCandidateCache::Key key;
  auto& [values, key_layers, key_candidates] = key;
  values.reserve(2 * layer.size());
  for (const auto& o : layer) {
    values.push_back(o.cost);
    values.push_back(o.weight);
  }
  key_layers = layers;
  key_candidates = num_candidates;
  if (auto hit = cache.Find(key)) return hit;
  const std::vector<algo::KnapsackGroup> groups(layers, layer);
  WEFT_ASSIGN_OR_RETURN(auto selections,
                        algo::SelectMemoryBucketCandidates(groups, num_candidates,
                                                           {.max_points = 256}));
  std::vector<std::vector<int>> choices;
  for (auto& sel : selections) choices.push_back(std::move(sel.choice));
  cache.Insert(key, choices);
  return std::make_shared<const std::vector<std::vector<int>>>(std::move(choices));
}

}  // namespace

std::shared_ptr<const std::vector<std::vector<int>>> PairCandidateCache::Find(
    const Key& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = map_.find(key);
  return it == map_.end() ? nullptr : it->second;
}

void PairCandidateCache::Insert(const Key& key, std::vector<std::vector<int>> choices) {
  std::lock_guard<std::mutex> lock(mutex_);
  map_.emplace(key, std::make_shared<const std::vector<std::vector<int>>>(std::move(choices)));
}

StatusOr<MemoryOptimizer> MemoryOptimizer::Create(const std::vector<graph::StageGraph>& variants,
                                                  const std::vector<int>& layers_per_stage,
                                                  const spec::ClusterSpec& cluster,
                                                  MemoryOptions options) {
  if (variants.size() < 3 || variants.size() > 4) {
    return InvalidArgumentError(fmt::format(
        "dip memory: {} recompute variants; need none, selective, full[, offload]",
        variants.size()));
  }
  if (options.num_candidates < 2) {
    return InvalidArgumentError(
        fmt::format("dip memory: num_candidates = {}; must be >= 2", options.num_candidates));
  }
  const graph::StageGraph& base = variants[0];
  const int n = base.num_stages();
  for (const auto& v : variants) {
    if (v.num_stages() != n || v.num_edges() != base.num_edges()) {
      return InvalidArgumentError("dip memory: recompute variants differ in shape");
    }
  }
  if (static_cast<int>(layers_per_stage.size()) != n) {
    return InvalidArgumentError(fmt::format("dip memory: {} layer counts for {} stages",
                                            layers_per_stage.size(), n));
  }
  MemoryOptimizer m;
  m.base_ = base;
  m.options_ = options;
  m.pair_of_stage_.assign(n, -1);
  const bool offload = variants.size() == 4 && cluster.host_link_bandwidth_bytes_per_s > 0 &&
                       cluster.HostMemoryBytesPerNode() > 0;
  const int num_options = offload ? 4 : 3;
  const std::shared_ptr<PairCandidateCache> cache =
      options.candidate_cache != nullptr ? options.candidate_cache
                                         : std::make_shared<PairCandidateCache>();
  // Per-GPU copy bandwidth with every GPU of the node copying (DIP's replicas are alike).
  const double d2h_bytes_per_s =
      cluster.SharedHostBandwidthBytesPerS(cluster.HostD2hBandwidthBytesPerS(), cluster.gpus_per_node);
  const double h2d_bytes_per_s = cluster.SharedHostBandwidthBytesPerS(
      cluster.host_link_bandwidth_bytes_per_s, cluster.gpus_per_node);
  for (int f = 0; f < n; ++f) {
    const graph::Stage& fs = base.stage(f);
    if (fs.pass != graph::Pass::kForward || fs.activation_alloc_bytes <= 0) continue;
    const int b = FreeingStage(base, f);
    if (b < 0) continue;
    bool same_pair = true;
    for (int r = 1; r < num_options; ++r) same_pair = same_pair && FreeingStage(variants[r], f) == b;
    if (!same_pair) continue;
    const int layers = std::max(1, layers_per_stage[f]);
    // Per-layer options: extra time over "none", offload's price and bytes held.
    std::vector<double> dforward(num_options), dbackward(num_options), bytes(num_options),
        price(num_options, 0.0), host_bytes(num_options, 0.0);
    algo::KnapsackGroup layer;
    for (int r = 0; r < num_options; ++r) {
      dforward[r] = (variants[r].stage(f).latency_s - fs.latency_s) / layers;
      dbackward[r] = (variants[r].stage(b).latency_s - base.stage(b).latency_s) / layers;
      bytes[r] = static_cast<double>(variants[r].stage(f).activation_alloc_bytes) / layers;
    }
    if (offload) {
      host_bytes[kOffload] = static_cast<double>(variants[kOffload].stage(f).offload_bytes) / layers;
      const double d2h_s = host_bytes[kOffload] / d2h_bytes_per_s;
      const double h2d_s = host_bytes[kOffload] / h2d_bytes_per_s;
      const double exposed_s = std::max(0.0, d2h_s - fs.latency_s / layers) +
                               std::max(0.0, h2d_s - base.stage(b).latency_s / layers);
      price[kOffload] = std::max(exposed_s, kOffloadPriceFraction * (d2h_s + h2d_s));
    }
    for (int r = 0; r < num_options; ++r) {
      layer.push_back({std::max(0.0, dforward[r] + dbackward[r]) + price[r], bytes[r]});
    }
    WEFT_ASSIGN_OR_RETURN(auto with_all,
                          BucketChoices(layer, layers, options.num_candidates, *cache));
    std::vector<const std::vector<int>*> selections;
    for (const auto& choice : *with_all) selections.push_back(&choice);
    std::shared_ptr<const std::vector<std::vector<int>>> more;
    if (offload) {
      // The candidates without offload too, for ranks whose host share is spent.
      const algo::KnapsackGroup no_offload(layer.begin(), layer.begin() + kOffload);
      WEFT_ASSIGN_OR_RETURN(more, BucketChoices(no_offload, layers, options.num_candidates, *cache));
      for (const auto& choice : *more) selections.push_back(&choice);
    }
    MemoryPair pair;
    pair.forward = f;
    pair.backward = b;
    for (const std::vector<int>* sel : selections) {
      PairCandidate c;
      c.forward_s = fs.latency_s;
      c.backward_s = base.stage(b).latency_s;
      double held = 0, host = 0;
      for (int o : *sel) {
        ++c.layers[o];
        c.forward_s += dforward[o];
        c.backward_s += dbackward[o];
        c.offload_price_s += price[o];
        held += bytes[o];
        host += host_bytes[o];
      }
      const bool seen = std::any_of(pair.candidates.begin(), pair.candidates.end(),
                                    [&](const PairCandidate& x) { return x.layers == c.layers; });
      if (seen) continue;
      c.forward_s = std::max(0.0, c.forward_s);
      c.backward_s = std::max(0.0, c.backward_s);
      c.activation_bytes = std::llround(held);
      c.offload_bytes = std::llround(host);
      pair.candidates.push_back(c);
    }
    std::stable_sort(pair.candidates.begin(), pair.candidates.end(),
                     [](const PairCandidate& x, const PairCandidate& y) {
                       return x.activation_bytes < y.activation_bytes;
                     });
    m.pair_of_stage_[f] = m.pair_of_stage_[b] = static_cast<int>(m.pairs_.size());
    m.pairs_.push_back(std::move(pair));
  }
  for (const auto& group : base.groups()) {
    m.cap_bytes_.push_back(cluster.gpu.UsableMemoryBytes() - group.static_bytes);
  }
  m.host_bytes_per_gpu_ = cluster.HostMemoryBytesPerNode() / std::max(1, cluster.gpus_per_node);
  return m;
}

StatusOr<graph::StageGraph> MemoryOptimizer::Lightest() const {
  return Build(std::vector<int>(pairs_.size(), 0));
}

StatusOr<graph::StageGraph> MemoryOptimizer::Fastest() const {
  std::vector<int> fastest(pairs_.size(), 0);
  for (size_t p = 0; p < pairs_.size(); ++p) {
    const auto& cands = pairs_[p].candidates;
    for (size_t c = 0; c < cands.size(); ++c) {
      const auto t = [&](size_t i) { return cands[i].CostS(); };
      if (t(c) < t(fastest[p])) fastest[p] = static_cast<int>(c);
    }
  }
  return Build(fastest);
}

StatusOr<graph::StageGraph> MemoryOptimizer::Build(const std::vector<int>& choice) const {
  std::vector<graph::Stage> stages(base_.stages().begin(), base_.stages().end());
  for (int s = 0; s < base_.num_stages(); ++s) {
    graph::Stage& st = stages[s];
    const int p = pair_of_stage_[s];
    if (p >= 0) {
      const PairCandidate& c = pairs_[p].candidates[choice[p]];
      const bool forward = s == pairs_[p].forward;
      st.latency_s = forward ? c.forward_s : c.backward_s;
      if (forward) {
        st.activation_alloc_bytes = c.activation_bytes;
      } else {
        st.activation_free_bytes = c.activation_bytes;
      }
      st.offload_bytes = c.offload_bytes;
      int dominant = 0, kinds = 0;
      for (int o = 0; o < 4; ++o) {
        if (c.layers[o] > 0) ++kinds;
        if (c.layers[o] > c.layers[dominant]) dominant = o;
      }
      st.recompute = static_cast<graph::Recompute>(dominant);
      st.recompute_layers = kinds > 1 ? c.layers : std::array<int16_t, 4>{};
    }
  }
  return base_.WithStages(std::move(stages));
}

StatusOr<MemoryChoice> MemoryOptimizer::Optimize(const sched::Schedule& schedule,
                                                 algo::LiveSelectionMethod method,
                                                 std::span<const int64_t> reserve_bytes) const {
  const auto start = std::chrono::steady_clock::now();
  if (static_cast<int>(schedule.order.size()) != base_.num_groups()) {
    return InvalidArgumentError(fmt::format("dip memory: schedule has {} groups; graph has {}",
                                            schedule.order.size(), base_.num_groups()));
  }
  MemoryChoice out;
  out.feasible = true;
  std::vector<int> choice(pairs_.size(), 0);
  algo::LiveSelectionOptions options = options_.selection;
  options.method = method;
  for (size_t g = 0; g < schedule.order.size(); ++g) {
    // One selection with the candidates holding at most `host_limit` offloaded bytes; false if
    // the rank's live offloaded bytes then exceed its host share at some stage start.
    std::vector<int> global;  // local item -> pair
    algo::LiveSelectionProblem problem;
    std::vector<std::vector<int>> allowed;  // per local item: its candidates in the problem
    algo::LiveSelection sel;
    auto select = [&](int64_t host_limit) -> StatusOr<bool> {
      global.clear();
      problem = {};
      allowed.clear();
      std::vector<int> local(pairs_.size(), -1);  // pair -> local item (this group)
      // Stashed bytes of stages outside pairs, plus the caller's reserve.
      int64_t other_bytes = g < reserve_bytes.size() ? reserve_bytes[g] : 0;
      // Interval form: an item is live from its forward's checkpoint to the last checkpoint
      // before its backward (the list form would name the live items in increasing order).
      for (int s : schedule.order[g]) {
        const graph::Stage& st = base_.stage(s);
        const int p = pair_of_stage_[s];
        const bool starts_pair = p >= 0 && pairs_[p].forward == s;
        if (starts_pair) {
          local[p] = static_cast<int>(global.size());
          global.push_back(p);
          problem.items.emplace_back();
          allowed.emplace_back();
          const auto& cands = pairs_[p].candidates;
          for (size_t c = 0; c < cands.size(); ++c) {
            if (cands[c].offload_bytes > host_limit) continue;
            allowed.back().push_back(static_cast<int>(c));
            problem.items.back().push_back(
                {cands[c].CostS(), static_cast<double>(cands[c].activation_bytes)});
          }
          const int here = static_cast<int>(problem.checkpoints.size());
          problem.live.push_back({here, std::numeric_limits<int>::max()});
        } else if (p < 0) {
          other_bytes += st.activation_alloc_bytes;
        }
        if (starts_pair || (p < 0 && st.activation_alloc_bytes > 0)) {
          problem.checkpoints.push_back({{}, static_cast<double>(cap_bytes_[g] - other_bytes)});
        }
        if (p >= 0 && pairs_[p].backward == s && local[p] >= 0) {
          problem.live[local[p]].last = static_cast<int>(problem.checkpoints.size()) - 1;
        } else if (p < 0) {
          other_bytes -= st.activation_free_bytes;
        }
      }
      const int num_checkpoints = static_cast<int>(problem.checkpoints.size());
      for (auto& r : problem.live) r.last = std::min(r.last, num_checkpoints - 1);
      if (problem.items.empty()) return true;
      WEFT_ASSIGN_OR_RETURN(sel, algo::SolveLiveSelection(problem, options));
      if (host_limit <= 0) return true;
      // Offloaded bytes live at each checkpoint (a difference array over the intervals).
      std::vector<int64_t> delta(num_checkpoints + 1, 0);
      for (size_t i = 0; i < global.size(); ++i) {
        const int64_t host = pairs_[global[i]].candidates[allowed[i][sel.choice[i]]].offload_bytes;
        delta[problem.live[i].first] += host;
        delta[problem.live[i].last + 1] -= host;
      }
      int64_t host = 0;
      for (int k = 0; k < num_checkpoints; ++k) {
        host += delta[k];
        if (host > host_bytes_per_gpu_) return false;
      }
      return true;
    };
    WEFT_ASSIGN_OR_RETURN(const bool host_fits, select(host_bytes_per_gpu_));
    if (!host_fits) WEFT_RETURN_IF_ERROR(select(0).status());
    if (problem.items.empty()) continue;
    out.feasible = out.feasible && sel.feasible;
    double fastest_s = 0;
    for (size_t i = 0; i < global.size(); ++i) {
      choice[global[i]] = allowed[i][sel.choice[i]];
      double best = problem.items[i][0].cost;
      for (const auto& o : problem.items[i]) best = std::min(best, o.cost);
      fastest_s += best;
    }
    out.extra_s += sel.total_cost - fastest_s;
    out.lower_bound_extra_s += sel.lower_bound - fastest_s;
    if (sel.method == "milp") ++out.milp_ranks;
  }
  for (size_t p = 0; p < pairs_.size(); ++p) {
    for (int o = 0; o < 4; ++o) out.layers_by_option[o] += pairs_[p].candidates[choice[p]].layers[o];
  }
  WEFT_ASSIGN_OR_RETURN(out.graph, Build(choice));
  out.solve_time_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace weft::strategy::dip
