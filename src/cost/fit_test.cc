#include "weft/cost/fit.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "weft/spec/preset.h"

namespace weft::cost {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// A vidur-layout profile of a Llama-like model: every op column (all latencies 1 ms, replaced
// by the test), tokens 64..4096, TP 1 and 2. `with_post_norm` = false drops a column (phi-2).
std::string SyntheticVidurCsv(int hidden, int ffn, int heads, bool with_post_norm = true) {
  std::vector<std::string> ops = {"emb",       "input_layernorm", "attn_pre_proj",
                                  "attn_rope", "attn_post_proj",  "mlp_up_proj",
                                  "mlp_act",   "mlp_down_proj",   "add"};
  if (with_post_norm) ops.push_back("post_attention_layernorm");
  std::string csv;
  for (const std::string& op : ops) csv += fmt::format("time_stats.{}.median,", op);
  csv +=
      "n_head,n_kv_head,n_embd,n_expanded_embd,vocab_size,use_gated_mlp,num_tokens,"
      "num_tensor_parallel_workers\n";
  for (int tp : {1, 2}) {
    for (int tokens = 64; tokens <= 4096; tokens *= 2) {
      for (size_t i = 0; i < ops.size(); ++i) csv += "1.0,";
      csv += fmt::format("{},{},{},{},32000,True,{},{}\n", heads, heads, hidden, ffn, tokens, tp);
    }
  }
  return csv;
}

std::string WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
  return path.string();
}

spec::ClusterSpec Truth() {
  spec::ClusterSpec c = ReferenceA100Dgx();
  c.efficiency.compute = 0.7;
  c.efficiency.memory_kernels = 1.3;
  c.efficiency.residual = 1.1;
  c.efficiency.embedding = 0.45;
  return c;
}

// Replaces every measured latency of `profile` by what `truth` predicts.
void MeasureOn(const spec::ClusterSpec& truth, LoadedProfile& profile) {
  for (ProfilePoint& p : profile.points) {
    p.measured_s = 0;
    for (const Op& op : p.ops) p.measured_s += OpLatency(op, truth);
  }
}

class FitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           fmt::format("weft_fit_test_{}",
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(FitTest, RecoversKnownEfficienciesFromSyntheticProfiles) {
  std::vector<LoadedProfile> profiles;
  for (const auto& [name, hidden, ffn, heads] :
       {std::tuple{"org_small", 2048, 5504, 16}, std::tuple{"org_big", 5120, 13824, 40}}) {
    const std::string path = WriteFile(dir_ / "vidur" / fmt::format("compute_x_{}_mlp.csv", name),
                                       SyntheticVidurCsv(hidden, ffn, heads));
    auto p = LoadVidurProfile({.gpu = "x", .model = VidurModelName(path), .path = path});
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    MeasureOn(Truth(), *p);
    profiles.push_back(*std::move(p));
  }
  spec::ClusterSpec base = ReferenceA100Dgx();  // compute 0.8, memory 0.85, classes default
  auto fit = FitEfficiency(profiles, base);
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  // Rounded to 3 significant digits: exact up to that rounding.
  EXPECT_NEAR(fit->efficiency.compute, 0.7, 0.7 * 5e-3);
  EXPECT_NEAR(fit->efficiency.memory_kernels, 1.3, 1.3 * 5e-3);
  EXPECT_EQ(fit->efficiency.memory, base.efficiency.memory);  // not fitted
  EXPECT_NEAR(fit->efficiency.residual, 1.1, 1.1 * 5e-3);
  EXPECT_NEAR(fit->efficiency.embedding, 0.45, 0.45 * 5e-3);
  EXPECT_EQ(fit->efficiency.network, base.efficiency.network);  // not fitted
  ASSERT_EQ(fit->parameters.size(), 4u);
  EXPECT_EQ(fit->parameters[0].name, "memory_kernels");
  EXPECT_EQ(fit->parameters[3].name, "compute");
  EXPECT_FALSE(fit->parameters[3].at_bound);
  // 2 profiles x 2 TP x tokens 512..4096 (4 sizes) x 4 GEMMs.
  EXPECT_EQ(fit->parameters[3].points, 2 * 2 * 4 * 4);
  EXPECT_THAT(fit->files, ElementsAre("compute_x_org_big_mlp.csv", "compute_x_org_small_mlp.csv"));
  EXPECT_THAT(fit->PresetLine(), HasSubstr("efficiency: {compute: 0.7, memory: 0.85, network: "
                                           "0.8, memory_kernels: 1.3, residual: 1.1, embedding: "
                                           "0.45}"));
  // Deterministic: the same data gives the same numbers.
  auto again = FitEfficiency(profiles, base);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->efficiency, fit->efficiency);
}

