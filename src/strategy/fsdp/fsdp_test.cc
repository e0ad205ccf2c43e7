#include "weft/strategy/fsdp/fsdp.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "weft/plan/validator.h"
#include "weft/strategy/compare.h"
#include "weft/planning/planner.h"

namespace weft::strategy::fsdp {
namespace {

double Sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

// A batch of `n` text-only samples of `tokens` tokens each (not packed: one sequence each).
spec::Batch TextBatch(int n, int tokens) {
  spec::Batch batch;
  for (int i = 0; i < n; ++i) {
    spec::Sample sample;
    sample.id = i;
    sample.text_tokens = tokens;
    batch.samples.push_back(sample);
  }
  return batch;
}

// --- the prefetch rule --------------------------------------------------------------------------

TEST(FsdpOverlap, WithoutCommunicationEveryStepTakesItsCompute) {
  const std::vector<UnitStep> steps = {{.compute_s = 1}, {.compute_s = 2}, {.compute_s = 0.5}};
  const auto t = ExposedStepTimes(steps);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_DOUBLE_EQ(t[0], 1);
  EXPECT_DOUBLE_EQ(t[1], 2);
  EXPECT_DOUBLE_EQ(t[2], 0.5);
}

// n equal forward units, compute c, all-gather a: the first gather is exposed, then each unit
// takes max(c, a) (its successor's gather overlaps it), the last unit its compute:
// a + (n−1)·max(c, a) + c.
TEST(FsdpOverlap, EqualForwardUnitsTakeMaxOfComputeAndGather) {
  for (const auto& [c, a] : std::vector<std::pair<double, double>>{{3, 1}, {1, 3}, {2, 2}}) {
    const int n = 6;
    std::vector<UnitStep> steps(n, UnitStep{.compute_s = c, .all_gather_s = a});
    const auto t = ExposedStepTimes(steps);
    EXPECT_NEAR(Sum(t), a + (n - 1) * std::max(c, a) + c, 1e-12) << "c " << c << " a " << a;
    for (size_t i = 0; i < t.size(); ++i) EXPECT_GE(t[i], c - 1e-12);
  }
}

// Backward units: gather g before, reduce-scatter r after; one communication stream, so when
// communication dominates a unit takes g + r, when compute dominates it takes its compute; the
// last reduce-scatter is exposed.
TEST(FsdpOverlap, BackwardUnitsShareOneCommunicationStream) {
  const int n = 5;
  {  // communication-bound: the stream never idles: n·g + n·r in all, the computes hidden
    std::vector<UnitStep> steps(n, UnitStep{.compute_s = 0.1, .all_gather_s = 1,
                                            .reduce_scatter_s = 2});
    EXPECT_NEAR(Sum(ExposedStepTimes(steps)), n * 1.0 + n * 2.0, 1e-12);
  }
  {  // compute-bound (g + r <= c): first gather + n computes + last reduce-scatter
    std::vector<UnitStep> steps(n, UnitStep{.compute_s = 4, .all_gather_s = 1,
                                            .reduce_scatter_s = 2});
    EXPECT_NEAR(Sum(ExposedStepTimes(steps)), 1 + n * 4.0 + 2, 1e-12);
  }
}

// --- a tiny model, by hand ----------------------------------------------------------------------

// The tiny VLM's 4-layer LM alone, 2 GPUs of one node, FSDP over 2 ranks, one microbatch each.
std::unique_ptr<JobSetup> TinyLmSetup(double link_bytes_per_s) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "weft_fsdp_test_tiny_lm.yaml").string();
  {
    std::ofstream out(path);
    out << "modules:\n  - use: tiny-vlm\n    module: llm\n"
           "setup:\n  cluster: a100\n  gpus: 2\n  context_tokens: 4096\n"
           "  parallel:\n    num_microbatches: 1\n    all: {tp: 1, pp: 1, dp: 2}\n";
  }
  auto setup = MakeJobSetup(JobOptions{.model = path, .data = "mixed"});
  EXPECT_TRUE(setup.ok()) << setup.status().ToString();
  if (!setup.ok()) return nullptr;
  (*setup)->job.cluster.intra_node.bandwidth_bytes_per_s = link_bytes_per_s;
  (*setup)->cost_model = std::make_unique<cost::CostModel>((*setup)->job.cluster);
  (*setup)->job.cost_model = (*setup)->cost_model.get();
  return std::move(*setup);
}

