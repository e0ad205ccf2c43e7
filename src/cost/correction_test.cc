#include "weft/cost/correction.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "weft/cost/cost_model.h"
#include "weft/cost/validation.h"

namespace weft::cost {
namespace {

using ::testing::HasSubstr;

spec::ModuleSpec Gpt(std::string name, int layers, int hidden, int heads, int vocab) {
  spec::ModuleSpec m;
  m.name = std::move(name);
  m.kind = spec::ModuleKind::kLlm;
  m.num_layers = layers;
  m.hidden_size = hidden;
  m.ffn_hidden_size = 4 * hidden;
  m.num_attention_heads = heads;
  m.num_kv_groups = heads;
  m.causal_attention = true;
  m.vocab_size = vocab;
  return m;
}

// Two trainable modules (both with forward, backward-input and backward-weight).
spec::ModelSpec TwoModules() {
  spec::ModelSpec model;
  model.name = "two";
  model.modules.push_back(Gpt("enc", 4, 1024, 8, 1000));
  model.modules.push_back(Gpt("llm", 6, 2048, 16, 32000));
  return model;
}

spec::ModuleParallel Par(int tp) {
  return {.module = "llm", .tp = tp, .pp = 1, .dp = 1, .cp = 1, .sequence_parallel = false};
}

CorrectionKey Key(int module, spec::Pass pass, const TokenShape& shape) {
  return {.module = module, .pass = pass, .bucket = ShapeBucketOf(shape)};
}

std::shared_ptr<const CostCorrection> MakeOrDie(std::vector<CorrectionEntry> entries) {
  auto c = CostCorrection::Make(std::move(entries));
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : nullptr;
}

// Every field of the totals except the four times, which the correction scales.
void ExpectSameUntimedFields(const CostTotals& a, const CostTotals& b) {
  EXPECT_EQ(a.forward_flops, b.forward_flops);
  EXPECT_EQ(a.backward_input_flops, b.backward_input_flops);
  EXPECT_EQ(a.backward_weight_flops, b.backward_weight_flops);
  EXPECT_EQ(a.activation_bytes, b.activation_bytes);
  EXPECT_EQ(a.offload_transfer_s, b.offload_transfer_s);
  EXPECT_EQ(a.parameters, b.parameters);
  EXPECT_EQ(a.parameter_bytes, b.parameter_bytes);
  EXPECT_EQ(a.gradient_bytes, b.gradient_bytes);
  EXPECT_EQ(a.optimizer_bytes, b.optimizer_bytes);
}

void ExpectScaled(const ChunkCost& corrected, const ChunkCost& base, const PassFactors& f) {
  ExpectSameUntimedFields(corrected, base);
  EXPECT_EQ(corrected.output_activation_bytes, base.output_activation_bytes);
  EXPECT_EQ(corrected.forward_s, base.forward_s * f.forward);
  EXPECT_EQ(corrected.backward_input_s, base.backward_input_s * f.backward_input);
  EXPECT_EQ(corrected.backward_weight_s, base.backward_weight_s * f.backward_weight);
  for (int r = 0; r < spec::kNumRecompute; ++r) {
    EXPECT_EQ(corrected.recompute_s[r], base.recompute_s[r] * f.forward) << r;
  }
}

// ---------------------------------------------------------------------------------------------
// Shape buckets

TEST(ShapeBucket, TokenBucketsAreQuarterOctaves) {
  EXPECT_EQ(ShapeBucketOf(TokenShape::Uniform(1)).tokens, 0);
  EXPECT_EQ(ShapeBucketOf(TokenShape::Uniform(2)).tokens, 4);
  EXPECT_EQ(ShapeBucketOf(TokenShape::Uniform(1023)).tokens, 39);
  EXPECT_EQ(ShapeBucketOf(TokenShape::Uniform(1024)).tokens, 40);
  // 1024 · 2^(1/4) = 1217.7: the next bucket starts at 1218.
  EXPECT_EQ(ShapeBucketOf(TokenShape::Uniform(1217)).tokens, 40);
  EXPECT_EQ(ShapeBucketOf(TokenShape::Uniform(1218)).tokens, 41);
  // The same as the real-number formula, and as the double one, over a wide range.
  for (int64_t tokens = 1; tokens <= (int64_t{1} << 40); tokens += 1 + tokens / 1000) {
    ASSERT_EQ(ShapeBucketOf(TokenShape::Uniform(tokens)).tokens,
              static_cast<int>(std::floor(4 * std::log2(static_cast<double>(tokens)))))
        << tokens;
  }
  EXPECT_EQ(ShapeBucketOf(TokenShape::Uniform(int64_t{1} << 62)).tokens, 248);
  // Every token count lies in [lower(b), lower(b + 1)) of its bucket.
  for (int64_t tokens = 1; tokens <= 200000; tokens += 1 + tokens / 64) {
    const int b = ShapeBucketOf(TokenShape::Uniform(tokens)).tokens;
    EXPECT_LE(TokenBucketLowerTokens(b), static_cast<double>(tokens)) << tokens;
    EXPECT_LT(static_cast<double>(tokens), TokenBucketLowerTokens(b + 1)) << tokens;
  }
}

TEST(ShapeBucket, MeanSegmentSplitsPackedSequencesOfOneLength) {
  const std::array<int64_t, 2> long_docs = {4096, 4096};
  const std::array<int64_t, 4> short_docs = {2048, 2048, 2048, 2048};
  const ShapeBucket a = ShapeBucketOf(TokenShape::FromSegments(long_docs));
  const ShapeBucket b = ShapeBucketOf(TokenShape::FromSegments(short_docs));
  EXPECT_EQ(a.tokens, b.tokens);  // 8192 tokens each
  EXPECT_EQ(a.mean_segment, 24);  // floor(2 · log2 4096)
  EXPECT_EQ(b.mean_segment, 22);  // floor(2 · log2 2048)
  // Instances do not enter: 2 images of 512 tokens = one packed pair of 512-token segments.
  const std::array<int64_t, 2> pair = {512, 512};
  EXPECT_EQ(ShapeBucketOf(TokenShape::Uniform(512, 2)),
            ShapeBucketOf(TokenShape::FromSegments(pair)));
  for (int64_t len = 1; len <= 100000; len += 1 + len / 100) {
    const std::array<int64_t, 3> docs = {len, 2 * len + 1, 3};
    const TokenShape shape = TokenShape::FromSegments(docs);
    EXPECT_EQ(ShapeBucketOf(shape).mean_segment,
              static_cast<int>(std::floor(2 * std::log2(shape.MeanSegmentTokens()))))
        << len;
  }
  // Empty shapes have a bucket of their own.
  EXPECT_EQ(ShapeBucketOf(TokenShape{}), (ShapeBucket{.tokens = -1, .mean_segment = -1}));
}

// ---------------------------------------------------------------------------------------------
// CostCorrection

TEST(CostCorrection, EmptyHasFactorOneAndVersionZero) {
  const CostCorrection empty;
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(empty.version(), 0u);
  EXPECT_EQ(empty.generation(), 0u);
  EXPECT_EQ(empty.Factor(3, spec::Pass::kBackwardWeight, TokenShape::Uniform(777)), 1.0);
  const PassFactors f = empty.Factors(0, TokenShape::Uniform(1));
  EXPECT_EQ(f.forward, 1.0);
  EXPECT_EQ(f.backward_input, 1.0);
  EXPECT_EQ(f.backward_weight, 1.0);
  EXPECT_THAT(empty.BriefReport(), HasSubstr("empty"));
}

TEST(CostCorrection, MakeSortsEntriesAndLooksThemUp) {
  const TokenShape s = TokenShape::Uniform(2048);
  auto c = MakeOrDie({{.key = Key(1, spec::Pass::kForward, s), .factor = 1.5, .observations = 2},
                      {.key = Key(0, spec::Pass::kBackwardInput, s), .factor = 0.75}});
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->entries().size(), 2u);
  EXPECT_EQ(c->entries()[0].key.module, 0);
  EXPECT_GT(c->version(), 0u);
  EXPECT_EQ(c->Factor(1, spec::Pass::kForward, s), 1.5);
  EXPECT_EQ(c->Factor(0, spec::Pass::kBackwardInput, s), 0.75);
  EXPECT_EQ(c->Factor(0, spec::Pass::kForward, s), 1.0);
  EXPECT_EQ(c->Factor(1, spec::Pass::kForward, TokenShape::Uniform(4096)), 1.0);
  const PassFactors f = c->Factors(0, s);
  EXPECT_EQ(f.forward, 1.0);
  EXPECT_EQ(f.backward_input, 0.75);
  EXPECT_EQ(f.backward_weight, 1.0);
  ASSERT_NE(c->Find(Key(1, spec::Pass::kForward, s)), nullptr);
  EXPECT_EQ(c->Find(Key(1, spec::Pass::kForward, s))->observations, 2);
  EXPECT_EQ(c->Find(Key(1, spec::Pass::kBackwardWeight, s)), nullptr);
  EXPECT_THAT(c->BriefReport(), HasSubstr("2 keys, 2 observations, factors 0.75..1.5"));
}

TEST(CostCorrection, FactorsAgreeWithPerKeyLookupsOnRandomCorrections) {
  std::mt19937 rng(11);
  int corrected = 0;  // queries that met an entry
  for (int instance = 0; instance < 20; ++instance) {
    std::vector<CorrectionEntry> entries;
    for (int module = 0; module < 3; ++module) {
      for (int tokens_bucket = 30; tokens_bucket < 50; ++tokens_bucket) {
        for (spec::Pass pass :
             {spec::Pass::kForward, spec::Pass::kBackwardInput, spec::Pass::kBackwardWeight}) {
          if (rng() % 3 != 0) continue;
          entries.push_back(
              {.key = {.module = module,
                       .pass = pass,
                       .bucket = {.tokens = tokens_bucket, .mean_segment = tokens_bucket / 2}},
               .factor = 0.5 + static_cast<double>(rng() % 1000) / 500});
        }
      }
    }
    auto c = MakeOrDie(entries);
    ASSERT_NE(c, nullptr);
    for (int module = -1; module < 4; ++module) {
      for (int64_t tokens = 128; tokens < 8192; tokens += 37) {
        const TokenShape s = TokenShape::Uniform(tokens);  // mean segment = tokens
        const PassFactors f = c->Factors(module, s);
        corrected += f.forward != 1 || f.backward_input != 1 || f.backward_weight != 1;
        EXPECT_EQ(f.forward, c->Factor(module, spec::Pass::kForward, s))
            << instance << " " << tokens;
        EXPECT_EQ(f.backward_input, c->Factor(module, spec::Pass::kBackwardInput, s));
        EXPECT_EQ(f.backward_weight, c->Factor(module, spec::Pass::kBackwardWeight, s));
      }
    }
  }
  EXPECT_GT(corrected, 1000);
}

TEST(CostCorrection, MakeRefusesBadEntries) {
  const CorrectionKey k = Key(0, spec::Pass::kForward, TokenShape::Uniform(64));
  auto bad_factor = CostCorrection::Make({{.key = k, .factor = 0}});
  ASSERT_FALSE(bad_factor.ok());
  EXPECT_THAT(bad_factor.status().message(), HasSubstr("factor = 0; must be finite and > 0"));
  EXPECT_FALSE(
      CostCorrection::Make({{.key = k, .factor = std::numeric_limits<double>::infinity()}}).ok());
  EXPECT_FALSE(
      CostCorrection::Make(
          {{.key = {.module = -1, .pass = spec::Pass::kForward, .bucket = {}}, .factor = 1}})
          .ok());
  EXPECT_FALSE(CostCorrection::Make({{.key = k, .factor = 1, .observations = -1}}).ok());
  auto far = CostCorrection::Make(
      {{.key = {.module = 0, .pass = spec::Pass::kForward, .bucket = {.tokens = 256}},
        .factor = 1}});
  ASSERT_FALSE(far.ok());
  EXPECT_THAT(far.status().message(), HasSubstr("key.bucket = (256, -1)"));
  auto twice = CostCorrection::Make({{.key = k, .factor = 2}, {.key = k, .factor = 3}});
  ASSERT_FALSE(twice.ok());
  EXPECT_THAT(twice.status().message(), HasSubstr("given twice"));
}

// ---------------------------------------------------------------------------------------------
// CostModel::WithCorrection

TEST(CostModelWithCorrection, ScalesOnlyTheMatchingModulePassAndBucket) {
  const spec::ModelSpec model = TwoModules();
  const TokenShape a = TokenShape::Uniform(2048, 2);  // 4096 tokens
  const TokenShape b = TokenShape::Uniform(1024);     // another bucket
  auto c = MakeOrDie({{.key = Key(0, spec::Pass::kForward, a), .factor = 2},
                      {.key = Key(0, spec::Pass::kBackwardWeight, a), .factor = 1.3},
                      {.key = Key(1, spec::Pass::kBackwardInput, b), .factor = 0.5}});
  ASSERT_NE(c, nullptr);
  const CostModel base(ReferenceH100Dgx());
  const CostModel view = base.WithCorrection(c);
  EXPECT_EQ(view.correction_version(), c->version());
  EXPECT_EQ(base.correction(), nullptr);
  for (spec::Recompute r : spec::kAllRecompute) {
    auto u0a = base.Chunk(model, 0, 0, 4, a, Par(2), r);
    auto c0a = view.Chunk(model, 0, 0, 4, a, Par(2), r);
    ASSERT_TRUE(u0a.ok() && c0a.ok());
    ExpectScaled(*c0a, *u0a, {.forward = 2, .backward_input = 1, .backward_weight = 1.3});
    EXPECT_GT(c0a->recompute_s[static_cast<int>(spec::Recompute::kFull)], 0);
    // Module 0 at the other bucket, module 1 at bucket a: untouched.
    auto u0b = base.Chunk(model, 0, 1, 2, b, Par(2), r);
    auto c0b = view.Chunk(model, 0, 1, 2, b, Par(2), r);
    ASSERT_TRUE(u0b.ok() && c0b.ok());
    ExpectScaled(*c0b, *u0b, {});
    auto u1a = base.Chunk(model, 1, 0, 6, a, Par(4), r);
    auto c1a = view.Chunk(model, 1, 0, 6, a, Par(4), r);
    ASSERT_TRUE(u1a.ok() && c1a.ok());
    ExpectScaled(*c1a, *u1a, {});
    auto u1b = base.Chunk(model, 1, 2, 3, b, Par(4), r);
    auto c1b = view.Chunk(model, 1, 2, 3, b, Par(4), r);
    ASSERT_TRUE(u1b.ok() && c1b.ok());
    ExpectScaled(*c1b, *u1b, {.backward_input = 0.5});
  }
}

TEST(CostModelWithCorrection, LayerScalesTotalsAndOps) {
  const spec::ModelSpec model = TwoModules();
  const TokenShape a = TokenShape::Uniform(4096);
  auto c = MakeOrDie({{.key = Key(1, spec::Pass::kForward, a), .factor = 4},
                      {.key = Key(1, spec::Pass::kBackwardInput, a), .factor = 0.25}});
  const CostModel base(ReferenceH100Dgx());
  const CostModel view = base.WithCorrection(c);
  auto u = base.Layer(model, 1, 3, a, Par(2));
  auto v = view.Layer(model, 1, 3, a, Par(2));
  ASSERT_TRUE(u.ok() && v.ok());
  ExpectSameUntimedFields(*v, *u);
  EXPECT_EQ(v->forward_s, 4 * u->forward_s);
  EXPECT_EQ(v->backward_input_s, 0.25 * u->backward_input_s);
  EXPECT_EQ(v->backward_weight_s, u->backward_weight_s);
  ASSERT_EQ(v->ops.size(), u->ops.size());
  for (size_t i = 0; i < u->ops.size(); ++i) {
    const double f = u->ops[i].pass == spec::Pass::kForward         ? 4
                     : u->ops[i].pass == spec::Pass::kBackwardInput ? 0.25
                                                                    : 1;
    EXPECT_EQ(v->ops[i].latency_s, f * u->ops[i].latency_s) << u->ops[i].name;
  }
  // ModuleLayer has no module index: never corrected.
  auto m = view.ModuleLayer(model.modules[1], 3, a, Par(2), BackwardMode::kFull);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->forward_s, u->forward_s);
}

