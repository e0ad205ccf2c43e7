// Bindings: samples (generated or read from files), packing, per-module workloads.
#include <vector>

#include "bindings.h"
#include "weft/data/generators.h"
#include "weft/data/packing.h"
#include "weft/data/readers.h"
#include "weft/data/workload.h"
#include "weft/spec/preset.h"

namespace weft::python {

py::dict SampleToDict(const spec::Sample& s) {
  py::dict d;
  d["id"] = s.id;
  d["text_tokens"] = s.text_tokens;
  py::list images, videos, audios;
  for (const auto& im : s.images) {
    py::dict i;
    i["width_px"] = im.width_px;
    i["height_px"] = im.height_px;
    i["patch_tokens"] = im.patch_tokens;
    i["text_position"] = im.text_position;
    images.append(i);
  }
  for (const auto& v : s.videos) {
    py::dict i;
    i["frames"] = v.frames;
    i["fps"] = v.fps;
    i["duration_s"] = v.duration_s;
    i["width_px"] = v.width_px;
    i["height_px"] = v.height_px;
    videos.append(i);
  }
  for (const auto& a : s.audios) {
    py::dict i;
    i["duration_s"] = a.duration_s;
    audios.append(i);
  }
  d["images"] = images;
  d["videos"] = videos;
  d["audios"] = audios;
  return d;
}

namespace {
template <typename T>
T Get(const py::dict& d, const char* key, T fallback) {
  return d.contains(key) ? d[key].cast<T>() : fallback;
}
}  // namespace

spec::Sample SampleFromDict(const py::dict& d) {
  spec::Sample s;
  s.id = Get<int64_t>(d, "id", 0);
  s.text_tokens = Get<int>(d, "text_tokens", 0);
  if (d.contains("images")) {
    for (auto item : d["images"]) {
      auto i = item.cast<py::dict>();
      s.images.push_back({Get<int>(i, "width_px", 0), Get<int>(i, "height_px", 0),
                          Get<int>(i, "patch_tokens", 0), Get<int>(i, "text_position", -1)});
    }
  }
  if (d.contains("videos")) {
    for (auto item : d["videos"]) {
      auto i = item.cast<py::dict>();
      s.videos.push_back({Get<int>(i, "frames", 0), Get<double>(i, "fps", 0),
                          Get<double>(i, "duration_s", 0), Get<int>(i, "width_px", 0),
                          Get<int>(i, "height_px", 0)});
    }
  }
  if (d.contains("audios")) {
    for (auto item : d["audios"]) {
      s.audios.push_back({Get<double>(item.cast<py::dict>(), "duration_s", 0)});
    }
  }
  return s;
}

py::dict BatchToDict(const spec::Batch& b) {
  py::dict d;
  d["iteration"] = b.iteration;
  py::list samples, sequences;
  for (const auto& s : b.samples) samples.append(SampleToDict(s));
  for (const auto& seq : b.sequences) {
    py::dict q;
    q["sample_indices"] = seq.sample_indices;
    q["llm_tokens"] = seq.llm_tokens;
    sequences.append(q);
  }
  d["samples"] = samples;
  d["sequences"] = sequences;
  return d;
}

spec::Batch BatchFromDict(const py::dict& d) {
  spec::Batch b;
  b.iteration = Get<int64_t>(d, "iteration", 0);
  if (d.contains("samples")) {
    for (auto item : d["samples"]) b.samples.push_back(SampleFromDict(item.cast<py::dict>()));
  }
  if (d.contains("sequences")) {
    for (auto item : d["sequences"]) {
      auto q = item.cast<py::dict>();
      spec::PackedSequence seq;
      seq.sample_indices = q["sample_indices"].cast<std::vector<int>>();
      seq.llm_tokens = Get<int64_t>(q, "llm_tokens", 0);
      b.sequences.push_back(std::move(seq));
    }
  }
  return b;
}

namespace {
std::vector<spec::Sample> SamplesFromList(const py::list& samples) {
  std::vector<spec::Sample> out;
  for (auto item : samples) out.push_back(SampleFromDict(item.cast<py::dict>()));
  return out;
}
}  // namespace

void RegisterData(py::module_& m) {
  m.def("generator_profiles", []() {
    std::vector<std::string> out;
    for (auto name : data::GeneratorProfileNames()) out.emplace_back(name);
    return out;
  });
  m.def(
      "generate_samples",
      [](const std::string& profile, int64_t num_samples, uint64_t seed, int64_t iteration) {
        data::GeneratorOptions o;
        o.num_samples = num_samples;
        o.seed = seed;
        o.iteration = iteration;
        auto samples = Unwrap(data::GenerateSamples(profile, o));
        py::list out;
        for (const auto& s : samples) out.append(SampleToDict(s));
        return out;
      },
      py::arg("profile"), py::arg("num_samples") = 16, py::arg("seed") = 0,
      py::arg("iteration") = 0, "Synthetic samples of a generator profile → list of dicts.");
  m.def(
      "read_samples",
      [](const std::string& path, int64_t max_samples) {
        data::ReadOptions o;
        o.max_samples = max_samples;
        auto r = Unwrap(data::ReadSamples(path, o));
        py::list out;
        for (const auto& s : r.samples) out.append(SampleToDict(s));
        return out;
      },
      py::arg("path"), py::arg("max_samples") = 0, "Samples of a data file → list of dicts.");
  m.def(
      "pack",
      [](const std::string& model, const py::list& samples, int64_t context_tokens) {
        auto preset = Unwrap(spec::LoadModel(model));
        auto in = SamplesFromList(samples);
        data::PackingOptions o;
        o.context_tokens = context_tokens;
        auto r = Unwrap(data::PackSamples(preset.model, in, o));
        py::dict d = BatchToDict(r.batch);
        d["report"] = r.report.BriefReport();
        return d;
      },
      py::arg("model"), py::arg("samples"), py::arg("context_tokens") = 8192,
      "Packs samples into LLM sequences → batch dict (samples, sequences, report).");
  m.def(
      "module_workload",
      [](const std::string& model, const std::string& module, const py::dict& batch,
         const std::vector<int>& sequence_indices) {
        auto preset = Unwrap(spec::LoadModel(model));
        auto index = preset.model.FindModule(module);
        if (!index) throw py::value_error("module = \"" + module + "\"; not in model " + model);
        auto b = BatchFromDict(batch);
        auto w = Unwrap(data::DeriveModuleWorkload(preset.model, *index, b, sequence_indices));
        std::vector<std::vector<int32_t>> out;
        for (const auto& inst : w.instances) out.push_back(inst.segment_tokens);
        return out;
      },
      py::arg("model"), py::arg("module"), py::arg("batch"), py::arg("sequence_indices"),
      "Segment tokens per attention instance of `module` for the microbatch of the given "
      "sequences (data::DeriveModuleWorkload).");
}

}  // namespace weft::python