struct HandTimes {
  std::vector<double> f, b, gather, reduce_scatter;  // per layer
  double optimizer_s = 0;
};

// Per-layer costs from the cost model and the ring formula written out:
// (d−1)/d · bytes / (bandwidth · efficiency) + (d−1) · link latency + NCCL base, d = 2.
HandTimes Hand(const JobSetup& setup, int64_t tokens) {
  const Job& job = setup.job;
  const int llm = *job.model.FindModule("llm");
  spec::ModuleParallel p = job.parallel.For("llm");
  p.dp = 1;
  const auto& link = job.cluster.intra_node;
  const double bw = link.bandwidth_bytes_per_s * job.cluster.efficiency.network;
  const double base = job.cost_model->options().collective_base_latency_s;
  HandTimes h;
  double optimizer_traffic = 0;
  for (int l = 0; l < job.model.modules[llm].num_layers; ++l) {
    auto c = job.cost_model->Layer(job.model, llm, l, cost::TokenShape::Uniform(tokens), p);
    EXPECT_TRUE(c.ok());
    h.f.push_back(c->forward_s);
    h.b.push_back(c->BackwardS(spec::Recompute::kNone));
    h.gather.push_back(0.5 * c->parameter_bytes / bw + link.latency_s + base);
    h.reduce_scatter.push_back(0.5 * c->gradient_bytes / bw + link.latency_s + base);
    optimizer_traffic += 2 * c->optimizer_bytes + c->gradient_bytes + c->parameter_bytes;
  }
  h.optimizer_s = std::ceil(optimizer_traffic / 2) /
                  (job.cluster.gpu.hbm_bandwidth_bytes_per_s * job.cluster.efficiency.memory);
  return h;
}

StatusOr<PlannedIteration> PlanTiny(std::unique_ptr<JobSetup> setup, int tokens) {
  std::shared_ptr<const JobSetup> shared(std::move(setup));
  WEFT_ASSIGN_OR_RETURN(auto planner, Planner::Create(shared, MakeFsdpStrategy()));
  WEFT_ASSIGN_OR_RETURN(PlannedIteration planned, planner->Plan(TextBatch(2, tokens)));
  // The compiled plan of every rank validates.
  WEFT_RETURN_IF_ERROR(planner->CompileWorld(planned).status());
  return planned;
}

constexpr int kTokens = 2048;

TEST(FsdpTinyLm, ComputeBoundIterationEqualsTheHandComputation) {
  auto setup = TinyLmSetup(300e9);  // NVLink
  ASSERT_NE(setup, nullptr);
  const HandTimes h = Hand(*setup, kTokens);
  // The regime: every gather and reduce-scatter hides under the compute it overlaps.
  const double max_comm = *std::max_element(h.gather.begin(), h.gather.end()) +
                          *std::max_element(h.reduce_scatter.begin(), h.reduce_scatter.end());
  ASSERT_LT(*std::max_element(h.gather.begin(), h.gather.end()),
            *std::min_element(h.f.begin(), h.f.end()));
  ASSERT_LT(max_comm, *std::min_element(h.b.begin(), h.b.end()));
  auto planned = PlanTiny(std::move(setup), kTokens);
  ASSERT_TRUE(planned.ok()) << planned.status().ToString();
  ASSERT_EQ(planned->recompute_used, spec::Recompute::kNone);
  ASSERT_EQ(planned->plan.replicas.size(), 2u);
  // Layer 0's gather exposed, then F0..F3 and B3..B0 back to back, then layer 0's reduce-scatter.
  const double expected = h.gather[0] + Sum(h.f) + Sum(h.b) + h.reduce_scatter[0];
  const auto& group = planned->evaluation.timelines[0].groups[0];
  EXPECT_NEAR(group.last_end_s, expected, 1e-12);
  EXPECT_NEAR(group.optimizer_s, h.optimizer_s, 1e-12);
  // No end-of-iteration all-reduce: the reduce-scatters replace it.
  EXPECT_EQ(group.grad_sync_s, 0);
  EXPECT_NEAR(planned->evaluation.iteration_time_s, expected + h.optimizer_s, 1e-12);
}

