#include "weft/spec/model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace weft::spec {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ModuleSpec Llm(std::string name = "llm") {
  ModuleSpec m;
  m.name = std::move(name);
  m.kind = ModuleKind::kLlm;
  m.modality = Modality::kText;
  m.num_layers = 2;
  m.hidden_size = 64;
  m.ffn_hidden_size = 128;
  m.num_attention_heads = 4;
  m.num_kv_groups = 2;
  m.gated_mlp = true;
  m.rms_norm = true;
  m.causal_attention = true;
  m.vocab_size = 100;
  return m;
}

ModuleSpec Vit(std::string name = "vision") {
  ModuleSpec m;
  m.name = std::move(name);
  m.kind = ModuleKind::kVit;
  m.modality = Modality::kImage;
  m.num_layers = 2;
  m.hidden_size = 32;
  m.ffn_hidden_size = 64;
  m.num_attention_heads = 4;
  m.num_kv_groups = 4;
  m.patch_size = 14;
  m.spatial_merge = 2;
  m.image_size_px = 56;
  return m;
}

ModuleSpec Projector(std::string name, int in, int out) {
  ModuleSpec m;
  m.name = std::move(name);
  m.kind = ModuleKind::kMlpProjector;
  m.num_layers = 1;
  m.input_size = in;
  m.output_size = out;
  m.hidden_size = out;
  return m;
}

ModelSpec Vlm() {
  ModelSpec model;
  model.name = "vlm";
  model.modules = {Vit(), Projector("projector", 32 * 4, 64), Llm()};
  model.edges = {{"vision", "projector"}, {"projector", "llm"}};
  return model;
}

std::string ErrorOf(const Status& s) {
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  return s.message();
}

TEST(ModuleSpecValidate, AcceptsWellFormedModules) {
  EXPECT_TRUE(Llm().Validate().ok());
  EXPECT_TRUE(Vit().Validate().ok());
  EXPECT_TRUE(Projector("p", 8, 8).Validate().ok());
  EXPECT_TRUE(Vlm().Validate().ok()) << Vlm().Validate().ToString();
}

TEST(ModuleSpecValidate, RejectsZeroLayers) {
  ModuleSpec m = Llm();
  m.num_layers = 0;
  EXPECT_EQ(ErrorOf(m.Validate()), "num_layers = 0; must be > 0");
}

TEST(ModuleSpecValidate, RejectsHiddenNotDivisibleByHeads) {
  ModuleSpec m = Llm();
  m.hidden_size = 66;
  EXPECT_EQ(ErrorOf(m.Validate()),
            "hidden_size = 66; must be divisible by num_attention_heads (4)");
}

TEST(ModuleSpecValidate, ExplicitHeadDimLiftsDivisibility) {
  ModuleSpec m = Llm();
  m.hidden_size = 66;
  m.head_dim = 32;
  EXPECT_TRUE(m.Validate().ok());
  EXPECT_EQ(m.HeadDim(), 32);
}

TEST(ModuleSpecValidate, RejectsKvGroupsNotDividingHeads) {
  ModuleSpec m = Llm();
  m.num_kv_groups = 3;
  EXPECT_EQ(ErrorOf(m.Validate()), "num_kv_groups = 3; must divide num_attention_heads (4)");
}

TEST(ModuleSpecValidate, RejectsZeroKvGroups) {
  ModuleSpec m = Llm();
  m.num_kv_groups = 0;
  EXPECT_EQ(ErrorOf(m.Validate()), "num_kv_groups = 0; must be > 0");
}

TEST(ModuleSpecValidate, RejectsEmptyAndOddNames) {
  ModuleSpec m = Llm("");
  EXPECT_THAT(ErrorOf(m.Validate()), HasSubstr("name = \"\"; must be non-empty"));
  m.name = "a b";
  EXPECT_THAT(ErrorOf(m.Validate()), HasSubstr("name = \"a b\"; may only contain"));
}

TEST(ModuleSpecValidate, RejectsLlmWithoutVocabulary) {
  ModuleSpec m = Llm();
  m.vocab_size = 0;
  EXPECT_EQ(ErrorOf(m.Validate()), "vocab_size = 0; must be > 0");
}

TEST(ModuleSpecValidate, RejectsModalityThatDoesNotFitTheKind) {
  ModuleSpec m = Vit();
  m.modality = Modality::kAudio;
  EXPECT_EQ(ErrorOf(m.Validate()), "modality = audio; must be image or video for a vit");
}

