#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "weft/strategy/compare.h"

namespace weft::strategy {
namespace {

using ::testing::HasSubstr;

// A placement file beside a strategy that places the model itself is refused in one line
// (it used to be ignored silently); with `manual` it runs.
TEST(PlacementFile, OnlyTheManualStrategyTakesIt) {
  const std::string path =
      std::string(WEFT_SOURCE_DIR) + "/presets/placements/tiny-vlm-hetero-dp.yaml";
  const JobOptions job{.model = "tiny-vlm", .gpus = 4, .data = "coco-llava", .placement = path};
  auto dip = MakePlanner(job, "dip");
  ASSERT_FALSE(dip.ok());
  EXPECT_EQ(dip.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(dip.status().message(), HasSubstr("runs strategy 'manual'; strategy 'dip'"));
  EXPECT_EQ(dip.status().message().find('\n'), std::string::npos);
  EXPECT_TRUE(MakePlanner(job, "manual").ok());
}

}  // namespace
}  // namespace weft::strategy
