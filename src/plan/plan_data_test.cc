#include "weft/plan/plan_data.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "weft/data/workload.h"
#include "weft/spec/preset.h"

namespace weft::plan {
namespace {

spec::ModelSpec Model(std::string_view name) {
  auto preset = spec::LoadModel(name);
  EXPECT_TRUE(preset.ok()) << preset.status().ToString();
  return preset->model;
}

// 4 samples: sample i has i % 2 + 1 images of 56 px and one audio clip of 0.7 + 0.9 i seconds
// (clips longer than the 1 s window of tiny-valm span two windows), packed two per sequence.
spec::Batch ValmBatch() {
  spec::Batch batch;
  batch.iteration = 3;
  for (int i = 0; i < 4; ++i) {
    spec::Sample s;
    s.id = 40 + i;
    s.text_tokens = 10 + i;
    for (int k = 0; k <= i % 2; ++k) s.images.push_back({.width_px = 56, .height_px = 56});
    s.audios.push_back({.duration_s = 0.7 + 0.9 * i});
    batch.samples.push_back(s);
  }
  for (int q = 0; q < 2; ++q) {
    spec::PackedSequence seq;
    seq.sample_indices = {2 * q + 1, 2 * q};  // packing order need not be sample order
    for (int i : seq.sample_indices) {
      seq.llm_tokens += *data::SampleLlmTokens(Model("tiny-valm"), batch.samples[i]);
    }
    batch.sequences.push_back(seq);
  }
  return batch;
}

std::vector<ChunkData> AllModules(const spec::ModelSpec& model) {
  std::vector<ChunkData> chunks;
  for (int m = 0; m < static_cast<int>(model.modules.size()); ++m) {
    chunks.push_back({.module = m, .chunk = 0, .first_layer = 0,
                      .num_layers = model.modules[m].num_layers, .module_replica = 0});
  }
  return chunks;
}

TEST(MakePlanData, ShipsTheWorkloadDerivationOfEveryPlacedModule) {
  const spec::ModelSpec model = Model("tiny-valm");
  const spec::Batch batch = ValmBatch();
  const data::WorkloadOptions workload;  // pads audio windows (Whisper)
  // Two replicas of one microbatch each; a world plan of 1 rank per replica.
  auto d = MakePlanData(model, batch, {{{0}}, {{1}}},
                        {{.replica = 0, .group = 0, .chunks = AllModules(model)},
                         {.replica = 1, .group = 0, .chunks = AllModules(model)}},
                        workload);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_EQ(d->samples.size(), 4u);
  EXPECT_EQ(d->samples[2].id, 42);
  EXPECT_EQ(d->samples[2].text_tokens, 12);
  ASSERT_EQ(d->sequences.size(), 2u);
  EXPECT_EQ(d->sequences[1].samples, (std::vector<int32_t>{3, 2}));
  EXPECT_EQ(d->sequences[1].llm_tokens, batch.sequences[1].llm_tokens);
  ASSERT_EQ(d->microbatches.size(), 2u);
  EXPECT_EQ(d->FindMicrobatch(1, 0), 1);
  EXPECT_EQ(d->FindMicrobatch(1, 1), -1);
  EXPECT_EQ(d->FindMicrobatch(2, 0), -1);
  const int audio = *model.FindModule("audio");
  for (int index = 0; index < 2; ++index) {
    const MicrobatchData& mb = d->microbatches[index];
    EXPECT_EQ(mb.replica, index);
    EXPECT_EQ(mb.microbatch, 0);
    EXPECT_EQ(mb.sequences, (std::vector<int32_t>{index}));
    ASSERT_EQ(mb.instances.size(), model.modules.size());
    for (int m = 0; m < static_cast<int>(model.modules.size()); ++m) {
      auto want = data::DeriveModuleWorkload(model, m, batch, std::vector<int>{index}, workload);
      ASSERT_TRUE(want.ok());
      ASSERT_EQ(mb.instances[m].size(), want->instances.size()) << model.modules[m].name;
      for (size_t k = 0; k < want->instances.size(); ++k) {
        const InstanceData& got = mb.instances[m][k];
        EXPECT_EQ(got.tokens, want->instances[k].segment_tokens);
        EXPECT_EQ(got.samples, want->instances[k].segment_samples);
        EXPECT_EQ(got.item, want->instances[k].item);
        if (m != audio) EXPECT_EQ(got.unpadded_tokens, got.TotalTokens());
      }
      EXPECT_EQ(InstanceTokens(*d, index, m, 0, 1 << 20), want->TotalTokens());
    }
    // Audio windows: padded to max_source_positions; the unpadded tokens are the windows of the
    // same clip without padding, in order.
    std::vector<int64_t> unpadded;
    for (int32_t s : d->sequences[index].samples) {
      auto windows = data::AudioEncoderWindowTokens(model.modules[audio],
                                                    batch.samples[s].audios[0],
                                                    {.pad_audio_to_window = false});
      ASSERT_TRUE(windows.ok());
      unpadded.insert(unpadded.end(), windows->begin(), windows->end());
    }
    ASSERT_EQ(mb.instances[audio].size(), unpadded.size());
    for (size_t k = 0; k < unpadded.size(); ++k) {
      EXPECT_EQ(mb.instances[audio][k].TotalTokens(), model.modules[audio].max_source_positions);
      EXPECT_EQ(mb.instances[audio][k].unpadded_tokens, unpadded[k]);
    }
  }
  EXPECT_GT(d->microbatches[1].instances[audio].size(), 2u);  // a clip over two windows
  EXPECT_EQ(InstanceTokens(*d, 0, audio, 1, 0), 0);  // empty range
  EXPECT_EQ(InstanceTokens(*d, 5, audio, 0, 1), 0);  // no such microbatch
}

TEST(MakePlanData, OnlyTheReplicasAndModulesThePlanRuns) {
  const spec::ModelSpec model = Model("tiny-valm");
  const spec::Batch batch = ValmBatch();
  const int llm = *model.FindModule("llm");
  // Replica 1's plan: its microbatches only; a rank holding only the LLM.
  auto d = MakePlanData(model, batch, {{{0}}, {{1}, {0}}},
                        {{.replica = 1, .group = 0,
                          .chunks = {{.module = llm, .chunk = 0, .first_layer = 0,
                                      .num_layers = 4, .module_replica = 0}}}});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_EQ(d->microbatches.size(), 2u);
  EXPECT_EQ(d->microbatches[1].replica, 1);
  EXPECT_EQ(d->microbatches[1].microbatch, 1);
  for (int m = 0; m < static_cast<int>(model.modules.size()); ++m) {
    EXPECT_EQ(d->microbatches[0].instances[m].empty(), m != llm) << m;
  }
  // The LLM instance is the packed sequence: its samples in packing order.
  EXPECT_EQ(d->microbatches[0].instances[llm][0].samples, (std::vector<int32_t>{3, 2}));
}

TEST(MakePlanData, AnUnpackedBatchHasOneSequencePerSample) {
  const spec::ModelSpec model = Model("tiny-valm");
  spec::Batch batch = ValmBatch();
  batch.sequences.clear();
  batch.samples[1].text_tokens = -5;  // counted as 0, like the workload derivation
  auto d = MakePlanData(model, batch, {{{1, 2}}}, {{.replica = 0, .group = 0, .chunks = {}}});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_EQ(d->sequences.size(), 4u);
  EXPECT_EQ(d->samples[1].text_tokens, 0);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(d->sequences[i].samples, (std::vector<int32_t>{i}));
    EXPECT_EQ(d->sequences[i].llm_tokens, *data::SampleLlmTokens(model, batch.samples[i]));
  }
  EXPECT_EQ(d->microbatches[0].sequences, (std::vector<int32_t>{1, 2}));
}

TEST(MakePlanData, OutOfRangeIdsNameTheirPlace) {
  const spec::ModelSpec model = Model("tiny-valm");
  const spec::Batch batch = ValmBatch();
  const std::vector<RankData> one = {{.replica = 0, .group = 0, .chunks = AllModules(model)}};
  EXPECT_EQ(MakePlanData(model, batch, {{{5}}}, one).status().message(),
            "replica 0 microbatch 0: sequence [0] = 5; must be in [0, 2)");
  EXPECT_EQ(MakePlanData(model, batch, {}, one).status().message(),
            "ranks[0].replica = 0; must be in [0, 0)");
  std::vector<RankData> bad_module = one;
  bad_module[0].chunks[0].module = 9;
  EXPECT_EQ(MakePlanData(model, batch, {{{0}}}, bad_module).status().message(),
            "ranks[0].chunks[0].module = 9; must be in [0, 5)");
  spec::Batch bad = batch;
  bad.sequences[1].sample_indices[0] = 4;
  EXPECT_EQ(MakePlanData(model, bad, {{{0}}}, one).status().message(),
            "batch.sequences[1].sample_indices[0] = 4; must be in [0, 4)");
}

}  // namespace
}  // namespace weft::plan