TEST_F(FitTest, ClampsAtTheBoundAndRejectsMixedGpus) {
  const std::string path =
      WriteFile(dir_ / "vidur" / "compute_x_o_m_mlp.csv", SyntheticVidurCsv(2048, 5504, 16));
  auto p = LoadVidurProfile({.gpu = "x", .model = "m", .path = path});
  ASSERT_TRUE(p.ok());
  spec::ClusterSpec fast = Truth();
  fast.gpu.peak_bf16_flops_per_s *= 0.5;  // measured GEMMs twice as fast as α_f = 1 allows
  fast.efficiency.compute = 1;
  MeasureOn(fast, *p);
  auto fit = FitEfficiency({*p}, Truth());
  ASSERT_TRUE(fit.ok());
  // GEMMs measured at half the base's peak: α_f halves.
  EXPECT_EQ(fit->parameters[3].name, "compute");
  EXPECT_NEAR(fit->efficiency.compute, 0.5, 0.5 * 5e-3);

  MeasureOn(Truth(), *p);
  for (ProfilePoint& point : p->points) point.measured_s *= 1e-3;  // impossibly fast
  auto clamped = FitEfficiency({*p}, Truth());
  ASSERT_TRUE(clamped.ok());
  EXPECT_TRUE(clamped->parameters[3].at_bound);
  EXPECT_EQ(clamped->efficiency.compute, 1.0);

  LoadedProfile other = *p;
  other.profile.gpu = "y";
  auto mixed = FitEfficiency({*p, other}, Truth());
  ASSERT_FALSE(mixed.ok());
  EXPECT_THAT(mixed.status().message(), HasSubstr("must be of one GPU"));
  EXPECT_FALSE(FitEfficiency({}, Truth()).ok());
}

TEST(LeaveOneModelOut, OneFoldPerModelAndNoneForASingleModel) {
  EXPECT_TRUE(LeaveOneModelOutFolds(0).empty());
  EXPECT_TRUE(LeaveOneModelOutFolds(1).empty());
  const auto folds = LeaveOneModelOutFolds(3);
  ASSERT_EQ(folds.size(), 3u);
  EXPECT_EQ(folds[0].held_out, 0);
  EXPECT_THAT(folds[0].fit_on, ElementsAre(1, 2));
  EXPECT_EQ(folds[1].held_out, 1);
  EXPECT_THAT(folds[1].fit_on, ElementsAre(0, 2));
  EXPECT_EQ(folds[2].held_out, 2);
  EXPECT_THAT(folds[2].fit_on, ElementsAre(0, 1));
}