TEST(CostModelWithCorrection, ViewsShareTheUncorrectedCache) {
  const spec::ModelSpec model = TwoModules();
  const TokenShape a = TokenShape::Uniform(2048);
  auto c = MakeOrDie({{.key = Key(1, spec::Pass::kForward, a), .factor = 3}});
  const CostModel base(ReferenceH100Dgx());
  auto u = base.Chunk(model, 1, 0, 6, a, Par(2));
  ASSERT_TRUE(u.ok());
  const int64_t size = base.cache_size();
  const int64_t hits = base.cache_hits();
  EXPECT_EQ(size, 3);  // first, middle, last
  const CostModel view = base.WithCorrection(c);
  auto v = view.Chunk(model, 1, 0, 6, a, Par(2));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->forward_s, 3 * u->forward_s);
  EXPECT_EQ(view.cache_size(), size);
  EXPECT_EQ(base.cache_size(), size);
  EXPECT_EQ(base.cache_hits(), hits + 3);
  // An entry the view adds is there for the model too.
  ASSERT_TRUE(view.Chunk(model, 0, 0, 4, a, Par(1)).ok());
  EXPECT_EQ(base.cache_size(), size + 3);
  // Copies share it as well, and keep their correction.
  const CostModel copy = view;
  EXPECT_EQ(copy.correction_version(), c->version());
  auto w = copy.Chunk(model, 1, 0, 6, a, Par(2));
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->forward_s, v->forward_s);
  EXPECT_EQ(copy.cache_size(), size + 3);
  // The base is never changed by its views.
  auto again = base.Chunk(model, 1, 0, 6, a, Par(2));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->forward_s, u->forward_s);
}

