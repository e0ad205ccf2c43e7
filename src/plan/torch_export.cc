#include "weft/plan/torch_export.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "weft/plan/validator.h"

namespace weft::plan {

namespace {

struct ComputeRef {
  int rank = 0;
  int index = 0;  // action index
};

// Where each buffer comes from and goes to, with isend/irecv matched across ranks.
class FlowIndex {
 public:
  explicit FlowIndex(const ExecutionPlan& plan) : plan_(plan) {
    const int n = plan.num_ranks();
    producer_.resize(n);
    consumers_.resize(n);
    std::map<std::pair<int, int>, std::vector<std::pair<int, int>>> sends, recvs;  // (src,dst)
    for (int r = 0; r < n; ++r) {
      const auto& actions = plan.ranks[r].actions;
      for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
        const Action& a = actions[i];
        if (IsCompute(a.kind)) {
          for (BufferId id : a.outputs) producer_[r][id] = {r, i};
          for (BufferId id : a.inputs) consumers_[r][id].push_back({r, i});
        } else if (a.kind == ActionKind::kIsend) {
          sends[{r, a.peer}].push_back({r, i});
        } else if (a.kind == ActionKind::kIrecv) {
          recvs[{a.peer, r}].push_back({r, i});
        }
      }
    }
    for (const auto& [channel, list] : sends) {
      const auto& matching = recvs[channel];
      for (size_t k = 0; k < list.size() && k < matching.size(); ++k) {
        send_to_recv_[list[k]] = matching[k];
        recv_to_send_[matching[k]] = list[k];
      }
    }
  }

  const Action& action(ComputeRef ref) const { return plan_.ranks[ref.rank].actions[ref.index]; }
  const ComputeRef* Producer(int rank, BufferId id) const {
    auto it = producer_[rank].find(id);
    return it == producer_[rank].end() ? nullptr : &it->second;
  }
  std::vector<ComputeRef> Consumers(int rank, BufferId id) const {
    auto it = consumers_[rank].find(id);
    return it == consumers_[rank].end() ? std::vector<ComputeRef>{} : it->second;
  }
  // The irecv (rank, index) matched with the isend at (rank, index), or nullptr.
  const std::pair<int, int>* MatchedRecv(int rank, int index) const {
    auto it = send_to_recv_.find({rank, index});
    return it == send_to_recv_.end() ? nullptr : &it->second;
  }
  // Compute actions on other ranks or this one that read the data of `ref`'s output `id`.
  std::vector<ComputeRef> DownstreamOf(int rank, BufferId id) const {
    std::vector<ComputeRef> out = Consumers(rank, id);
    const auto& actions = plan_.ranks[rank].actions;
    for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
      if (actions[i].kind != ActionKind::kIsend || actions[i].buffer != id) continue;
      if (const auto* recv = MatchedRecv(rank, i)) {
        const Action& ra = plan_.ranks[recv->first].actions[recv->second];
        for (ComputeRef c : Consumers(recv->first, ra.buffer)) out.push_back(c);
      }
    }
    return out;
  }

 private:
  const ExecutionPlan& plan_;
  std::vector<std::map<BufferId, ComputeRef>> producer_;
  std::vector<std::map<BufferId, std::vector<ComputeRef>>> consumers_;
  std::map<std::pair<int, int>, std::pair<int, int>> send_to_recv_, recv_to_send_;
};

// A torch stage: one pipeline slot (rank, chunk) of a rank, whatever modules run in it.
using Key = std::pair<int, int>;  // rank, chunk

Key KeyOf(int rank, const Action& a) { return {rank, a.stage.chunk}; }

std::string ModuleName(const ExecutionPlan& plan, int module) {
  return module < static_cast<int>(plan.module_names.size()) ? plan.module_names[module]
                                                             : fmt::format("m{}", module);
}

Status Refuse(const std::string& reason) {
  return FailedPreconditionError("cannot export to torch CSV: " + reason);
}

