#include "weft/algo/mcts.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <random>
#include <system_error>
#include <thread>

#include <fmt/format.h>

namespace weft::algo {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Node {
  int parent = -1;
  int action = -1;
  std::vector<int> children;
  std::vector<int> untried;  // legal actions not expanded yet
  int64_t visits = 0;
  double best_cost = kInf;   // lowest cost seen below this node
  bool terminal = false;     // complete assignment
  bool exhausted = false;    // every complete assignment below was evaluated
};

// Shared search state; every member is guarded by `mutex` except the immutable references.
class Search {
 public:
  Search(const MctsProblem& problem, const MctsOptions& options)
      : problem_(problem), options_(options), start_(std::chrono::steady_clock::now()) {}

  StatusOr<MctsResult> Run() {
    {
      Node root;
      problem_.legal_actions({}, root.untried);
      root.terminal = root.untried.empty();
      nodes_.push_back(std::move(root));
    }
    if (options_.threads == 1) {
      Worker(0);
    } else {
      std::vector<std::thread> workers;
      workers.reserve(options_.threads);
      std::string failure;  // a thread the system could not start (limit on threads or memory)
      // An exception must not leave a worker (std::terminate, no message): the first one stops
      // the search and becomes its error. E.g. std::bad_alloc under an address-space limit
      // that the started threads' stacks nearly fill.
      std::string thrown;
      const auto run = [this, &thrown](int t) {
        try {
          Worker(t);
        } catch (const std::exception& e) {
          std::lock_guard<std::mutex> lock(mutex_);
          stopped_ = true;
          if (thrown.empty()) {
            try {  // formatting allocates too: out of memory, keep a fixed message
              thrown = fmt::format("search thread {} threw: {}", t + 1, e.what());
            } catch (const std::exception&) {
              thrown = "a search thread threw (out of memory)";
            }
          }
        }
      };
      for (int t = 0; t < options_.threads; ++t) {
        try {
          workers.emplace_back(run, t);
        } catch (const std::exception& e) {
          // std::system_error when the system refuses the thread, std::bad_alloc when its state
          // cannot be allocated (both under a limit on threads or memory).
          failure = fmt::format("cannot start search thread {} of {}: {}", t + 1,
                                options_.threads, e.what());
          std::lock_guard<std::mutex> lock(mutex_);
          stopped_ = true;  // the started workers stop at their next check
          break;
        }
      }
      for (auto& w : workers) w.join();
      if (!failure.empty()) {
        return ResourceExhaustedError(failure + "; use fewer threads");
      }
      if (!thrown.empty()) return ResourceExhaustedError(thrown + "; use fewer threads");
    }
    result_.tree_nodes = static_cast<int64_t>(nodes_.size());
    result_.elapsed_s = Elapsed();
    result_.stop_reason = stop_reason_;
    if (result_.best_cost == kInf) {
      if (stop_reason_ == MctsStopReason::kCancelled) {
        return CancelledError("MCTS cancelled before finding a feasible assignment");
      }
      return ResourceExhaustedError(fmt::format(
          "MCTS found no finite-cost complete assignment ({} iterations, {} evaluations, {})",
          result_.iterations, result_.evaluations, MctsStopReasonName(stop_reason_)));
    }
    return result_;
  }

 private:
  struct Pending {
    int node = -1;
    bool terminal = false;
    std::vector<int> path;  // actions from the root to `node`
    double best_cost = kInf;
    std::vector<int> best_assignment;
    int64_t evaluations = 0;
  };

  double Elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

  // Sets stop_reason_ and returns true when the search must stop. Requires the lock.
  bool ShouldStop() {
    if (stopped_) return true;
    if (nodes_[0].exhausted) {
      stop_reason_ = MctsStopReason::kExhausted;
    } else if (options_.cancel != nullptr && options_.cancel->load()) {
      stop_reason_ = MctsStopReason::kCancelled;
    } else if (options_.max_iterations > 0 && claimed_ >= options_.max_iterations) {
      stop_reason_ = MctsStopReason::kIterationBudget;
    } else if (options_.time_budget_s > 0 && Elapsed() >= options_.time_budget_s) {
      stop_reason_ = MctsStopReason::kTimeBudget;
    } else {
      return false;
    }
    stopped_ = true;
    return true;
  }

  double Score(const Node& v) const {
    if (v.best_cost == kInf) return 0.0;
    if (!(worst_cost_ > best_cost_)) return 1.0;
    return (worst_cost_ - v.best_cost) / (worst_cost_ - best_cost_);
  }