TEST(ModuleSpecValidate, RejectsImageSizeWhoseGridDoesNotMerge) {
  ModuleSpec m = Vit();
  m.image_size_px = 42;  // 3 patches per side, merge 2
  EXPECT_THAT(ErrorOf(m.Validate()), HasSubstr("image_size_px = 42; must give a patch grid side"));
}

TEST(ModuleSpecValidate, RejectsProjectorWithThreeLayers) {
  ModuleSpec m = Projector("p", 8, 8);
  m.num_layers = 3;
  EXPECT_EQ(ErrorOf(m.Validate()), "num_layers = 3; must be 1 or 2 for an mlp_projector");
}

TEST(ModuleSpecValidate, RejectsProjectorHiddenSizeOtherThanOutput) {
  ModuleSpec m = Projector("p", 8, 8);
  m.hidden_size = 16;
  EXPECT_EQ(ErrorOf(m.Validate()),
            "hidden_size = 16; must equal output_size (8) for an mlp_projector");
}

TEST(ModuleSpecValidate, RejectsNegativeTextCondition) {
  ModuleSpec m = Llm("dit");
  m.kind = ModuleKind::kDit;
  m.modality = Modality::kVideo;
  m.patch_size = 2;
  m.text_condition_hidden = -1;
  EXPECT_THAT(ErrorOf(m.Validate()), HasSubstr("text_condition_hidden = -1; must be >= 0"));
}

TEST(ModuleSpecValidate, RejectsAudioEncoderWithoutMelBins) {
  ModuleSpec m = Llm("audio");
  m.kind = ModuleKind::kAudioEncoder;
  m.modality = Modality::kAudio;
  m.mel_bins = 0;
  EXPECT_EQ(ErrorOf(m.Validate()), "mel_bins = 0; must be > 0");
}

TEST(ModelSpecValidate, PrefixesModuleErrorsWithTheirIndex) {
  ModelSpec model = Vlm();
  model.modules[2].num_kv_groups = 3;
  EXPECT_EQ(ErrorOf(model.Validate()),
            "modules[2].num_kv_groups = 3; must divide num_attention_heads (4)");
}

TEST(ModelSpecValidate, RejectsDuplicateNames) {
  ModelSpec model = Vlm();
  model.modules[2].name = "vision";
  EXPECT_EQ(ErrorOf(model.Validate()),
            "modules[2].name = \"vision\"; must be unique (also modules[0].name)");
}

TEST(ModelSpecValidate, RejectsEdgeNamingAMissingModule) {
  ModelSpec model = Vlm();
  model.edges.push_back({"projector", "decoder"});
  EXPECT_EQ(ErrorOf(model.Validate()),
            "edges[2].to = \"decoder\"; must name a module of the model");
  model.edges.back() = {"audio", "llm"};
  EXPECT_EQ(ErrorOf(model.Validate()),
            "edges[2].from = \"audio\"; must name a module of the model");
}

TEST(ModelSpecValidate, RejectsSelfLoopsAndRepeatedEdges) {
  ModelSpec model = Vlm();
  model.edges.push_back({"llm", "llm"});
  EXPECT_THAT(ErrorOf(model.Validate()), HasSubstr("edges[2] = llm -> llm; must connect two"));
  model.edges.back() = {"vision", "projector"};
  EXPECT_THAT(ErrorOf(model.Validate()),
              HasSubstr("edges[2] = vision -> projector; must not repeat"));
}

// A branch that reaches no llm/dit and a projector with no encoder upstream are refused alike,
// at validation, naming the module (issue 34 item 10).
TEST(ModelSpecValidate, RejectsDeadBranchesAndProjectorsWithoutEncoders) {
  ModelSpec model = Vlm();
  model.edges.pop_back();  // projector -> llm removed: the vision branch feeds nothing
  EXPECT_THAT(ErrorOf(model.Validate()),
              HasSubstr("[module 'vision' (vit) feeds no llm or dit]; every module must reach an "
                        "llm or dit module"));
  model = Vlm();
  model.edges.erase(model.edges.begin());  // vision -> projector removed
  EXPECT_THAT(ErrorOf(model.Validate()), HasSubstr("[module 'vision' (vit) feeds nothing]"));
  model.modules.erase(model.modules.begin());  // no vision at all: a projector without input
  EXPECT_THAT(ErrorOf(model.Validate()),
              HasSubstr("[module 'projector' (mlp_projector) has no encoder upstream]; a "
                        "projector must have a vit or audio_encoder module upstream"));
  ModelSpec encoder_alone;  // a building block without an LLM: nothing to reach
  encoder_alone.name = "vit";
  encoder_alone.modules = {Vit()};
  EXPECT_TRUE(encoder_alone.Validate().ok());
}