struct ChainInfo {
  TorchStageMap map;
  std::map<Key, int> index;               // key -> torch stage
  std::map<Key, std::set<int>> modules;   // key -> modules whose chunks run in the slot
  std::string Name(const ExecutionPlan& plan, const Key& key) const {
    const auto it = modules.find(key);
    std::vector<std::string> names;
    if (it != modules.end()) {
      for (int m : it->second) names.push_back(fmt::format("{} '{}'", m, ModuleName(plan, m)));
    }
    return fmt::format("(rank {}, module{} {}, chunk {})", key.first, names.size() > 1 ? "s" : "",
                       fmt::join(names, " + "), key.second);
  }
};

StatusOr<ChainInfo> DeriveChain(const ExecutionPlan& plan, const FlowIndex& flow) {
  ChainInfo info;
  std::map<Key, std::set<Key>> succ, pred;
  // Forward data flows between slots; flows inside one slot (local buffers between the modules
  // of a slot, activations kept for the backward) are internal to the torch stage.
  std::vector<std::tuple<int, int, BufferId, Key, ComputeRef>> bad_flows;
  for (int r = 0; r < plan.num_ranks(); ++r) {
    const auto& actions = plan.ranks[r].actions;
    for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
      const Action& a = actions[i];
      if (!IsCompute(a.kind)) continue;
      if (a.stage.sub_microbatch != 0) {
        return Refuse(ActionLocation(plan, r, i) +
                      ": sub-microbatches have no equivalent in torch's pipelining IR");
      }
      const Key key = KeyOf(r, a);
      info.modules[key].insert(a.stage.module);
      if (a.kind != ActionKind::kForward) continue;
      for (BufferId out : a.outputs) {
        for (ComputeRef c : flow.DownstreamOf(r, out)) {
          const Action& ca = flow.action(c);
          const Key to = KeyOf(c.rank, ca);
          if (to == key) continue;
          if (ca.kind != ActionKind::kForward) {
            bad_flows.emplace_back(r, i, out, to, c);
            continue;
          }
          succ[key].insert(to);
          pred[to].insert(key);
        }
      }
    }
  }
  if (info.modules.empty()) return Refuse("the plan has no compute actions");
  if (!bad_flows.empty()) {
    const auto& [r, i, out, to, c] = bad_flows.front();
    return Refuse(fmt::format("{}: forward output buf {} feeds {} of another stage {} "
                              "(only forward → forward and backward → backward flows "
                              "between adjacent stages exist in torch's IR)",
                              ActionLocation(plan, r, i), out,
                              ActionKindName(flow.action(c).kind), info.Name(plan, to)));
  }
  for (const auto& [key, to] : succ) {
    if (to.size() > 1) {
      return Refuse(fmt::format("fan-out: stage {} feeds {} stages; torch's pipelining IR "
                                "expresses only a chain of stages",
                                info.Name(plan, key), to.size()));
    }
  }
  for (const auto& [key, from] : pred) {
    if (from.size() > 1) {
      std::vector<std::string> names;
      for (const Key& k : from) names.push_back(info.Name(plan, k));
      return Refuse(fmt::format("fan-in: stage {} receives forward data from {} stages ({}); "
                                "torch's pipelining IR expresses only a chain of stages",
                                info.Name(plan, key), from.size(), fmt::join(names, ", ")));
    }
  }
  std::vector<Key> sources;
  for (const auto& [k, unused] : info.modules) {
    if (!pred.count(k)) sources.push_back(k);
  }
  if (sources.size() != 1) {
    std::vector<std::string> names;
    for (const Key& k : sources) names.push_back(info.Name(plan, k));
    return Refuse(fmt::format("the stages form {} independent chains (starting at {}); torch's "
                              "pipelining IR expresses only one chain",
                              sources.size(), fmt::join(names, ", ")));
  }
  Key at = sources.front();
  while (true) {
    if (info.index.count(at)) return Refuse("the forward data flow has a cycle");
    info.index[at] = static_cast<int>(info.map.stages.size());
    const auto& mods = info.modules.at(at);
    info.map.stages.push_back({at.first, at.second, std::vector<int>(mods.begin(), mods.end())});
    auto it = succ.find(at);
    if (it == succ.end()) break;
    at = *it->second.begin();
  }
  if (info.index.size() != info.modules.size()) {
    return Refuse(fmt::format("only {} of {} stages lie on the chain from {}", info.index.size(),
                              info.modules.size(), info.Name(plan, sources.front())));
  }
  // torch places virtual stage k on rank k % P (loop placement; one row per rank).
  const int p = plan.num_ranks();
  for (int k = 0; k < static_cast<int>(info.map.stages.size()); ++k) {
    const auto& st = info.map.stages[k];
    if (st.rank != k % p || st.chunk != k / p) {
      return Refuse(fmt::format("stage {} of the chain is {}, but torch's loop placement puts "
                                "stage {} on rank {} as its chunk {} (stage = rank + chunk·P, "
                                "P = {})",
                                k, info.Name(plan, {st.rank, st.chunk}), k, k % p, k / p, p));
    }
  }
  if (static_cast<int>(info.map.stages.size()) % p != 0) {
    return Refuse(fmt::format("the chain has {} stages, not a multiple of the {} ranks; torch "
                              "needs the same number of stages on every rank",
                              info.map.stages.size(), p));
  }
  return info;
}

