// libFuzzer target: the cluster spec reader and, for a cluster it accepts, emission and re-reading.
#include "fuzz_common.h"
#include "weft/spec/preset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::StatusOr<weft::spec::ClusterSpec> cluster =
      weft::spec::ParseClusterYaml(weft::fuzz::AsText(data, size), "fuzz.yaml");
  if (!cluster.ok()) {
    weft::fuzz::CheckError(cluster.status());
    return 0;
  }
  (void)cluster->WithTotalGpus(cluster->TotalGpus());
  const std::string yaml = weft::spec::ClusterToYaml(*cluster);
  weft::StatusOr<weft::spec::ClusterSpec> again = weft::spec::ParseClusterYaml(yaml, "again.yaml");
  if (!again.ok()) {
    std::fprintf(stderr, "emitted cluster does not read back: %s\n%s\n",
                 again.status().message().c_str(), yaml.c_str());
    std::abort();
  }
  return 0;
}
