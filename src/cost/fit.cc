#include "weft/cost/fit.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

namespace weft::cost {
namespace internal {
namespace {

// One fitted efficiency: which field, over which ops, in which range.
struct ParameterSpec {
  std::string_view name;
  std::vector<std::string_view> ops;
  double spec::EfficiencyFactors::*field;
  double min = 0, max = 0;
};

const std::vector<ParameterSpec>& FittedParameters() {
  using E = spec::EfficiencyFactors;
  // α_m (efficiency.memory) is not fitted: it is the preset's HBM fraction, used by the GEMM and
  // attention memory floors and the optimizer step; the kernels' own speed is memory_kernels.
  // Order matters only for readability: the GEMMs' memory floor uses α_m alone.
  static const std::vector<ParameterSpec> kParameters = {
      {"memory_kernels",
       {"input_norm", "post_attn_norm", "mlp_act", "rope"},
       &E::memory_kernels,
       1e-3,
       spec::kMaxKernelClassEfficiency},
      {"residual", {"residual_add"}, &E::residual, 1e-3, spec::kMaxKernelClassEfficiency},
      {"embedding", {"embedding"}, &E::embedding, 1e-3, spec::kMaxKernelClassEfficiency},
      {"compute", {"qkv_proj", "out_proj", "mlp_up", "mlp_down"}, &E::compute, 1e-3, 1},
  };
  return kParameters;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

double RoundSignificant(double value, int digits) {
  if (!(value > 0) || digits < 1) return value;
  const double scale = std::pow(10.0, digits - 1 - std::floor(std::log10(value)));
  return std::round(value * scale) / scale;
}

// Median of log(predicted / measured) over `points` on `cluster`.
double MedianLogError(const std::vector<const ProfilePoint*>& points,
                      const spec::ClusterSpec& cluster,
                      const CostOptions& options) {
  std::vector<double> errors;
  errors.reserve(points.size());
  for (const ProfilePoint* p : points) {
    double predicted_s = 0;
    for (const Op& op : p->ops) predicted_s += OpLatency(op, cluster, options);
    errors.push_back(std::log(predicted_s / p->measured_s));
  }
  return Median(std::move(errors));
}

}  // namespace
}  // namespace internal

std::string VidurModelName(std::string_view path) {
  std::string model = std::filesystem::path(std::string(path)).stem().string();
  if (model.size() > 4 && model.ends_with("_mlp")) model.resize(model.size() - 4);
  if (const size_t cut = model.rfind('_'); cut != std::string::npos) model = model.substr(cut + 1);
  return model;
}

StatusOr<std::vector<VidurProfile>> FindVidurProfiles(const std::string& dir) {
  std::vector<VidurProfile> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir + "/vidur", ec)) {
    const std::string name = entry.path().filename().string();
    constexpr std::string_view kPrefix = "compute_", kSuffix = "_mlp.csv";
    if (!name.starts_with(kPrefix) || !name.ends_with(kSuffix)) continue;
    const size_t gpu_end = name.find('_', kPrefix.size());
    if (gpu_end == std::string::npos || gpu_end + kSuffix.size() >= name.size()) continue;
    out.push_back({.gpu = name.substr(kPrefix.size(), gpu_end - kPrefix.size()),
                   .model = VidurModelName(name),
                   .path = entry.path().string()});
  }
  if (out.empty()) {
    return NotFoundError(
        fmt::format("{}/vidur: no compute_<gpu>_*_mlp.csv (vidur compute profiles)", dir));
  }
  std::sort(out.begin(), out.end(),
            [](const VidurProfile& a, const VidurProfile& b) { return a.path < b.path; });
  return out;
}

std::vector<std::string> ProfiledGpus(const std::vector<VidurProfile>& profiles) {
  std::set<std::string> gpus;
  for (const VidurProfile& p : profiles) gpus.insert(p.gpu);
  return {gpus.begin(), gpus.end()};
}

std::vector<VidurProfile> ProfilesOf(const std::vector<VidurProfile>& profiles,
                                     std::string_view gpu) {
  std::vector<VidurProfile> out;
  for (const VidurProfile& p : profiles) {
    if (p.gpu == gpu) out.push_back(p);
  }
  return out;
}

