#include <gtest/gtest.h>

#include <fstream>

#include "planner_test_util.h"

#include <map>
#include <set>

#include "weft/plan/compiler.h"
#include "weft/plan/validator.h"
#include "weft/sim/simulator.h"
#include "weft/strategy/baselines.h"
#include "weft/strategy/common.h"
#include "weft/strategy/compare.h"
#include "weft/planning/graph_builder.h"
#include "weft/strategy/module_sets.h"

namespace weft::strategy {
namespace {

std::unique_ptr<JobSetup> MakeSetup(const std::string& model, const std::string& data = "mixed",
                                int microbatches = 8) {
  JobOptions o;
  o.model = model;
  o.data = data;
  o.num_microbatches = microbatches;
  auto setup = MakeJobSetup(o);
  EXPECT_TRUE(setup.ok()) << setup.status().ToString();
  return setup.ok() ? std::move(*setup) : nullptr;
}

TEST(SplitBatch, DealsSequencesToReplicasThenMicrobatches) {
  spec::Batch batch;
  batch.samples.resize(10);
  auto split = SplitBatch(batch, 2, 3);
  ASSERT_TRUE(split.ok());
  ASSERT_EQ(split->replicas.size(), 2u);
  EXPECT_EQ(split->microbatches_used, 3);
  std::multiset<int> seen;
  for (const auto& replica : split->replicas) {
    ASSERT_EQ(replica.size(), 3u);
    for (const auto& mb : replica) {
      EXPECT_FALSE(mb.empty());
      seen.insert(mb.begin(), mb.end());
    }
  }
  EXPECT_EQ(seen.size(), 10u);
  EXPECT_EQ(std::set<int>(seen.begin(), seen.end()).size(), 10u);
}

TEST(SplitBatch, UsesFewerMicrobatchesAndSaysSo) {
  spec::Batch batch;
  batch.samples.resize(4);
  auto split = SplitBatch(batch, 2, 8);
  ASSERT_TRUE(split.ok());
  EXPECT_EQ(split->microbatches_used, 2);
  EXPECT_NE(split->notes.find("asked 8 microbatches, used 2"), std::string::npos);
  EXPECT_EQ(SplitBatch(batch, 5, 1).status().code(), StatusCode::kFailedPrecondition);
}

TEST(ChunksFromPartition, PartsSpanningModulesShareTheSlot) {
  std::vector<LayerUnit> units = {{0, 0, 1}, {0, 1, 1}, {1, 0, 2}, {2, 0, 1}, {2, 1, 1}};
  auto chunks = ChunksFromPartition(units, {0, 1, 3}, 3);
  ASSERT_EQ(chunks.size(), 4u);
  EXPECT_EQ(chunks[0].group, 0);
  EXPECT_EQ(chunks[1].module, 0);
  EXPECT_EQ(chunks[1].group, 1);
  EXPECT_EQ(chunks[2].module, 1);
  EXPECT_EQ(chunks[2].group, 1);
  EXPECT_EQ(chunks[2].num_layers, 2);
  EXPECT_EQ(chunks[3].group, 2);
  EXPECT_EQ(chunks[3].num_layers, 2);
  for (const auto& c : chunks) EXPECT_EQ(c.chunk, 0);
  // Interleaved: 4 parts over 2 groups -> slots 0 and 1.
  auto v = ChunksFromPartition(units, {0, 1, 3, 4}, 2);
  EXPECT_EQ(v.back().group, 1);
  EXPECT_EQ(v.back().chunk, 1);
}

TEST(SplitEncoderSide, VisionAndAudioAreEncodersOfTheLlm) {
  auto setup = MakeSetup("tiny-valm");
  ASSERT_NE(setup, nullptr);
  auto sides = SplitEncoderSide(setup->job.model);
  ASSERT_TRUE(sides.ok());
  EXPECT_GE(sides->encoders.size(), 2u);
  ASSERT_EQ(sides->backbone.size(), 1u);
  EXPECT_EQ(setup->job.model.modules[sides->backbone[0]].kind, spec::ModuleKind::kLlm);
}

// Every baseline on every kind of model: plans build, simulate, never beat the lower bound, and
// compile to execution plans that validate.
class BaselineOnModel : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(BaselineOnModel, PlansSimulateAndValidate) {
  const auto& [name, model] = GetParam();
  auto setup = MakeSetup(model);
  ASSERT_NE(setup, nullptr);
  auto strategy = MakeStrategy(name);
  ASSERT_TRUE(strategy.ok());
  auto fixed = (*strategy)->Prepare(setup->job);
  if (!fixed.ok()) {
    // Only structural refusals are acceptable (e.g. optimus on a model without encoders).
    EXPECT_EQ(fixed.status().code(), StatusCode::kFailedPrecondition) << fixed.status().ToString();
    GTEST_SKIP() << fixed.status().message();
  }
  EXPECT_TRUE(fixed->placement.Validate(setup->job.model).ok());
  auto batches = MakeIterationBatches(*setup, 0, 2);
  ASSERT_TRUE(batches.ok()) << batches.status().ToString();
  for (const auto& batch : *batches) {
    // With the memory policy every user applies (recompute when it does not fit).
    auto planned = PlanThroughPlanner(**strategy, *setup, *fixed, batch, PlanBudget{});
    ASSERT_TRUE(planned.ok()) << planned.status().ToString();
    const IterationPlan* plan = &planned->plan;
    const IterationEvaluation* eval = &planned->evaluation;
    EXPECT_GT(eval->iteration_time_s, 0);
    EXPECT_GE(eval->iteration_time_s, eval->lower_bound_s * (1 - 1e-9));
    EXPECT_GT(eval->mfu, 0);
    EXPECT_LT(eval->mfu, 1);
    for (size_t r = 0; r < plan->replicas.size(); ++r) {
      const auto& replica = plan->replicas[r];
      auto compiled = plan::CompilePlan(replica.graph, replica.schedule, eval->timelines[r],
                                        {.model = model, .strategy = name});
      ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
      // The plan's memory check must agree with the simulator's OOM verdict.
      auto valid = plan::ValidatePlan(*compiled);
      if (eval->oom) {
        EXPECT_EQ(valid.status().code(), StatusCode::kResourceExhausted);
        EXPECT_TRUE(plan::ValidatePlan(*compiled, {.check_memory = false}).ok());
      } else {
        EXPECT_TRUE(valid.ok()) << valid.status().ToString();
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllBaselines, BaselineOnModel,
    ::testing::Combine(::testing::Values("megatron-1f1b", "megatron-vpp", "megatron-mimo", "gpipe", "zb-h1",
                                         "optimus", "colocated", "replicated", "nnscaler"),
                       ::testing::Values("vlm-s", "t2v-s", "tiny-valm")),
    [](const auto& info) {
      std::string n = std::get<0>(info.param) + "_" + std::get<1>(info.param);
      for (char& c : n) if (!isalnum(static_cast<unsigned char>(c))) c = '_';
      return n;
    });

TEST(BuildStageGraph, VariantsEqualOneBuildPerRecomputeLevel) {
  // t2v: cross-attention context; zb-h1-like split backward with W stages; sub-microbatches.
  for (const std::string model_name : {"vlm-s", "t2v-s"}) {
    auto setup = MakeSetup(model_name, model_name == "vlm-s" ? "mixed" : "video");
    ASSERT_NE(setup, nullptr);
    const Job& job = setup->job;
    auto strategy = MakeStrategy("megatron-1f1b");
    auto fixed = (*strategy)->Prepare(job);
    ASSERT_TRUE(fixed.ok()) << fixed.status().ToString();
    auto batches = MakeIterationBatches(*setup, 0, 1);
    ASSERT_TRUE(batches.ok());
    auto split = SplitBatch(batches->front(), job.DataParallelSize(), job.parallel.num_microbatches);
    ASSERT_TRUE(split.ok());
    const int n = static_cast<int>(job.model.modules.size());
    std::vector<std::vector<spec::Recompute>> levels;
    for (auto level : spec::kAllRecompute) levels.emplace_back(n, level);
    levels.push_back(std::vector<spec::Recompute>(n, spec::Recompute::kNone));
    levels.back()[0] = spec::Recompute::kFull;  // per-module levels too
    for (bool split_backward : {false, true}) {
      GraphBuildOptions options;
      options.sub_microbatch_size.assign(n, 2);
      options.split_backward = split_backward;
      auto variants = BuildStageGraphVariants(job.model, fixed->placement, batches->front(),
                                              split->replicas[0], *job.cost_model, job.workload,
                                              options, levels);
      ASSERT_TRUE(variants.ok()) << variants.status().ToString();
      ASSERT_EQ(variants->size(), levels.size());
      for (size_t v = 0; v < levels.size(); ++v) {
        options.recompute = levels[v];
        auto direct = BuildStageGraph(job.model, fixed->placement, batches->front(),
                                      split->replicas[0], *job.cost_model, job.workload, options);
        ASSERT_TRUE(direct.ok());
        const auto& a = (*variants)[v];
        ASSERT_EQ(a.num_stages(), direct->num_stages());
        ASSERT_EQ(a.num_edges(), direct->num_edges());
        ASSERT_EQ(a.num_sample_sets(), direct->num_sample_sets());
        for (int s = 0; s < a.num_stages(); ++s) {
          const auto &x = a.stage(s), &y = direct->stage(s);
          EXPECT_EQ(x.latency_s, y.latency_s) << model_name << " variant " << v << " stage " << s;
          EXPECT_EQ(x.flops, y.flops);
          EXPECT_EQ(x.activation_alloc_bytes, y.activation_alloc_bytes);
          EXPECT_EQ(x.activation_free_bytes, y.activation_free_bytes);
          EXPECT_EQ(x.recompute, y.recompute);
          EXPECT_EQ(x.pass, y.pass);
          EXPECT_EQ(x.group, y.group);
        }
        for (int e = 0; e < a.num_edges(); ++e) {
          EXPECT_EQ(a.edge(e).from, direct->edge(e).from);
          EXPECT_EQ(a.edge(e).to, direct->edge(e).to);
          EXPECT_EQ(a.edge(e).bytes, direct->edge(e).bytes);
        }
      }
    }
  }
}

TEST(BuildStageGraph, FanInFeedsTheLlmFromEveryEncoder) {
  auto setup = MakeSetup("tiny-valm");
  ASSERT_NE(setup, nullptr);
  auto strategy = MakeStrategy("megatron-1f1b");
  auto fixed = (*strategy)->Prepare(setup->job);
  ASSERT_TRUE(fixed.ok()) << fixed.status().ToString();
  // Every sample has an image and an audio clip; one sequence per sample.
  spec::Batch batch;
  for (int i = 0; i < 8; ++i) {
    spec::Sample sample;
    sample.id = i;
    sample.text_tokens = 20;
    sample.images.push_back({.width_px = 64, .height_px = 64});
    sample.audios.push_back({.duration_s = 1.0});
    batch.samples.push_back(sample);
  }
  auto plan = (*strategy)->PlanBatch(setup->job, *fixed, batch);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const auto& g = plan->replicas[0].graph;
  // Some LLM forward stage has predecessors from two different encoder-side modules.
  const int llm = *setup->job.model.FindModule("llm");
  bool fan_in = false;
  for (int s = 0; s < g.num_stages(); ++s) {
    if (g.stage(s).module != llm || g.stage(s).pass != spec::Pass::kForward) continue;
    std::set<int> from;
    for (auto e : g.in_edges(s)) from.insert(g.stage(g.edge(e).from).module);
    from.erase(llm);
    if (from.size() >= 2) fan_in = true;
  }
  EXPECT_TRUE(fan_in);
}

TEST(BuildStageGraph, SubMicrobatchEdgesCarryExactlyTheRoutedTokens) {
  auto setup = MakeSetup("tiny-valm");
  ASSERT_NE(setup, nullptr);
  auto strategy = MakeStrategy("megatron-1f1b");
  auto fixed = (*strategy)->Prepare(setup->job);
  ASSERT_TRUE(fixed.ok()) << fixed.status().ToString();
  const auto& model = setup->job.model;
  // 4 samples in one microbatch: sample i has i + 1 images; one sequence per sample.
  spec::Batch batch;
  for (int i = 0; i < 4; ++i) {
    spec::Sample sample;
    sample.id = i;
    sample.text_tokens = 10;
    for (int k = 0; k <= i; ++k) sample.images.push_back({.width_px = 56, .height_px = 56});
    batch.samples.push_back(sample);
  }
  const int vision = *model.FindModule("vision");
  const int projector = *model.FindModule("vision_projector");
  const int llm = *model.FindModule("llm");
  GraphBuildOptions options;
  options.sub_microbatch_size.assign(model.modules.size(), 0);
  options.sub_microbatch_size[vision] = 3;     // 10 images -> 4 subs: 3, 3, 2, 2 images
  options.sub_microbatch_size[projector] = 4;  // 3 subs: 4, 3, 3 images
  options.sub_microbatch_size[llm] = 2;        // 2 subs: samples {0, 1}, {2, 3}
  auto g = BuildStageGraph(model, fixed->placement, batch, {{0, 1, 2, 3}},
                           *setup->job.cost_model, setup->job.workload, options);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  // Routed edges: every producer token reaches exactly one consumer sub-microbatch, so the
  // bytes out of a module's last chunk add up to its whole output, and a ViT sub feeds only the
  // projector subs that hold its images.
  std::map<std::pair<int, int>, std::set<int>> feeds;  // (module, sub) -> consumer subs
  std::map<int, int64_t> sent_bytes;                   // producer module -> bytes to consumers
  for (int e = 0; e < g->num_edges(); ++e) {
    const auto& from = g->stage(g->edge(e).from);
    const auto& to = g->stage(g->edge(e).to);
    if (from.pass != spec::Pass::kForward || from.module == to.module) continue;
    feeds[{from.module, from.sub_microbatch}].insert(to.sub_microbatch);
    sent_bytes[from.module] += g->edge(e).bytes;
  }
  // Images 0-2 (vision sub 0) -> projector sub 0; images 3-5 -> projector subs 0 and 1; images
  // 6-7 -> sub 1; images 8-9 -> sub 2 (projector subs: images 0-3, 4-6, 7-9).
  EXPECT_EQ(feeds[std::make_pair(vision, 0)], (std::set<int>{0}));
  EXPECT_EQ(feeds[std::make_pair(vision, 1)], (std::set<int>{0, 1}));
  EXPECT_EQ(feeds[std::make_pair(vision, 2)], (std::set<int>{1, 2}));
  EXPECT_EQ(feeds[std::make_pair(vision, 3)], (std::set<int>{2}));
  // Projector sub 0 (images of samples 0-2) -> LLM subs 0 and 1; sub 2 (sample 3) -> LLM sub 1.
  EXPECT_EQ(feeds[std::make_pair(projector, 0)], (std::set<int>{0, 1}));
  EXPECT_EQ(feeds[std::make_pair(projector, 2)], (std::set<int>{1}));
  // Bytes: 2 bytes a value, width = hidden size (ViT) / output size (projector).
  auto tokens = [&](int module) {
    auto w = data::DeriveModuleWorkload(model, module, batch, std::vector<int>{0, 1, 2, 3},
                                        setup->job.workload);
    EXPECT_TRUE(w.ok());
    return w.ok() ? w->TotalTokens() : 0;
  };
  EXPECT_EQ(sent_bytes[vision], 2 * tokens(vision) * model.modules[vision].hidden_size);
  EXPECT_EQ(sent_bytes[projector], 2 * tokens(projector) * model.modules[projector].output_size);
  EXPECT_GT(tokens(vision), tokens(projector));
}

TEST(Strategies, FrozenEncodersWithoutTrainableUpstreamHaveNoBackward) {
  // cs-vlm-s: encoder and LLM frozen, projector trainable -> no backward for the encoder.
  auto setup = MakeSetup("cs-vlm-s");
  ASSERT_NE(setup, nullptr);
  auto strategy = MakeStrategy("megatron-1f1b");
  auto fixed = (*strategy)->Prepare(setup->job);
  ASSERT_TRUE(fixed.ok()) << fixed.status().ToString();
  auto batches = MakeIterationBatches(*setup, 0, 1);
  ASSERT_TRUE(batches.ok());
  auto plan = (*strategy)->PlanBatch(setup->job, *fixed, batches->front());
  ASSERT_TRUE(plan.ok());
  const auto& model = setup->job.model;
  for (const auto& stage : plan->replicas[0].graph.stages()) {
    const auto& m = model.modules[stage.module];
    if (m.IsEncoder() && m.frozen) EXPECT_EQ(stage.pass, spec::Pass::kForward);
  }
}

TEST(MakeJobSetup, BadInputNamesTheFlag) {
  JobOptions o;
  o.model = "no-such-model";
  EXPECT_EQ(MakeJobSetup(o).status().code(), StatusCode::kNotFound);
  o.model = "vlm-s";
  o.data = "no-such-profile";
  auto s = MakeJobSetup(o);
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
  EXPECT_NE(s.status().message().find("--data"), std::string::npos);
  o.data = "mixed";
  o.gpus = 8;  // vlm-s needs tp·pp = 16 GPUs per replica
  EXPECT_EQ(MakeJobSetup(o).status().code(), StatusCode::kFailedPrecondition);
}

TEST(MakeJobSetup, TooFewGpusSaysWhereBothNumbersComeFrom) {
  // vlm-l's setup is 64 GPUs at tp 8 · pp 8 (issue 34 item 18: the 16 is --gpus, the 64 the
  // model's setup.parallel).
  JobOptions o;
  o.model = "vlm-l";
  o.gpus = 16;
  auto s = MakeJobSetup(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.status().message(),
            "--gpus = 16; module 'llm' needs tp·pp·cp = 8·8·1 = 64 GPUs (tp from setup.parallel, "
            "pp from setup.parallel, cp from setup.parallel; lower them with --tp / --pp / --cp, "
            "or raise --gpus)");
  o.pipeline_size = 4;
  o.gpus = 16;
  s = MakeJobSetup(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message().rfind("--gpus = 16; module 'llm' needs tp·pp·cp = 8·4·1 = 32 "
                                       "GPUs (tp from setup.parallel, pp from --pp,",
                                       0),
            0u)
      << s.status().message();
}

TEST(MakeJobSetup, AnUnknownDataProfileInTheModelSetupIsAnError) {
  const std::string path = ::testing::TempDir() + "/weft_no_such_profile.yaml";
  {
    std::ofstream out(path);
    out << "modules:\n  - use: tiny-vlm\n    module: llm\n"
           "setup:\n  cluster: a100\n  gpus: 1\n  data_profile: no-such-profile\n";
  }
  JobOptions o;
  o.model = path;
  auto s = MakeJobSetup(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
  EXPECT_NE(s.status().message().find("setup.data_profile = \"no-such-profile\"; neither a file "
                                      "nor a profile"),
            std::string::npos)
      << s.status().message();
}

}  // namespace
}  // namespace weft::strategy

namespace weft::strategy {
namespace {

TEST(Megatron, TextOnlyBatchKeepsThePipelineStructureForInterleaving) {
  // A batch without images: the ViT chunks get zero-time pass-through stages, so the interleaved
  // rule still sees every rank (regression: rise-and-fall iteration 19 deadlocked).
  auto setup = MakeSetup("vlm-s");
  ASSERT_NE(setup, nullptr);
  auto strategy = MakeStrategy("megatron-vpp");
  auto fixed = (*strategy)->Prepare(setup->job);
  ASSERT_TRUE(fixed.ok());
  spec::Batch batch;
  for (int i = 0; i < 8; ++i) batch.samples.push_back({.id = i, .text_tokens = 4096});
  auto planned = PlanThroughPlanner(**strategy, *setup, *fixed, batch, PlanBudget{});
  ASSERT_TRUE(planned.ok()) << planned.status().ToString();
  const auto& g = planned->plan.replicas[0].graph;
  const int vision = *setup->job.model.FindModule("vision");
  int vision_stages = 0;
  for (const auto& s : g.stages()) {
    if (s.module != vision) continue;
    ++vision_stages;
    EXPECT_EQ(s.latency_s, 0);
    EXPECT_EQ(s.activation_alloc_bytes, 0);
  }
  EXPECT_GT(vision_stages, 0);
  EXPECT_GT(planned->evaluation.iteration_time_s, 0);
}

// A strategy-name typo gets the nearest registered name (issue 34 item 18).
TEST(Registry, UnknownStrategySuggestsTheNearestName) {
  auto s = MakeStrategy("dflp");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
  EXPECT_NE(s.status().message().find("did you mean 'dflop'?"), std::string::npos)
      << s.status().message();
  EXPECT_EQ(MakeStrategy("zzzzzzzz").status().message().find("did you mean"), std::string::npos);
}

}  // namespace
}  // namespace weft::strategy
