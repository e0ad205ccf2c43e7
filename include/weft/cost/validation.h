#pragma once
// Model error against measured GPU timings (../shared/data/gpu_timings): vidur's per-op Llama-2-7B
// forward profiles (H100, A100), distca's flash-attention and nccl-tests measurements and vidur's
// H100 DGX collectives. Produces the error table of docs/cost_model.md (`weft cost --validate`).
// Free functions; thread-safe.
#include <string>
#include <vector>

#include "weft/common/status.h"
#include "weft/cost/latency.h"
#include "weft/spec/cluster.h"
#include "weft/spec/model.h"

namespace weft::cost {

// The hardware the reference measurements ran on (public datasheet numbers; α's = defaults).
spec::ClusterSpec ReferenceH100Dgx();  // H100 SXM: 989 TFLOP/s, 3.35 TB/s, NVLink 450 GB/s
spec::ClusterSpec ReferenceA100Dgx();  // A100 SXM 80GB: 312 TFLOP/s, 2.04 TB/s, NVLink 300 GB/s
// Llama-2-7B as one LLM module (the model of vidur's profiles).
spec::ModuleSpec Llama2_7bModule();

struct ValidationPoint {
  std::string source;  // "vidur", "distca", "nccl-tests"
  std::string gpu;     // "h100", "a100"
  std::string op;      // weft op name, "attention", "all_reduce", "send_recv", ...
  int tp = 1;          // TP size (compute) or group size (collectives)
  double size = 0;     // tokens (compute) or bytes (collectives)
  double measured_s = 0;
  double predicted_s = 0;
  double RelativeError() const;  // |predicted − measured| / measured
};

struct ValidationSummary {
  std::string source, gpu, op;
  int count = 0;
  double median_error = 0;  // median relative error
  double max_error = 0;
};

// vidur compute CSV (compute_<gpu>_..._mlp.csv): one point per (op, tokens ≥ min_tokens, tp),
// forward latency of the analytical model (no measured table) vs the median measurement.
StatusOr<std::vector<ValidationPoint>> ValidateVidurCompute(const std::string& csv_path,
                                                            const std::string& gpu,
                                                            const spec::ClusterSpec& cluster,
                                                            const CostOptions& options = {},
                                                            double min_tokens = 1);
// distca compute-attn-H100.psv (flash-attention forward over 32K tokens packed as equal
// documents; cp = 1 rows) vs the attention op's forward, and compute-attn-megatron.csv (one
// causal sequence per row, ≈3.0× the forward-only kernel: read as forward + backward) vs the
// attention op's forward + backward.
StatusOr<std::vector<ValidationPoint>> ValidateDistcaAttention(const std::string& gpu_timings_dir,
                                                               const CostOptions& options = {});
// vidur network_h100_dgx_{all_reduce,send_recv}.csv and distca nccl_perf.csv.
StatusOr<std::vector<ValidationPoint>> ValidateCollectives(const std::string& gpu_timings_dir,
                                                           const CostOptions& options = {});
// All of the above from the gpu_timings directory (compute points with tokens ≥ min_tokens).
StatusOr<std::vector<ValidationPoint>> ValidateAll(const std::string& gpu_timings_dir,
                                                   const CostOptions& options = {},
                                                   double min_tokens = 1);

// Median / max error per (source, gpu, op), in first-appearance order.
std::vector<ValidationSummary> Summarize(const std::vector<ValidationPoint>& points);
// Markdown table of the summaries.
std::string SummaryMarkdown(const std::vector<ValidationSummary>& summaries);

}  // namespace weft::cost