  // Selection + expansion. Returns the new (or re-selected terminal) node, or -1 when nothing
  // selectable remains right now. Requires the lock. Increments visit counts along the path
  // ("virtual visits", so that concurrent workers spread out).
  int SelectAndExpand(std::mt19937_64& rng, std::vector<int>& path) {
    path.clear();
    int x = 0;
    while (true) {
      Node& node = nodes_[x];
      ++node.visits;
      if (node.terminal) return x;
      if (!node.untried.empty()) {
        const size_t pick = std::uniform_int_distribution<size_t>(0, node.untried.size() - 1)(rng);
        const int action = node.untried[pick];
        node.untried[pick] = node.untried.back();
        node.untried.pop_back();
        path.push_back(action);
        Node child;
        child.parent = x;
        child.action = action;
        child.visits = 1;
        problem_.legal_actions(path, child.untried);
        child.terminal = child.untried.empty();
        const int id = static_cast<int>(nodes_.size());
        nodes_[x].children.push_back(id);  // `node` may dangle after the push_back below
        nodes_.push_back(std::move(child));
        return id;
      }
      int best = -1;
      double best_ucb = -kInf;
      const double log_n = std::log(static_cast<double>(std::max<int64_t>(node.visits, 1)));
      for (int c : node.children) {
        const Node& v = nodes_[c];
        if (v.exhausted) continue;
        const double ucb = std::pow(Score(v), options_.alpha) +
                           options_.beta * std::sqrt(log_n / static_cast<double>(std::max<int64_t>(v.visits, 1)));
        if (ucb > best_ucb) {
          best_ucb = ucb;
          best = c;
        }
      }
      if (best < 0) return -1;  // every child exhausted or being finished by another worker
      path.push_back(nodes_[best].action);
      x = best;
    }
  }

  // positions[a] = the first index of action a in `assignment` (int max when absent).
  static void PositionsOf(const std::vector<int>& assignment, std::vector<int>& positions) {
    positions.clear();
    for (size_t k = 0; k < assignment.size(); ++k) {
      const int a = assignment[k];
      if (a < 0) continue;
      if (a >= static_cast<int>(positions.size())) {
        positions.resize(a + 1, std::numeric_limits<int>::max());
      }
      positions[a] = std::min(positions[a], static_cast<int>(k));
    }
  }

  // `incumbent_position[a]`: where action a comes in the incumbent (empty: no incumbent).
  void Rollouts(Pending& p, std::mt19937_64& rng, const std::vector<int>& incumbent_position) {
    const int count = p.terminal ? 1 : options_.rollouts_per_expansion;
    const double follow = incumbent_position.empty() ? 0.0 : options_.incumbent_rollout_probability;
    std::vector<int> state, actions;
    for (int r = 0; r < count; ++r) {
      state = p.path;
      while (true) {
        problem_.legal_actions(state, actions);
        if (actions.empty()) break;
        if (follow > 0 && std::uniform_real_distribution<double>(0, 1)(rng) < follow) {
          int pick = actions[0];
          int pick_position = std::numeric_limits<int>::max();
          for (int a : actions) {
            const int at = a >= 0 && a < static_cast<int>(incumbent_position.size())
                               ? incumbent_position[a]
                               : std::numeric_limits<int>::max();
            if (at < pick_position) {
              pick = a;
              pick_position = at;
            }
          }
          state.push_back(pick);
          continue;
        }
        state.push_back(actions[std::uniform_int_distribution<size_t>(0, actions.size() - 1)(rng)]);
      }
      const double cost = problem_.cost(state);
      ++p.evaluations;
      if (cost < p.best_cost || p.best_assignment.empty()) {
        if (cost < p.best_cost) p.best_cost = cost;
        p.best_assignment = state;
      }
    }
  }

  // Requires the lock.
  void Backpropagate(const Pending& p) {
    ++result_.iterations;
    result_.evaluations += p.evaluations;
    const double cost = p.best_cost;
    if (cost < kInf) {
      best_cost_ = std::min(best_cost_, cost);
      worst_cost_ = std::max(worst_cost_, cost);
      if (cost < result_.best_cost) {
        result_.best_cost = cost;
        result_.best_assignment = p.best_assignment;
        result_.curve.push_back({result_.iterations, result_.evaluations, Elapsed(), cost});
      }
    }
    for (int x = p.node; x >= 0; x = nodes_[x].parent) {
      nodes_[x].best_cost = std::min(nodes_[x].best_cost, cost);
    }
    if (nodes_[p.node].terminal) {
      // Mark exhausted and propagate upwards while every child is exhausted.
      nodes_[p.node].exhausted = true;
      for (int x = nodes_[p.node].parent; x >= 0; x = nodes_[x].parent) {
        Node& node = nodes_[x];
        if (!node.untried.empty()) break;
        bool all = true;
        for (int c : node.children) all = all && nodes_[c].exhausted;
        if (!all) break;
        node.exhausted = true;
      }
    }
  }

