#include "weft/cp/mask.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <random>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "weft/common/strict_input.h"

namespace weft::cp {
namespace internal {
namespace {

// A segment placed on the token axis with the key runs it attends in full.
struct PlacedSegment {
  int64_t start = 0;  // first token
  int64_t end = 0;    // one past the last token
  uint64_t bits = 0;  // BAM word of its tokens
  bool text = false;
  // Key intervals [first, last) attended by every query of the segment, merged and sorted.
  // Text: the earlier segments of the document whose bits intersect (its own segment is causal
  // and added per query). Modality: every segment of the document with equal bits (itself too).
  std::vector<std::pair<int64_t, int64_t>> runs;
  int64_t full_keys = 0;  // Σ run lengths
};

uint64_t DocumentModalityBits(const Layout& layout, size_t first, size_t last) {
  uint64_t bits = 0;
  for (size_t i = first; i < last; ++i) {
    if (layout.segments[i].kind > 0) bits |= uint64_t{1} << layout.segments[i].kind;
  }
  return bits;
}

uint64_t SegmentBits(int kind, uint64_t document_modalities) {
  return kind == 0 ? (kTextBit | kCausalBit | document_modalities) : (uint64_t{1} << kind);
}

// Places the segments and derives every segment's key runs, document by document:
// O(Σ_doc S_doc²) segment pairs.
std::vector<PlacedSegment> Place(const Layout& layout) {
  std::vector<PlacedSegment> placed(layout.segments.size());
  int64_t pos = 0;
  size_t doc_first = 0;
  while (doc_first < layout.segments.size()) {
    size_t doc_last = doc_first;
    while (doc_last < layout.segments.size() &&
           layout.segments[doc_last].document == layout.segments[doc_first].document) {
      ++doc_last;
    }
    const uint64_t modalities = DocumentModalityBits(layout, doc_first, doc_last);
    for (size_t i = doc_first; i < doc_last; ++i) {
      PlacedSegment& p = placed[i];
      p.start = pos;
      p.end = pos + layout.segments[i].tokens;
      p.bits = SegmentBits(layout.segments[i].kind, modalities);
      p.text = layout.segments[i].kind == 0;
      pos = p.end;
    }
    for (size_t i = doc_first; i < doc_last; ++i) {
      PlacedSegment& p = placed[i];
      const uint64_t q = p.bits & kModalityBitsMask;
      for (size_t j = doc_first; j < doc_last; ++j) {
        const uint64_t k = placed[j].bits & kModalityBitsMask;
        const bool full = p.text ? (j < i && (q & k) != 0) : (q == k);
        if (!full) continue;
        if (!p.runs.empty() && p.runs.back().second == placed[j].start) {
          p.runs.back().second = placed[j].end;
        } else {
          p.runs.emplace_back(placed[j].start, placed[j].end);
        }
        p.full_keys += placed[j].end - placed[j].start;
      }
    }
    doc_first = doc_last;
  }
  return placed;
}

// Positive parts summing to `total` (fewer than `parts` when total < parts), drawn from `rng`.
std::vector<int64_t> RandomSplit(int64_t total, int parts, std::mt19937_64& rng) {
  parts = static_cast<int>(std::min<int64_t>(parts, total));
  if (parts <= 0) return {};
  std::vector<int64_t> cuts;
  cuts.reserve(parts + 1);
  cuts.push_back(0);
  cuts.push_back(total);
  // parts − 1 distinct cut points in [1, total − 1].
  while (static_cast<int>(cuts.size()) < parts + 1) {
    const int64_t c = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(total - 1));
    if (std::find(cuts.begin(), cuts.end(), c) == cuts.end()) cuts.push_back(c);
  }
  std::sort(cuts.begin(), cuts.end());
  std::vector<int64_t> out(parts);
  for (int i = 0; i < parts; ++i) out[i] = cuts[i + 1] - cuts[i];
  return out;
}

// One document of `tokens` tokens: `segments` modality segments (kinds round robin from
// `first_kind`) embedded in text, text before, between and after them.
void AppendEmbeddedDocument(int64_t tokens, int segments, const LayoutOptions& o, int document,
                            std::mt19937_64& rng, Layout& out) {
  const int64_t modality = static_cast<int64_t>(std::floor(tokens * o.modality_fraction));
  const int64_t text = tokens - modality;
  // k modality segments need k + 1 text pieces around them.
  const int k = static_cast<int>(std::min<int64_t>({segments, modality, text - 1}));
  if (k <= 0) {
    out.segments.push_back({.kind = 0, .tokens = tokens, .document = document});
    return;
  }
  const std::vector<int64_t> m = RandomSplit(modality, k, rng);
  const std::vector<int64_t> t = RandomSplit(text, k + 1, rng);
  for (int i = 0; i < k; ++i) {
    out.segments.push_back({.kind = 0, .tokens = t[i], .document = document});
    out.segments.push_back({.kind = 1 + i % o.modalities, .tokens = m[i], .document = document});
  }
  out.segments.push_back({.kind = 0, .tokens = t[k], .document = document});
}

Status ParseSegments(const nlohmann::json& list, const std::string& where, int document,
                     Layout& out) {
  if (!list.is_array()) {
    return InvalidArgumentError(
        fmt::format("{}: must be a list of [kind, length] segments", where));
  }
  if (list.empty()) {
    return InvalidArgumentError(fmt::format("{}: no segments; must hold at least one", where));
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& s = list[i];
    const std::string at = fmt::format("{}[{}]", where, i);
    if (!s.is_array() || s.size() != 2) {
      return InvalidArgumentError(fmt::format("{} = {}; must be [kind, length]", at, s.dump()));
    }
    Segment seg{.document = document};
    if (s[0].is_string()) {
      if (s[0].get<std::string>() != "text") {
        return InvalidArgumentError(fmt::format(
            "{}[0] = {}; kind must be \"text\" or a modality index 1..{}", at, s[0].dump(),
            kMaxModalities));
      }
      seg.kind = 0;
    } else if (s[0].is_number_integer()) {
      const int64_t kind = s[0].get<int64_t>();
      if (kind < 1 || kind > kMaxModalities) {
        return InvalidArgumentError(fmt::format(
            "{}[0] = {}; a modality index must lie in 1..{} (BAM has {} modality bits)", at, kind,
            kMaxModalities, kMaxModalities));
      }
      seg.kind = static_cast<int>(kind);
    } else {
      return InvalidArgumentError(fmt::format(
          "{}[0] = {}; kind must be \"text\" or a modality index 1..{}", at, s[0].dump(),
          kMaxModalities));
    }
    if (!s[1].is_number_integer()) {
      return InvalidArgumentError(
          fmt::format("{}[1] = {}; length must be an integer > 0", at, s[1].dump()));
    }
    // Compared before narrowing: 2^63 reads as unsigned and would wrap to a negative int64.
    const bool too_long = s[1].is_number_unsigned()
                              ? s[1].get<uint64_t>() > static_cast<uint64_t>(kMaxLayoutTokens)
                              : s[1].get<int64_t>() > kMaxLayoutTokens;
    if (too_long) {
      return InvalidArgumentError(fmt::format("{}[1] = {}; length must be at most {} tokens (2^24)",
                                              at, s[1].dump(), kMaxLayoutTokens));
    }
    seg.tokens = s[1].get<int64_t>();
    if (seg.tokens <= 0) {
      return InvalidArgumentError(
          fmt::format("{}[1] = {}; length must be > 0", at, seg.tokens));
    }
    out.segments.push_back(seg);
  }
  return OkStatus();
}

}  // namespace
}  // namespace internal

