#include "weft/data/packing.h"

#include <algorithm>
#include <sstream>

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
  for (const auto& original : samples) {
    spec::Sample sample = original;
    WEFT_ASSIGN_OR_RETURN(int64_t tokens, SampleLlmTokens(model, llm, sample, options.workload));
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
