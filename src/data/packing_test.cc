#include "weft/data/packing.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "test_models.h"

namespace weft::data {
namespace {

using testing::DipVlm;

spec::Sample Doc(int64_t id, int text_tokens, int images) {
  spec::Sample s;
  s.id = id;
  s.text_tokens = text_tokens;
  s.images.assign(images, spec::ImageMeta{.width_px = 728, .height_px = 728});
  return s;
}

std::string Describe(const std::vector<spec::Sample>& samples) {
  std::string out;
  for (const auto& s : samples) {
    out += "(" + std::to_string(s.text_tokens) + "," + std::to_string(s.images.size()) + ") ";
  }
  return out;
}

// Checks the invariants every packing must hold; returns the LLM tokens per sample.
void ExpectValidPacking(const PackResult& r, const PackingOptions& o, const spec::ModelSpec& model) {
  std::set<int> seen;
  for (const auto& seq : r.batch.sequences) {
    int64_t tokens = 0;
    int images = 0;
    ASSERT_FALSE(seq.sample_indices.empty());
    for (int i : seq.sample_indices) {
      ASSERT_TRUE(seen.insert(i).second) << "sample " << i << " packed twice";
      tokens += *SampleLlmTokens(model, r.batch.samples[i]);
      images += static_cast<int>(r.batch.samples[i].images.size());
    }
    EXPECT_EQ(tokens, seq.llm_tokens);
    EXPECT_LE(seq.llm_tokens, o.context_tokens);
    if (o.max_images_per_sequence > 0) {
      EXPECT_LE(images, o.max_images_per_sequence);
    }
  }
  EXPECT_EQ(seen.size(), r.batch.samples.size());
}

TEST(PackSamples, NextFitKeepsOrderAndClosesASequenceOnlyWhenTheNextSampleDoesNotFit) {
  const auto model = DipVlm();
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<spec::Sample> samples;
    for (int i = 0; i < 40; ++i) {
      samples.push_back(Doc(i, static_cast<int>(rng() % 3000), static_cast<int>(rng() % 12)));
    }
    PackingOptions o{.context_tokens = 8192, .max_images_per_sequence = 16};
    auto r = PackSamples(model, samples, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    SCOPED_TRACE(Describe(samples));
    ExpectValidPacking(*r, o, model);
    const auto& seqs = r->batch.sequences;
    int expected_next = 0;
    for (size_t k = 0; k < seqs.size(); ++k) {
      for (int i : seqs[k].sample_indices) EXPECT_EQ(i, expected_next++);
      if (k + 1 < seqs.size()) {  // greedy: the first sample of k+1 did not fit into k
        const auto& first = r->batch.samples[seqs[k + 1].sample_indices[0]];
        int images = 0;
        for (int i : seqs[k].sample_indices) images += static_cast<int>(r->batch.samples[i].images.size());
        const bool token_full = seqs[k].llm_tokens + *SampleLlmTokens(model, first) > o.context_tokens;
        const bool image_full = images + static_cast<int>(first.images.size()) > o.max_images_per_sequence;
        EXPECT_TRUE(token_full || image_full);
      }
    }
  }
}

TEST(PackSamples, FirstFitNeverUsesMoreSequencesThanNextFit) {
  const auto model = DipVlm();
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<spec::Sample> samples;
    for (int i = 0; i < 60; ++i) samples.push_back(Doc(i, static_cast<int>(rng() % 5000), static_cast<int>(rng() % 4)));
    PackingOptions next{.context_tokens = 8192};
    PackingOptions first = next;
    first.order = PackingOrder::kFirstFit;
    auto a = PackSamples(model, samples, next);
    auto b = PackSamples(model, samples, first);
    ASSERT_TRUE(a.ok() && b.ok());
    ExpectValidPacking(*b, first, model);
    EXPECT_LE(b->report.sequences, a->report.sequences) << Describe(samples);
    // Lower bound: ⌈Σ tokens / context⌉ sequences.
    EXPECT_GE(b->report.sequences, (b->report.packed_llm_tokens + 8191) / 8192);
  }
}

TEST(PackSamples, DipCapOf48ImagesPerSequence) {
  std::vector<spec::Sample> samples;
  for (int i = 0; i < 100; ++i) samples.push_back(Doc(i, 0, 1));  // 169 tokens each
  auto r = PackSamples(DipVlm(), samples, PackingOptions{.context_tokens = 8192, .max_images_per_sequence = 48});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->report.sequences, 3);
  EXPECT_EQ(r->batch.sequences[0].sample_indices.size(), 48u);
  EXPECT_EQ(r->batch.sequences[0].llm_tokens, 48 * 169);
}

