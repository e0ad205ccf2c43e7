#pragma once
// Dataset profiles: per-modality distributions of sample shapes (images per sample, text tokens,
// text tokens per image, image megapixels, video and audio seconds) and, given a model, of the
// tokens each module sees — DFLOP's Data Profiler (§3.2.2). Value types; thread-safe.
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

struct HistogramBin {
  double lower = 0;  // inclusive
  double upper = 0;  // exclusive
  int64_t count = 0;
};

// Summary of one quantity; `name` carries the unit ("video_duration_s", "text_tokens_per_sample").
struct Distribution {
  std::string name;
  int64_t count = 0;
  double mean = 0, min = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;  // percentiles: nearest rank
  std::vector<HistogramBin> bins = {};  // power-of-two bins [0,1), [1,2), [2,4), …; empty bins omitted
};
Distribution Summarize(std::string name, std::vector<double> values);

struct DataProfile {
  int64_t num_samples = 0;
  int64_t samples_with_images = 0;
  int64_t samples_with_videos = 0;
  int64_t samples_with_audio = 0;
  int64_t text_only_samples = 0;
  int64_t num_images = 0;  // items over all samples
  int64_t num_videos = 0;
  int64_t num_audio_clips = 0;
  // Always: images_per_sample, text_tokens_per_sample, text_tokens_per_image (samples with
  // images), image_megapixels (images with a size), videos_per_sample, video_duration_s,
  // audio_duration_s. With a model: llm_tokens_per_sample and, per non-LLM module,
  // "<module>.instances_per_sample" and "<module>.tokens_per_sample" (over the samples the module
  // sees) and "<module>.tokens_per_instance" (ComputeSampleShapes, shapes.h). Distributions with
  // no values are left out.
  std::vector<Distribution> distributions;

  const Distribution* Find(std::string_view name) const;  // nullptr if absent
  std::string ToText() const;   // aligned table
  std::string ToJson() const;   // {"num_samples":…, "distributions":[{name,count,mean,…,bins}]}
};

DataProfile ComputeDataProfile(std::span<const spec::Sample> samples);
// Adds the per-module token distributions of `model` (each sample as its own sequence).
StatusOr<DataProfile> ComputeDataProfile(std::span<const spec::Sample> samples,
                                         const spec::ModelSpec& model,
                                         const WorkloadOptions& options = {});

}  // namespace weft::data