TEST(FsdpTinyLm, CommunicationBoundIterationEqualsTheHandComputation) {
  auto setup = TinyLmSetup(10e6);  // a 10 MB/s link: every collective dominates
  ASSERT_NE(setup, nullptr);
  const HandTimes h = Hand(*setup, kTokens);
  const double max_compute = std::max(*std::max_element(h.f.begin(), h.f.end()),
                                      *std::max_element(h.b.begin(), h.b.end()));
  ASSERT_LT(max_compute, *std::min_element(h.gather.begin(), h.gather.end()));
  ASSERT_LT(max_compute, *std::min_element(h.reduce_scatter.begin(), h.reduce_scatter.end()));
  auto planned = PlanTiny(std::move(setup), kTokens);
  ASSERT_TRUE(planned.ok()) << planned.status().ToString();
  ASSERT_EQ(planned->recompute_used, spec::Recompute::kNone);
  // The communication stream never idles: 4 gathers forward, 4 backward, 4 reduce-scatters.
  const double expected = 2 * Sum(h.gather) + Sum(h.reduce_scatter);
  const auto& group = planned->evaluation.timelines[0].groups[0];
  EXPECT_NEAR(group.last_end_s, expected, 1e-9);
  EXPECT_NEAR(planned->evaluation.iteration_time_s, expected + h.optimizer_s, 1e-9);
}

TEST(FsdpTinyLm, SlowNetworkCostsExactlyTheExtraCommunication) {
  const HandTimes fast_h = Hand(*TinyLmSetup(300e9), kTokens);
  const HandTimes slow_h = Hand(*TinyLmSetup(10e6), kTokens);
  auto fast = PlanTiny(TinyLmSetup(300e9), kTokens);
  auto slow = PlanTiny(TinyLmSetup(10e6), kTokens);
  ASSERT_TRUE(fast.ok() && slow.ok());
  const double extra = (2 * Sum(slow_h.gather) + Sum(slow_h.reduce_scatter)) -
                       (fast_h.gather[0] + Sum(fast_h.f) + Sum(fast_h.b) +
                        fast_h.reduce_scatter[0]);
  EXPECT_GT(extra, 0.1);  // seconds: ~1.1 MB of collectives per rank at 8 MB/s
  EXPECT_NEAR(slow->evaluation.iteration_time_s - fast->evaluation.iteration_time_s, extra, 1e-9);
}

// --- memory -------------------------------------------------------------------------------------