TEST(PackSamples, OversizeTextIsTruncatedButOversizeImagesAreRejected) {
  std::vector<spec::Sample> samples = {Doc(1, 10000, 2), Doc(2, 10, 60), Doc(3, 100, 0)};
  auto r = PackSamples(DipVlm(), samples, PackingOptions{.context_tokens = 8192});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->report.truncated_samples, 1);
  EXPECT_EQ(r->report.truncated_text_tokens, 10000 + 2 * 169 - 8192);
  EXPECT_EQ(r->batch.samples[0].text_tokens, 8192 - 2 * 169);
  EXPECT_THAT(r->report.rejected_ids, ::testing::ElementsAre(2));  // 60·169 > 8192
  EXPECT_EQ(r->report.samples_packed, 2);
  EXPECT_EQ(r->report.sequences, 2);

  auto strict = PackSamples(DipVlm(), samples,
                            PackingOptions{.context_tokens = 8192, .oversize = OversizePolicy::kReject});
  ASSERT_TRUE(strict.ok());
  EXPECT_THAT(strict->report.rejected_ids, ::testing::ElementsAre(1, 2));
  EXPECT_THAT(strict->report.BriefReport(), ::testing::HasSubstr("rejected 2"));
}

TEST(PackSamples, InvalidOptionsAndModelsWithoutAnLlmAreErrors) {
  std::vector<spec::Sample> samples = {Doc(1, 1, 0)};
  auto r = PackSamples(DipVlm(), samples, PackingOptions{.context_tokens = 0});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("packing.context_tokens = 0"));
  spec::ModelSpec no_llm = DipVlm();
  no_llm.modules.pop_back();
  EXPECT_EQ(PackSamples(no_llm, samples).status().code(), StatusCode::kFailedPrecondition);
}

spec::Sample Clip(int64_t id, int text_tokens, double seconds, double fps = 0) {
  spec::Sample s;
  s.id = id;
  s.text_tokens = text_tokens;
  s.videos.push_back({.fps = fps, .duration_s = seconds, .width_px = 728, .height_px = 728});
  return s;
}

TEST(PackSamples, ALongVideoIsFrameSampledToFitTheContextInsteadOfRejected) {
  const auto model = DipVlm();  // 169 LLM tokens per frame
  PackingOptions o;
  o.context_tokens = 8192;
  // 60 s at 2 fps = 120 frames = 20,280 tokens: over the context. With 200 text tokens, the
  // most frames that fit: floor((8192 - 200) / 169) = 47.
  const std::vector<spec::Sample> samples = {Clip(1, 200, 60), Clip(2, 100, 2)};
  auto r = PackSamples(model, samples, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectValidPacking(*r, o, model);
  EXPECT_TRUE(r->report.rejected_ids.empty());
  ASSERT_EQ(r->batch.samples.size(), 2u);
  EXPECT_EQ(r->batch.samples[0].videos[0].frames, 47);
  EXPECT_EQ(*SampleLlmTokens(model, r->batch.samples[0]), 200 + 47 * 169);
  EXPECT_EQ(r->report.frame_sampled_samples, 1);
  EXPECT_EQ(r->report.vit_frames_in, 120 + 4);
  EXPECT_EQ(r->report.vit_frames_packed, 47 + 4);
  EXPECT_EQ(r->report.videos_in, 2);
  EXPECT_EQ(r->report.videos_packed, 2);
  EXPECT_THAT(r->report.BriefReport(), ::testing::HasSubstr("ViT frames 51 of 124"));
  // The old behaviour on request: rejected.
  o.sample_frames_to_fit = false;
  auto rejected = PackSamples(model, samples, o);
  ASSERT_TRUE(rejected.ok());
  EXPECT_EQ(rejected->report.rejected_ids, std::vector<int64_t>{1});
  EXPECT_EQ(rejected->report.frame_sampled_samples, 0);
}

TEST(PackSamples, ATextThatAloneOverflowsIsTruncatedAfterFrameSampling) {
  const auto model = DipVlm();
  PackingOptions o;
  o.context_tokens = 1000;
  // 9,000 text tokens + 10 frames: one frame (169) fits with truncated text.
  const std::vector<spec::Sample> one = {Clip(1, 9000, 5)};
  auto r = PackSamples(model, one, o);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->batch.samples.size(), 1u);
  EXPECT_EQ(r->report.frame_sampled_samples, 1);
  EXPECT_EQ(r->report.truncated_samples, 1);
  EXPECT_LE(*SampleLlmTokens(model, r->batch.samples[0]), 1000);
  EXPECT_GE(r->batch.samples[0].videos[0].frames, 1);
}

