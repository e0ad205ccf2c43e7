#pragma once
// CostCorrection: a measured overlay on the analytical cost model (DFLOP §3.4.3 "Adaptive
// Correction", for any strategy). Kernels switch algorithms with tensor shapes, so a few shapes
// run consistently slower or faster than any smooth model predicts; the runtime's measured stage
// times correct them:
//
//   key    = (module index, pass, shape bucket)          // ShapeBucketOf(TokenShape)
//   factor = measured / predicted, smoothed              // UpdateCorrection; 1 where unobserved
//   corrected time = factor × uncorrected time           // CostModel::WithCorrection
//
// The correction multiplies the stage's compute times only: forward_s by the forward factor,
// backward_input_s and backward_weight_s by theirs, recompute_s (a forward replay in the
// backward) by the forward factor. FLOPs, memory, offload copies (PCIe) and communication never
// change. There is no additive term: a bucket spans a factor 2^(1/4) of tokens, within which a
// fixed overhead and a proportional one are indistinguishable from a factor.
//
//   auto c0 = std::make_shared<const cost::CostCorrection>();        // empty: factor 1
//   auto c1 = cost::UpdateCorrection(*c0, observations);             // after iteration 1
//   cost::CostModel corrected = model.WithCorrection(*c1);           // shares model's cache
//
// Identity: every correction other than the empty one carries a `version` unique in the process
// and larger than the version of the correction it was derived from (a process-wide counter:
// two corrections derived from the same one never share a version), so caches of corrected
// results key on it and never mix two corrections. The empty correction has version 0. Versions
// are identities, not data: they depend on how many corrections the process made before, so
// nothing written to a report or plan should show them; `generation` (updates along the chain)
// is deterministic.
//
// Thread-safety: CostCorrection is immutable once made, so any number of threads may read one;
// the free functions are pure (apart from taking a fresh version number, atomically).
#include <compare>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "weft/common/status.h"
#include "weft/cost/ops.h"

namespace weft::cost {

// The shape bucket of a stage's workload: geometric buckets of two numbers of a TokenShape.
//   tokens       = floor(4 · log2(shape.tokens))          (ratio 2^(1/4) ≈ 1.19 per bucket),
//                  −1 when shape.tokens = 0;
//   mean_segment = floor(2 · log2(Σs²/Σs))                 (ratio 2^(1/2) ≈ 1.41 per bucket),
//                  −1 when the mean attention length is below 1 (an empty shape).
// Computed without a logarithm: x = m · 2^k with m in [1, 2) (exact), bucket = steps · k + the
// number of thresholds 2^(j/steps), 0 < j < steps (the nearest doubles), that m reaches.
// `tokens` is what DFLOP keys by (an encoder's batch of images: tokens = images × tokens per
// image; the LLM's sequence length); `mean_segment` separates a packed LLM microbatch of fixed
// total length by its documents (short documents run attention at another efficiency). A
// shape's instances and context tokens do not enter the bucket.
struct ShapeBucket {
  int tokens = -1;
  int mean_segment = -1;
  auto operator<=>(const ShapeBucket&) const = default;
};
inline constexpr int kTokenBucketsPerDoubling = 4;
inline constexpr int kSegmentBucketsPerDoubling = 2;
ShapeBucket ShapeBucketOf(const TokenShape& shape);
// The smallest token count of token bucket `bucket` (≥ 0): 2^(bucket/4); the bucket holds
// [TokenBucketLowerTokens(b), TokenBucketLowerTokens(b + 1)).
double TokenBucketLowerTokens(int bucket);

struct StageObservation;
struct CorrectionRule;

// What one factor is keyed by. `module` indexes the ModelSpec's modules (the model the
// CostModel prices: a correction belongs to one model). `pass` is one the cost model prices
// separately: kForward, kBackwardInput or kBackwardWeight, never kBackward (a kBackward stage
// has a factor per part: spec::PassParts).
struct CorrectionKey {
  int module = 0;
  spec::Pass pass = spec::Pass::kForward;
  ShapeBucket bucket;
  auto operator<=>(const CorrectionKey&) const = default;
};

struct CorrectionEntry {
  CorrectionKey key;
  double factor = 1;         // multiplies the uncorrected time; finite, > 0
  int64_t observations = 0;  // measurements folded into `factor` so far
};

// The three factors of one (module, shape bucket), in the order of CostTotals' times.
struct PassFactors {
  double forward = 1;
  double backward_input = 1;
  double backward_weight = 1;
};

class CostCorrection {
 public:
  // The empty correction: factor 1 everywhere, version 0, generation 0.
  CostCorrection() = default;

  // A correction with the given factors (tests, tools, a correction restored from a log).
  // Fails on a negative module, a pass that is not kForward, kBackwardInput or kBackwardWeight,
  // a bucket ShapeBucketOf cannot give (outside [−1, 255] × [−1, 127]), a factor that is not
  // finite and > 0, negative observations or two entries with one key. Takes a fresh version;
  // generation 0.
  static StatusOr<std::shared_ptr<const CostCorrection>> Make(std::vector<CorrectionEntry> entries);

