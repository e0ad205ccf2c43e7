#pragma once
// SimulateWindow: K training iterations in one simulation, with a carry between windows and
// bounded buffers between producer and consumer groups (docs/simulator.md "Windows").
//
// Model (each iteration as in Simulate, plus):
//  - no global barrier between iterations: a group starts iteration k+1 (its first stage, when
//    that stage's inputs have arrived) once its own iteration-k work and tail are done, i.e. at
//    its GroupTimeline::end_s of iteration k (last stage, DP grad sync, optimizer step). A
//    graph::GradSync set still waits for all its members (as in Simulate), so its members are
//    released together; folded groups are released one by one;
//  - links, ports and copy streams are shared by all iterations (a transfer of iteration k+1
//    can queue behind one of iteration k); each iteration has its own stages, edges and
//    compiled-plan buffers (memory is replayed per iteration, from the group's static bytes);
//  - bounded buffers (BoundedBuffer) hold bytes between stages of any groups and iterations,
//    first in, first out:
//      * a stage that puts (BufferUse::kPut) puts its bytes when its compute ends; if the buffer
//        cannot take them (occupancy + bytes > capacity, or an earlier put still waits), the
//        stage holds its group until the put fits: its StageTiming::end_s is the put time, its
//        out-edges leave then and the group's next stage waits for it (producer stall = put
//        time − compute end);
//      * a stage that gets (BufferUse::kGet) takes its bytes when it starts; it starts at
//        max(group free, inputs arrived) if the buffer holds enough (and no earlier get
//        waits), else as soon as puts made it hold enough (consumer starvation = start − that
//        earlier time);
//      * puts and gets are served in the order they were asked for (each side first in, first
//        out; no put overtakes a waiting put, no get a waiting get);
//    a window whose puts can never fit (nothing gets any more) or whose gets can never be served
//    fails with FailedPrecondition naming the buffer, like a deadlock;
//  - the window's clock starts where the carry stops: group g may not start before
//    carry.group_free_s[g]; the output carry holds each group's end and each buffer's bytes, so
//    a window continues where another stopped.
// K = 1 without buffers and with an empty carry gives exactly Simulate's Timeline.
// Thread-safety: SimulateWindow is a pure function.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "weft/common/status.h"
#include "weft/graph/stage_graph.h"
#include "weft/sched/schedule.h"
#include "weft/sim/simulator.h"
#include "weft/sim/timeline.h"
#include "weft/spec/cluster.h"

namespace weft::sim {

// A buffer between producer and consumer stages (FlowTrain: frozen encoders stream their
// outputs into a pool the LLM backbone consumes). Bytes in the caller's unit (e.g. per GPU of
// the consumer group); they are not added to any group's memory (count the pool's capacity in
// a group's static_bytes if it lives on that group's GPUs).
struct BoundedBuffer {
  std::string name = {};
  int64_t capacity_bytes = 0;  // > 0
};

enum class BufferAction : uint8_t { kPut, kGet };
std::string_view BufferActionName(BufferAction action);  // "put", "get"

// Marks a stage of an iteration's graph as putting into or getting from a buffer (at most one
// use per stage). Kept beside the graph so that strategies mark stages without changing
// graph::StageGraph.
struct BufferUse {
  graph::StageId stage = 0;
  int buffer = 0;  // index into WindowOptions::buffers
  BufferAction action = BufferAction::kPut;
  int64_t bytes = 0;  // > 0 and <= the buffer's capacity
};

// One iteration of the window. The graphs of a window may differ (another batch) but must have
// the same device groups (count and placement).
struct WindowIteration {
  const graph::StageGraph* graph = nullptr;  // finalized; not owned
  const sched::Schedule* schedule = nullptr;
  std::vector<BufferUse> buffer_uses = {};
  double samples = 0;  // samples of this iteration, for throughput (0 = unknown)
  double tokens = 0;   // tokens of this iteration (0 = unknown)
};

// Where a window starts or stops. Empty vectors = every group free at 0, every buffer empty.
struct WindowCarry {
  std::vector<double> group_free_s = {};   // per group: its previous work ends (window clock)
  std::vector<int64_t> buffer_bytes = {};  // per buffer: bytes it holds
};

struct WindowOptions {
  // Per iteration: recording, grad sync, optimizer step, capacity, validation, element size.
  // Its samples_per_iteration and tokens_per_iteration are not used (WindowIteration has them).
  SimOptions sim = {};
  std::vector<BoundedBuffer> buffers = {};
  // Iterations at the start of the window left out of the steady-state figures (pipeline
  // fill, buffers filling up); must be < the number of iterations.
  int warmup_iterations = 0;