TEST(CostModelWithCorrection, EmptyOrNullCorrectionIsTheUncorrectedModel) {
  const spec::ModelSpec model = TwoModules();
  const TokenShape a = TokenShape::Uniform(3000);
  const CostModel base(ReferenceH100Dgx());
  auto corrected = MakeOrDie({{.key = Key(1, spec::Pass::kForward, a), .factor = 3}});
  const CostModel view = base.WithCorrection(corrected);
  auto empty = UpdateCorrection(CostCorrection{}, {});
  ASSERT_TRUE(empty.ok());
  for (const CostModel& plain : {view.WithCorrection(nullptr), view.WithCorrection(*empty),
                                 base.WithCorrection(std::make_shared<const CostCorrection>())}) {
    EXPECT_EQ(plain.correction(), nullptr);
    EXPECT_EQ(plain.correction_version(), 0u);
    auto u = base.Chunk(model, 1, 0, 6, a, Par(2), spec::Recompute::kSelective);
    auto p = plain.Chunk(model, 1, 0, 6, a, Par(2), spec::Recompute::kSelective);
    ASSERT_TRUE(u.ok() && p.ok());
    ExpectScaled(*p, *u, {});
  }
}

TEST(CostModelWithCorrection, ConcurrentViewsEachGiveTheirOwnResults) {
  const spec::ModelSpec model = TwoModules();
  std::vector<TokenShape> shapes;
  for (int k = 1; k <= 4; ++k) shapes.push_back(TokenShape::Uniform(768 * k));
  std::vector<CorrectionEntry> twice, thrice;
  for (const TokenShape& s : shapes) {
    twice.push_back({.key = Key(1, spec::Pass::kForward, s), .factor = 2});
    thrice.push_back({.key = Key(1, spec::Pass::kForward, s), .factor = 3});
  }
  // Expected values from a model of its own (nothing shared with the views below).
  const CostModel reference(ReferenceH100Dgx());
  std::vector<double> expected;
  for (const TokenShape& s : shapes) {
    expected.push_back(reference.Chunk(model, 1, 0, 6, s, Par(2))->forward_s);
  }
  const CostModel base(ReferenceH100Dgx());
  const std::array<CostModel, 2> views = {base.WithCorrection(MakeOrDie(twice)),
                                          base.WithCorrection(MakeOrDie(thrice))};
  constexpr int kThreads = 8, kReps = 40;
  std::vector<std::vector<double>> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < kReps; ++rep) {
        const CostModel& view = views[(t + rep) % 2];
        auto c = view.Chunk(model, 1, 0, 6, shapes[rep % shapes.size()], Par(2));
        results[t].push_back(c.ok() ? c->forward_s : -1);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    for (int rep = 0; rep < kReps; ++rep) {
      const double factor = (t + rep) % 2 == 0 ? 2 : 3;
      EXPECT_EQ(results[t][rep], factor * expected[rep % shapes.size()]) << t << " " << rep;
    }
  }
  EXPECT_EQ(base.cache_size(), 3 * static_cast<int64_t>(shapes.size()));
}

