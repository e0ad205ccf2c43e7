// Bindings: model / cluster presets and files.
#include "bindings.h"
#include "weft/spec/preset.h"

namespace weft::python {

namespace {

py::dict ModuleToDict(const spec::ModuleSpec& mod) {
  py::dict d;
  d["name"] = mod.name;
  d["kind"] = std::string(spec::ModuleKindName(mod.kind));
  d["modality"] = std::string(spec::ModalityName(mod.modality));
  d["frozen"] = mod.frozen;
  d["num_layers"] = mod.num_layers;
  d["hidden_size"] = mod.hidden_size;
  d["ffn_hidden_size"] = mod.ffn_hidden_size;
  d["num_attention_heads"] = mod.num_attention_heads;
  d["num_kv_groups"] = mod.num_kv_groups;
  d["head_dim"] = mod.HeadDim();
  d["gated_mlp"] = mod.gated_mlp;
  d["activation"] = std::string(spec::ActivationName(mod.activation));
  d["causal_attention"] = mod.causal_attention;
  d["linear_bias"] = mod.linear_bias;
  d["rms_norm"] = mod.rms_norm;
  d["vocab_size"] = mod.vocab_size;
  d["patch_size"] = mod.patch_size;
  d["spatial_merge"] = mod.spatial_merge;
  d["image_size_px"] = mod.image_size_px;
  d["in_channels"] = mod.in_channels;
  d["input_size"] = mod.input_size;
  d["output_size"] = mod.output_size;
  d["parameters_per_layer"] = mod.ParametersPerLayer();
  d["parameter_count"] = mod.ParameterCount();
  return d;
}

py::dict ModelToDict(const spec::ModelPreset& preset) {
  py::dict d;
  d["name"] = preset.model.name;
  d["description"] = preset.model.description;
  py::list modules;
  for (const auto& mod : preset.model.modules) modules.append(ModuleToDict(mod));
  d["modules"] = modules;
  py::list edges;
  for (const auto& e : preset.model.edges) edges.append(py::make_tuple(e.from, e.to));
  d["edges"] = edges;
  int64_t params = 0;
  for (const auto& mod : preset.model.modules) params += mod.ParameterCount();
  d["parameter_count"] = params;
  if (preset.setup) {
    py::dict s;
    s["cluster"] = preset.setup->cluster;
    s["gpus"] = preset.setup->gpus;
    s["context_tokens"] = preset.setup->context_tokens;
    s["global_batch_sequences"] = preset.setup->global_batch_sequences;
    s["data_profile"] = preset.setup->data_profile;
    s["num_microbatches"] = preset.setup->parallel.num_microbatches;
    d["setup"] = s;
  } else {
    d["setup"] = py::none();
  }
  d["yaml"] = spec::ModelToYaml(preset);
  return d;
}

py::dict ClusterToDict(const spec::ClusterSpec& cluster) {
  py::dict d;
  d["name"] = cluster.name;
  d["total_gpus"] = cluster.TotalGpus();
  d["yaml"] = spec::ClusterToYaml(cluster);
  return d;
}

}  // namespace

void RegisterSpec(py::module_& m) {
  m.def(
      "list_presets",
      [](const std::string& kind) {
        py::list out;
        for (const auto& info : spec::ListPresets()) {
          const std::string k(spec::PresetKindName(info.kind));
          if (!kind.empty() && k != kind) continue;
          py::dict d;
          d["kind"] = k;
          d["name"] = info.name;
          d["description"] = info.description;
          d["parameter_count"] = info.parameter_count;
          d["total_gpus"] = info.total_gpus;
          out.append(d);
        }
        if (!kind.empty() && kind != "model" && kind != "cluster") {
          throw py::value_error("kind = \"" + kind + "\"; must be \"model\", \"cluster\" or \"\"");
        }
        return out;
      },
      py::arg("kind") = "", "Built-in presets as dicts (kind, name, description, ...).");
  m.def(
      "load_model",
      [](const std::string& name_or_path) { return ModelToDict(Unwrap(spec::LoadModel(name_or_path))); },
      py::arg("name_or_path"), "A model preset name or YAML/JSON path → dict (modules, edges, setup).");
  m.def(
      "load_cluster",
      [](const std::string& name_or_path) {
        return ClusterToDict(Unwrap(spec::LoadCluster(name_or_path)));
      },
      py::arg("name_or_path"), "A cluster preset name or YAML/JSON path → dict.");
}

}  // namespace weft::python
