#pragma once
// Packing samples into fixed-context LLM sequences (as DIP §2.2/§7.1: greedily up to the context
// length, e.g. 8192 tokens, at most 48 images per sequence) and cutting the packed stream into
// global batches of N sequences. Free functions of value types; thread-safe.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"
#include "weft/data/workload.h"
#include "weft/spec/model.h"
#include "weft/spec/workload.h"

namespace weft::data {

// What happens to a sample whose LLM tokens exceed the context.
enum class OversizePolicy {
  kTruncateText,  // cut its text so it fills one sequence alone; reject if its modality tokens
                  // alone exceed the context (images are never cut)
  kReject,        // drop it (listed in PackingReport::rejected_ids)
};

enum class PackingOrder {
  kNextFit,   // data order kept: a sequence is closed when the next sample does not fit (DIP)
  kFirstFit,  // each sample goes to the first open sequence with room (fewer, fuller sequences)
};

// What happens to a DiT clip longer than WorkloadOptions::max_dit_video_s (docs/data.md, "Videos
// longer than a model takes").
enum class LongClipRule {
  kTruncate,  // trained on its first max_dit_video_s seconds (MovieGen / DIP §7.1)
  kSplit,     // cut into consecutive pieces of at most max_dit_video_s, each a sample (same text)
};
std::string_view LongClipRuleName(LongClipRule rule);  // "truncate", "split"
StatusOr<LongClipRule> ParseLongClipRule(std::string_view name);

struct PackingOptions {
  int64_t context_tokens = 8192;      // LLM tokens per packed sequence (DIP: 8192)
  int max_images_per_sequence = 0;    // 0 = unlimited (DIP: 48 = ⌊8192/169⌋)
  int max_videos_per_sequence = 0;    // 0 = unlimited (DIP's T2V: up to 8 clips per microbatch)
  double max_video_s_per_sequence = 0;  // 0 = unlimited (DIP's T2V: ≤ 16 s per microbatch)
  OversizePolicy oversize = OversizePolicy::kTruncateText;
  PackingOrder order = PackingOrder::kNextFit;
  int llm_module = -1;                // which LLM's tokens count; -1 = the first kLlm module
  WorkloadOptions workload = {};      // how sample metadata becomes tokens
  // Models with a ViT and no DiT: a sample whose videos overflow the context is frame-sampled
  // (LLaVA-OneVision-style: its clips keep at most f frames each, f the largest that fits with
  // its text; at least 1) instead of rejected. false = rejected.
  bool sample_frames_to_fit = true;
  // Models with a DiT: clips over workload.max_dit_video_s (> 0).
  LongClipRule long_clips = LongClipRule::kTruncate;
  Status Validate() const;            // "packing.context_tokens = 0; must be > 0"
};

// What packing did, given vs used (Ceres-style summary).
struct PackingReport {
  int64_t samples_in = 0;
  int64_t samples_packed = 0;
  int64_t sequences = 0;
  int64_t truncated_samples = 0;        // samples whose text was cut to fit
  int64_t truncated_text_tokens = 0;    // text tokens removed in total
  std::vector<int64_t> rejected_ids;    // Sample::id of samples dropped
  int64_t packed_llm_tokens = 0;        // Σ PackedSequence::llm_tokens
  int64_t context_tokens = 0;           // the context packed to
  // Given vs used by the video rules (PackingOptions::sample_frames_to_fit / long_clips).
  int64_t images_in = 0, images_packed = 0;
  int64_t videos_in = 0, videos_packed = 0;  // clips (a split clip counts once given, per piece used)
  int64_t frame_sampled_samples = 0;    // samples whose clips were cut to fewer ViT frames
  int64_t vit_frames_in = 0;            // ViT frames of the given clips (VitFramesForVideo)
  int64_t vit_frames_packed = 0;        // ViT frames of the packed samples' clips, as trained
  int64_t long_clips = 0;               // DiT clips over max_dit_video_s (truncated or split)
  double video_s_in = 0;                // seconds of video given
  double video_s_packed = 0;            // seconds of video trained on (after truncation)
  double FillFraction() const;          // packed tokens / (sequences · context)
  std::string BriefReport() const;      // one line
};

struct PackResult {
  spec::Batch batch;  // samples (truncated where reported) + sequences indexing them
  PackingReport report;
};

// Packs `samples` (their order is the data order) for `model`'s LLM.
StatusOr<PackResult> PackSamples(const spec::ModelSpec& model, std::span<const spec::Sample> samples,
                                 const PackingOptions& options = {});

struct BatchingOptions {
  PackingOptions packing = {};   // how samples are packed into sequences
  int sequences_per_batch = 8;   // N packed sequences per global batch
  bool drop_last = false;        // drop a final batch with fewer than N sequences
  int64_t first_iteration = 0;   // Batch::iteration of the first batch
  Status Validate() const;
};

// Packs the samples and cuts the sequence stream into global batches of N sequences each; each
// Batch holds only its own samples (sequence indices refer to them). Batches are in data order.
// What batching kept: the packing report plus the sequences a dropped last batch held.
struct BatchingReport {
  PackingReport packing;
  int64_t sequences_in_dropped_batch = 0;  // drop_last: sequences of the short final batch
  int64_t samples_in_dropped_batch = 0;
};
StatusOr<std::vector<spec::Batch>> MakeBatches(const spec::ModelSpec& model,
                                               std::span<const spec::Sample> samples,
                                               const BatchingOptions& options = {},
                                               BatchingReport* report = nullptr);

}  // namespace weft::data