// ---------------------------------------------------------------------------------------------
// UpdateCorrection

StageObservation Observe(int module, spec::Pass pass, const TokenShape& shape, double ratio) {
  return {.module = module,
          .pass = pass,
          .shape = shape,
          .predicted_uncorrected_s = 0.010,
          .measured_s = 0.010 * ratio};
}

// Relative miss of the corrected prediction against the measurement.
double Miss(double factor, double ratio) { return std::abs(factor - ratio) / ratio; }

TEST(UpdateCorrection, ConstantRatioIsWithinTenPercentAfterThreeObservations) {
  const TokenShape s = TokenShape::Uniform(4096);
  const CorrectionKey key = Key(0, spec::Pass::kForward, s);
  // Documented: within 10% after 3 for |ln r| ≤ ln(1.1)/0.4³ (r ≤ 4.43), after 4 on [1/8, 8].
  for (double ratio : {3.0, 1.0 / 3, 4.4, 1 / 4.4, 8.0, 0.125}) {
    std::shared_ptr<const CostCorrection> c = std::make_shared<const CostCorrection>();
    for (int n = 1; n <= 4; ++n) {
      const StageObservation o = Observe(0, spec::Pass::kForward, s, ratio);
      auto next = UpdateCorrection(*c, {&o, 1});
      ASSERT_TRUE(next.ok()) << next.status().ToString();
      c = *next;
      const double f = c->Factor(key);
      EXPECT_NEAR(f, std::pow(ratio, 1 - std::pow(0.4, n)), 1e-12 * ratio) << ratio << " " << n;
      EXPECT_EQ(c->Find(key)->observations, n);
      const bool in_range = std::abs(std::log(ratio)) <= std::log(4.43);
      if (n == 2) {
        EXPECT_GT(Miss(f, ratio), 0.1) << ratio;
      }
      if (n == 3 && in_range) {
        EXPECT_LE(Miss(f, ratio), 0.1) << ratio;
      }
      if (n == 4) {
        EXPECT_LE(Miss(f, ratio), 0.1) << ratio;
      }
    }
    if (ratio == 3.0) {
      EXPECT_NEAR(Miss(std::pow(3.0, 1 - 0.064), 3.0), 0.068, 0.001);
    }
  }
}