TEST(FsdpMemory, StatesAreShardedOverTheRanks) {
  // VLM-S (TP4 per the setup) on 4, 8, 16 GPUs: FSDP over 1, 2, 4 ranks.
  std::vector<int64_t> statics;
  double unsharded = 0, buffers = 0;
  for (int gpus : {4, 8, 16}) {
    auto setup = MakeJobSetup(
        JobOptions{.model = "vlm-s", .gpus = gpus, .pipeline_size = 1, .data = "mixed"});
    ASSERT_TRUE(setup.ok()) << setup.status().ToString();
    const Job& job = (*setup)->job;
    auto layout = LayoutOf(job);
    ASSERT_TRUE(layout.ok());
    EXPECT_EQ(layout->dp, gpus / 4);
    EXPECT_EQ(layout->tp, 4);
    auto fixed = MakeFsdpStrategy()->Prepare(job);
    ASSERT_TRUE(fixed.ok()) << fixed.status().ToString();
    ASSERT_EQ(fixed->placement.groups.size(), 1u);
    const auto& group = fixed->placement.groups[0];
    EXPECT_EQ(group.dp, layout->dp);
    EXPECT_EQ(group.grad_sync_bytes, 0);
    if (gpus == 4) {
      // Σ over units of parameters + gradients + optimizer state (unsharded), and the two largest
      // units' bf16 parameters and gradients.
      double max_param = 0, max_grad = 0;
      for (const Chunk& c : fixed->placement.chunks) {
        spec::ModuleParallel p = job.parallel.For(job.model.modules[c.module].name);
        p.dp = 1;
        auto cost = job.cost_model->Chunk(job.model, c.module, c.first_layer, c.num_layers,
                                          cost::TokenShape::Uniform(1), p);
        ASSERT_TRUE(cost.ok());
        unsharded += cost->StateBytes();
        max_param = std::max(max_param, cost->parameter_bytes);
        max_grad = std::max(max_grad, cost->gradient_bytes);
      }
      buffers = 2 * (max_param + max_grad);
    }
    EXPECT_NEAR(static_cast<double>(group.static_bytes), unsharded / layout->dp + buffers,
                4.0 + layout->dp);
    statics.push_back(group.static_bytes);
  }
  // Sharded part halves with each doubling of the ranks.
  EXPECT_NEAR(statics[0] - buffers, 2 * (statics[1] - buffers), 8);
  EXPECT_NEAR(statics[0] - buffers, 4 * (statics[2] - buffers), 16);
}

TEST(FsdpMemory, VlmSOnSixteenH20FitsAndTheWorldPlanValidates) {
  auto planner = strategy::MakePlanner(
      JobOptions{.model = "vlm-s", .cluster = "h20", .data = "dip-vlm"}, "fsdp");
  ASSERT_TRUE(planner.ok()) << planner.status().ToString();
  auto batches = (*planner)->Batches(0, 1);
  ASSERT_TRUE(batches.ok());
  auto planned = (*planner)->Plan(batches->front());
  ASSERT_TRUE(planned.ok()) << planned.status().ToString();
  EXPECT_EQ(planned->plan.replicas.size(), 4u);  // 16 GPUs / TP 4
  EXPECT_FALSE(planned->evaluation.oom);
  const spec::ClusterSpec& cluster = (*planner)->job().cluster;
  EXPECT_LE(planned->evaluation.peak_memory_bytes, cluster.gpu.UsableMemoryBytes());
  // Ranks run in lockstep: every rank's simulated iteration takes the same time.
  for (const auto& t : planned->evaluation.timelines) {
    EXPECT_NEAR(t.iteration_time_s, planned->evaluation.iteration_time_s, 1e-9);
    EXPECT_EQ(t.groups[0].grad_sync_s, 0);
  }
  plan::ValidationReport report;
  auto world = (*planner)->CompileWorld(*planned, 0, &report);
  ASSERT_TRUE(world.ok()) << world.status().ToString();
  EXPECT_EQ(world->num_ranks(), 4);
  EXPECT_NE(planned->plan.notes.find("fsdp: 4 ranks"), std::string::npos) << planned->plan.notes;
}

TEST(Fsdp, CollectivesUseTheNetworkWhenTheRanksSpanNodes) {
  auto setup = MakeJobSetup(JobOptions{.model = "vlm-s", .cluster = "h20", .data = "mixed"});
  ASSERT_TRUE(setup.ok());
  const Job& job = (*setup)->job;
  auto layout = LayoutOf(job);
  ASSERT_TRUE(layout.ok());
  const int llm = *job.model.FindModule("llm");
  auto c = UnitCollectivesOf(job, *layout, llm, 5, 1);
  ASSERT_TRUE(c.ok());
  const auto& net = job.cluster.inter_node;
  const double d = layout->dp;
  const double expected = (d - 1) / d * c->parameter_bytes /
                              (net.bandwidth_bytes_per_s * job.cluster.efficiency.network) +
                          (d - 1) * net.latency_s +
                          job.cost_model->options().collective_base_latency_s;
  EXPECT_NEAR(c->all_gather_s, expected, 1e-12);
  EXPECT_GT(c->gradient_bytes, c->parameter_bytes);  // fp32 gradients, bf16 weights
  EXPECT_GT(c->reduce_scatter_s, c->all_gather_s);
}

