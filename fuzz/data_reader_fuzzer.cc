// libFuzzer target: one data reader (WEFT_FUZZ_FORMAT, a DataFormat name such as "weft-jsonl":
// a compile definition, one fuzzer binary per format, or else the environment variable, for the
// replay binary), then the workload every module of two models derives from each sample
// read (so a sample the reader accepts cannot blow up later: e.g. frames = 2e9).
#include <array>
#include <vector>

#include "fuzz_common.h"
#include "weft/data/readers.h"
#include "weft/data/workload.h"
#include "weft/spec/preset.h"


namespace {

const std::vector<weft::spec::ModelSpec>& Models() {
  static const std::vector<weft::spec::ModelSpec> models = [] {
    std::vector<weft::spec::ModelSpec> out;
    // Image+video ViT frame by frame (llava-ov), 3-D patches (tiny-vlm), audio (tiny-valm), DiT.
    for (const char* name : {"tiny-vlm", "tiny-valm", "tiny-t2v", "llava-ov-llama3-8b"}) {
      weft::StatusOr<weft::spec::ModelPreset> p = weft::spec::LoadModel(name);
      if (!p.ok()) {
        std::fprintf(stderr, "%s\n", p.status().message().c_str());
        std::abort();
      }
      out.push_back(p->model);
    }
    return out;
  }();
  return models;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const weft::data::DataFormat format = [] {
#ifdef WEFT_FUZZ_FORMAT
    const char* name = WEFT_FUZZ_FORMAT;
#else
    const char* name = std::getenv("WEFT_FUZZ_FORMAT");
#endif
    weft::StatusOr<weft::data::DataFormat> parsed =
        weft::data::ParseDataFormat(name ? name : "(WEFT_FUZZ_FORMAT unset)");
    if (!parsed.ok()) {
      std::fprintf(stderr, "%s\n", parsed.status().message().c_str());
      std::abort();
    }
    return *parsed;
  }();
  weft::data::ReadOptions options;
  options.max_samples = 8;  // keep one input's workload derivation bounded
  weft::StatusOr<weft::data::ReadResult> read =
      weft::data::ParseSamples(weft::fuzz::AsText(data, size), format, "fuzz.data", options);
  if (!read.ok()) {
    weft::fuzz::CheckError(read.status());
    return 0;
  }
  for (const weft::data::ReadWarning& w : read->warnings) {
    if (weft::fuzz::HasControlByte(w.message) || w.message.size() > 2048) {
      std::fprintf(stderr, "bad warning: %s\n", w.ToString().c_str());
      std::abort();
    }
  }
  (void)weft::data::SamplesToJsonl(read->samples);
  for (const weft::spec::ModelSpec& model : Models()) {
    for (size_t s = 0; s < read->samples.size(); ++s) {
      weft::spec::Batch batch;
      batch.samples = {read->samples[s]};
      const std::array<int, 1> indices = {0};
      for (int m = 0; m < static_cast<int>(model.modules.size()); ++m) {
        auto workload = weft::data::DeriveModuleWorkload(model, m, batch, indices);
        if (!workload.ok()) weft::fuzz::CheckError(workload.status());
      }
      auto tokens = weft::data::SampleLlmTokens(model, read->samples[s]);
      if (!tokens.ok()) weft::fuzz::CheckError(tokens.status());
    }
  }
  return 0;
}