// Every module of every stage runs F once for each microbatch 0..m-1; per stage, the collapsed
// backward is one B, or one I and one W (a frozen module may lack W or its backward entirely).
Status CheckMicrobatches(const ExecutionPlan& plan, ChainInfo& info) {
  // key -> module -> kind -> microbatch -> count
  std::map<Key, std::map<int, std::map<ActionKind, std::map<int, int>>>> seen;
  for (int r = 0; r < plan.num_ranks(); ++r) {
    for (const Action& a : plan.ranks[r].actions) {
      if (IsCompute(a.kind)) {
        ++seen[KeyOf(r, a)][a.stage.module][a.kind][a.stage.microbatch];
      }
    }
  }
  int m = -1;
  for (const auto& [key, modules] : seen) {
    for (const auto& [module, kinds] : modules) {
      const std::string where =
          modules.size() > 1 ? fmt::format("stage {} module {} '{}'", info.Name(plan, key), module,
                                           ModuleName(plan, module))
                             : fmt::format("stage {}", info.Name(plan, key));
      auto fw = kinds.find(ActionKind::kForward);
      const int count = fw == kinds.end() ? 0 : static_cast<int>(fw->second.size());
      if (m < 0) m = count;
      if (count != m) {
        return Refuse(fmt::format("{} runs {} microbatches, another stage {}; torch's "
                                  "runtime needs the same microbatches on every stage",
                                  where, count, m));
      }
      auto count_of = [&kinds = kinds](ActionKind kind, int mb) {  // clang 14: no binding capture
        auto k = kinds.find(kind);
        if (k == kinds.end()) return 0;
        auto c = k->second.find(mb);
        return c == k->second.end() ? 0 : c->second;
      };
      for (int mb = 0; mb < m; ++mb) {
        if (count_of(ActionKind::kForward, mb) != 1) {
          return Refuse(fmt::format("{} does not run forward of microbatch {} exactly once "
                                    "(microbatches must be 0..{})",
                                    where, mb, m - 1));
        }
        const int b = count_of(ActionKind::kBackward, mb);
        const int bi = count_of(ActionKind::kBackwardInput, mb);
        const int w = count_of(ActionKind::kBackwardWeight, mb);
        // Alone in its stage a module needs a full backward; in a shared slot a frozen module
        // may have only I, or no backward, as long as the stage as a whole has one.
        const bool alone_ok = (b == 1 && bi == 0 && w == 0) || (b == 0 && bi == 1 && w == 1);
        const bool shared_ok = b <= 1 && bi <= 1 && w <= bi && b + bi <= 1;
        if (modules.size() > 1 ? !shared_ok : !alone_ok) {
          return Refuse(fmt::format("{} microbatch {} has {} backward, {} backward_input, {} "
                                    "backward_weight; torch's runtime needs one B, or one I and "
                                    "one W",
                                    where, mb, b, bi, w));
        }
      }
    }
    if (modules.size() <= 1) continue;
    for (int mb = 0; mb < m; ++mb) {
      int b = 0, bi = 0, w = 0;
      for (const auto& [module, kinds] : modules) {
        auto has = [&kinds = kinds, mb](ActionKind kind) {  // clang 14: no binding capture
          auto k = kinds.find(kind);
          return k != kinds.end() && k->second.count(mb) ? 1 : 0;
        };
        b |= has(ActionKind::kBackward);
        bi |= has(ActionKind::kBackwardInput);
        w |= has(ActionKind::kBackwardWeight);
      }
      if (!((b == 1 && bi == 0 && w == 0) || (b == 0 && bi == 1 && w == 1))) {
        return Refuse(fmt::format("stage {} microbatch {} has, over its modules, {} backward, {} "
                                  "backward_input, {} backward_weight; torch's runtime needs one "
                                  "B, or one I and one W per stage",
                                  info.Name(plan, key), mb, b, bi, w));
      }
    }
  }
  info.map.num_microbatches = m;
  return OkStatus();
}

}  // namespace

