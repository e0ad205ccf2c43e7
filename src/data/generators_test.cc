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

TEST(DflopMixed, CompositionIsDflopTable2) {
  int64_t single = 0, multi = 0, video = 0;
  for (const auto& c : DflopMixedComposition()) {
    (c.kind == "single-image" ? single : c.kind == "multi-image" ? multi : video) += c.samples;
  }
  EXPECT_EQ(DflopMixedComposition().size(), 5u);
  EXPECT_EQ(single, 28000 + 18000 + 19000);  // LLaVA-Wild + AI2D + InfographicVQA
  EXPECT_EQ(multi, 60000);                   // M4-Instruct
  EXPECT_EQ(video, 60000);                   // LLaVA-Video-178K
}

// Over 37,000 samples each kind's share is within 0.01 (≈ 4 standard deviations) of Table 2's.
TEST(DflopMixed, KindsFollowTable2AndShapesStayInRange) {
  const auto samples = Gen("dflop-mixed", 37000, 11);
  int64_t single = 0, multi = 0, video = 0, short_videos = 0, captions = 0;
  double text_total = 0;
  for (const auto& s : samples) {
    ASSERT_GT(s.text_tokens, 0);
    text_total += s.text_tokens;
    ASSERT_TRUE(s.audios.empty());
    ASSERT_TRUE(s.images.empty() != s.videos.empty()) << SampleToJsonLine(s);  // one kind each
    for (const auto& im : s.images) {
      ASSERT_GE(std::min(im.width_px, im.height_px), 64) << SampleToJsonLine(s);
      ASSERT_LE(std::max(im.width_px, im.height_px), 9375)
          << SampleToJsonLine(s);  // InfoVQA's largest
    }
    if (s.images.size() == 1) ++single;
    if (s.images.size() >= 2) {
      ++multi;
      ASSERT_LE(s.images.size(), 16u);
    }
    if (!s.videos.empty()) {
      ++video;
      ASSERT_EQ(s.videos.size(), 1u);
      ASSERT_GE(s.videos[0].duration_s, 2.0);
      ASSERT_LE(s.videos[0].duration_s, 180.0);  // LLaVA-Video-178K's longest bucket: 2–3 min
      short_videos += s.videos[0].duration_s <= 30.0;
      captions += s.text_tokens > 300;  // detailed captions (≈726 tokens) vs QA (≈55)
    }
  }
  const double n = static_cast<double>(samples.size());
  EXPECT_NEAR(single / n, 65.0 / 185, 0.01);
  EXPECT_NEAR(multi / n, 60.0 / 185, 0.01);
  EXPECT_NEAR(video / n, 60.0 / 185, 0.01);
  // Dataset card rows: 618.0k of 1,372.9k are 0–30 s clips; captions are 12.0k of 66.25k rows.
  EXPECT_NEAR(static_cast<double>(short_videos) / video, 618.0 / 1372.9, 0.015);
  EXPECT_NEAR(static_cast<double>(captions) / video, 12.0 / 66.25, 0.015);
  // Mean text tokens of the mix from the per-source means (docs/data.md): (28·359 + 18·45 +
  // 19·1.58·27.08 + 60·150 + 60·(0.181·726.1 + 0.819·55)) / 185 ≈ 169.
  EXPECT_NEAR(text_total / n, 169.0, 6.0);
}

TEST(DflopMixed, DeterministicPerSeed) {
  EXPECT_EQ(SamplesToJsonl(Gen("dflop-mixed", 500, 3)), SamplesToJsonl(Gen("dflop-mixed", 500, 3)));
  EXPECT_NE(SamplesToJsonl(Gen("dflop-mixed", 500, 3)), SamplesToJsonl(Gen("dflop-mixed", 500, 4)));
}

TEST(GenerateSamples, ScienceQaHasAnImageForHalfTheQuestions) {
  const auto p = ComputeDataProfile(Gen("scienceqa", 40000, 7));
  EXPECT_NEAR(p.samples_with_images / 40000.0, 0.487, 0.01);  // 10,332 of 21,208
  EXPECT_NEAR(MeanOf(p, "text_tokens_per_sample"), 260, 8);
}

