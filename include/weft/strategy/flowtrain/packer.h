#pragma once
// FlowTrain's dynamic packing scheduler (../shared/papers/flowtrain.txt §3.4, Algorithm 1):
// post-encoding sequences (text + visual tokens as the LLM sees them) are packed into
// fixed-capacity microbatches by segment-tree best fit, each packed microbatch is priced by eq. 3,
// and the microbatches are dispatched zig-zag over the DP ranks so that heavy and light pair up.
//
//   auto fit = FitPackCost(model, llm, /*tp=*/2, cost_model, {.capacity_tokens = 8192});
//   auto packed = PackAndDispatch(lengths, {.capacity_tokens = 8192, .dp = 8, .cost = fit->cost});
//   auto batch_packing = PackBatch(model, batch, {.capacity_tokens = 8192, .dp = 8, .cost = ...});
//   // batch_packing->assignment: Assignment::sequences + per-replica microbatches
//
// Eq. 3 (cost of a packed microbatch m of capacity C, one backbone layer, forward + backward):
//   cost_s(m) = linear_s · tokens(m) / C + quadratic_s · Σ_{i ∈ m} len_i² / C²  (+ fixed_s)
// linear_s: the layer's token-linear work (GEMMs, norms, TP collectives) on C tokens;
// quadratic_s: its attention core on one sequence of C tokens. The paper's text motivates the
// quadratic term with the longest sub-sequence; packed (varlen) attention works on every
// sub-sequence, so weft uses Σ len² (what the cost model prices; docs/strategies_flowtrain.md).
// The two coefficients are fitted per backbone (module, TP) by least squares on the cost model's
// own layer times (FitPackCost), which reports the fit's error on held-out random packs; an
// optional third, constant term (fixed_s, not in the paper) absorbs the per-microbatch overheads
// that make the two-term fit miss at small capacities.
//
// Steps of PackAndDispatch (PackPolicy::kFlowTrain):
//  1. best fit (algo::BestFit, segment tree over residuals, O(log C) per item) with Algorithm 1's
//     closing rule: a microbatch leaves the tree when its residual is below the smallest pending
//     length; items in decreasing length by default (the pool holds the whole batch);
//  1b. (weft's, not the paper's) splits up to the wanted count and, optionally, to a multiple of
//     the DP size so that every rank runs as many microbatches (PackOptions);
//  2. eq. 3 cost per microbatch;
//  3. buckets of similar cost: num_cost_buckets equal-width cost ranges over [min, max]; buckets
//     heaviest first, microbatches by decreasing cost within a bucket (ties: lower index) — with
//     contiguous cost ranges this is the global decreasing-cost order; the bucket is reported;
//  4. zig-zag dispatch of that order over the d ranks: 0, 1, .., d-1, d-1, .., 0, 0, 1, ...;
//     each rank runs its microbatches in the order received.
// PackPolicy::kFirstFitRoundRobin (the `flowtrain-no-scheduler` ablation): first-fit decreasing
// packing, microbatch b to rank b mod d in packing order.
//
// Deterministic: results depend only on the inputs. Thread-safety: pure functions.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"
#include "weft/cost/cost_model.h"
#include "weft/cost/throughput_table.h"
#include "weft/data/workload.h"
#include "weft/planning/strategy.h"
#include "weft/spec/model.h"
#include "weft/spec/workload.h"

namespace weft::strategy::flowtrain {

// Eq. 3 with its two fitted coefficients.
struct PackCost {
  int64_t capacity_tokens = 8192;  // C, the normalization
  double linear_s = 0;             // seconds per layer of C valid tokens' linear work
  double quadratic_s = 0;          // seconds per layer of attention over one C-token sequence
  // Seconds per layer per microbatch whatever it holds (kernel launches, collective latencies);
  // not in the paper's eq. 3: 0 unless fitted with PackCostFitOptions::fixed_term.
  double fixed_s = 0;

