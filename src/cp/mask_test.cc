#include "weft/cp/mask.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

namespace weft::cp {
namespace {

// Brute force: the T×T mask from the per-token BAM words (small layouts only).
std::vector<std::vector<bool>> DenseMask(const Layout& layout) {
  const TokenMask m = BuildTokenMask(layout);
  const size_t t = m.bits.size();
  std::vector<std::vector<bool>> dense(t, std::vector<bool>(t, false));
  for (size_t q = 0; q < t; ++q) {
    for (size_t k = 0; k < t; ++k) {
      dense[q][k] = m.document[q] == m.document[k] &&
                    Attends(m.bits[q], static_cast<int64_t>(q), m.bits[k], static_cast<int64_t>(k));
    }
  }
  return dense;
}

Layout RandomLayout(std::mt19937_64& rng) {
  Layout layout;
  const int segments = 1 + static_cast<int>(rng() % 8);
  int document = 0;
  for (int i = 0; i < segments; ++i) {
    if (i > 0 && rng() % 4 == 0) ++document;
    layout.segments.push_back({.kind = static_cast<int>(rng() % 4),
                               .tokens = 1 + static_cast<int64_t>(rng() % 9),
                               .document = document});
  }
  return layout;
}

TEST(Attends, TextIsCausalOverIntersectingBits) {
  const uint64_t text = kTextBit | kCausalBit | (1u << 1);
  const uint64_t image = uint64_t{1} << 1;
  const uint64_t audio = uint64_t{1} << 2;
  EXPECT_TRUE(Attends(text, 5, image, 3));
  EXPECT_FALSE(Attends(text, 5, image, 6));   // later key: causal
  EXPECT_FALSE(Attends(text, 5, audio, 3));   // audio bit not carried by this text token
  EXPECT_TRUE(Attends(text, 5, text, 5));
}

TEST(Attends, ModalityAttendsExactlyItsBitsInBothDirections) {
  const uint64_t image = uint64_t{1} << 1;
  const uint64_t text = kTextBit | kCausalBit | image;
  EXPECT_TRUE(Attends(image, 2, image, 9));
  EXPECT_FALSE(Attends(image, 9, text, 1));
  EXPECT_FALSE(Attends(image, 9, uint64_t{1} << 2, 1));
}

TEST(TokenMask, TextCarriesEveryModalityOfItsDocument) {
  const Layout layout{.segments = {{.kind = 0, .tokens = 2}, {.kind = 3, .tokens = 1},
                                   {.kind = 0, .tokens = 1, .document = 1}}};
  const TokenMask m = BuildTokenMask(layout);
  ASSERT_EQ(m.bits.size(), 4u);
  EXPECT_EQ(m.bits[0], kTextBit | kCausalBit | (uint64_t{1} << 3));
  EXPECT_EQ(m.bits[2], uint64_t{1} << 3);
  EXPECT_EQ(m.bits[3], kTextBit | kCausalBit);
  EXPECT_THAT(m.document, ::testing::ElementsAre(0, 0, 0, 1));
}

// The oracle test: per-token and per-block workloads equal the brute-force mask's on many random
// small layouts (several documents, repeated modalities, odd block sizes).
TEST(Workloads, MatchBruteForceMaskOnRandomLayouts) {
  std::mt19937_64 rng(2024);
  for (int trial = 0; trial < 500; ++trial) {
    const Layout layout = RandomLayout(rng);
    const int block = 1 + static_cast<int>(rng() % 7);
    const auto dense = DenseMask(layout);
    const int64_t t = layout.Tokens();
    const std::vector<int64_t> tokens = TokenWorkloads(layout);
    auto blocks = ComputeBlockWorkloads(layout, block);
    ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
    const int64_t nb = (t + block - 1) / block;
    ASSERT_EQ(blocks->Blocks(), nb);
    for (int64_t q = 0; q < t; ++q) {
      int64_t row = 0;
      for (int64_t k = 0; k < t; ++k) row += dense[q][k];
      ASSERT_EQ(tokens[q], row) << "trial " << trial << " token " << q << " layout "
                                << LayoutToJson(layout);
    }
    for (int64_t qb = 0; qb < nb; ++qb) {
      int64_t key_blocks = 0, attended = 0;
      for (int64_t kb = 0; kb < nb; ++kb) {
        bool any = false;
        for (int64_t q = qb * block; q < std::min(t, (qb + 1) * block); ++q) {
          for (int64_t k = kb * block; k < std::min(t, (kb + 1) * block); ++k) any |= dense[q][k];
        }
        key_blocks += any;
      }
      for (int64_t q = qb * block; q < std::min(t, (qb + 1) * block); ++q) attended += tokens[q];
      ASSERT_EQ(blocks->key_blocks[qb], key_blocks)
          << "trial " << trial << " block " << qb << " of " << block << " tokens, layout "
          << LayoutToJson(layout);
      ASSERT_EQ(blocks->attended_keys[qb], attended) << "trial " << trial;
      ASSERT_EQ(blocks->tokens[qb], std::min(t, (qb + 1) * block) - qb * block);
    }
  }
}

TEST(Workloads, CausalTextHasTriangularBlocks) {
  const Layout layout{.segments = {{.kind = 0, .tokens = 4 * 128}}};
  auto blocks = ComputeBlockWorkloads(layout);
  ASSERT_TRUE(blocks.ok());
  EXPECT_THAT(blocks->key_blocks, ::testing::ElementsAre(1, 2, 3, 4));
  EXPECT_EQ(blocks->attended_keys[0], 128 * 129 / 2);
}

TEST(MakeLayout, KindsHaveTheirShapeAndAreDeterministic) {
  for (MaskKind kind : {MaskKind::kEp, MaskKind::kEe, MaskKind::kMp}) {
    LayoutOptions o{.tokens = 65536, .seed = 7};
    auto a = MakeLayout(kind, o);
    auto b = MakeLayout(kind, o);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_EQ(a->Tokens(), 65536) << MaskKindName(kind);
    EXPECT_EQ(LayoutToJson(*a), LayoutToJson(*b));
    o.seed = 8;
    EXPECT_NE(LayoutToJson(*a), LayoutToJson(*MakeLayout(kind, o))) << MaskKindName(kind);
  }
  auto ep = MakeLayout(MaskKind::kEp, {.tokens = 1000});
  ASSERT_TRUE(ep.ok());
  EXPECT_EQ(ep->segments.size(), 3u);  // image, audio, then text
  EXPECT_EQ(ep->segments.back().kind, 0);
  EXPECT_EQ(ep->segments.back().tokens, 500);
  auto ee = MakeLayout(MaskKind::kEe, {.tokens = 10000, .modality_segments = 100});
  ASSERT_TRUE(ee.ok());
  EXPECT_EQ(ee->segments.size(), 201u);
  auto mp = MakeLayout(MaskKind::kMp, {.tokens = 65536});
  ASSERT_TRUE(mp.ok());
  EXPECT_GE(mp->Documents(), 4);
  auto tiny = MakeLayout(MaskKind::kEe, {.tokens = 1});
  ASSERT_TRUE(tiny.ok());
  EXPECT_EQ(tiny->Tokens(), 1);
}

TEST(MakeLayout, RejectsBadOptions) {
  EXPECT_THAT(MakeLayout(MaskKind::kEe, {.tokens = 0}).status().message(),
              ::testing::HasSubstr("tokens = 0; must be > 0"));
  EXPECT_THAT(MakeLayout(MaskKind::kEe, {.tokens = 10, .modalities = 62}).status().message(),
              ::testing::HasSubstr("modalities = 62"));
  EXPECT_FALSE(ParseMaskKind("XX").ok());
  EXPECT_EQ(*ParseMaskKind("ee"), MaskKind::kEe);
}

TEST(ParseLayoutJson, ReadsListsAndDocuments) {
  auto one = ParseLayoutJson(R"([["text", 10], [1, 20], ["text", 5]])");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->Tokens(), 35);
  EXPECT_EQ(one->segments[1].kind, 1);
  auto packed = ParseLayoutJson(R"({"documents": [[["text", 3]], [[2, 4], ["text", 1]]]})");
  ASSERT_TRUE(packed.ok()) << packed.status().ToString();
  EXPECT_EQ(packed->Documents(), 2);
  EXPECT_EQ(LayoutToJson(*packed), R"({"documents":[[["text",3]],[[2,4],["text",1]]]})");
  EXPECT_EQ(LayoutToJson(*ParseLayoutJson(LayoutToJson(*one))), LayoutToJson(*one));
}

TEST(ParseLayoutJson, BadInputNamesFieldAndRule) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"([["text", 0]])", "layout[0][1] = 0; length must be > 0"},
      {R"([["text", -3]])", "layout[0][1] = -3; length must be > 0"},
      {R"([["video", 3]])", "layout[0][0] = \"video\"; kind must be \"text\""},
      {R"([["text", 3], [62, 3]])", "layout[1][0] = 62; a modality index must lie in 1..61"},
      {R"([[0, 3]])", "layout[0][0] = 0; a modality index must lie in 1..61"},
      {R"([["text"]])", "layout[0] = [\"text\"]; must be [kind, length]"},
      {R"([["text", 1.5]])", "length must be an integer"},
      {R"([])", "no segments"},
      {R"([["text", 3)", "layout: not valid JSON (byte 12)"},
      {R"({"docs": []})", "exactly one key"},
      // Lengths and the total are capped like --tokens (issue 34 item 8: 2^40 was bad_alloc,
      // 2^63 a max_size() error, 4.29e9 tokens priced at 1.38e12 ms).
      {R"([["text", 1099511627776]])",
       "layout[0][1] = 1099511627776; length must be at most 16777216 tokens (2^24)"},
      {R"([["text", 9223372036854775808]])",
       "layout[0][1] = 9223372036854775808; length must be at most 16777216"},
      {R"([["text", 9223372036854775807]])", "length must be at most 16777216"},
      {R"([["text", 18446744073709551616]])", "length must be an integer"},
      {R"([["text", 16777216], [1, 1]])",
       "layout: 16777217 tokens through segment 1; a layout holds at most 16777216 tokens"},
      {R"({"documents": [[["text", 3]]], "documents": [[["text", 5]]]})",
       "layout: key \"documents\" appears twice in one object; keys must be unique"},
  };
  for (const auto& [json, message] : cases) {
    auto r = ParseLayoutJson(json);
    ASSERT_FALSE(r.ok()) << json;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), ::testing::HasSubstr(message)) << json;
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << json;
  }
}

TEST(Layout, ValidateNamesSegment) {
  Layout bad{.segments = {{.kind = 0, .tokens = 3}, {.kind = 1, .tokens = 0}}};
  EXPECT_THAT(bad.Validate().message(),
              ::testing::HasSubstr("layout.segments[1].tokens = 0; must be > 0"));
  Layout huge{.segments = {{.kind = 0, .tokens = kMaxLayoutTokens + 1}}};
  EXPECT_THAT(huge.Validate().message(),
              ::testing::HasSubstr("layout.segments[0].tokens = 16777217; must be at most"));
  Layout gap{.segments = {{.kind = 0, .tokens = 3}, {.kind = 0, .tokens = 1, .document = 2}}};
  EXPECT_FALSE(gap.Validate().ok());
  EXPECT_FALSE(ComputeBlockWorkloads(Layout{}).ok());
  EXPECT_FALSE(ComputeBlockWorkloads(*ParseLayoutJson(R"([["text", 3]])"), 0).ok());
}

}  // namespace
}  // namespace weft::cp