std::string EfficiencyFit::PresetLine() const {
  return fmt::format(
      "efficiency: {{compute: {}, memory: {}, network: {}, memory_kernels: {}, residual: {}, "
      "embedding: {}}}",
      efficiency.compute, efficiency.memory, efficiency.network, efficiency.memory_kernels,
      efficiency.residual, efficiency.embedding);
}

std::string EfficiencyFit::Report() const {
  std::string s;
  for (const FittedParameter& p : parameters) {
    s += fmt::format("{:<14} {:>7} -> {:<7} {}{} ({} points)\n", p.name,
                     p.before > 0 ? fmt::format("{}", p.before) : "default", p.after,
                     p.at_bound ? "[at its bound] " : "", p.ops, p.points);
  }
  return s;
}

StatusOr<EfficiencyFit> FitEfficiency(const std::vector<LoadedProfile>& profiles,
                                      const spec::ClusterSpec& base,
                                      const CostOptions& options,
                                      const FitOptions& fit_options) {
  if (profiles.empty()) return InvalidArgumentError("fit: no profiles to fit on");
  EfficiencyFit fit;
  fit.gpu = profiles.front().profile.gpu;
  fit.min_tokens = fit_options.min_tokens;
  fit.efficiency = base.efficiency;
  for (const LoadedProfile& p : profiles) {
    if (p.profile.gpu != fit.gpu) {
      return InvalidArgumentError(
          fmt::format("fit: {} is a {} profile; every profile of one fit must be of one GPU ({})",
                      p.profile.path, p.profile.gpu, fit.gpu));
    }
    fit.files.push_back(std::filesystem::path(p.profile.path).filename().string());
  }
  std::sort(fit.files.begin(), fit.files.end());
  spec::ClusterSpec cluster = base;
  for (const internal::ParameterSpec& param : internal::FittedParameters()) {
    std::vector<const ProfilePoint*> points;
    for (const LoadedProfile& profile : profiles) {
      for (const ProfilePoint& p : profile.points) {
        if (p.tokens >= fit_options.min_tokens && p.measured_s > 0 &&
            std::find(param.ops.begin(), param.ops.end(), p.op) != param.ops.end()) {
          points.push_back(&p);
        }
      }
    }
    std::string ops;
    for (std::string_view op : param.ops) ops += fmt::format("{}{}", ops.empty() ? "" : ", ", op);
    if (points.empty()) {
      return InvalidArgumentError(fmt::format(
          "fit: no {} points with tokens >= {} in the {} profiles; efficiency.{} cannot be fitted",
          ops, fit_options.min_tokens, fit.gpu, param.name));
    }
    FittedParameter out{.name = std::string(param.name),
                        .ops = ops,
                        .points = static_cast<int>(points.size()),
                        .before = cluster.efficiency.*param.field};
    // The median log error falls as the efficiency rises: bisect for its zero on a log scale.
    auto error_at = [&](double value) {
      cluster.efficiency.*param.field = value;
      return internal::MedianLogError(points, cluster, options);
    };
    double lo = std::log(param.min), hi = std::log(param.max);
    double value = 0;
    if (error_at(param.max) > 0) {
      value = param.max;
      out.at_bound = true;
    } else if (error_at(param.min) < 0) {
      value = param.min;
      out.at_bound = true;
    } else {
      for (int iter = 0; iter < 100; ++iter) {
        const double mid = 0.5 * (lo + hi);
        (error_at(std::exp(mid)) > 0 ? lo : hi) = mid;
      }
      value = std::exp(0.5 * (lo + hi));
    }
    value = std::clamp(internal::RoundSignificant(value, fit_options.significant_digits), param.min,
                       param.max);
    cluster.efficiency.*param.field = value;
    out.after = value;
    fit.parameters.push_back(std::move(out));
  }
  fit.efficiency = cluster.efficiency;
  return fit;
}

