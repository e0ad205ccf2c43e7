#include "weft/plan/validator.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "internal.h"

namespace weft::plan {

namespace internal {

std::string FormatBytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (std::abs(b) >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  if (std::abs(b) >= 1024.0 * 1024) return fmt::format("{:.2f} MiB", b / (1024.0 * 1024));
  if (std::abs(b) >= 1024.0) return fmt::format("{:.2f} KiB", b / 1024.0);
  return fmt::format("{} B", bytes);
}

}  // namespace internal

namespace {

using internal::FormatBytes;

enum class BufferState : uint8_t { kUndefined, kPendingRecv, kReady, kFreed };

struct BufferTrack {
  BufferState state = BufferState::kUndefined;
  int64_t bytes = 0;
  int defined_at = -1;   // action that produced it / posted the irecv
  int freed_at = -1;     // action that freed it
  int inflight_sends = 0;
  int waited_sends = 0;  // isends of it completed by a wait_send
};

// Per rank and action: the ordinal of an isend / irecv on its channel, or for a wait the ordinal
// of the post it waits for. -1 otherwise.
struct ChannelRef {
  int channel = -1;  // Channel::id
  int ordinal = -1;
};

bool UsesBuffer(ActionKind kind) {
  return kind == ActionKind::kIsend || kind == ActionKind::kIrecv ||
         kind == ActionKind::kWaitSend || kind == ActionKind::kWaitRecv ||
         kind == ActionKind::kFree;
}

// "forward m0 c1 mb3": a stage in messages.
std::string DescribeStage(const StageRef& stage) {
  Action a;
  a.kind = ComputeKindOf(stage.pass);
  a.stage = stage;
  return DescribeAction(a);
}

bool UsesPeer(ActionKind kind) {
  return kind == ActionKind::kIsend || kind == ActionKind::kIrecv ||
         kind == ActionKind::kWaitSend || kind == ActionKind::kWaitRecv;
}

// Buffer id -> index into one rank's buffers: open addressing with linear probing. Every action
// looks up the buffers it names, several times over the checks; std::unordered_map's node per
// entry and sorted-vector searches cost more than the checks themselves.
class BufferIndex {
 public:
  // Indexes `buffers` in order; returns the index of the first buffer whose id an earlier one
  // already declared (that one stays indexed), or -1.
  int Build(const std::vector<Buffer>& buffers) {
    int log2_capacity = 4;
    while ((size_t{1} << log2_capacity) < 2 * buffers.size()) ++log2_capacity;
    shift_ = 64 - log2_capacity;
    slots_.assign(size_t{1} << log2_capacity, Slot{});
    for (size_t i = 0; i < buffers.size(); ++i) {
      Slot& slot = slots_[Probe(buffers[i].id)];
      if (slot.index >= 0) return static_cast<int>(i);
      slot = Slot{buffers[i].id, static_cast<int>(i)};
    }
    return -1;
  }
  // The index of buffer `id`, or -1.
  int Find(BufferId id) const { return slots_[Probe(id)].index; }

 private:
  struct Slot {
    BufferId id = 0;
    int index = -1;  // -1 = empty
  };
  // The slot holding `id`, or the empty slot where it would go (the table is at most half full).
  size_t Probe(BufferId id) const {
    // Fibonacci hashing: the top bits of id * 2^64 / golden ratio.
    size_t k = static_cast<size_t>((static_cast<uint64_t>(id) * 0x9E3779B97F4A7C15ULL) >> shift_);
    while (slots_[k].index >= 0 && slots_[k].id != id) k = (k + 1) & (slots_.size() - 1);
    return k;
  }

  int shift_ = 60;
  std::vector<Slot> slots_ = std::vector<Slot>(16);
};

class Validator {
 public:
  Validator(const ExecutionPlan& plan, const ValidateOptions& options)
      : plan_(plan), options_(options), num_ranks_(plan.num_ranks()) {}

  StatusOr<ValidationReport> Run() {
    if (num_ranks_ == 0) return InvalidArgumentError("plan.ranks is empty; need >= 1 rank");
    if (plan_.num_replicas < 1 || plan_.replica < 0 || plan_.replica >= plan_.num_replicas) {
      return InvalidArgumentError(
          fmt::format("replica = {}, num_replicas = {}; need 0 <= replica < num_replicas",
                      plan_.replica, plan_.num_replicas));
    }
    report_.ranks.resize(num_ranks_);
    refs_.resize(num_ranks_);
    isends_.resize(num_ranks_);
    collective_at_.resize(num_ranks_);
    for (int r = 0; r < num_ranks_; ++r) {
      refs_[r].resize(plan_.ranks[r].actions.size());
      WEFT_RETURN_IF_ERROR(CheckStructure(r));
    }
    WEFT_RETURN_IF_ERROR(CheckData());
    for (int r = 0; r < num_ranks_; ++r) WEFT_RETURN_IF_ERROR(CheckStages(r));
    WEFT_RETURN_IF_ERROR(CheckMatching());
    WEFT_RETURN_IF_ERROR(CheckCollectives());
    Status memory_error;
    for (int r = 0; r < num_ranks_; ++r) {
      WEFT_RETURN_IF_ERROR(CheckDataFlow(r, memory_error));
    }
    WEFT_RETURN_IF_ERROR(Replay());
    if (!memory_error.ok()) return memory_error;
    return report_;
  }

 private:
  // The posts between one ordered rank pair (src -> dst), which NCCL matches in order.
  struct Channel {
    int id = 0;  // dense, in order of first use (the replay counts posts per id)
    std::vector<int> sends, recvs;  // action indices of its isends on src / irecvs on dst, in order
  };
  Channel& ChannelOf(int src, int dst) {
    auto [it, fresh] = channels_.try_emplace(src * num_ranks_ + dst);
    if (fresh) it->second.id = static_cast<int>(channels_.size()) - 1;
    return it->second;
  }

  std::string Loc(int rank, int index) const { return ActionLocation(plan_, rank, index); }
  Status Error(int rank, int index, const std::string& reason) const {
    return InvalidArgumentError(Loc(rank, index) + ": " + reason);
  }