TEST_F(FitTest, ValidateVidurGpusRunsLomoOnlyWhereAGpuHasTwoModels) {
  // GPU x: two models (one without post_attention_layernorm, as phi-2); GPU y: one model.
  WriteFile(dir_ / "vidur" / "compute_x_o_a_mlp.csv", SyntheticVidurCsv(2048, 5504, 16));
  WriteFile(dir_ / "vidur" / "compute_x_o_b_mlp.csv", SyntheticVidurCsv(2560, 10240, 32, false));
  WriteFile(dir_ / "vidur" / "compute_y_o_c_mlp.csv", SyntheticVidurCsv(2048, 5504, 16));
  WriteFile(dir_ / "vidur" / "network_x.csv", "not a profile\n");
  auto profiles = FindVidurProfiles(dir_.string());
  ASSERT_TRUE(profiles.ok()) << profiles.status().ToString();
  ASSERT_EQ(profiles->size(), 3u);
  EXPECT_THAT(ProfiledGpus(*profiles), ElementsAre("x", "y"));
  EXPECT_EQ((*profiles)[1].model, "b");
  EXPECT_EQ(ProfilesOf(*profiles, "x").size(), 2u);

  auto points = ValidateVidurGpus(dir_.string(), [](std::string_view gpu) {
    return StatusOr<spec::ClusterSpec>(ReferenceA100Dgx());
  });
  ASSERT_TRUE(points.ok()) << points.status().ToString();
  int lomo_x = 0, lomo_y = 0, preset = 0, post_norm_b = 0, layer_below = 0, layer_above = 0;
  for (const ValidationPoint& p : *points) {
    if (p.source == "vidur LOMO") (p.gpu == "x" ? lomo_x : lomo_y) += 1;
    if (p.source == "vidur (preset)") ++preset;
    if (p.model == "b" && p.op == "post_attn_norm") ++post_norm_b;
    if (p.op == "layer" && p.source == "vidur (preset)" && p.model == "a") {
      (p.range == "< 512" ? layer_below : layer_above) += 1;
      EXPECT_EQ(p.range, p.size < 512 ? "< 512" : ">= 512");
    }
  }
  // Per profile: 2 TP x 7 sizes x (ops + layer); b has 9 ops, a and c 10.
  EXPECT_EQ(preset, 14 * 11 + 14 * 10 + 14 * 11);
  EXPECT_EQ(lomo_x, 14 * 11 + 14 * 10);  // both models of x held out once
  EXPECT_EQ(lomo_y, 0);                  // one model: LOMO impossible
  EXPECT_EQ(post_norm_b, 0);
  EXPECT_EQ(layer_below, 2 * 3);  // 64, 128, 256
  EXPECT_EQ(layer_above, 2 * 4);  // 512 .. 4096

  auto missing = ValidateVidurGpus(dir_.string(), [](std::string_view gpu) {
    return StatusOr<spec::ClusterSpec>(NotFoundError(fmt::format("no preset {}", gpu)));
  });
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("compute_x_*_mlp.csv"));
  EXPECT_EQ(FindVidurProfiles((dir_ / "none").string()).status().code(), StatusCode::kNotFound);
}