  // Cost in seconds (one layer, forward + backward) of a microbatch of `tokens` valid tokens
  // whose sub-sequences have Σ len² = sum_squared_tokens.
  double CostS(double tokens, double sum_squared_tokens) const;
  // Same, from the sub-sequence lengths.
  double CostS(std::span<const int64_t> lengths) const;
  // capacity_tokens >= 1, coefficients finite and >= 0.
  Status Validate() const;
};

struct PackCostFitOptions {
  int64_t capacity_tokens = 8192;  // C
  // Shortest sub-sequence length in the fitting grid and the held-out packs (tokens).
  int64_t min_length_tokens = 64;
  // Fitting grid: fill fractions of C × equal-length segment counts (1, 2, 4, ... up to
  // C / min_length_tokens) plus mixes of one long and many short segments.
  std::vector<double> fill_fractions = {0.125, 0.25, 0.5, 0.75, 1.0};
  int held_out_packs = 200;  // random packs the error is measured on
  uint64_t seed = 1;         // of the held-out packs
  // Also fit PackCost::fixed_s (a third term, not in the paper's eq. 3); false = eq. 3 as
  // published.
  bool fixed_term = false;
  Status Validate() const;
};

struct PackCostFit {
  PackCost cost;
  int module = -1;
  int tp = 1;
  int fit_points = 0;
  int held_out_packs = 0;
  // |fit − reference| / reference over the held-out packs.
  double max_relative_error = 0;
  double median_relative_error = 0;
  std::string reference;  // "cost model" or "throughput table (analytical|measured)"
  // "llm tp 2, C 8192: linear 1.23 ms + quadratic 0.45 ms; held-out error median 0.8%, max 2.1%
  //  over 200 packs"
  std::string BriefReport() const;
};

// Fits eq. 3 for LLM module `module` of `model` at tensor parallel `tp` on one middle layer's
// forward + backward (the module's BackwardModeOf) as `cost_model` prices a packed TokenShape,
// by least squares on relative residuals (each grid point weighted by 1 / its reference time).
// Errors: InvalidArgument (module not an LLM, bad options), the cost model's errors.
StatusOr<PackCostFit> FitPackCost(const spec::ModelSpec& model,
                                  int module,
                                  int tp,
                                  const cost::CostModel& cost_model,
                                  const PackCostFitOptions& options = {});

// The same fit against a throughput table (measured or analytical): a pack's reference time is
// LlmLinearTime(tokens) + Σ_i LlmAttentionTime(len_i), forward + backward.
StatusOr<PackCostFit> FitPackCost(const cost::ThroughputTable& table,
                                  int module,
                                  int tp,
                                  const PackCostFitOptions& options = {});

enum class PackPolicy {
  kFlowTrain,           // best fit (Algorithm 1's closing rule), cost buckets, zig-zag
  kFirstFitRoundRobin,  // first-fit decreasing, round-robin (the `flowtrain-no-scheduler` ablation)
};
std::string_view PackPolicyName(PackPolicy policy);  // "flowtrain-pack", "first-fit-round-robin"

struct PackOptions {
  int64_t capacity_tokens = 8192;  // C: tokens per packed microbatch
  int dp = 1;                      // DP ranks to dispatch to
  // Microbatches wanted per rank; 0 = as packing gives (at least one per rank). While there are
  // fewer microbatches than the target (dp · wanted, and with equal_microbatches_per_rank the next
  // multiple of dp), the one with most tokens among those of >= 2 items is split in two (its items
  // longest first, each to the half with fewer tokens) until the target is met or nothing can be
  // split; notes say given vs used. Packing never merges: with more microbatches than dp · wanted,
  // ranks receive more.
  int microbatches_per_rank = 0;
  PackCost cost;  // eq. 3; capacity_tokens must equal the one above
  PackPolicy policy = PackPolicy::kFlowTrain;
  // kFlowTrain: items by decreasing length before best fit (false = in the given order, online).
  bool sort_decreasing = true;
  // kFlowTrain: split microbatches (as above) until their count is a multiple of dp, so that every
  // rank runs as many (a rank with one more stalls the others at the gradient sync). Not in the
  // paper (false = the count packing gives); trades padding for balance when microbatches are
  // few per rank (docs/strategies_flowtrain.md has the numbers).
  bool equal_microbatches_per_rank = false;
  // kFlowTrain: equal-width cost buckets over [min, max] microbatch cost (>= 1).
  int num_cost_buckets = 8;
  Status Validate() const;
};

struct PackedMicrobatch {
  std::vector<int> items;  // item indices, increasing
  int64_t tokens = 0;      // valid tokens
  double cost_s = 0;       // eq. 3
  int bucket = 0;          // kFlowTrain: cost bucket (0 = heaviest); else 0
};

struct PackResult {
  std::vector<PackedMicrobatch> microbatches;  // in packing order
  // ranks[r] = indices into `microbatches`, in the order rank r runs them.
  std::vector<std::vector<int>> ranks;
  std::vector<double> rank_cost_s;   // Σ eq. 3 cost per rank
  std::vector<int64_t> rank_tokens;  // Σ valid tokens per rank
  int64_t capacity_tokens = 0;
  int64_t total_tokens = 0;     // Σ lengths
  int64_t padding_tokens = 0;   // microbatches · C − total_tokens
  double padding_fraction = 0;  // padding_tokens / (microbatches · C)
  double dp_imbalance = 1;      // max rank cost / mean rank cost (1 = balanced)
  int max_open_bins = 0;        // best fit: the most microbatches open at once
  int splits = 0;               // microbatches split to reach the wanted count
  PackPolicy policy = PackPolicy::kFlowTrain;
  std::string notes;  // given vs used