TEST(UpdateCorrection, ObservationsOfOneCallActLikeSequentialOnesAndIgnoreOrder) {
  const TokenShape s = TokenShape::Uniform(1500);
  const CorrectionKey key = Key(1, spec::Pass::kBackwardInput, s);
  std::vector<StageObservation> three(3, Observe(1, spec::Pass::kBackwardInput, s, 3.0));
  auto batched = UpdateCorrection(CostCorrection{}, three);
  ASSERT_TRUE(batched.ok());
  EXPECT_NEAR(batched.value()->Factor(key), std::pow(3.0, 1 - 0.064), 1e-12);
  EXPECT_EQ(batched.value()->Find(key)->observations, 3);
  // Noisy ratios in two orders: bitwise equal.
  std::vector<StageObservation> noisy;
  for (double r : {1.7, 2.4, 1.9, 2.2, 2.05, 1.6, 2.8, 2.0}) {
    noisy.push_back(Observe(1, spec::Pass::kBackwardInput, s, r));
  }
  auto forward_order = UpdateCorrection(CostCorrection{}, noisy);
  std::reverse(noisy.begin(), noisy.end());
  std::swap(noisy[1], noisy[5]);
  auto other_order = UpdateCorrection(CostCorrection{}, noisy);
  ASSERT_TRUE(forward_order.ok() && other_order.ok());
  EXPECT_EQ(forward_order.value()->Factor(key), other_order.value()->Factor(key));
}