  Status CheckStructure(int r) {
    const RankPlan& rank = plan_.ranks[r];
    const int first_duplicate = buffer_index_.emplace_back().Build(rank.buffers);
    for (size_t i = 0; i < rank.buffers.size(); ++i) {
      const Buffer& b = rank.buffers[i];
      if (static_cast<int>(i) == first_duplicate) {
        return InvalidArgumentError(fmt::format(
            "ranks[{}].buffers[{}].id = {}; declared twice on rank {}", r, i, b.id, r));
      }
      for (int64_t d : b.tensor.shape) {
        if (d < 0) {
          return InvalidArgumentError(fmt::format("ranks[{}].buffers[{}].shape = {}; dims must be >= 0",
                                                  r, i, b.tensor.ToString()));
        }
      }
      WEFT_RETURN_IF_ERROR(CheckBufferFields(r, static_cast<int>(i), b));
    }
    if (rank.static_bytes < 0 || rank.memory_capacity_bytes < 0) {
      return InvalidArgumentError(
          fmt::format("ranks[{}]: static_bytes ({}) and memory_capacity_bytes ({}) must be >= 0", r,
                      rank.static_bytes, rank.memory_capacity_bytes));
    }
    const int num_modules = static_cast<int>(plan_.module_names.size());
    std::unordered_map<int, int> group_last_index;  // batch group id -> last action index
    // Per module the index of its last weight-gradient compute on the rank and of its
    // all_reduce_grads; -1 = none. (Modules out of range are refused at their action.) The last
    // weight gradient is the later of the last one before the current action and the last one
    // after the rank's first all_reduce_grads, found by one scan of that tail (the reduces end
    // a compiled rank's list, so the tail is short; no pass over the whole list).
    std::vector<int> last_weight_gradient(num_modules, -1), reduce_at(num_modules, -1);
    std::vector<int> last_weight_gradient_in_tail;
    auto note_weight_gradient = [&](std::vector<int>& last, int i) {
      const Action& a = rank.actions[i];
      if (IsWeightGradient(a.kind) && a.stage.module >= 0 && a.stage.module < num_modules) {
        last[a.stage.module] = i;
      }
    };
    for (int i = 0; i < static_cast<int>(rank.actions.size()); ++i) {
      const Action& a = rank.actions[i];
      auto known = [&](BufferId id) { return FindBuffer(r, id) >= 0; };
      if (a.stage.module < 0 || a.stage.module >= num_modules) {
        return Error(r, i, fmt::format("module {} is not in modules (the plan names {})",
                                       a.stage.module, num_modules));
      }
      note_weight_gradient(last_weight_gradient, i);
      if (IsCompute(a.kind)) {
        if (a.stage.pass != PassOf(a.kind)) {
          return Error(r, i,
                       fmt::format("stage pass {} does not match the action kind",
                                   spec::PassShortName(a.stage.pass)));
        }
        for (BufferId id : a.inputs) {
          const int index = FindBuffer(r, id);
          if (index < 0) {
            return Error(r, i, fmt::format("input buf {} is not declared on rank {}", id, r));
          }
          const Buffer& b = rank.buffers[index];
          if (!(b.consumer == BufferEnd{r, a.stage})) {
            return Error(r, i, fmt::format("reads buf {} whose consumer is {}", id,
                                           DescribeBufferEnd(b.consumer)));
          }
        }
        for (BufferId id : a.outputs) {
          const int index = FindBuffer(r, id);
          if (index < 0) {
            return Error(r, i, fmt::format("output buf {} is not declared on rank {}", id, r));
          }
          if (std::find(a.inputs.begin(), a.inputs.end(), id) != a.inputs.end()) {
            return Error(r, i, fmt::format("buf {} is both input and output", id));
          }
          const Buffer& b = rank.buffers[index];
          if (!(b.producer == BufferEnd{r, a.stage})) {
            return Error(r, i, fmt::format("writes buf {} whose producer is {}", id,
                                           DescribeBufferEnd(b.producer)));
          }
        }
        if (a.activation_alloc_bytes < 0 || a.activation_free_bytes < 0) {
          return Error(r, i, "activation bytes must be >= 0");
        }
        if (Status s = CheckSamples(a.samples); !s.ok()) {
          return Error(r, i, fmt::format("samples {}", s.message()));
        }
        if (a.instance_begin < 0 || a.instance_begin > a.instance_end) {
          return Error(r, i, fmt::format("instances [{}, {}); need 0 <= begin <= end",
                                         a.instance_begin, a.instance_end));
        }
        for (int16_t layers : a.recompute_layers) {
          if (layers < 0) {
            return Error(r, i,
                         fmt::format("recompute_layers [{}]; layer counts must be >= 0",
                                     fmt::join(a.recompute_layers, ",")));
          }
        }
      }
      if (UsesBuffer(a.kind) && !known(a.buffer)) {
        return Error(r, i, fmt::format("buf {} is not declared on rank {}", a.buffer, r));
      }
      if (UsesPeer(a.kind)) {
        if (a.peer < 0 || a.peer >= num_ranks_) {
          return Error(r, i, fmt::format("peer {} is not a rank (plan has {} ranks)", a.peer, num_ranks_));
        }
        if (a.peer == r) return Error(r, i, "peer is the rank itself; use a local buffer");
      }
      // The k-th isend of a channel (rank pair src -> dst) and the k-th irecv: CheckMatching
      // pairs them, the replay counts them. (Collected here, in this one pass over the actions.)
      if (a.kind == ActionKind::kIsend) {
        const int index = FindBuffer(r, a.buffer);
        const Buffer& b = rank.buffers[index];
        if (b.producer.rank != r || b.consumer.rank != a.peer) {
          return Error(r, i, fmt::format("sends buf {} ({} -> {}) from rank {} to rank {}", a.buffer,
                                         DescribeBufferEnd(b.producer),
                                         DescribeBufferEnd(b.consumer), r, a.peer));
        }
        Channel& channel = ChannelOf(r, a.peer);
        refs_[r][i] = {channel.id, static_cast<int>(channel.sends.size())};
        channel.sends.push_back(i);
        isends_[r].push_back({index, i});
      }
      if (a.kind == ActionKind::kIrecv) {
        const Buffer& b = BufferOf(r, a.buffer);
        if (b.consumer.rank != r || b.producer.rank != a.peer) {
          return Error(r, i, fmt::format("receives buf {} ({} -> {}) from rank {} on rank {}",
                                         a.buffer, DescribeBufferEnd(b.producer),
                                         DescribeBufferEnd(b.consumer), a.peer, r));
        }
        Channel& channel = ChannelOf(a.peer, r);
        refs_[r][i] = {channel.id, static_cast<int>(channel.recvs.size())};
        channel.recvs.push_back(i);
      }
      if (a.kind == ActionKind::kAllReduceGrads) {
        if (a.dp < 1) return Error(r, i, fmt::format("dp = {}; must be >= 1", a.dp));
        if (!a.ranks.empty()) {
          WEFT_RETURN_IF_ERROR(CheckCollectiveRanks(r, i, a));
        }
        if (a.bytes < 0) return Error(r, i, fmt::format("bytes = {}; must be >= 0", a.bytes));
        if (reduce_at[a.stage.module] >= 0) {
          return Error(r, i, fmt::format("module {} is all-reduced twice on rank {} (also at "
                                         "action {})",
                                         a.stage.module, r, reduce_at[a.stage.module]));
        }
        reduce_at[a.stage.module] = i;
        if (last_weight_gradient_in_tail.empty()) {
          last_weight_gradient_in_tail.assign(num_modules, -1);
          for (int j = i + 1; j < static_cast<int>(rank.actions.size()); ++j) {
            note_weight_gradient(last_weight_gradient_in_tail, j);
          }
        }
        const int last = std::max(last_weight_gradient[a.stage.module],
                                  last_weight_gradient_in_tail[a.stage.module]);
        if (last < 0) {
          return Error(r, i, fmt::format("module {} has no backward / backward_weight on rank {}; "
                                         "no gradients to all-reduce", a.stage.module, r));
        }
        if (last > i) {
          return Error(r, i, fmt::format("comes before the module's last weight-gradient compute "
                                         "({}); its gradients are not complete yet",
                                         Loc(r, last)));
        }
        if (!a.ranks.empty()) collective_at_[r][a.stage.module] = i;
      }
      if (a.group >= 0) {
        if (!IsP2pPost(a.kind)) return Error(r, i, "only isend / irecv may carry a batch group");
        auto it = group_last_index.find(a.group);
        if (it != group_last_index.end() && it->second != i - 1) {
          return Error(r, i, fmt::format("batch group {} is not contiguous (also at action {})",
                                         a.group, it->second));
        }
        group_last_index[a.group] = i;
      }
    }
    return OkStatus();
  }

