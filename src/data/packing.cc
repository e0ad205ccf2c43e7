#include "weft/data/packing.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string_view>

namespace weft::data {
namespace internal {

struct OpenSequence {
  spec::PackedSequence sequence;
  int images = 0;
  int videos = 0;
  double video_s = 0;
};

struct Item {
  int index = 0;        // into the output batch's samples
  int64_t tokens = 0;   // LLM tokens after truncation
  int images = 0;
  int videos = 0;
  double video_s = 0;
};

bool Fits(const OpenSequence& seq, const Item& item, const PackingOptions& o) {
  if (seq.sequence.llm_tokens + item.tokens > o.context_tokens) return false;
  if (o.max_images_per_sequence > 0 && seq.images + item.images > o.max_images_per_sequence) return false;
  if (o.max_videos_per_sequence > 0 && seq.videos + item.videos > o.max_videos_per_sequence) return false;
  if (o.max_video_s_per_sequence > 0 && seq.video_s + item.video_s > o.max_video_s_per_sequence + 1e-9) {
    return false;
  }
  return true;
}

void Place(OpenSequence& seq, const Item& item) {
  seq.sequence.sample_indices.push_back(item.index);
  seq.sequence.llm_tokens += item.tokens;
  seq.images += item.images;
  seq.videos += item.videos;
  seq.video_s += item.video_s;
}

}  // namespace internal

namespace {

bool HasKind(const spec::ModelSpec& model, spec::ModuleKind kind) {
  return std::any_of(model.modules.begin(), model.modules.end(),
                     [&](const spec::ModuleSpec& m) { return m.kind == kind; });
}

// Seconds of a clip: its duration, else frames / fps, else 0 (unknown).
double ClipSeconds(const spec::VideoMeta& v) {
  if (v.duration_s > 0) return v.duration_s;
  return v.frames > 0 && v.fps > 0 ? v.frames / v.fps : 0.0;
}

// The clip's [begin_s, begin_s + length_s) piece.
spec::VideoMeta ClipPiece(const spec::VideoMeta& v, double begin_s, double length_s) {
  spec::VideoMeta piece = v;
  piece.duration_s = length_s;
  if (v.frames > 0 && v.fps > 0) {
    const int64_t first = std::llround(begin_s * v.fps);
    const int64_t last = std::min<int64_t>(v.frames, std::llround((begin_s + length_s) * v.fps));
    piece.frames = static_cast<int>(std::max<int64_t>(1, last - first));
  }
  return piece;
}

// The DiT clip rule on one sample: the sample as trained (long clips truncated, or cut with the
// first piece kept) plus, when splitting, one sample per further piece.
std::vector<spec::Sample> ApplyLongClipRule(const spec::Sample& sample, double max_s,
                                            LongClipRule rule, int64_t& long_clips) {
  std::vector<spec::Sample> out(1, sample);
  for (size_t v = 0; v < sample.videos.size(); ++v) {
    const double length_s = ClipSeconds(sample.videos[v]);
    if (length_s <= max_s + 1e-9) continue;
    ++long_clips;
    out[0].videos[v] = ClipPiece(sample.videos[v], 0, max_s);
    if (rule != LongClipRule::kSplit) continue;
    for (double begin_s = max_s; begin_s < length_s - 1e-9; begin_s += max_s) {
      spec::Sample piece = sample;
      piece.images.clear();
      piece.audios.clear();
      piece.videos.assign(1, ClipPiece(sample.videos[v], begin_s, std::min(max_s, length_s - begin_s)));
      out.push_back(std::move(piece));
    }
  }
  return out;
}

// ViT frames of a sample's clips.
int64_t VitFrames(const spec::Sample& sample, const WorkloadOptions& workload) {
  int64_t frames = 0;
  for (const auto& v : sample.videos) frames += VitFramesForVideo(v, workload);
  return frames;
}

// The sample with each clip cut to at most `cap` ViT frames (uniformly sampled: same span).
spec::Sample WithFrameCap(const spec::Sample& sample, int64_t cap, const WorkloadOptions& workload) {
  spec::Sample out = sample;
  for (auto& v : out.videos) {
    const int64_t frames = VitFramesForVideo(v, workload);
    if (frames > cap) v.frames = static_cast<int>(cap);
  }
  return out;
}

}  // namespace

std::string_view LongClipRuleName(LongClipRule rule) {
  return rule == LongClipRule::kSplit ? "split" : "truncate";
}

StatusOr<LongClipRule> ParseLongClipRule(std::string_view name) {
  if (name == "truncate") return LongClipRule::kTruncate;
  if (name == "split") return LongClipRule::kSplit;
  return InvalidArgumentError("long_clips = '" + std::string(name.substr(0, 40)) +
                              "'; must be truncate or split");
}

Status PackingOptions::Validate() const {
  if (context_tokens <= 0) {
    return InvalidArgumentError("packing.context_tokens = " + std::to_string(context_tokens) + "; must be > 0");
  }
  if (max_images_per_sequence < 0) {
    return InvalidArgumentError("packing.max_images_per_sequence = " +
                                std::to_string(max_images_per_sequence) + "; must be >= 0");
  }
  if (max_videos_per_sequence < 0) {
    return InvalidArgumentError("packing.max_videos_per_sequence = " +
                                std::to_string(max_videos_per_sequence) + "; must be >= 0");
  }
  if (max_video_s_per_sequence < 0) {
    return InvalidArgumentError("packing.max_video_s_per_sequence = " +
                                std::to_string(max_video_s_per_sequence) + "; must be >= 0");
  }
  return OkStatus();
}

Status BatchingOptions::Validate() const {
  WEFT_RETURN_IF_ERROR(packing.Validate());
  if (sequences_per_batch <= 0) {
    return InvalidArgumentError("batching.sequences_per_batch = " + std::to_string(sequences_per_batch) +
                                "; must be > 0");
  }
  return OkStatus();
}

double PackingReport::FillFraction() const {
  return sequences > 0 && context_tokens > 0
             ? static_cast<double>(packed_llm_tokens) / (static_cast<double>(sequences) * context_tokens)
             : 0;
}

std::string PackingReport::BriefReport() const {
  std::ostringstream out;
  out << "packed " << samples_packed << " of " << samples_in << " samples into " << sequences
      << " sequences (" << packed_llm_tokens << " LLM tokens); truncated " << truncated_samples
      << " (" << truncated_text_tokens << " text tokens), rejected " << rejected_ids.size();
  if (images_in > 0) out << "; images " << images_packed << " of " << images_in;
  if (videos_in > 0) {
    out << "; clips " << videos_packed << " (of " << videos_in << " given)";
    if (vit_frames_in > 0) {
      out << ", ViT frames " << vit_frames_packed << " of " << vit_frames_in << " ("
          << frame_sampled_samples << " sample(s) frame-sampled to fit)";
    }
    if (long_clips > 0) out << ", " << long_clips << " clip(s) over the DiT's clip length";
    out.precision(1);
    out << std::fixed << ", video " << video_s_packed << " of " << video_s_in << " s";
  }
  return out.str();
}

StatusOr<PackResult> PackSamples(const spec::ModelSpec& model, std::span<const spec::Sample> samples,
                                 const PackingOptions& options) {
  WEFT_RETURN_IF_ERROR(options.Validate());
  const int llm = options.llm_module >= 0 ? options.llm_module : FirstLlmModule(model);
  if (llm < 0 || llm >= static_cast<int>(model.modules.size()) ||
      model.modules[llm].kind != spec::ModuleKind::kLlm) {
    return FailedPreconditionError("packing needs an llm module; model " + model.name +
                                   (options.llm_module >= 0
                                        ? " has no llm at packing.llm_module = " + std::to_string(options.llm_module)
                                        : " has none"));
  }
  PackResult result;
  PackingReport& report = result.report;
  report.samples_in = static_cast<int64_t>(samples.size());
  report.context_tokens = options.context_tokens;
  std::vector<internal::Item> items;
  const bool dit = HasKind(model, spec::ModuleKind::kDit);
  const bool vit_frames = HasKind(model, spec::ModuleKind::kVit) && !dit;
  const double max_clip_s = dit ? options.workload.max_dit_video_s : 0.0;
  std::vector<spec::Sample> as_trained;  // the samples after the DiT clip rule
  for (const auto& original : samples) {
    report.images_in += static_cast<int64_t>(original.images.size());
    report.videos_in += static_cast<int64_t>(original.videos.size());
    for (const auto& v : original.videos) report.video_s_in += ClipSeconds(v);
    if (vit_frames) report.vit_frames_in += VitFrames(original, options.workload);
    if (max_clip_s > 0) {
      for (auto& s : ApplyLongClipRule(original, max_clip_s, options.long_clips, report.long_clips)) {
        as_trained.push_back(std::move(s));
      }
    }
  }
  const std::span<const spec::Sample> inputs =
      max_clip_s > 0 ? std::span<const spec::Sample>(as_trained) : samples;
  WEFT_ASSIGN_OR_RETURN(const LlmTokenCounter llm_tokens, LlmTokenCounter::Create(model, llm));
  for (const auto& given : inputs) {
    spec::Sample sample = given;
    WEFT_ASSIGN_OR_RETURN(int64_t tokens, llm_tokens.Tokens(sample, options.workload));
    if (vit_frames && options.sample_frames_to_fit && tokens > options.context_tokens &&
        !sample.videos.empty()) {
      // The largest per-clip frame cap whose tokens fit with the text, else the largest whose
      // modality tokens fit (the text is then truncated below); tokens grow with the cap.
      int64_t most = 0;
      for (const auto& v : sample.videos) {
        most = std::max(most, VitFramesForVideo(v, options.workload));
      }
      const auto tokens_at = [&](int64_t cap, bool with_text) -> StatusOr<int64_t> {
        const spec::Sample capped = WithFrameCap(sample, cap, options.workload);
        WEFT_ASSIGN_OR_RETURN(int64_t t, llm_tokens.Tokens(capped, options.workload));
        return with_text ? t : t - std::max(0, sample.text_tokens);
      };
      int64_t cap = 0;
      for (bool with_text : {true, false}) {
        int64_t lo = 1, hi = most - 1;
        WEFT_ASSIGN_OR_RETURN(int64_t at_one, tokens_at(1, with_text));
        if (most <= 1 || at_one > options.context_tokens) continue;
        while (lo < hi) {  // invariant: tokens_at(lo) fits
          const int64_t mid = lo + (hi - lo + 1) / 2;
          WEFT_ASSIGN_OR_RETURN(int64_t t, tokens_at(mid, with_text));
          if (t <= options.context_tokens) lo = mid; else hi = mid - 1;
        }
        cap = lo;
        break;
      }
      if (cap > 0) {
        sample = WithFrameCap(sample, cap, options.workload);
        ++report.frame_sampled_samples;
        WEFT_ASSIGN_OR_RETURN(tokens, llm_tokens.Tokens(sample, options.workload));
      }
    }
    internal::Item item{.index = 0, .tokens = tokens, .images = static_cast<int>(sample.images.size()),
                        .videos = static_cast<int>(sample.videos.size()), .video_s = 0};
    for (const auto& v : sample.videos) item.video_s += v.duration_s;
    const int64_t modality_tokens = tokens - std::max(0, sample.text_tokens);
    bool reject = (options.max_images_per_sequence > 0 && item.images > options.max_images_per_sequence) ||
                  (options.max_videos_per_sequence > 0 && item.videos > options.max_videos_per_sequence) ||
                  (options.max_video_s_per_sequence > 0 &&
                   item.video_s > options.max_video_s_per_sequence + 1e-9);
    if (!reject && tokens > options.context_tokens) {
      if (options.oversize == OversizePolicy::kTruncateText && modality_tokens <= options.context_tokens) {
        const int64_t cut = tokens - options.context_tokens;
        sample.text_tokens -= static_cast<int>(cut);
        item.tokens = options.context_tokens;
        ++report.truncated_samples;
        report.truncated_text_tokens += cut;
      } else {
        reject = true;
      }
    }
    if (reject) {
      report.rejected_ids.push_back(sample.id);
      continue;
    }
    report.images_packed += static_cast<int64_t>(sample.images.size());
    report.videos_packed += static_cast<int64_t>(sample.videos.size());
    for (const auto& v : sample.videos) report.video_s_packed += ClipSeconds(v);
    if (vit_frames) report.vit_frames_packed += VitFrames(sample, options.workload);
    item.index = static_cast<int>(result.batch.samples.size());
    result.batch.samples.push_back(std::move(sample));
    items.push_back(item);
  }

  std::vector<internal::OpenSequence> sequences;
  for (const auto& item : items) {
    bool placed = false;
    if (options.order == PackingOrder::kNextFit) {
      if (!sequences.empty() && internal::Fits(sequences.back(), item, options)) {
        internal::Place(sequences.back(), item);
        placed = true;
      }
    } else {
      for (auto& seq : sequences) {
        if (internal::Fits(seq, item, options)) {
          internal::Place(seq, item);
          placed = true;
          break;
        }
      }
    }
    if (!placed) {
      sequences.emplace_back();
      internal::Place(sequences.back(), item);
    }
  }
  for (auto& seq : sequences) {
    report.packed_llm_tokens += seq.sequence.llm_tokens;
    result.batch.sequences.push_back(std::move(seq.sequence));
  }
  report.samples_packed = static_cast<int64_t>(items.size());
  report.sequences = static_cast<int64_t>(result.batch.sequences.size());
  return result;
}

StatusOr<std::vector<spec::Batch>> MakeBatches(const spec::ModelSpec& model,
                                               std::span<const spec::Sample> samples,
                                               const BatchingOptions& options,
                                               BatchingReport* report) {
  WEFT_RETURN_IF_ERROR(options.Validate());
  WEFT_ASSIGN_OR_RETURN(PackResult packed, PackSamples(model, samples, options.packing));
  if (report != nullptr) *report = BatchingReport{.packing = packed.report};
  std::vector<spec::Batch> batches;
  const auto& all = packed.batch.sequences;
  const size_t n = static_cast<size_t>(options.sequences_per_batch);
  for (size_t begin = 0; begin < all.size(); begin += n) {
    const size_t end = std::min(all.size(), begin + n);
    if (end - begin < n && options.drop_last) {
      if (report != nullptr) {
        report->sequences_in_dropped_batch = static_cast<int64_t>(end - begin);
        for (size_t s = begin; s < end; ++s) {
          report->samples_in_dropped_batch += static_cast<int64_t>(all[s].sample_indices.size());
        }
      }
      break;
    }
    spec::Batch batch;
    batch.iteration = options.first_iteration + static_cast<int64_t>(batches.size());
    for (size_t s = begin; s < end; ++s) {
      spec::PackedSequence seq{.sample_indices = {}, .llm_tokens = all[s].llm_tokens};
      for (int i : all[s].sample_indices) {
        seq.sample_indices.push_back(static_cast<int>(batch.samples.size()));
        batch.samples.push_back(packed.batch.samples[i]);
      }
      batch.sequences.push_back(std::move(seq));
    }
    batches.push_back(std::move(batch));
  }
  return batches;
}

}  // namespace weft::data
