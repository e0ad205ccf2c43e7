#include "weft/common/parallel.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace weft {

Status ParallelFor(int n, int threads, const std::function<Status(int)>& fn) {
  std::vector<Status> status(std::max(0, n));
  std::atomic<int> next{0};
  // An exception must not leave a worker thread (std::terminate, no message, no cleanup): it
  // becomes the item's error, as on the calling thread.
  const auto run = [&](int i) -> Status {
    try {
      return fn(i);
    } catch (const std::bad_alloc&) {
      return InternalError("out of memory (std::bad_alloc) in item " + std::to_string(i));
    } catch (const std::exception& e) {
      return InternalError("item " + std::to_string(i) + " threw: " + e.what());
    } catch (...) {
      return InternalError("item " + std::to_string(i) + " threw an unknown exception");
    }
  };
  const auto work = [&] {
    for (int i = next.fetch_add(1); i < n; i = next.fetch_add(1)) status[i] = run(i);
  };
  std::vector<std::thread> workers;
  const int extra = std::min(threads, n) - 1;
  for (int t = 0; t < extra; ++t) {
    try {
      workers.emplace_back(work);
    } catch (const std::exception&) {  // system_error, or bad_alloc for its state
      break;  // the threads already started (and the caller) take the rest
    }
  }
  work();
  for (auto& w : workers) w.join();
  for (const Status& s : status) {
    if (!s.ok()) return s;
  }
  return OkStatus();
}

}  // namespace weft
