#include "weft/cost/cost_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <thread>

#include "weft/cost/validation.h"
#include "weft/spec/preset.h"

namespace weft::cost {
namespace {

using ::testing::DoubleNear;

// GPT-style (Megatron paper) module: MHA, 4h plain-GELU MLP, LayerNorm.
spec::ModuleSpec Gpt(int layers, int hidden, int heads, int vocab, bool causal) {
  spec::ModuleSpec m;
  m.name = "llm";
  m.kind = spec::ModuleKind::kLlm;
  m.num_layers = layers;
  m.hidden_size = hidden;
  m.ffn_hidden_size = 4 * hidden;
  m.num_attention_heads = heads;
  m.num_kv_groups = heads;
  m.causal_attention = causal;
  m.vocab_size = vocab;
  return m;
}

spec::ModelSpec OneModule(spec::ModuleSpec m) {
  spec::ModelSpec model;
  model.name = "test";
  model.modules.push_back(std::move(m));
  return model;
}

spec::ModuleParallel Par(int tp, bool sp = false, int cp = 1, int dp = 1) {
  return {.module = "llm", .tp = tp, .pp = 1, .dp = dp, .cp = cp, .sequence_parallel = sp};
}

const Op& FindOp(const std::vector<Op>& ops,
                 const std::string& name,
                 spec::Pass pass = spec::Pass::kForward) {
  auto it = std::find_if(ops.begin(), ops.end(),
                         [&](const Op& o) { return o.name == name && o.pass == pass; });
  EXPECT_NE(it, ops.end()) << name;
  return *it;
}

double Total(const CostTotals& c) {
  return c.forward_flops + c.backward_input_flops + c.backward_weight_flops;
}

TEST(CostModelFlops, MatchesMegatronFormulaForGptIteration) {
  const int l = 24, h = 2048, a = 16, V = 51200;
  const int64_t s = 2048, B = 4;
  const spec::ModelSpec model = OneModule(Gpt(l, h, a, V, /*causal=*/false));
  CostModel cost(ReferenceH100Dgx());
  for (int tp : {1, 2, 4}) {
    auto chunk = cost.Chunk(model, 0, 0, l, TokenShape::Uniform(s, B), Par(tp));
    ASSERT_TRUE(chunk.ok()) << chunk.status().ToString();
    // Narayanan et al. 2021: 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)), summed over TP ranks.
    const double expected = 72.0 * B * s * l * double(h) * h *
                            (1 + double(s) / (6.0 * h) + double(V) / (12.0 * l * h));
    EXPECT_THAT(Total(*chunk) * tp, DoubleNear(expected, expected * 1e-12)) << "tp " << tp;
    EXPECT_THAT(chunk->backward_input_flops + chunk->backward_weight_flops,
                DoubleNear(2 * chunk->forward_flops, 1e-6 * chunk->forward_flops));
  }
}

TEST(CostModelFlops, CausalAttentionCostsHalfOfFull) {
  const int64_t s = 4096;
  CostModel cost(ReferenceH100Dgx());
  auto full = cost.ModuleLayer(Gpt(4, 1024, 8, 1000, false), 1, TokenShape::Uniform(s), Par(1),
                               BackwardMode::kFull);
  auto causal = cost.ModuleLayer(Gpt(4, 1024, 8, 1000, true), 1, TokenShape::Uniform(s), Par(1),
                                 BackwardMode::kFull);
  ASSERT_TRUE(full.ok() && causal.ok());
  // Megatron forward: 24·s·h² + 4·s²·h; causal removes half of the s² term.
  const double h = 1024;
  EXPECT_DOUBLE_EQ(full->forward_flops, 24 * s * h * h + 4.0 * s * s * h);
  EXPECT_DOUBLE_EQ(causal->forward_flops, 24 * s * h * h + 2.0 * s * s * h);
}

TEST(CostModelFlops, PackedSequencesUseSumOfSquaredSegments) {
  CostModel cost(ReferenceH100Dgx());
  const spec::ModuleSpec m = Gpt(4, 1024, 8, 1000, false);
  const std::vector<int64_t> segments = {1000, 3000};
  auto packed = cost.ModuleLayer(m, 1, TokenShape::FromSegments(segments), Par(1),
                                 BackwardMode::kFull);
  ASSERT_TRUE(packed.ok());
  EXPECT_DOUBLE_EQ(packed->forward_flops,
                   24.0 * 4000 * 1024 * 1024 + 4.0 * (1000.0 * 1000 + 3000.0 * 3000) * 1024);
}

// A Qwen2.5-VL-style ViT: 8 layers, windows of 112 px (64 patches of 14 px) except layers 3 and 7.
spec::ModuleSpec WindowedVit() {
  spec::ModuleSpec m = Gpt(8, 1024, 8, 0, false);
  m.name = "vision";
  m.kind = spec::ModuleKind::kVit;
  m.modality = spec::Modality::kImage;
  m.patch_size = 14;
  m.spatial_merge = 2;
  m.resize_rule = spec::ResizeRule::kNative;
  m.attention_window_px = 112;
  m.full_attention_layers = {3, 7};
  return m;
}

TEST(CostModelFlops, WindowedLayersAttendWithinTheirWindows) {
  CostModel cost(ReferenceH100Dgx());
  const spec::ModuleSpec m = WindowedVit();
  ASSERT_TRUE(m.Validate().ok()) << m.Validate().ToString();
  // One 1008 x 700 image: 3600 patches, Σw² = 223488 (data/workload_test.cc).
  TokenShape shape = TokenShape::Uniform(3600);
  shape.window_sum_squared_tokens = 223488;
  auto windowed = cost.ModuleLayer(m, 1, shape, Par(1), BackwardMode::kFull);
  auto full = cost.ModuleLayer(m, 3, shape, Par(1), BackwardMode::kFull);
  ASSERT_TRUE(windowed.ok() && full.ok());
  const double h = 1024, linear = 24.0 * 3600 * h * h;
  EXPECT_DOUBLE_EQ(full->forward_flops, linear + 4.0 * 3600 * 3600 * h);
  EXPECT_DOUBLE_EQ(windowed->forward_flops, linear + 4.0 * 223488 * h);
  // Without the window sums (a shape built from token counts only): full windows of 64.
  auto estimated = cost.ModuleLayer(m, 1, TokenShape::Uniform(3600), Par(1), BackwardMode::kFull);
  ASSERT_TRUE(estimated.ok());
  EXPECT_DOUBLE_EQ(estimated->forward_flops, linear + 4.0 * 3600 * 64 * h);
  // A chunk sums windowed and full layers by kind.
  const spec::ModelSpec model = OneModule(m);
  auto chunk = cost.Chunk(model, 0, 0, 8, shape, Par(1), spec::Recompute::kNone);
  ASSERT_TRUE(chunk.ok()) << chunk.status().ToString();
  CostTotals sum;
  for (int layer = 0; layer < 8; ++layer)
    sum.Accumulate(*cost.Layer(model, 0, layer, shape, Par(1)));
  EXPECT_NEAR(chunk->forward_flops, sum.forward_flops, 1e-6 * sum.forward_flops);
  EXPECT_NEAR(chunk->forward_s, sum.forward_s, 1e-12);
  TokenShape bad = shape;
  bad.window_sum_squared_tokens = 2 * shape.sum_squared_tokens;
  EXPECT_FALSE(cost.ModuleLayer(m, 1, bad, Par(1), BackwardMode::kFull).ok());
}

TEST(CostModelFlops, GqaShrinksQkvProjection) {
  spec::ModuleSpec m = Gpt(4, 4096, 32, 1000, true);
  m.num_kv_groups = 8;
  OpBuildContext ctx{.shape = TokenShape::Uniform(512), .parallel = Par(1)};
  auto ops = BuildLayerOps(m, 1, ctx);
  ASSERT_TRUE(ops.ok());
  const Op& qkv = FindOp(*ops, "qkv_proj");
  EXPECT_DOUBLE_EQ(qkv.gemm_n, 4096 + 2 * 8 * 128);
  EXPECT_DOUBLE_EQ(qkv.flops, 2.0 * 512 * 4096 * (4096 + 2 * 1024));
}

TEST(CostModelBackward, FrozenModulesFollowCornstarchRule) {
  spec::ModelSpec model;
  spec::ModuleSpec vit = Gpt(4, 1024, 8, 1000, false);
  vit.name = "vision";
  vit.kind = spec::ModuleKind::kVit;
  vit.patch_size = 14;
  vit.image_size_px = 336;
  vit.frozen = true;
  spec::ModuleSpec proj;
  proj.name = "projector";
  proj.kind = spec::ModuleKind::kMlpProjector;
  proj.num_layers = 2;
  proj.input_size = 1024;
  proj.ffn_hidden_size = 2048;
  proj.hidden_size = 2048;
  proj.output_size = 2048;
  spec::ModuleSpec llm = Gpt(4, 2048, 16, 1000, true);
  llm.frozen = true;
  model.modules = {vit, proj, llm};
  model.edges = {{"vision", "projector"}, {"projector", "llm"}};
  EXPECT_EQ(*BackwardModeOf(model, 0), BackwardMode::kNone);
  EXPECT_EQ(*BackwardModeOf(model, 1), BackwardMode::kFull);
  EXPECT_EQ(*BackwardModeOf(model, 2), BackwardMode::kInputOnly);
  EXPECT_FALSE(BackwardModeOf(model, 3).ok());

  CostModel cost(ReferenceH100Dgx());
  const TokenShape shape = TokenShape::Uniform(576, 4);
  auto vit_layer = cost.Layer(model, 0, 1, shape, Par(1));
  auto llm_layer = cost.Layer(model, 2, 1, shape, Par(1));
  ASSERT_TRUE(vit_layer.ok() && llm_layer.ok());
  EXPECT_EQ(vit_layer->backward_input_s, 0);
  EXPECT_EQ(vit_layer->backward_weight_s, 0);
  EXPECT_EQ(vit_layer->ActivationBytes(spec::Recompute::kNone), 0);  // nothing to differentiate
  EXPECT_GT(llm_layer->backward_input_s, 0);
  EXPECT_EQ(llm_layer->backward_weight_s, 0);
  // Input-gradient only: GEMMs ≈1× forward, attention 2× forward.
  EXPECT_GT(llm_layer->backward_input_flops, llm_layer->forward_flops);
  EXPECT_LT(llm_layer->backward_input_flops, 1.5 * llm_layer->forward_flops);
  EXPECT_GT(llm_layer->parameter_bytes, 0);
  EXPECT_EQ(llm_layer->gradient_bytes, 0);
  EXPECT_EQ(llm_layer->optimizer_bytes, 0);
}

TEST(CostModelCollectives, TensorParallelUsesAllReduceWithoutSpAndRsAgWithSp) {
  const spec::ModuleSpec m = Gpt(4, 4096, 32, 1000, true);
  auto count = [&](bool sp, spec::Pass pass, CollectiveKind kind) {
    OpBuildContext ctx{.shape = TokenShape::Uniform(2048), .parallel = Par(4, sp)};
    int n = 0;
    // Keep the StatusOr alive: a range-for over `*temporary` would read a destroyed vector.
    const auto ops = BuildLayerOps(m, 1, ctx);
    EXPECT_TRUE(ops.ok());
    for (const Op& op : *ops) {
      if (op.kind == OpKind::kCollective && op.pass == pass && op.collective == kind) {
        EXPECT_DOUBLE_EQ(op.net_bytes, 2.0 * 2048 * 4096);
        EXPECT_EQ(op.group_size, 4);
        ++n;
      }
    }
    return n;
  };
  EXPECT_EQ(count(false, spec::Pass::kForward, CollectiveKind::kAllReduce), 2);
  EXPECT_EQ(count(false, spec::Pass::kBackwardInput, CollectiveKind::kAllReduce), 2);
  EXPECT_EQ(count(true, spec::Pass::kForward, CollectiveKind::kAllReduce), 0);
  EXPECT_EQ(count(true, spec::Pass::kForward, CollectiveKind::kAllGather), 2);
  EXPECT_EQ(count(true, spec::Pass::kForward, CollectiveKind::kReduceScatter), 2);
  EXPECT_EQ(count(true, spec::Pass::kBackwardInput, CollectiveKind::kAllGather), 2);
  EXPECT_EQ(count(true, spec::Pass::kBackwardInput, CollectiveKind::kReduceScatter), 2);
}

TEST(CollectiveLatency, FollowsRingFormula) {
  const spec::LinkSpec link{.bandwidth_bytes_per_s = 100e9, .latency_s = 1e-6};
  CostOptions options;
  options.collective_base_latency_s = 5e-6;
  const double bytes = 1e9;
  EXPECT_DOUBLE_EQ(CollectiveLatency(CollectiveKind::kAllReduce, bytes, 8, link, 0.5, options),
                   2.0 * 7 / 8 * bytes / 50e9 + 14e-6 + 5e-6);
  EXPECT_DOUBLE_EQ(CollectiveLatency(CollectiveKind::kAllGather, bytes, 4, link, 0.5, options),
                   3.0 / 4 * bytes / 50e9 + 3e-6 + 5e-6);
  EXPECT_EQ(CollectiveLatency(CollectiveKind::kAllReduce, bytes, 1, link, 0.5, options), 0);
  EXPECT_DOUBLE_EQ(P2PLatency(bytes, link, 0.5, options), bytes / 50e9 + 1e-6 + 5e-6);
}

TEST(GemmLatency, SmallGemmsRunBelowPeakAndLargeOnesApproachIt) {
  const GemmEfficiencyCurve curve;
  EXPECT_LT(curve.Efficiency(64, 4096, 4096), 0.35);
  EXPECT_GT(curve.Efficiency(16384, 16384, 16384), 0.96);
  EXPECT_LT(curve.Efficiency(512, 4096, 4096), curve.Efficiency(1024, 4096, 4096));
  // A one-token GEMM is bound by reading the weights.
  const spec::ClusterSpec h100 = ReferenceH100Dgx();
  Op op{.name = "x", .kind = OpKind::kGemm, .flops = 2.0 * 4096 * 4096,
        .hbm_bytes = 2.0 * (4096 + 4096.0 * 4096 + 4096), .gemm_m = 1, .gemm_n = 4096,
        .gemm_k = 4096};
  const CostOptions options;
  EXPECT_NEAR(OpLatency(op, h100, options),
              op.hbm_bytes / (0.85 * 3.35e12) + options.kernel_launch_s, 1e-12);
}

// Korthikanti et al. 2022, Table 2 (per layer, s·b tokens, t = TP): the GPT layer stores
// sbh(10 + 24/t + 5as/(ht)) without SP and sbh/t·(34 + 5as/h) with SP; full recompute keeps 2sbh
// (/t with SP). Flash attention drops the 5as/h term.
TEST(ActivationMemory, MatchesKorthikantiFormulas) {
  const double s = 2048, b = 2, h = 4096, a = 32;
  spec::ModuleSpec m = Gpt(8, 4096, 32, 1000, true);
  for (int t : {1, 2, 8}) {
    for (bool sp : {false, true}) {
      OpBuildContext ctx{.shape = TokenShape::Uniform(2048, 2), .parallel = Par(t, sp)};
      auto fa = LayerActivationBytes(m, 3, ctx, /*flash_attention=*/true, /*dropout=*/true);
      auto no_fa = LayerActivationBytes(m, 3, ctx, /*flash_attention=*/false, /*dropout=*/true);
      ASSERT_TRUE(fa.ok() && no_fa.ok());
      const bool shard = sp && t > 1;
      const double base = shard ? s * b * h / t * 34 : s * b * h * (10 + 24.0 / t);
      const double scores = 5 * a * s * s * b / t;
      EXPECT_DOUBLE_EQ(fa->none_bytes, base) << t << sp;
      EXPECT_DOUBLE_EQ(no_fa->none_bytes, base + scores) << t << sp;
      EXPECT_DOUBLE_EQ(fa->full_bytes, 2 * s * b * h / (shard ? t : 1)) << t << sp;
      // Selective drops the attention output (2sbh/t) and the GELU output (8sbh/t) and scores.
      EXPECT_DOUBLE_EQ(no_fa->selective_bytes, base - 10 * s * b * h / t) << t << sp;
    }
  }
}

TEST(ActivationMemory, OffloadKeepsNothingOnGpuAndCostsPcieTime) {
  CostModel cost(ReferenceH100Dgx());
  auto layer = cost.ModuleLayer(Gpt(8, 4096, 32, 1000, true), 3, TokenShape::Uniform(4096),
                                Par(2, true), BackwardMode::kFull);
  ASSERT_TRUE(layer.ok());
  EXPECT_EQ(layer->ActivationBytes(spec::Recompute::kOffload), 0);
  EXPECT_DOUBLE_EQ(layer->offload_transfer_s,
                   layer->ActivationBytes(spec::Recompute::kNone) / 55e9);
  EXPECT_GT(layer->ActivationBytes(spec::Recompute::kNone),
            layer->ActivationBytes(spec::Recompute::kSelective));
  EXPECT_GT(layer->ActivationBytes(spec::Recompute::kSelective),
            layer->ActivationBytes(spec::Recompute::kFull));
  EXPECT_EQ(layer->recompute_s[0], 0);
  EXPECT_GT(layer->recompute_s[2], layer->recompute_s[1]);
  EXPECT_NEAR(layer->recompute_s[2], layer->forward_s, 1e-12);  // middle layer: all of it
}

TEST(StateMemory, Llama2_7bHas6_74BParametersAndMixedPrecisionAdamBytes) {
  const spec::ModuleSpec llama = Llama2_7bModule();
  int64_t total = 0;
  for (int layer = 0; layer < llama.num_layers; ++layer) {
    total += *LayerParametersPerRank(llama, layer, Par(1));
  }
  EXPECT_EQ(total, 6738415616);
  CostModel cost(ReferenceH100Dgx());
  auto layer = cost.ModuleLayer(llama, 5, TokenShape::Uniform(128), Par(1, false, 1, 4),
                                BackwardMode::kFull);
  ASSERT_TRUE(layer.ok());
  EXPECT_EQ(layer->parameters, 202383360);
  EXPECT_DOUBLE_EQ(layer->parameter_bytes, 2.0 * 202383360);
  EXPECT_DOUBLE_EQ(layer->gradient_bytes, 4.0 * 202383360);
  EXPECT_DOUBLE_EQ(layer->optimizer_bytes, 12.0 * 202383360 / 4);  // ZeRO-1 over DP 4
}

TEST(CostModelChunk, IsTheSumOfItsLayersAndHitsTheCache) {
  const spec::ModelSpec model = OneModule(Gpt(6, 1024, 8, 5000, true));
  CostModel cost(ReferenceH100Dgx());
  const TokenShape shape = TokenShape::Uniform(1024, 2);
  auto chunk = cost.Chunk(model, 0, 0, 6, shape, Par(2, true), spec::Recompute::kFull);
  ASSERT_TRUE(chunk.ok()) << chunk.status().ToString();
  EXPECT_EQ(cost.cache_size(), 3);  // first, middle, last
  CostTotals sum;
  for (int layer = 0; layer < 6; ++layer) sum.Accumulate(*cost.Layer(model, 0, layer, shape, Par(2, true)));
  EXPECT_NEAR(chunk->forward_s, sum.forward_s, 1e-12);
  EXPECT_NEAR(chunk->BackwardS(), sum.BackwardS(spec::Recompute::kFull), 1e-12);
  EXPECT_DOUBLE_EQ(chunk->ActivationBytes(), sum.ActivationBytes(spec::Recompute::kFull));
  EXPECT_EQ(chunk->parameters, sum.parameters);
  EXPECT_EQ(cost.cache_hits(), 0);  // Layer computes its op list afresh
  auto again = cost.Chunk(model, 0, 0, 6, shape, Par(2, true), spec::Recompute::kFull);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(cost.cache_hits(), 3);
  EXPECT_EQ(again->forward_s, chunk->forward_s);
  EXPECT_EQ(again->ActivationBytes(), chunk->ActivationBytes());
  EXPECT_DOUBLE_EQ(chunk->output_activation_bytes, 2.0 * 2048 * 1024 / 2);
  EXPECT_FALSE(cost.Chunk(model, 0, 4, 3, shape, Par(2)).ok());
}

TEST(CostModelChunk, ConcurrentCallsAgree) {
  const spec::ModelSpec model = OneModule(Gpt(12, 2048, 16, 32000, true));
  CostModel cost(ReferenceH100Dgx());
  std::vector<double> results(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      for (int rep = 0; rep < 20; ++rep) {
        auto c = cost.Chunk(model, 0, 0, 12, TokenShape::Uniform(512 * (1 + rep % 4)), Par(2));
        if (rep == 19) results[i] = c->forward_s;
      }
    });
  }
  for (auto& t : threads) t.join();
  for (double r : results) EXPECT_EQ(r, results[0]);
}

