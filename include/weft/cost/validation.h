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
  std::string model;   // "Llama-2-7b-hf" (vidur: from the file name), "" where not per model
  std::string op;      // weft op name, "attention", "all_reduce", "send_recv", ...
  int tp = 1;          // TP size (compute) or group size (collectives)
  double size = 0;     // tokens (compute) or bytes (collectives)
  std::string range;   // token range of a compute point ("< 512", ">= 512"), "" = not split
  double measured_s = 0;
  double predicted_s = 0;
  double RelativeError() const;  // |predicted − measured| / measured
  double SignedError() const;    // (predicted − measured) / measured
};

struct ValidationSummary {
  std::string source, gpu, model, op, range;
  int count = 0;
  double median_error = 0;  // median relative error
  double p90_error = 0;     // 90th percentile of the relative error (nearest rank)
  double max_error = 0;
  double median_signed_error = 0;  // bias: > 0 over-predicts
};

// vidur compute CSV (compute_<gpu>_<org>_<model>_mlp.csv): one point per (op, tokens ≥
// min_tokens, tp) and op "layer" (fit.h: LoadVidurProfile), forward latency of the analytical model
// (no measured table) vs the median measurement. The model (heads, KV heads, hidden, FFN, vocab,
// gated MLP) is read from the file's own columns, so any vidur profile (Llama-2-7B, Llama-2-70B,
// ...) is a separate check.
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
// All of the above from the gpu_timings directory: the vidur compute check of every GPU with
// profiles, on that GPU's cluster preset (ValidateVidurGpus in fit.h: in-sample and
// leave-one-model-out, compute points labelled "< split_tokens" / ">= split_tokens"), then
// distca's attention and the collectives.
StatusOr<std::vector<ValidationPoint>> ValidateAll(const std::string& gpu_timings_dir,
                                                   const CostOptions& options = {},
                                                   double split_tokens = 512);

// A table written by bench/gpu_harness.py (columns op, kind, m, n, k, tokens, heads, kv_heads,
// head_dim, bytes, causal, latency_ms; kind ∈ gemm, attention, norm, h2d, d2h) vs this model on
// `cluster`: GEMMs and norms through OpLatency, attention as one causal/full segment of `tokens`
// with `heads` query heads, host copies as bytes / cluster.host_link_bandwidth_bytes_per_s (the
// offload model's price). source = "harness", gpu = cluster.gpu.name, model = "".
StatusOr<std::vector<ValidationPoint>> ValidateHarnessTable(const std::string& csv_path,
                                                            const spec::ClusterSpec& cluster,
                                                            const CostOptions& options = {});

// Median / p90 / max error and bias per (source, gpu, model, op, range), in first-appearance
// order.
std::vector<ValidationSummary> Summarize(const std::vector<ValidationPoint>& points);
// Markdown table of the summaries.
std::string SummaryMarkdown(const std::vector<ValidationSummary>& summaries);
// Markdown table "op | model | gpu | source | points | median / p90 / bias before → after" of two
// summaries of the same points (matched by source, gpu, model, op): a calibration change's effect.
std::string CompareMarkdown(const std::vector<ValidationSummary>& before,
                            const std::vector<ValidationSummary>& after);

}  // namespace weft::cost