// DIP §7.1 VLM data: LAION pairs, OBELICS documents and ScienceQA questions in the stated
// per-sample shares (78.74 / 11.79 / 9.48%, i.e. ≈45 / 45 / 10% of LLM tokens), every image at
// 728 px = 169 LLM tokens, and packed sequences of at most 48 images.
TEST(DipVlm, MixesTheThreeSourcesInTheStatedSharesWith728PxImages) {
  const int64_t n = 60000;
  const auto samples = Gen("dip-vlm", n, 11, 2);
  const auto model = testing::DipVlm();
  int64_t laion = 0, obelics = 0, sqa = 0;
  double tokens[3] = {0, 0, 0};
  for (const auto& s : samples) {
    ASSERT_TRUE(s.videos.empty());
    for (const auto& im : s.images) {
      ASSERT_EQ(im.width_px, 728);
      ASSERT_EQ(im.height_px, 728);
    }
    // Source by shape: LAION = 1 image + a caption under 100 tokens; ScienceQA = at most one
    // image with a question (a few overlap, hence the tolerance); OBELICS = the rest.
    const int k = s.images.size() == 1 && s.text_tokens < 100 ? 0
                  : s.images.size() <= 1                       ? 2
                                                               : 1;
    (k == 0 ? laion : k == 1 ? obelics : sqa) += 1;
    tokens[k] += static_cast<double>(*SampleLlmTokens(model, s));
  }
  // OBELICS documents with one image and ScienceQA questions with an image and long text look
  // alike; compare the image-count classes the shares imply instead of the raw labels.
  EXPECT_NEAR(laion / static_cast<double>(n), 0.7874, 0.02);
  EXPECT_NEAR((obelics + sqa) / static_cast<double>(n), 0.1179 + 0.0948, 0.02);
  const double total = tokens[0] + tokens[1] + tokens[2];
  EXPECT_NEAR(tokens[0] / total, 0.45, 0.04);
  EXPECT_NEAR((tokens[1] + tokens[2]) / total, 0.55, 0.04);
  const auto p = ComputeDataProfile(samples);
  int64_t multi = 0;
  for (const auto& s : samples) multi += s.images.size() >= 2;
  // OBELICS documents have ≥ 2 images with probability 1.5/2.5 = 0.6 (geometric, mean 1.5 extra).
  EXPECT_NEAR(multi / static_cast<double>(n), 0.1179 * 0.6, 0.01);
  EXPECT_NEAR(MeanOf(p, "images_per_sample"), 0.7874 + 0.1179 * 2.5 + 0.0948 * 0.487, 0.03);
  auto packed = PackSamples(model, samples,
                            PackingOptions{.context_tokens = 8192, .max_images_per_sequence = 48});
  ASSERT_TRUE(packed.ok()) << packed.status().ToString();
  EXPECT_TRUE(packed->report.rejected_ids.empty());
  for (const auto& seq : packed->batch.sequences) {
    int images = 0;
    for (int64_t i : seq.sample_indices) images += static_cast<int>(packed->batch.samples[i].images.size());
    EXPECT_LE(images, 48);
    EXPECT_LE(seq.llm_tokens, 8192);
  }
}

// DIP §7.1 T2V data: 16-fps clips of at most 16 s at 768 px; one clip per sample; the `video`
// profile's durations cut at 16 s.
TEST(DipT2v, ClipsAre16FpsAndAtMost16Seconds) {
  const int64_t n = 20000;
  const auto samples = Gen("dip-t2v", n, 12, 1);
  int64_t at_cap = 0, short_internvid_like = 0;
  double seconds = 0;
  for (const auto& s : samples) {
    ASSERT_EQ(s.videos.size(), 1u);
    ASSERT_TRUE(s.images.empty());
    const auto& v = s.videos[0];
    EXPECT_EQ(v.fps, 16.0);
    EXPECT_GE(v.frames, 1);
    EXPECT_LE(v.frames, 256);
    EXPECT_DOUBLE_EQ(v.duration_s, v.frames / 16.0);
    EXPECT_LE(v.duration_s, 16.0);
    EXPECT_EQ(v.width_px, 768);
    EXPECT_EQ(v.height_px, 768);
    at_cap += v.frames == 256;
    short_internvid_like += v.duration_s <= 10 && s.text_tokens < 100;
    seconds += v.duration_s;
  }
  // InternVid-like half: 85% ≤ 10 s; P(> 16 s) ≈ 5%. ShareGPT4Video-like half: log-normal mean
  // 27 s, σ 0.5 => P(> 16 s) ≈ 79%. So ≈ 0.5·0.05 + 0.5·0.79 = 42% of clips are cut to 16 s.
  EXPECT_NEAR(short_internvid_like / static_cast<double>(n), 0.5 * 0.85, 0.02);
  EXPECT_NEAR(at_cap / static_cast<double>(n), 0.42, 0.03);
  EXPECT_GT(seconds / n, 8.0);
  EXPECT_LT(seconds / n, 12.0);
  // A 16-s clip is MovieGen's 73K-token context: 256 frames / 8 · (768 / 8 / 2)² = 73,728.
  spec::ModuleSpec dit = testing::T2v().modules[1];
  dit.vae_temporal_downsample = 8;
  spec::VideoMeta full{.frames = 256, .fps = 16, .duration_s = 16, .width_px = 768, .height_px = 768};
  EXPECT_EQ(*DitLatentTokensForVideo(dit, full), 73728);
}

