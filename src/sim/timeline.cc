#include "weft/sim/timeline.h"

#include <algorithm>

#include <fmt/format.h>

namespace weft::sim {

double Timeline::GapToLowerBound() const {
  return lower_bound_s > 0 ? iteration_time_s / lower_bound_s - 1.0 : 0.0;
}

std::string Timeline::BriefReport() const {
  constexpr double kGiB = 1073741824.0;
  std::string out = fmt::format(
      "iteration {:.3f} ms (lower bound {:.3f} ms: busiest group {:.3f} ms, critical path {:.3f} "
      "ms; gap {:.1f}%)\n",
      iteration_time_s * 1e3, lower_bound_s * 1e3, busiest_group_work_s * 1e3,
      critical_path_s * 1e3, GapToLowerBound() * 100.0);
  out += fmt::format("pipeline span {:.3f} ms, bubble {:.1f}%, {} groups, {} GPUs", pipeline_span_s * 1e3,
                     bubble_ratio * 100.0, groups.size(), num_gpus);
  if (mfu > 0) out += fmt::format(", MFU {:.1f}%", mfu * 100.0);
  out += "\n";
  if (samples_per_s > 0 || tokens_per_s > 0) {
    out += fmt::format("throughput {:.2f} samples/s, {:.0f} tokens/s\n", samples_per_s, tokens_per_s);
  }
  int64_t peak = 0;
  int peak_group = -1;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].peak_bytes > peak || peak_group < 0) {
      peak = groups[g].peak_bytes;
      peak_group = static_cast<int>(g);
    }
  }
  if (peak_group >= 0) {
    out += fmt::format("peak memory {:.2f} GiB per GPU (group {})", peak / kGiB, peak_group);
    if (capacity_bytes > 0) out += fmt::format(" of {:.2f} GiB usable", capacity_bytes / kGiB);
    out += "\n";
  }
  if (host_peak_bytes_per_node > 0) {
    out += fmt::format(
        "offload: host memory {:.2f} GiB per node of {:.2f} GiB, backwards waited {:.3f} ms for "
        "prefetch (slowest group)\n",
        host_peak_bytes_per_node / kGiB, host_capacity_bytes_per_node / kGiB,
        offload_wait_s * 1e3);
  }
  for (const OutOfMemory& o : oom) {
    if (o.host_node >= 0) {
      out += fmt::format("OUT OF HOST MEMORY: node {} holds {:.2f} GiB offloaded > {:.2f} GiB\n",
                         o.host_node, o.peak_bytes / kGiB, o.capacity_bytes / kGiB);
      continue;
    }
    out += fmt::format("OUT OF MEMORY: group {} peaks at {:.2f} GiB > {:.2f} GiB\n", o.group,
                       o.peak_bytes / kGiB, o.capacity_bytes / kGiB);
  }
  return out;
}

}  // namespace weft::sim