  // The factor of one key; 1 where the key has no entry (so 1 for a kBackward key, which none
  // has: ask for each of spec::PassParts(pass)).
  double Factor(const CorrectionKey& key) const;
  double Factor(int module, spec::Pass pass, const TokenShape& shape) const {
    return Factor({.module = module, .pass = pass, .bucket = ShapeBucketOf(shape)});
  }
  // The three factors of `module` at `shape` (what CostModel applies to a layer or chunk).
  PassFactors Factors(int module, const TokenShape& shape) const;
  // The entry of one key, or nullptr.
  const CorrectionEntry* Find(const CorrectionKey& key) const;

  // Entries sorted by key (module, pass, bucket), one per key.
  std::span<const CorrectionEntry> entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }
  uint64_t version() const { return version_; }
  // Updates since the empty (or Made) correction this one descends from.
  uint64_t generation() const { return generation_; }

  // One line: "correction generation 3: 5 keys, 42 observations, factors 0.91..1.37".
  std::string BriefReport() const;

 private:
  friend StatusOr<std::shared_ptr<const CostCorrection>> UpdateCorrection(
      const CostCorrection& previous,
      std::span<const StageObservation> observations,
      const CorrectionRule& rule);

  // Fills index_ from entries_.
  void BuildIndex();

  std::vector<CorrectionEntry> entries_;  // sorted by key, unique keys
  // The three factors per (module, bucket), keyed by internal::PackedKey and sorted: Factors
  // (CostModel's path, once per Layer/Chunk call) costs one search of integers.
  std::vector<std::pair<uint64_t, PassFactors>> index_;
  uint64_t version_ = 0;
  uint64_t generation_ = 0;
};

// One measured stage: its compute time on the GPU (kernel time of the stage, not time spent
// waiting for inputs) against the cost model's *uncorrected* prediction for it (a model without
// correction: CostModel::WithCorrection(nullptr), or the corrected time divided by its factor).
// A backward stage that runs input and weight gradients as one piece (spec::Pass::kBackward)
// reports two observations, one per pass of spec::PassParts (kBackward itself is refused),
// both with the whole backward's predicted and measured times (the rule reads only their ratio).
// A stage whose time is the sum of items priced separately (DFLOP prices each data item's shape)
// reports one observation per item shape, each with the stage's ratio.
struct StageObservation {
  int module = 0;
  spec::Pass pass = spec::Pass::kForward;
  TokenShape shape;                    // the shape the planner priced (bucketed by ShapeBucketOf)
  double predicted_uncorrected_s = 0;  // > 0, finite
  double measured_s = 0;               // > 0, finite
};

// The update rule, per key: the factor is an exponentially weighted geometric mean of the
// observed ratios r = measured_s / predicted_uncorrected_s, clamped to [min_ratio, max_ratio]:
//
//   ln f ← (1 − α) · ln f + α · ln r        (one observation; f starts at 1)
//
// After n observations of a constant ratio r, ln f_n = (1 − (1 − α)^n) · ln r, so the corrected
// prediction f_n·p misses the measurement r·p by the factor r^((1 − α)^n). It is within 10% of it
// when (1 − α)^n · |ln r| ≤ ln 1.1 = 0.0953. With the default α = 0.6, (1 − α)^3 = 0.064: within
// 10% after 3 observations for every r in [1/4.4, 4.4] (r = 3: off by 7.3%), after 4
// ((0.4)^4 = 0.0256) for every r in the clamp range [1/8, 8] (off by at most 5.5%). Under
// multiplicative noise of log-standard deviation σ the factor's log wanders with standard
// deviation σ·√(α/(2 − α)) = 0.65σ around the geometric mean ratio.
//
// The k observations of one key in one call act as k observations of their geometric mean
// (weight 1 − (1 − α)^k, the same as k sequential ones of equal ratio): the result does not
// depend on their order (bitwise). Keys never observed keep their factor (1 when new), so the
// predictions of other stages do not move. An observation with a negative module, an invalid
// shape, predicted ≤ 0 or non-finite, or measured ≤ 0 or non-finite fails the whole update,
// naming the observation.
struct CorrectionRule {
  double alpha = 0.6;        // weight of one observation; in (0, 1] (1 = the latest ratio only)
  double min_ratio = 0.125;  // ratios below are clamped up to it (outliers); in (0, 1]
  double max_ratio = 8;      // ratios above are clamped down to it; in [1, ∞)
  Status Validate() const;
};

// The correction `previous` updated by `observations`: a new immutable correction with a fresh
// version (> previous.version()) and generation previous.generation() + 1, even when there are
// no observations. `previous` is unchanged.
StatusOr<std::shared_ptr<const CostCorrection>> UpdateCorrection(
    const CostCorrection& previous,
    std::span<const StageObservation> observations,
    const CorrectionRule& rule = {});

}  // namespace weft::cost