int64_t Layout::Tokens() const {
  int64_t t = 0;
  for (const Segment& s : segments) t += s.tokens;
  return t;
}

int Layout::Documents() const { return segments.empty() ? 0 : segments.back().document + 1; }

Status Layout::Validate() const {
  if (segments.empty()) {
    return InvalidArgumentError("layout.segments: empty; a layout needs at least one segment");
  }
  int64_t total_tokens = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    const Segment& s = segments[i];
    if (s.tokens <= 0) {
      return InvalidArgumentError(
          fmt::format("layout.segments[{}].tokens = {}; must be > 0", i, s.tokens));
    }
    if (s.tokens > kMaxLayoutTokens) {
      return InvalidArgumentError(fmt::format("layout.segments[{}].tokens = {}; must be at most {}",
                                              i, s.tokens, kMaxLayoutTokens));
    }
    total_tokens += s.tokens;  // each term <= 2^24 and the sum stops at 2^24: no overflow
    if (total_tokens > kMaxLayoutTokens) {
      return InvalidArgumentError(fmt::format(
          "layout: {} tokens through segment {}; a layout holds at most {} tokens (2^24, the cap "
          "of --tokens)",
          total_tokens, i, kMaxLayoutTokens));
    }
    if (s.kind < 0 || s.kind > kMaxModalities) {
      return InvalidArgumentError(fmt::format(
          "layout.segments[{}].kind = {}; must be 0 (text) or a modality index 1..{}", i, s.kind,
          kMaxModalities));
    }
    const int previous = i == 0 ? 0 : segments[i - 1].document;
    if (s.document != previous && s.document != previous + 1) {
      return InvalidArgumentError(fmt::format(
          "layout.segments[{}].document = {}; must be {} or {} (documents start at 0 and are "
          "contiguous)",
          i, s.document, previous, previous + 1));
    }
  }
  return OkStatus();
}