TEST(PackSamples, LongDitClipsAreTruncatedOrSplitByTheRule) {
  const auto model = testing::T2v();
  PackingOptions o;
  o.context_tokens = 100000;
  o.max_video_s_per_sequence = 16;
  o.workload.max_dit_video_s = 16;
  const std::vector<spec::Sample> samples = {Clip(7, 50, 40, 16), Clip(8, 50, 10, 16)};
  auto truncated = PackSamples(model, samples, o);
  ASSERT_TRUE(truncated.ok()) << truncated.status().ToString();
  EXPECT_TRUE(truncated->report.rejected_ids.empty());
  ASSERT_EQ(truncated->batch.samples.size(), 2u);
  EXPECT_DOUBLE_EQ(truncated->batch.samples[0].videos[0].duration_s, 16);
  EXPECT_EQ(truncated->batch.samples[0].videos[0].frames, 0);  // derived from duration x fps
  EXPECT_EQ(truncated->report.long_clips, 1);
  EXPECT_DOUBLE_EQ(truncated->report.video_s_in, 50);
  EXPECT_DOUBLE_EQ(truncated->report.video_s_packed, 26);

  o.long_clips = LongClipRule::kSplit;
  auto split = PackSamples(model, samples, o);
  ASSERT_TRUE(split.ok());
  ASSERT_EQ(split->batch.samples.size(), 4u);  // 16 + 16 + 8 s pieces, then the 10-s clip
  std::vector<double> seconds;
  for (const auto& smp : split->batch.samples) {
    EXPECT_EQ(smp.text_tokens, 50);
    seconds.push_back(smp.videos.at(0).duration_s);
  }
  EXPECT_THAT(seconds, ::testing::ElementsAre(16, 16, 8, 10));
  EXPECT_DOUBLE_EQ(split->report.video_s_packed, 50);
  EXPECT_EQ(split->report.videos_packed, 4);
  EXPECT_EQ(ParseLongClipRule("split").value(), LongClipRule::kSplit);
  EXPECT_FALSE(ParseLongClipRule("chop").ok());
}

TEST(MakeBatches, CutsTheSequenceStreamIntoBatchesOfNSequences) {
  std::vector<spec::Sample> samples;
  for (int i = 0; i < 50; ++i) samples.push_back(Doc(i, 4000, 0));  // 2 per 8192 sequence
  BatchingOptions o{.packing = {.context_tokens = 8192}, .sequences_per_batch = 4, .first_iteration = 10};
  auto batches = MakeBatches(DipVlm(), samples, o);
  ASSERT_TRUE(batches.ok());
  ASSERT_EQ(batches->size(), 7u);  // 25 sequences -> 6 full batches + 1 sequence
  for (size_t b = 0; b < batches->size(); ++b) {
    const auto& batch = (*batches)[b];
    EXPECT_EQ(batch.iteration, 10 + static_cast<int64_t>(b));
    EXPECT_EQ(batch.sequences.size(), b + 1 < batches->size() ? 4u : 1u);
    for (const auto& seq : batch.sequences) {
      EXPECT_EQ(seq.llm_tokens, 8000);
      for (int i : seq.sample_indices) ASSERT_LT(i, static_cast<int>(batch.samples.size()));
    }
  }
  EXPECT_EQ((*batches)[1].samples[0].id, 8);  // data order preserved across batches
  o.drop_last = true;
  EXPECT_EQ(MakeBatches(DipVlm(), samples, o)->size(), 6u);
  o.sequences_per_batch = 0;
  EXPECT_FALSE(MakeBatches(DipVlm(), samples, o).ok());
}

}  // namespace
}  // namespace weft::data