  // Every stage of the rank runs exactly once and whole: per (module, chunk, microbatch,
  // sub-microbatch) at most one forward, one backward or backward_input, one backward_weight; a
  // backward / backward_input after its forward, a backward_weight after its backward_input;
  // within one (module, chunk) either every forward has its backward or none (a frozen chunk),
  // and either every backward_input has its backward_weight or none (a frozen chunk that passes
  // input gradients on). And every buffer whose producer
  // (consumer) is a stage of this rank is among that stage's compute's outputs (inputs).
  Status CheckStages(int r) const {
    const RankPlan& rank = plan_.ranks[r];
    struct Runs {
      int forward = -1, backward = -1, weight = -1;  // action indices; backward: B or B_input
      bool split = false;                            // the backward is a backward_input
    };
    using Key = std::array<int, 4>;  // module, chunk, microbatch, sub-microbatch
    auto key_of = [](const StageRef& s) {
      return Key{s.module, s.chunk, s.microbatch, s.sub_microbatch};
    };
    std::map<Key, Runs> runs;
    const int num_buffers = static_cast<int>(rank.buffers.size());
    std::vector<char> read(num_buffers, 0), written(num_buffers, 0);
    for (int i = 0; i < static_cast<int>(rank.actions.size()); ++i) {
      const Action& a = rank.actions[i];
      if (!IsCompute(a.kind)) continue;
      for (BufferId id : a.inputs) read[FindBuffer(r, id)] = 1;
      for (BufferId id : a.outputs) written[FindBuffer(r, id)] = 1;
      Runs& run = runs[key_of(a.stage)];
      int& slot = a.kind == ActionKind::kForward          ? run.forward
                  : a.kind == ActionKind::kBackwardWeight ? run.weight
                                                          : run.backward;
      if (slot >= 0) {
        return Error(r, i,
                     fmt::format("the stage's {} already ran at action {}; every stage runs "
                                 "exactly once on its rank",
                                 a.kind == ActionKind::kForward          ? "forward"
                                 : a.kind == ActionKind::kBackwardWeight ? "backward_weight"
                                                                         : "backward",
                                 slot));
      }
      slot = i;
      if (a.kind == ActionKind::kBackward || a.kind == ActionKind::kBackwardInput) {
        run.split = a.kind == ActionKind::kBackwardInput;
        if (run.forward < 0) {
          return Error(r, i,
                       fmt::format("no forward of this stage runs earlier on rank {}; a "
                                   "backward needs its forward",
                                   r));
        }
      }
      if (a.kind == ActionKind::kBackwardWeight && (run.backward < 0 || !run.split)) {
        return Error(r, i,
                     fmt::format("no backward_input of this stage runs earlier on rank {}; "
                                 "a backward_weight follows its backward_input",
                                 r));
      }
    }
    // A split backward without its weight gradient, and a chunk whose forwards disagree on
    // having a backward: reported at the least action index.
    // (A frozen module downstream of a trained one runs backward_input alone: its chunks have
    // no backward_weight at all.)
    int missing_weight = -1, missing_backward = -1;
    // Per (module, chunk): stages [without, with] a backward (of those with a forward), and
    // split backwards [without, with] a backward_weight.
    std::map<std::pair<int, int>, std::array<int, 2>> trained, weighted;
    for (const auto& [key, run] : runs) {
      if (run.forward >= 0) ++trained[{key[0], key[1]}][run.backward >= 0 ? 1 : 0];
      if (run.split) ++weighted[{key[0], key[1]}][run.weight >= 0 ? 1 : 0];
    }
    for (const auto& [key, run] : runs) {
      if (run.split && run.weight < 0 && weighted[{key[0], key[1]}][1] > 0 &&
          (missing_weight < 0 || run.backward < missing_weight)) {
        missing_weight = run.backward;
      }
    }
    if (missing_weight >= 0) {
      const Action& a = rank.actions[missing_weight];
      return Error(r, missing_weight,
                   fmt::format("no backward_weight of this stage follows on rank {} while {} other "
                               "split backwards of module {} chunk {} have one (the weight "
                               "gradient is never computed)",
                               r, weighted[{a.stage.module, a.stage.chunk}][1], a.stage.module,
                               a.stage.chunk));
    }
    for (const auto& [key, run] : runs) {
      const auto& [without, with] = trained[{key[0], key[1]}];
      if (run.forward >= 0 && run.backward < 0 && with > 0 &&
          (missing_backward < 0 || run.forward < missing_backward)) {
        missing_backward = run.forward;
      }
    }
    if (missing_backward >= 0) {
      const Action& a = rank.actions[missing_backward];
      return Error(r, missing_backward,
                   fmt::format("no backward of this stage runs on rank {} while {} other stages of "
                               "module {} chunk {} have one; every stage runs exactly once",
                               r, trained[{a.stage.module, a.stage.chunk}][1], a.stage.module,
                               a.stage.chunk));
    }
    // The stage a transfer, wait or free names is its buffer's producer or consumer on this
    // rank: a runtime keys its tensors by it.
    for (int i = 0; i < static_cast<int>(rank.actions.size()); ++i) {
      const Action& a = rank.actions[i];
      if (!UsesBuffer(a.kind)) continue;
      const Buffer& b = BufferOf(r, a.buffer);
      if (!(b.producer.rank == r && a.stage == b.producer.stage) &&
          !(b.consumer.rank == r && a.stage == b.consumer.stage)) {
        return Error(r, i,
                     fmt::format("names stage {} which is not an end of buf {} on rank {} "
                                 "({} -> {})",
                                 DescribeStage(a.stage), a.buffer, r, DescribeBufferEnd(b.producer),
                                 DescribeBufferEnd(b.consumer)));
      }
    }
    // The compute a buffer end names: the action index, or -1.
    auto compute_of = [&](const StageRef& s) {
      auto it = runs.find(key_of(s));
      if (it == runs.end()) return -1;
      const Runs& run = it->second;
      switch (s.pass) {
        case spec::Pass::kForward:
          return run.forward;
        case spec::Pass::kBackwardWeight:
          return run.weight;
        default: {
          if (run.backward < 0) return -1;
          return PassOf(rank.actions[run.backward].kind) == s.pass ? run.backward : -1;
        }
      }
    };
    for (int k = 0; k < num_buffers; ++k) {
      const Buffer& b = rank.buffers[k];
      for (const auto& [end, done, role, list] :
           {std::tuple<const BufferEnd&, char, const char*, const char*>{b.consumer, read[k],
                                                                         "consumer", "inputs"},
            std::tuple<const BufferEnd&, char, const char*, const char*>{b.producer, written[k],
                                                                         "producer", "outputs"}}) {
        if (end.rank != r || done) continue;
        const int at = compute_of(end.stage);
        if (at < 0) {
          return InvalidArgumentError(
              fmt::format("ranks[{}].buffers[{}] (buf {}): its {} {} is not computed on rank {}", r,
                          k, b.id, role, DescribeBufferEnd(end), r));
        }
        return Error(
            r, at,
            fmt::format(
                "buf {} is not among its {} [{}] but names this stage as "
                "its {}",
                b.id, list,
                fmt::join(role[0] == 'c' ? rank.actions[at].inputs : rank.actions[at].outputs, ","),
                role));
      }
    }
    return OkStatus();
  }

