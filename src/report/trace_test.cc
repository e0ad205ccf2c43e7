#include "weft/report/trace.h"

#include <map>
#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_util.h"

namespace weft::report {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

int MemoryPoints(const sim::Timeline& t) {
  int n = 0;
  for (const auto& g : t.groups) n += static_cast<int>(g.memory.size());
  return n;
}

int NonMetadataEvents(const json& trace) {
  int n = 0;
  for (const json& e : trace["traceEvents"]) n += e["ph"] != "M";
  return n;
}

TEST(ChromeTrace, EmitsOneEventPerStageTransferAndMemoryPoint) {
  const testing::SmallCase c = testing::MakeSmallCase();
  auto trace = ChromeTrace(c.graph, c.timeline, {.include_group_tail = false});
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  EXPECT_EQ(NonMetadataEvents(*trace), 4 + 2 + 8);  // stages + transfers + counters
  const TraceEventCounts counts = CountTraceEvents(*trace);
  EXPECT_EQ(counts.stages, 4);
  EXPECT_EQ(counts.transfers, 2);
  EXPECT_EQ(counts.counters, 8);
  EXPECT_EQ(counts.group_tail, 0);
}

TEST(ChromeTrace, GroupTailAddsGradSyncAndOptimizerEvents) {
  const testing::SmallCase c = testing::MakeSmallCase();
  auto trace = ChromeTrace(c.graph, c.timeline);
  ASSERT_TRUE(trace.ok());
  EXPECT_EQ(CountTraceEvents(*trace).group_tail, 2);  // only group 0 has a tail
  EXPECT_EQ(NonMetadataEvents(*trace), 4 + 2 + 8 + 2);
  bool found = false;
  for (const json& e : (*trace)["traceEvents"]) {
    if (e["ph"] == "X" && e["name"] == "optimizer") {
      found = true;
      EXPECT_EQ(e["pid"], 1);
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 7500.0);  // after the 0.5 ms grad sync
      EXPECT_NEAR(e["dur"].get<double>(), 250.0, 1e-9);
    }
  }
  EXPECT_TRUE(found);
}

TEST(ChromeTrace, OneProcessPerGroupNamedByLabelAndTimesInMicroseconds) {
  const testing::SmallCase c = testing::MakeSmallCase();
  auto trace = ChromeTrace(c.graph, c.timeline);
  ASSERT_TRUE(trace.ok());
  std::map<int, std::string> process_names;
  std::map<std::pair<int, int>, std::string> thread_names;
  for (const json& e : (*trace)["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") process_names[e["pid"]] = e["args"]["name"];
    if (e["ph"] == "M" && e["name"] == "thread_name") {
      thread_names[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"];
    }
  }
  EXPECT_EQ(process_names, (std::map<int, std::string>{{1, "enc/pp0"}, {2, "llm/pp1"}}));
  EXPECT_EQ((thread_names[{1, 1}]), "compute");
  EXPECT_EQ((thread_names[{1, 1001}]), "send \u2192 llm/pp1");
  EXPECT_EQ((thread_names[{2, 1000}]), "send \u2192 enc/pp0");

  std::map<std::string, std::set<std::string>> cname_by_name;
  for (const json& e : (*trace)["traceEvents"]) {
    if (e["ph"] != "X" || e["tid"] != 1) continue;
    cname_by_name[e["name"]].insert(e["cname"]);
    if (e["args"]["stage"] == 1) {  // llm F on g1 from 1.5 to 2.5 ms
      EXPECT_EQ(e["name"], "llm F");
      EXPECT_EQ(e["pid"], 2);
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 1500.0);
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 1000.0);
      EXPECT_EQ(e["args"]["microbatch"], "0");
      EXPECT_EQ(e["args"]["module"], "llm");
      EXPECT_EQ(e["cat"], "stage,forward");
    }
  }
  // One name per (module, direction), one colour per name, forward and backward differ.
  EXPECT_EQ(cname_by_name.size(), 4u);
  for (const auto& [name, cnames] : cname_by_name) EXPECT_EQ(cnames.size(), 1u) << name;
  EXPECT_NE(*cname_by_name["vit F"].begin(), *cname_by_name["vit B"].begin());

  for (const json& e : (*trace)["traceEvents"]) {
    if (e["ph"] == "C") {
      EXPECT_EQ(e["name"], "memory");
      EXPECT_TRUE(e["args"].contains("GiB"));
    }
    if (e["ph"] == "X" && e["tid"].get<int>() >= 1000 && e["pid"] == 1) {
      EXPECT_EQ(e["name"], "send vit F mb0");
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 1000.0);
      EXPECT_EQ(e["args"]["bytes"].get<int64_t>(), 8 * testing::kMiB);
    }
  }
}

