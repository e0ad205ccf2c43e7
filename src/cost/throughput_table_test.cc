#include "weft/cost/throughput_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "weft/spec/preset.h"

namespace weft::cost {
namespace {

using ::testing::HasSubstr;

struct Fixture {
  spec::ModelSpec model;
  spec::ClusterSpec cluster;
};

Fixture LlavaOv() {
  auto preset = spec::LoadModel("llava-ov-llama3-8b");
  EXPECT_TRUE(preset.ok()) << preset.status().message();
  auto cluster = spec::LoadCluster("a100");
  EXPECT_TRUE(cluster.ok()) << cluster.status().message();
  return {preset->model, *cluster};
}

TEST(ThroughputTable, AnalyticalMatchesTheCostModelAtGridPoints) {
  const Fixture f = LlavaOv();
  CostModel cost(f.cluster);
  auto table = ThroughputTable::Analytical(f.model, cost);
  ASSERT_TRUE(table.ok()) << table.status().message();
  const int vision = *f.model.FindModule("vision");
  const int llm = *f.model.FindModule("llm");
  ASSERT_NE(table->Find(vision), nullptr);
  ASSERT_NE(table->Find(llm), nullptr);
  EXPECT_EQ(table->Find(f.model.FindModule("projector").value()), nullptr);
  EXPECT_EQ(table->Find(vision)->tokens_per_instance, 729);  // SigLIP 384 px, patch 14

  // Encoder: batch 4 at TP 2 equals one middle layer of 4 × 729 tokens.
  const auto& vit = f.model.modules[vision];
  auto layer = cost.ModuleLayer(vit, vit.num_layers / 2, TokenShape::Uniform(729, 4),
                                {.module = "vision", .tp = 2}, BackwardMode::kFull);
  ASSERT_TRUE(layer.ok());
  auto t = table->EncoderLayerTime(vision, 2, 4);
  ASSERT_TRUE(t.ok());
  EXPECT_DOUBLE_EQ(t->forward_s, layer->forward_s);
  EXPECT_DOUBLE_EQ(t->backward_s, layer->backward_input_s + layer->backward_weight_s);

  // LLM: attention + linear = the layer at 4096 tokens.
  const auto& lm = f.model.modules[llm];
  auto full = cost.ModuleLayer(lm, lm.num_layers / 2, TokenShape::Uniform(4096, 1),
                               {.module = "llm", .tp = 4}, BackwardMode::kFull);
  ASSERT_TRUE(full.ok());
  auto lin = table->LlmLinearTime(llm, 4, 4096);
  auto attn = table->LlmAttentionTime(llm, 4, 4096);
  ASSERT_TRUE(lin.ok() && attn.ok());
  EXPECT_NEAR(lin->forward_s + attn->forward_s, full->forward_s, 1e-12);
  EXPECT_NEAR(lin->backward_s + attn->backward_s, full->backward_input_s + full->backward_weight_s,
              1e-12);
  EXPECT_GT(attn->forward_s, 0);

  // Output extras: Llama-3's 128K-vocabulary LM head costs about 2.4 layers' FLOPs per token.
  ASSERT_TRUE(table->HasHead(llm, 1));
  EXPECT_FALSE(table->HasHead(vision, 1));
  const auto head = table->LlmHeadTime(llm, 1, 4096);
  const auto lin1 = *table->LlmLinearTime(llm, 1, 4096);
  const auto attn1 = *table->LlmAttentionTime(llm, 1, 4096);
  const double ratio = head.forward_s / (lin1.forward_s + attn1.forward_s);
  EXPECT_GT(ratio, 1.5);
  EXPECT_LT(ratio, 3.5);

  // Memory: parameters per layer on one rank shrink with TP.
  auto m1 = table->Memory(llm, 1);
  auto m8 = table->Memory(llm, 8);
  ASSERT_TRUE(m1.ok() && m8.ok());
  EXPECT_GT(m1->parameters_per_layer, 7 * m8->parameters_per_layer);
  EXPECT_GT(m1->activation_bytes_per_unit, m8->activation_bytes_per_unit);
}

TEST(ThroughputTable, InterpolatesBetweenAndScalesOutsideTheGrid) {
  const Fixture f = LlavaOv();
  CostModel cost(f.cluster);
  auto table = ThroughputTable::Analytical(f.model, cost);
  ASSERT_TRUE(table.ok());
  const int vision = *f.model.FindModule("vision");
  const int llm = *f.model.FindModule("llm");
  auto t4 = *table->EncoderLayerTime(vision, 1, 4);
  auto t8 = *table->EncoderLayerTime(vision, 1, 8);
  auto t6 = *table->EncoderLayerTime(vision, 1, 6);
  EXPECT_DOUBLE_EQ(t6.forward_s, 0.5 * (t4.forward_s + t8.forward_s));
  // Beyond the largest batch (64): proportional.
  auto t64 = *table->EncoderLayerTime(vision, 1, 64);
  auto t128 = *table->EncoderLayerTime(vision, 1, 128);
  EXPECT_DOUBLE_EQ(t128.forward_s, 2 * t64.forward_s);
  // Attention beyond 32K: quadratic; linear: proportional; below 512: the same rules.
  auto a32 = *table->LlmAttentionTime(llm, 1, 32768);
  auto a64 = *table->LlmAttentionTime(llm, 1, 65536);
  EXPECT_DOUBLE_EQ(a64.forward_s, 4 * a32.forward_s);
  auto l512 = *table->LlmLinearTime(llm, 1, 512);
  auto l256 = *table->LlmLinearTime(llm, 1, 256);
  EXPECT_DOUBLE_EQ(l256.forward_s, 0.5 * l512.forward_s);
  EXPECT_FALSE(table->EncoderLayerTime(vision, 3, 4).ok());  // no TP 3
  EXPECT_FALSE(table->LlmLinearTime(vision, 1, 4).ok());     // not an LLM
}

TEST(ThroughputTable, JsonRoundTripKeepsEveryLookup) {
  const Fixture f = LlavaOv();
  CostModel cost(f.cluster);
  auto table = ThroughputTable::Analytical(f.model, cost);
  ASSERT_TRUE(table.ok());
  const std::string text = table->ToJson();
  auto back = ThroughputTable::ParseJson(text, "t.json", f.model);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->ToJson(), text);
  EXPECT_EQ(back->source(), "analytical");
  const int vision = *f.model.FindModule("vision");
  const int llm = *f.model.FindModule("llm");
  EXPECT_EQ(back->TpValues(llm), table->TpValues(llm));
  EXPECT_DOUBLE_EQ(back->EncoderLayerTime(vision, 2, 3.5)->backward_s,
                   table->EncoderLayerTime(vision, 2, 3.5)->backward_s);
  EXPECT_DOUBLE_EQ(back->LlmAttentionTime(llm, 2, 3000)->forward_s,
                   table->LlmAttentionTime(llm, 2, 3000)->forward_s);
  EXPECT_THAT(table->ToText(), HasSubstr("instances/s"));
}

TEST(ThroughputTable, BadFilesAreOneLineErrorsNamingTheField) {
  const Fixture f = LlavaOv();
  auto parse = [&](const std::string& text) {
    return ThroughputTable::ParseJson(text, "p.json", f.model).status();
  };
  EXPECT_THAT(parse("{").message(), HasSubstr("p.json: not valid JSON"));
  EXPECT_THAT(parse(R"({"schema":"weft.profile/v0"})").message(), HasSubstr("schema must be"));
  const std::string head = R"({"schema":"weft.profile/v1","source":"measured","modules":[)";
  EXPECT_THAT(parse(head + R"({"name":"nope","role":"llm","time":[],"memory":[]}]})").message(),
              HasSubstr("modules[0].name = 'nope'"));
  EXPECT_THAT(parse(head + R"({"name":"vision","role":"llm","time":[],"memory":[]}]})").message(),
              HasSubstr("is a vit"));
  EXPECT_THAT(
      parse(
          head +
          R"({"name":"vision","role":"encoder","tokens_per_instance":729,"time":[{"tp":1,"batch":1,"forward_s":-1,"backward_s":0}],"memory":[]}]})")
          .message(),
      HasSubstr("modules[0].time[0].forward_s = -1"));
  EXPECT_THAT(
      parse(
          head +
          R"({"name":"vision","role":"encoder","tokens_per_instance":729,"time":[{"tp":1,"batch":1,"forward_s":1,"backward_s":1}],"memory":[]}]})")
          .message(),
      HasSubstr("tp 1 has times but no memory entry"));
  EXPECT_EQ(ThroughputTable::Load("/nonexistent/p.json", f.model).status().code(),
            StatusCode::kNotFound);
  // A measured file with one module parses and is used as given.
  auto ok = ThroughputTable::ParseJson(
      head +
          R"({"name":"vision","role":"encoder","tokens_per_instance":729,"time":[{"tp":1,"batch":2,"forward_s":0.002,"backward_s":0.004},{"tp":1,"batch":1,"forward_s":0.001,"backward_s":0.002}],"memory":[{"tp":1,"parameters_per_layer":100,"activation_bytes_per_layer_per_instance":1000}]}]})",
      "p.json", f.model);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->source(), "measured");
  EXPECT_DOUBLE_EQ(ok->EncoderLayerTime(*f.model.FindModule("vision"), 1, 1.5)->forward_s, 0.0015);
}

}  // namespace
}  // namespace weft::cost
