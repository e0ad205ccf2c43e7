#include "weft/cost/correction.h"

#include <fmt/format.h>

#include <algorithm>
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

// floor(steps · log2(x)) for x ≥ 1, else −1. Exact at powers of two (log2 is exact there and
// the product by a small integer too); elsewhere the boundaries 2^(k/steps) are irrational, so
// no integer token count sits on one.
int GeometricBucket(double x, int steps_per_doubling) {
  if (!(x >= 1)) return -1;
  return static_cast<int>(std::floor(steps_per_doubling * std::log2(x)));
}

bool ValidPass(Pass pass) {
  return pass == Pass::kForward || pass == Pass::kBackwardInput || pass == Pass::kBackwardWeight;
}

}  // namespace
}  // namespace internal

ShapeBucket ShapeBucketOf(const TokenShape& shape) {
  return {.tokens = internal::GeometricBucket(static_cast<double>(shape.tokens),
                                              kTokenBucketsPerDoubling),
          .mean_segment =
              internal::GeometricBucket(shape.MeanSegmentTokens(), kSegmentBucketsPerDoubling)};
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
      return InvalidArgumentError(fmt::format("correction entry {}: key.pass = {}; must be a Pass",
                                              i, static_cast<int>(e.key.pass)));
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
          k.module, PassName(k.pass), k.bucket.tokens, k.bucket.mean_segment));
    }
  }
  auto correction = std::make_shared<CostCorrection>();
  correction->entries_ = std::move(entries);
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
  if (entries_.empty()) return {};
  const ShapeBucket bucket = ShapeBucketOf(shape);
  return {.forward = Factor({module, Pass::kForward, bucket}),
          .backward_input = Factor({module, Pass::kBackwardInput, bucket}),
          .backward_weight = Factor({module, Pass::kBackwardWeight, bucket})};
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
    const std::string where = fmt::format("observation {} (module {}, {})", i, o.module,
                                          internal::ValidPass(o.pass) ? PassName(o.pass) : "?");
    if (o.module < 0) {
      return InvalidArgumentError(fmt::format("{}: module = {}; must be >= 0", where, o.module));
    }
    if (!internal::ValidPass(o.pass)) {
      return InvalidArgumentError(
          fmt::format("{}: pass = {}; must be a Pass", where, static_cast<int>(o.pass)));
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
  correction->version_ = internal::NextCorrectionVersion();
  correction->generation_ = previous.generation() + 1;
  return std::shared_ptr<const CostCorrection>(std::move(correction));
}

}  // namespace weft::cost