  // Strictly ascending sample ids >= 0.
  static Status CheckSamples(const std::vector<int32_t>& samples) {
    // Strictly ascending from a first id >= 0 (every list of a valid plan): nothing to report.
    if (samples.empty() || (samples.front() >= 0 &&
                            std::adjacent_find(samples.begin(), samples.end(),
                                               std::greater_equal<>()) == samples.end())) {
      return OkStatus();
    }
    for (size_t k = 0; k < samples.size(); ++k) {
      if (samples[k] < 0) {
        return InvalidArgumentError(fmt::format("[{}] = {}; must be >= 0", k, samples[k]));
      }
      if (k > 0 && samples[k] <= samples[k - 1]) {
        return InvalidArgumentError(fmt::format(
            "[{}] = {}; must be > the previous entry ({}): samples are strictly ascending", k,
            samples[k], samples[k - 1]));
      }
    }
    return OkStatus();
  }

  // The data tables (plan_data.h), when the plan has them: the tables' ids in range and in
  // order, and every compute action's microbatch, instances, samples and chunk found in them.
  Status CheckData() const {
    const PlanData& d = plan_.data;
    if (d.empty()) return OkStatus();
    const int num_samples = static_cast<int>(d.samples.size());
    const int num_sequences = static_cast<int>(d.sequences.size());
    const int num_modules = static_cast<int>(plan_.module_names.size());
    auto sample_error = [&](const std::string& where, int32_t s) {
      return InvalidArgumentError(fmt::format(
          "{} = {}; must be in [0, {}) (the samples of data.samples)", where, s, num_samples));
    };
    if (static_cast<int>(d.ranks.size()) != num_ranks_) {
      return InvalidArgumentError(fmt::format("data.ranks has {} entries; the plan has {} ranks",
                                              d.ranks.size(), num_ranks_));
    }
    for (int q = 0; q < num_sequences; ++q) {
      const std::vector<int32_t>& samples = d.sequences[q].samples;
      for (size_t k = 0; k < samples.size(); ++k) {
        if (samples[k] < 0 || samples[k] >= num_samples) {
          return sample_error(fmt::format("data.sequences[{}].samples[{}]", q, k), samples[k]);
        }
      }
    }
    // Per microbatch its samples (those of its sequences), sorted: every sample an instance or a
    // compute of the microbatch names is one of them.
    std::vector<std::vector<int32_t>> mb_samples(d.microbatches.size());
    auto in_microbatch = [&](size_t index, int32_t s) {
      return std::binary_search(mb_samples[index].begin(), mb_samples[index].end(), s);
    };
    for (size_t i = 0; i < d.microbatches.size(); ++i) {
      const MicrobatchData& m = d.microbatches[i];
      const std::string where = fmt::format("data.microbatches[{}]", i);
      const bool first_of_replica = i == 0 || d.microbatches[i - 1].replica != m.replica;
      const bool in_order =
          m.replica >= 0 &&
          (first_of_replica ? m.microbatch == 0 && (i == 0 || d.microbatches[i - 1].replica <
                                                                  m.replica)
                            : m.microbatch == d.microbatches[i - 1].microbatch + 1);
      if (!in_order) {
        return InvalidArgumentError(fmt::format(
            "{} is (replica {}, microbatch {}); the table must be sorted by replica with each "
            "replica's microbatches numbered 0, 1, ... without gaps",
            where, m.replica, m.microbatch));
      }
      for (size_t k = 0; k < m.sequences.size(); ++k) {
        if (m.sequences[k] < 0 || m.sequences[k] >= num_sequences) {
          return InvalidArgumentError(fmt::format(
              "{}.sequences[{}] = {}; must be in [0, {}) (the sequences of data.sequences)",
              where, k, m.sequences[k], num_sequences));
        }
        const auto& samples = d.sequences[m.sequences[k]].samples;
        mb_samples[i].insert(mb_samples[i].end(), samples.begin(), samples.end());
      }
      std::sort(mb_samples[i].begin(), mb_samples[i].end());
      if (static_cast<int>(m.instances.size()) != num_modules) {
        return InvalidArgumentError(
            fmt::format("{}.instances has {} lists; the plan has {} modules", where,
                        m.instances.size(), num_modules));
      }
      for (int module = 0; module < num_modules; ++module) {
        const std::vector<InstanceData>& list = m.instances[module];
        for (size_t k = 0; k < list.size(); ++k) {
          const InstanceData& inst = list[k];
          const std::string at = fmt::format("{}.instances[{}][{}]", where, module, k);
          if (inst.samples.size() != inst.tokens.size()) {
            return InvalidArgumentError(fmt::format("{}: {} samples for {} segments", at,
                                                    inst.samples.size(), inst.tokens.size()));
          }
          for (size_t j = 0; j < inst.samples.size(); ++j) {
            const int32_t s = inst.samples[j];
            if (s < 0 || s >= num_samples) {
              return sample_error(fmt::format("{}.samples[{}]", at, j), s);
            }
            if (!in_microbatch(i, s)) {
              return InvalidArgumentError(fmt::format(
                  "{}.samples[{}] = {}; not a sample of the microbatch's sequences", at, j, s));
            }
            if (inst.tokens[j] < 0) {
              return InvalidArgumentError(
                  fmt::format("{}.tokens[{}] = {}; must be >= 0", at, j, inst.tokens[j]));
            }
          }
          if (inst.unpadded_tokens < 0 || inst.unpadded_tokens > inst.TotalTokens()) {
            return InvalidArgumentError(fmt::format("{}.unpadded_tokens = {}; must be in [0, {}]",
                                                    at, inst.unpadded_tokens,
                                                    inst.TotalTokens()));
          }
        }
      }
    }
    for (int r = 0; r < num_ranks_; ++r) {
      const RankData& rd = d.ranks[r];
      for (size_t c = 0; c < rd.chunks.size(); ++c) {
        const ChunkData& chunk = rd.chunks[c];
        if (chunk.module < 0 || chunk.module >= num_modules || chunk.chunk < 0 ||
            chunk.first_layer < 0 || chunk.num_layers < 0) {
          return InvalidArgumentError(fmt::format(
              "data.ranks[{}].chunks[{}] = (module {}, chunk {}, layers {} + {}); need a module "
              "< {} and the rest >= 0",
              r, c, chunk.module, chunk.chunk, chunk.first_layer, chunk.num_layers, num_modules));
        }
        for (size_t e = 0; e < c; ++e) {
          if (rd.chunks[e].module == chunk.module && rd.chunks[e].chunk == chunk.chunk) {
            return InvalidArgumentError(fmt::format(
                "data.ranks[{}].chunks[{}]: module {} has a chunk in slot {} already ([{}])", r,
                c, chunk.module, chunk.chunk, e));
          }
        }
      }
      for (size_t b = 0; b < plan_.ranks[r].buffers.size(); ++b) {
        const std::vector<int32_t>& samples = plan_.ranks[r].buffers[b].samples;
        if (!samples.empty() && samples.back() >= num_samples) {  // ascending (CheckStructure)
          return sample_error(fmt::format("ranks[{}].buffers[{}].samples[{}]", r, b,
                                          samples.size() - 1),
                              samples.back());
        }
      }
      const std::vector<Action>& actions = plan_.ranks[r].actions;
      int last_mb = -1, index = -1;  // computes of one microbatch tend to come in runs
      for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
        const Action& a = actions[i];
        // Computes, and the transfers, waits and frees that name a stage of this rank.
        if (!IsCompute(a.kind) && !UsesBuffer(a.kind)) continue;
        if (a.stage.microbatch != last_mb) {
          last_mb = a.stage.microbatch;
          index = d.FindMicrobatch(rd.replica, last_mb);
        }
        if (index < 0) {
          return Error(r, i, fmt::format("microbatch {} of replica {} (data.ranks[{}].replica) is "
                                         "not in data.microbatches",
                                         a.stage.microbatch, rd.replica, r));
        }
        const auto held = std::find_if(rd.chunks.begin(), rd.chunks.end(), [&](const ChunkData& c) {
          return c.module == a.stage.module && c.chunk == a.stage.chunk;
        });
        if (!IsCompute(a.kind)) {
          if (held == rd.chunks.end()) {
            return Error(r, i,
                         fmt::format("the rank holds no chunk of module {} in slot {} "
                                     "(data.ranks[{}].chunks)",
                                     a.stage.module, a.stage.chunk, r));
          }
          continue;
        }
        const int num_instances =
            static_cast<int>(d.microbatches[index].instances[a.stage.module].size());
        if (a.instance_end > num_instances) {
          return Error(r, i, fmt::format("instances [{}, {}); the microbatch has {} instances of "
                                         "module {} (data.microbatches[{}])",
                                         a.instance_begin, a.instance_end, num_instances,
                                         a.stage.module, index));
        }
        for (int32_t s : a.samples) {
          if (!in_microbatch(index, s)) {
            return Error(r, i, fmt::format("sample {} is not in microbatch {} of replica {} "
                                           "(data.microbatches[{}])",
                                           s, a.stage.microbatch, rd.replica, index));
          }
        }
        if (held == rd.chunks.end()) {
          return Error(r, i, fmt::format("the rank holds no chunk of module {} in slot {} "
                                         "(data.ranks[{}].chunks)",
                                         a.stage.module, a.stage.chunk, r));
        }
        // A per-layer recompute mix covers the chunk's layers exactly (graph::Stage).
        if (a.recompute_layers != std::array<int16_t, 4>{}) {
          int layers = 0;
          for (int16_t n : a.recompute_layers) layers += n;
          if (layers != held->num_layers) {
            return Error(
                r, i,
                fmt::format(
                    "recompute_layers [{}] cover {} layers; the chunk (module {}, slot {}) has {} "
                    "layers (data.ranks[{}].chunks[{}])",
                    fmt::join(a.recompute_layers, ","), layers, a.stage.module, a.stage.chunk,
                    held->num_layers, r, held - rd.chunks.begin()));
          }
        }
      }
    }
    return OkStatus();
  }

