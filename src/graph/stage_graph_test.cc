#include "weft/graph/stage_graph.h"

#include <algorithm>
#include <numeric>
#include <queue>
#include <random>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace weft::graph {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(StageGraph, FinalizeBuildsAdjacencyAndTopologicalOrder) {
  StageGraph g;
  g.AddGroup({.label = "a"});
  g.AddGroup({.first_gpu = 1, .label = "b"});
  const StageId s0 = g.AddStage({.group = 0});
  const StageId s1 = g.AddStage({.group = 1});
  const StageId s2 = g.AddStage({.group = 1, .microbatch = 1});
  g.AddEdge(s2, s1, 10);
  g.AddEdge(s0, s1, 20);
  g.AddEdge(s0, s2, 30);
  ASSERT_TRUE(g.Finalize().ok());
  EXPECT_TRUE(g.finalized());
  EXPECT_THAT(g.out_edges(s0), ElementsAre(1, 2));
  EXPECT_THAT(g.in_edges(s1), ElementsAre(0, 1));
  EXPECT_THAT(g.in_edges(s0), ElementsAre());
  EXPECT_THAT(g.topological_order(), ElementsAre(s0, s2, s1));
  EXPECT_EQ(g.edge(2).bytes, 30);
}

// Copies and re-priced graphs share one topology (no edge is copied) until one of them
// changes: the change is its own, the others keep what they had.
TEST(StageGraph, CopiesShareTheTopologyUntilOneChanges) {
  StageGraph g;
  g.AddGroup({.label = "a"});
  const SampleSetId set = g.AddSampleSet({2});
  const StageId s0 = g.AddStage({.group = 0, .samples = set});
  const StageId s1 = g.AddStage({.group = 0});
  g.AddEdge(s0, s1, 10);
  ASSERT_TRUE(g.Finalize().ok());
  auto repriced = g.WithStages({g.stages().begin(), g.stages().end()});
  ASSERT_TRUE(repriced.ok()) << repriced.status().ToString();
  EXPECT_EQ(repriced->edges().data(), g.edges().data());
  StageGraph copy = g;
  EXPECT_EQ(copy.edges().data(), g.edges().data());
  const StageId s2 = copy.AddStage({.group = 0});
  copy.AddEdge(s1, s2, 20);
  EXPECT_EQ(copy.AddSampleSet({5, 4}), 1);
  ASSERT_TRUE(copy.Finalize().ok());
  EXPECT_EQ(copy.num_edges(), 2);
  EXPECT_THAT(copy.out_edges(s1), ElementsAre(1));
  EXPECT_THAT(copy.topological_order(), ElementsAre(s0, s1, s2));
  EXPECT_THAT(copy.sample_set(1), ElementsAre(4, 5));
  for (const StageGraph* other : {&g, &*repriced}) {
    EXPECT_EQ(other->num_edges(), 1);
    EXPECT_EQ(other->num_sample_sets(), 1);
    EXPECT_THAT(other->out_edges(s1), ElementsAre());
    EXPECT_THAT(other->topological_order(), ElementsAre(s0, s1));
  }
  // An empty graph's first edge is its own too.
  StageGraph a, b;
  a.AddEdge(0, 1);
  EXPECT_EQ(a.num_edges(), 1);
  EXPECT_EQ(b.num_edges(), 0);
}

// Cutting edges keeps the stages given, the other edges in order and the original graph intact;
// the adjacency and topological order are rebuilt; bad ids are refused.
TEST(StageGraph, WithoutEdgesCutsOnlyTheGivenEdges) {
  StageGraph g;
  g.AddGroup({.label = "a"});
  g.AddGroup({.first_gpu = 1, .label = "b"});
  const StageId s0 = g.AddStage({.group = 0, .latency_s = 1});
  const StageId s1 = g.AddStage({.group = 1, .latency_s = 2});
  const StageId s2 = g.AddStage({.group = 1, .microbatch = 1, .latency_s = 3});
  g.AddEdge(s2, s1, 10);
  g.AddEdge(s0, s1, 20);
  g.AddEdge(s0, s2, 30);
  ASSERT_TRUE(g.Finalize().ok());
  std::vector<Stage> stages(g.stages().begin(), g.stages().end());
  stages[s1].latency_s = 5;
  const std::vector<EdgeId> cut = {1, 2, 1};
  auto d = g.WithoutEdges(cut, stages);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_TRUE(d->finalized());
  ASSERT_EQ(d->num_edges(), 1);
  EXPECT_EQ(d->edge(0).from, s2);
  EXPECT_EQ(d->edge(0).bytes, 10);
  EXPECT_THAT(d->in_edges(s1), ElementsAre(0));
  EXPECT_THAT(d->out_edges(s0), ElementsAre());
  EXPECT_EQ(d->stage(s1).latency_s, 5);
  EXPECT_EQ(g.num_edges(), 3);  // the original keeps its edges
  EXPECT_EQ(g.stage(s1).latency_s, 2);
  const std::vector<EdgeId> bad = {3};
  EXPECT_THAT(g.WithoutEdges(bad, stages).status().message(), HasSubstr("edge 3 not in [0, 3)"));
  stages.pop_back();
  EXPECT_FALSE(g.WithoutEdges({}, stages).ok());
}

