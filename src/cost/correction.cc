#include "weft/cost/correction.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <map>
#include <utility>

namespace weft::cost {

namespace internal {
namespace {

// The one process-wide state of corrections: the last version handed out (identities only; no
// result depends on the value).
std::atomic<uint64_t> last_correction_version{0};

uint64_t NextCorrectionVersion() {
  return last_correction_version.fetch_add(1, std::memory_order_relaxed) + 1;
}

// 2^(j/4) for j = 1, 2, 3 and 2^(1/2): the thresholds within one doubling.
constexpr std::array<double, 3> kQuarterRoots = {1.1892071150027210667, 1.4142135623730950488,
                                                 1.6817928305074290861};
constexpr std::array<double, 1> kHalfRoots = {1.4142135623730950488};

// floor(steps · log2(x)) for finite x ≥ 1, else −1, without a logarithm: x = m · 2^k with m in
// [1, 2) (frexp and the doubling are exact), plus the thresholds m reaches. Exact at powers of
// two; the other boundaries are irrational, so only an x within one rounding of one could land
// on the other side than the real-number formula puts it.
template <size_t N>
int GeometricBucket(double x, const std::array<double, N>& roots) {
  if (!(x >= 1) || !std::isfinite(x)) return -1;
  int exponent = 0;
  const double m = 2 * std::frexp(x, &exponent);  // x = m · 2^(exponent − 1)
  int bucket = static_cast<int>(N + 1) * (exponent - 1);
  for (double root : roots) bucket += m >= root ? 1 : 0;
  return bucket;
}

// (module, bucket) as one integer whose order is that of (module, tokens, mean_segment):
// for int64 tokens, buckets lie in [−1, 255] and [−1, 127] (Make checks), so each fits 16 bits
// once shifted by one.
uint64_t PackedKey(int module, const ShapeBucket& b) {
  return (static_cast<uint64_t>(module) << 32) | (static_cast<uint64_t>(b.tokens + 1) << 16) |
         static_cast<uint64_t>(b.mean_segment + 1);
}

// A key's pass: one the cost model prices separately (spec::PassParts), never kBackward.
bool ValidPass(spec::Pass pass) {
  return pass == spec::Pass::kForward || pass == spec::Pass::kBackwardInput ||
         pass == spec::Pass::kBackwardWeight;
}

}  // namespace
}  // namespace internal

ShapeBucket ShapeBucketOf(const TokenShape& shape) {
  static_assert(internal::kQuarterRoots.size() + 1 == kTokenBucketsPerDoubling);
  static_assert(internal::kHalfRoots.size() + 1 == kSegmentBucketsPerDoubling);
  return {
      .tokens =
          internal::GeometricBucket(static_cast<double>(shape.tokens), internal::kQuarterRoots),
      .mean_segment = internal::GeometricBucket(shape.MeanSegmentTokens(), internal::kHalfRoots)};
}

double TokenBucketLowerTokens(int bucket) {
  return std::exp2(static_cast<double>(bucket) / kTokenBucketsPerDoubling);
}

StatusOr<std::shared_ptr<const CostCorrection>> CostCorrection::Make(
    std::vector<CorrectionEntry> entries) {
  for (size_t i = 0; i < entries.size(); ++i) {
    const CorrectionEntry& e = entries[i];
    if (e.key.module < 0) {
      return InvalidArgumentError(
          fmt::format("correction entry {}: key.module = {}; must be >= 0", i, e.key.module));
    }
    if (!internal::ValidPass(e.key.pass)) {
      return InvalidArgumentError(fmt::format(
          "correction entry {}: key.pass = {}; must be kForward, kBackwardInput or kBackwardWeight",
          i, static_cast<int>(e.key.pass)));
    }
    // The reach of ShapeBucketOf (int64 tokens, a mean length ≤ tokens); PackedKey relies on it.
    if (e.key.bucket.tokens < -1 || e.key.bucket.tokens > 255 || e.key.bucket.mean_segment < -1 ||
        e.key.bucket.mean_segment > 127) {
      return InvalidArgumentError(fmt::format(
          "correction entry {}: key.bucket = ({}, {}); must lie in [-1, 255] x [-1, 127]", i,
          e.key.bucket.tokens, e.key.bucket.mean_segment));
    }
    if (!std::isfinite(e.factor) || e.factor <= 0) {
      return InvalidArgumentError(
          fmt::format("correction entry {}: factor = {}; must be finite and > 0", i, e.factor));
    }
    if (e.observations < 0) {
      return InvalidArgumentError(
          fmt::format("correction entry {}: observations = {}; must be >= 0", i, e.observations));
    }
  }
  std::sort(entries.begin(), entries.end(),
            [](const CorrectionEntry& a, const CorrectionEntry& b) { return a.key < b.key; });
  for (size_t i = 1; i < entries.size(); ++i) {
    if (entries[i].key == entries[i - 1].key) {
      const CorrectionKey& k = entries[i].key;
      return InvalidArgumentError(fmt::format(
          "correction entries: key (module {}, {}, tokens bucket {}, segment bucket {}) given "
          "twice; must be unique",
          k.module, spec::PassName(k.pass), k.bucket.tokens, k.bucket.mean_segment));
    }
  }
  auto correction = std::make_shared<CostCorrection>();
  correction->entries_ = std::move(entries);
  correction->BuildIndex();
  correction->version_ = internal::NextCorrectionVersion();
  return std::shared_ptr<const CostCorrection>(std::move(correction));
}

const CorrectionEntry* CostCorrection::Find(const CorrectionKey& key) const {
  auto it =
      std::lower_bound(entries_.begin(), entries_.end(), key,
                       [](const CorrectionEntry& e, const CorrectionKey& k) { return e.key < k; });
  if (it == entries_.end() || it->key != key) return nullptr;
  return &*it;
}

double CostCorrection::Factor(const CorrectionKey& key) const {
  const CorrectionEntry* e = Find(key);
  return e != nullptr ? e->factor : 1.0;
}

PassFactors CostCorrection::Factors(int module, const TokenShape& shape) const {
  if (index_.empty() || module < 0) return {};
  const uint64_t key = internal::PackedKey(module, ShapeBucketOf(shape));
  auto it = std::lower_bound(
      index_.begin(), index_.end(), key,
      [](const std::pair<uint64_t, PassFactors>& row, uint64_t k) { return row.first < k; });
  if (it == index_.end() || it->first != key) return {};
  return it->second;
}

void CostCorrection::BuildIndex() {
  // One row per (module, bucket), sorted; each entry sets its pass's factor in its row.
  index_.clear();
  for (const CorrectionEntry& e : entries_) {
    index_.emplace_back(internal::PackedKey(e.key.module, e.key.bucket), PassFactors{});
  }
  std::sort(index_.begin(), index_.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  index_.erase(std::unique(index_.begin(), index_.end(),
                           [](const auto& a, const auto& b) { return a.first == b.first; }),
               index_.end());
  for (const CorrectionEntry& e : entries_) {
    const uint64_t key = internal::PackedKey(e.key.module, e.key.bucket);
    auto it = std::lower_bound(
        index_.begin(), index_.end(), key,
        [](const std::pair<uint64_t, PassFactors>& row, uint64_t k) { return row.first < k; });
    switch (e.key.pass) {
      case spec::Pass::kForward:
        it->second.forward = e.factor;
        break;
      case spec::Pass::kBackwardInput:
        it->second.backward_input = e.factor;
        break;
      case spec::Pass::kBackwardWeight:
        it->second.backward_weight = e.factor;
        break;
      case spec::Pass::kBackward:  // never a key (Make refuses it)
        break;
    }
  }
}

std::string CostCorrection::BriefReport() const {
  if (entries_.empty()) {
    return fmt::format("correction generation {}: empty (factor 1 everywhere)", generation_);
  }
  int64_t observations = 0;
  double low = entries_.front().factor, high = low;
  for (const CorrectionEntry& e : entries_) {
    observations += e.observations;
    low = std::min(low, e.factor);
    high = std::max(high, e.factor);
  }
  return fmt::format("correction generation {}: {} keys, {} observations, factors {:.3g}..{:.3g}",
                     generation_, entries_.size(), observations, low, high);
}

Status CorrectionRule::Validate() const {
  if (!(alpha > 0 && alpha <= 1)) {
    return InvalidArgumentError(fmt::format("rule.alpha = {}; must be in (0, 1]", alpha));
  }
  if (!(min_ratio > 0 && min_ratio <= 1)) {
    return InvalidArgumentError(fmt::format("rule.min_ratio = {}; must be in (0, 1]", min_ratio));
  }
  if (!(max_ratio >= 1 && std::isfinite(max_ratio))) {
    return InvalidArgumentError(
        fmt::format("rule.max_ratio = {}; must be finite and >= 1", max_ratio));
  }
  return OkStatus();
}

StatusOr<std::shared_ptr<const CostCorrection>> UpdateCorrection(
    const CostCorrection& previous,
    std::span<const StageObservation> observations,
    const CorrectionRule& rule) {
  WEFT_RETURN_IF_ERROR(rule.Validate());
  // The clamped log-ratios of each key, in a map so that keys come out sorted.
  std::map<CorrectionKey, std::vector<double>> log_ratios;
  for (size_t i = 0; i < observations.size(); ++i) {
    const StageObservation& o = observations[i];
    const std::string where =
        fmt::format("observation {} (module {}, {})", i, o.module,
                    internal::ValidPass(o.pass) ? spec::PassName(o.pass) : "?");
    if (o.module < 0) {
      return InvalidArgumentError(fmt::format("{}: module = {}; must be >= 0", where, o.module));
    }
    if (!internal::ValidPass(o.pass)) {
      return InvalidArgumentError(
          fmt::format("{}: pass = {}; must be kForward, kBackwardInput or kBackwardWeight", where,
                      static_cast<int>(o.pass)));
    }
    if (Status s = o.shape.Validate(); !s.ok()) return s.WithPrefix(where);
    if (!std::isfinite(o.predicted_uncorrected_s) || o.predicted_uncorrected_s <= 0) {
      return InvalidArgumentError(
          fmt::format("{}: predicted_uncorrected_s = {}; must be finite and > 0", where,
                      o.predicted_uncorrected_s));
    }
    if (!std::isfinite(o.measured_s) || o.measured_s <= 0) {
      return InvalidArgumentError(
          fmt::format("{}: measured_s = {}; must be finite and > 0", where, o.measured_s));
    }
    // The quotient of two finite positives may overflow to ∞ or underflow to 0: the clamp
    // brings both back.
    const double ratio =
        std::clamp(o.measured_s / o.predicted_uncorrected_s, rule.min_ratio, rule.max_ratio);
    log_ratios[{o.module, o.pass, ShapeBucketOf(o.shape)}].push_back(std::log(ratio));
  }
  // Merge the previous entries (sorted) with the observed keys (sorted).
  std::vector<CorrectionEntry> entries;
  entries.reserve(previous.entries().size() + log_ratios.size());
  auto old = previous.entries().begin();
  const auto old_end = previous.entries().end();
  for (auto& [key, logs] : log_ratios) {
    while (old != old_end && old->key < key) entries.push_back(*old++);
    CorrectionEntry entry{.key = key};
    if (old != old_end && old->key == key) entry = *old++;
    // Sorted first, so the sum (and the result) does not depend on the observations' order.
    std::sort(logs.begin(), logs.end());
    double sum = 0;
    for (double l : logs) sum += l;
    const double count = static_cast<double>(logs.size());
    const double weight = 1.0 - std::pow(1.0 - rule.alpha, count);
    entry.factor = std::exp((1.0 - weight) * std::log(entry.factor) + weight * (sum / count));
    entry.observations += static_cast<int64_t>(logs.size());
    entries.push_back(entry);
  }
  while (old != old_end) entries.push_back(*old++);
  auto correction = std::make_shared<CostCorrection>();
  correction->entries_ = std::move(entries);
  correction->BuildIndex();
  correction->version_ = internal::NextCorrectionVersion();
  correction->generation_ = previous.generation() + 1;
  return std::shared_ptr<const CostCorrection>(std::move(correction));
}

}  // namespace weft::cost