TEST(UpdateCorrection, TracksTheRatioUnderMultiplicativeNoise) {
  const TokenShape s = TokenShape::Uniform(8192);
  const CorrectionKey key = Key(0, spec::Pass::kBackwardWeight, s);
  // Uniform log-noise of standard deviation 0.1 (|ln noise| ≤ 0.1·√3 = 0.173) around ratio 2,
  // from mt19937's raw output (portable across standard libraries).
  std::mt19937 rng(7);
  const double half_width = 0.1 * std::sqrt(3.0);
  std::shared_ptr<const CostCorrection> c = std::make_shared<const CostCorrection>();
  double sum_log_error = 0;
  int counted = 0;
  for (int n = 1; n <= 200; ++n) {
    const double u = (static_cast<double>(rng()) + 0.5) / 4294967296.0;  // (0, 1)
    const double ratio = 2.0 * std::exp(half_width * (2 * u - 1));
    const StageObservation o = Observe(0, spec::Pass::kBackwardWeight, s, ratio);
    c = UpdateCorrection(*c, {&o, 1}).value();
    const double log_error = std::log(c->Factor(key) / 2.0);
    // A weighted mean of values within ±0.173 of ln 2, plus the start's 0.4ⁿ·ln 2.
    EXPECT_LE(std::abs(log_error), half_width + std::pow(0.4, n) * std::log(2.0) + 1e-12) << n;
    if (n > 10) {
      sum_log_error += log_error;
      ++counted;
    }
  }
  EXPECT_LT(std::abs(sum_log_error / counted), 0.03);  // centred on the true ratio
}