TEST(CostModelMeasured, TableReplacesForwardAndScalesBackward) {
  const spec::ModuleSpec m = Gpt(4, 1024, 8, 1000, true);
  MeasuredOpTable table;
  table.Add("mlp_up", 1, 1000, 1e-3);
  table.Add("mlp_up", 1, 3000, 3e-3);
  CostModel analytical(ReferenceH100Dgx());
  CostModel measured(ReferenceH100Dgx(), {}, table);
  auto a = analytical.ModuleLayer(m, 1, TokenShape::Uniform(2000), Par(1), BackwardMode::kFull);
  auto b = measured.ModuleLayer(m, 1, TokenShape::Uniform(2000), Par(1), BackwardMode::kFull);
  ASSERT_TRUE(a.ok() && b.ok());
  double a_fwd = 0, a_bwd = 0, b_fwd = 0, b_bwd = 0;
  for (const Op& op : a->ops) {
    if (op.name != "mlp_up") continue;
    (op.pass == spec::Pass::kForward ? a_fwd : a_bwd) += op.latency_s;
  }
  for (const Op& op : b->ops) {
    if (op.name != "mlp_up") continue;
    EXPECT_TRUE(op.measured);
    (op.pass == spec::Pass::kForward ? b_fwd : b_bwd) += op.latency_s;
  }
  EXPECT_DOUBLE_EQ(b_fwd, 2e-3);
  EXPECT_NEAR(b_bwd, a_bwd * 2e-3 / a_fwd, 1e-15);
}