TEST(ModelSpecValidate, RejectsCycles) {
  ModelSpec model = Vlm();
  model.modules.push_back(Projector("back", 64, 32));
  model.edges.push_back({"llm", "back"});
  model.edges.push_back({"back", "vision"});
  EXPECT_EQ(ErrorOf(model.Validate()),
            "edges = [cycle through vision, projector, llm, back]; must form a DAG");
}

TEST(ModelSpecValidate, RejectsEmptyModel) {
  ModelSpec model;
  EXPECT_EQ(ErrorOf(model.Validate()), "modules = []; must list at least one module");
}

TEST(ModelSpecValidate, ChecksProjectorInputAgainstMergedEncoderWidth) {
  ModelSpec model = Vlm();
  model.modules[1].input_size = 32;  // forgot the 2x2 merge
  EXPECT_EQ(ErrorOf(model.Validate()),
            "modules[1].input_size = 32; must equal the output width of upstream module 'vision' "
            "(128 = hidden_size 32 x spatial_merge^2 4)");
}

TEST(ModelSpecValidate, ChecksProjectorOutputAgainstConsumerHidden) {
  ModelSpec model = Vlm();
  model.modules[1].output_size = model.modules[1].hidden_size = 48;
  EXPECT_EQ(ErrorOf(model.Validate()),
            "modules[1].output_size = 48; must equal hidden_size (64) of downstream module 'llm'");
}

TEST(ModelSpecValidate, ChecksDitTextConditionAgainstLlmWidth) {
  ModelSpec model;
  ModuleSpec dit = Llm("dit");
  dit.kind = ModuleKind::kDit;
  dit.modality = Modality::kVideo;
  dit.causal_attention = false;
  dit.patch_size = 2;
  dit.text_condition_hidden = 32;
  model.modules = {Llm(), dit};
  model.edges = {{"llm", "dit"}};
  EXPECT_EQ(ErrorOf(model.Validate()),
            "modules[1].text_condition_hidden = 32; must equal hidden_size (64) of upstream "
            "module 'llm'");
  model.modules[1].text_condition_hidden = 64;
  EXPECT_TRUE(model.Validate().ok());
}

TEST(ModelSpecGraph, TopologicalOrderBreaksTiesByDeclarationOrder) {
  ModelSpec model;
  model.modules = {Llm("llm"), Vit("vision"), Projector("vp", 128, 64), Vit("video"),
                   Projector("ap", 128, 64)};
  model.edges = {{"vp", "llm"}, {"vision", "vp"}, {"video", "ap"}, {"ap", "llm"}};
  ASSERT_TRUE(model.Validate().ok()) << model.Validate().ToString();
  EXPECT_THAT(model.TopologicalOrder(), ElementsAre(1, 2, 3, 4, 0));
  EXPECT_THAT(model.Predecessors(0), ElementsAre(2, 4));
  EXPECT_THAT(model.Successors(1), ElementsAre(2));
  EXPECT_THAT(model.Successors(0), ElementsAre());
  EXPECT_EQ(model.FindModule("ap"), 4);
  EXPECT_EQ(model.FindModule("nope"), std::nullopt);
}

TEST(ModelSpecGraph, FrozenModuleNeedsBackwardOnlyWithTrainableUpstream) {
  // Cornstarch: frozen encoder -> trainable projector -> frozen LLM.
  ModelSpec model = Vlm();
  model.modules[0].frozen = true;
  model.modules[2].frozen = true;
  EXPECT_FALSE(model.HasTrainableUpstream(0));
  EXPECT_FALSE(model.HasTrainableUpstream(1));
  EXPECT_TRUE(model.HasTrainableUpstream(2));
  model.modules[1].frozen = true;
  EXPECT_FALSE(model.HasTrainableUpstream(2));
  model.modules[0].frozen = false;  // trainable two hops up
  EXPECT_TRUE(model.HasTrainableUpstream(2));
}