TEST(StageGraph, WithStagesKeepsEverythingButTheStages) {
  StageGraph g;
  g.AddGroup({.label = "a"});
  g.SetModuleNames({"llm"});
  const SampleSetId set = g.AddSampleSet({3, 1});
  const StageId s0 = g.AddStage({.group = 0, .latency_s = 1, .samples = set});
  const StageId s1 = g.AddStage({.group = 0, .latency_s = 2});
  g.AddEdge(s0, s1, 10);
  ASSERT_TRUE(g.Finalize().ok());
  std::vector<Stage> stages(g.stages().begin(), g.stages().end());
  stages[1].latency_s = 5;
  auto repriced = g.WithStages(stages);
  ASSERT_TRUE(repriced.ok()) << repriced.status().ToString();
  EXPECT_TRUE(repriced->finalized());
  EXPECT_EQ(repriced->stage(0).latency_s, 1);
  EXPECT_EQ(repriced->stage(1).latency_s, 5);
  EXPECT_EQ(repriced->edge(0).bytes, 10);
  EXPECT_THAT(repriced->sample_set(set), ElementsAre(1, 3));
  EXPECT_THAT(repriced->module_names(), ElementsAre("llm"));
  EXPECT_THAT(repriced->topological_order(), ElementsAre(s0, s1));
  stages.pop_back();
  EXPECT_EQ(g.WithStages(stages).status().code(), StatusCode::kInvalidArgument);
  stages.push_back({.group = 0, .latency_s = -1});
  EXPECT_THAT(std::string(g.WithStages(stages).status().message()), HasSubstr("latency_s"));
}

// Kahn's algorithm pops the smallest ready id: compared with a binary heap on a random DAG large
// enough to span several words of the ready set's summary (ids above 64·64).
TEST(StageGraph, TopologicalOrderTakesTheSmallestReadyStageFirst) {
  constexpr int kStages = 9000;
  StageGraph g;
  g.AddGroup({});
  for (int i = 0; i < kStages; ++i) g.AddStage({});
  std::mt19937 rng(7);
  // Edges between random ranks of a random permutation: acyclic, ids in any direction.
  std::vector<StageId> rank(kStages);
  std::iota(rank.begin(), rank.end(), 0);
  std::shuffle(rank.begin(), rank.end(), rng);
  for (int k = 0; k < 3 * kStages; ++k) {
    int a = static_cast<int>(rng() % kStages), b = static_cast<int>(rng() % kStages);
    if (a == b) continue;
    if (a > b) std::swap(a, b);
    g.AddEdge(rank[a], rank[b]);
  }
  ASSERT_TRUE(g.Finalize().ok());
  std::vector<int> indegree(kStages);
  for (const Edge& e : g.edges()) ++indegree[e.to];
  std::priority_queue<StageId, std::vector<StageId>, std::greater<>> ready;
  for (int i = 0; i < kStages; ++i) {
    if (indegree[i] == 0) ready.push(i);
  }
  std::vector<StageId> expected;
  while (!ready.empty()) {
    const StageId s = ready.top();
    ready.pop();
    expected.push_back(s);
    for (EdgeId e : g.out_edges(s)) {
      if (--indegree[g.edge(e).to] == 0) ready.push(g.edge(e).to);
    }
  }
  ASSERT_EQ(expected.size(), static_cast<size_t>(kStages));
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), g.topological_order().begin()));
}

// A finalized graph's WithStages copies its adjacency and order; an unfinalized one finalizes.
TEST(StageGraph, WithStagesOfAFinalizedGraphEqualsAFreshFinalize) {
  StageGraph g;
  g.AddGroup({});
  g.AddGroup({.first_gpu = 1});
  for (int i = 0; i < 6; ++i) g.AddStage({.group = i % 2, .microbatch = i});
  g.AddEdge(5, 0);
  g.AddEdge(3, 1);
  g.AddEdge(0, 4);
  g.AddEdge(1, 2);
  StageGraph unfinalized = g;
  ASSERT_TRUE(g.Finalize().ok());
  std::vector<Stage> stages(g.stages().begin(), g.stages().end());
  stages[2].latency_s = 3;
  auto copied = g.WithStages(stages);
  auto fresh = unfinalized.WithStages(stages);
  ASSERT_TRUE(copied.ok() && fresh.ok());
  EXPECT_TRUE(std::ranges::equal(copied->topological_order(), fresh->topological_order()));
  for (StageId s = 0; s < 6; ++s) {
    EXPECT_TRUE(std::ranges::equal(copied->out_edges(s), fresh->out_edges(s)));
    EXPECT_TRUE(std::ranges::equal(copied->in_edges(s), fresh->in_edges(s)));
  }
  EXPECT_EQ(copied->stage(2).latency_s, 3);
  stages[4].group = 2;
  EXPECT_EQ(g.WithStages(stages).status().message(),
            unfinalized.WithStages(stages).status().message());
  // A gradient sync set after Finalize is checked again.
  g.AddGradSync({.module = 0, .groups = {1, 0}});
  EXPECT_FALSE(g.finalized());
}

