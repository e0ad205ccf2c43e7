// libFuzzer target: the placement / MIMO-config reader (strategy/manual) against tiny-vlm on 8
// GPUs of h800 nodes.
#include "fuzz_common.h"
#include "weft/spec/preset.h"
#include "weft/planning/placement_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const weft::spec::ModelSpec model = weft::spec::LoadModel("tiny-vlm")->model;
  static const weft::spec::ClusterSpec cluster =
      *weft::spec::LoadCluster("h800")->WithTotalGpus(8);
  auto spec = weft::planning::ParsePlacementYaml(weft::fuzz::AsText(data, size),
                                                        "fuzz.yaml", model, cluster);
  if (!spec.ok()) weft::fuzz::CheckError(spec.status());
  return 0;
}
