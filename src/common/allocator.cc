#include "weft/common/allocator.h"

#include <cstdlib>  // defines __GLIBC__ under glibc

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace weft {

bool KeepFreedMemoryForReuse() {
#if defined(__GLIBC__)
  // Setting either threshold turns off glibc's dynamic adjustment of both, so both are set:
  // 32 MiB is the largest mmap threshold the dynamic rule would reach on 64-bit.
  constexpr int kMmapThresholdBytes = 32 << 20;
  constexpr int kTrimThresholdBytes = 256 << 20;
  return mallopt(M_MMAP_THRESHOLD, kMmapThresholdBytes) == 1 &&
         mallopt(M_TRIM_THRESHOLD, kTrimThresholdBytes) == 1;
#else
  return false;
#endif
}

}  // namespace weft
