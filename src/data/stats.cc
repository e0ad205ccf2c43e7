#include "weft/data/stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "weft/data/shapes.h"

namespace weft::data {

Distribution Summarize(std::string name, std::vector<double> values) {
  Distribution d;
  d.name = std::move(name);
  d.count = static_cast<int64_t>(values.size());
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  double total = 0;
  for (double v : values) total += v;
  d.mean = total / values.size();
  d.min = values.front();
  d.max = values.back();
  auto rank = [&](double p) {
    const size_t k = static_cast<size_t>(std::ceil(p * values.size()));
    return values[std::clamp<size_t>(k, 1, values.size()) - 1];
  };
  d.p50 = rank(0.5);
  d.p90 = rank(0.9);
  d.p99 = rank(0.99);
  // Power-of-two bins: value v in [2^(k-1), 2^k); [0,1) first. Values are non-negative here.
  for (double v : values) {
    double lower = 0, upper = 1;
    if (v >= 1) {
      const int k = static_cast<int>(std::floor(std::log2(v)));
      lower = std::ldexp(1.0, k);
      upper = std::ldexp(1.0, k + 1);
    }
    if (d.bins.empty() || d.bins.back().lower != lower) d.bins.push_back({lower, upper, 0});
    ++d.bins.back().count;
  }
  return d;
}

namespace internal {

void AddIfAny(DataProfile& p, std::string name, std::vector<double> values) {
  if (!values.empty()) p.distributions.push_back(Summarize(std::move(name), std::move(values)));
}

}  // namespace internal

const Distribution* DataProfile::Find(std::string_view name) const {
  for (const auto& d : distributions) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

DataProfile ComputeDataProfile(std::span<const spec::Sample> samples) {
  DataProfile p;
  p.num_samples = static_cast<int64_t>(samples.size());
  std::vector<double> images_per_sample, text_tokens, text_per_image, megapixels, videos_per_sample,
      video_s, audio_s;
  for (const auto& s : samples) {
    const bool has_images = !s.images.empty(), has_videos = !s.videos.empty(), has_audio = !s.audios.empty();
    p.samples_with_images += has_images;
    p.samples_with_videos += has_videos;
    p.samples_with_audio += has_audio;
    p.text_only_samples += !has_images && !has_videos && !has_audio;
    p.num_images += static_cast<int64_t>(s.images.size());
    p.num_videos += static_cast<int64_t>(s.videos.size());
    p.num_audio_clips += static_cast<int64_t>(s.audios.size());
    images_per_sample.push_back(static_cast<double>(s.images.size()));
    videos_per_sample.push_back(static_cast<double>(s.videos.size()));
    text_tokens.push_back(s.text_tokens);
    if (has_images) text_per_image.push_back(static_cast<double>(s.text_tokens) / s.images.size());
    for (const auto& im : s.images) {
      if (im.width_px > 0 && im.height_px > 0) megapixels.push_back(im.width_px * 1e-6 * im.height_px);
    }
    for (const auto& v : s.videos) video_s.push_back(v.duration_s > 0 ? v.duration_s : (v.fps > 0 ? v.frames / v.fps : 0));
    for (const auto& a : s.audios) audio_s.push_back(a.duration_s);
  }
  if (samples.empty()) return p;
  internal::AddIfAny(p, "images_per_sample", std::move(images_per_sample));
  internal::AddIfAny(p, "text_tokens_per_sample", std::move(text_tokens));
  internal::AddIfAny(p, "text_tokens_per_image", std::move(text_per_image));
  internal::AddIfAny(p, "image_megapixels", std::move(megapixels));
  if (p.samples_with_videos > 0) internal::AddIfAny(p, "videos_per_sample", std::move(videos_per_sample));
  internal::AddIfAny(p, "video_duration_s", std::move(video_s));
  internal::AddIfAny(p, "audio_duration_s", std::move(audio_s));
  return p;
}

StatusOr<DataProfile> ComputeDataProfile(std::span<const spec::Sample> samples,
                                         const spec::ModelSpec& model,
                                         const WorkloadOptions& options) {
  DataProfile p = ComputeDataProfile(samples);
  std::vector<std::vector<double>> per_instance;
  WEFT_ASSIGN_OR_RETURN(const SampleShapes shapes,
                        internal::ComputeSampleShapes(samples, model, options, &per_instance));
  if (FirstLlmModule(model) >= 0) {
    std::vector<double> llm_tokens;
    for (const auto& s : shapes.samples) llm_tokens.push_back(static_cast<double>(s.llm_tokens));
    internal::AddIfAny(p, "llm_tokens_per_sample", std::move(llm_tokens));
  }
  for (size_t k = 0; k < shapes.module_names.size(); ++k) {
    std::vector<double> instances, tokens;  // over the samples the module sees
    for (const auto& s : shapes.samples) {
      if (s.modules[k].instances == 0) continue;
      instances.push_back(static_cast<double>(s.modules[k].instances));
      tokens.push_back(static_cast<double>(s.modules[k].tokens));
    }
    const std::string& name = shapes.module_names[k];
    internal::AddIfAny(p, name + ".instances_per_sample", std::move(instances));
    internal::AddIfAny(p, name + ".tokens_per_instance", std::move(per_instance[k]));
    internal::AddIfAny(p, name + ".tokens_per_sample", std::move(tokens));
  }
  return p;
}

std::string DataProfile::ToText() const {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof(line),
                "samples: %lld (with images: %lld, with videos: %lld, with audio: %lld, text only: "
                "%lld); items: %lld images, %lld videos, %lld audio clips\n",
                static_cast<long long>(num_samples), static_cast<long long>(samples_with_images),
                static_cast<long long>(samples_with_videos), static_cast<long long>(samples_with_audio),
                static_cast<long long>(text_only_samples), static_cast<long long>(num_images),
                static_cast<long long>(num_videos), static_cast<long long>(num_audio_clips));
  out += line;
  size_t width = 12;
  for (const auto& d : distributions) width = std::max(width, d.name.size());
  std::snprintf(line, sizeof(line), "%-*s %9s %11s %11s %11s %11s %11s\n", static_cast<int>(width),
                "quantity", "count", "mean", "min", "p50", "p90", "max");
  out += line;
  for (const auto& d : distributions) {
    std::snprintf(line, sizeof(line), "%-*s %9lld %11.4g %11.4g %11.4g %11.4g %11.4g\n",
                  static_cast<int>(width), d.name.c_str(), static_cast<long long>(d.count), d.mean,
                  d.min, d.p50, d.p90, d.max);
    out += line;
  }
  return out;
}

std::string DataProfile::ToJson() const {
  nlohmann::ordered_json j;
  j["num_samples"] = num_samples;
  j["samples_with_images"] = samples_with_images;
  j["samples_with_videos"] = samples_with_videos;
  j["samples_with_audio"] = samples_with_audio;
  j["text_only_samples"] = text_only_samples;
  j["num_images"] = num_images;
  j["num_videos"] = num_videos;
  j["num_audio_clips"] = num_audio_clips;
  auto& arr = j["distributions"] = nlohmann::ordered_json::array();
  for (const auto& d : distributions) {
    nlohmann::ordered_json o;
    o["name"] = d.name;
    o["count"] = d.count;
    o["mean"] = d.mean;
    o["min"] = d.min;
    o["p50"] = d.p50;
    o["p90"] = d.p90;
    o["p99"] = d.p99;
    o["max"] = d.max;
    auto& bins = o["bins"] = nlohmann::ordered_json::array();
    for (const auto& b : d.bins) bins.push_back({{"lower", b.lower}, {"upper", b.upper}, {"count", b.count}});
    arr.push_back(std::move(o));
  }
  return j.dump(2);
}

}  // namespace weft::data
