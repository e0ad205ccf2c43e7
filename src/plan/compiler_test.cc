#include "weft/plan/compiler.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "weft/plan/plan_json.h"
#include "weft/plan/torch_export.h"
#include "weft/plan/validator.h"
#include "weft/sched/generators.h"
#include "weft/sim/simulator.h"

namespace weft::plan {
namespace {

using graph::StageGraph;
using sched::ScheduleKind;
using spec::Pass;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kHidden = 4096;

spec::ClusterSpec TestCluster(double link_latency_s = 1e-5) {
  spec::ClusterSpec c;
  c.name = "test";
  c.num_nodes = 4;
  c.gpus_per_node = 8;
  c.gpu.peak_bf16_flops_per_s = 1e15;
  c.gpu.hbm_bandwidth_bytes_per_s = 2e12;
  c.gpu.memory_capacity_bytes = 80 * kGiB;
  c.intra_node = {.bandwidth_bytes_per_s = 200e9, .latency_s = link_latency_s};
  c.inter_node = {.bandwidth_bytes_per_s = 25e9, .latency_s = link_latency_s};
  c.efficiency = {.compute = 1, .memory = 1, .network = 1};
  return c;
}

struct Compiled {
  StageGraph graph;
  sched::Schedule schedule;
  sim::Timeline timeline;
  ExecutionPlan plan;
};

// Pipeline graph → rule schedule → simulation → plan.
Compiled CompileRule(int p, int v, int m, ScheduleKind kind, bool split,
                     std::vector<sched::VirtualStageCost> costs = {},
                     int gpus_per_group = 1) {
  if (costs.empty()) {
    costs = {sched::VirtualStageCost{.forward_s = 1e-3,
                                     .backward_input_s = 1e-3,
                                     .backward_weight_s = 1e-3,
                                     .activation_bytes = 1 * kGiB,
                                     .weight_grad_activation_bytes = split ? kGiB / 4 : 0,
                                     .send_bytes = 2048 * kHidden * 2}};
  }
  Compiled c;
  auto graph = sched::BuildPipelineGraph({.num_groups = p,
                                          .chunks_per_group = v,
                                          .num_microbatches = m,
                                          .split_backward = split,
                                          .costs = costs,
                                          .gpus_per_group = gpus_per_group,
                                          .static_bytes_per_group = 10 * kGiB});
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  c.graph = *std::move(graph);
  auto schedule = sched::MakeSchedule(kind, c.graph);
  EXPECT_TRUE(schedule.ok()) << schedule.status().ToString();
  c.schedule = *std::move(schedule);
  auto timeline = sim::Simulate(c.graph, c.schedule, TestCluster());
  EXPECT_TRUE(timeline.ok()) << timeline.status().ToString();
  c.timeline = *std::move(timeline);
  auto plan = CompilePlan(c.graph, c.schedule, c.timeline,
                          {.model = "toy", .iteration = 3, .hidden_size_by_module = {kHidden}});
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  if (plan.ok()) c.plan = *std::move(plan);
  return c;
}

// The compute actions of each rank are exactly the schedule's stages, in order.
void ExpectComputeFollowsSchedule(const Compiled& c) {
  ASSERT_EQ(c.plan.num_ranks(), c.graph.num_groups());
  for (int g = 0; g < c.graph.num_groups(); ++g) {
    std::vector<StageRef> want, got;
    for (graph::StageId s : c.schedule.order[g]) {
      const graph::Stage& st = c.graph.stage(s);
      want.push_back({st.module, st.chunk, st.microbatch, st.sub_microbatch, st.pass});
    }
    for (const Action& a : c.plan.ranks[g].actions) {
      if (IsCompute(a.kind)) got.push_back(a.stage);
    }
    EXPECT_EQ(got, want) << "rank " << g;
  }
}

struct RuleCase {
  ScheduleKind kind;
  int v;
  bool split;
  const char* name;
};

class CompileRules : public ::testing::TestWithParam<RuleCase> {};

TEST_P(CompileRules, FourRanksEightMicrobatchesCompileToAValidPlan) {
  const RuleCase rc = GetParam();
  Compiled c = CompileRule(4, rc.v, 8, rc.kind, rc.split);
  ExpectComputeFollowsSchedule(c);
  auto report = ValidatePlan(c.plan);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  // One transfer per cross-group edge, with [tokens, hidden] bf16 shapes.
  int cross = 0;
  for (const graph::Edge& e : c.graph.edges()) {
    cross += c.graph.stage(e.from).group != c.graph.stage(e.to).group;
  }
  EXPECT_EQ(report->num_transfers, cross);
  EXPECT_EQ(report->p2p_bytes, cross * int64_t{2048} * kHidden * 2);
  for (const RankPlan& rank : c.plan.ranks) {
    for (const Buffer& b : rank.buffers) {
      EXPECT_EQ(b.tensor, (TensorSpec{{2048, kHidden}, DType::kBf16})) << b.name;
    }
    EXPECT_EQ(rank.static_bytes, 10 * kGiB);
    EXPECT_EQ(rank.memory_capacity_bytes, 80 * kGiB);
  }
  // Plan memory = the simulator's activations + the boundary buffers in flight.
  for (int g = 0; g < c.plan.num_ranks(); ++g) {
    EXPECT_GE(report->ranks[g].peak_bytes, c.timeline.groups[g].peak_bytes);
    EXPECT_LE(report->ranks[g].peak_bytes,
              c.timeline.groups[g].peak_bytes + report->ranks[g].peak_buffer_bytes);
  }
  EXPECT_EQ(c.plan.strategy, c.schedule.name);
  EXPECT_EQ(c.plan.iteration, 3);
  // JSON round trip of a real plan.
  auto back = PlanFromJson(PlanToJson(c.plan));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, c.plan);
}

INSTANTIATE_TEST_SUITE_P(
    Rules, CompileRules,
    ::testing::Values(RuleCase{ScheduleKind::kOneFOneB, 1, false, "OneFOneB"},
                      RuleCase{ScheduleKind::kGPipe, 1, false, "GPipe"},
                      RuleCase{ScheduleKind::kInterleavedOneFOneB, 2, false, "Interleaved"},
                      RuleCase{ScheduleKind::kZeroBubbleH1, 1, true, "ZeroBubbleH1"},
                      RuleCase{ScheduleKind::kOneFOneB, 1, true, "OneFOneBSplitBackward"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(CompilePlan, PlacesSendsAfterProducersWaitsBeforeConsumersAndReceivesEarly) {
  Compiled c = CompileRule(4, 1, 8, ScheduleKind::kOneFOneB, false);
  int early_receives = 0, receives = 0;
  for (const RankPlan& rank : c.plan.ranks) {
    const auto& actions = rank.actions;
    for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
      const Action& a = actions[i];
      if (a.kind == ActionKind::kIsend) {
        // Preceded only by other isends back to the compute that produced the buffer.
        int j = i - 1;
        while (j >= 0 && actions[j].kind == ActionKind::kIsend) --j;
        ASSERT_GE(j, 0);
        EXPECT_TRUE(IsCompute(actions[j].kind));
        EXPECT_THAT(actions[j].outputs, ::testing::Contains(a.buffer));
      }
      if (a.kind == ActionKind::kWaitRecv) {
        int j = i + 1;
        while (actions[j].kind == ActionKind::kWaitRecv) ++j;
        EXPECT_THAT(actions[j].inputs, ::testing::Contains(a.buffer));
      }
      if (a.kind == ActionKind::kIrecv) {
        ++receives;
        // Early: at least one compute runs between posting and waiting.
        for (int j = i + 1; actions[j].kind != ActionKind::kWaitRecv || actions[j].buffer != a.buffer;
             ++j) {
          if (IsCompute(actions[j].kind)) {
            ++early_receives;
            break;
          }
        }
      }
    }
  }
  EXPECT_EQ(receives, 2 * 3 * 8);
  // In the 1F1B steady state the gradient receive is posted before the forward that overlaps it.
  EXPECT_GT(early_receives, receives / 3);
  // Runs of posts are batched (e.g. isend of F(k) + irecv of the gradient of mb k-…).
  int batched = 0;
  for (const Action& a : c.plan.ranks[1].actions) batched += a.group >= 0;
  EXPECT_GT(batched, 0);
}

TEST(CompilePlan, HeterogeneousStagesAndSlowLinksStillValidate) {
  // Many small cases from fixed parameters: p, m, kinds, uneven costs, inter-node links.
  int checked = 0;
  for (int p : {2, 3, 4}) {
    for (int m : {1, 2, 3, 5, 8}) {
      for (ScheduleKind kind : {ScheduleKind::kOneFOneB, ScheduleKind::kGPipe,
                                ScheduleKind::kZeroBubbleH1, ScheduleKind::kInterleavedOneFOneB}) {
        const bool split = kind == ScheduleKind::kZeroBubbleH1;
        const int v = kind == ScheduleKind::kInterleavedOneFOneB ? 2 : 1;
        if (kind == ScheduleKind::kInterleavedOneFOneB && m % p != 0) continue;
        std::vector<sched::VirtualStageCost> costs;
        for (int k = 0; k < p * v; ++k) {
          costs.push_back({.forward_s = 1e-3 * (1 + (k * 7 + m) % 3),
                           .backward_input_s = 1.5e-3 * (1 + (k * 5 + p) % 2),
                           .backward_weight_s = 0.7e-3,
                           .activation_bytes = kGiB / 2,
                           .send_bytes = (64 + 32 * k) * kHidden * 2});
        }
        // 4 GPUs per group → two groups per node, so some hops are inter-node.
        Compiled c = CompileRule(p, v, m, kind, split, costs, 4);
        auto report = ValidatePlan(c.plan);
        EXPECT_TRUE(report.ok()) << fmt::format("p={} m={} {}: ", p, m, sched::ScheduleKindName(kind))
                                 << report.status().ToString();
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 40);
}

TEST(CompilePlan, OneFOneBExportsToTorchCsvInScheduleOrder) {
  Compiled c = CompileRule(4, 1, 8, ScheduleKind::kOneFOneB, false);
  auto rows = ExportTorchActions(c.plan);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  for (int g = 0; g < 4; ++g) {
    std::vector<std::string> compute;
    std::vector<std::string> want;
    for (const std::string& cell : (*rows)[g]) {
      if (cell.find("SEND") == std::string::npos && cell.find("RECV") == std::string::npos) {
        compute.push_back(cell);
      }
    }
    for (graph::StageId s : c.schedule.order[g]) {
      const graph::Stage& st = c.graph.stage(s);
      want.push_back(fmt::format("{}{}{}", g, st.pass == Pass::kForward ? "F" : "B", st.microbatch));
    }
    EXPECT_EQ(compute, want) << "rank " << g;
    // Each rank sends F to the next stage and B to the previous one, for every microbatch.
    int send_f = 0, recv_b = 0;
    for (const std::string& cell : (*rows)[g]) {
      send_f += cell.find("SEND_F") != std::string::npos;
      recv_b += cell.find("RECV_B") != std::string::npos;
    }
    EXPECT_EQ(send_f, g < 3 ? 8 : 0);
    EXPECT_EQ(recv_b, g < 3 ? 8 : 0);
  }
  // Rank 0 starts with the warmup forwards of 1F1B (P - 1 = 3), each followed by its send.
  EXPECT_EQ(std::vector<std::string>((*rows)[0].begin(), (*rows)[0].begin() + 6),
            (std::vector<std::string>{"0F0", "0SEND_F0", "0F1", "0SEND_F1", "0F2", "0SEND_F2"}));
}

TEST(CompilePlan, InterleavedStagesAreNumberedRankPlusChunkTimesP) {
  Compiled c = CompileRule(4, 2, 8, ScheduleKind::kInterleavedOneFOneB, false);
  auto map = DeriveTorchStageMap(c.plan);
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  ASSERT_EQ(map->stages.size(), 8u);
  for (int k = 0; k < 8; ++k) {
    EXPECT_EQ(map->stages[k].rank, k % 4);
    EXPECT_EQ(map->stages[k].chunk, k / 4);
  }
  EXPECT_EQ(map->num_microbatches, 8);
  auto csv = ExportTorchCsv(c.plan);
  ASSERT_TRUE(csv.ok()) << csv.status().ToString();
  EXPECT_THAT(*csv, StartsWith("0F0,0SEND_F0,"));
  EXPECT_THAT(*csv, HasSubstr("4RECV_F0"));  // rank 0, chunk 1 receives from stage 3
}

TEST(CompilePlan, ZeroBubbleExportsBackwardInputAndWeight) {
  Compiled c = CompileRule(4, 1, 8, ScheduleKind::kZeroBubbleH1, true);
  auto rows = ExportTorchActions(c.plan);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  int i_cells = 0, w_cells = 0;
  for (const std::string& cell : (*rows)[3]) {
    i_cells += cell.size() >= 2 && cell[1] == 'I';
    w_cells += cell.size() >= 2 && cell[1] == 'W';
  }
  EXPECT_EQ(i_cells, 8);
  EXPECT_EQ(w_cells, 8);
}

// Two encoders on groups 0 and 1 feed an LLM on group 2 (fan-in), m microbatches.
StageGraph FanInGraph(int m) {
  StageGraph g;
  for (int i = 0; i < 3; ++i) {
    g.AddGroup({.first_gpu = i, .num_gpus = 1, .static_bytes = kGiB, .label = fmt::format("g{}", i)});
  }
  g.SetModuleNames({"vit", "whisper", "llm"});
  const int64_t bytes = 256 * kHidden * 2;
  for (int mb = 0; mb < m; ++mb) {
    graph::StageId f[3], b[3];
    for (int i = 0; i < 3; ++i) {
      f[i] = g.AddStage({.group = i, .module = i, .microbatch = mb, .pass = Pass::kForward,
                         .latency_s = 1e-3 * (i + 1), .activation_alloc_bytes = kGiB});
    }
    for (int i = 2; i >= 0; --i) {
      b[i] = g.AddStage({.group = i, .module = i, .microbatch = mb, .pass = Pass::kBackward,
                         .latency_s = 2e-3 * (i + 1), .activation_free_bytes = kGiB});
    }
    for (int i = 0; i < 3; ++i) g.AddEdge(f[i], b[i]);
    g.AddEdge(f[0], f[2], bytes);
    g.AddEdge(f[1], f[2], bytes / 2);
    g.AddEdge(b[2], b[0], bytes);
    g.AddEdge(b[2], b[1], bytes / 2);
  }
  EXPECT_TRUE(g.Finalize().ok());
  return g;
}

TEST(CompilePlan, FanInGraphCompilesValidatesAndIsRefusedByTorchExport) {
  StageGraph graph = FanInGraph(4);
  auto schedule = sched::MakeSchedule(ScheduleKind::kOneFOneB, graph);
  ASSERT_TRUE(schedule.ok()) << schedule.status().ToString();
  auto timeline = sim::Simulate(graph, *schedule, TestCluster());
  ASSERT_TRUE(timeline.ok()) << timeline.status().ToString();
  auto plan = CompilePlan(graph, *schedule, *timeline,
                          {.strategy = "modality-parallel", .hidden_size_by_module = {kHidden, kHidden, kHidden}});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto report = ValidatePlan(*plan);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->num_transfers, 4 * 4);
  EXPECT_EQ(plan->ranks[2].buffers.size(), 4u * 4u);  // 2 receives + 2 gradient sends per mb
  EXPECT_EQ(plan->FindBuffer(2, plan->ranks[2].buffers[0].id)->tensor.shape,
            (std::vector<int64_t>{256, kHidden}));
  auto csv = ExportTorchCsv(*plan);
  ASSERT_FALSE(csv.ok());
  EXPECT_EQ(csv.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(csv.status().message(),
              HasSubstr("fan-in: stage (rank 2, module 2 'llm', chunk 0) receives forward data "
                        "from 2 stages"));
}

TEST(CompileOptionsValidate, DefaultsAreValidAndEachBadFieldIsNamedWithItsRule) {
  EXPECT_TRUE(CompileOptions{}.Validate().ok());
  const struct {
    CompileOptions options;
    const char* message;
  } cases[] = {
      {{.iteration = -1}, "options.iteration = -1; must be >= 0"},
      {{.dtype = static_cast<DType>(7)}, "options.dtype = 7; must be bf16 or fp32"},
      {{.hidden_size_by_module = {8, -1}}, "options.hidden_size_by_module[1] = -1; must be >= 0"},
      {{.memory_capacity_bytes = -1},
       "options.memory_capacity_bytes = -1; must be >= 0 (0 = the timeline's)"},
      {{.replica = 0, .num_replicas = 0},
       "options.replica = 0, options.num_replicas = 0; need 0 <= replica < num_replicas"},
      {{.grad_sync_bytes_by_rank_module = {{1}, {0, -2}}},
       "options.grad_sync_bytes_by_rank_module[1][1] = -2; must be >= 0"},
  };
  for (const auto& c : cases) {
    const Status s = c.options.Validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(s.message(), c.message);
  }
  // CompilePlan checks them before compiling (a negative iteration: a plan its reader refuses).
  Compiled c = CompileRule(2, 1, 2, ScheduleKind::kOneFOneB, false);
  EXPECT_EQ(CompilePlan(c.graph, c.schedule, c.timeline, {.iteration = -1}).status().message(),
            "options.iteration = -1; must be >= 0");
}

TEST(CompilePlan, RejectsATimelineOfAnotherGraph) {
  Compiled c = CompileRule(2, 1, 2, ScheduleKind::kOneFOneB, false);
  sim::Timeline wrong = c.timeline;
  wrong.stages.pop_back();
  auto plan = CompilePlan(c.graph, c.schedule, wrong);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(plan.status().message(), HasSubstr("timeline.stages has 7 entries; the graph has 8"));
  auto bad = CompilePlan(c.graph, c.schedule, c.timeline, {.hidden_size_by_module = {-1}});
  EXPECT_EQ(bad.status().message(), "options.hidden_size_by_module[0] = -1; must be >= 0");
}

TEST(CompilePlan, ShapesFallBackToOneDimensionWhenHiddenDoesNotDivide) {
  auto graph = sched::BuildPipelineGraph(
      {.num_groups = 2, .num_microbatches = 1, .costs = {{.send_bytes = 1000}}});
  ASSERT_TRUE(graph.ok());
  auto schedule = sched::MakeSchedule(ScheduleKind::kOneFOneB, *graph);
  auto timeline = sim::Simulate(*graph, *schedule, TestCluster());
  ASSERT_TRUE(timeline.ok());
  auto plan = CompilePlan(*graph, *schedule, *timeline,
                          {.dtype = DType::kFp32, .hidden_size_by_module = {64}});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->ranks[0].buffers[0].tensor, (TensorSpec{{250}, DType::kFp32}));
  EXPECT_TRUE(ValidatePlan(*plan).ok());
}

}  // namespace
}  // namespace weft::plan

namespace weft::plan {
namespace {

// The CSV files that python/tests/test_torch_csv.py loads with torch's own loader and checks
// with torch's validator and simulator. They must equal what the exporter writes today;
// regenerate with WEFT_REGENERATE_GOLDEN=1 build/<dir>/weft_plan_test.
TEST(TorchCsvGolden, FixturesForTorchsLoaderMatchTheExporter) {
  struct Golden {
    const char* file;
    ScheduleKind kind;
    int v;
    bool split;
    TorchCsvFormat format;
  };
  const Golden cases[] = {
      {"1f1b_p4_m8.csv", ScheduleKind::kOneFOneB, 1, false, TorchCsvFormat::kComputeComms},
      {"1f1b_p4_m8_compute_only.csv", ScheduleKind::kOneFOneB, 1, false,
       TorchCsvFormat::kComputeOnly},
      {"gpipe_p4_m8.csv", ScheduleKind::kGPipe, 1, false, TorchCsvFormat::kComputeComms},
      {"interleaved_p4_v2_m8.csv", ScheduleKind::kInterleavedOneFOneB, 2, false,
       TorchCsvFormat::kComputeComms},
      {"zbh1_p4_m8.csv", ScheduleKind::kZeroBubbleH1, 1, true, TorchCsvFormat::kComputeComms},
  };
  const bool regenerate = std::getenv("WEFT_REGENERATE_GOLDEN") != nullptr;
  for (const Golden& g : cases) {
    Compiled c = CompileRule(4, g.v, 8, g.kind, g.split);
    auto csv = ExportTorchCsv(c.plan, {.format = g.format});
    ASSERT_TRUE(csv.ok()) << g.file << ": " << csv.status().ToString();
    const std::string path = std::string(WEFT_SOURCE_DIR) + "/python/tests/data/" + g.file;
    if (regenerate) {
      std::filesystem::create_directories(std::filesystem::path(path).parent_path());
      std::ofstream(path) << *csv;
      continue;
    }
    std::ifstream in(path);
    ASSERT_TRUE(in) << path << " missing; run with WEFT_REGENERATE_GOLDEN=1";
    std::stringstream want;
    want << in.rdbuf();
    EXPECT_EQ(*csv, want.str()) << path;
  }
  // A small compiled plan for the CLI checks (weft validate / weft export).
  Compiled small = CompileRule(2, 1, 4, ScheduleKind::kOneFOneB, false);
  const std::string json_path =
      std::string(WEFT_SOURCE_DIR) + "/python/tests/data/1f1b_p2_m4.plan.json";
  if (regenerate) {
    std::ofstream(json_path) << PlanToJson(small.plan);
  } else {
    auto stored = ReadPlanFile(json_path);
    ASSERT_TRUE(stored.ok()) << stored.status().ToString();
    EXPECT_EQ(*stored, small.plan);
  }
}

}  // namespace
}  // namespace weft::plan

namespace weft::plan {
namespace {

// The fan-in graph with a data assignment: microbatch mb holds samples {2mb, 2mb+1}; each
// encoder's edge to the LLM carries one of them.
StageGraph FanInGraphWithSamples(int m, int dp) {
  StageGraph g;
  for (int i = 0; i < 3; ++i) {
    g.AddGroup({.first_gpu = i, .num_gpus = 1, .dp = dp, .static_bytes = kGiB,
                .grad_sync_bytes = i == 2 ? 1000 : 0, .label = fmt::format("g{}", i)});
  }
  g.SetModuleNames({"vit", "whisper", "llm"});
  const int64_t bytes = 256 * kHidden * 2;
  for (int mb = 0; mb < m; ++mb) {
    const graph::SampleSetId both = g.AddSampleSet({2 * mb + 1, 2 * mb});
    const graph::SampleSetId first = g.AddSampleSet({2 * mb});
    const graph::SampleSetId second = g.AddSampleSet({2 * mb + 1});
    graph::StageId f[3], b[3];
    for (int i = 0; i < 3; ++i) {
      f[i] = g.AddStage({.group = i, .module = i, .microbatch = mb, .pass = Pass::kForward,
                         .latency_s = 1e-3 * (i + 1), .activation_alloc_bytes = kGiB,
                         .instance_begin = 2 * mb, .instance_end = 2 * mb + 2, .samples = both});
    }
    for (int i = 2; i >= 0; --i) {
      b[i] = g.AddStage({.group = i, .module = i, .microbatch = mb, .pass = Pass::kBackward,
                         .latency_s = 2e-3 * (i + 1), .activation_free_bytes = kGiB,
                         .instance_begin = 2 * mb, .instance_end = 2 * mb + 2, .samples = both});
    }
    for (int i = 0; i < 3; ++i) g.AddEdge({.from = f[i], .to = b[i], .rows = 0});
    g.AddEdge({.from = f[0], .to = f[2], .bytes = bytes, .samples = first, .rows = 256});
    g.AddEdge({.from = f[1], .to = f[2], .bytes = bytes / 2, .samples = second, .rows = 128});
    g.AddEdge({.from = b[2], .to = b[0], .bytes = bytes, .samples = first, .rows = 256});
    g.AddEdge({.from = b[2], .to = b[1], .bytes = bytes / 2, .samples = second, .rows = 128});
  }
  EXPECT_TRUE(g.Finalize().ok());
  return g;
}

StatusOr<ExecutionPlan> CompileGraph(const StageGraph& graph, CompileOptions options = {}) {
  auto schedule = sched::MakeSchedule(ScheduleKind::kOneFOneB, graph);
  if (!schedule.ok()) return schedule.status();
  auto timeline = sim::Simulate(graph, *schedule, TestCluster());
  if (!timeline.ok()) return timeline.status();
  options.hidden_size_by_module = {kHidden, kHidden, kHidden};
  return CompilePlan(graph, *schedule, *timeline, options);
}

TEST(CompilePlan, BuffersNameTheirEndsAndCarryTheEdgesSamplesAndRows) {
  StageGraph graph = FanInGraphWithSamples(3, 1);
  auto plan = CompileGraph(graph);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_TRUE(ValidatePlan(*plan).ok()) << ValidatePlan(*plan).status().ToString();
  // Every buffer is one edge: find it by its two ends.
  int checked = 0;
  for (int r = 0; r < plan->num_ranks(); ++r) {
    for (const Buffer& b : plan->ranks[r].buffers) {
      bool found = false;
      for (const graph::Edge& e : graph.edges()) {
        const graph::Stage& from = graph.stage(e.from);
        const graph::Stage& to = graph.stage(e.to);
        if (b.producer.rank != from.group || b.consumer.rank != to.group ||
            b.producer.stage.module != from.module || b.consumer.stage.module != to.module ||
            b.producer.stage.microbatch != from.microbatch || b.producer.stage.pass != from.pass ||
            b.consumer.stage.pass != to.pass) {
          continue;
        }
        found = true;
        const auto set = graph.sample_set(e.samples);
        EXPECT_EQ(b.samples, std::vector<int32_t>(set.begin(), set.end())) << b.name;
        EXPECT_EQ(b.rows, e.rows) << b.name;
      }
      EXPECT_TRUE(found) << b.name;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 3 * 4 * 2);  // 4 cross-rank edges per microbatch, a send and a receive each
  // Computes carry their stage's samples (sorted) and instances.
  for (const RankPlan& rank : plan->ranks) {
    for (const Action& a : rank.actions) {
      if (!IsCompute(a.kind)) continue;
      const int mb = a.stage.microbatch;
      EXPECT_EQ(a.samples, (std::vector<int32_t>{2 * mb, 2 * mb + 1}));
      EXPECT_EQ(a.instance_begin, 2 * mb);
      EXPECT_EQ(a.instance_end, 2 * mb + 2);
    }
  }
  auto back = PlanFromJson(PlanToJson(*plan));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, *plan);
}

TEST(CompilePlan, AllReduceClosesEachRankAfterItsLastWeightGradient) {
  Compiled c = CompileRule(4, 1, 8, ScheduleKind::kZeroBubbleH1, true);
  for (int r = 0; r < c.plan.num_ranks(); ++r) {
    const auto& actions = c.plan.ranks[r].actions;
    int reduces = 0, last_w = -1, reduce_at = -1;
    for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
      if (actions[i].kind == ActionKind::kBackwardWeight) last_w = i;
      if (actions[i].kind == ActionKind::kAllReduceGrads) {
        ++reduces;
        reduce_at = i;
        EXPECT_EQ(actions[i].dp, 1);  // emitted for dp = 1 too, naming the rank itself
        EXPECT_EQ(actions[i].ranks, std::vector<int>{r});
        EXPECT_EQ(actions[i].stage.module, 0);
      }
    }
    EXPECT_EQ(reduces, 1) << "rank " << r;
    // The rank's last action (the simulator's tail), after its last W.
    EXPECT_GT(reduce_at, last_w) << "rank " << r;
    EXPECT_EQ(reduce_at, static_cast<int>(actions.size()) - 1) << "rank " << r;
  }
}

TEST(CompilePlan, AllReduceBytesSplitTheGroupsGradientsOrFollowTheTable) {
  StageGraph graph = FanInGraphWithSamples(2, 4);
  auto plan = CompileGraph(graph, {.replica = 3, .num_replicas = 4});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->replica, 3);
  EXPECT_EQ(plan->num_replicas, 4);
  auto reduce_of = [](const ExecutionPlan& p, int rank) {
    std::vector<Action> out;
    for (const Action& a : p.ranks[rank].actions) {
      if (a.kind == ActionKind::kAllReduceGrads) out.push_back(a);
    }
    return out;
  };
  for (int r = 0; r < 3; ++r) {
    const auto reduces = reduce_of(*plan, r);
    ASSERT_EQ(reduces.size(), 1u) << r;
    EXPECT_EQ(reduces[0].stage.module, r);
    EXPECT_EQ(reduces[0].dp, 4);
    EXPECT_EQ(reduces[0].bytes, graph.group(r).grad_sync_bytes);  // one module per group
  }
  auto exact = CompileGraph(graph, {.grad_sync_bytes_by_rank_module = {{7}, {0, 8}, {}}});
  ASSERT_TRUE(exact.ok()) << exact.status().ToString();
  EXPECT_EQ(reduce_of(*exact, 0)[0].bytes, 7);
  EXPECT_EQ(reduce_of(*exact, 1)[0].bytes, 8);
  EXPECT_EQ(reduce_of(*exact, 2)[0].bytes, 0);  // short row
  EXPECT_EQ(CompileGraph(graph, {.grad_sync_bytes_by_rank_module = {{7}}}).status().message(),
            "options.grad_sync_bytes_by_rank_module has 1 rows; the graph has 3 groups");
  EXPECT_EQ(CompileGraph(graph, {.replica = 1}).status().message(),
            "options.replica = 1, options.num_replicas = 1; need 0 <= replica < num_replicas");
}

TEST(CompilePlan, ModulesOnOneRankShareTheGroupsGradientBytesByBackwardWork) {
  // One group runs two modules in sequence; backward latencies 1 ms and 3 ms, no FLOPs known.
  StageGraph g;
  g.AddGroup({.num_gpus = 1, .dp = 2, .grad_sync_bytes = 1001});
  std::vector<graph::StageId> f(2), b(2);
  for (int m = 0; m < 2; ++m) {
    f[m] = g.AddStage({.module = m, .pass = Pass::kForward, .latency_s = 1e-3});
  }
  for (int m = 1; m >= 0; --m) {
    b[m] = g.AddStage({.module = m, .pass = Pass::kBackward, .latency_s = m == 0 ? 1e-3 : 3e-3});
  }
  g.AddEdge(f[0], f[1], 64);
  g.AddEdge(f[1], b[1], 0);
  g.AddEdge(b[1], b[0], 64);
  ASSERT_TRUE(g.Finalize().ok());
  const sched::Schedule schedule{.name = "seq", .order = {{f[0], f[1], b[1], b[0]}}};
  auto timeline = sim::Simulate(g, schedule, TestCluster());
  ASSERT_TRUE(timeline.ok()) << timeline.status().ToString();
  auto plan = CompilePlan(g, schedule, *timeline);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_TRUE(ValidatePlan(*plan).ok()) << ValidatePlan(*plan).status().ToString();
  EXPECT_EQ(plan->module_names, (std::vector<std::string>{"m0", "m1"}));  // named for the reader
  std::map<int, int64_t> bytes;
  for (const Action& a : plan->ranks[0].actions) {
    if (a.kind == ActionKind::kAllReduceGrads) bytes[a.stage.module] = a.bytes;
  }
  // 1001 · 1/4 = 250.25 -> 250, 1001 · 3/4 = 750.75 -> 751 (largest remainder); sum 1001.
  EXPECT_EQ(bytes, (std::map<int, int64_t>{{0, 250}, {1, 751}}));
  // Both at the end of the rank, ascending by module (one global order of collectives).
  const auto& actions = plan->ranks[0].actions;
  const int n = static_cast<int>(actions.size());
  ASSERT_GE(n, 2);
  EXPECT_EQ(actions[n - 2].kind, ActionKind::kAllReduceGrads);
  EXPECT_EQ(actions[n - 2].stage.module, 0);
  EXPECT_EQ(actions[n - 1].kind, ActionKind::kAllReduceGrads);
  EXPECT_EQ(actions[n - 1].stage.module, 1);
}

}  // namespace
}  // namespace weft::plan