TEST(Fsdp, RefusesABatchWithFewerSequencesThanRanks) {
  auto planner = strategy::MakePlanner(JobOptions{.model = "vlm-s", .data = "mixed"}, "fsdp");
  ASSERT_TRUE(planner.ok());
  auto planned = (*planner)->Plan(TextBatch(3, 1024));
  ASSERT_FALSE(planned.ok());
  EXPECT_EQ(planned.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(planned.status().message().find("fsdp over 4 ranks"), std::string::npos);
}

// Every model family: plans, fits the uniform memory policy's verdict, compiles and validates.
class FsdpOnModel : public ::testing::TestWithParam<std::string> {};

TEST_P(FsdpOnModel, PlansCompilesAndValidates) {
  const std::string model = GetParam();
  JobOptions o{.model = model, .data = model == "t2v-s" ? "video" : "mixed"};
  auto planner = strategy::MakePlanner(o, "fsdp");
  ASSERT_TRUE(planner.ok()) << planner.status().ToString();
  EXPECT_TRUE((*planner)->static_plan().placement.Validate((*planner)->job().model).ok());
  auto batches = (*planner)->Batches(0, 2);
  ASSERT_TRUE(batches.ok());
  for (const auto& batch : *batches) {
    auto planned = (*planner)->Plan(batch);
    ASSERT_TRUE(planned.ok()) << planned.status().ToString();
    const auto& eval = planned->evaluation;
    EXPECT_GT(eval.iteration_time_s, 0);
    EXPECT_GT(eval.mfu, 0);
    EXPECT_LT(eval.mfu, 1);
    EXPECT_EQ(eval.gpus_used, (*planner)->job().cluster.TotalGpus());
    for (size_t r = 0; r < planned->plan.replicas.size(); ++r) {
      auto compiled = (*planner)->Compile(*planned, static_cast<int>(r));
      if (eval.oom) {
        EXPECT_EQ(compiled.status().code(), StatusCode::kResourceExhausted);
      } else {
        EXPECT_TRUE(compiled.ok()) << compiled.status().ToString();
      }
    }
  }
}

std::string ModelTestName(const ::testing::TestParamInfo<std::string>& param) {
  std::string n = param.param;
  for (char& c : n) {
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return n;
}

INSTANTIATE_TEST_SUITE_P(Models, FsdpOnModel, ::testing::Values("vlm-s", "t2v-s", "tiny-valm"),
                         ModelTestName);

// The deadline fallback of an FSDP job is the FSDP plan itself (StrategyTraits::is_own_fallback), not a 1F1B
// re-plan of the job's pipeline: same replicas, same time, and its world plan compiles.
TEST(Fsdp, FallbackIsTheFsdpPlan) {
  auto planner = strategy::MakePlanner(JobOptions{.model = "tiny-vlm", .data = "mixed"}, "fsdp");
  ASSERT_TRUE(planner.ok()) << planner.status().ToString();
  auto batches = (*planner)->Batches(0, 1);
  ASSERT_TRUE(batches.ok());
  auto planned = (*planner)->Plan(batches->front());
  auto fallback = (*planner)->Fallback(batches->front());
  ASSERT_TRUE(planned.ok()) << planned.status().ToString();
  ASSERT_TRUE(fallback.ok()) << fallback.status().ToString();
  EXPECT_EQ(fallback->plan.replicas.size(), planned->plan.replicas.size());
  EXPECT_DOUBLE_EQ(fallback->evaluation.iteration_time_s, planned->evaluation.iteration_time_s);
  EXPECT_TRUE((*planner)->CompileWorld(*fallback, 0).ok());
}

TEST(Fsdp, IsRegistered) {
  const auto names = StrategyNames();
  EXPECT_NE(std::find(names.begin(), names.end(), "fsdp"), names.end());
  auto s = MakeStrategy("fsdp");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->Name(), "fsdp");
}

}  // namespace
}  // namespace weft::strategy::fsdp