TEST(DipProfiles, DeterministicPerSeedAndIteration) {
  for (std::string_view profile : {"dip-vlm", "dip-t2v", "scienceqa"}) {
    EXPECT_EQ(SamplesToJsonl(Gen(profile, 300, 5, 7)), SamplesToJsonl(Gen(profile, 300, 5, 7)));
    EXPECT_NE(SamplesToJsonl(Gen(profile, 300, 5, 7)), SamplesToJsonl(Gen(profile, 300, 5, 8)));
  }
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

// FlowTrain's InfoVQA workload: one tall infographic per sample inside InfographicVQA's published
// size range, 1.58 QA turns on average (≈ 27 tokens each), reproducible per seed.
TEST(InfoVqa, OneInfographicPerSampleInThePublishedRange) {
  const auto samples = Gen("infovqa", 4000, 5);
  double turns_tokens = 0, aspect_above_1 = 0;
  for (const auto& s : samples) {
    ASSERT_EQ(s.images.size(), 1u);
    ASSERT_TRUE(s.videos.empty() && s.audios.empty());
    const auto& im = s.images[0];
    ASSERT_GE(im.width_px, 600);
    ASSERT_LE(im.width_px, 6250);
    ASSERT_GE(im.height_px, 340);
    ASSERT_LE(im.height_px, 9375);
    aspect_above_1 += im.height_px > im.width_px;
    turns_tokens += s.text_tokens;
  }
  EXPECT_GT(aspect_above_1 / samples.size(), 0.8);  // infographics are tall
  EXPECT_NEAR(turns_tokens / samples.size(), 1.58 * 27.1, 6.0);
  EXPECT_EQ(SamplesToJsonl(Gen("infovqa", 100, 3)), SamplesToJsonl(Gen("infovqa", 100, 3)));
}

// DFLOP Fig. 11's two single-source datasets: M4-Instruct's multi-image rows (2 + geometric(2)
// images, at most 16) and LLaVA-Video-178K's rows (one clip in the card's 2–180 s buckets).
TEST(DflopSubsets, MultiImageAndVideoAreTheirRowsAlone) {
  const auto multi = Gen("dflop-multi-image", 4000, 5);
  double images = 0;
  for (const auto& s : multi) {
    ASSERT_GE(s.images.size(), 2u);
    ASSERT_LE(s.images.size(), 16u);
    ASSERT_TRUE(s.videos.empty() && s.audios.empty());
    images += static_cast<double>(s.images.size());
  }
  EXPECT_NEAR(images / multi.size(), 4.0, 0.2);  // 2 + mean 2.0
  const auto video = Gen("dflop-video", 4000, 5);
  double long_share = 0;
  for (const auto& s : video) {
    ASSERT_TRUE(s.images.empty());
    ASSERT_EQ(s.videos.size(), 1u);
    ASSERT_GE(s.videos[0].duration_s, 2.0);
    ASSERT_LE(s.videos[0].duration_s, 180.0);
    long_share += s.videos[0].duration_s > 60 ? 1 : 0;
  }
  // Card rows per bucket: 0–30 s 618.0k, 30–60 s 274.1k, 1–2 min 246.5k, 2–3 min 234.3k.
  EXPECT_NEAR(long_share / video.size(), (246.5 + 234.3) / (618.0 + 274.1 + 246.5 + 234.3), 0.03);
  EXPECT_EQ(SamplesToJsonl(Gen("dflop-video", 100, 3)), SamplesToJsonl(Gen("dflop-video", 100, 3)));
}

}  // namespace
}  // namespace weft::data