std::string Layout::BriefReport() const {
  return fmt::format("{} tokens, {} segments, {} document{}", Tokens(), segments.size(),
                     Documents(), Documents() == 1 ? "" : "s");
}

std::string_view MaskKindName(MaskKind kind) {
  switch (kind) {
    case MaskKind::kEp: return "EP";
    case MaskKind::kEe: return "EE";
    case MaskKind::kMp: return "MP";
  }
  return "?";
}

StatusOr<MaskKind> ParseMaskKind(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper == "EP") return MaskKind::kEp;
  if (upper == "EE") return MaskKind::kEe;
  if (upper == "MP") return MaskKind::kMp;
  return InvalidArgumentError(
      fmt::format("mask = \"{}\"; must be one of EP, EE, MP (Cornstarch Fig. 11)", name));
}

Status LayoutOptions::Validate() const {
  if (tokens <= 0) {
    return InvalidArgumentError(fmt::format("tokens = {}; must be > 0", tokens));
  }
  if (tokens > kMaxLayoutTokens) {
    return InvalidArgumentError(
        fmt::format("tokens = {}; must be at most {} (2^24)", tokens, kMaxLayoutTokens));
  }
  if (modalities < 1 || modalities > kMaxModalities) {
    return InvalidArgumentError(fmt::format("modalities = {}; must lie in 1..{} (BAM bits)",
                                            modalities, kMaxModalities));
  }
  if (!(modality_fraction >= 0 && modality_fraction < 1)) {
    return InvalidArgumentError(
        fmt::format("modality_fraction = {}; must lie in [0, 1)", modality_fraction));
  }
  if (modality_segments < 1) {
    return InvalidArgumentError(
        fmt::format("modality_segments = {}; must be >= 1", modality_segments));
  }
  if (min_document_tokens < 1 || max_document_tokens < min_document_tokens) {
    return InvalidArgumentError(fmt::format(
        "min_document_tokens = {}, max_document_tokens = {}; need 1 <= min <= max",
        min_document_tokens, max_document_tokens));
  }
  return OkStatus();
}

StatusOr<Layout> MakeLayout(MaskKind kind, const LayoutOptions& o) {
  WEFT_RETURN_IF_ERROR(o.Validate());
  std::mt19937_64 rng(o.seed);
  Layout out;
  switch (kind) {
    case MaskKind::kEp: {
      const int64_t modality = static_cast<int64_t>(std::floor(o.tokens * o.modality_fraction));
      for (int64_t part : internal::RandomSplit(modality, o.modalities, rng)) {
        out.segments.push_back({.kind = 1 + static_cast<int>(out.segments.size()) % o.modalities,
                                .tokens = part});
      }
      out.segments.push_back({.kind = 0, .tokens = o.tokens - modality});
      break;
    }
    case MaskKind::kEe:
      internal::AppendEmbeddedDocument(o.tokens, o.modality_segments, o, 0, rng, out);
      break;
    case MaskKind::kMp: {
      int64_t left = o.tokens;
      int document = 0;
      const uint64_t span = static_cast<uint64_t>(o.max_document_tokens - o.min_document_tokens + 1);
      while (left > 0) {
        const int64_t want = o.min_document_tokens + static_cast<int64_t>(rng() % span);
        const int64_t length = std::min(want, left);
        internal::AppendEmbeddedDocument(length, o.modalities, o, document++, rng, out);
        left -= length;
      }
      break;
    }
  }
  WEFT_RETURN_IF_ERROR(out.Validate());
  return out;
}

StatusOr<Layout> ParseLayoutJson(std::string_view json_text) {
  nlohmann::json j;
  const Status parsed = ParseJsonRejectingDuplicates(json_text, &j);
  if (!parsed.ok()) return InvalidArgumentError(fmt::format("layout: {}", parsed.message()));
  Layout out;
  if (j.is_object()) {
    if (!j.contains("documents") || j.size() != 1) {
      return InvalidArgumentError(
          "layout: an object must have exactly one key, \"documents\" (a list of segment lists)");
    }
    const nlohmann::json& docs = j["documents"];
    if (!docs.is_array() || docs.empty()) {
      return InvalidArgumentError(
          "layout.documents: must be a non-empty list of [kind, length] segment lists");
    }
    for (size_t d = 0; d < docs.size(); ++d) {
      WEFT_RETURN_IF_ERROR(internal::ParseSegments(
          docs[d], fmt::format("layout.documents[{}]", d), static_cast<int>(d), out));
    }
  } else {
    WEFT_RETURN_IF_ERROR(internal::ParseSegments(j, "layout", 0, out));
  }
  WEFT_RETURN_IF_ERROR(out.Validate());
  return out;
}

