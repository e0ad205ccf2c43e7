#include "weft/report/trace.h"

#include <fmt/format.h>

#include "internal.h"

namespace weft::report {
namespace {

using nlohmann::json;

constexpr int kComputeTid = 1;
constexpr int kTailTid = 2;
constexpr int kIterationTid = 3;  // window traces: each group's span of each iteration
constexpr int kSendTidBase = 1000;

// chrome://tracing honours cname (a fixed palette); Perfetto colours by event name instead.
std::string_view PassCname(spec::Pass pass) {
  switch (pass) {
    case spec::Pass::kForward:
      return "rail_load";
    case spec::Pass::kBackward:
      return "rail_animation";
    case spec::Pass::kBackwardInput:
      return "rail_animation";
    case spec::Pass::kBackwardWeight:
      return "rail_idle";
  }
  return "generic_work";
}

double Micros(double seconds) { return seconds * 1e6; }

json Metadata(std::string_view name, int pid, int tid, json args) {
  json e = {{"ph", "M"}, {"name", name}, {"pid", pid}, {"args", std::move(args)}};
  if (tid >= 0) e["tid"] = tid;
  return e;
}

json Complete(std::string name,
              std::string_view cat,
              int pid,
              int tid,
              double start_s,
              double end_s,
              double offset_s,
              json args) {
  return json{{"ph", "X"},
              {"name", std::move(name)},
              {"cat", cat},
              {"pid", pid},
              {"tid", tid},
              {"ts", Micros(start_s + offset_s)},
              {"dur", Micros(end_s - start_s)},
              {"args", std::move(args)}};
}

// Processes (one per group) and their threads. `has_send[g][d]`: g sends to d; `has_tail[g]`:
// g has a grad-sync or optimizer event.
void AppendMetadata(const graph::StageGraph& graph,
                    const std::vector<std::vector<bool>>& has_send,
                    const std::vector<bool>& has_tail,
                    bool iteration_tracks,
                    const TraceOptions& options,
                    json& events) {
  const auto pid_of = [&](graph::GroupId g) { return options.pid_offset + g + 1; };
  for (graph::GroupId g = 0; g < graph.num_groups(); ++g) {
    const int pid = pid_of(g);
    const graph::DeviceGroup& group = graph.group(g);
    events.push_back(Metadata("process_name", pid, -1,
                              {{"name", options.process_name_prefix +
                                            internal::GroupLabel(graph, g)}}));
    events.push_back(Metadata("process_sort_index", pid, -1, {{"sort_index", g}}));
    events.push_back(Metadata(
        "process_labels", pid, -1,
        {{"labels", fmt::format("gpus {}..{} x dp {}", group.first_gpu,
                                group.first_gpu + group.num_gpus - 1, group.dp)}}));
    events.push_back(Metadata("thread_name", pid, kComputeTid, {{"name", "compute"}}));
    events.push_back(Metadata("thread_sort_index", pid, kComputeTid, {{"sort_index", 0}}));
    if (options.include_group_tail && has_tail[g]) {
      events.push_back(Metadata("thread_name", pid, kTailTid, {{"name", "dp-sync/optimizer"}}));
      events.push_back(Metadata("thread_sort_index", pid, kTailTid, {{"sort_index", 1}}));
    }
    for (graph::GroupId d = 0; d < graph.num_groups(); ++d) {
      if (!has_send[g][d]) continue;
      events.push_back(Metadata("thread_name", pid, kSendTidBase + d,
                                {{"name", "send \u2192 " + internal::GroupLabel(graph, d)}}));
      events.push_back(
          Metadata("thread_sort_index", pid, kSendTidBase + d, {{"sort_index", 2 + d}}));
    }
    if (iteration_tracks) {
      events.push_back(Metadata("thread_name", pid, kIterationTid, {{"name", "iterations"}}));
      events.push_back(Metadata("thread_sort_index", pid, kIterationTid, {{"sort_index", -1}}));
    }
  }
}

// The stages, group tails, transfers and memory counters of one timeline, `offset_s` added to
// every time; `iteration` >= 0 adds {"iteration": k} to the args of its complete events.
void AppendTimeline(const graph::StageGraph& graph,
                    const sim::Timeline& timeline,
                    const TraceOptions& options,
                    double offset_s,
                    int iteration,
                    json& events) {
  const auto pid_of = [&](graph::GroupId g) { return options.pid_offset + g + 1; };
  const auto tag = [&](json& args) {
    if (iteration >= 0) args["iteration"] = iteration;
  };

  // Stages.
  for (graph::StageId id = 0; id < graph.num_stages(); ++id) {
    const graph::Stage& s = graph.stage(id);
    const sim::StageTiming& t = timeline.stages[id];
    const std::string module = internal::ModuleName(graph, s.module);
    const std::string_view pass = spec::PassShortName(s.pass);
    json args = {{"stage", id},
                 {"module", module},
                 {"chunk", s.chunk},
                 {"microbatch", internal::MicrobatchLabel(s)},
                 {"pass", pass},
                 {"group", s.group},
                 {"recompute", spec::RecomputeName(s.recompute)},
                 {"latency_s", s.latency_s},
                 {"flops", s.flops},
                 {"activation_alloc_bytes", s.activation_alloc_bytes},
                 {"activation_free_bytes", s.activation_free_bytes}};
    tag(args);
    json e = Complete(fmt::format("{} {}", module, pass),
                      spec::IsBackward(s.pass) ? "stage,backward" : "stage,forward",
                      pid_of(s.group), kComputeTid, t.start_s, t.end_s, offset_s, std::move(args));
    e["cname"] = PassCname(s.pass);
    events.push_back(std::move(e));
  }

  // Group tails: DP gradient all-reduce, then the optimizer step.
  if (options.include_group_tail) {
    for (graph::GroupId g = 0; g < graph.num_groups(); ++g) {
      const sim::GroupTimeline& gt = timeline.groups[g];
      double t = gt.grad_sync_start_s;
      if (gt.grad_sync_s > 0) {
        json args = {{"bytes", graph.group(g).grad_sync_bytes}, {"dp", graph.group(g).dp}};
        tag(args);
        json e = Complete("grad-sync", "collective", pid_of(g), kTailTid, t, t + gt.grad_sync_s,
                          offset_s, std::move(args));
        e["cname"] = "grey";
        events.push_back(std::move(e));
        t += gt.grad_sync_s;
      }
      if (gt.optimizer_s > 0) {
        json args = {{"bytes", graph.group(g).optimizer_bytes}};
        tag(args);
        json e = Complete("optimizer", "optimizer", pid_of(g), kTailTid, t, t + gt.optimizer_s,
                          offset_s, std::move(args));
        e["cname"] = "olive";
        events.push_back(std::move(e));
      }
    }
  }

  // Transfers.
  if (options.include_transfers) {
    for (const sim::Transfer& t : timeline.transfers) {
      const graph::Stage& from = graph.stage(t.from);
      json args = {{"edge", t.edge},
                   {"from_stage", t.from},
                   {"to_stage", t.to},
                   {"dst_group", t.dst_group},
                   {"bytes", t.bytes},
                   {"link", sim::LinkKindName(t.link)}};
      tag(args);
      json e =
          Complete(fmt::format("send {} {} mb{}", internal::ModuleName(graph, from.module),
                               spec::PassShortName(from.pass), internal::MicrobatchLabel(from)),
                   "transfer", pid_of(t.src_group), kSendTidBase + t.dst_group, t.start_s, t.end_s,
                   offset_s, std::move(args));
      e["cname"] = "generic_work";
      events.push_back(std::move(e));
    }
  }

  // Memory counters.
  if (options.include_memory) {
    for (graph::GroupId g = 0; g < graph.num_groups(); ++g) {
      for (const sim::MemoryPoint& p : timeline.groups[g].memory) {
        events.push_back(json{{"ph", "C"},
                              {"name", "memory"},
                              {"pid", pid_of(g)},
                              {"ts", Micros(p.time_s + offset_s)},
                              {"args", {{"GiB", p.bytes / internal::kBytesPerGiB}}}});
      }
    }
  }
}

// Which groups send to which and which have a tail, over the timelines.
void NoteTracks(const graph::StageGraph& graph,
                const sim::Timeline& timeline,
                const TraceOptions& options,
                std::vector<std::vector<bool>>& has_send,
                std::vector<bool>& has_tail) {
  if (options.include_transfers) {
    for (const sim::Transfer& t : timeline.transfers) has_send[t.src_group][t.dst_group] = true;
  }
  for (graph::GroupId g = 0; g < graph.num_groups(); ++g) {
    const sim::GroupTimeline& tail = timeline.groups[g];
    if (tail.grad_sync_s > 0 || tail.optimizer_s > 0) has_tail[g] = true;
  }
}

}  // namespace

StatusOr<json> ChromeTrace(const graph::StageGraph& graph,
                           const sim::Timeline& timeline,
                           const TraceOptions& options) {
  WEFT_RETURN_IF_ERROR(internal::CheckTimelineMatchesGraph(graph, timeline));
  json events = json::array();
  std::vector<std::vector<bool>> has_send(graph.num_groups(),
                                          std::vector<bool>(graph.num_groups(), false));
  std::vector<bool> has_tail(graph.num_groups(), false);
  NoteTracks(graph, timeline, options, has_send, has_tail);
  AppendMetadata(graph, has_send, has_tail, /*iteration_tracks=*/false, options, events);
  AppendTimeline(graph, timeline, options, options.time_offset_s, /*iteration=*/-1, events);

  json other = {{"source", "weft"},
                {"title", internal::SanitizeUtf8(options.title)},
                {"iteration_time_s", timeline.iteration_time_s},
                {"lower_bound_s", timeline.lower_bound_s},
                {"bubble_ratio", timeline.bubble_ratio},
                {"mfu", timeline.mfu},
                {"layout", "weft-trace-v1"}};
  return json{{"traceEvents", std::move(events)},
              {"displayTimeUnit", "ms"},
              {"otherData", std::move(other)}};
}

StatusOr<json> ChromeWindowTrace(std::span<const sim::WindowIteration> iterations,
                                 const sim::WindowResult& window,
                                 const TraceOptions& options) {
  if (iterations.empty() || iterations.size() != window.iterations.size() ||
      window.iteration_origin_s.size() != window.iterations.size()) {
    return InvalidArgumentError(fmt::format(
        "the window has {} iterations; {} graphs were given", window.iterations.size(),
        iterations.size()));
  }
  for (size_t k = 0; k < iterations.size(); ++k) {
    if (iterations[k].graph == nullptr) {
      return InvalidArgumentError(fmt::format("iterations[{}].graph is not set", k));
    }
    WEFT_RETURN_IF_ERROR(
        internal::CheckTimelineMatchesGraph(*iterations[k].graph, window.iterations[k])
            .WithPrefix(fmt::format("iteration {}", k)));
  }
  const graph::StageGraph& graph0 = *iterations[0].graph;
  const int num_groups = graph0.num_groups();
  for (size_t k = 1; k < iterations.size(); ++k) {
    if (iterations[k].graph->num_groups() != num_groups) {
      return InvalidArgumentError(fmt::format(
          "iterations[{}].graph has {} groups; iterations[0].graph has {}", k,
          iterations[k].graph->num_groups(), num_groups));
    }
  }
  json events = json::array();
  std::vector<std::vector<bool>> has_send(num_groups, std::vector<bool>(num_groups, false));
  std::vector<bool> has_tail(num_groups, false);
  for (size_t k = 0; k < iterations.size(); ++k) {
    NoteTracks(*iterations[k].graph, window.iterations[k], options, has_send, has_tail);
  }
  AppendMetadata(graph0, has_send, has_tail, /*iteration_tracks=*/true, options, events);
  for (size_t k = 0; k < iterations.size(); ++k) {
    const double offset_s = options.time_offset_s + window.iteration_origin_s[k];
    AppendTimeline(*iterations[k].graph, window.iterations[k], options, offset_s,
                   static_cast<int>(k), events);
    // Each group's span of the iteration: its first stage to the end of its tail.
    for (graph::GroupId g = 0; g < num_groups; ++g) {
      const sim::GroupTimeline& gt = window.iterations[k].groups[g];
      json e = Complete(fmt::format("iteration {}", k), "iteration",
                        options.pid_offset + g + 1, kIterationTid, gt.first_start_s, gt.end_s,
                        offset_s, {{"iteration", k}, {"busy_s", gt.busy_s}});
      e["cname"] = k % 2 == 0 ? "thread_state_running" : "thread_state_runnable";
      events.push_back(std::move(e));
    }
  }
  // Bounded buffers: one counter track each, on a process after the groups.
  if (!window.buffers.empty()) {
    const int pid = options.pid_offset + num_groups + 1;
    events.push_back(Metadata("process_name", pid, -1,
                              {{"name", options.process_name_prefix + "buffers"}}));
    events.push_back(Metadata("process_sort_index", pid, -1, {{"sort_index", num_groups}}));
    for (const sim::BufferTimeline& b : window.buffers) {
      const std::string name = "buffer " + internal::SanitizeUtf8(b.name);
      for (const sim::BufferPoint& p : b.occupancy) {
        events.push_back(json{{"ph", "C"},
                              {"name", name},
                              {"pid", pid},
                              {"ts", Micros(p.time_s + options.time_offset_s)},
                              {"args", {{"bytes", p.bytes}}}});
      }
    }
  }
  json buffers = json::array();
  for (const sim::BufferTimeline& b : window.buffers) {
    buffers.push_back({{"name", internal::SanitizeUtf8(b.name)},
                       {"capacity_bytes", b.capacity_bytes},
                       {"peak_bytes", b.peak_bytes},
                       {"producer_stall_s", b.producer_stall_s},
                       {"consumer_starvation_s", b.consumer_starvation_s}});
  }
  json other = {{"source", "weft"},
                {"title", internal::SanitizeUtf8(options.title)},
                {"iterations", window.iterations.size()},
                {"warmup_iterations", window.steady.warmup_iterations},
                {"steady_iteration_time_s", window.steady.iteration_time_s},
                {"steady_mfu", window.steady.mfu},
                {"buffers", std::move(buffers)},
                {"layout", "weft-trace-v1"}};
  return json{{"traceEvents", std::move(events)},
              {"displayTimeUnit", "ms"},
              {"otherData", std::move(other)}};
}

TraceEventCounts CountTraceEvents(const json& trace) {
  TraceEventCounts c;
  if (!trace.is_object() || !trace.contains("traceEvents")) return c;
  for (const json& e : trace["traceEvents"]) {
    const std::string ph = e.value("ph", "");
    if (ph == "M") {
      ++c.metadata;
    } else if (ph == "C") {
      ++c.counters;
    } else if (ph == "X") {
      const int tid = e.value("tid", 0);
      if (tid == kComputeTid) {
        ++c.stages;
      } else if (tid == kTailTid) {
        ++c.group_tail;
      } else if (tid == kIterationTid) {
        ++c.iteration_spans;
      } else if (tid >= kSendTidBase) {
        ++c.transfers;
      }
    }
  }
  return c;
}

namespace {

// One event per line keeps large traces diff- and grep-friendly.
std::string DumpTrace(const json& trace) {
  std::string out = "{\"traceEvents\": [\n";
  const json& events = trace["traceEvents"];
  for (size_t i = 0; i < events.size(); ++i) {
    out += events[i].dump(-1, ' ', false, json::error_handler_t::replace);
    out += i + 1 < events.size() ? ",\n" : "\n";
  }
  out += "],\n\"displayTimeUnit\": \"ms\",\n\"otherData\": ";
  out += trace["otherData"].dump(-1, ' ', false, json::error_handler_t::replace);
  out += "}\n";
  return out;
}

}  // namespace

StatusOr<std::string> ChromeTraceString(const graph::StageGraph& graph,
                                        const sim::Timeline& timeline,
                                        const TraceOptions& options) {
  WEFT_ASSIGN_OR_RETURN(json trace, ChromeTrace(graph, timeline, options));
  return DumpTrace(trace);
}

StatusOr<std::string> ChromeWindowTraceString(std::span<const sim::WindowIteration> iterations,
                                              const sim::WindowResult& window,
                                              const TraceOptions& options) {
  WEFT_ASSIGN_OR_RETURN(json trace, ChromeWindowTrace(iterations, window, options));
  return DumpTrace(trace);
}

}  // namespace weft::report