TEST(CostModelModules, DitHasAdaLnAndCrossAttentionProjectorHasTpLinears) {
  spec::ModuleSpec dit = Gpt(4, 1152, 16, 0, false);
  dit.kind = spec::ModuleKind::kDit;
  dit.name = "dit";
  dit.patch_size = 2;
  dit.in_channels = 16;
  dit.text_condition_hidden = 4096;
  OpBuildContext ctx{.shape = TokenShape::Uniform(4096, 2), .parallel = Par(2)};
  ctx.shape.context_tokens = 2 * 120;
  auto ops = BuildLayerOps(dit, 0, ctx);
  ASSERT_TRUE(ops.ok()) << ops.status().ToString();
  auto has = [&](const std::string& name) {
    return std::any_of(ops->begin(), ops->end(), [&](const Op& o) { return o.name == name; });
  };
  EXPECT_TRUE(has("adaln_modulation"));
  EXPECT_TRUE(has("cross_attention"));
  EXPECT_TRUE(has("cross_kv_proj"));
  EXPECT_TRUE(has("patch_embed"));
  EXPECT_FALSE(has("rope"));

  spec::ModuleSpec proj;
  proj.name = "projector";
  proj.kind = spec::ModuleKind::kMlpProjector;
  proj.num_layers = 2;
  proj.input_size = 4096;
  proj.ffn_hidden_size = 3584;
  proj.hidden_size = 3584;
  proj.output_size = 3584;
  proj.linear_bias = true;
  OpBuildContext pctx{.shape = TokenShape::Uniform(256, 4), .parallel = Par(2)};
  auto first = BuildLayerOps(proj, 0, pctx);
  auto last = BuildLayerOps(proj, 1, pctx);
  ASSERT_TRUE(first.ok() && last.ok());
  EXPECT_DOUBLE_EQ(FindOp(*first, "proj_linear").gemm_n, 3584 / 2);
  EXPECT_DOUBLE_EQ(FindOp(*last, "proj_linear").gemm_k, 3584 / 2);
  EXPECT_EQ(FindOp(*last, "tp_proj_exit").collective, CollectiveKind::kAllReduce);
  EXPECT_EQ(*LayerParametersPerRank(proj, 0, Par(2)), 4096LL * 1792 + 1792);
}

