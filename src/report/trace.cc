#include "weft/report/trace.h"

#include <fmt/format.h>

#include "internal.h"

namespace weft::report {
namespace {

using nlohmann::json;

constexpr int kComputeTid = 1;
constexpr int kTailTid = 2;
constexpr int kSendTidBase = 1000;

// chrome://tracing honours cname (a fixed palette); Perfetto colours by event name instead.
std::string_view PassCname(graph::Pass pass) {
  switch (pass) {
    case graph::Pass::kForward: return "rail_load";
    case graph::Pass::kBackward: return "rail_animation";
    case graph::Pass::kBackwardInput: return "rail_animation";
    case graph::Pass::kBackwardWeight: return "rail_idle";
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

}  // namespace

StatusOr<json> ChromeTrace(const graph::StageGraph& graph,
                           const sim::Timeline& timeline,
                           const TraceOptions& options) {
  WEFT_RETURN_IF_ERROR(internal::CheckTimelineMatchesGraph(graph, timeline));
  const double offset_s = options.time_offset_s;
  const auto pid_of = [&](graph::GroupId g) { return options.pid_offset + g + 1; };
  json events = json::array();

  // Metadata: processes (groups) and their threads.
  std::vector<std::vector<bool>> has_send(graph.num_groups(),
                                          std::vector<bool>(graph.num_groups(), false));
  if (options.include_transfers) {
    for (const sim::Transfer& t : timeline.transfers) has_send[t.src_group][t.dst_group] = true;
  }
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
    const sim::GroupTimeline& tail = timeline.groups[g];
    if (options.include_group_tail && (tail.grad_sync_s > 0 || tail.optimizer_s > 0)) {
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
  }

  // Stages.
  for (graph::StageId id = 0; id < graph.num_stages(); ++id) {
    const graph::Stage& s = graph.stage(id);
    const sim::StageTiming& t = timeline.stages[id];
    const std::string module = internal::ModuleName(graph, s.module);
    const std::string_view pass = graph::PassShortName(s.pass);
    json args = {{"stage", id},
                 {"module", module},
                 {"chunk", s.chunk},
                 {"microbatch", internal::MicrobatchLabel(s)},
                 {"pass", pass},
                 {"group", s.group},
                 {"recompute", graph::RecomputeName(s.recompute)},
                 {"latency_s", s.latency_s},
                 {"flops", s.flops},
                 {"activation_alloc_bytes", s.activation_alloc_bytes},
                 {"activation_free_bytes", s.activation_free_bytes}};
    json e = Complete(fmt::format("{} {}", module, pass),
                      graph::IsBackward(s.pass) ? "stage,backward" : "stage,forward",
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
        json e = Complete("grad-sync", "collective", pid_of(g), kTailTid, t, t + gt.grad_sync_s,
                          offset_s,
                          {{"bytes", graph.group(g).grad_sync_bytes}, {"dp", graph.group(g).dp}});
        e["cname"] = "grey";
        events.push_back(std::move(e));
        t += gt.grad_sync_s;
      }
      if (gt.optimizer_s > 0) {
        json e = Complete("optimizer", "optimizer", pid_of(g), kTailTid, t, t + gt.optimizer_s,
                          offset_s, {{"bytes", graph.group(g).optimizer_bytes}});
        e["cname"] = "olive";
        events.push_back(std::move(e));
      }
    }
  }

  // Transfers.
  if (options.include_transfers) {
    for (const sim::Transfer& t : timeline.transfers) {
      const graph::Stage& from = graph.stage(t.from);
      json e = Complete(fmt::format("send {} {} mb{}", internal::ModuleName(graph, from.module),
                                    graph::PassShortName(from.pass),
                                    internal::MicrobatchLabel(from)),
                        "transfer", pid_of(t.src_group), kSendTidBase + t.dst_group, t.start_s,
                        t.end_s, offset_s,
                        {{"edge", t.edge},
                         {"from_stage", t.from},
                         {"to_stage", t.to},
                         {"dst_group", t.dst_group},
                         {"bytes", t.bytes},
                         {"link", sim::LinkKindName(t.link)}});
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
      } else if (tid >= kSendTidBase) {
        ++c.transfers;
      }
    }
  }
  return c;
}

StatusOr<std::string> ChromeTraceString(const graph::StageGraph& graph,
                                        const sim::Timeline& timeline,
                                        const TraceOptions& options) {
  WEFT_ASSIGN_OR_RETURN(json trace, ChromeTrace(graph, timeline, options));
  // One event per line keeps large traces diff- and grep-friendly.
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

}  // namespace weft::report