  Status Validate() const;
};

struct BufferPoint {
  double time_s = 0;  // window clock
  int64_t bytes = 0;  // occupancy after the change at time_s
};

struct BufferTimeline {
  std::string name;
  int64_t capacity_bytes = 0;
  int64_t initial_bytes = 0;  // from the carry
  int64_t final_bytes = 0;    // in the output carry
  int64_t peak_bytes = 0;
  std::vector<BufferPoint> occupancy;  // (window start, initial_bytes), then one per put or get
  int64_t puts = 0, gets = 0;
  int64_t put_bytes = 0, get_bytes = 0;
  double producer_stall_s = 0;       // Σ over puts: put time − compute end (buffer full)
  double consumer_starvation_s = 0;  // Σ over gets: start − the start without the buffer
};

// Figures over the iterations after the warm-up: from `begin_s` (every group has finished
// iteration warmup − 1, or the carry's latest group_free_s when warmup = 0) to `end_s` (every
// group has finished the last iteration).
struct WindowSteadyState {
  int warmup_iterations = 0;
  int iterations = 0;  // measured: K − warmup
  double begin_s = 0, end_s = 0;
  double iteration_time_s = 0;  // (end_s − begin_s) / iterations
  double samples_per_s = 0, tokens_per_s = 0;
  double model_flops = 0;  // Σ over the measured iterations
  int num_gpus = 0;
  double mfu = 0;          // model_flops / (num_gpus · peak · (end_s − begin_s))
  // Per group: time in [begin_s, end_s) it ran neither a stage nor its grad sync / optimizer
  // step, and that time over end_s − begin_s.
  std::vector<double> group_idle_s;
  std::vector<double> group_idle_ratio;
};

struct WindowResult {
  // Iteration k's Timeline, with times relative to iteration_origin_s[k] (the earliest time a
  // group could start it: the smallest release over groups); each reports itself as Simulate's.
  std::vector<Timeline> iterations;
  std::vector<double> iteration_origin_s;  // window clock
  std::vector<double> iteration_end_s;     // window clock: every group has finished iteration k
  std::vector<BufferTimeline> buffers;     // per WindowOptions::buffers
  WindowCarry carry;                       // where the window stops
  WindowSteadyState steady;
  // A few lines: iterations, steady-state time per iteration, throughput, MFU, idle per group,
  // buffer stalls and starvation.
  std::string BriefReport() const;
};

// Fails with InvalidArgument on an empty window, a graph that is not finalized, graphs whose
// groups differ, an invalid schedule (when options.sim.validate_schedule), a buffer use naming
// a missing stage or buffer or with bytes outside (0, capacity], or a carry of the wrong size
// or over a buffer's capacity; with FailedPrecondition "deadlock: iteration 2: group 1 waits at
// ..." when orders contradict dependencies or a buffer can never serve a put or a get.
// The warm-up of a window by the marginal standard error rule (MSER, White 1997: the initial
// transient of a simulation output series): the truncation d in [0, n/2] minimizing
// Σ_{i>=d} (x_i − mean_d)² / (n − d)², the squared standard error of the mean of what is kept
// (the first d on ties). A series that still drifts over the whole window puts d at the cap
// n/2: then no steady state is established within it.
struct Truncation {
  int warmup = 0;
  bool at_cap = false;  // d = n/2 (and n >= 4): the window may be too short for a steady state
};
Truncation MserTruncation(std::span<const double> x);

StatusOr<WindowResult> SimulateWindow(std::span<const WindowIteration> iterations,
                                      const spec::ClusterSpec& cluster,
                                      const WindowOptions& options = {},
                                      const WindowCarry& carry = {});

}  // namespace weft::sim
