#pragma once
// Chrome-trace (Trace Event Format) JSON of one timeline, for ui.perfetto.dev and
// chrome://tracing. The track layout is a contract shared with the Python runtime's measured
// traces (docs/report.md, "Trace track layout"):
//   - one process per device group g: pid = pid_offset + g + 1, named
//     "<process_name_prefix><group label>", sorted by g;
//     - tid 1 "compute": one complete event ("ph": "X") per stage, named "<module> <pass>"
//       ("llm F", "vit B", "llm W"; pass = F | B | Bi | W), so Perfetto gives every (module,
//       direction) one colour; cname encodes the direction for chrome://tracing; args hold the
//       stage id, module, chunk, microbatch ("3" or "3.1"), pass, group, recompute, latency_s,
//       flops, activation bytes;
//     - tid 2 "dp-sync/optimizer": "grad-sync" and "optimizer" complete events at the group's
//       tail (when the timeline has them and include_group_tail is set);
//     - tid 1000 + d "send → <label of d>": one complete event per transfer to group d, named
//       "send <module> <pass> mb<microbatch>", args with bytes, link, from/to stage ids;
//     - a counter ("ph": "C") named "memory" with args {"GiB": value}: one event per memory point.
//   - times in microseconds from the iteration start (+ time_offset_s).
// A window of iterations (sim::SimulateWindow; ChromeWindowTrace) uses the same tracks on the
// window's clock (each iteration's events at its origin): every complete event's args hold
// {"iteration": k}; tid 3 "iterations" shows each group's span of each iteration ("iteration
// k", its first stage to the end of its tail); each bounded buffer is a counter track named
// "buffer <name>" with args {"bytes": occupancy} on a process "buffers" after the groups.
// Thread-safety: pure functions.
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "weft/graph/stage_graph.h"
#include "weft/sim/timeline.h"
#include "weft/sim/window.h"

namespace weft::report {

struct TraceOptions {
  std::string process_name_prefix = {};  // e.g. "sim/" vs "run/" to merge two traces
  int pid_offset = 0;                    // added to every pid (merging: give each trace its own)
  double time_offset_s = 0;              // added to every timestamp
  bool include_transfers = true;         // send tracks (needs Timeline::transfers)
  bool include_memory = true;            // memory counters (needs GroupTimeline::memory)
  bool include_group_tail = true;        // grad-sync and optimizer events of each group
  std::string title = {};                // stored in otherData.title (e.g. the schedule name)
};

// Counts of the events ChromeTrace emits (metadata events excluded), for tests and summaries.
struct TraceEventCounts {
  int stages = 0;
  int transfers = 0;
  int counters = 0;
  int group_tail = 0;
  int iteration_spans = 0;  // window traces
  int metadata = 0;
};

// {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}. Fails with
// InvalidArgument when the timeline does not belong to the graph (stage or group counts differ,
// a transfer names a missing stage or group).
StatusOr<nlohmann::json> ChromeTrace(const graph::StageGraph& graph,
                                     const sim::Timeline& timeline,
                                     const TraceOptions& options = {});

// Tallies the events of a trace made by ChromeTrace by kind (by "ph" and tid).
TraceEventCounts CountTraceEvents(const nlohmann::json& trace);

// ChromeTrace(...) dumped compactly (one event per line); invalid UTF-8 is replaced.
StatusOr<std::string> ChromeTraceString(const graph::StageGraph& graph,
                                        const sim::Timeline& timeline,
                                        const TraceOptions& options = {});

// One trace of a window: `iterations` are the window's inputs (their graphs), `window` its
// result. InvalidArgument when the counts differ or a timeline does not belong to its graph.
StatusOr<nlohmann::json> ChromeWindowTrace(std::span<const sim::WindowIteration> iterations,
                                           const sim::WindowResult& window,
                                           const TraceOptions& options = {});

// ChromeWindowTrace(...) dumped like ChromeTraceString.
StatusOr<std::string> ChromeWindowTraceString(std::span<const sim::WindowIteration> iterations,
                                              const sim::WindowResult& window,
                                              const TraceOptions& options = {});

}  // namespace weft::report
