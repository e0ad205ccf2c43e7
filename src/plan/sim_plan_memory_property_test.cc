// Property: the simulator's memory is the compiled plan's memory. For random stage graphs
// (fan-in, fan-out, sub-microbatches, split backward, several groups, random bytes and
// latencies) and schedules (rule schedules and random topological orders), CompilePlan's plan
// validates, and ValidatePlan's replay peaks on every rank at exactly the simulated peak of that
// group (static + activations + boundary buffers, in bytes); at any capacity the plan validates
// if and only if the simulation fits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "weft/plan/compiler.h"
#include "weft/plan/validator.h"
#include "weft/sched/generators.h"
#include "weft/sim/simulator.h"

namespace weft::plan {
namespace {

using graph::StageGraph;
using graph::StageId;
using sched::ScheduleKind;
using spec::Pass;

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kGiB = int64_t{1} << 30;

using Rng = std::mt19937_64;

int Uniform(Rng& rng, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
bool Chance(Rng& rng, double p) { return std::bernoulli_distribution(p)(rng); }

// How often quantities are exactly 0. Zero latencies, zero-byte edges and zero-latency links make
// events coincide (a transfer arriving as its consumer's predecessor ends, several stages ending
// at one instant): the compiler's tie rules (the receive order along a channel) matter then.
struct Zeros {
  double latency = 0.1;
  double bytes = 1.0 / 6;
  double link_latency = 0.3;
};

// Bytes of a boundary tensor: sometimes 0 (a synchronization or ordering edge), sometimes odd
// (rounded up to whole elements by both sides), usually MiB to hundreds of MiB.
int64_t RandomBytes(Rng& rng, const Zeros& zeros) {
  if (Chance(rng, zeros.bytes)) return 0;
  return Chance(rng, 0.2) ? Uniform(rng, 1, 4097)
                          : int64_t{Uniform(rng, 1, 512)} * kMiB + Uniform(rng, 0, 3);
}

// Latencies from a small set (ties between groups are frequent), sometimes 0, or continuous.
double RandomLatencyS(Rng& rng, const Zeros& zeros) {
  if (Chance(rng, zeros.latency)) return 0.0;
  return Chance(rng, 0.5) ? 1e-3 * Uniform(rng, 1, 4)
                          : std::uniform_real_distribution<double>(1e-4, 5e-3)(rng);
}

spec::ClusterSpec RandomCluster(Rng& rng, const Zeros& zeros) {
  spec::ClusterSpec c;
  c.name = "random";
  c.num_nodes = 8;
  c.gpus_per_node = 8;
  c.gpu.peak_bf16_flops_per_s = 1e15;
  c.gpu.hbm_bandwidth_bytes_per_s = 2e12;
  c.gpu.memory_capacity_bytes = 0;  // the tests set capacities explicitly
  const double latency_s = Chance(rng, zeros.link_latency) ? 0.0 : 1e-5;
  c.intra_node = {.bandwidth_bytes_per_s = 1e9 * Uniform(rng, 20, 400), .latency_s = latency_s};
  c.inter_node = {.bandwidth_bytes_per_s = 1e9 * Uniform(rng, 2, 50), .latency_s = latency_s};
  c.efficiency = {.compute = 1, .memory = 1, .network = 1};
  return c;
}

// A random multimodal-like graph: virtual stages form a DAG (each after the first has one or two
// parents among the earlier ones: fan-in; a stage may feed several: fan-out), each on a random
// group (connected stages on one group exchange local buffers), each cut into 1–3
// sub-microbatches; stages of consecutive virtual stages are connected sub to sub when the
// counts match, else all to all. Backward edges mirror the forward ones; F → B (and B → W with a
// split backward) on the stage's group carry random bytes (often 0).
StageGraph RandomGraph(Rng& rng, const Zeros& zeros, bool split_backward) {
  const int num_virtual = Uniform(rng, 2, 7);
  const int num_groups = Uniform(rng, 2, std::min(5, num_virtual));
  const int num_microbatches = Uniform(rng, 1, 5);
  const int gpus_per_group = 1 << Uniform(rng, 0, 3);
  StageGraph g;
  std::vector<std::string> names;
  for (int k = 0; k < num_virtual; ++k) names.push_back("m" + std::to_string(k));
  g.SetModuleNames(names);
  for (int gr = 0; gr < num_groups; ++gr) {
    g.AddGroup({.first_gpu = gr * gpus_per_group,
                .num_gpus = gpus_per_group,
                .static_bytes = int64_t{Uniform(rng, 0, 40)} * kGiB + Uniform(rng, 0, 1000)});
  }
  std::vector<int> group(num_virtual), chunk(num_virtual), subs(num_virtual);
  std::vector<std::vector<int>> parents(num_virtual);
  std::vector<int> chunks_on(num_groups, 0);
  // Every group runs something (the validator checks memory only at actions).
  std::vector<int> first_groups(num_groups);
  for (int gr = 0; gr < num_groups; ++gr) first_groups[gr] = gr;
  std::shuffle(first_groups.begin(), first_groups.end(), rng);
  for (int k = 0; k < num_virtual; ++k) {
    group[k] = k < num_groups ? first_groups[k] : Uniform(rng, 0, num_groups - 1);
    chunk[k] = chunks_on[group[k]]++;
    subs[k] = Chance(rng, 0.35) ? Uniform(rng, 2, 3) : 1;
    if (k > 0) {
      parents[k].push_back(Uniform(rng, 0, k - 1));
      if (k > 1 && Chance(rng, 0.3)) {
        const int other = Uniform(rng, 0, k - 1);
        if (other != parents[k][0]) parents[k].push_back(other);
      }
    }
  }
  std::vector<int64_t> forward_bytes(num_virtual), activation(num_virtual);
  for (int k = 0; k < num_virtual; ++k) {
    forward_bytes[k] = RandomBytes(rng, zeros);
    activation[k] = int64_t{Uniform(rng, 0, 8)} * kGiB / 4 + Uniform(rng, 0, 99);
  }
  for (int mb = 0; mb < num_microbatches; ++mb) {
    // [virtual][sub] → stage ids.
    std::vector<std::vector<StageId>> f(num_virtual), b(num_virtual), w(num_virtual);
    for (int k = 0; k < num_virtual; ++k) {
      for (int s = 0; s < subs[k]; ++s) {
        graph::Stage st{.group = group[k], .module = k, .chunk = chunk[k], .microbatch = mb,
                        .sub_microbatch = s};
        st.pass = Pass::kForward;
        st.latency_s = RandomLatencyS(rng, zeros);
        st.activation_alloc_bytes = activation[k];
        f[k].push_back(g.AddStage(st));
      }
    }
    for (int k = num_virtual; k-- > 0;) {
      for (int s = 0; s < subs[k]; ++s) {
        graph::Stage st{.group = group[k], .module = k, .chunk = chunk[k], .microbatch = mb,
                        .sub_microbatch = s};
        const int64_t held_for_w = split_backward ? activation[k] / 3 : 0;
        st.pass = split_backward ? Pass::kBackwardInput : Pass::kBackward;
        st.latency_s = RandomLatencyS(rng, zeros);
        st.activation_free_bytes = activation[k] - held_for_w;
        b[k].push_back(g.AddStage(st));
        if (split_backward) {
          st.pass = Pass::kBackwardWeight;
          st.latency_s = RandomLatencyS(rng, zeros);
          st.activation_free_bytes = held_for_w;
          w[k].push_back(g.AddStage(st));
        }
      }
    }
    for (int k = 0; k < num_virtual; ++k) {
      for (int s = 0; s < subs[k]; ++s) {
        g.AddEdge(f[k][s], b[k][s], Chance(rng, 0.7) ? 0 : RandomBytes(rng, zeros));
        if (split_backward) g.AddEdge(b[k][s], w[k][s], Chance(rng, 0.5) ? 0 : RandomBytes(rng, zeros));
      }
      for (int p : parents[k]) {
        for (int sp = 0; sp < subs[p]; ++sp) {
          for (int sk = 0; sk < subs[k]; ++sk) {
            if (subs[p] == subs[k] && sp != sk) continue;
            g.AddEdge(f[p][sp], f[k][sk], forward_bytes[p]);
            g.AddEdge(b[k][sk], b[p][sp], forward_bytes[p]);
          }
        }
      }
    }
  }
  const Status finalized = g.Finalize();
  EXPECT_TRUE(finalized.ok()) << finalized.ToString();
  return g;
}

// A linear pipeline with random per-virtual-stage costs (rule schedules always apply).
StageGraph RandomPipeline(Rng& rng, const Zeros& zeros, bool split_backward,
                          int* chunks_per_group) {
  const int p = Uniform(rng, 2, 4);
  const int v = Uniform(rng, 1, 2);
  const int m = p * Uniform(rng, 1, 3);
  std::vector<sched::VirtualStageCost> costs;
  for (int k = 0; k < p * v; ++k) {
    const int64_t activation = int64_t{Uniform(rng, 1, 8)} * kGiB / 4 + Uniform(rng, 0, 99);
    costs.push_back({.forward_s = RandomLatencyS(rng, zeros),
                     .backward_input_s = RandomLatencyS(rng, zeros),
                     .backward_weight_s = RandomLatencyS(rng, zeros),
                     .activation_bytes = activation,
                     .weight_grad_activation_bytes = split_backward ? activation / 4 : 0,
                     .send_bytes = RandomBytes(rng, zeros)});
  }
  auto graph = sched::BuildPipelineGraph({.num_groups = p,
                                          .chunks_per_group = v,
                                          .num_microbatches = m,
                                          .split_backward = split_backward,
                                          .costs = costs,
                                          .gpus_per_group = 1 << Uniform(rng, 0, 3),
                                          .static_bytes_per_group = int64_t{Uniform(rng, 0, 40)} * kGiB});
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  *chunks_per_group = v;
  return graph.ok() ? *std::move(graph) : StageGraph{};
}

// Per group, its stages in the order of one random topological order of the whole graph (no
// deadlock: the global order is a valid sequential run).
sched::Schedule RandomTopologicalSchedule(const StageGraph& g, Rng& rng) {
  std::vector<int> pending(g.num_stages());
  std::vector<StageId> ready;
  for (StageId s = 0; s < g.num_stages(); ++s) {
    pending[s] = static_cast<int>(g.in_edges(s).size());
    if (pending[s] == 0) ready.push_back(s);
  }
  sched::Schedule schedule;
  schedule.name = "random-topological";
  schedule.order.resize(g.num_groups());
  while (!ready.empty()) {
    const int pick = Uniform(rng, 0, static_cast<int>(ready.size()) - 1);
    const StageId s = ready[pick];
    ready[pick] = ready.back();
    ready.pop_back();
    schedule.order[g.stage(s).group].push_back(s);
    for (graph::EdgeId e : g.out_edges(s)) {
      if (--pending[g.edge(e).to] == 0) ready.push_back(g.edge(e).to);
    }
  }
  return schedule;
}

struct Counts {
  int checked = 0;        // (graph, schedule) pairs compared
  int with_buffers = 0;   // … where some group's peak includes boundary buffers
  int fit = 0;            // capacity checks where the simulation fits
  int oom = 0;            // … where it does not
  int tie_deadlocks = 0;  // compiled plans that deadlock at zero-latency ties (degenerate only)
};

// Simulates, compiles and validates (graph, schedule); false if the simulator rejects the
// schedule (a rule schedule that deadlocks on a random graph).
bool ExpectMemoryAgrees(const StageGraph& graph, const sched::Schedule& schedule,
                        const spec::ClusterSpec& cluster, Rng& rng, const std::string& where,
                        bool tolerate_tie_deadlock, Counts& counts) {
  SCOPED_TRACE(where + " schedule " + schedule.name);
  const DType dtype = Chance(rng, 0.8) ? DType::kBf16 : DType::kFp32;
  sim::SimOptions options{.buffer_element_bytes = DTypeBytes(dtype)};
  auto timeline = sim::Simulate(graph, schedule, cluster, options);
  if (!timeline.ok()) {
    EXPECT_EQ(timeline.status().code(), StatusCode::kFailedPrecondition)
        << timeline.status().ToString();
    return false;
  }
  ++counts.checked;
  const int num_groups = graph.num_groups();
  int64_t max_peak = 0;
  for (const sim::GroupTimeline& gt : timeline->groups) max_peak = std::max(max_peak, gt.peak_bytes);

  // The search configuration (no transfers, no curves recorded) counts the same memory.
  sim::SimOptions search = options;
  search.record_transfers = false;
  search.record_memory_curves = false;
  search.validate_schedule = false;
  auto quick = sim::Simulate(graph, schedule, cluster, search);
  EXPECT_TRUE(quick.ok()) << quick.status().ToString();

  std::vector<int64_t> hidden(graph.module_names().size());
  for (int64_t& h : hidden) h = Chance(rng, 0.5) ? 0 : 64 * Uniform(rng, 1, 64);
  CompileOptions compile;
  compile.dtype = dtype;
  compile.hidden_size_by_module = hidden;
  compile.memory_capacity_bytes = max_peak;
  auto plan = CompilePlan(graph, schedule, *timeline, compile);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  if (!plan.ok()) return true;
  auto report = ValidatePlan(*plan);
  if (!report.ok() && tolerate_tie_deadlock &&
      report.status().message().find("deadlock") != std::string::npos) {
    ++counts.tie_deadlocks;
    return true;
  }
  EXPECT_TRUE(report.ok()) << report.status().ToString();
  if (!report.ok()) return true;
  bool buffers = false;
  for (int g = 0; g < num_groups; ++g) {
    const sim::GroupTimeline& gt = timeline->groups[g];
    EXPECT_EQ(report->ranks[g].peak_bytes, gt.peak_bytes) << "group " << g;
    EXPECT_EQ(report->ranks[g].peak_buffer_bytes, gt.peak_buffer_bytes) << "group " << g;
    if (quick.ok()) {
      EXPECT_EQ(quick->groups[g].peak_bytes, gt.peak_bytes) << "group " << g;
      EXPECT_EQ(quick->groups[g].peak_buffer_bytes, gt.peak_buffer_bytes) << "group " << g;
    }
    // The curve: starts at static, time never goes back, reaches the peak, ends at static.
    EXPECT_FALSE(gt.memory.empty());
    if (gt.memory.empty()) continue;
    EXPECT_EQ(gt.memory.front().bytes, gt.static_bytes);
    int64_t curve_peak = 0;
    for (size_t i = 0; i < gt.memory.size(); ++i) {
      curve_peak = std::max(curve_peak, gt.memory[i].bytes);
      if (i > 0) {
        EXPECT_GE(gt.memory[i].time_s, gt.memory[i - 1].time_s) << "point " << i;
      }
    }
    EXPECT_EQ(curve_peak, gt.peak_bytes) << "group " << g;
    EXPECT_EQ(gt.memory.back().bytes, gt.static_bytes) << "group " << g;
    buffers = buffers || gt.peak_buffer_bytes > 0;
  }
  counts.with_buffers += buffers;

  // A capacity at the highest peak, one byte below it, or at another group's peak: the plan
  // validates iff the simulation fits.
  int64_t capacity = max_peak;
  switch (Uniform(rng, 0, 2)) {
    case 0: break;
    case 1: capacity = max_peak - 1; break;
    default: capacity = timeline->groups[Uniform(rng, 0, num_groups - 1)].peak_bytes; break;
  }
  capacity = std::max<int64_t>(1, capacity);
  sim::SimOptions capped = options;
  capped.capacity_bytes = capacity;
  auto at_capacity = sim::Simulate(graph, schedule, cluster, capped);
  EXPECT_TRUE(at_capacity.ok()) << at_capacity.status().ToString();
  if (!at_capacity.ok()) return true;
  compile.memory_capacity_bytes = 0;  // the timeline's capacity
  auto capped_plan = CompilePlan(graph, schedule, *at_capacity, compile);
  EXPECT_TRUE(capped_plan.ok()) << capped_plan.status().ToString();
  if (!capped_plan.ok()) return true;
  EXPECT_EQ(capped_plan->ranks[0].memory_capacity_bytes, capacity);
  auto capped_report = ValidatePlan(*capped_plan);
  if (at_capacity->oom.empty()) {
    ++counts.fit;
    EXPECT_TRUE(capped_report.ok()) << "fits at " << capacity << " in the simulation: "
                                    << capped_report.status().ToString();
  } else {
    ++counts.oom;
    EXPECT_EQ(capped_report.status().code(), StatusCode::kResourceExhausted)
        << "out of memory at " << capacity << " in the simulation: "
        << capped_report.status().ToString();
  }
  return true;
}

TEST(SimPlanMemoryProperty, SimulatedPeakEqualsTheValidatedPlanPeakOnEveryRank) {
  constexpr int kInstances = 300;
  Counts counts;
  int rule_schedules = 0, rule_rejected = 0;
  for (int instance = 0; instance < kInstances; ++instance) {
    Rng rng(0x51a0 + instance);
    const bool split = Chance(rng, 0.4);
    const bool pipeline = instance % 3 == 0;
    // One instance in four is degenerate: most latencies and bytes 0, links without latency.
    const bool degenerate = instance % 4 == 1;
    const Zeros zeros = degenerate ? Zeros{.latency = 0.6, .bytes = 0.5, .link_latency = 1.0}
                                   : Zeros{};
    int chunks_per_group = 1;
    const StageGraph graph = pipeline ? RandomPipeline(rng, zeros, split, &chunks_per_group)
                                      : RandomGraph(rng, zeros, split);
    ASSERT_TRUE(graph.finalized()) << "instance " << instance;
    const spec::ClusterSpec cluster = RandomCluster(rng, zeros);
    const std::string where = "instance " + std::to_string(instance) +
                              (pipeline ? " (pipeline)" : " (random graph)") +
                              (split ? " split backward" : "") + (degenerate ? " degenerate" : "");
    std::vector<ScheduleKind> kinds = {ScheduleKind::kOneFOneB, ScheduleKind::kGPipe};
    if (split) kinds.push_back(ScheduleKind::kZeroBubbleH1);
    if (pipeline && chunks_per_group > 1) kinds.push_back(ScheduleKind::kInterleavedOneFOneB);
    for (ScheduleKind kind : kinds) {
      auto schedule = sched::MakeSchedule(kind, graph);
      if (!schedule.ok()) continue;  // e.g. interleaving rules on a graph they do not fit
      ++rule_schedules;
      if (!ExpectMemoryAgrees(graph, *schedule, cluster, rng, where, degenerate, counts)) {
        ++rule_rejected;
        EXPECT_FALSE(pipeline) << where << ": a rule schedule of a linear pipeline deadlocks";
      }
    }
    for (int k = 0; k < 2; ++k) {
      EXPECT_TRUE(ExpectMemoryAgrees(graph, RandomTopologicalSchedule(graph, rng), cluster, rng,
                                     where, degenerate, counts));
    }
    if (HasFailure()) break;  // one instance's report is enough
  }
  // The instances exercise what they claim to.
  EXPECT_GE(counts.checked, 2 * kInstances);
  EXPECT_GE(rule_schedules - rule_rejected, kInstances / 2);
  EXPECT_GE(counts.with_buffers, counts.checked * 9 / 10);
  EXPECT_GE(counts.fit, counts.checked / 4);
  EXPECT_GE(counts.oom, counts.checked / 10);
  std::printf("checked %d (with buffers %d), rule schedules %d (%d deadlock), fit %d, oom %d, "
              "tie deadlocks %d\n",
              counts.checked, counts.with_buffers, rule_schedules, rule_rejected, counts.fit,
              counts.oom, counts.tie_deadlocks);
  RecordProperty("checked", counts.checked);
  RecordProperty("fit", counts.fit);
  RecordProperty("oom", counts.oom);
}

}  // namespace
}  // namespace weft::plan
