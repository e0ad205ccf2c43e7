#include "weft/common/allocator.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace weft {
namespace {

#if defined(__SANITIZE_ADDRESS__)
#define WEFT_OWN_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WEFT_OWN_ALLOCATOR 1
#endif
#endif

TEST(KeepFreedMemoryForReuse, FreedBlocksStayInTheHeap) {
#if !defined(__GLIBC__) || defined(WEFT_OWN_ALLOCATOR)
  GTEST_SKIP() << "glibc's allocator is not the one in use";
#else
  ASSERT_TRUE(KeepFreedMemoryForReuse());
  // A 16 MiB block is below the 32 MiB mmap threshold: it comes from the heap and, freed, stays
  // there as free space (glibc's default would map it on its own and unmap it on free).
  constexpr size_t kBytes = size_t{16} << 20;
  const size_t free_before = mallinfo2().fordblks;
  char* block = static_cast<char*>(std::malloc(kBytes));
  ASSERT_NE(block, nullptr);
  std::memset(block, 1, kBytes);
  EXPECT_EQ(mallinfo2().hblks, size_t{0}) << "no block mapped on its own";
  std::free(block);
  EXPECT_GE(mallinfo2().fordblks, free_before + kBytes);
#endif
}

}  // namespace
}  // namespace weft
