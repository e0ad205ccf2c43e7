#include "weft/common/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <new>
#include <stdexcept>
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

TEST(ParallelFor, AnExceptionBecomesTheItemsErrorOnEveryThread) {
  for (int threads : {1, 2, 4}) {
    std::atomic<int> ran{0};
    const Status s = ParallelFor(9, threads, [&](int i) -> Status {
      ran.fetch_add(1);
      if (i == 2) throw std::runtime_error("boom");
      if (i == 5) throw std::bad_alloc();
      return OkStatus();
    });
    EXPECT_EQ(s.code(), StatusCode::kInternal) << threads;
    EXPECT_EQ(s.message(), "item 2 threw: boom") << threads;
    EXPECT_EQ(ran.load(), 9) << threads;
  }
  const Status oom = ParallelFor(1, 1, [](int) -> Status { throw std::bad_alloc(); });
  EXPECT_EQ(oom.message(), "out of memory (std::bad_alloc) in item 0");
}

}  // namespace
}  // namespace weft