std::vector<LomoFold> LeaveOneModelOutFolds(int num_profiles) {
  std::vector<LomoFold> folds;
  if (num_profiles < 2) return folds;
  for (int held_out = 0; held_out < num_profiles; ++held_out) {
    LomoFold fold;
    fold.held_out = held_out;
    for (int i = 0; i < num_profiles; ++i) {
      if (i != held_out) fold.fit_on.push_back(i);
    }
    folds.push_back(std::move(fold));
  }
  return folds;
}

StatusOr<std::vector<ValidationPoint>> ValidateVidurGpus(const std::string& dir,
                                                         const ClusterForGpu& cluster_for,
                                                         const CostOptions& options,
                                                         double split_tokens,
                                                         const FitOptions& fit_options) {
  WEFT_ASSIGN_OR_RETURN(const std::vector<VidurProfile> all, FindVidurProfiles(dir));
  std::vector<ValidationPoint> points;
  for (const std::string& gpu : ProfiledGpus(all)) {
    StatusOr<spec::ClusterSpec> cluster = cluster_for(gpu);
    if (!cluster.ok()) {
      return cluster.status().WithPrefix(
          fmt::format("{}/vidur/compute_{}_*_mlp.csv: the cluster of GPU '{}'", dir, gpu, gpu));
    }
    std::vector<LoadedProfile> loaded;
    for (const VidurProfile& profile : ProfilesOf(all, gpu)) {
      WEFT_ASSIGN_OR_RETURN(LoadedProfile p, LoadVidurProfile(profile));
      loaded.push_back(std::move(p));
    }
    for (const LoadedProfile& p : loaded) {
      auto predicted = PredictProfile(p, *cluster, options, "vidur (preset)", split_tokens);
      points.insert(points.end(), predicted.begin(), predicted.end());
    }
    for (const LomoFold& fold : LeaveOneModelOutFolds(static_cast<int>(loaded.size()))) {
      std::vector<LoadedProfile> fit_on;
      for (int i : fold.fit_on) fit_on.push_back(loaded[i]);
      WEFT_ASSIGN_OR_RETURN(EfficiencyFit fit,
                            FitEfficiency(fit_on, *cluster, options, fit_options));
      spec::ClusterSpec refit = *cluster;
      refit.efficiency = fit.efficiency;
      auto predicted =
          PredictProfile(loaded[fold.held_out], refit, options, "vidur LOMO", split_tokens);
      points.insert(points.end(), predicted.begin(), predicted.end());
    }
  }
  return points;
}

StatusOr<std::string> ApplyFitToPresetYaml(std::string_view yaml,
                                           const EfficiencyFit& fit,
                                           std::string_view command,
                                           std::string_view date) {
  std::vector<std::string_view> lines;
  for (size_t start = 0; start < yaml.size();) {
    size_t end = yaml.find('\n', start);
    if (end == std::string_view::npos) end = yaml.size();
    lines.push_back(yaml.substr(start, end - start));
    start = end + 1;
  }
  std::string out;
  bool replaced = false;
  bool in_efficiency = false;  // skipping a block-style `efficiency:` map's indented lines
  for (std::string_view line : lines) {
    if (in_efficiency && (line.starts_with(' ') || line.starts_with('\t'))) continue;
    in_efficiency = false;
    if (line.starts_with("# fit:")) continue;  // the previous fit's provenance
    if (line.starts_with("efficiency:")) {
      in_efficiency = true;
      out += fmt::format("# fit: `{}` on {}, points with tokens >= {} of vidur/\n", command, date,
                         fit.min_tokens);
      for (const std::string& file : fit.files) out += fmt::format("# fit:   {}\n", file);
      out += "# fit: (memory = α_m and network = α_n are not fitted: kept as set above)\n";
      for (const FittedParameter& p : fit.parameters) {
        out += fmt::format("# fit:   {:<14} <- median log error 0 over {} ({} points){}\n", p.name,
                           p.ops, p.points, p.at_bound ? ", clamped at its bound" : "");
      }
      out += fit.PresetLine() + "\n";
      replaced = true;
      continue;
    }
    out += std::string(line) + "\n";
  }
  if (!replaced) {
    return InvalidArgumentError(
        "cluster preset: no top-level `efficiency:` line to replace with the fitted values");
  }
  return out;
}

}  // namespace weft::cost
