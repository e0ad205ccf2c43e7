#include "weft/data/workload.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_models.h"

namespace weft::data {
namespace {

using ::testing::ElementsAre;
using testing::DipVlm;

spec::Sample ImageSample(int64_t id, int text_tokens, int num_images, int w = 1024, int h = 768) {
  spec::Sample s;
  s.id = id;
  s.text_tokens = text_tokens;
  s.images.assign(num_images, spec::ImageMeta{.width_px = w, .height_px = h});
  return s;
}

TEST(VitTokens, DipSettingGives169LlmTokensPerImage) {
  const auto vit = DipVlm().modules[0];
  spec::ImageMeta image{.width_px = 1920, .height_px = 1080};
  EXPECT_EQ(*VitPatchTokensForImage(vit, image), 52 * 52);  // 728/14 = 52 per side
  EXPECT_EQ(*LlmTokensForImage(vit, image), 169);
  // ⌈8192/169⌉ = 49 > 48: DIP's 48-image cap per 8192-token sequence.
  EXPECT_EQ(8192 / *LlmTokensForImage(vit, image), 48);
}

TEST(VitTokens, UnknownImageSizeUsesTheModelsFixedSize) {
  const auto vit = DipVlm().modules[0];
  EXPECT_EQ(*LlmTokensForImage(vit, spec::ImageMeta{}), 169);
}

TEST(VitTokens, GivenPatchTokensOverrideTheSize) {
  const auto vit = DipVlm().modules[0];
  spec::ImageMeta image{.width_px = 100, .height_px = 100, .patch_tokens = 320};
  EXPECT_EQ(*VitPatchTokensForImage(vit, image), 320);
  EXPECT_EQ(*LlmTokensForImage(vit, image), 20);  // 320 / 16
}

TEST(VitTokens, NativeRuleRoundsSidesToPatchTimesMerge) {
  const auto vit = testing::NativeVit();
  // 1000x700 -> sides rounded to multiples of 28: 1008 x 700 -> 72 x 50 patches.
  spec::ImageMeta image{.width_px = 1000, .height_px = 700};
  EXPECT_EQ(*VitPatchTokensForImage(vit, image), 72 * 50);
  EXPECT_EQ(*LlmTokensForImage(vit, image), 36 * 25);  // merged 2x2
}

TEST(VitTokens, NativeRuleCapsTheAreaAtMaxPixels) {
  const auto vit = testing::NativeVit(/*max_pixels=*/1003520);  // ≈1 MP
  spec::ImageMeta image{.width_px = 4000, .height_px = 3000};
  const int64_t patches = *VitPatchTokensForImage(vit, image);
  EXPECT_LE(patches * 14 * 14, 1003520);
  EXPECT_GT(patches * 14 * 14, 1003520 * 0.8);
}

TEST(VitTokens, FixedRuleWithoutImageSizeIsAnError) {
  auto vit = DipVlm().modules[0];
  vit.image_size_px = 0;
  auto tokens = LlmTokensForImage(vit, spec::ImageMeta{.width_px = 10, .height_px = 10});
  ASSERT_FALSE(tokens.ok());
  EXPECT_THAT(tokens.status().message(), ::testing::HasSubstr("image_size_px = 0"));
}

// LLaVA-OneVision AnyRes (hand-computed; docs/spec.md "From Hugging Face"). 1000 x 700: every
// pinpoint of at least 768 x 1152 keeps the whole image; 768 x 1152 wastes the least, so 2 x 3
// tiles + the base crop = 7 ViT passes of 27 x 27 = 729 patches. LLM: the tiles' 54 x 81 feature
// map, unpadded to 54 x 77 (1000 · 54 / 700 = 77.1 -> 77; padding (81 - 77) / 2 = 2 a side),
// one newline per row, plus the base crop: 729 + 54 · 77 + 54 = 4941 (ratio sqrt(4158 / (9 ·
// 729)) = 0.80 <= 1.1: no downsampling).
TEST(VitTokens, AnyResPicksTheBestFitPinpointAndUnpads) {
  const auto vit = testing::AnyResVit();
  spec::ImageMeta image{.width_px = 1000, .height_px = 700};
  EXPECT_EQ(*VitCropsForImage(vit, image), 7);
  EXPECT_EQ(*VitPatchTokensForImage(vit, image), 7 * 729);
  EXPECT_EQ(*LlmTokensForImage(vit, image), 4941);
  // Portrait 700 x 1000: 3 x 2 tiles, padding rows removed: 729 + 77 · 54 + 77 = 4964.
  EXPECT_EQ(*LlmTokensForImage(vit, {.width_px = 700, .height_px = 1000}), 4964);
  // A 384 px square: the 1 x 1 pinpoint + base = 2 crops, 729 + 27 · 27 + 27 = 1485.
  EXPECT_EQ(*VitCropsForImage(vit, {.width_px = 384, .height_px = 384}), 2);
  EXPECT_EQ(*LlmTokensForImage(vit, {.width_px = 384, .height_px = 384}), 1485);
}

// anyres_max_9: 2000 x 1500 needs 1536 x 2304 (4 x 6 tiles, 25 ViT passes); the 108 x 162 map
// unpads to 108 x 144 (2000 · 108 / 1500 = 144), 15552 features = 21.3 tiles' worth; ratio =
// sqrt(15552 / 6561) = 1.5396 > 1.1, so it is downsampled to floor(108 / 1.5396) = 70 by
// floor(144 / 1.5396) = 93: 729 + 70 · 93 + 70 = 7309. Without the cap: 729 + 15552 + 108.
TEST(VitTokens, AnyResMaxDownsamplesFeaturesPastNTiles) {
  auto vit = testing::AnyResVit();
  spec::ImageMeta image{.width_px = 2000, .height_px = 1500};
  EXPECT_EQ(*VitCropsForImage(vit, image), 25);
  EXPECT_EQ(*VitPatchTokensForImage(vit, image), 25 * 729);
  EXPECT_EQ(*LlmTokensForImage(vit, image), 7309);
  vit.anyres_max_tiles = 0;
  EXPECT_EQ(*LlmTokensForImage(vit, image), 729 + 108 * 144 + 108);
}

// InternVL dynamic tiles. 1000 x 700 (aspect 1.43): of the grids with 1..12 tiles, 3 x 2 (1.5)
// is the closest, so 6 tiles + a thumbnail = 7 ViT passes of 32 x 32 = 1024 patches and 7 · 256
// = 1792 LLM tokens. 1000 x 1000: 1 x 1, 2 x 2 and 3 x 3 tie on aspect; a larger grid wins while
// the image has more than half its pixels (10^6 > 0.5 · 448² · 9 = 903168), so 3 x 3 + thumbnail
// = 10 tiles. 448 x 448 ties the same way but stays 1 x 1 (200704 < 0.5 · 448² · 4): no thumbnail.
TEST(VitTokens, DynamicTilesPickTheClosestAspectRatioPlusThumbnail) {
  const auto vit = testing::DynamicTileVit();
  spec::ImageMeta image{.width_px = 1000, .height_px = 700};
  EXPECT_EQ(*VitCropsForImage(vit, image), 7);
  EXPECT_EQ(*VitPatchTokensForImage(vit, image), 7 * 1024);
  EXPECT_EQ(*LlmTokensForImage(vit, image), 1792);
  EXPECT_EQ(*LlmTokensForImage(vit, {.width_px = 1000, .height_px = 1000}), 10 * 256);
  EXPECT_EQ(*LlmTokensForImage(vit, {.width_px = 448, .height_px = 448}), 256);
  auto no_thumbnail = vit;
  no_thumbnail.thumbnail = false;
  EXPECT_EQ(*LlmTokensForImage(no_thumbnail, image), 6 * 256);
}

// Qwen2.5-VL windows: 1000 x 700 -> 1008 x 700 -> 72 x 50 patches = 36 x 25 merged units; 112 px
// windows are 4 x 4 merged units (64 patches): rows 6·4 + 1, columns 9·4, so Σw² = 2^4 · (6 · 16
// + 1) · (9 · 16) = 223488 (full attention: 3600² = 12960000).
TEST(DeriveModuleWorkload, WindowAttentionVitCarriesItsWindowsSumOfSquares) {
  spec::ModelSpec model = testing::DipVlm();
  model.modules[0] = testing::NativeVit();
  model.modules[0].attention_window_px = 112;
  spec::Batch batch;
  batch.samples = {ImageSample(0, 10, 1, 1000, 700)};
  const std::vector<int> all = {0};
  auto vit = DeriveModuleWorkload(model, 0, batch, all);
  ASSERT_TRUE(vit.ok()) << vit.status().ToString();
  ASSERT_EQ(vit->NumInstances(), 1);
  EXPECT_THAT(vit->instances[0].segment_tokens, ElementsAre(3600));
  EXPECT_DOUBLE_EQ(vit->instances[0].window_sum_squared, 223488);
  EXPECT_DOUBLE_EQ(vit->WindowSumSquaredTokens(), 223488);
  EXPECT_DOUBLE_EQ(vit->SumSquaredTokens(), 3600.0 * 3600);
  // The projector (and LLM) attend as usual: no windows there.
  auto proj = DeriveModuleWorkload(model, 1, batch, all);
  ASSERT_TRUE(proj.ok());
  EXPECT_DOUBLE_EQ(proj->WindowSumSquaredTokens(), 0);
  // A 2 s clip at 2 fps = 4 frames = 2 temporal slices of the same windows.
  spec::Batch video;
  video.samples.resize(1);
  video.samples[0].videos = {{.duration_s = 2, .width_px = 1000, .height_px = 700}};
  auto clip = DeriveModuleWorkload(model, 0, video, all);
  ASSERT_TRUE(clip.ok());
  EXPECT_DOUBLE_EQ(clip->WindowSumSquaredTokens(), 2 * 223488.0);
}

TEST(DeriveModuleWorkload, TiledImageIsOneVitInstancePerCropAndOneProjectorInstance) {
  spec::ModelSpec model = testing::DipVlm();
  model.modules[0] = testing::AnyResVit();
  spec::Batch batch;
  batch.samples = {ImageSample(0, 10, 1, 1000, 700)};
  const std::vector<int> all = {0};
  auto vit = DeriveModuleWorkload(model, 0, batch, all);
  ASSERT_TRUE(vit.ok()) << vit.status().ToString();
  ASSERT_EQ(vit->NumInstances(), 7);
  for (const auto& instance : vit->instances) {
    EXPECT_THAT(instance.segment_tokens, ElementsAre(729));
    EXPECT_EQ(instance.item, 0);  // all crops belong to the one image
  }
  auto proj = DeriveModuleWorkload(model, 1, batch, all);
  ASSERT_TRUE(proj.ok());
  ASSERT_EQ(proj->NumInstances(), 1);
  EXPECT_THAT(proj->instances[0].segment_tokens, ElementsAre(4941));
  EXPECT_EQ(*SampleLlmTokens(model, batch.samples[0]), 10 + 4941);
}

TEST(VideoTokens, FramesComeFromDurationTimesFpsThenTemporalPatch) {
  const auto vit = testing::NativeVit();
  spec::VideoMeta video{.frames = 0, .fps = 2.0, .duration_s = 10.0, .width_px = 448, .height_px = 448};
  EXPECT_EQ(VitFramesForVideo(video), 20);
  EXPECT_EQ(*VitPatchTokensForVideo(vit, video), 10 * 32 * 32);  // 20 frames / 2, 448/14 = 32
  EXPECT_EQ(*LlmTokensForVideo(vit, video), 10 * 16 * 16);
  EXPECT_EQ(VitFramesForVideo(video, WorkloadOptions{.max_vit_video_frames = 8}), 8);
}

TEST(DitTokens, LatentTokensFollowVaeDownsampleThenPatch) {
  const auto dit = testing::T2v().modules[1];
  // 16 s at 16 fps, 512x512: 256 frames -> 64 latent frames, 64x64 latents -> 32x32 patches.
  spec::VideoMeta video{.duration_s = 16.0, .width_px = 512, .height_px = 512};
  EXPECT_EQ(*DitLatentTokensForVideo(dit, video), 64 * 32 * 32);
  // Longer clips are trimmed to 16 s; native 30 fps frame counts are transcoded to 16 fps.
  spec::VideoMeta long_clip{.duration_s = 30.0, .width_px = 512, .height_px = 512};
  EXPECT_EQ(*DitLatentTokensForVideo(dit, long_clip), 64 * 32 * 32);
  spec::VideoMeta native{.frames = 240, .fps = 30, .width_px = 512, .height_px = 512};
  EXPECT_EQ(*DitLatentTokensForVideo(dit, native), 32 * 32 * 32);  // 8 s -> 128 frames
  EXPECT_EQ(*DitLatentTokensForVideo(dit, long_clip, WorkloadOptions{.max_dit_video_s = 0}),
            120 * 32 * 32);  // no limit: 480 frames -> 120 latent frames
}

TEST(AudioTokens, WhisperPadsEveryWindowTo30Seconds) {
  const auto audio = testing::Whisper();
  EXPECT_EQ(AudioMelFrames(audio, {.duration_s = 7.18}), 718);
  EXPECT_THAT(*AudioEncoderWindowTokens(audio, {.duration_s = 7.18}), ElementsAre(1500));
  EXPECT_THAT(*AudioEncoderWindowTokens(audio, {.duration_s = 45.0}), ElementsAre(1500, 1500));
  EXPECT_THAT(*AudioEncoderWindowTokens(audio, {.duration_s = 45.0},
                                        WorkloadOptions{.pad_audio_to_window = false}),
              ElementsAre(1500, 750));
  EXPECT_EQ(*LlmTokensForAudio(audio, {.duration_s = 7.18}), 359);
  EXPECT_EQ(*LlmTokensForAudio(audio, {.duration_s = 0}), 0);
}

// Qwen2-Audio: 100 mel frames/s -> conv stride 2 -> 50 positions/s -> AvgPool1d(2) -> 25 LLM
// tokens/s. A 30 s clip is one window of 1500 positions (the encoder's work) and 750 LLM tokens;
// 10 s: 1000 frames -> 500 -> 250; 45 s: windows of 1500 and 750 positions -> 750 + 375.
TEST(AudioTokens, OutputPoolingHalvesTheTokensHandedOn) {
  auto audio = testing::Whisper();
  audio.output_pool = 2;
  EXPECT_THAT(*AudioEncoderWindowTokens(audio, {.duration_s = 30.0}), ElementsAre(1500));
  EXPECT_EQ(*LlmTokensForAudio(audio, {.duration_s = 30.0}), 750);
  EXPECT_EQ(*LlmTokensForAudio(audio, {.duration_s = 10.0}), 250);
  EXPECT_EQ(*LlmTokensForAudio(audio, {.duration_s = 45.0}), 750 + 375);
  spec::ModelSpec model = testing::VisionAudioLlm();
  model.modules[3].output_pool = 2;
  spec::Sample s;
  s.text_tokens = 10;
  s.audios = {{.duration_s = 30.0}};
  EXPECT_EQ(*SampleLlmTokens(model, s), 10 + 750);
}

TEST(SampleLlmTokens, IsTextPlusMergedImageTokens) {
  EXPECT_EQ(*SampleLlmTokens(DipVlm(), ImageSample(1, 100, 3)), 100 + 3 * 169);
}

TEST(SampleLlmTokens, IgnoresModalitiesWithoutAnEncoderReachingTheLlm) {
  spec::Sample s = ImageSample(1, 10, 1);
  s.audios.push_back({.duration_s = 5});
  EXPECT_EQ(*SampleLlmTokens(DipVlm(), s), 10 + 169);
  EXPECT_EQ(*SampleLlmTokens(testing::VisionAudioLlm(), s), 10 + 169 + 250);
}

TEST(LlmTokenCounter, CountsAsSampleLlmTokensAndRefusesANonModule) {
  const spec::ModelSpec model = testing::VisionAudioLlm();
  const int llm = FirstLlmModule(model);
  auto counter = LlmTokenCounter::Create(model, llm);
  ASSERT_TRUE(counter.ok()) << counter.status().ToString();
  spec::Sample with_audio = ImageSample(3, 10, 1);
  with_audio.audios.push_back(spec::AudioMeta{.duration_s = 5});
  for (const spec::Sample& s : {ImageSample(1, 100, 3), ImageSample(2, 0, 0), with_audio}) {
    EXPECT_EQ(*counter->Tokens(s), *SampleLlmTokens(model, llm, s)) << "sample " << s.id;
  }
  EXPECT_EQ(*counter->Tokens(with_audio), 10 + 169 + 250);
  EXPECT_FALSE(LlmTokenCounter::Create(model, -1).ok());
  EXPECT_FALSE(LlmTokenCounter::Create(model, static_cast<int>(model.modules.size())).ok());
}

TEST(DeriveModuleWorkload, LlmInstancesArePackedSequencesWithSampleSegments) {
  spec::Batch batch;
  batch.samples = {ImageSample(0, 100, 1), ImageSample(1, 50, 2), ImageSample(2, 7, 0)};
  batch.sequences = {{.sample_indices = {0, 1}}, {.sample_indices = {2}}};
  const std::vector<int> seqs = {0, 1};
  auto llm = DeriveModuleWorkload(DipVlm(), 2, batch, seqs);
  ASSERT_TRUE(llm.ok()) << llm.status().ToString();
  ASSERT_EQ(llm->NumInstances(), 2);
  EXPECT_THAT(llm->instances[0].segment_tokens, ElementsAre(269, 388));
  EXPECT_THAT(llm->instances[1].segment_tokens, ElementsAre(7));
  EXPECT_EQ(llm->TotalTokens(), 269 + 388 + 7);
  EXPECT_DOUBLE_EQ(llm->SumSquaredTokens(), 269.0 * 269 + 388.0 * 388 + 49);
}

TEST(DeriveModuleWorkload, ASampleBeyondInt32LlmTokensIsAnErrorNamingIt) {
  spec::Batch batch;
  // 20 images of 2·10^9 patch tokens: 1.25·10^8 LLM tokens each, 2.5·10^9 with the text.
  batch.samples = {ImageSample(7, 100, 20)};
  for (auto& image : batch.samples[0].images) image.patch_tokens = 2'000'000'000;
  const std::vector<int> seqs = {0};
  auto llm = DeriveModuleWorkload(DipVlm(), 2, batch, seqs);
  ASSERT_FALSE(llm.ok());
  EXPECT_EQ(llm.status().message(), "sample 7 has 2500000100 tokens; must fit in int32");
  auto vit = DeriveModuleWorkload(DipVlm(), 0, batch, seqs);  // each image fits on its own
  ASSERT_TRUE(vit.ok()) << vit.status().ToString();
  EXPECT_EQ(vit->NumInstances(), 20);
}

TEST(DeriveModuleWorkload, VitHasOneInstancePerImageAndProjectorSeesMergedTokens) {
  spec::Batch batch;
  batch.samples = {ImageSample(0, 100, 1), ImageSample(1, 50, 2)};
  const std::vector<int> seqs = {0, 1};  // unpacked: one sequence per sample
  auto vit = DeriveModuleWorkload(DipVlm(), 0, batch, seqs);
  ASSERT_TRUE(vit.ok());
  EXPECT_EQ(vit->NumInstances(), 3);
  EXPECT_EQ(vit->TotalTokens(), 3 * 2704);
  auto proj = DeriveModuleWorkload(DipVlm(), 1, batch, seqs);
  ASSERT_TRUE(proj.ok());
  EXPECT_EQ(proj->NumInstances(), 3);
  EXPECT_EQ(proj->TotalTokens(), 3 * 169);
}

TEST(DeriveModuleWorkload, FrameWiseImageEncoderGetsOneInstancePerVideoFrame) {
  spec::Batch batch;
  spec::Sample s;
  s.videos.push_back({.frames = 8, .width_px = 640, .height_px = 480});
  batch.samples = {s};
  const std::vector<int> seqs = {0};
  auto vit = DeriveModuleWorkload(DipVlm(), 0, batch, seqs);
  ASSERT_TRUE(vit.ok());
  EXPECT_EQ(vit->NumInstances(), 8);
  EXPECT_EQ(*SampleLlmTokens(DipVlm(), s), 8 * 169);
}

TEST(DeriveModuleWorkload, AudioEncoderAndDitWorkloads) {
  spec::Batch batch;
  spec::Sample s;
  s.text_tokens = 12;
  s.audios.push_back({.duration_s = 31});
  s.videos.push_back({.frames = 64, .width_px = 256, .height_px = 256});
  batch.samples = {s};
  const std::vector<int> seqs = {0};
  auto audio = DeriveModuleWorkload(testing::VisionAudioLlm(), 3, batch, seqs);
  ASSERT_TRUE(audio.ok());
  EXPECT_EQ(audio->NumInstances(), 2);  // 31 s -> two padded windows
  EXPECT_EQ(audio->TotalTokens(), 3000);
  auto aproj = DeriveModuleWorkload(testing::VisionAudioLlm(), 4, batch, seqs);
  ASSERT_TRUE(aproj.ok());
  EXPECT_EQ(aproj->TotalTokens(), 1550);  // unpadded 3100 frames / 2
  auto dit = DeriveModuleWorkload(testing::T2v(), 1, batch, seqs);
  ASSERT_TRUE(dit.ok());
  EXPECT_EQ(dit->TotalTokens(), 16 * 16 * 16);  // 64/4 latent frames, 256/8/2 = 16 per side
  auto text = DeriveModuleWorkload(testing::T2v(), 0, batch, seqs);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->TotalTokens(), 12);  // the DiT's video never reaches the text encoder
}

TEST(DeriveModuleWorkload, RejectsOutOfRangeIndicesNamingTheField) {
  spec::Batch batch;
  batch.samples = {ImageSample(0, 1, 1)};
  batch.sequences = {{.sample_indices = {0, 5}}};
  const std::vector<int> bad_seq = {3};
  auto r = DeriveModuleWorkload(DipVlm(), 2, batch, bad_seq);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("sequence_indices[0] = 3"));
  const std::vector<int> seq0 = {0};
  r = DeriveModuleWorkload(DipVlm(), 2, batch, seq0);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("batch.sequences[0].sample_indices[1] = 5"));
  r = DeriveModuleWorkload(DipVlm(), 9, batch, seq0);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("module = 9"));
}

}  // namespace
}  // namespace weft::data
