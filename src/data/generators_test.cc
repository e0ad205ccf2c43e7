#include "weft/data/generators.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_models.h"
#include "weft/data/packing.h"
#include "weft/data/readers.h"
#include "weft/data/stats.h"

namespace weft::data {
namespace {

std::vector<spec::Sample> Gen(std::string_view profile, int64_t n, uint64_t seed, int64_t iteration = 0) {
  auto r = GenerateSamples(profile, GeneratorOptions{.num_samples = n, .seed = seed, .iteration = iteration});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<spec::Sample>{};
}

double MeanOf(const DataProfile& p, std::string_view name) {
  const Distribution* d = p.Find(name);
  EXPECT_NE(d, nullptr) << name;
  return d ? d->mean : -1;
}

TEST(GenerateSamples, SameSeedGivesIdenticalOutputAndOtherSeedsDiffer) {
  for (auto profile : GeneratorProfileNames()) {
    if (profile == "cornstarch") continue;  // fixed synthetic samples (tested below)
    const auto a = SamplesToJsonl(Gen(profile, 200, 42, 3));
    EXPECT_EQ(a, SamplesToJsonl(Gen(profile, 200, 42, 3))) << profile;
    EXPECT_NE(a, SamplesToJsonl(Gen(profile, 200, 43, 3))) << profile;
    EXPECT_NE(a, SamplesToJsonl(Gen(profile, 200, 42, 4))) << profile;
  }
}

// Cornstarch §6.1: every sample has 1k text tokens, one 1280×720 image in the middle of the
// text and one 30-s audio clip, whatever the seed or iteration.
TEST(GenerateSamples, CornstarchProfileIsSection61sFixedSample) {
  const auto a = Gen("cornstarch", 24, 42, 3);
  ASSERT_EQ(a.size(), 24u);
  for (const auto& s : a) {
    EXPECT_EQ(s.text_tokens, 1000);
    ASSERT_EQ(s.images.size(), 1u);
    EXPECT_EQ(s.images[0].width_px, 1280);
    EXPECT_EQ(s.images[0].height_px, 720);
    EXPECT_EQ(s.images[0].text_position, 500);
    ASSERT_EQ(s.audios.size(), 1u);
    EXPECT_EQ(s.audios[0].duration_s, 30.0);
    EXPECT_TRUE(s.videos.empty());
  }
  EXPECT_EQ(SamplesToJsonl(a), SamplesToJsonl(Gen("cornstarch", 24, 7, 0)));
}

TEST(GenerateSamples, UnknownProfileIsNotFoundListingTheProfiles) {
  auto r = GenerateSamples("laoin");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("rise-and-fall"));
  EXPECT_FALSE(GenerateSamples("laion", GeneratorOptions{.num_samples = -1}).ok());
}

TEST(GenerateSamples, LaionHasOneImageAndAbout16TokenCaptions) {
  const auto p = ComputeDataProfile(Gen("laion", 20000, 1));
  EXPECT_DOUBLE_EQ(MeanOf(p, "images_per_sample"), 1.0);
  EXPECT_NEAR(MeanOf(p, "text_tokens_per_sample"), 16.4, 0.5);
}

TEST(GenerateSamples, ObelicsMatchesPublishedPerDocumentMeansWithHeavyTails) {
  const auto p = ComputeDataProfile(Gen("obelics", 40000, 2));
  EXPECT_NEAR(MeanOf(p, "images_per_sample"), 2.5, 0.1);
  EXPECT_NEAR(MeanOf(p, "text_tokens_per_sample"), 816, 40);
  const Distribution* ratio = p.Find("text_tokens_per_image");
  ASSERT_NE(ratio, nullptr);
  EXPECT_LT(ratio->min, 1.0);      // OBELICS spans 0.4–3115 tokens/image
  EXPECT_GT(ratio->max, 3000.0);
  EXPECT_GT(ratio->mean, 2 * ratio->p50);  // heavy right tail
}

TEST(GenerateSamples, CocoLlavaMatchesTheRealFiles) {
  const auto p = ComputeDataProfile(Gen("coco-llava", 20000, 3));
  EXPECT_NEAR(MeanOf(p, "text_tokens_per_sample"), 359, 15);
  EXPECT_NEAR(MeanOf(p, "image_megapixels"), 0.275, 0.02);  // COCO val2017 ≈ 574 x 484 px
}

TEST(GenerateSamples, VideoDurationsMixInternVidAndShareGpt4Video) {
  const auto samples = Gen("video", 20000, 4);
  int64_t short_internvid_like = 0;
  for (const auto& s : samples) short_internvid_like += s.videos.at(0).duration_s <= 10 && s.text_tokens < 100;
  // Half the clips are InternVid-like, 85% of which last ≤ 10 s.
  EXPECT_NEAR(short_internvid_like / 20000.0, 0.5 * 0.85, 0.02);
  EXPECT_NEAR(MeanOf(ComputeDataProfile(samples), "video_duration_s"), 0.5 * 5.8 + 0.5 * 27, 1.0);
}

TEST(GenerateSamples, AudioMixesLibriSpeechAndAudioCaps) {
  const auto p = ComputeDataProfile(Gen("audio", 20000, 5));
  EXPECT_NEAR(MeanOf(p, "audio_duration_s"), 0.5 * 7.2 + 0.5 * 10, 0.3);
}

TEST(GenerateSamples, MixedFollowsDflopTable2Proportions) {
  const auto p = ComputeDataProfile(Gen("mixed", 37000, 6));
  EXPECT_NEAR(p.samples_with_videos / 37000.0, 60.0 / 185, 0.01);
  int64_t multi = 0;
  for (const auto& s : Gen("mixed", 37000, 6)) multi += s.images.size() >= 2;
  EXPECT_NEAR(multi / 37000.0, 60.0 / 185, 0.01);
}

TEST(RiseAndFall, BoundsRiseThenFallOverTwentyIterations) {
  EXPECT_EQ(RiseAndFallImageBounds(0).min_images, 0);
  EXPECT_EQ(RiseAndFallImageBounds(0).max_images, 32);
  EXPECT_EQ(RiseAndFallImageBounds(4).min_images, 16);
  EXPECT_EQ(RiseAndFallImageBounds(4).max_images, 32);
  EXPECT_EQ(RiseAndFallImageBounds(19).max_images, 0);
  EXPECT_EQ(RiseAndFallImageBounds(24).min_images, 16);  // the pattern repeats (40 iterations = 2)
  for (int i = 5; i < 20; ++i) {
    EXPECT_LE(RiseAndFallImageBounds(i).max_images, RiseAndFallImageBounds(i - 1).max_images);
    EXPECT_LE(RiseAndFallImageBounds(i).min_images, RiseAndFallImageBounds(i - 1).min_images);
  }
}

TEST(RiseAndFall, EachDocumentFillsOnePackedSequenceWithinTheBounds) {
  const auto model = testing::DipVlm();
  for (int64_t it : {0, 4, 10, 19}) {
    const auto samples = Gen("rise-and-fall", 64, 9, it);
    const auto bounds = RiseAndFallImageBounds(it);
    double images = 0;
    for (const auto& s : samples) {
      EXPECT_GE(static_cast<int>(s.images.size()), bounds.min_images);
      EXPECT_LE(static_cast<int>(s.images.size()), bounds.max_images);
      const int64_t tokens = *SampleLlmTokens(model, s);
      EXPECT_LE(tokens, 8192);
      EXPECT_GE(tokens, 8192 * 0.95 - 1);
      images += s.images.size();
    }
    EXPECT_NEAR(images / samples.size(), 0.5 * (bounds.min_images + bounds.max_images), 2.5) << it;
    auto packed = PackSamples(model, samples, PackingOptions{.context_tokens = 8192, .max_images_per_sequence = 48});
    ASSERT_TRUE(packed.ok());
    EXPECT_EQ(packed->report.sequences, 64);  // one document per sequence
  }
}

}  // namespace
}  // namespace weft::data