TEST(StageGraph, FinalizeRejectsACycleAndNamesAStageOnIt) {
  StageGraph g;
  g.AddGroup({});
  const StageId a = g.AddStage({});
  const StageId b = g.AddStage({.microbatch = 1});
  const StageId c = g.AddStage({.microbatch = 2});
  g.AddEdge(a, b);
  g.AddEdge(b, c);
  g.AddEdge(c, b);
  const Status status = g.Finalize();
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("cycle"));
  EXPECT_THAT(status.message(), ::testing::AnyOf(HasSubstr("stage 1 "), HasSubstr("stage 2 ")));
  EXPECT_FALSE(g.finalized());
}

TEST(StageGraph, FinalizeNamesTheBadField) {
  StageGraph g;
  g.AddGroup({});
  g.AddStage({.group = 3});
  EXPECT_THAT(g.Finalize().message(), HasSubstr("stages[0].group = 3; must be in [0, 1)"));

  StageGraph h;
  h.AddGroup({.num_gpus = 0});
  EXPECT_THAT(h.Finalize().message(), HasSubstr("groups[0].num_gpus = 0"));

  StageGraph e;
  e.AddGroup({});
  e.AddStage({});
  e.AddEdge(0, 0);
  EXPECT_THAT(e.Finalize().message(), HasSubstr("self edges"));

  StageGraph l;
  l.AddGroup({});
  l.AddStage({.latency_s = -1});
  EXPECT_THAT(l.Finalize().message(), HasSubstr("stages[0].latency_s = -1"));
}

TEST(StageGraph, StageNameReadsAsGroupPassMicrobatchChunkModule) {
  StageGraph g;
  g.AddGroup({});
  g.AddGroup({});
  g.SetModuleNames({"vit", "llm"});
  g.AddStage({.group = 1,
              .module = 1,
              .chunk = 2,
              .microbatch = 3,
              .sub_microbatch = 1,
              .pass = spec::Pass::kBackwardInput});
  g.AddStage({.module = 7});
  EXPECT_EQ(g.StageName(0), "g1 Bi mb3.1 c2 llm");
  EXPECT_EQ(g.StageName(1), "g0 F mb0.0 c0 m7");
}

TEST(StageGraph, AddingAfterFinalizeRequiresFinalizeAgain) {
  StageGraph g;
  g.AddGroup({});
  g.AddStage({});
  ASSERT_TRUE(g.Finalize().ok());
  g.AddStage({});
  EXPECT_FALSE(g.finalized());
  ASSERT_TRUE(g.Finalize().ok());
  EXPECT_EQ(g.topological_order().size(), 2u);
}

TEST(DeviceGroup, CountsFoldedReplicas) {
  DeviceGroup group{.num_gpus = 8, .dp = 4};
  EXPECT_EQ(group.TotalGpus(), 32);
  EXPECT_EQ(group.DpStrideGpus(), 8);
  group.dp_stride_gpus = 64;
  EXPECT_EQ(group.DpStrideGpus(), 64);
}

TEST(StageGraph, SampleSetsAreSortedDeduplicatedAndChecked) {
  StageGraph g;
  g.AddGroup({});
  const SampleSetId a = g.AddSampleSet({5, 1, 3, 1});
  EXPECT_EQ(g.AddSampleSet({1, 3, 5}), a);  // equal to the last set: shared
  const SampleSetId b = g.AddSampleSet({2});
  EXPECT_NE(a, b);
  ASSERT_EQ(g.sample_set(a).size(), 3u);
  EXPECT_EQ(g.sample_set(a)[0], 1);
  EXPECT_EQ(g.sample_set(a)[2], 5);
  EXPECT_TRUE(g.sample_set(-1).empty());
  EXPECT_TRUE(g.sample_set(99).empty());
  Stage s{.group = 0};
  s.samples = a;
  s.instance_begin = 0;
  s.instance_end = 2;
  const StageId x = g.AddStage(s);
  const StageId y = g.AddStage(s);
  g.AddEdge(Edge{.from = x, .to = y, .bytes = 8, .samples = b, .rows = 4});
  EXPECT_TRUE(g.Finalize().ok());
  EXPECT_EQ(g.edge(0).rows, 4);
  // Out-of-range sample sets and inverted instance ranges are refused, naming the field.
  StageGraph bad = g;
  bad.AddEdge(Edge{.from = x, .to = y, .samples = 7});
  auto st = bad.Finalize();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("samples = 7"), std::string::npos) << st.message();
  StageGraph inverted = g;
  s.instance_begin = 3;
  inverted.AddStage(s);
  st = inverted.Finalize();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("instances [3, 2)"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace weft::graph