  Status CheckBufferFields(int r, int i, const Buffer& b) const {
    // Formatted only for an error (this runs for every buffer).
    auto where = [&] { return fmt::format("ranks[{}].buffers[{}]", r, i); };
    const int num_modules = static_cast<int>(plan_.module_names.size());
    for (const auto& [key, end] : {std::pair<const char*, const BufferEnd&>{"producer", b.producer},
                                   std::pair<const char*, const BufferEnd&>{"consumer", b.consumer}}) {
      if (end.rank < 0 || end.rank >= num_ranks_) {
        return InvalidArgumentError(fmt::format("{}.{}.rank = {}; must be in [0, {}) (the ranks)",
                                                where(), key, end.rank, num_ranks_));
      }
      if (end.stage.module < 0 || end.stage.module >= num_modules) {
        return InvalidArgumentError(fmt::format(
            "{}.{}.module = {}; must be in [0, {}) (the modules)", where(), key, end.stage.module,
            num_modules));
      }
    }
    if (b.producer.rank != r && b.consumer.rank != r) {
      return InvalidArgumentError(fmt::format(
          "{} (buf {}): neither end is on rank {} (producer {}, consumer {})", where(), b.id, r,
          DescribeBufferEnd(b.producer), DescribeBufferEnd(b.consumer)));
    }
    if (Status s = CheckSamples(b.samples); !s.ok()) {
      return InvalidArgumentError(fmt::format("{}.samples{}", where(), s.message()));
    }
    if (b.rows < -1) {
      return InvalidArgumentError(fmt::format("{}.rows = {}; must be >= -1", where(), b.rows));
    }
    // A buffer that carries token rows holds at least one element per GPU; its shape's rows
    // (the first dimension of a [rows, hidden] shape) are never 0 then.
    if (b.rows > 0 && (b.tensor.NumElements() == 0 || b.tensor.shape.empty())) {
      return InvalidArgumentError(fmt::format(
          "{} (buf {}): shape {} holds no rows but the buffer carries {} rows; shape and rows "
          "must agree",
          where(), b.id, b.tensor.ToString(), b.rows));
    }
    return OkStatus();
  }