TEST(CostModelErrors, RejectBadShapesAndLayers) {
  CostModel cost(ReferenceH100Dgx());
  const spec::ModuleSpec m = Gpt(4, 1024, 8, 1000, true);
  TokenShape bad = TokenShape::Uniform(100);
  bad.sum_squared_tokens = 1e9;
  auto r = cost.ModuleLayer(m, 1, bad, Par(1), BackwardMode::kFull);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("shape.sum_squared_tokens"));
  EXPECT_FALSE(cost.ModuleLayer(m, 4, TokenShape::Uniform(8), Par(1), BackwardMode::kFull).ok());
  auto tp = cost.ModuleLayer(m, 1, TokenShape::Uniform(8), Par(3), BackwardMode::kFull);
  ASSERT_FALSE(tp.ok());
  EXPECT_THAT(tp.status().message(), ::testing::HasSubstr("tp = 3; must divide"));
}

}  // namespace
}  // namespace weft::cost

namespace weft::cost {
namespace {

// Cross-check with spec's own parameter count on every built-in model preset (tp = 1).
TEST(StateMemory, LayerParametersAddUpToSpecParameterCountOnPresets) {
  for (const spec::PresetInfo& info : spec::ListPresets()) {
    if (info.kind != spec::PresetKind::kModel) continue;
    auto preset = spec::LoadModel(info.name);
    ASSERT_TRUE(preset.ok()) << preset.status().ToString();
    for (const spec::ModuleSpec& m : preset->model.modules) {
      int64_t ours = 0;
      for (int layer = 0; layer < m.num_layers; ++layer) {
        auto p = LayerParametersPerRank(m, layer, {.module = m.name});
        ASSERT_TRUE(p.ok()) << info.name << "/" << m.name << ": " << p.status().ToString();
        ours += *p;
      }
      const double theirs = static_cast<double>(m.ParameterCount());
      EXPECT_NEAR(ours / theirs, 1.0, 0.01) << info.name << "/" << m.name << " ours " << ours
                                            << " spec " << theirs;
    }
  }
}

}  // namespace
}  // namespace weft::cost
