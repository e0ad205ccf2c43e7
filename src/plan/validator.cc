#include "weft/plan/validator.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
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
};

// Per rank and action: the ordinal of an isend / irecv on its channel, or for a wait the ordinal
// of the post it waits for. -1 otherwise.
struct ChannelRef {
  int channel = -1;  // src * num_ranks + dst
  int ordinal = -1;
};

bool UsesBuffer(ActionKind kind) {
  return kind == ActionKind::kIsend || kind == ActionKind::kIrecv ||
         kind == ActionKind::kWaitSend || kind == ActionKind::kWaitRecv ||
         kind == ActionKind::kFree;
}

bool UsesPeer(ActionKind kind) {
  return kind == ActionKind::kIsend || kind == ActionKind::kIrecv ||
         kind == ActionKind::kWaitSend || kind == ActionKind::kWaitRecv;
}

class Validator {
 public:
  Validator(const ExecutionPlan& plan, const ValidateOptions& options)
      : plan_(plan), options_(options), num_ranks_(plan.num_ranks()) {}

  StatusOr<ValidationReport> Run() {
    if (num_ranks_ == 0) return InvalidArgumentError("plan.ranks is empty; need >= 1 rank");
    report_.ranks.resize(num_ranks_);
    refs_.resize(num_ranks_);
    for (int r = 0; r < num_ranks_; ++r) {
      refs_[r].resize(plan_.ranks[r].actions.size());
      WEFT_RETURN_IF_ERROR(CheckStructure(r));
    }
    WEFT_RETURN_IF_ERROR(CheckMatching());
    Status memory_error;
    for (int r = 0; r < num_ranks_; ++r) {
      WEFT_RETURN_IF_ERROR(CheckDataFlow(r, memory_error));
    }
    WEFT_RETURN_IF_ERROR(Replay());
    if (!memory_error.ok()) return memory_error;
    return report_;
  }

 private:
  std::string Loc(int rank, int index) const { return ActionLocation(plan_, rank, index); }
  Status Error(int rank, int index, const std::string& reason) const {
    return InvalidArgumentError(Loc(rank, index) + ": " + reason);
  }