TEST(ModuleSpecParameters, GqaLlmLayerMatchesClosedForm) {
  const ModuleSpec m = Llm();
  // q 64x64, k/v 64x(2x16) each, o 64x64, gated MLP 3x64x128, two RMSNorms.
  const int64_t layer = 64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 128 + 2 * 64;
  EXPECT_EQ(m.ParametersPerLayer(), layer);
  // Untied embedding + LM head + final norm.
  EXPECT_EQ(m.EmbeddingParameters(), 2 * 100 * 64 + 64);
  EXPECT_EQ(m.ParameterCount(), 2 * layer + 2 * 100 * 64 + 64);
  ModuleSpec tied = m;
  tied.tied_embeddings = true;
  EXPECT_EQ(tied.ParameterCount(), m.ParameterCount() - 100 * 64);
}

TEST(ModuleSpecParameters, BiasesAndLayerNormAddTheirVectors) {
  ModuleSpec m = Llm();
  m.num_kv_groups = 4;
  m.gated_mlp = false;
  m.rms_norm = false;
  const int64_t bare = m.ParametersPerLayer();
  EXPECT_EQ(bare, 4 * 64 * 64 + 2 * 64 * 128 + 2 * 2 * 64);
  m.qkv_bias = true;
  EXPECT_EQ(m.ParametersPerLayer(), bare + 3 * 64);
  m.linear_bias = true;  // q, k, v, o, fc1, fc2
  EXPECT_EQ(m.ParametersPerLayer(), bare + 3 * 64 + 64 + 128 + 64);
}

TEST(ModuleSpecParameters, DitAddsCrossAttentionAndAdaLn) {
  ModuleSpec m = Llm("dit");
  m.kind = ModuleKind::kDit;
  m.num_kv_groups = 4;
  m.gated_mlp = false;
  m.rms_norm = true;
  const int64_t self_only = 4 * 64 * 64 + 2 * 64 * 128 + 2 * 64;
  m.text_condition_hidden = 0;
  EXPECT_EQ(m.ParametersPerLayer(), self_only + 6 * 64 * 64 + 6 * 64);
  m.text_condition_hidden = 32;  // q, o: 64x64; k, v: 32x64; one more norm
  EXPECT_EQ(m.ParametersPerLayer(),
            self_only + 2 * 64 * 64 + 2 * 32 * 64 + 64 + 6 * 64 * 64 + 6 * 64);
  m.shared_adaln = true;
  EXPECT_EQ(m.ParametersPerLayer(), self_only + 2 * 64 * 64 + 2 * 32 * 64 + 64 + 6 * 64);
}

TEST(ModuleSpecParameters, ProjectorCountsItsLinears) {
  ModuleSpec p = Projector("p", 10, 4);
  EXPECT_EQ(p.ParameterCount(), 40);
  p.linear_bias = true;
  EXPECT_EQ(p.ParameterCount(), 44);
  p.num_layers = 2;
  p.ffn_hidden_size = 6;
  EXPECT_EQ(p.ParameterCount(), 10 * 6 + 6 + 6 * 4 + 4);
  EXPECT_EQ(p.ParametersPerLayer(), p.ParameterCount() / 2);
}

TEST(ModuleSpecDerived, FixedImageAndAudioTokens) {
  ModuleSpec vit = Vit();
  vit.image_size_px = 728;
  vit.spatial_merge = 4;
  EXPECT_EQ(vit.FixedImageTokens(), 169);  // DIP: 728 px, patch 14, merge 4
  ModuleSpec audio = Llm("audio");
  audio.kind = ModuleKind::kAudioEncoder;
  EXPECT_EQ(audio.AudioTokens(30.0), 1500);  // Whisper: 30 s -> 1500
  EXPECT_EQ(audio.AudioTokens(60.0), 1500);  // capped at max_source_positions
  EXPECT_EQ(audio.AudioTokens(1.0), 50);
}

TEST(ModuleKindNames, RoundTripAndRejectUnknown) {
  for (ModuleKind k : {ModuleKind::kVit, ModuleKind::kLlm, ModuleKind::kDit,
                       ModuleKind::kAudioEncoder, ModuleKind::kMlpProjector}) {
    EXPECT_EQ(*ParseModuleKind(ModuleKindName(k)), k);
  }
  StatusOr<ModuleKind> bad = ParseModuleKind("transformer");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("kind = transformer; must be one of vit, llm"));
  EXPECT_FALSE(ParseActivation("swish").ok());
  EXPECT_EQ(*ParseActivation("quick_gelu"), Activation::kQuickGelu);
  EXPECT_EQ(*ParseModality("audio"), Modality::kAudio);
  EXPECT_FALSE(ParseModality("smell").ok());
}

}  // namespace
}  // namespace weft::spec