std::string LayoutToJson(const Layout& layout) {
  auto segment_list = [&](int document) {
    nlohmann::json list = nlohmann::json::array();
    for (const Segment& s : layout.segments) {
      if (s.document != document) continue;
      nlohmann::json kind = s.kind == 0 ? nlohmann::json("text") : nlohmann::json(s.kind);
      list.push_back({kind, s.tokens});
    }
    return list;
  };
  if (layout.Documents() <= 1) return segment_list(0).dump();
  nlohmann::json docs = nlohmann::json::array();
  for (int d = 0; d < layout.Documents(); ++d) docs.push_back(segment_list(d));
  return nlohmann::json{{"documents", docs}}.dump();
}

TokenMask BuildTokenMask(const Layout& layout) {
  TokenMask mask;
  const int64_t total = layout.Tokens();
  mask.bits.reserve(total);
  mask.document.reserve(total);
  const std::vector<internal::PlacedSegment> placed = internal::Place(layout);
  for (size_t i = 0; i < placed.size(); ++i) {
    mask.bits.insert(mask.bits.end(), layout.segments[i].tokens, placed[i].bits);
    mask.document.insert(mask.document.end(), layout.segments[i].tokens,
                         layout.segments[i].document);
  }
  return mask;
}

std::vector<int64_t> TokenWorkloads(const Layout& layout) {
  std::vector<int64_t> out;
  out.reserve(layout.Tokens());
  for (const internal::PlacedSegment& p : internal::Place(layout)) {
    for (int64_t q = p.start; q < p.end; ++q) {
      out.push_back(p.full_keys + (p.text ? q - p.start + 1 : 0));
    }
  }
  return out;
}

StatusOr<BlockWorkloads> ComputeBlockWorkloads(const Layout& layout, int block_tokens) {
  WEFT_RETURN_IF_ERROR(layout.Validate());
  if (block_tokens < 1) {
    return InvalidArgumentError(fmt::format("block_tokens = {}; must be >= 1", block_tokens));
  }
  const std::vector<internal::PlacedSegment> placed = internal::Place(layout);
  const int64_t total = layout.Tokens();
  const int64_t bt = block_tokens;
  const int64_t blocks = (total + bt - 1) / bt;
  BlockWorkloads out;
  out.block_tokens = block_tokens;
  out.key_blocks.assign(blocks, 0);
  out.attended_keys.assign(blocks, 0);
  out.tokens.assign(blocks, 0);
  std::vector<std::pair<int64_t, int64_t>> intervals;  // key-block intervals [first, last]
  size_t seg = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t b0 = b * bt;
    const int64_t b1 = std::min(total, b0 + bt);
    out.tokens[b] = b1 - b0;
    intervals.clear();
    while (placed[seg].end <= b0) ++seg;
    int64_t attended = 0;
    for (size_t i = seg; i < placed.size() && placed[i].start < b1; ++i) {
      const internal::PlacedSegment& p = placed[i];
      const int64_t p0 = std::max(b0, p.start);
      const int64_t p1 = std::min(b1, p.end);
      const int64_t n = p1 - p0;
      attended += n * p.full_keys;
      for (const auto& [first, last] : p.runs) {
        intervals.emplace_back(first / bt, (last - 1) / bt);
      }
      if (p.text) {
        // Own segment, causal: query q attends [start, q]; the block's last query reaches p1 − 1.
        const int64_t lo = p0 - p.start + 1;
        const int64_t hi = p1 - p.start;
        attended += (lo + hi) * n / 2;
        intervals.emplace_back(p.start / bt, (p1 - 1) / bt);
      }
    }
    std::sort(intervals.begin(), intervals.end());
    int64_t count = 0;
    int64_t cur_first = -1, cur_last = -2;
    for (const auto& [first, last] : intervals) {
      if (first > cur_last + 1) {
        if (cur_last >= cur_first && cur_first >= 0) count += cur_last - cur_first + 1;
        cur_first = first;
        cur_last = last;
      } else {
        cur_last = std::max(cur_last, last);
      }
    }
    if (cur_first >= 0) count += cur_last - cur_first + 1;
    out.key_blocks[b] = count;
    out.attended_keys[b] = attended;
  }
  return out;
}

}  // namespace weft::cp
