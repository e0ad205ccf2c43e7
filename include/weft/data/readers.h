#pragma once
// Readers of sample metadata: weft's own JSONL schema and the public formats kept in
// ../shared/data (LLaVA conversation JSON, COCO captions, MSR-VTT clip JSONL, NExT-QA CSV,
// LibriSpeech fairseq TSV, AudioCaps CSV). Every reader returns samples plus a list of per-line
// warnings (file:line: reason) for malformed records, which are skipped; a reader never crashes
// on bad input. The rules and assumptions of each reader are in docs/data.md.
// Free functions of value types; thread-safe.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"
#include "weft/spec/workload.h"

namespace weft::data {

// Data files are read whole: a regular file (a FIFO or device could block or never end) of at most
// 4 GiB.
inline constexpr int64_t kMaxDataFileBytes = int64_t{4} << 30;

enum class DataFormat {
  kWeftJsonl,       // weft's schema, one sample per line (docs/data.md)
  kLlavaJson,       // LLaVA conversation JSON: [{id, image, conversations:[{from, value}]}]
  kCocoCaptions,    // COCO annotations: {images:[{id,width,height}], annotations:[{image_id,caption}]}
  kMsrvttJsonl,     // MSR-VTT clip metadata: {"video_id", "start time", "end time"} per line
  kNextQaCsv,       // NExT-QA: video,frame_count,width,height,question,answer,...,a0..a4
  kFairseqTsv,      // fairseq audio manifest: root dir line, then path \t num_samples
  kAudioCapsCsv,    // AudioCaps: audiocap_id,youtube_id,start_time,caption
};
std::string_view DataFormatName(DataFormat format);  // "weft-jsonl", "llava", "coco", ...
StatusOr<DataFormat> ParseDataFormat(std::string_view name);
std::vector<std::string_view> DataFormatNames();

struct ReadOptions {
  // Text tokens per whitespace-separated word (LLaMA-style BPE on English ≈ 1.3).
  double tokens_per_word = 1.3;
  // NExT-QA gives native frame counts but no frame rate; its videos are ≈30 fps.
  double nextqa_native_fps = 30.0;
  // fairseq manifests count samples at this rate (LibriSpeech: 16 kHz).
  double audio_sample_rate_hz = 16000.0;
  // Transcript length assumed for an ASR manifest without text: read speech ≈ 2.5 words/s
  // (≈150 words/min). 0 = no text tokens.
  double speech_words_per_s = 2.5;
  // AudioCaps clips are 10 s cuts of YouTube audio.
  double audiocaps_clip_s = 10.0;
  // COCO: one sample per image (first caption) when false; one per (image, caption) when true.
  bool coco_sample_per_caption = false;
  // Stop after this many samples (0 = all).
  int64_t max_samples = 0;
  // Keep at most this many warnings (all are counted in ReadResult::num_malformed).
  int max_warnings = 100;
};

struct ReadWarning {
  std::string file;
  int64_t line = 0;        // 1-based line number; 0 when the record has no line of its own
  std::string message;     // what is wrong and what was done ("skipped")
  std::string ToString() const;  // "file:line: message"
};

struct ReadResult {
  DataFormat format = DataFormat::kWeftJsonl;
  std::vector<spec::Sample> samples;
  int64_t num_malformed = 0;          // records skipped (warnings may be truncated)
  std::vector<ReadWarning> warnings;  // first ReadOptions::max_warnings problems
};

// Picks the format from the extension and the first bytes (see DetectDataFormat) and reads.
StatusOr<ReadResult> ReadSamples(const std::string& path, const ReadOptions& options = {});
StatusOr<ReadResult> ReadSamples(const std::string& path, DataFormat format,
                                 const ReadOptions& options = {});
// Parses in-memory content; `source` names the file in warnings and errors.
StatusOr<ReadResult> ParseSamples(std::string_view content, DataFormat format,
                                  std::string_view source, const ReadOptions& options = {});
// Format from the file name's extension and its content (e.g. a .csv with a frame_count column).
StatusOr<DataFormat> DetectDataFormat(std::string_view path, std::string_view content);

// Words → tokens estimate used by the readers (⌈words · tokens_per_word⌉ rounded to nearest).
int EstimateTextTokens(std::string_view text, double tokens_per_word);

// weft JSONL writing: one object per sample, fields omitted when empty/zero.
std::string SampleToJsonLine(const spec::Sample& sample);
std::string SamplesToJsonl(std::span<const spec::Sample> samples);

}  // namespace weft::data