  // Index of buffer `id` in ranks[r].buffers, or -1.
  int FindBuffer(int r, BufferId id) const { return buffer_index_[r].Find(id); }
  // A buffer CheckStructure found declared.
  const Buffer& BufferOf(int r, BufferId id) const {
    return plan_.ranks[r].buffers[FindBuffer(r, id)];
  }

  // An all_reduce_grads with `ranks`: ascending, in range, this rank included, dp members.
  Status CheckCollectiveRanks(int r, int i, const Action& a) const {
    for (size_t k = 0; k < a.ranks.size(); ++k) {
      if (a.ranks[k] < 0 || a.ranks[k] >= num_ranks_) {
        return Error(r, i, fmt::format("ranks[{}] = {} is not a rank (plan has {} ranks)", k,
                                       a.ranks[k], num_ranks_));
      }
      if (k > 0 && a.ranks[k] <= a.ranks[k - 1]) {
        return Error(r, i, fmt::format("ranks[{}] = {}; ranks must be strictly ascending", k,
                                       a.ranks[k]));
      }
    }
    if (!std::binary_search(a.ranks.begin(), a.ranks.end(), r)) {
      return Error(r, i, fmt::format("ranks [{}] do not include rank {} itself",
                                     fmt::join(a.ranks, ","), r));
    }
    if (static_cast<int>(a.ranks.size()) != a.dp) {
      return Error(r, i, fmt::format("dp = {} but ranks names {} ranks", a.dp, a.ranks.size()));
    }
    return OkStatus();
  }

  // Every member of a collective joins it: it has an all_reduce_grads of the same module over
  // the same ranks (each rank has at most one per module, checked in CheckStructure).
  Status CheckCollectives() {
    for (int r = 0; r < num_ranks_; ++r) {
      for (const auto& [module, i] : collective_at_[r]) {
        const Action& a = plan_.ranks[r].actions[i];
        for (int q : a.ranks) {
          auto it = collective_at_[q].find(module);
          if (it == collective_at_[q].end() ||
              plan_.ranks[q].actions[it->second].ranks != a.ranks) {
            return Error(r, i, fmt::format("rank {} never joins this collective (it has no "
                                           "all_reduce_grads of module {} over ranks [{}])",
                                           q, module, fmt::join(a.ranks, ",")));
          }
        }
      }
    }
    return OkStatus();
  }

  Status CheckMatching() {
    // Walk channels in a deterministic order (by src, then dst); report the first broken pair.
    for (const auto& [key, channel] : channels_) {
      const int src = key / num_ranks_, dst = key % num_ranks_;
      const std::vector<int>& s = channel.sends;
      const std::vector<int>& v = channel.recvs;
      const size_t common = std::min(s.size(), v.size());
      for (size_t k = 0; k < common; ++k) {
        const Buffer& sb = BufferOf(src, plan_.ranks[src].actions[s[k]].buffer);
        const Buffer& rb = BufferOf(dst, plan_.ranks[dst].actions[v[k]].buffer);
        if (!(sb.tensor == rb.tensor)) {
          return Error(dst, v[k],
                       fmt::format("receives {} but the matching send #{} ({}) is {}",
                                   rb.tensor.ToString(), k + 1, Loc(src, s[k]), sb.tensor.ToString()));
        }
        if (!(sb.producer == rb.producer && sb.consumer == rb.consumer)) {
          return Error(dst, v[k],
                       fmt::format("receives {} -> {} but the matching send #{} ({}) carries {} -> {}",
                                   DescribeBufferEnd(rb.producer), DescribeBufferEnd(rb.consumer),
                                   k + 1, Loc(src, s[k]), DescribeBufferEnd(sb.producer),
                                   DescribeBufferEnd(sb.consumer)));
        }
        if (sb.samples != rb.samples || sb.rows != rb.rows) {
          return Error(dst, v[k],
                       fmt::format("receives samples [{}] ({} rows) but the matching send #{} ({}) "
                                   "carries samples [{}] ({} rows)",
                                   fmt::join(rb.samples, ","), rb.rows, k + 1, Loc(src, s[k]),
                                   fmt::join(sb.samples, ","), sb.rows));
        }
      }
      if (v.size() > s.size()) {
        return Error(dst, v[common],
                     fmt::format("never sent (rank {} posts {} isends to rank {}; this is receive #{})",
                                 src, s.size(), dst, common + 1));
      }
      if (s.size() > v.size()) {
        return Error(src, s[common],
                     fmt::format("never received (rank {} posts {} irecvs from rank {}; this is send #{})",
                                 dst, v.size(), src, common + 1));
      }
      report_.num_transfers += static_cast<int>(s.size());
      for (int idx : s) {
        report_.p2p_bytes += BufferOf(src, plan_.ranks[src].actions[idx].buffer).tensor.Bytes();
      }
    }
    return OkStatus();
  }

