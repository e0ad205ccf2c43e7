#include "weft/cost/calibration.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace weft::cost {
namespace {

using ::testing::HasSubstr;

TEST(MeasuredOpTable, InterpolatesPiecewiseLinearlyPerTp) {
  auto table = MeasuredOpTable::ParseCsv(
      "op,tokens,tp,latency_ms\n"
      "mlp_up,512,1,1.0\n"
      "mlp_up,1024,1,3.0\n"
      "mlp_up,2048,1,4.0\n"
      "mlp_up,1024,2,1.5\n",
      "t.csv");
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  EXPECT_EQ(table->NumSeries(), 2);
  EXPECT_EQ(table->NumPoints(), 4);
  EXPECT_DOUBLE_EQ(*table->Lookup("mlp_up", 1, 768), 2.0e-3);    // halfway 512..1024
  EXPECT_DOUBLE_EQ(*table->Lookup("mlp_up", 1, 1280), 3.25e-3);  // quarter 1024..2048
  EXPECT_DOUBLE_EQ(*table->Lookup("mlp_up", 1, 1024), 3.0e-3);   // exact point
  EXPECT_DOUBLE_EQ(*table->Lookup("mlp_up", 1, 100), 1.0e-3);    // clamp below
  EXPECT_DOUBLE_EQ(*table->Lookup("mlp_up", 1, 4096), 8.0e-3);   // proportional above
  EXPECT_DOUBLE_EQ(*table->Lookup("mlp_up", 2, 5000), 1.5e-3 * 5000 / 1024);
  EXPECT_FALSE(table->Lookup("mlp_up", 4, 1024).has_value());
  EXPECT_FALSE(table->Lookup("qkv_proj", 1, 1024).has_value());
}

TEST(MeasuredOpTable, RepeatedMeasurementsAreAveraged) {
  MeasuredOpTable table;
  table.Add("x", 1, 10, 1.0);
  table.Add("x", 1, 10, 3.0);
  EXPECT_DOUBLE_EQ(*table.Lookup("x", 1, 10), 2.0);
  EXPECT_EQ(table.Series("x", 1).size(), 1u);
}

TEST(MeasuredOpTable, ReadsVidurColumnsAndRenamesOps) {
  auto table = MeasuredOpTable::ParseCsv(
      "time_stats.attn_pre_proj.median,time_stats.mlp_up_proj.median,time_stats.foo.median,"
      "num_tokens,num_tensor_parallel_workers\n"
      "0.5,1.0,2.0,4096,1\n"
      "0.25,0.5,1.0,2048,1\n",
      "vidur.csv");
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  EXPECT_DOUBLE_EQ(*table->Lookup("qkv_proj", 1, 3072), 0.375e-3);
  EXPECT_DOUBLE_EQ(*table->Lookup("mlp_up", 1, 4096), 1.0e-3);
  EXPECT_DOUBLE_EQ(*table->Lookup("foo", 1, 4096), 2.0e-3);  // unknown ops keep their name
  EXPECT_EQ(OpNameFromVidur("attn_post_proj"), "out_proj");
  EXPECT_EQ(OpNameFromVidur("nope"), "");
}

TEST(MeasuredOpTable, LoadsTheRealVidurProfile) {
  auto table = MeasuredOpTable::LoadCsv(std::string(WEFT_SHARED_DATA_DIR) +
                                        "/gpu_timings/vidur/compute_h100_meta-llama_Llama-2-7b-hf_mlp.csv");
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  // H100, 4096 tokens, TP 1: mlp_up_proj ≈ 0.99 ms (two rows at 4096, averaged).
  EXPECT_NEAR(*table->Lookup("mlp_up", 1, 4096), 0.993e-3, 0.01e-3);
  EXPECT_EQ(table->Series("qkv_proj", 8).size(), 259u);
}

TEST(MeasuredOpTable, ErrorsNameFileLineAndColumn) {
  auto bad = MeasuredOpTable::ParseCsv("op,tokens,tp,latency_ms\nx,10,1,abc\n", "m.csv");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("m.csv:2: column latency_ms = 'abc'"));
  auto header = MeasuredOpTable::ParseCsv("a,b\n1,2\n", "h.csv");
  ASSERT_FALSE(header.ok());
  EXPECT_THAT(header.status().message(), HasSubstr("h.csv:1: header"));
  auto tp = MeasuredOpTable::ParseCsv("op,tokens,tp,latency_ms\nx,10,0,1\n", "t.csv");
  ASSERT_FALSE(tp.ok());
  EXPECT_THAT(tp.status().message(), HasSubstr("tp = 0"));
  EXPECT_EQ(MeasuredOpTable::LoadCsv("/nonexistent.csv").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace weft::cost