StatusOr<TorchStageMap> DeriveTorchStageMap(const ExecutionPlan& plan) {
  auto valid = ValidatePlan(plan, {.check_memory = false, .require_all_freed = false});
  if (!valid.ok()) return FailedPreconditionError("plan is invalid: " + valid.status().message());
  FlowIndex flow(plan);
  WEFT_ASSIGN_OR_RETURN(ChainInfo info, DeriveChain(plan, flow));
  WEFT_RETURN_IF_ERROR(CheckMicrobatches(plan, info));
  return info.map;
}

StatusOr<std::vector<std::vector<std::string>>> ExportTorchActions(const ExecutionPlan& plan,
                                                                   const TorchCsvOptions& options) {
  auto valid = ValidatePlan(plan, {.check_memory = false, .require_all_freed = false});
  if (!valid.ok()) return FailedPreconditionError("plan is invalid: " + valid.status().message());
  FlowIndex flow(plan);
  WEFT_ASSIGN_OR_RETURN(ChainInfo info, DeriveChain(plan, flow));
  WEFT_RETURN_IF_ERROR(CheckMicrobatches(plan, info));
  auto stage_of = [&](int rank, const Action& a) { return info.index.at(KeyOf(rank, a)); };
  static constexpr const char* kLetter[] = {"F", "B", "I", "W"};

  std::vector<std::vector<std::string>> rows(plan.num_ranks());
  for (int r = 0; r < plan.num_ranks(); ++r) {
    std::set<std::string> comm_cells;  // several tensors of one (stage, mb, direction): one cell
    std::set<std::string> compute_cells;
    std::string open_cell;  // the compute cell whose modules' actions are being collapsed
    const auto& actions = plan.ranks[r].actions;
    for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
      const Action& a = actions[i];
      switch (a.kind) {
        case ActionKind::kForward:
        case ActionKind::kBackward:
        case ActionKind::kBackwardInput:
        case ActionKind::kBackwardWeight: {
          // All modules of one slot run the same (microbatch, pass) back to back: one cell.
          std::string cell = fmt::format("{}{}{}", stage_of(r, a),
                                         kLetter[static_cast<int>(a.kind)], a.stage.microbatch);
          if (cell == open_cell) break;
          if (!compute_cells.insert(cell).second) {
            return Refuse(fmt::format("{}: the computes of torch stage {} ({}) for this microbatch "
                                      "and pass are split by other computes on the rank; torch "
                                      "runs a stage's modules as one action",
                                      ActionLocation(plan, r, i), cell,
                                      info.Name(plan, KeyOf(r, a))));
          }
          open_cell = cell;
          rows[r].push_back(cell);
          break;
        }
        // Transfers: both formats check what torch can express (the compute-only format leaves
        // the communication to torch, which still sends only between adjacent stages and
        // receives a stage's input before its compute); only compute_comms writes cells.
        case ActionKind::kIsend: {
          const ComputeRef* producer = flow.Producer(r, a.buffer);
          if (producer == nullptr) {
            return Refuse(ActionLocation(plan, r, i) + ": sent buffer has no producing compute");
          }
          const Action& pa = flow.action(*producer);
          if (pa.kind == ActionKind::kBackwardWeight) {
            return Refuse(ActionLocation(plan, r, i) + ": sends the output of a backward_weight");
          }
          const bool forward = pa.kind == ActionKind::kForward;
          const int stage = stage_of(r, pa);
          // The receiver must be the adjacent stage in the data direction, same microbatch.
          const auto* recv = flow.MatchedRecv(r, i);
          const Action& ra = plan.ranks[recv->first].actions[recv->second];
          for (ComputeRef c : flow.Consumers(recv->first, ra.buffer)) {
            const Action& ca = flow.action(c);
            const int want = forward ? stage + 1 : stage - 1;
            const bool kind_ok = forward ? ca.kind == ActionKind::kForward
                                         : (ca.kind == ActionKind::kBackward ||
                                            ca.kind == ActionKind::kBackwardInput);
            if (!kind_ok || stage_of(c.rank, ca) != want ||
                ca.stage.microbatch != pa.stage.microbatch) {
              return Refuse(fmt::format("{}: data of stage {} microbatch {} reaches {} at rank {} "
                                        "action {}; torch sends only to the adjacent stage",
                                        ActionLocation(plan, r, i), stage, pa.stage.microbatch,
                                        DescribeAction(ca), c.rank, c.index));
            }
          }
          if (options.format != TorchCsvFormat::kComputeComms) break;
          std::string cell = fmt::format("{}{}{}", stage, forward ? "SEND_F" : "SEND_B",
                                         pa.stage.microbatch);
          if (comm_cells.insert(cell).second) rows[r].push_back(cell);
          break;
        }
        case ActionKind::kIrecv: {
          const auto consumers = flow.Consumers(r, a.buffer);
          if (consumers.empty()) {
            return Refuse(ActionLocation(plan, r, i) + ": received buffer is never read");
          }
          const Action& ca = flow.action(consumers.front());
          const bool forward = ca.kind == ActionKind::kForward;
          if (!forward && ca.kind != ActionKind::kBackward && ca.kind != ActionKind::kBackwardInput) {
            return Refuse(ActionLocation(plan, r, i) + ": received buffer feeds a backward_weight");
          }
          std::string cell = fmt::format("{}{}{}", stage_of(r, ca), forward ? "RECV_F" : "RECV_B",
                                         ca.stage.microbatch);
          // torch receives before the stage's compute: a receive in the middle of a collapsed
          // slot (feeding a later module of the slot) would arrive after the cell.
          const std::string consumer_cell = fmt::format(
              "{}{}{}", stage_of(r, ca), kLetter[static_cast<int>(ca.kind)], ca.stage.microbatch);
          if (compute_cells.count(consumer_cell)) {
            return Refuse(fmt::format("{}: receives data for {} after that stage's compute began "
                                      "(a module inside the slot reads a transfer); torch "
                                      "receives a stage's input before its compute",
                                      ActionLocation(plan, r, i), consumer_cell));
          }
          if (options.format != TorchCsvFormat::kComputeComms) break;
          if (comm_cells.insert(cell).second) rows[r].push_back(cell);
          break;
        }
        case ActionKind::kWaitSend:
        case ActionKind::kWaitRecv:
        case ActionKind::kFree:
          break;  // implicit in torch's runtime
        case ActionKind::kAllReduceGrads:
          break;  // data parallelism is outside torch's pipelining schedule (DDP / FSDP)
      }
    }
  }
  return rows;
}

StatusOr<std::string> ExportTorchCsv(const ExecutionPlan& plan, const TorchCsvOptions& options) {
  WEFT_ASSIGN_OR_RETURN(auto rows, ExportTorchActions(plan, options));
  std::string out;
  for (const auto& row : rows) {
    out += fmt::format("{}\n", fmt::join(row, ","));
  }
  return out;
}

}  // namespace weft::plan
