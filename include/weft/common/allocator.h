#pragma once
// Process-wide allocator settings for planning.

namespace weft {

// Keeps freed memory in the process for reuse instead of handing it back to the OS after each
// large free (glibc: blocks below 32 MiB come from the heap, the heap is trimmed only above
// 256 MiB of free space). Planning builds and drops many multi-MB vectors per DP replica; with
// glibc's defaults every planning thread's arena trims and re-faults them: on DipNoSearch/pp:16
// (bench/dip_planning_benchmark) 2 threads took 5x the page faults of 1 and gained ~1.1-1.5x
// instead of ~1.8x. The cost is a resident size that stays near its peak. Called by the weft CLI
// and the benchmarks at start; the Python module leaves the host process's allocator alone.
// No effect without glibc. Returns whether the settings were applied.
bool KeepFreedMemoryForReuse();

}  // namespace weft
