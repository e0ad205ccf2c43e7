#include "weft/strategy/dip/memory.h"

#include <gtest/gtest.h>

#include "weft/sched/generators.h"
#include "weft/sim/simulator.h"
#include "weft/strategy/compare.h"
#include "weft/strategy/dip/dip.h"

namespace weft::strategy::dip {
namespace {

// A 2-group pipeline of `mbs` microbatches; per virtual stage F 1 s, B 2 s + `recompute_s`,
// `bytes` held. Four layers per chunk.
graph::StageGraph Variant(int mbs, double recompute_s, int64_t bytes) {
  sched::PipelineShape shape;
  shape.num_groups = 2;
  shape.num_microbatches = mbs;
  shape.costs = {{.forward_s = 1.0, .backward_input_s = 2.0 + recompute_s,
                  .activation_bytes = bytes}};
  auto g = sched::BuildPipelineGraph(shape);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return std::move(*g);
}

spec::ClusterSpec Cluster(int64_t capacity_bytes) {
  auto setup = MakeJobSetup(JobOptions{});
  EXPECT_TRUE(setup.ok());
  spec::ClusterSpec c = (*setup)->job.cluster;
  c.gpu.memory_capacity_bytes = capacity_bytes;
  c.gpu.reserved_memory_bytes = 0;
  c.host_link_bandwidth_bytes_per_s = 0;  // no offload
  return c;
}

int64_t PeakBytes(const graph::StageGraph& g, const sched::Schedule& s, int group) {
  int64_t held = 0, peak = 0;
  for (auto id : s.order[group]) {
    held += g.stage(id).activation_alloc_bytes;
    peak = std::max(peak, held);
    held -= g.stage(id).activation_free_bytes;
  }
  return peak;
}

TEST(MemoryOptimizer, CandidatesSpanFastestToLightestPerPair) {
  const int mbs = 4;
  std::vector<graph::StageGraph> v = {Variant(mbs, 0, 400), Variant(mbs, 0.2, 200),
                                      Variant(mbs, 1.0, 40)};
  const std::vector<int> layers(v[0].num_stages(), 4);
  auto m = MemoryOptimizer::Create(v, layers, Cluster(1 << 20), {.num_candidates = 4});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->pairs().size(), 2u * mbs);
  for (const auto& pair : m->pairs()) {
    ASSERT_GE(pair.candidates.size(), 2u);
    ASSERT_LE(pair.candidates.size(), 4u);
    const auto& light = pair.candidates.front();
    const auto& fast = pair.candidates.back();
    EXPECT_EQ(light.activation_bytes, 40);  // every layer fully recomputed
    EXPECT_EQ(light.layers, (std::array<int16_t, 4>{0, 0, 4, 0}));
    EXPECT_NEAR(light.backward_s - fast.backward_s, 1.0, 1e-12);
    EXPECT_EQ(fast.activation_bytes, 400);
    EXPECT_EQ(fast.layers, (std::array<int16_t, 4>{4, 0, 0, 0}));
    for (size_t c = 1; c < pair.candidates.size(); ++c) {
      EXPECT_GT(pair.candidates[c].activation_bytes, pair.candidates[c - 1].activation_bytes);
      EXPECT_LT(pair.candidates[c].backward_s, pair.candidates[c - 1].backward_s);
      int layers_total = 0;
      for (int n : pair.candidates[c].layers) layers_total += n;
      EXPECT_EQ(layers_total, 4);
    }
  }
  EXPECT_FALSE(MemoryOptimizer::Create(std::span(v).first(1), layers, Cluster(1 << 20)).ok());
}

TEST(MemoryOptimizer, SharedCandidateCacheGivesTheCandidatesOfAFreshOne) {
  const int mbs = 4;
  // Two graphs of different costs: the cache must not mix their pairs.
  const std::vector<graph::StageGraph> a = {Variant(mbs, 0, 400), Variant(mbs, 0.2, 200),
                                            Variant(mbs, 1.0, 40)};
  const std::vector<graph::StageGraph> b = {Variant(mbs, 0, 500), Variant(mbs, 0.3, 260),
                                            Variant(mbs, 1.0, 40)};
  const std::vector<int> layers(a[0].num_stages(), 4);
  const auto cache = std::make_shared<PairCandidateCache>();
  for (const auto* variants : {&a, &b, &a}) {
    auto shared = MemoryOptimizer::Create(*variants, layers, Cluster(1 << 20),
                                          {.num_candidates = 4, .candidate_cache = cache});
    auto fresh = MemoryOptimizer::Create(*variants, layers, Cluster(1 << 20), {.num_candidates = 4});
    ASSERT_TRUE(shared.ok() && fresh.ok());
    ASSERT_EQ(shared->pairs().size(), fresh->pairs().size());
    for (size_t p = 0; p < fresh->pairs().size(); ++p) {
      const auto& x = shared->pairs()[p].candidates;
      const auto& y = fresh->pairs()[p].candidates;
      ASSERT_EQ(x.size(), y.size());
      for (size_t c = 0; c < x.size(); ++c) {
        EXPECT_EQ(x[c].layers, y[c].layers);
        EXPECT_EQ(x[c].activation_bytes, y[c].activation_bytes);
        EXPECT_EQ(x[c].forward_s, y[c].forward_s);
        EXPECT_EQ(x[c].backward_s, y[c].backward_s);
      }
    }
  }
}

TEST(MemoryOptimizer, FitsTheCapAtEveryStageStartAndBeatsUniformFullRecompute) {
  const int mbs = 6;
  std::vector<graph::StageGraph> v = {Variant(mbs, 0, 400), Variant(mbs, 0.2, 200),
                                      Variant(mbs, 1.0, 40)};
  const std::vector<int> layers(v[0].num_stages(), 4);
  const int64_t cap = 700;  // 1F1B holds 2 microbatches on group 0: 800 bytes without recompute
  const auto cluster = Cluster(cap);
  auto m = MemoryOptimizer::Create(v, layers, cluster);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto lightest_graph = m->Lightest();
  auto fastest_graph = m->Fastest();
  ASSERT_TRUE(lightest_graph.ok() && fastest_graph.ok());
  auto order = sched::MakeSchedule(sched::ScheduleKind::kOneFOneB, *lightest_graph);
  ASSERT_TRUE(order.ok());
  auto fastest = sim::Simulate(*fastest_graph, *order, cluster);
  ASSERT_TRUE(fastest.ok());
  EXPECT_FALSE(fastest->oom.empty());  // the fastest options do not fit
  auto lightest = sim::Simulate(*lightest_graph, *order, cluster);
  ASSERT_TRUE(lightest.ok());
  ASSERT_TRUE(lightest->oom.empty());
  for (auto method : {algo::LiveSelectionMethod::kGreedy, algo::LiveSelectionMethod::kMilp}) {
    auto choice = m->Optimize(*order, method);
    ASSERT_TRUE(choice.ok()) << choice.status().ToString();
    EXPECT_TRUE(choice->feasible);
    for (int g = 0; g < 2; ++g) EXPECT_LE(PeakBytes(choice->graph, *order, g), cap);
    auto t = sim::Simulate(choice->graph, *order, cluster);
    ASSERT_TRUE(t.ok());
    EXPECT_TRUE(t->oom.empty());
    EXPECT_LT(t->iteration_time_s, lightest->iteration_time_s);
    EXPECT_GE(t->iteration_time_s, fastest->iteration_time_s - 1e-9);
    EXPECT_GE(choice->extra_s, choice->lower_bound_extra_s - 1e-9);
    EXPECT_GT(choice->extra_s, 0);
    // The exact selection mixes options across a chunk's layers (3 none + 1 selective fit the
    // cap on group 0 with two microbatches live), and the stages say so.
    if (method == algo::LiveSelectionMethod::kMilp) {
      bool mixed = false;
      for (const auto& st : choice->graph.stages()) {
        mixed = mixed || st.recompute_layers == std::array<int16_t, 4>{3, 1, 0, 0};
      }
      EXPECT_TRUE(mixed);
    }
  }
  auto greedy = m->Optimize(*order, algo::LiveSelectionMethod::kGreedy);
  auto milp = m->Optimize(*order, algo::LiveSelectionMethod::kMilp);
  EXPECT_LE(milp->extra_s, greedy->extra_s + 1e-9);
}

TEST(MemoryOptimizer, ARepeatedRankSelectionGivesWhatAFreshOptimizerGives) {
  // One optimizer serves a sequence of schedules (its greedy rank selections are remembered by
  // rank, reserve and order); each answer must equal a fresh optimizer's. The second schedule
  // shares rank 0's order with the first and differs on rank 1; reserves change the problem.
  const int mbs = 6;
  std::vector<graph::StageGraph> v = {Variant(mbs, 0, 400), Variant(mbs, 0.2, 200),
                                      Variant(mbs, 1.0, 40)};
  const std::vector<int> layers(v[0].num_stages(), 4);
  const auto cluster = Cluster(700);
  auto one_f_one_b = sched::MakeSchedule(sched::ScheduleKind::kOneFOneB, v[0]);
  auto gpipe = sched::MakeSchedule(sched::ScheduleKind::kGPipe, v[0]);
  ASSERT_TRUE(one_f_one_b.ok() && gpipe.ok());
  sched::Schedule mixed = *one_f_one_b;
  mixed.order[1] = gpipe->order[1];
  ASSERT_NE(mixed.order[1], one_f_one_b->order[1]);
  const std::vector<int64_t> none, some = {0, 100}, more = {200, 100};
  struct Call {
    const sched::Schedule* schedule;
    const std::vector<int64_t>* reserve;
  };
  const std::vector<Call> calls = {{&*one_f_one_b, &none}, {&mixed, &none},
                                   {&*one_f_one_b, &none}, {&mixed, &some},
                                   {&*one_f_one_b, &more}, {&*gpipe, &some}};
  auto shared = MemoryOptimizer::Create(v, layers, cluster);
  ASSERT_TRUE(shared.ok());
  for (const Call& call : calls) {
    auto fresh = MemoryOptimizer::Create(v, layers, cluster);
    ASSERT_TRUE(fresh.ok());
    auto want = fresh->Optimize(*call.schedule, algo::LiveSelectionMethod::kGreedy, *call.reserve);
    auto got = shared->Optimize(*call.schedule, algo::LiveSelectionMethod::kGreedy, *call.reserve);
    ASSERT_TRUE(want.ok() && got.ok());
    EXPECT_EQ(got->feasible, want->feasible);
    EXPECT_EQ(got->extra_s, want->extra_s);
    EXPECT_EQ(got->lower_bound_extra_s, want->lower_bound_extra_s);
    EXPECT_EQ(got->layers_by_option, want->layers_by_option);
    ASSERT_EQ(got->graph.num_stages(), want->graph.num_stages());
    for (int s = 0; s < got->graph.num_stages(); ++s) {
      EXPECT_EQ(got->graph.stage(s).recompute_layers, want->graph.stage(s).recompute_layers);
      EXPECT_EQ(got->graph.stage(s).activation_alloc_bytes,
                want->graph.stage(s).activation_alloc_bytes);
      EXPECT_EQ(got->graph.stage(s).latency_s, want->graph.stage(s).latency_s);
    }
  }
  // The reserves bind: the answers are not all one.
  auto roomy = shared->Optimize(*one_f_one_b, algo::LiveSelectionMethod::kGreedy, none);
  auto tight = shared->Optimize(*one_f_one_b, algo::LiveSelectionMethod::kGreedy, more);
  ASSERT_TRUE(roomy.ok() && tight.ok());
  EXPECT_GT(tight->extra_s, roomy->extra_s);
}

// `g` with every forward and backward offloading `bytes` per GPU (Stage::offload_bytes), no
// activations held on the GPU: the offload variant as the graph builder prices it.
graph::StageGraph WithOffload(const graph::StageGraph& g, int64_t bytes) {
  graph::StageGraph out;
  for (const auto& group : g.groups()) out.AddGroup(group);
  for (const auto& st : g.stages()) {
    graph::Stage copy = st;
    copy.activation_alloc_bytes = copy.activation_free_bytes = 0;
    copy.offload_bytes = bytes;
    copy.recompute = spec::Recompute::kOffload;
    out.AddStage(copy);
  }
  for (const auto& e : g.edges()) out.AddEdge(e);
  EXPECT_TRUE(out.Finalize().ok());
  return out;
}

// Offload on: 53 GB/s per GPU, 212 GB/s per node; `host_bytes_per_node` of host memory.
spec::ClusterSpec OffloadCluster(int64_t capacity_bytes, int64_t host_bytes_per_node) {
  spec::ClusterSpec c = Cluster(capacity_bytes);
  c.host_link_bandwidth_bytes_per_s = 53e9;
  c.host_bandwidth_bytes_per_s_per_node = 212e9;
  c.host_memory_bytes_per_node = host_bytes_per_node;
  return c;
}

// Four variants (none, selective, full, offload) of a 2-group pipeline whose activations are
// 4 GB per microbatch chunk: a layer's 1-GB copy (38 ms at 212/8 GB/s) hides under its 250-ms
// forward, so offload is priced at 10% of its copies (7.5 ms) and beats selective recompute
// (50 ms per layer).
std::vector<graph::StageGraph> OffloadVariants(int mbs) {
  const int64_t kGB = 1'000'000'000;
  return {Variant(mbs, 0, 4 * kGB), Variant(mbs, 0.2, 2 * kGB), Variant(mbs, 1.0, kGB / 2.5),
          WithOffload(Variant(mbs, 0, 0), 4 * kGB)};
}

TEST(MemoryOptimizer, AReplicaThatFitsWithoutOptionsGetsNone) {
  const int mbs = 4;
  const auto v = OffloadVariants(mbs);
  const std::vector<int> layers(v[0].num_stages(), 4);
  const auto cluster = OffloadCluster(int64_t{1} << 50, int64_t{1} << 50);  // everything fits
  auto m = MemoryOptimizer::Create(v, layers, cluster);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto order = sched::MakeSchedule(sched::ScheduleKind::kOneFOneB, *m->Lightest());
  ASSERT_TRUE(order.ok());
  for (auto method : {algo::LiveSelectionMethod::kGreedy, algo::LiveSelectionMethod::kMilp}) {
    auto choice = m->Optimize(*order, method);
    ASSERT_TRUE(choice.ok()) << choice.status().ToString();
    EXPECT_TRUE(choice->feasible);
    EXPECT_EQ(choice->layers_by_option, (std::array<int64_t, 4>{2 * mbs * 4, 0, 0, 0}));
    EXPECT_NEAR(choice->extra_s, 0, 1e-12);
    for (const auto& st : choice->graph.stages()) {
      EXPECT_EQ(st.recompute, spec::Recompute::kNone);
      EXPECT_EQ(st.offload_bytes, 0);
    }
  }
}

TEST(MemoryOptimizer, OffloadIsPricedAndLimitedByHostMemory) {
  const int mbs = 6;
  const auto v = OffloadVariants(mbs);
  const std::vector<int> layers(v[0].num_stages(), 4);
  const int64_t kGB = 1'000'000'000;
  const int64_t cap = 7 * kGB;  // 1F1B holds 2 microbatches on group 0: 8 GB without options
  // Every candidate prices offload: never free.
  auto roomy = MemoryOptimizer::Create(v, layers, OffloadCluster(cap, int64_t{1} << 50));
  ASSERT_TRUE(roomy.ok()) << roomy.status().ToString();
  for (const auto& pair : roomy->pairs()) {
    for (const auto& c : pair.candidates) {
      EXPECT_EQ(c.offload_price_s > 0, c.layers[3] > 0);
      EXPECT_EQ(c.offload_bytes, c.layers[3] * kGB);
    }
  }
  auto order = sched::MakeSchedule(sched::ScheduleKind::kOneFOneB, *roomy->Lightest());
  ASSERT_TRUE(order.ok());
  // The exact selection never costs more than the greedy one, with offload among the options
  // (the oracle check of the memory step).
  auto greedy = roomy->Optimize(*order, algo::LiveSelectionMethod::kGreedy);
  auto milp = roomy->Optimize(*order, algo::LiveSelectionMethod::kMilp);
  ASSERT_TRUE(greedy.ok() && milp.ok());
  EXPECT_TRUE(greedy->feasible && milp->feasible);
  EXPECT_LE(milp->extra_s, greedy->extra_s + 1e-9);
  EXPECT_GE(milp->extra_s, milp->lower_bound_extra_s - 1e-9);
  EXPECT_GT(milp->layers_by_option[3], 0);  // cheaper than recomputing here
  // Host memory of 4 GB per node (0.5 GB per GPU) holds no offloaded layer (1 GB): the
  // selection recomputes instead, pays for it, and still fits.
  auto tiny = MemoryOptimizer::Create(v, layers, OffloadCluster(cap, 4 * kGB));
  ASSERT_TRUE(tiny.ok());
  for (auto method : {algo::LiveSelectionMethod::kGreedy, algo::LiveSelectionMethod::kMilp}) {
    auto choice = tiny->Optimize(*order, method);
    ASSERT_TRUE(choice.ok());
    EXPECT_TRUE(choice->feasible);
    EXPECT_EQ(choice->layers_by_option[3], 0);
    for (int g = 0; g < 2; ++g) EXPECT_LE(PeakBytes(choice->graph, *order, g), cap);
    for (const auto& st : choice->graph.stages()) EXPECT_EQ(st.offload_bytes, 0);
    EXPECT_GT(choice->extra_s, milp->extra_s);
  }
  // With 1.5 GB per GPU (8 x 1.5 GB per node) at most one layer is offloaded at any stage
  // start on each rank.
  auto one = MemoryOptimizer::Create(v, layers, OffloadCluster(cap, 12 * kGB));
  ASSERT_TRUE(one.ok());
  auto choice = one->Optimize(*order, algo::LiveSelectionMethod::kMilp);
  ASSERT_TRUE(choice.ok());
  for (int g = 0; g < 2; ++g) {
    int64_t host = 0, peak = 0;
    for (auto id : order->order[g]) {
      const auto& st = choice->graph.stage(id);
      if (st.pass == spec::Pass::kForward) host += st.offload_bytes;
      peak = std::max(peak, host);
      if (st.pass != spec::Pass::kForward) host -= st.offload_bytes;
    }
    EXPECT_LE(peak, 3 * kGB / 2);
  }
}

TEST(MemoryOptimizer, InfeasibleWhenEvenTheLightestOptionsOverflow) {
  std::vector<graph::StageGraph> v = {Variant(4, 0, 400), Variant(4, 0.2, 200),
                                      Variant(4, 1.0, 40)};
  const std::vector<int> layers(v[0].num_stages(), 4);
  auto m = MemoryOptimizer::Create(v, layers, Cluster(50));
  ASSERT_TRUE(m.ok());
  auto order = sched::MakeSchedule(sched::ScheduleKind::kOneFOneB, *m->Lightest());
  ASSERT_TRUE(order.ok());
  auto choice = m->Optimize(*order, algo::LiveSelectionMethod::kMilp);
  ASSERT_TRUE(choice.ok());
  EXPECT_FALSE(choice->feasible);
}

}  // namespace
}  // namespace weft::strategy::dip
