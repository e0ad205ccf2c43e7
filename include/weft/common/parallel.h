#pragma once
// ParallelFor: independent work items on a few threads, with a deterministic outcome.
//
//   WEFT_RETURN_IF_ERROR(ParallelFor(replicas, threads, [&](int r) -> Status {
//     WEFT_ASSIGN_OR_RETURN(out[r], PlanReplica(r));  // writes only its own slot
//     return OkStatus();
//   }));
//
// Items are claimed in index order by up to `threads` threads (the calling thread is one of them).
// Every item runs (also after a failure), so the result does not depend on timing: the error of
// the lowest failing index, else OK. A thread that cannot be started (std::system_error: thread
// limit, memory) is not an error — its share runs on the threads that did start, at worst on
// the caller alone. An exception thrown by `fn` becomes that item's error (InternalError naming
// the item and the exception). Thread-safety: `fn` is called concurrently for different indices.
#include <functional>

#include "weft/common/status.h"

namespace weft {

// threads <= 1 or n <= 1: runs fn(0), ..., fn(n - 1) on the calling thread.
Status ParallelFor(int n, int threads, const std::function<Status(int)>& fn);

}  // namespace weft
