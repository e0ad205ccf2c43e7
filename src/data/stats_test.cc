#include "weft/data/stats.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_models.h"
#include "weft/data/readers.h"

namespace weft::data {
namespace {

TEST(Summarize, NearestRankPercentilesAndPowerOfTwoBins) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  const Distribution d = Summarize("x", v);
  EXPECT_EQ(d.count, 100);
  EXPECT_DOUBLE_EQ(d.mean, 50.5);
  EXPECT_DOUBLE_EQ(d.p50, 50);
  EXPECT_DOUBLE_EQ(d.p90, 90);
  EXPECT_DOUBLE_EQ(d.p99, 99);
  EXPECT_DOUBLE_EQ(d.max, 100);
  int64_t total = 0;
  for (const auto& b : d.bins) {
    total += b.count;
    EXPECT_DOUBLE_EQ(b.upper, b.lower == 0 ? 1 : 2 * b.lower);
  }
  EXPECT_EQ(total, 100);
  EXPECT_EQ(d.bins.front().count, 1);  // [1,2)
  EXPECT_EQ(d.bins.back().lower, 64);  // [64,128): 64..100
  EXPECT_EQ(d.bins.back().count, 37);
  EXPECT_EQ(Summarize("empty", {}).count, 0);
}

TEST(ComputeDataProfile, CountsModalitiesAndSkipsEmptyDistributions) {
  spec::Sample a, b, c;
  a.text_tokens = 10;
  a.images = {spec::ImageMeta{.width_px = 1000, .height_px = 1000}, spec::ImageMeta{}};
  b.text_tokens = 30;
  c.audios = {spec::AudioMeta{.duration_s = 4}};
  const std::vector<spec::Sample> samples = {a, b, c};
  const DataProfile p = ComputeDataProfile(samples);
  EXPECT_EQ(p.num_samples, 3);
  EXPECT_EQ(p.samples_with_images, 1);
  // Items are counted apart from the samples that hold them.
  int64_t images = 0;
  for (const auto& s : samples) images += static_cast<int64_t>(s.images.size());
  EXPECT_EQ(p.num_images, images);
  EXPECT_NE(p.ToText().find(std::to_string(images) + " images"), std::string::npos);
  EXPECT_EQ(p.samples_with_audio, 1);
  EXPECT_EQ(p.text_only_samples, 1);
  EXPECT_DOUBLE_EQ(p.Find("images_per_sample")->mean, 2.0 / 3);
  EXPECT_DOUBLE_EQ(p.Find("text_tokens_per_image")->mean, 5.0);
  EXPECT_EQ(p.Find("image_megapixels")->count, 1);
  EXPECT_EQ(p.Find("video_duration_s"), nullptr);
  EXPECT_DOUBLE_EQ(p.Find("audio_duration_s")->max, 4);
  const auto json = nlohmann::json::parse(p.ToJson());
  EXPECT_EQ(json["num_samples"], 3);
  EXPECT_EQ(json["distributions"][0]["name"], "images_per_sample");
  EXPECT_THAT(p.ToText(), ::testing::HasSubstr("audio_duration_s"));
}

TEST(ComputeDataProfile, WithAModelReportsTokensPerModule) {
  auto coco = ReadSamples(std::string(WEFT_SHARED_DATA_DIR) + "/images/coco_captions_val2017.json");
  ASSERT_TRUE(coco.ok());
  auto p = ComputeDataProfile(coco->samples, testing::DipVlm());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_DOUBLE_EQ(p->Find("vision.tokens_per_instance")->mean, 2704);  // fixed 728 px
  EXPECT_DOUBLE_EQ(p->Find("projector.tokens_per_sample")->mean, 169);
  EXPECT_NEAR(p->Find("llm_tokens_per_sample")->mean, 169 + 13.6, 1.0);
}

TEST(ComputeDataProfile, LibriSpeechThroughWhisperIsOnePaddedWindowPer30Seconds) {
  auto libri = ReadSamples(std::string(WEFT_SHARED_DATA_DIR) +
                           "/audio/librispeech_dev-clean_fairseq_manifest.tsv");
  ASSERT_TRUE(libri.ok());
  auto p = ComputeDataProfile(libri->samples, testing::VisionAudioLlm());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  int64_t long_utterances = 0;  // > 30 s: two padded windows
  for (const auto& s : libri->samples) long_utterances += s.audios[0].duration_s > 30;
  EXPECT_GT(long_utterances, 0);
  EXPECT_EQ(p->Find("audio.tokens_per_instance")->count, 2703 + long_utterances);
  EXPECT_DOUBLE_EQ(p->Find("audio.tokens_per_instance")->max, 1500);
  EXPECT_NEAR(p->Find("audio_projector.tokens_per_sample")->mean, 7.18 * 50, 1.0);
}

}  // namespace
}  // namespace weft::data
