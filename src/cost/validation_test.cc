#include "weft/cost/validation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <iostream>

namespace weft::cost {
namespace {

const std::string kTimings = std::string(WEFT_SHARED_DATA_DIR) + "/gpu_timings";

const ValidationSummary* Find(const std::vector<ValidationSummary>& all, const std::string& gpu,
                              const std::string& op) {
  for (const auto& s : all) {
    if (s.gpu == gpu && s.op == op) return &s;
  }
  return nullptr;
}

TEST(Validation, GemmMedianErrorBelow15PercentFrom512TokensOnH100AndA100) {
  auto points = ValidateAll(kTimings, {}, 512);
  ASSERT_TRUE(points.ok()) << points.status().ToString();
  const auto summary = Summarize(*points);
  std::cout << SummaryMarkdown(summary);
  for (const char* gpu : {"h100", "a100"}) {
    for (const char* op : {"qkv_proj", "out_proj", "mlp_up", "mlp_down"}) {
      const ValidationSummary* s = Find(summary, gpu, op);
      ASSERT_NE(s, nullptr) << gpu << " " << op;
      EXPECT_GT(s->count, 100);
      EXPECT_LT(s->median_error, 0.15) << gpu << " " << op;
    }
    for (const char* op : {"mlp_act", "input_norm", "residual_add", "rope", "embedding"}) {
      const ValidationSummary* s = Find(summary, gpu, op);
      ASSERT_NE(s, nullptr) << gpu << " " << op;
      EXPECT_LT(s->median_error, 0.25) << gpu << " " << op;
    }
  }
}

TEST(Validation, AttentionAndCollectivesTrackMeasurements) {
  auto points = ValidateAll(kTimings, {}, 512);
  ASSERT_TRUE(points.ok()) << points.status().ToString();
  const auto summary = Summarize(*points);
  for (const char* op : {"attention fwd (varlen, 32K packed)", "attention fwd+bwd (Megatron, 1 seq)",
                         "all_reduce", "all_gather", "send_recv (NVLink)"}) {
    const ValidationSummary* s = Find(summary, "h100", op);
    ASSERT_NE(s, nullptr) << op;
    EXPECT_LT(s->median_error, 0.15) << op;
  }
}

TEST(Validation, VidurPointsNameTheirModelAndSummariesCarryP90AndBias) {
  auto points = ValidateAll(kTimings, {}, 512);
  ASSERT_TRUE(points.ok()) << points.status().ToString();
  const auto summary = Summarize(*points);
  int llama7b = 0;
  for (const ValidationSummary& s : summary) {
    if (s.source != "vidur" || s.model != "Llama-2-7b-hf") continue;
    ++llama7b;
    EXPECT_LE(s.median_error, s.p90_error) << s.op;
    EXPECT_LE(s.p90_error, s.max_error) << s.op;
    EXPECT_LE(std::abs(s.median_signed_error), s.max_error) << s.op;
  }
  // 10 ops (post_attn_norm included) on each of H100 and A100.
  EXPECT_EQ(llama7b, 20);
  const std::string table = CompareMarkdown(summary, summary);
  EXPECT_THAT(table, ::testing::HasSubstr("| post_attn_norm | Llama-2-7b-hf | h100 | vidur |"));
  EXPECT_THAT(table, ::testing::HasSubstr(" → "));
}

TEST(Validation, MissingDirectoryIsNotFound) {
  auto points = ValidateAll("/nonexistent/gpu_timings");
  ASSERT_FALSE(points.ok());
  EXPECT_EQ(points.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace weft::cost
