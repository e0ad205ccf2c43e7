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

// A placement run against a model it was not written for says which model it was checked
// against, and that it is the default one when --model was not given (issue 34 item 3).
TEST(PlacementFile, AMismatchNamesTheModelItWasCheckedAgainst) {
  const std::string path =
      std::string(WEFT_SOURCE_DIR) + "/presets/placements/cs-valm-mm-modality-parallel.yaml";
  auto by_default = MakePlanner(JobOptions{.placement = path}, "manual");
  ASSERT_FALSE(by_default.ok());
  EXPECT_THAT(by_default.status().message(),
              HasSubstr("checked against model 'vlm-s', the default: pass --model"));
  EXPECT_EQ(by_default.status().message().find('\n'), std::string::npos);
  auto given =
      MakePlanner(JobOptions{.model = "tiny-vlm", .gpus = 20, .placement = path}, "manual");
  ASSERT_FALSE(given.ok());
  EXPECT_THAT(given.status().message(), HasSubstr("(checked against model 'tiny-vlm')"));
  EXPECT_TRUE(MakePlanner(JobOptions{.model = "cs-valm-mm", .placement = path}, "manual").ok());
}

}  // namespace
}  // namespace weft::strategy
