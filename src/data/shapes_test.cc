#include "weft/data/shapes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "test_models.h"
#include "weft/data/generators.h"
#include "weft/data/stats.h"

namespace weft::data {
namespace {

using ::testing::HasSubstr;

std::vector<spec::Sample> ThreeSamples() {
  spec::Sample images{.id = 7, .text_tokens = 10};
  images.images = {spec::ImageMeta{.width_px = 640, .height_px = 480}, spec::ImageMeta{}};
  spec::Sample video{.id = 8, .text_tokens = 20};
  video.videos = {spec::VideoMeta{.frames = 3, .fps = 1, .duration_s = 3}};
  spec::Sample text{.id = 9, .text_tokens = 30};
  return {images, video, text};
}

// DIP's VLM: a fixed 728-px ViT gives 52×52 = 2704 patches per image or frame, 169 LLM tokens.
TEST(ComputeSampleShapes, CountsInstancesAndTokensPerModuleAndTheLlmLength) {
  auto shapes = ComputeSampleShapes(ThreeSamples(), testing::DipVlm(), {}, "dip-vlm", "three");
  ASSERT_TRUE(shapes.ok()) << shapes.status().ToString();
  EXPECT_EQ(shapes->model, "dip-vlm");
  EXPECT_EQ(shapes->source, "three");
  EXPECT_THAT(shapes->module_names, ::testing::ElementsAre("vision", "projector"));
  ASSERT_EQ(shapes->samples.size(), 3u);
  const SampleShape& a = shapes->samples[0];
  EXPECT_EQ(a.id, 7);
  EXPECT_EQ(a.llm_tokens, 10 + 2 * 169);
  EXPECT_EQ(a.modules[0], (ModuleShape{.instances = 2,
                                       .tokens = 2 * 2704,
                                       .sum_sq_tokens = 2 * 2704 * 2704,
                                       .max_instance_tokens = 2704}));
  EXPECT_EQ(a.modules[1].tokens, 2 * 169);
  const SampleShape& v = shapes->samples[1];  // frame-wise: one instance per frame
  EXPECT_EQ(v.modules[0].instances, 3);
  EXPECT_EQ(v.llm_tokens, 20 + 3 * 169);
  const SampleShape& t = shapes->samples[2];
  EXPECT_EQ(t.modules[0], ModuleShape{});
  EXPECT_EQ(t.llm_tokens, 30);
}

TEST(ComputeDataProfile, ReportsInstancesPerSampleOverTheSamplesAModuleSees) {
  auto p = ComputeDataProfile(ThreeSamples(), testing::DipVlm());
  ASSERT_TRUE(p.ok());
  const Distribution* d = p->Find("vision.instances_per_sample");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->count, 2);  // the text-only sample is not counted
  EXPECT_DOUBLE_EQ(d->mean, 2.5);
  EXPECT_DOUBLE_EQ(p->Find("llm_tokens_per_sample")->max, 20 + 3 * 169);
}

TEST(SampleShapesFile, RoundTripsThroughTheWriterAndReader) {
  auto samples = GenerateSamples("dflop-mixed", GeneratorOptions{.num_samples = 300, .seed = 5});
  ASSERT_TRUE(samples.ok());
  auto shapes =
      ComputeSampleShapes(*samples, testing::DipVlm(), {}, "dip-vlm", "dflop-mixed seed 5");
  ASSERT_TRUE(shapes.ok()) << shapes.status().ToString();
  const std::string text = SampleShapesToJsonl(*shapes);
  EXPECT_THAT(
      text.substr(0, text.find('\n')),
      HasSubstr(
          R"({"schema":"weft.data_shapes/v1","model":"dip-vlm","source":"dflop-mixed seed 5","num_samples":300)"));
  auto back = ParseSampleShapes(text, "s.jsonl");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, *shapes);
  EXPECT_EQ(SampleShapesToJsonl(*back), text);

  const std::string path = ::testing::TempDir() + "/weft_shapes_roundtrip.jsonl";
  std::ofstream(path) << text;
  auto read = ReadSampleShapes(path);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, *shapes);
  std::remove(path.c_str());
  EXPECT_EQ(ReadSampleShapes(path + ".missing").status().code(), StatusCode::kNotFound);
}

// Each corruption is one line naming the file, the line, the field and the rule.
TEST(SampleShapesFile, ReaderIsStrictWithOneLineErrors) {
  const std::string header =
      R"({"schema":"weft.data_shapes/v1","model":"m","source":"s","num_samples":1,"modules":["vision"]})";
  const std::string vis =
      R"("vision":{"instances":1,"tokens":729,"sum_sq_tokens":531441,"max_instance_tokens":729})";
  const std::string good = R"({"id":0,"text_tokens":5,"llm_tokens":734,"modules":{)" + vis + "}}";
  ASSERT_TRUE(ParseSampleShapes(header + "\n" + good + "\n", "f").ok());
  struct Case {
    std::string content, expected;
  };
  auto replace = [](std::string s, const std::string& from, const std::string& to) {
    return s.replace(s.find(from), from.size(), to);
  };
  const std::vector<Case> cases = {
      {"", "f: the file is empty"},
      {replace(header, "v1", "v2") + "\n" + good, "f:1: schema = \"weft.data_shapes/v2\"; must be"},
      {replace(header, "\"model\":\"m\",", "") + "\n" + good, "f:1: model is missing"},
      {header + "\n", "f:1: num_samples = 1 in the header but 0 sample lines"},
      {header + "\n" + good + "\n" + good,
       "f:3: more sample lines than the header's num_samples = 1"},
      {header + "\n\n" + good, "f:2: empty line"},
      {header + "\n[1]", "f:2: line is not a JSON object"},
      {header + "\n{\"id\":", "f:2: not valid JSON"},
      {header + "\n" + replace(good, "text_tokens", "text_tokns"),
       "f:2: text_tokns: unknown field (did you mean 'text_tokens'?)"},
      {header + "\n" + replace(good, "\"text_tokens\":5", "\"text_tokens\":-5"),
       "f:2: text_tokens = -5; must be an integer in [0, 2^53)"},
      {header + "\n" + replace(good, "\"llm_tokens\":734", "\"llm_tokens\":3"),
       "f:2: llm_tokens = 3; must be >= text_tokens = 5"},
      {header + "\n" + replace(good, "\"vision\"", "\"visoin\""),
       "f:2: modules.visoin: unknown field (did you mean 'vision'?)"},
      {header + "\n" + replace(good, "\"tokens\":729", "\"tokens\":1.5"),
       "f:2: modules.vision.tokens = 1.5; must be an integer"},
      {header + "\n" + replace(good, "\"instances\":1", "\"instances\":0"),
       "f:2: modules.vision.tokens = 729; must be 0 when instances = 0"},
      {header + "\n" + replace(good, "\"max_instance_tokens\":729", "\"max_instance_tokens\":730"),
       "f:2: modules.vision.max_instance_tokens = 730; must be <= tokens = 729"},
      {header + "\n" + replace(good, "\"id\":0", "\"id\":0,\"id\":1"),
       "f:2: key \"id\" appears twice"},
  };
  for (const auto& c : cases) {
    auto r = ParseSampleShapes(c.content, "f");
    ASSERT_FALSE(r.ok()) << c.content;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.content;
    EXPECT_THAT(r.status().message(), HasSubstr(c.expected)) << c.content;
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
  }
}

}  // namespace
}  // namespace weft::data