  // "256 items in 40 microbatches of 8192 over 8 ranks: padding 3.1%, DP imbalance 1.012"
  std::string BriefReport() const;
};

// Packs items of the given lengths (tokens) and dispatches the microbatches over options.dp
// ranks. Errors: InvalidArgument naming the item for a length < 1 or > capacity_tokens ("a
// sequence must fit one microbatch"), bad options; FailedPrecondition when the items cannot make
// one microbatch per rank.
StatusOr<PackResult> PackAndDispatch(std::span<const int64_t> lengths, const PackOptions& options);

// The batch's samples' LLM tokens (text + modality tokens after merge, data::LlmTokenCounter)
// for LLM module `llm_module` (-1 = the first LLM).
StatusOr<std::vector<int64_t>> SampleLengths(const spec::ModelSpec& model,
                                             const spec::Batch& batch,
                                             int llm_module = -1,
                                             const data::WorkloadOptions& workload = {});

// A global batch packed for the backbone: the assignment and the packing behind it.
struct BatchPacking {
  planning::Assignment assignment;
  PackResult packing;
};

// FlowTrain's assignment of one global batch: its samples re-packed (PackAndDispatch on their
// LLM tokens) into Assignment::sequences, one packed sequence per microbatch (its samples in
// increasing index, llm_tokens = their sum); replicas[r] = rank r's microbatches in run order,
// each {its sequence index}. policy "flowtrain-pack" (kFlowTrain) or "flowtrain-no-scheduler"
// (kFirstFitRoundRobin); notes say given vs used, padding and DP imbalance. Errors: as
// PackAndDispatch, naming the sample (index and Sample::id) whose tokens exceed the capacity.
StatusOr<BatchPacking> PackBatch(const spec::ModelSpec& model,
                                 const spec::Batch& batch,
                                 const PackOptions& options,
                                 int llm_module = -1,
                                 const data::WorkloadOptions& workload = {});

// PackBatch with options.policy = PackPolicy::kFirstFitRoundRobin (the `flowtrain-no-scheduler`
// ablation: first-fit decreasing packing, round-robin dispatch).
StatusOr<BatchPacking> FirstFitRoundRobin(const spec::ModelSpec& model,
                                          const spec::Batch& batch,
                                          PackOptions options,
                                          int llm_module = -1,
                                          const data::WorkloadOptions& workload = {});

}  // namespace weft::strategy::flowtrain
