#pragma once
// Per-GPU calibration of the cost model's cluster efficiencies (`weft cost --fit`) from vidur's
// per-op forward profiles (../shared/data/gpu_timings/vidur/compute_<gpu>_<org>_<model>_mlp.csv),
// and leave-one-model-out (LOMO) cross-validation of that fit. The procedure (docs/cost_model.md
// "Per-GPU calibration") is deterministic: the same files give the same numbers.
// Free functions and value types; thread-safe.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"
#include "weft/cost/latency.h"
#include "weft/cost/ops.h"
#include "weft/cost/validation.h"
#include "weft/spec/cluster.h"
#include "weft/spec/model.h"

namespace weft::cost {

// One vidur compute profile file.
struct VidurProfile {
  std::string gpu;    // "a40": the <gpu> of compute_<gpu>_..._mlp.csv
  std::string model;  // "Llama-2-7b-hf": the file name's last '_' field before "_mlp"
  std::string path;
};

// compute_<gpu>_<org>_<model>_mlp.csv -> <model> (the file name's stem's last '_' field before
// "_mlp").
std::string VidurModelName(std::string_view path);

// Every <gpu_timings_dir>/vidur/compute_*_mlp.csv, sorted by path; NotFound if there is none.
StatusOr<std::vector<VidurProfile>> FindVidurProfiles(const std::string& gpu_timings_dir);
// The distinct GPUs of `profiles`, sorted.
std::vector<std::string> ProfiledGpus(const std::vector<VidurProfile>& profiles);
// The profiles of one GPU (same order).
std::vector<VidurProfile> ProfilesOf(const std::vector<VidurProfile>& profiles,
                                     std::string_view gpu);

// A measured point of a profile with the forward ops of weft's layer that model it (built once,
// so that a fit re-prices them cheaply). op "layer" sums every per-layer op the file profiles
// (each column once; vidur profiles attention separately, so it is not in the layer).
struct ProfilePoint {
  std::string op;  // weft op name ("mlp_up", "embedding", ...) or "layer"
  int tp = 1;
  double tokens = 0;
  double measured_s = 0;  // median of vidur's repetitions (mean over repeated rows)
  std::vector<Op> ops;    // forward ops priced by OpLatency; their sum is the prediction
};

struct LoadedProfile {
  VidurProfile profile;
  spec::ModuleSpec module;  // the profiled model, from the file's own columns
  std::vector<ProfilePoint> points;
};

// Reads one profile: ops whose column the file lacks are skipped (phi-2 has no
// post_attention_layernorm); an op column present in the header must parse on every row.
StatusOr<LoadedProfile> LoadVidurProfile(const VidurProfile& profile);

// Predicted vs measured for every point of `profile` on `cluster`. source = `source`, gpu and
// model from the profile; range = "< split" / ">= split" tokens.
std::vector<ValidationPoint> PredictProfile(const LoadedProfile& profile,
                                            const spec::ClusterSpec& cluster,
                                            const CostOptions& options,
                                            std::string_view source,
                                            double split_tokens = 512);

struct FitOptions {
  // Points with fewer tokens are not fitted: they are launch-bound and planning prices
  // microbatches of thousands of tokens. They are still reported (range "< 512").
  double min_tokens = 512;
  // Fitted values are rounded to this many significant digits (what a preset stores).
  int significant_digits = 3;
};

// Where each fitted efficiency comes from: the ops fitted and how many points.
struct FittedParameter {
  std::string name;  // "memory_kernels", "residual", "embedding", "compute"
  std::string ops;   // "qkv_proj, out_proj, mlp_up, mlp_down"
  int points = 0;
  double before = 0;      // the base cluster's value (0 = the cost model's default)
  double after = 0;       // fitted, rounded
  bool at_bound = false;  // the median-zero root lay outside the allowed range: clamped
};

struct EfficiencyFit {
  std::string gpu;
  std::vector<std::string> files;      // file names fitted on, sorted
  double min_tokens = 0;               // FitOptions::min_tokens of the fit
  spec::EfficiencyFactors efficiency;  // the base's with the FitEfficiency parameters fitted
  std::vector<FittedParameter> parameters;
  // "efficiency: {compute: 0.884, memory: 0.8, network: 0.8, memory_kernels: 1.5, ...}"
  std::string PresetLine() const;
  // One line per fitted parameter: name, before → after, ops and point count.
  std::string Report() const;
};

// Fits α_f and the per-GPU memory-kernel efficiencies of `base` to `profiles` (one GPU). Each
// parameter is the root, by bisection on a log scale, of "median of the signed log error over
// its points = 0" (tokens >= min_tokens), in this order (each uses the ones before it):
//   memory_kernels   input_norm, post_attn_norm, mlp_act, rope     in [1e-3, 4]
//   residual         residual_add                                  in [1e-3, 4]
//   embedding        embedding                                     in [1e-3, 4]
//   compute (α_f)    qkv_proj, out_proj, mlp_up, mlp_down          in [1e-3, 1]
// α_m and α_n stay the base's (datasheet fractions: the GEMM/attention memory floors and the
// optimizer step use α_m); the GEMM size curve, the class efficiencies' ratios and the kernel
// launch cost stay cluster-independent.
// InvalidArgument when `profiles` is empty, mixes GPUs, or leaves a parameter without points.
StatusOr<EfficiencyFit> FitEfficiency(const std::vector<LoadedProfile>& profiles,
                                      const spec::ClusterSpec& base,
                                      const CostOptions& options = {},
                                      const FitOptions& fit_options = {});

// One leave-one-model-out fold over the profiles of one GPU: fit on `fit_on`, validate on
// `held_out` (indices into the profile list).
struct LomoFold {
  int held_out = 0;
  std::vector<int> fit_on;
};
// One fold per profile when there are >= 2 profiles (in order); none for a single model — LOMO
// is impossible there and callers report in-sample error instead.
std::vector<LomoFold> LeaveOneModelOutFolds(int num_profiles);

// The compute check of `weft cost --validate` for every GPU with vidur profiles under
// `gpu_timings_dir`, on `cluster_for(gpu)` (the GPU's preset):
//  - source "vidur (preset)": every profile on the preset as stored (in-sample for fitted GPUs);
//  - source "vidur LOMO": for GPUs with >= 2 models, each held-out profile on the preset with
//    its efficiencies refitted to the other models.
// Points carry range "< split" / ">= split" and include op "layer".
using ClusterForGpu = std::function<StatusOr<spec::ClusterSpec>(std::string_view gpu)>;
StatusOr<std::vector<ValidationPoint>> ValidateVidurGpus(const std::string& gpu_timings_dir,
                                                         const ClusterForGpu& cluster_for,
                                                         const CostOptions& options = {},
                                                         double split_tokens = 512,
                                                         const FitOptions& fit_options = {});

// Replaces the `efficiency:` line of a cluster preset's YAML text with `fit`'s and its
// provenance comment block (lines starting "# fit:") with one naming the command, the files
// and `date` (YYYY-MM-DD). InvalidArgument when the text has no top-level `efficiency:` line.
StatusOr<std::string> ApplyFitToPresetYaml(std::string_view preset_yaml,
                                           const EfficiencyFit& fit,
                                           std::string_view command,
                                           std::string_view date);

}  // namespace weft::cost