  void Worker(int index) {
    std::seed_seq seq{static_cast<uint64_t>(options_.seed), static_cast<uint64_t>(options_.seed >> 32),
                      static_cast<uint64_t>(index), uint64_t{0x9e3779b9}};
    std::mt19937_64 rng(seq);
    std::vector<Pending> batch;
    std::vector<int> incumbent_position;
    while (true) {
      batch.clear();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (options_.incumbent_rollout_probability > 0) {
          PositionsOf(result_.best_assignment, incumbent_position);
        }
        for (int b = 0; b < options_.expansions_per_sync; ++b) {
          if (ShouldStop()) break;
          Pending p;
          p.node = SelectAndExpand(rng, p.path);
          if (p.node < 0) break;
          p.terminal = nodes_[p.node].terminal;
          ++claimed_;
          batch.push_back(std::move(p));
        }
        if (batch.empty() && stopped_) return;
      }
      if (batch.empty()) {
        // Other workers hold the only selectable leaves; let them finish.
        std::this_thread::yield();
        continue;
      }
      for (Pending& p : batch) Rollouts(p, rng, incumbent_position);
      std::lock_guard<std::mutex> lock(mutex_);
      for (const Pending& p : batch) Backpropagate(p);
    }
  }

  const MctsProblem& problem_;
  const MctsOptions& options_;
  const std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
  std::vector<Node> nodes_;
  MctsResult result_;
  int64_t claimed_ = 0;  // expansions handed out
  bool stopped_ = false;
  MctsStopReason stop_reason_ = MctsStopReason::kIterationBudget;
  double best_cost_ = kInf;
  double worst_cost_ = -kInf;
};

}  // namespace

Status MctsOptions::Validate() const {
  if (!(alpha > 0) || std::isinf(alpha)) {
    return InvalidArgumentError(fmt::format("mcts_options.alpha = {}; must be finite and > 0", alpha));
  }
  if (!(beta >= 0) || std::isinf(beta)) {
    return InvalidArgumentError(fmt::format("mcts_options.beta = {}; must be finite and >= 0", beta));
  }
  if (rollouts_per_expansion < 1) {
    return InvalidArgumentError(fmt::format(
        "mcts_options.rollouts_per_expansion = {}; must be >= 1", rollouts_per_expansion));
  }
  if (max_iterations < 0) {
    return InvalidArgumentError(
        fmt::format("mcts_options.max_iterations = {}; must be >= 0", max_iterations));
  }
  if (!(time_budget_s >= 0) || std::isinf(time_budget_s)) {
    return InvalidArgumentError(
        fmt::format("mcts_options.time_budget_s = {}; must be finite and >= 0", time_budget_s));
  }
  if (max_iterations == 0 && time_budget_s == 0) {
    return InvalidArgumentError(
        "mcts_options.max_iterations = 0 and time_budget_s = 0; set at least one budget");
  }
  if (threads < 1 || threads > kMaxThreads) {
    return InvalidArgumentError(
        fmt::format("mcts_options.threads = {}; must be in [1, {}]", threads, kMaxThreads));
  }
  if (expansions_per_sync < 1) {
    return InvalidArgumentError(fmt::format("mcts_options.expansions_per_sync = {}; must be >= 1",
                                            expansions_per_sync));
  }
  if (!(incumbent_rollout_probability >= 0 && incumbent_rollout_probability <= 1)) {
    return InvalidArgumentError(
        fmt::format("mcts_options.incumbent_rollout_probability = {}; must be in [0, 1]",
                    incumbent_rollout_probability));
  }
  return OkStatus();
}

std::string_view MctsStopReasonName(MctsStopReason reason) {
  switch (reason) {
    case MctsStopReason::kExhausted: return "EXHAUSTED";
    case MctsStopReason::kIterationBudget: return "ITERATION_BUDGET";
    case MctsStopReason::kTimeBudget: return "TIME_BUDGET";
    case MctsStopReason::kCancelled: return "CANCELLED";
  }
  return "UNKNOWN";
}

std::string MctsResult::BriefReport() const {
  return fmt::format("best {:g} after {} iterations ({} evaluations, {} nodes) in {:.3f} s: {}",
                     best_cost, iterations, evaluations, tree_nodes, elapsed_s,
                     MctsStopReasonName(stop_reason));
}

StatusOr<MctsResult> MctsSearch(const MctsProblem& problem, const MctsOptions& options) {
  WEFT_RETURN_IF_ERROR(options.Validate());
  if (!problem.legal_actions || !problem.cost) {
    return InvalidArgumentError("mcts_problem.legal_actions and mcts_problem.cost must be set");
  }
  Search search(problem, options);
  return search.Run();
}

}  // namespace weft::algo
