#include "weft/data/readers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>
#include <set>

namespace weft::data {
namespace {

using ::testing::HasSubstr;

std::string SharedData(const std::string& rel) { return std::string(WEFT_SHARED_DATA_DIR) + "/" + rel; }

template <typename F>
double Mean(const std::vector<spec::Sample>& samples, F f) {
  double total = 0;
  for (const auto& s : samples) total += f(s);
  return samples.empty() ? 0 : total / samples.size();
}

TEST(ReadSamples, CocoCaptionsGive5000ImagesWithSizesAndShortCaptions) {
  auto r = ReadSamples(SharedData("images/coco_captions_val2017.json"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->format, DataFormat::kCocoCaptions);
  EXPECT_EQ(r->samples.size(), 5000u);
  EXPECT_EQ(r->num_malformed, 0);
  EXPECT_NEAR(Mean(r->samples, [](auto& s) { return s.images.at(0).width_px; }), 573.75, 0.01);
  EXPECT_NEAR(Mean(r->samples, [](auto& s) { return s.images.at(0).height_px; }), 483.54, 0.01);
  // Captions ≈10.4 words ≈ 13.6 tokens at 1.3 tokens/word.
  EXPECT_NEAR(Mean(r->samples, [](auto& s) { return s.text_tokens; }), 13.6, 1.0);
  auto per_caption = ReadSamples(SharedData("images/coco_captions_val2017.json"),
                                 ReadOptions{.coco_sample_per_caption = true});
  ASSERT_TRUE(per_caption.ok());
  EXPECT_EQ(per_caption->samples.size(), 25014u);
}

TEST(ReadSamples, LlavaJsonCountsOneImageAndAbout277WordsPerSample) {
  auto r = ReadSamples(SharedData("samples/llava_instruct_150k_subset100.json"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->format, DataFormat::kLlavaJson);
  ASSERT_EQ(r->samples.size(), 100u);
  for (const auto& s : r->samples) {
    ASSERT_EQ(s.images.size(), 1u);
    EXPECT_EQ(s.images[0].width_px, 0);  // size unknown: the model's fixed size applies
  }
  EXPECT_NEAR(Mean(r->samples, [](auto& s) { return s.text_tokens; }), 276.0 * 1.3, 2.0);
  EXPECT_EQ(r->samples[0].id, 379143);
}

TEST(ReadSamples, MsrvttClipsLast10To30SecondsMean15) {
  auto r = ReadSamples(SharedData("video/msrvtt_10k_clip_metadata.jsonl"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->format, DataFormat::kMsrvttJsonl);
  ASSERT_EQ(r->samples.size(), 10000u);
  EXPECT_NEAR(Mean(r->samples, [](auto& s) { return s.videos.at(0).duration_s; }), 15.01, 0.05);
  for (const auto& s : r->samples) {
    EXPECT_GE(s.videos[0].duration_s, 9.99);
    EXPECT_LE(s.videos[0].duration_s, 30.01);
  }
}

TEST(ReadSamples, NextQaRowsCarryNativeSizeAndDurationAt30Fps) {
  auto r = ReadSamples(SharedData("video/nextqa_val.csv"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->format, DataFormat::kNextQaCsv);
  EXPECT_EQ(r->samples.size(), 4996u);
  EXPECT_EQ(r->num_malformed, 0);
  const auto& first = r->samples[0];  // 4010069381,369,640,480,...
  EXPECT_EQ(first.videos[0].width_px, 640);
  EXPECT_EQ(first.videos[0].height_px, 480);
  EXPECT_DOUBLE_EQ(first.videos[0].duration_s, 369 / 30.0);
  EXPECT_NEAR(Mean(r->samples, [](auto& s) { return s.videos[0].duration_s; }), 41.03, 0.05);
  EXPECT_GT(first.text_tokens, 5);
}

TEST(ReadSamples, LibriSpeechManifestHas2703UtterancesOf7Seconds) {
  auto r = ReadSamples(SharedData("audio/librispeech_dev-clean_fairseq_manifest.tsv"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->format, DataFormat::kFairseqTsv);
  ASSERT_EQ(r->samples.size(), 2703u);
  EXPECT_DOUBLE_EQ(r->samples[0].audios.at(0).duration_s, 78720 / 16000.0);
  EXPECT_NEAR(Mean(r->samples, [](auto& s) { return s.audios[0].duration_s; }), 7.18, 0.01);
}

TEST(ReadSamples, AudioCapsClipsAreTenSeconds) {
  auto r = ReadSamples(SharedData("audio/audiocaps_v1_val.csv"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->format, DataFormat::kAudioCapsCsv);
  ASSERT_EQ(r->samples.size(), 2475u);
  EXPECT_EQ(r->samples[0].id, 97151);
  for (const auto& s : r->samples) EXPECT_DOUBLE_EQ(s.audios.at(0).duration_s, 10.0);
  EXPECT_NEAR(Mean(r->samples, [](auto& s) { return s.text_tokens; }), 8.31 * 1.3, 0.5);
}

TEST(ReadSamples, MissingFileIsNotFound) {
  auto r = ReadSamples("/nonexistent/x.jsonl");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
}

TEST(WeftJsonl, RoundTripsThroughTheWriter) {
  spec::Sample s;
  s.id = 42;
  s.text_tokens = 17;
  s.images.push_back({.width_px = 640, .height_px = 480});
  s.images.push_back({.patch_tokens = 256, .text_position = 3});
  s.videos.push_back({.frames = 0, .fps = 2, .duration_s = 12.5, .width_px = 1280, .height_px = 720});
  s.audios.push_back({.duration_s = 3.25});
  spec::Sample text_only;
  text_only.id = 43;
  text_only.text_tokens = 5;
  const std::vector<spec::Sample> in = {s, text_only};
  const std::string text = SamplesToJsonl(in);
  auto r = ParseSamples(text, DataFormat::kWeftJsonl, "mem.jsonl");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->samples.size(), 2u);
  EXPECT_EQ(SamplesToJsonl(r->samples), text);
}

TEST(WeftJsonl, MalformedLinesAreSkippedWithFileAndLineWarnings) {
  const std::string content =
      "{\"id\":1,\"text_tokens\":10,\"images\":[{\"w\":100,\"h\":50}]}\n"
      "{\"id\":2,\"text_tokens\":\n"                          // truncated JSON
      "\n"                                                    // blank: ignored
      "{\"id\":3,\"text_tokens\":-4}\n"                       // negative
      "{\"id\":4,\"images\":[{\"w\":\"wide\"}]}\n"            // wrong type
      "{\"id\":5,\"videos\":[{\"w\":10}]}\n"                  // neither frames nor duration
      "[1,2,3]\n"                                             // not an object
      "{\"id\":6,\"audios\":[{\"duration_s\":2.5}]}\n";
  auto r = ParseSamples(content, DataFormat::kWeftJsonl, "bad.jsonl");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->samples.size(), 2u);
  EXPECT_EQ(r->samples[1].id, 6);
  EXPECT_EQ(r->num_malformed, 5);
  ASSERT_EQ(r->warnings.size(), 5u);
  EXPECT_EQ(r->warnings[0].line, 2);
  EXPECT_THAT(r->warnings[0].ToString(), HasSubstr("bad.jsonl:2:"));
  EXPECT_EQ(r->warnings[1].line, 4);
  EXPECT_THAT(r->warnings[1].message, HasSubstr("text_tokens = -4"));
  EXPECT_THAT(r->warnings[2].message, HasSubstr("images[0].w = \"wide\""));
  EXPECT_EQ(r->warnings[3].line, 6);
  EXPECT_EQ(r->warnings[4].line, 7);
}

TEST(WeftJsonl, AllLinesMalformedIsAnErrorNamingTheFirstLine) {
  auto r = ParseSamples("garbage\n{\n", DataFormat::kWeftJsonl, "junk.jsonl");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("junk.jsonl:1:"));
}

TEST(Readers, CorruptedCsvTsvAndJsonInputsNeverCrash) {
  auto nextqa = ParseSamples(
      "video,frame_count,width,height,question,answer,qid,type,a0,a1,a2,a3,a4\n"
      "1,300,640,480,what is it,1,0,CW,a,b c,d,e,f\n"
      "2,abc,640,480,q,0,0,CW,a,b,c,d,e\n"
      "3,300,640\n"
      "4,300,640,480,\"quoted, with comma\",0,0,CW,a,b,c,d,e\n",
      DataFormat::kNextQaCsv, "q.csv");
  ASSERT_TRUE(nextqa.ok()) << nextqa.status().ToString();
  EXPECT_EQ(nextqa->samples.size(), 2u);
  ASSERT_EQ(nextqa->warnings.size(), 2u);
  EXPECT_EQ(nextqa->warnings[0].line, 3);
  EXPECT_EQ(nextqa->warnings[1].line, 4);
  EXPECT_EQ(nextqa->samples[0].text_tokens, 7);  // "what is it" + option a1 "b c": 5 words · 1.3

  auto tsv = ParseSamples("/root\na.flac\t16000\nb.flac\nc.flac\t-5\n", DataFormat::kFairseqTsv, "m.tsv");
  ASSERT_TRUE(tsv.ok());
  EXPECT_EQ(tsv->samples.size(), 1u);
  EXPECT_EQ(tsv->num_malformed, 2);
  EXPECT_EQ(tsv->warnings[0].line, 3);

  auto llava = ParseSamples("[{\"id\":\"1\",\"conversations\":[{\"value\":\"<image>\\nhi <image>\"}]},"
                            " 5, {\"id\":\"x\"}]",
                            DataFormat::kLlavaJson, "l.json");
  ASSERT_TRUE(llava.ok());
  ASSERT_EQ(llava->samples.size(), 1u);
  EXPECT_EQ(llava->samples[0].images.size(), 2u);
  EXPECT_EQ(llava->num_malformed, 2);

  auto broken = ParseSamples("[\n{\"id\": 1,\n\"conversations\": [\n", DataFormat::kLlavaJson, "b.json");
  ASSERT_FALSE(broken.ok());
  EXPECT_THAT(broken.status().message(), HasSubstr("b.json:"));

  auto coco = ParseSamples("{\"images\":[{\"id\":1,\"width\":10,\"height\":0},{\"id\":2,\"width\":10,"
                           "\"height\":20}],\"annotations\":[{\"image_id\":9,\"caption\":\"x\"}]}",
                           DataFormat::kCocoCaptions, "c.json");
  ASSERT_TRUE(coco.ok());
  EXPECT_EQ(coco->samples.size(), 1u);
  EXPECT_EQ(coco->num_malformed, 2);
}

TEST(DetectDataFormat, UsesExtensionAndContent) {
  EXPECT_EQ(*DetectDataFormat("a.jsonl", "{\"id\":1}\n"), DataFormat::kWeftJsonl);
  EXPECT_EQ(*DetectDataFormat("a.jsonl", "{\"start time\":1,\"end time\":2}\n"), DataFormat::kMsrvttJsonl);
  EXPECT_EQ(*DetectDataFormat("a.json", "[{}]"), DataFormat::kLlavaJson);
  EXPECT_EQ(*DetectDataFormat("a.json", "{\"images\":[],\n\"annotations\":[]}"), DataFormat::kCocoCaptions);
  EXPECT_EQ(*DetectDataFormat("a.tsv", "/x\n"), DataFormat::kFairseqTsv);
  EXPECT_EQ(*DetectDataFormat("a.csv", "audiocap_id,youtube_id,start_time,caption\n"),
            DataFormat::kAudioCapsCsv);
  EXPECT_FALSE(DetectDataFormat("a.csv", "x,y\n").ok());
  EXPECT_FALSE(DetectDataFormat("a.bin", "\x01\x02").ok());
}

TEST(EstimateTextTokens, CountsWhitespaceWordsTimesRatio) {
  EXPECT_EQ(EstimateTextTokens("a b  c\nd", 1.0), 4);
  EXPECT_EQ(EstimateTextTokens("", 1.3), 0);
  EXPECT_EQ(EstimateTextTokens("one two three four five six seven eight nine ten", 1.3), 13);
}


// ---- strictness (issue 15) ----------------------------------------------------------------

TEST(Strict, EmptyFileSaysItIsEmpty) {
  auto r = ParseSamples("", DataFormat::kWeftJsonl, "e.jsonl");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "e.jsonl: the file is empty (0 bytes); no samples");
  r = ParseSamples("\n  \n", DataFormat::kNextQaCsv, "b.csv");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "b.csv: the file has only blank lines; no samples");
  auto format = DetectDataFormat("e.jsonl", "");
  ASSERT_FALSE(format.ok());
  EXPECT_EQ(format.status().message(), "e.jsonl: the file is empty (0 bytes); no samples");
}

TEST(Strict, DuplicateAndUnknownKeysMakeARecordMalformed) {
  auto r = ParseSamples(
      "{\"text_tokens\": 32, \"text_tokens\": 3200}\n"
      "{\"text_tokens\": 5, \"videos\": [{\"frame\": 8, \"duration_s\": 2}]}\n"
      "{\"text_tokenz\": 5}\n"
      "{\"text_tokens\": 7}\n",
      DataFormat::kWeftJsonl, "k.jsonl");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->samples.size(), 1u);
  EXPECT_EQ(r->samples[0].text_tokens, 7);
  ASSERT_EQ(r->warnings.size(), 3u);
  EXPECT_EQ(r->warnings[0].ToString(),
            "k.jsonl:1: key \"text_tokens\" appears twice in one object; keys must be unique; "
            "skipped");
  EXPECT_EQ(r->warnings[1].ToString(),
            "k.jsonl:2: videos[0].\"frame\" is not a known key (did you mean 'frames'?); skipped");
  EXPECT_EQ(r->warnings[2].ToString(),
            "k.jsonl:3: \"text_tokenz\" is not a known key (did you mean 'text_tokens'?); skipped");
  auto coco = ParseSamples("{\"images\": [], \"images\": []}", DataFormat::kCocoCaptions, "c.json");
  ASSERT_FALSE(coco.ok());
  EXPECT_EQ(coco.status().message(),
            "c.json:1: key \"images\" appears twice in one object; keys must be unique");
}

TEST(Strict, SampleFieldsHaveRanges) {
  auto r = ParseSamples(
      "{\"videos\": [{\"frames\": 2000000000}]}\n"
      "{\"videos\": [{\"duration_s\": 86400, \"fps\": 240}]}\n"
      "{\"images\": [{\"w\": 1e300}]}\n"
      "{\"text_tokens\": 1}\n",
      DataFormat::kWeftJsonl, "r.jsonl");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->warnings.size(), 3u);
  EXPECT_EQ(r->warnings[0].ToString(),
            "r.jsonl:1: videos[0].frames = 2000000000; must be an integer in [0, 16384]; skipped");
  EXPECT_EQ(r->warnings[1].ToString(),
            "r.jsonl:2: videos[0]: duration_s x fps = 20736000 frames; at most 16384; skipped");
  EXPECT_EQ(r->warnings[2].ToString(),
            "r.jsonl:3: images[0].w = 1e+300; must be an integer in [0, 65536]; skipped");
}

TEST(Strict, MessagesEscapeControlBytes) {
  auto r = ParseSamples("{\"id\": \"a\\u001b[K\\nb\"}\n{\"text_tokens\": 1}\n",
                        DataFormat::kWeftJsonl, "c.jsonl");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_EQ(r->warnings[0].message, "id = \"a\\u001b[K\\nb\"; must be an integer; skipped");
  auto bad = ParseSamples(std::string("{\"id\": 1}\x01\n"), DataFormat::kWeftJsonl, "x.jsonl");
  ASSERT_FALSE(bad.ok());
  const std::string message = bad.status().message();
  for (char c : message) EXPECT_GE(static_cast<unsigned char>(c), 0x20) << message;
}

TEST(Strict, ADeviceOrFifoIsRefusedBeforeReading) {
  auto r = ReadSamples("/dev/zero", DataFormat::kWeftJsonl);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("not a regular file"));
}

}  // namespace
}  // namespace weft::data
