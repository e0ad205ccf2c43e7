// DIP §5.3: per-pair memory candidates and the per-rank selection (see memory.h).
#include "weft/strategy/dip/memory.h"

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "weft/algo/knapsack.h"

namespace weft::strategy::dip {
namespace {

constexpr int kOffload = static_cast<int>(spec::Recompute::kOffload);

// The backward stage that frees `f`'s activations (same group, module, chunk and slice).
int FreeingStage(const graph::StageGraph& g, int f) {
  const graph::Stage& fs = g.stage(f);
  for (graph::EdgeId e : g.out_edges(f)) {
    const int to = g.edge(e).to;
    const graph::Stage& ts = g.stage(to);
    if (spec::IsBackward(ts.pass) && ts.group == fs.group && ts.module == fs.module &&
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

// What a pair's candidates depend on besides the optimizer's cluster and options, bit for bit:
// the layer count, then per option the forward's and the freeing stage's latencies (as bits) and
// the forward's activation bytes, then the offloaded bytes (0 without offload).
using PairInputs = std::array<uint64_t, 14>;

// The candidates of the pair (f, b) over the first `num_options` variants (see memory.h).
StatusOr<std::vector<PairCandidate>> PricePair(std::span<const graph::StageGraph> variants,
                                               int f, int b, int num_options, int layers,
                                               double d2h_bytes_per_s, double h2d_bytes_per_s,
                                               int num_candidates, PairCandidateCache& cache) {
  const graph::StageGraph& base = variants[0];
  const graph::Stage& fs = base.stage(f);
  const bool offload = num_options > kOffload;
  // Per-layer options: extra time over "none", offload's price and bytes held.
  std::array<double, 4> dforward{}, dbackward{}, bytes{}, price{}, host_bytes{};
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
  WEFT_ASSIGN_OR_RETURN(auto with_all, BucketChoices(layer, layers, num_candidates, cache));
  std::vector<const std::vector<int>*> selections;
  for (const auto& choice : *with_all) selections.push_back(&choice);
  std::shared_ptr<const std::vector<std::vector<int>>> more;
  if (offload) {
    // The candidates without offload too, for ranks whose host share is spent.
    const algo::KnapsackGroup no_offload(layer.begin(), layer.begin() + kOffload);
    WEFT_ASSIGN_OR_RETURN(more, BucketChoices(no_offload, layers, num_candidates, cache));
    for (const auto& choice : *more) selections.push_back(&choice);
  }
  // Layer counts compared as one word (std::array's == calls memcmp).
  const auto layers_word = [](const PairCandidate& x) { return std::bit_cast<uint64_t>(x.layers); };
  std::vector<PairCandidate> candidates;
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
    const bool seen =
        std::any_of(candidates.begin(), candidates.end(),
                    [&](const PairCandidate& x) { return layers_word(x) == layers_word(c); });
    if (seen) continue;
    c.forward_s = std::max(0.0, c.forward_s);
    c.backward_s = std::max(0.0, c.backward_s);
    c.activation_bytes = std::llround(held);
    c.offload_bytes = std::llround(host);
    candidates.push_back(c);
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const PairCandidate& x, const PairCandidate& y) {
                     return x.activation_bytes < y.activation_bytes;
                   });
  return candidates;
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

StatusOr<MemoryOptimizer> MemoryOptimizer::Create(std::span<const graph::StageGraph> variants,
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
  // Pairs of equal inputs (other microbatches and sub-microbatches of the same shape) get equal
  // candidates: each distinct input (a shape) is priced once, the others copy its candidates.
  std::map<PairInputs, int> shape_of_inputs;
  std::vector<int> first_pair_of_shape;
  m.options_begin_.push_back(0);
  for (int f = 0; f < n; ++f) {
    const graph::Stage& fs = base.stage(f);
    if (fs.pass != spec::Pass::kForward || fs.activation_alloc_bytes <= 0) continue;
    const int b = FreeingStage(base, f);
    if (b < 0) continue;
    bool same_pair = true;
    for (int r = 1; r < num_options; ++r) same_pair = same_pair && FreeingStage(variants[r], f) == b;
    if (!same_pair) continue;
    const int layers = std::max(1, layers_per_stage[f]);
    PairInputs inputs{};
    inputs[0] = static_cast<uint64_t>(layers);
    for (int r = 0; r < num_options; ++r) {
      inputs[1 + r] = std::bit_cast<uint64_t>(variants[r].stage(f).latency_s);
      inputs[5 + r] = std::bit_cast<uint64_t>(variants[r].stage(b).latency_s);
      inputs[9 + r] = static_cast<uint64_t>(variants[r].stage(f).activation_alloc_bytes);
    }
    if (offload) inputs[13] = static_cast<uint64_t>(variants[kOffload].stage(f).offload_bytes);
    MemoryPair pair;
    pair.forward = f;
    pair.backward = b;
    const auto [it, inserted] =
        shape_of_inputs.try_emplace(inputs, static_cast<int>(first_pair_of_shape.size()));
    const int shape = it->second;
    m.shape_of_pair_.push_back(shape);
    if (!inserted) {
      pair.candidates = m.pairs_[first_pair_of_shape[shape]].candidates;
    } else {
      WEFT_ASSIGN_OR_RETURN(pair.candidates,
                            PricePair(variants, f, b, num_options, layers, d2h_bytes_per_s,
                                      h2d_bytes_per_s, options.num_candidates, *cache));
      first_pair_of_shape.push_back(static_cast<int>(m.pairs_.size()));
      int64_t& max_offload_bytes = m.max_offload_bytes_.emplace_back(0);
      for (const PairCandidate& c : pair.candidates) {
        m.live_options_.push_back({c.CostS(), static_cast<double>(c.activation_bytes)});
        max_offload_bytes = std::max(max_offload_bytes, c.offload_bytes);
        int dominant = 0, kinds = 0;
        for (int o = 0; o < 4; ++o) {
          if (c.layers[o] > 0) ++kinds;
          if (c.layers[o] > c.layers[dominant]) dominant = o;
        }
        m.stage_recompute_.push_back({static_cast<spec::Recompute>(dominant), kinds > 1});
      }
      m.options_begin_.push_back(static_cast<int>(m.live_options_.size()));
    }
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
      const StageRecompute& recompute =
          stage_recompute_[options_begin_[shape_of_pair_[p]] + choice[p]];
      st.recompute = recompute.dominant;
      st.recompute_layers = recompute.mixed ? c.layers : std::array<int16_t, 4>{};
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
  // Per-rank buffers, reused by every selection of this call: the problem's option lists keep
  // their capacity from rank to rank.
  std::vector<int> local(pairs_.size(), -1);  // pair -> local item (the last selection's pairs)
  std::vector<int> global;                    // local item -> pair
  std::vector<int> allowed;        // per local item: its candidates in the problem, flat
  std::vector<int> allowed_begin;  // per local item: where they start in `allowed` (-1: all)
  std::vector<int64_t> delta;      // live offloaded bytes per checkpoint, differences
  algo::LiveSelectionProblem problem;
  const bool memoize = method == algo::LiveSelectionMethod::kGreedy;
  for (size_t g = 0; g < schedule.order.size(); ++g) {
    const int64_t reserve_g = g < reserve_bytes.size() ? reserve_bytes[g] : 0;
    if (memoize) {
      std::lock_guard<std::mutex> lock(rank_memo_->mu);
      const auto& memo = rank_memo_->selections;
      const auto hit = std::find_if(memo.begin(), memo.end(), [&](const RankSelection& m) {
        return m.group == static_cast<int>(g) && m.reserve_bytes == reserve_g &&
               m.order == schedule.order[g];
      });
      if (hit != memo.end()) {
        for (const auto& [p, c] : hit->choice) choice[p] = c;
        out.feasible = out.feasible && hit->feasible;
        out.extra_s += hit->extra_s;
        out.lower_bound_extra_s += hit->lower_bound_extra_s;
        continue;
      }
    }
    // One selection with the candidates holding at most `host_limit` offloaded bytes; false if
    // the rank's live offloaded bytes then exceed its host share at some stage start.
    algo::LiveSelection sel;
    // The candidate of local item i that the selection chose.
    const auto candidate = [&](size_t i) {
      return allowed_begin[i] < 0 ? sel.choice[i] : allowed[allowed_begin[i] + sel.choice[i]];
    };
    auto select = [&](int64_t host_limit) -> StatusOr<bool> {
      for (int p : global) local[p] = -1;
      global.clear();
      allowed.clear();
      allowed_begin.clear();
      problem.checkpoints.clear();
      problem.live.clear();
      size_t num_items = 0;
      // Stashed bytes of stages outside pairs, plus the caller's reserve.
      int64_t other_bytes = reserve_g;
      // Interval form: an item is live from its forward's checkpoint to the last checkpoint
      // before its backward (the list form would name the live items in increasing order).
      for (int s : schedule.order[g]) {
        const graph::Stage& st = base_.stage(s);
        const int p = pair_of_stage_[s];
        const bool starts_pair = p >= 0 && pairs_[p].forward == s;
        if (starts_pair) {
          local[p] = static_cast<int>(global.size());
          global.push_back(p);
          if (num_items == problem.items.size()) problem.items.emplace_back();
          std::vector<algo::LiveOption>& item = problem.items[num_items++];
          const int shape = shape_of_pair_[p];
          const algo::LiveOption* shape_options = live_options_.data() + options_begin_[shape];
          if (max_offload_bytes_[shape] <= host_limit) {
            item.assign(shape_options, live_options_.data() + options_begin_[shape + 1]);
            allowed_begin.push_back(-1);  // every candidate
          } else {
            item.clear();
            allowed_begin.push_back(static_cast<int>(allowed.size()));
            const auto& cands = pairs_[p].candidates;
            for (size_t c = 0; c < cands.size(); ++c) {
              if (cands[c].offload_bytes > host_limit) continue;
              allowed.push_back(static_cast<int>(c));
              item.push_back(shape_options[c]);
            }
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
      problem.items.resize(num_items);
      const int num_checkpoints = static_cast<int>(problem.checkpoints.size());
      for (auto& r : problem.live) r.last = std::min(r.last, num_checkpoints - 1);
      if (problem.items.empty()) return true;
      WEFT_ASSIGN_OR_RETURN(sel, algo::SolveLiveSelection(problem, options));
      if (host_limit <= 0) return true;
      // Offloaded bytes live at each checkpoint (a difference array over the intervals).
      delta.assign(num_checkpoints + 1, 0);
      for (size_t i = 0; i < global.size(); ++i) {
        const int64_t host = pairs_[global[i]].candidates[candidate(i)].offload_bytes;
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
      choice[global[i]] = candidate(i);
      double best = problem.items[i][0].cost;
      for (const auto& o : problem.items[i]) best = std::min(best, o.cost);
      fastest_s += best;
    }
    out.extra_s += sel.total_cost - fastest_s;
    out.lower_bound_extra_s += sel.lower_bound - fastest_s;
    if (sel.method == "milp") ++out.milp_ranks;
    if (memoize) {
      RankSelection made{.group = static_cast<int>(g),
                         .reserve_bytes = reserve_g,
                         .order = schedule.order[g],
                         .feasible = sel.feasible,
                         .extra_s = sel.total_cost - fastest_s,
                         .lower_bound_extra_s = sel.lower_bound - fastest_s};
      made.choice.reserve(global.size());
      for (size_t i = 0; i < global.size(); ++i) made.choice.emplace_back(global[i], candidate(i));
      std::lock_guard<std::mutex> lock(rank_memo_->mu);
      rank_memo_->selections.push_back(std::move(made));
    }
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