TEST(ChromeTrace, OffsetsAndPrefixesLetTwoTracesBeMerged) {
  const testing::SmallCase c = testing::MakeSmallCase();
  auto trace = ChromeTrace(c.graph, c.timeline,
                           {.process_name_prefix = "sim/", .pid_offset = 10, .time_offset_s = 1.0});
  ASSERT_TRUE(trace.ok());
  for (const json& e : (*trace)["traceEvents"]) {
    EXPECT_GE(e["pid"].get<int>(), 11);
    if (e["ph"] == "M" && e["name"] == "process_name") {
      EXPECT_THAT(e["args"]["name"].get<std::string>(), ::testing::StartsWith("sim/"));
    }
    if (e.contains("ts")) {
      EXPECT_GE(e["ts"].get<double>(), 1e6);
    }
  }
}

TEST(ChromeTrace, RealSimulatedPipelineCountsMatchTheTimeline) {
  const testing::SimulatedCase c = testing::SimulatePipeline(4, 8, sched::ScheduleKind::kOneFOneB);
  ASSERT_FALSE(c.timeline.transfers.empty());
  auto trace = ChromeTrace(c.graph, c.timeline, {.include_group_tail = false});
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  const TraceEventCounts counts = CountTraceEvents(*trace);
  EXPECT_EQ(counts.stages, c.graph.num_stages());
  EXPECT_EQ(counts.transfers, static_cast<int>(c.timeline.transfers.size()));
  EXPECT_EQ(counts.counters, MemoryPoints(c.timeline));
  EXPECT_EQ(NonMetadataEvents(*trace),
            c.graph.num_stages() + static_cast<int>(c.timeline.transfers.size()) +
                MemoryPoints(c.timeline));
  // Every complete event lies inside the iteration; no tail track where there is no tail (dp 1,
  // no optimizer bytes).
  for (const json& e : (*trace)["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") {
      EXPECT_NE(e["args"]["name"], "dp-sync/optimizer");
    }
    if (e["ph"] != "X") continue;
    EXPECT_GE(e["ts"].get<double>(), 0);
    EXPECT_GE(e["dur"].get<double>(), 0);
    EXPECT_LE(e["ts"].get<double>() + e["dur"].get<double>(),
              c.timeline.iteration_time_s * 1e6 + 1e-6);
  }
}

TEST(ChromeTraceString, ParsesBackToTheSameTrace) {
  const testing::SmallCase c = testing::MakeSmallCase();
  auto text = ChromeTraceString(c.graph, c.timeline, {.title = "1f1b"});
  ASSERT_TRUE(text.ok());
  const json parsed = json::parse(*text);
  EXPECT_EQ(parsed, *ChromeTrace(c.graph, c.timeline, {.title = "1f1b"}));
  EXPECT_EQ(parsed["otherData"]["title"], "1f1b");
  EXPECT_EQ(parsed["displayTimeUnit"], "ms");
}

TEST(ChromeTrace, RejectsATimelineOfAnotherGraph) {
  testing::SmallCase c = testing::MakeSmallCase();
  c.timeline.stages.pop_back();
  EXPECT_THAT(ChromeTrace(c.graph, c.timeline).status().message(),
              HasSubstr("timeline.stages.size() = 3; must equal the graph's stage count (4)"));
  c = testing::MakeSmallCase();
  c.timeline.transfers[1].dst_group = 5;
  EXPECT_EQ(ChromeTrace(c.graph, c.timeline).status().code(), StatusCode::kInvalidArgument);
}

