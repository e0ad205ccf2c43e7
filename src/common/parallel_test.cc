#include "weft/common/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

namespace weft {
namespace {

TEST(ParallelFor, RunsEveryItemOnceOnAnyThreadCount) {
  for (int threads : {0, 1, 2, 4, 64}) {
    std::vector<std::atomic<int>> runs(37);
    ASSERT_TRUE(ParallelFor(37, threads, [&](int i) {
                  runs[i].fetch_add(1);
                  return OkStatus();
                }).ok());
    for (int i = 0; i < 37; ++i) EXPECT_EQ(runs[i].load(), 1) << "item " << i << " threads " << threads;
  }
  EXPECT_TRUE(ParallelFor(0, 4, [](int) { return InternalError("never called"); }).ok());
}

TEST(ParallelFor, ReturnsTheLowestFailingIndexAfterRunningEverything) {
  for (int threads : {1, 3}) {
    std::atomic<int> ran{0};
    const Status s = ParallelFor(20, threads, [&](int i) -> Status {
      ran.fetch_add(1);
      if (i == 7 || i == 15) return InvalidArgumentError("item " + std::to_string(i));
      return OkStatus();
    });
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), "item 7");
    EXPECT_EQ(ran.load(), 20);
  }
}

}  // namespace
}  // namespace weft