  Status CheckStructure(int r) {
    const RankPlan& rank = plan_.ranks[r];
    auto& buffers = buffer_index_.emplace_back();
    for (size_t i = 0; i < rank.buffers.size(); ++i) {
      const Buffer& b = rank.buffers[i];
      if (!buffers.emplace(b.id, static_cast<int>(i)).second) {
        return InvalidArgumentError(fmt::format(
            "ranks[{}].buffers[{}].id = {}; declared twice on rank {}", r, i, b.id, r));
      }
      for (int64_t d : b.tensor.shape) {
        if (d < 0) {
          return InvalidArgumentError(fmt::format("ranks[{}].buffers[{}].shape = {}; dims must be >= 0",
                                                  r, i, b.tensor.ToString()));
        }
      }
    }
    if (rank.static_bytes < 0 || rank.memory_capacity_bytes < 0) {
      return InvalidArgumentError(
          fmt::format("ranks[{}]: static_bytes ({}) and memory_capacity_bytes ({}) must be >= 0", r,
                      rank.static_bytes, rank.memory_capacity_bytes));
    }
    std::unordered_map<int, int> group_last_index;  // batch group id -> last action index
    for (int i = 0; i < static_cast<int>(rank.actions.size()); ++i) {
      const Action& a = rank.actions[i];
      auto known = [&](BufferId id) { return buffers.count(id) > 0; };
      if (IsCompute(a.kind)) {
        if (a.stage.pass != PassOf(a.kind)) {
          return Error(r, i, fmt::format("stage pass {} does not match the action kind",
                                         graph::PassShortName(a.stage.pass)));
        }
        for (BufferId id : a.inputs) {
          if (!known(id)) return Error(r, i, fmt::format("input buf {} is not declared on rank {}", id, r));
        }
        for (BufferId id : a.outputs) {
          if (!known(id)) return Error(r, i, fmt::format("output buf {} is not declared on rank {}", id, r));
          if (std::find(a.inputs.begin(), a.inputs.end(), id) != a.inputs.end()) {
            return Error(r, i, fmt::format("buf {} is both input and output", id));
          }
        }
        if (a.activation_alloc_bytes < 0 || a.activation_free_bytes < 0) {
          return Error(r, i, "activation bytes must be >= 0");
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

  const Buffer& BufferOf(int r, BufferId id) const {
    return plan_.ranks[r].buffers[buffer_index_[r].at(id)];
  }

  Status CheckMatching() {
    // channel -> action indices of its isends (on src) / irecvs (on dst), in order.
    std::map<int, std::vector<int>> sends, recvs;
    for (int r = 0; r < num_ranks_; ++r) {
      const auto& actions = plan_.ranks[r].actions;
      for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
        const Action& a = actions[i];
        if (a.kind == ActionKind::kIsend) {
          int ch = r * num_ranks_ + a.peer;
          refs_[r][i] = {ch, static_cast<int>(sends[ch].size())};
          sends[ch].push_back(i);
        } else if (a.kind == ActionKind::kIrecv) {
          int ch = a.peer * num_ranks_ + r;
          refs_[r][i] = {ch, static_cast<int>(recvs[ch].size())};
          recvs[ch].push_back(i);
        }
      }
    }
    // Walk channels in a deterministic order; report the first broken pair.
    std::map<int, bool> channels;
    for (const auto& [ch, v] : sends) channels[ch] = true;
    for (const auto& [ch, v] : recvs) channels[ch] = true;
    for (const auto& [ch, unused] : channels) {
      const int src = ch / num_ranks_, dst = ch % num_ranks_;
      const std::vector<int>& s = sends[ch];
      const std::vector<int>& v = recvs[ch];
      const size_t common = std::min(s.size(), v.size());
      for (size_t k = 0; k < common; ++k) {
        const Buffer& sb = BufferOf(src, plan_.ranks[src].actions[s[k]].buffer);
        const Buffer& rb = BufferOf(dst, plan_.ranks[dst].actions[v[k]].buffer);
        if (!(sb.tensor == rb.tensor)) {
          return Error(dst, v[k],
                       fmt::format("receives {} but the matching send #{} ({}) is {}",
                                   rb.tensor.ToString(), k + 1, Loc(src, s[k]), sb.tensor.ToString()));
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
    std::unordered_map<BufferId, BufferTrack> track;
    for (const Buffer& b : rank.buffers) track[b.id].bytes = b.tensor.Bytes();
    // (buffer, peer) -> action indices of isends not yet waited for.
    std::map<std::pair<BufferId, int>, std::vector<int>> open_sends;
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
    auto require_ready = [&](int i, BufferId id, std::string_view role) -> Status {
      const BufferTrack& t = track[id];
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
          for (BufferId id : a.inputs) WEFT_RETURN_IF_ERROR(require_ready(i, id, "input"));
          activations += a.activation_alloc_bytes;
          for (BufferId id : a.outputs) {
            BufferTrack& t = track[id];
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
          WEFT_RETURN_IF_ERROR(require_ready(i, a.buffer, "sent"));
          ++track[a.buffer].inflight_sends;
          open_sends[{a.buffer, a.peer}].push_back(i);
          break;
        }
        case ActionKind::kIrecv: {
          ++rv.num_irecv;
          BufferTrack& t = track[a.buffer];
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
          auto it = open_sends.find({a.buffer, a.peer});
          if (it == open_sends.end() || it->second.empty()) {
            return Error(r, i, fmt::format("no pending isend of buf {} to rank {}", a.buffer, a.peer));
          }
          refs_[r][i] = refs_[r][it->second.front()];
          it->second.erase(it->second.begin());
          --track[a.buffer].inflight_sends;
          break;
        }
        case ActionKind::kWaitRecv: {
          BufferTrack& t = track[a.buffer];
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
          BufferTrack& t = track[a.buffer];
          WEFT_RETURN_IF_ERROR(require_ready(i, a.buffer, "freed"));
          if (t.inflight_sends > 0) {
            return Error(r, i, fmt::format("buf {} is freed while an isend from it is in flight "
                                           "(wait_send first)", a.buffer));
          }
          t.state = BufferState::kFreed;
          t.freed_at = i;
          buffers -= t.bytes;
          break;
        }
      }
    }
    for (const auto& [key, pending] : open_sends) {
      if (!pending.empty()) return Error(r, pending.front(), "isend is never waited for (no wait_send)");
    }
    // Deterministic order: by the action that defined the buffer.
    std::vector<std::pair<int, BufferId>> leftovers;
    for (const auto& [id, t] : track) {
      if (t.state == BufferState::kPendingRecv) leftovers.push_back({t.defined_at, id});
    }
    std::sort(leftovers.begin(), leftovers.end());
    if (!leftovers.empty()) {
      return Error(r, leftovers.front().first, "irecv is never waited for (no wait_recv)");
    }
    if (options_.require_all_freed) {
      for (const auto& [id, t] : track) {
        if (t.state == BufferState::kReady) leftovers.push_back({t.defined_at, id});
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
    std::vector<int> posted_sends(num_ranks_ * num_ranks_, 0);
    std::vector<int> posted_recvs(num_ranks_ * num_ranks_, 0);
    std::vector<int> pc(num_ranks_, 0);
    auto blocked = [&](int r) {
      const Action& a = plan_.ranks[r].actions[pc[r]];
      const ChannelRef& ref = refs_[r][pc[r]];
      if (a.kind == ActionKind::kWaitSend) return posted_recvs[ref.channel] <= ref.ordinal;
      if (a.kind == ActionKind::kWaitRecv) return posted_sends[ref.channel] <= ref.ordinal;
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
        stuck.push_back(fmt::format("{} waits for rank {}", Loc(r, pc[r]),
                                    plan_.ranks[r].actions[pc[r]].peer));
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
  std::vector<std::unordered_map<BufferId, int>> buffer_index_;  // per rank: id -> index
  std::vector<std::vector<ChannelRef>> refs_;                     // per rank, per action
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
      "valid plan: {} ranks, {} actions ({} compute, {} transfers, {}), peak memory {} (rank {})",
      ranks.size(), actions, compute, num_transfers, FormatBytes(p2p_bytes), FormatBytes(peak),
      peak_rank);
}

StatusOr<ValidationReport> ValidatePlan(const ExecutionPlan& plan, const ValidateOptions& options) {
  return Validator(plan, options).Run();
}

}  // namespace weft::plan