  Status CheckDataFlow(int r, Status& memory_error) {
    const RankPlan& rank = plan_.ranks[r];
    RankValidation& rv = report_.ranks[r];
    // Per buffer (index into rank.buffers); every id an action names is declared (CheckStructure).
    const int num_buffers = static_cast<int>(rank.buffers.size());
    std::vector<BufferTrack> tracks(num_buffers);
    for (int k = 0; k < num_buffers; ++k) tracks[k].bytes = rank.buffers[k].tensor.Bytes();
    auto track_of = [&](BufferId id) -> BufferTrack& { return tracks[FindBuffer(r, id)]; };
    // The rank's isends grouped by buffer, each group in action order: sends_of_buffer
    // [send_begin[k], send_begin[k + 1]). An isend goes to its buffer's consumer rank
    // (CheckStructure), and a wait_send completes the oldest isend of its buffer not yet waited
    // for.
    std::vector<int> send_begin(num_buffers + 1, 0);
    for (const auto& [k, i] : isends_[r]) ++send_begin[k + 1];
    for (int k = 0; k < num_buffers; ++k) send_begin[k + 1] += send_begin[k];
    std::vector<int> sends_of_buffer(send_begin[num_buffers]);
    {
      std::vector<int> next(send_begin.begin(), send_begin.end() - 1);
      for (const auto& [k, i] : isends_[r]) sends_of_buffer[next[k]++] = i;
    }
    int64_t activations = 0, buffers = 0;
    rv.num_actions = static_cast<int>(rank.actions.size());
    rv.peak_bytes = rank.static_bytes;

    auto note_memory = [&](int i) {
      const int64_t live = rank.static_bytes + activations + buffers;
      if (live > rv.peak_bytes) {
        rv.peak_bytes = live;
        rv.peak_action = i;
      }
      rv.peak_buffer_bytes = std::max(rv.peak_buffer_bytes, buffers);
      if (options_.check_memory && rank.memory_capacity_bytes > 0 &&
          live > rank.memory_capacity_bytes && memory_error.ok()) {
        memory_error = ResourceExhaustedError(
            Loc(r, i) + fmt::format(": memory {} > capacity {} (static {}, activations {}, buffers {})",
                                    FormatBytes(live), FormatBytes(rank.memory_capacity_bytes),
                                    FormatBytes(rank.static_bytes), FormatBytes(activations),
                                    FormatBytes(buffers)));
      }
    };
    // The rank's parameters, gradients and optimizer state alone may not fit (also on a rank
    // without actions, which the per-action check never reaches).
    if (options_.check_memory && rank.memory_capacity_bytes > 0 &&
        rank.static_bytes > rank.memory_capacity_bytes && memory_error.ok()) {
      memory_error = ResourceExhaustedError(
          fmt::format("rank {} ({}): static memory {} > capacity {} before any action", r,
                      rank.label, FormatBytes(rank.static_bytes),
                      FormatBytes(rank.memory_capacity_bytes)));
    }
    auto require_ready = [&](int i, BufferId id, const BufferTrack& t,
                             std::string_view role) -> Status {
      switch (t.state) {
        case BufferState::kReady: return OkStatus();
        case BufferState::kUndefined:
          return Error(r, i, fmt::format("{} buf {} is neither produced nor received before use", role, id));
        case BufferState::kPendingRecv:
          return Error(r, i, fmt::format("{} buf {} is used before its wait_recv (irecv at action {})",
                                         role, id, t.defined_at));
        case BufferState::kFreed:
          return Error(r, i, fmt::format("{} buf {} is used after free (freed at action {})", role,
                                         id, t.freed_at));
      }
      return OkStatus();
    };

    for (int i = 0; i < static_cast<int>(rank.actions.size()); ++i) {
      const Action& a = rank.actions[i];
      switch (a.kind) {
        case ActionKind::kForward:
        case ActionKind::kBackward:
        case ActionKind::kBackwardInput:
        case ActionKind::kBackwardWeight: {
          ++rv.num_compute;
          for (BufferId id : a.inputs) {
            WEFT_RETURN_IF_ERROR(require_ready(i, id, track_of(id), "input"));
          }
          activations += a.activation_alloc_bytes;
          for (BufferId id : a.outputs) {
            BufferTrack& t = track_of(id);
            if (t.state != BufferState::kUndefined) {
              return Error(r, i, fmt::format("output buf {} was already defined at action {}", id,
                                             t.defined_at));
            }
            t.state = BufferState::kReady;
            t.defined_at = i;
            buffers += t.bytes;
          }
          note_memory(i);
          activations -= a.activation_free_bytes;
          break;
        }
        case ActionKind::kIsend: {
          ++rv.num_isend;
          BufferTrack& t = track_of(a.buffer);
          WEFT_RETURN_IF_ERROR(require_ready(i, a.buffer, t, "sent"));
          ++t.inflight_sends;
          break;
        }
        case ActionKind::kIrecv: {
          ++rv.num_irecv;
          BufferTrack& t = track_of(a.buffer);
          if (t.state != BufferState::kUndefined) {
            return Error(r, i, fmt::format("receive buffer {} was already defined at action {}",
                                           a.buffer, t.defined_at));
          }
          t.state = BufferState::kPendingRecv;
          t.defined_at = i;
          buffers += t.bytes;
          note_memory(i);
          break;
        }
        case ActionKind::kWaitSend: {
          const int k = FindBuffer(r, a.buffer);
          BufferTrack& t = tracks[k];
          if (t.inflight_sends == 0 || rank.buffers[k].consumer.rank != a.peer) {
            return Error(r, i, fmt::format("no pending isend of buf {} to rank {}", a.buffer, a.peer));
          }
          refs_[r][i] = refs_[r][sends_of_buffer[send_begin[k] + t.waited_sends]];
          ++t.waited_sends;
          --t.inflight_sends;
          break;
        }
        case ActionKind::kWaitRecv: {
          BufferTrack& t = track_of(a.buffer);
          if (t.state != BufferState::kPendingRecv) {
            return Error(r, i, fmt::format("no pending irecv into buf {}", a.buffer));
          }
          const Action& post = rank.actions[t.defined_at];
          if (post.peer != a.peer) {
            return Error(r, i, fmt::format("the irecv into buf {} (action {}) is from rank {}",
                                           a.buffer, t.defined_at, post.peer));
          }
          refs_[r][i] = refs_[r][t.defined_at];
          t.state = BufferState::kReady;
          break;
        }
        case ActionKind::kFree: {
          BufferTrack& t = track_of(a.buffer);
          WEFT_RETURN_IF_ERROR(require_ready(i, a.buffer, t, "freed"));
          if (t.inflight_sends > 0) {
            return Error(r, i, fmt::format("buf {} is freed while an isend from it is in flight "
                                           "(wait_send first)", a.buffer));
          }
          t.state = BufferState::kFreed;
          t.freed_at = i;
          buffers -= t.bytes;
          break;
        }
        case ActionKind::kAllReduceGrads:
          break;  // gradients live in static_bytes; the collective does not block this replay
      }
    }
    // The buffer of least id with an isend not waited for.
    int unwaited = -1;
    for (int k = 0; k < num_buffers; ++k) {
      if (tracks[k].inflight_sends > 0 &&
          (unwaited < 0 || rank.buffers[k].id < rank.buffers[unwaited].id)) {
        unwaited = k;
      }
    }
    if (unwaited >= 0) {
      return Error(r, sends_of_buffer[send_begin[unwaited] + tracks[unwaited].waited_sends],
                   "isend is never waited for (no wait_send)");
    }
    // Deterministic order: by the action that defined the buffer.
    std::vector<std::pair<int, BufferId>> leftovers;
    for (int k = 0; k < num_buffers; ++k) {
      const BufferTrack& t = tracks[k];
      if (t.state == BufferState::kPendingRecv) {
        leftovers.push_back({t.defined_at, rank.buffers[k].id});
      }
    }
    std::sort(leftovers.begin(), leftovers.end());
    if (!leftovers.empty()) {
      return Error(r, leftovers.front().first, "irecv is never waited for (no wait_recv)");
    }
    if (options_.require_all_freed) {
      for (int k = 0; k < num_buffers; ++k) {
        const BufferTrack& t = tracks[k];
        if (t.state == BufferState::kReady) leftovers.push_back({t.defined_at, rank.buffers[k].id});
      }
      std::sort(leftovers.begin(), leftovers.end());
      if (!leftovers.empty()) {
        return Error(r, leftovers.front().first,
                     fmt::format("buf {} is never freed", leftovers.front().second));
      }
    }
    return OkStatus();
  }

