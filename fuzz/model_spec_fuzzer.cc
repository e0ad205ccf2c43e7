// libFuzzer target: the model spec reader (YAML with `use:` and `setup:`) and, for a model it
// accepts, YAML emission and re-reading (the emitted text must read back).
#include "fuzz_common.h"
#include "weft/spec/preset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::StatusOr<weft::spec::ModelPreset> preset =
      weft::spec::ParseModelYaml(weft::fuzz::AsText(data, size), "fuzz.yaml");
  if (!preset.ok()) {
    weft::fuzz::CheckError(preset.status());
    return 0;
  }
  (void)preset->model.ParameterCount();
  const std::string yaml = weft::spec::ModelToYaml(*preset);
  weft::StatusOr<weft::spec::ModelPreset> again = weft::spec::ParseModelYaml(yaml, "again.yaml");
  if (!again.ok()) {
    std::fprintf(stderr, "emitted model does not read back: %s\n%s\n",
                 again.status().message().c_str(), yaml.c_str());
    std::abort();
  }
  return 0;
}