TEST(LomoOnSyntheticTruth, HeldOutModelIsPredictedExactlyWhenTheFitIsExact) {
  // With measurements generated by one cluster, the fold's fit recovers it and the held-out
  // model's error is only the 3-digit rounding.
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "weft_lomo";
  std::filesystem::remove_all(dir);
  std::vector<LoadedProfile> loaded;
  for (const auto& [name, hidden] : {std::pair{"a", 2048}, std::pair{"b", 4096}}) {
    const std::string path = WriteFile(dir / fmt::format("compute_x_o_{}_mlp.csv", name),
                                       SyntheticVidurCsv(hidden, 2 * hidden, 16));
    auto p = LoadVidurProfile({.gpu = "x", .model = name, .path = path});
    ASSERT_TRUE(p.ok());
    MeasureOn(Truth(), *p);
    loaded.push_back(*std::move(p));
  }
  for (const LomoFold& fold : LeaveOneModelOutFolds(2)) {
    auto fit = FitEfficiency({loaded[fold.fit_on[0]]}, ReferenceA100Dgx());
    ASSERT_TRUE(fit.ok());
    spec::ClusterSpec refit = ReferenceA100Dgx();
    refit.efficiency = fit->efficiency;
    for (const ValidationPoint& p : PredictProfile(loaded[fold.held_out], refit, {}, "lomo")) {
      if (p.size >= 512) {
        EXPECT_LT(p.RelativeError(), 0.01) << p.op << " " << p.size;
      }
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(ApplyFitToPresetYaml, ReplacesTheEfficiencyLineAndItsProvenance) {
  EfficiencyFit fit;
  fit.gpu = "a40";
  fit.files = {"compute_a40_o_m_mlp.csv"};
  fit.min_tokens = 512;
  fit.efficiency = {.compute = 0.88,
                    .memory = 0.8,
                    .network = 0.8,
                    .memory_kernels = 1.5,
                    .residual = 1.2,
                    .embedding = 0.7};
  fit.parameters.push_back({.name = "compute",
                            .ops = "qkv_proj",
                            .points = 3,
                            .before = 0.75,
                            .after = 0.88,
                            .at_bound = false});
  const std::string yaml =
      "# a comment\n"
      "# fit: an old fit\n"
      "num_nodes: 1\n"
      "gpus_per_node: 4\n"
      "gpu: {name: A40, peak_bf16_flops_per_s: 149.7TFLOPS, hbm_bandwidth_bytes_per_s: 696GB/s,"
      " memory_capacity_bytes: 48GiB}\n"
      "intra_node: {bandwidth_bytes_per_s: 56GB/s, latency_s: 10us}\n"
      "inter_node: {bandwidth_bytes_per_s: 50Gbps, latency_s: 15us}\n"
      "efficiency:\n"
      "  compute: 0.75\n"
      "  memory: 0.8\n"
      "planning_cpu_cores: 8\n";
  auto out = ApplyFitToPresetYaml(yaml, fit, "weft cost --fit D --cluster a40", "2026-11-29");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_THAT(*out, Not(HasSubstr("an old fit")));
  EXPECT_THAT(*out, HasSubstr("# fit: `weft cost --fit D --cluster a40` on 2026-11-29"));
  EXPECT_THAT(*out, HasSubstr("# a comment\n"));
  EXPECT_THAT(*out, HasSubstr("planning_cpu_cores: 8\n"));
  auto cluster = spec::ParseClusterYaml(*out, "a40.yaml");
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  EXPECT_EQ(cluster->efficiency, fit.efficiency);
  // Applying twice keeps one provenance block.
  auto twice = ApplyFitToPresetYaml(*out, fit, "weft cost --fit D --cluster a40", "2026-11-29");
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ(*twice, *out);
  EXPECT_FALSE(ApplyFitToPresetYaml("num_nodes: 1\n", fit, "c", "d").ok());
}

TEST(ClusterEfficiency, PerGpuClassEfficienciesOverrideTheDefaults) {
  spec::ClusterSpec c = ReferenceA100Dgx();
  const CostOptions options;
  EXPECT_EQ(MemoryClassEfficiency(MemoryClass::kResidual, c, options),
            options.memory_class_efficiency[static_cast<int>(MemoryClass::kResidual)]);
  Op add{.name = "residual_add",
         .kind = OpKind::kMemory,
         .hbm_bytes = 1e9,
         .memory_class = MemoryClass::kResidual};
  const double before = OpLatency(add, c, options);
  c.efficiency.residual = 0.7;
  EXPECT_EQ(MemoryClassEfficiency(MemoryClass::kResidual, c, options), 0.7);
  EXPECT_NEAR(OpLatency(add, c, options) - options.kernel_launch_s,
              1e9 / (c.efficiency.memory * 0.7 * c.gpu.hbm_bandwidth_bytes_per_s), 1e-12);
  EXPECT_GT(OpLatency(add, c, options), before);
  c.efficiency.embedding = 0.9;
  EXPECT_EQ(MemoryClassEfficiency(MemoryClass::kEmbedding, c, options), 0.9);
  EXPECT_EQ(MemoryClassEfficiency(MemoryClass::kNorm, c, options),
            options.memory_class_efficiency[static_cast<int>(MemoryClass::kNorm)]);
  c.efficiency.memory_kernels = 2;
  EXPECT_EQ(MemoryClassEfficiency(MemoryClass::kNorm, c, options),
            2 * options.memory_class_efficiency[static_cast<int>(MemoryClass::kNorm)]);
  EXPECT_EQ(MemoryClassEfficiency(MemoryClass::kResidual, c, options), 0.7);  // its own value
  c.efficiency.embedding = -1;
  EXPECT_THAT(c.Validate().message(), HasSubstr("efficiency.embedding = -1; must be 0"));
}

}  // namespace
}  // namespace weft::cost
