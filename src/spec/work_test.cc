#include "weft/spec/work.h"

#include <gtest/gtest.h>

#include <vector>

namespace weft::spec {
namespace {

TEST(Pass, NamesAreTheOnesOutputsPrint) {
  // Stage labels and traces use the short names; cost reports and correction keys the long ones.
  EXPECT_EQ(PassShortName(Pass::kForward), "F");
  EXPECT_EQ(PassShortName(Pass::kBackward), "B");
  EXPECT_EQ(PassShortName(Pass::kBackwardInput), "Bi");
  EXPECT_EQ(PassShortName(Pass::kBackwardWeight), "W");
  EXPECT_EQ(PassName(Pass::kForward), "fwd");
  EXPECT_EQ(PassName(Pass::kBackward), "bwd");
  EXPECT_EQ(PassName(Pass::kBackwardInput), "bwd_input");
  EXPECT_EQ(PassName(Pass::kBackwardWeight), "bwd_weight");
  EXPECT_EQ(PassShortName(static_cast<Pass>(9)), "?");
  EXPECT_EQ(PassName(static_cast<Pass>(9)), "?");
}

TEST(Pass, OnlyTheForwardIsNotBackward) {
  EXPECT_FALSE(IsBackward(Pass::kForward));
  EXPECT_TRUE(IsBackward(Pass::kBackward));
  EXPECT_TRUE(IsBackward(Pass::kBackwardInput));
  EXPECT_TRUE(IsBackward(Pass::kBackwardWeight));
}

TEST(Pass, PartsAreThePassesTheCostModelPricesSeparately) {
  auto parts = [](Pass p) {
    const std::span<const Pass> s = PassParts(p);
    return std::vector<Pass>(s.begin(), s.end());
  };
  EXPECT_EQ(parts(Pass::kForward), std::vector<Pass>{Pass::kForward});
  EXPECT_EQ(parts(Pass::kBackward),
            (std::vector<Pass>{Pass::kBackwardInput, Pass::kBackwardWeight}));
  EXPECT_EQ(parts(Pass::kBackwardInput), std::vector<Pass>{Pass::kBackwardInput});
  EXPECT_EQ(parts(Pass::kBackwardWeight), std::vector<Pass>{Pass::kBackwardWeight});
  EXPECT_TRUE(parts(static_cast<Pass>(9)).empty());
}

TEST(Recompute, NamesRoundTripInOrder) {
  const char* names[] = {"none", "selective", "full", "offload"};
  for (int i = 0; i < kNumRecompute; ++i) {
    const Recompute r = kAllRecompute[i];
    EXPECT_EQ(static_cast<int>(r), i);
    EXPECT_EQ(RecomputeName(r), names[i]);
    auto parsed = ParseRecompute(names[i]);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_EQ(*parsed, r);
  }
}

TEST(Recompute, ParseRejectsUnknownNamesNamingTheChoices) {
  auto bad = ParseRecompute("Full");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "recompute = 'Full'; must be one of none, selective, full, offload");
}

}  // namespace
}  // namespace weft::spec
