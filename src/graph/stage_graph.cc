#include "weft/graph/stage_graph.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <set>

#include <fmt/compile.h>
#include <fmt/format.h>

namespace weft::graph {
namespace {

// A set of ids in [0, n) that yields its smallest first: one bit per id plus one summary bit per
// 64-id word, so an insert or a pop costs a few word operations (Kahn's algorithm pops every
// stage once; a binary heap cost ~250 instructions a stage).
class ReadyIds {
 public:
  explicit ReadyIds(int n)
      : words_((static_cast<size_t>(n) + 63) / 64, 0), summary_((words_.size() + 63) / 64, 0) {}

  bool empty() const { return size_ == 0; }
  void Insert(int32_t id) {
    const size_t word = static_cast<size_t>(id) / 64;
    words_[word] |= uint64_t{1} << (id % 64);
    summary_[word / 64] |= uint64_t{1} << (word % 64);
    first_summary_ = std::min(first_summary_, word / 64);
    ++size_;
  }
  // The smallest id; the set must not be empty.
  int32_t PopMin() {
    while (summary_[first_summary_] == 0) ++first_summary_;
    const size_t word =
        first_summary_ * 64 + static_cast<size_t>(std::countr_zero(summary_[first_summary_]));
    uint64_t& bits = words_[word];
    const auto id = static_cast<int32_t>(word * 64 + std::countr_zero(bits));
    bits &= bits - 1;
    if (bits == 0) summary_[word / 64] &= ~(uint64_t{1} << (word % 64));
    --size_;
    return id;
  }

