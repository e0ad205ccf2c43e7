#pragma once
// Cornstarch's Bitfield Attention Mask (BAM, Cornstarch §4.3.1) and the token layouts of its
// Fig. 11, reduced to what context parallelism needs: who attends whom, the attention work of
// every token and of every 128-token block, derived from the segment structure without ever
// materializing the T×T mask.
//
// BAM: one uint64 per token. Bit 0 = text, bits 1..61 = one per modality, bit 62 = causal.
// Cornstarch's rule (its bitfield_attention kernel):
//   a text query (bit 0 set) attends every key at a position <= its own whose bits 0..61
//   intersect its own;
//   a modality query (bit 0 clear) attends every key (any position) whose bits 0..61 equal its own.
// A text token carries the text bit, the causal bit and the bit of every modality of its
// document (Cornstarch's create_bitfield_attention_mask), so text attends causally to all earlier
// text and modality tokens; a modality token carries its own bit only, so e.g. an image attends
// bidirectionally to itself and to the other segments of the same modality.
// Packed samples (multimodal packing) are separate documents: attention never crosses a document
// boundary (the varlen / cu_seqlens convention); within a document the BAM rule holds.
//
// Thread-safety: value types and pure functions.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"

namespace weft::cp {

inline constexpr uint64_t kTextBit = uint64_t{1};
inline constexpr uint64_t kCausalBit = uint64_t{1} << 62;
inline constexpr uint64_t kModalityBitsMask = (uint64_t{1} << 62) - 1;  // bits 0..61
inline constexpr int kMaxModalities = 61;
inline constexpr int kDefaultBlockTokens = 128;
// The most tokens one layout may hold, per segment and in total: the cap of `weft cp --tokens`.
// A per-token mask of this size is 2^24 x 12 bytes = 192 MiB.
inline constexpr int64_t kMaxLayoutTokens = int64_t{1} << 24;

// Cornstarch's rule for one (query, key) pair of the same document (positions in tokens).
inline bool Attends(uint64_t query_bits, int64_t query_pos, uint64_t key_bits, int64_t key_pos) {
  const uint64_t q = query_bits & kModalityBitsMask;
  const uint64_t k = key_bits & kModalityBitsMask;
  if (query_bits & kTextBit) return key_pos <= query_pos && (q & k) != 0;
  return q != 0 && q == k;
}

// One run of tokens of one kind. kind 0 = text, 1..61 = modality index (its BAM bit).
struct Segment {
  int kind = 0;
  int64_t tokens = 0;
  int document = 0;  // packed sample index; non-decreasing along the layout
};

// A sequence as contiguous segments (Fig. 11: EP, EE, MP, or explicit).
struct Layout {
  std::vector<Segment> segments;

  int64_t Tokens() const;
  int Documents() const;  // last document index + 1 (0 when empty)
  // At least one segment; every length in [1, kMaxLayoutTokens] and their sum at most
  // kMaxLayoutTokens; kind in [0, 61]; documents start at 0 and step by 0 or 1. Names the
  // segment, field and rule: "layout.segments[3].tokens = 0; must be > 0".
  Status Validate() const;
  // "EE, 32768 tokens, 9 segments, 1 document"
  std::string BriefReport() const;
};

// The layouts of Cornstarch Fig. 11.
enum class MaskKind {
  kEp,  // encoder outputs prepended: every modality segment first, then the text
  kEe,  // encoder outputs embedded: modality segments at random places inside the text
  kMp,  // multimodal packing: several EE-like samples packed as separate documents
};
std::string_view MaskKindName(MaskKind kind);  // "EP", "EE", "MP"
StatusOr<MaskKind> ParseMaskKind(std::string_view name);  // case-insensitive

struct LayoutOptions {
  int64_t tokens = 0;              // total tokens (> 0)
  int modalities = 2;              // distinct modalities, used round robin (1..61)
  double modality_fraction = 0.5;  // share of the tokens that are modality tokens, in [0, 1)
  int modality_segments = 8;       // EE: modality segments embedded in the text (>= 1)
  // MP: document lengths drawn uniformly in [min, max] tokens (the last one takes the rest);
  // each document holds one segment per modality embedded in its text.
  int64_t min_document_tokens = 4096;
  int64_t max_document_tokens = 16384;
  uint64_t seed = 0;               // segment lengths and positions are drawn from it
  Status Validate() const;
};

// A random layout of `kind` (the same options and seed give the same layout). Segments that
// would get no token are dropped, so tiny sequences may have fewer segments than asked.
StatusOr<Layout> MakeLayout(MaskKind kind, const LayoutOptions& options);

// Parses an explicit layout: a JSON list of [kind, length] segments, kind "text" or a modality
// index 1..61 (one document), or {"documents": [[[kind, length], ...], ...]} (packed samples).
// Lengths and their total are at most kMaxLayoutTokens; a key twice in an object is an error.
// Errors name the field and the rule: "layout[2][0] = 62; a modality index must lie in 1..61".
StatusOr<Layout> ParseLayoutJson(std::string_view json_text);
// The same layout written back in the format ParseLayoutJson reads.
std::string LayoutToJson(const Layout& layout);

// The BAM word of every token and its document index (T entries each).
struct TokenMask {
  std::vector<uint64_t> bits;
  std::vector<int32_t> document;
};
TokenMask BuildTokenMask(const Layout& layout);

// Attended keys of every query token (its row sum of the mask), T entries. O(T + S·R) for S
// segments with R key runs each (R = 1 for text in the layouts above).
std::vector<int64_t> TokenWorkloads(const Layout& layout);

// Work of every block of `block_tokens` consecutive tokens (the last block may be shorter).
struct BlockWorkloads {
  int block_tokens = kDefaultBlockTokens;
  // Key blocks not fully masked for this query block: the tiles a block-sparse kernel computes.
  std::vector<int64_t> key_blocks;
  // Σ attended keys over the block's query tokens (the exact mask work).
  std::vector<int64_t> attended_keys;
  // Query tokens in the block (block_tokens except for the last block).
  std::vector<int64_t> tokens;
  int64_t Blocks() const { return static_cast<int64_t>(key_blocks.size()); }
};
// O(blocks · R log R + S·R): per query block, the key runs of the segments it overlaps are mapped
// to key-block intervals and merged; nothing of size T×T or blocks×blocks is built.
// Fails if the layout is invalid or block_tokens < 1.
StatusOr<BlockWorkloads> ComputeBlockWorkloads(const Layout& layout,
                                               int block_tokens = kDefaultBlockTokens);

}  // namespace weft::cp