TEST(UpdateCorrection, ClampsOutlierRatios) {
  const TokenShape s = TokenShape::Uniform(256);
  const CorrectionRule latest{.alpha = 1};
  const std::vector<StageObservation> slow = {Observe(0, spec::Pass::kForward, s, 100)};
  const std::vector<StageObservation> fast = {Observe(0, spec::Pass::kForward, s, 1e-3)};
  EXPECT_DOUBLE_EQ(UpdateCorrection(CostCorrection{}, slow, latest)
                       .value()
                       ->Factor(Key(0, spec::Pass::kForward, s)),
                   8.0);
  EXPECT_DOUBLE_EQ(UpdateCorrection(CostCorrection{}, fast, latest)
                       .value()
                       ->Factor(Key(0, spec::Pass::kForward, s)),
                   0.125);
  // A quotient that overflows is clamped too.
  const std::vector<StageObservation> overflow = {
      {.module = 0, .shape = s, .predicted_uncorrected_s = 1e-300, .measured_s = 1e300}};
  EXPECT_DOUBLE_EQ(UpdateCorrection(CostCorrection{}, overflow, latest)
                       .value()
                       ->Factor(Key(0, spec::Pass::kForward, s)),
                   8.0);
  const CorrectionRule tight{.alpha = 1, .min_ratio = 0.5, .max_ratio = 2};
  EXPECT_DOUBLE_EQ(UpdateCorrection(CostCorrection{}, slow, tight)
                       .value()
                       ->Factor(Key(0, spec::Pass::kForward, s)),
                   2.0);
}

TEST(UpdateCorrection, UnobservedKeysKeepTheirFactors) {
  const TokenShape a = TokenShape::Uniform(1024), b = TokenShape::Uniform(4096);
  auto previous =
      MakeOrDie({{.key = Key(0, spec::Pass::kForward, b), .factor = 1.25, .observations = 5},
                 {.key = Key(1, spec::Pass::kForward, a), .factor = 0.8, .observations = 1}});
  const std::vector<StageObservation> obs = {Observe(0, spec::Pass::kForward, a, 2.0)};
  auto next = UpdateCorrection(*previous, obs);
  ASSERT_TRUE(next.ok());
  const CostCorrection& c = **next;
  EXPECT_EQ(c.entries().size(), 3u);
  EXPECT_NEAR(c.Factor(Key(0, spec::Pass::kForward, a)), std::pow(2.0, 0.6), 1e-12);
  EXPECT_EQ(c.Factor(Key(0, spec::Pass::kForward, b)), 1.25);
  EXPECT_EQ(c.Find(Key(0, spec::Pass::kForward, b))->observations, 5);
  EXPECT_EQ(c.Factor(Key(1, spec::Pass::kForward, a)), 0.8);
  EXPECT_EQ(c.Factor(Key(0, spec::Pass::kBackwardInput, a)), 1.0);
  EXPECT_EQ(c.Factor(Key(2, spec::Pass::kForward, a)), 1.0);
  // The previous correction is unchanged.
  EXPECT_EQ(previous->entries().size(), 2u);
  EXPECT_EQ(previous->Factor(Key(0, spec::Pass::kForward, a)), 1.0);
}

TEST(UpdateCorrection, RefusesBadObservationsAndRules) {
  const TokenShape s = TokenShape::Uniform(512);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    StageObservation obs;
    const char* message;
  };
  const std::vector<Case> cases = {
      {{.module = 0, .shape = s, .predicted_uncorrected_s = 0, .measured_s = 1},
       "observation 1 (module 0, fwd): predicted_uncorrected_s = 0; must be finite and > 0"},
      {{.module = 0, .shape = s, .predicted_uncorrected_s = -1, .measured_s = 1},
       "predicted_uncorrected_s = -1"},
      {{.module = 0, .shape = s, .predicted_uncorrected_s = nan, .measured_s = 1},
       "predicted_uncorrected_s = nan"},
      {{.module = 0, .shape = s, .predicted_uncorrected_s = 1, .measured_s = nan},
       "measured_s = nan; must be finite and > 0"},
      {{.module = 0, .shape = s, .predicted_uncorrected_s = 1, .measured_s = inf},
       "measured_s = inf"},
      {{.module = 0, .shape = s, .predicted_uncorrected_s = 1, .measured_s = 0}, "measured_s = 0"},
      {{.module = -1, .shape = s, .predicted_uncorrected_s = 1, .measured_s = 1},
       "module = -1; must be >= 0"},
      {{.module = 0, .shape = {.tokens = -5}, .predicted_uncorrected_s = 1, .measured_s = 1},
       "shape.tokens = -5"},
  };
  for (const Case& c : cases) {
    // A good observation first: the whole update is refused all the same.
    const std::vector<StageObservation> obs = {Observe(0, spec::Pass::kForward, s, 2), c.obs};
    auto result = UpdateCorrection(CostCorrection{}, obs);
    ASSERT_FALSE(result.ok()) << c.message;
    EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(result.status().message(), HasSubstr(c.message));
  }
  const std::vector<StageObservation> good = {Observe(0, spec::Pass::kForward, s, 2)};
  EXPECT_FALSE(UpdateCorrection(CostCorrection{}, good, {.alpha = 0}).ok());
  EXPECT_FALSE(UpdateCorrection(CostCorrection{}, good, {.alpha = 1.5}).ok());
  EXPECT_FALSE(UpdateCorrection(CostCorrection{}, good, {.min_ratio = 0}).ok());
  EXPECT_FALSE(UpdateCorrection(CostCorrection{}, good, {.min_ratio = 2}).ok());
  EXPECT_FALSE(UpdateCorrection(CostCorrection{}, good, {.max_ratio = 0.5}).ok());
  auto inf_rule = UpdateCorrection(CostCorrection{}, good, {.max_ratio = inf});
  ASSERT_FALSE(inf_rule.ok());
  EXPECT_THAT(inf_rule.status().message(), HasSubstr("rule.max_ratio = inf"));
}