TEST(ChromeWindowTrace, ShowsIterationsOnTheWindowClockAndBufferOccupancy) {
  // An encoder group puts each microbatch's tokens into a pool the LLM group gets from; three
  // iterations of a 2-group pipeline.
  graph::StageGraph g;
  g.SetModuleNames({"vit", "llm"});
  g.AddGroup({.first_gpu = 0, .num_gpus = 1, .optimizer_bytes = 2'000'000'000, .label = "vit"});
  g.AddGroup({.first_gpu = 1, .num_gpus = 1, .optimizer_bytes = 2'000'000'000, .label = "llm"});
  std::vector<sim::BufferUse> uses;
  sched::Schedule schedule{.order = {{}, {}}};
  for (int mb = 0; mb < 3; ++mb) {
    const auto enc = g.AddStage({.group = 0, .module = 0, .microbatch = mb, .latency_s = 1e-3});
    const auto llm = g.AddStage({.group = 1, .module = 1, .microbatch = mb, .latency_s = 2e-3});
    schedule.order[0].push_back(enc);
    schedule.order[1].push_back(llm);
    uses.push_back({.stage = enc, .buffer = 0, .action = sim::BufferAction::kPut, .bytes = 4});
    uses.push_back({.stage = llm, .buffer = 0, .action = sim::BufferAction::kGet, .bytes = 4});
  }
  ASSERT_TRUE(g.Finalize().ok());
  const std::vector<sim::WindowIteration> iterations(
      3, {.graph = &g, .schedule = &schedule, .buffer_uses = uses});
  auto window = sim::SimulateWindow(iterations, testing::TestCluster(),
                                    {.buffers = {{.name = "pool", .capacity_bytes = 8}},
                                     .warmup_iterations = 1});
  ASSERT_TRUE(window.ok()) << window.status().ToString();
  auto trace = ChromeWindowTrace(iterations, *window, {.title = "flowtrain"});
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  const TraceEventCounts counts = CountTraceEvents(*trace);
  EXPECT_EQ(counts.stages, 3 * g.num_stages());
  EXPECT_EQ(counts.iteration_spans, 3 * g.num_groups());
  EXPECT_EQ(counts.group_tail, 3 * 2);  // an optimizer step per group and iteration
  int buffer_points = 0, memory_points = 0;
  std::set<std::string> buffer_processes;
  for (const json& e : (*trace)["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") {
      buffer_processes.insert(e["args"]["name"].get<std::string>());
    }
    if (e["ph"] == "C" && e["name"] == "buffer pool") {
      ++buffer_points;
      EXPECT_EQ(e["pid"], g.num_groups() + 1);
      EXPECT_LE(e["args"]["bytes"].get<int64_t>(), 8);
    }
    if (e["ph"] == "C" && e["name"] == "memory") ++memory_points;
    if (e["ph"] != "X") continue;
    // Every complete event names its iteration and sits at that iteration's origin.
    ASSERT_TRUE(e["args"].contains("iteration")) << e.dump();
    const int k = e["args"]["iteration"].get<int>();
    if (e["tid"] == 1) {
      const int stage = e["args"]["stage"].get<int>();
      EXPECT_NEAR(e["ts"].get<double>(),
                  (window->iteration_origin_s[k] + window->iterations[k].stages[stage].start_s) *
                      1e6,
                  1e-6);
    }
  }
  EXPECT_EQ(buffer_points, static_cast<int>(window->buffers[0].occupancy.size()));
  EXPECT_EQ(buffer_points, 1 + 2 * 3 * 3);  // the start, then a put and a get per microbatch
  EXPECT_EQ(counts.counters, buffer_points + memory_points);
  EXPECT_TRUE(buffer_processes.count("buffers"));
  EXPECT_EQ((*trace)["otherData"]["iterations"], 3);
  EXPECT_EQ((*trace)["otherData"]["buffers"][0]["name"], "pool");
  // The string form parses back to the same trace.
  auto text = ChromeWindowTraceString(iterations, *window, {.title = "flowtrain"});
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(json::parse(*text), *trace);
  // A window given the wrong graphs is refused.
  EXPECT_EQ(ChromeWindowTrace(std::span(iterations).first(2), *window).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace weft::report