 private:
  std::vector<uint64_t> words_;
  std::vector<uint64_t> summary_;
  size_t first_summary_ = 0;  // no summary word below it holds a bit
  int size_ = 0;
};

}  // namespace

GroupId StageGraph::AddGroup(DeviceGroup group) {
  finalized_ = false;
  groups_.push_back(std::move(group));
  return static_cast<GroupId>(groups_.size() - 1);
}

StageId StageGraph::AddStage(const Stage& stage) {
  finalized_ = false;
  stages_.push_back(stage);
  return static_cast<StageId>(stages_.size() - 1);
}

std::shared_ptr<StageGraph::Topology> StageGraph::EmptyTopology() {
  // Held here for good: its use count never drops to 1, so every graph copies it before a change.
  static const std::shared_ptr<Topology> empty = std::make_shared<Topology>();
  return empty;
}

StageGraph::Topology& StageGraph::MutableTopology() {
  if (topology_.use_count() > 1) {
    topology_ = std::make_shared<Topology>(*topology_);
  } else {
    // The last other owner released it (a release decrement) after its last read: see those
    // reads happen before the writes that follow.
    std::atomic_thread_fence(std::memory_order_acquire);
  }
  return *topology_;
}

void StageGraph::AddEdge(StageId from, StageId to, int64_t bytes) {
  finalized_ = false;
  MutableTopology().edges.push_back(Edge{from, to, bytes});
}

void StageGraph::AddEdge(const Edge& edge) {
  finalized_ = false;
  MutableTopology().edges.push_back(edge);
}

SampleSetId StageGraph::AddSampleSet(std::vector<int32_t> samples) {
  std::sort(samples.begin(), samples.end());
  samples.erase(std::unique(samples.begin(), samples.end()), samples.end());
  const auto& sets = topology_->sample_sets;
  if (!sets.empty() && sets.back() == samples) {
    return static_cast<SampleSetId>(sets.size() - 1);
  }
  auto& mutable_sets = MutableTopology().sample_sets;
  mutable_sets.push_back(std::move(samples));
  return static_cast<SampleSetId>(mutable_sets.size() - 1);
}

void StageGraph::Reserve(int num_stages, int num_edges) {
  stages_.reserve(num_stages);
  MutableTopology().edges.reserve(num_edges);
}

std::string StageGraph::StageName(StageId id) const {
  if (id < 0 || id >= num_stages()) return fmt::format("<invalid stage {}>", id);
  const Stage& s = stages_[id];
  // Compiled formats: a plan names every compute (CompilePlan), a runtime-parsed format string
  // cost more than the rest of the name.
  if (s.module >= 0 && s.module < static_cast<int>(module_names_.size())) {
    return fmt::format(FMT_COMPILE("g{} {} mb{}.{} c{} {}"), s.group, spec::PassShortName(s.pass),
                       s.microbatch, s.sub_microbatch, s.chunk, module_names_[s.module]);
  }
  return fmt::format(FMT_COMPILE("g{} {} mb{}.{} c{} m{}"), s.group, spec::PassShortName(s.pass),
                     s.microbatch, s.sub_microbatch, s.chunk, s.module);
}

StatusOr<StageGraph> StageGraph::WithStages(std::vector<Stage> stages) const {
  if (stages.size() != stages_.size()) {
    return InvalidArgumentError(fmt::format("WithStages: {} stages for a graph of {}",
                                            stages.size(), stages_.size()));
  }
  StageGraph out;
  out.groups_ = groups_;
  out.stages_ = std::move(stages);
  out.module_names_ = module_names_;
  out.grad_syncs_ = grad_syncs_;
  out.topology_ = topology_;  // shared: nothing copied
  if (!finalized_) {
    WEFT_RETURN_IF_ERROR(out.Finalize());
    return out;
  }
  // Groups, gradient syncs and edges passed Finalize here, and the adjacency and topological
  // order depend on the edges alone: what Finalize would find is the new stages' first error.
  WEFT_RETURN_IF_ERROR(out.CheckStages());
  out.finalized_ = true;
  return out;
}

StatusOr<StageGraph> StageGraph::WithoutEdges(std::span<const EdgeId> removed,
                                              std::vector<Stage> stages) const {
  if (stages.size() != stages_.size()) {
    return InvalidArgumentError(fmt::format("WithoutEdges: {} stages for a graph of {}",
                                            stages.size(), stages_.size()));
  }
  std::vector<char> drop(topology_->edges.size(), 0);
  for (EdgeId e : removed) {
    if (e < 0 || e >= num_edges()) {
      return InvalidArgumentError(
          fmt::format("WithoutEdges: edge {} not in [0, {})", e, num_edges()));
    }
    drop[e] = 1;
  }
  StageGraph out;
  out.groups_ = groups_;
  out.stages_ = std::move(stages);
  out.module_names_ = module_names_;
  out.grad_syncs_ = grad_syncs_;
  out.topology_ = topology_;
  Topology& t = out.MutableTopology();
  std::vector<Edge> kept;
  kept.reserve(t.edges.size());
  for (size_t e = 0; e < t.edges.size(); ++e) {
    if (!drop[e]) kept.push_back(t.edges[e]);
  }
  t.edges = std::move(kept);
  WEFT_RETURN_IF_ERROR(out.Finalize());
  return out;
}

Status StageGraph::CheckStages() const {
  for (int i = 0; i < num_stages(); ++i) {
    const Stage& s = stages_[i];
    if (s.group < 0 || s.group >= num_groups()) {
      return InvalidArgumentError(fmt::format("stages[{}].group = {}; must be in [0, {})", i,
                                              s.group, num_groups()));
    }
    if (!(s.latency_s >= 0) || !std::isfinite(s.latency_s)) {
      return InvalidArgumentError(fmt::format("stages[{}].latency_s = {}; must be finite and >= 0",
                                              i, s.latency_s));
    }
    if (s.activation_alloc_bytes < 0 || s.activation_free_bytes < 0) {
      return InvalidArgumentError(
          fmt::format("stages[{}]: activation_alloc_bytes = {}, activation_free_bytes = {}; must "
                      "be >= 0",
                      i, s.activation_alloc_bytes, s.activation_free_bytes));
    }
    if (s.chunk < 0 || s.microbatch < 0 || s.sub_microbatch < 0) {
      return InvalidArgumentError(fmt::format(
          "stages[{}]: chunk = {}, microbatch = {}, sub_microbatch = {}; must be >= 0", i, s.chunk,
          s.microbatch, s.sub_microbatch));
    }
    if (s.samples < -1 || s.samples >= num_sample_sets() || s.instance_begin < 0 ||
        s.instance_end < s.instance_begin) {
      return InvalidArgumentError(fmt::format(
          "stages[{}]: samples = {}, instances [{}, {}); need a sample set in [-1, {}) and "
          "0 <= begin <= end",
          i, s.samples, s.instance_begin, s.instance_end, num_sample_sets()));
    }
  }
  return OkStatus();
}

Status StageGraph::Finalize() {
  const int n = num_stages();
  for (int g = 0; g < num_groups(); ++g) {
    const DeviceGroup& group = groups_[g];
    if (group.num_gpus < 1) {
      return InvalidArgumentError(
          fmt::format("groups[{}].num_gpus = {}; must be >= 1", g, group.num_gpus));
    }
    if (group.dp < 1) {
      return InvalidArgumentError(fmt::format("groups[{}].dp = {}; must be >= 1", g, group.dp));
    }
    if (group.first_gpu < 0 || group.dp_stride_gpus < 0) {
      return InvalidArgumentError(fmt::format(
          "groups[{}].first_gpu = {}, dp_stride_gpus = {}; must be >= 0", g, group.first_gpu,
          group.dp_stride_gpus));
    }
    if (group.static_bytes < 0 || group.grad_sync_bytes < 0 || group.optimizer_bytes < 0) {
      return InvalidArgumentError(
          fmt::format("groups[{}]: static_bytes, grad_sync_bytes, optimizer_bytes must be >= 0", g));
    }
  }
  {
    std::set<std::pair<GroupId, int>> synced;  // (group, module)
    for (size_t k = 0; k < grad_syncs_.size(); ++k) {
      const GradSync& sync = grad_syncs_[k];
      if (sync.groups.empty() || sync.bytes < 0 || sync.module < 0) {
        return InvalidArgumentError(fmt::format(
            "grad_syncs[{}]: needs >= 1 group, module >= 0 and bytes >= 0", k));
      }
      for (size_t j = 0; j < sync.groups.size(); ++j) {
        const GroupId g = sync.groups[j];
        if (g < 0 || g >= num_groups() || (j > 0 && g <= sync.groups[j - 1])) {
          return InvalidArgumentError(fmt::format(
              "grad_syncs[{}].groups[{}] = {}; groups must be strictly ascending in [0, {})", k, j,
              g, num_groups()));
        }
        if (groups_[g].dp != 1) {
          return InvalidArgumentError(fmt::format(
              "grad_syncs[{}] names group {} whose dp = {}; unfolded replicas have dp 1", k, g,
              groups_[g].dp));
        }
        if (!synced.insert({g, sync.module}).second) {
          return InvalidArgumentError(fmt::format(
              "grad_syncs[{}]: group {} already all-reduces module {} in another set", k, g,
              sync.module));
        }
      }
    }
  }
  WEFT_RETURN_IF_ERROR(CheckStages());
  const std::vector<Edge>& edges = topology_->edges;
  for (int e = 0; e < num_edges(); ++e) {
    const Edge& edge = edges[e];
    if (edge.from < 0 || edge.from >= n || edge.to < 0 || edge.to >= n) {
      return InvalidArgumentError(fmt::format("edges[{}] = {} -> {}; stage ids must be in [0, {})",
                                              e, edge.from, edge.to, n));
    }
    if (edge.from == edge.to) {
      return InvalidArgumentError(fmt::format("edges[{}] = {} -> {}; self edges are not allowed",
                                              e, edge.from, edge.to));
    }
    if (edge.bytes < 0) {
      return InvalidArgumentError(fmt::format("edges[{}].bytes = {}; must be >= 0", e, edge.bytes));
    }
    if (edge.samples < -1 || edge.samples >= num_sample_sets() || edge.rows < -1) {
      return InvalidArgumentError(fmt::format(
          "edges[{}]: samples = {}, rows = {}; need a sample set in [-1, {}) and rows >= -1", e,
          edge.samples, edge.rows, num_sample_sets()));
    }
  }
  // CSR by counting sort (stable: insertion order inside each stage).
  Topology& t = MutableTopology();
  t.out_begin.assign(n + 1, 0);
  t.in_begin.assign(n + 1, 0);
  for (const Edge& edge : t.edges) {
    ++t.out_begin[edge.from + 1];
    ++t.in_begin[edge.to + 1];
  }
  for (int i = 0; i < n; ++i) {
    t.out_begin[i + 1] += t.out_begin[i];
    t.in_begin[i + 1] += t.in_begin[i];
  }
  t.out_ids.resize(t.edges.size());
  t.in_ids.resize(t.edges.size());
  {
    std::vector<int32_t> out_fill(t.out_begin.begin(), t.out_begin.end() - 1);
    std::vector<int32_t> in_fill(t.in_begin.begin(), t.in_begin.end() - 1);
    for (int e = 0; e < num_edges(); ++e) {
      t.out_ids[out_fill[t.edges[e].from]++] = e;
      t.in_ids[in_fill[t.edges[e].to]++] = e;
    }
  }
  // Kahn's algorithm, smallest id first (deterministic).
  std::vector<int32_t> indegree(n);
  for (int i = 0; i < n; ++i) indegree[i] = t.in_begin[i + 1] - t.in_begin[i];
  ReadyIds ready(n);
  for (int i = 0; i < n; ++i) {
    if (indegree[i] == 0) ready.Insert(i);
  }
  t.topo.resize(n);
  int sorted = 0;
  while (!ready.empty()) {
    const StageId s = ready.PopMin();
    t.topo[sorted++] = s;
    for (EdgeId e : out_edges(s)) {
      if (--indegree[t.edges[e].to] == 0) ready.Insert(t.edges[e].to);
    }
  }
  if (sorted != n) {
    StageId on_cycle = 0;
    for (int i = 0; i < n; ++i) {
      if (indegree[i] > 0) {
        on_cycle = i;
        break;
      }
    }
    // Walk back along unprocessed predecessors: after n steps we are on a cycle.
    for (int step = 0; step < n; ++step) {
      for (EdgeId e : in_edges(on_cycle)) {
        if (indegree[t.edges[e].from] > 0) {
          on_cycle = t.edges[e].from;
          break;
        }
      }
    }
    t.topo.clear();
    return InvalidArgumentError(fmt::format(
        "stage graph has a dependency cycle through stage {} ({}); edges must form a DAG",
        on_cycle, StageName(on_cycle)));
  }
  finalized_ = true;
  return OkStatus();
}

}  // namespace weft::graph