TEST(UpdateCorrection, VersionsIncreaseAndNeverRepeat) {
  const TokenShape s = TokenShape::Uniform(512);
  const std::vector<StageObservation> obs = {Observe(0, spec::Pass::kForward, s, 2)};
  const CostCorrection empty;
  auto c1 = UpdateCorrection(empty, obs).value();
  auto c2 = UpdateCorrection(*c1, obs).value();
  auto sibling = UpdateCorrection(*c1, obs).value();  // derived from c1 as well
  auto c3 = UpdateCorrection(*c2, {}).value();        // no observations: still a new version
  EXPECT_GT(c1->version(), empty.version());
  EXPECT_GT(c2->version(), c1->version());
  EXPECT_GT(sibling->version(), c1->version());
  EXPECT_NE(sibling->version(), c2->version());
  EXPECT_GT(c3->version(), c2->version());
  EXPECT_EQ(c1->generation(), 1u);
  EXPECT_EQ(c2->generation(), 2u);
  EXPECT_EQ(sibling->generation(), 2u);
  EXPECT_EQ(c3->generation(), 3u);
  EXPECT_EQ(c3->Factor(Key(0, spec::Pass::kForward, s)),
            c2->Factor(Key(0, spec::Pass::kForward, s)));
  // Concurrent derivations never share a version either.
  std::vector<uint64_t> versions(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] { versions[t] = UpdateCorrection(*c1, obs).value()->version(); });
  }
  for (auto& th : threads) th.join();
  std::sort(versions.begin(), versions.end());
  EXPECT_EQ(std::adjacent_find(versions.begin(), versions.end()), versions.end());
  EXPECT_GT(versions.front(), c3->version());
}

// The loop a planner runs: price, measure, update, re-price through a corrected view.
TEST(UpdateCorrection, CorrectedModelConvergesOnMeasuredStageTimes) {
  const spec::ModelSpec model = TwoModules();
  const TokenShape odd = TokenShape::Uniform(3000);   // a shape whose kernels run 2.5× slower
  const TokenShape usual = TokenShape::Uniform(512);  // predicted right
  const CostModel base(ReferenceH100Dgx());
  std::shared_ptr<const CostCorrection> correction = std::make_shared<const CostCorrection>();
  auto odd_u = base.Chunk(model, 1, 0, 6, odd, Par(2));
  auto usual_u = base.Chunk(model, 1, 0, 6, usual, Par(2));
  ASSERT_TRUE(odd_u.ok() && usual_u.ok());
  for (int iteration = 1; iteration <= 3; ++iteration) {
    const std::vector<StageObservation> obs = {{.module = 1,
                                                .pass = spec::Pass::kForward,
                                                .shape = odd,
                                                .predicted_uncorrected_s = odd_u->forward_s,
                                                .measured_s = 2.5 * odd_u->forward_s},
                                               {.module = 1,
                                                .pass = spec::Pass::kForward,
                                                .shape = usual,
                                                .predicted_uncorrected_s = usual_u->forward_s,
                                                .measured_s = usual_u->forward_s}};
    correction = UpdateCorrection(*correction, obs).value();
  }
  const CostModel corrected = base.WithCorrection(correction);
  auto odd_c = corrected.Chunk(model, 1, 0, 6, odd, Par(2));
  auto usual_c = corrected.Chunk(model, 1, 0, 6, usual, Par(2));
  ASSERT_TRUE(odd_c.ok() && usual_c.ok());
  EXPECT_LE(Miss(odd_c->forward_s, 2.5 * odd_u->forward_s), 0.1);
  EXPECT_DOUBLE_EQ(usual_c->forward_s, usual_u->forward_s);
  EXPECT_EQ(odd_c->backward_input_s, odd_u->backward_input_s);
  EXPECT_EQ(odd_c->backward_weight_s, odd_u->backward_weight_s);
}

}  // namespace
}  // namespace weft::cost