  // Replays all ranks with blocking waits until every rank finished or none can move.
  Status Replay() {
    std::vector<int> posted_sends(channels_.size(), 0);  // per Channel::id
    std::vector<int> posted_recvs(channels_.size(), 0);
    std::vector<int> pc(num_ranks_, 0);
    // Collectives: (module, first member) -> members arrived; a member blocks until all did.
    std::map<std::pair<int, int>, int> arrived;
    std::vector<int> arrived_at(num_ranks_, -1);  // per rank: the collective it arrived at
    auto blocked = [&](int r) {
      const Action& a = plan_.ranks[r].actions[pc[r]];
      const ChannelRef& ref = refs_[r][pc[r]];
      if (a.kind == ActionKind::kWaitSend) return posted_recvs[ref.channel] <= ref.ordinal;
      if (a.kind == ActionKind::kWaitRecv) return posted_sends[ref.channel] <= ref.ordinal;
      if (a.kind == ActionKind::kAllReduceGrads && a.ranks.size() > 1) {
        int& count = arrived[{a.stage.module, a.ranks.front()}];
        if (arrived_at[r] != pc[r]) {
          arrived_at[r] = pc[r];
          ++count;
        }
        return count < static_cast<int>(a.ranks.size());
      }
      return false;
    };
    bool progress = true;
    while (progress) {
      progress = false;
      ++report_.replay_rounds;
      for (int r = 0; r < num_ranks_; ++r) {
        const auto& actions = plan_.ranks[r].actions;
        while (pc[r] < static_cast<int>(actions.size()) && !blocked(r)) {
          const Action& a = actions[pc[r]];
          if (a.kind == ActionKind::kIsend) ++posted_sends[refs_[r][pc[r]].channel];
          if (a.kind == ActionKind::kIrecv) ++posted_recvs[refs_[r][pc[r]].channel];
          ++pc[r];
          progress = true;
        }
      }
    }
    std::vector<std::string> stuck;
    for (int r = 0; r < num_ranks_; ++r) {
      if (pc[r] < static_cast<int>(plan_.ranks[r].actions.size())) {
        const Action& a = plan_.ranks[r].actions[pc[r]];
        if (a.kind == ActionKind::kAllReduceGrads) {
          std::vector<int> absent;
          for (int q : a.ranks) {
            if (arrived_at[q] < 0 || plan_.ranks[q].actions[arrived_at[q]].kind !=
                                         ActionKind::kAllReduceGrads ||
                plan_.ranks[q].actions[arrived_at[q]].stage.module != a.stage.module ||
                pc[q] != arrived_at[q]) {
              if (q != r) absent.push_back(q);
            }
          }
          stuck.push_back(fmt::format("{} waits for ranks [{}] to join", Loc(r, pc[r]),
                                      fmt::join(absent, ",")));
          continue;
        }
        stuck.push_back(fmt::format("{} waits for rank {}", Loc(r, pc[r]), a.peer));
      }
    }
    if (!stuck.empty()) {
      return InvalidArgumentError(fmt::format("deadlock: {} of {} ranks stuck: {}", stuck.size(),
                                              num_ranks_, fmt::join(stuck, "; ")));
    }
    return OkStatus();
  }

  const ExecutionPlan& plan_;
  const ValidateOptions& options_;
  const int num_ranks_;
  ValidationReport report_;
  std::vector<BufferIndex> buffer_index_;  // per rank
  std::vector<std::vector<ChannelRef>> refs_;                     // per rank, per action
  std::vector<std::map<int, int>> collective_at_;  // per rank: module -> its collective's index
  std::map<int, Channel> channels_;  // by src * num_ranks + dst
  // Per rank its isends in order: (index of the buffer in the rank's buffers, action index).
  std::vector<std::vector<std::pair<int, int>>> isends_;
};

}  // namespace

std::string ValidationReport::BriefReport() const {
  int actions = 0, compute = 0;
  int64_t peak = 0;
  int peak_rank = 0;
  for (size_t r = 0; r < ranks.size(); ++r) {
    actions += ranks[r].num_actions;
    compute += ranks[r].num_compute;
    if (ranks[r].peak_bytes > peak) {
      peak = ranks[r].peak_bytes;
      peak_rank = static_cast<int>(r);
    }
  }
  return fmt::format(
      "valid plan: {} rank{}, {} actions ({} compute, {} transfers, {}), peak memory {} (rank {})",
      ranks.size(), ranks.size() == 1 ? "" : "s", actions, compute, num_transfers, FormatBytes(p2p_bytes), FormatBytes(peak),
      peak_rank);
}

StatusOr<ValidationReport> ValidatePlan(const ExecutionPlan& plan, const ValidateOptions& options) {
  return Validator(plan, options).Run();
}

}  // namespace weft::plan
