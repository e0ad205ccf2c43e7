// Bindings: model / cluster presets and files.
#include "bindings.h"

#include <string_view>

#include "weft/spec/hf_config.h"
#include "weft/spec/preset.h"

namespace weft::python {

namespace {

// Every field of spec::ModuleSpec, in the struct's order, as (dict key, writer). `head_dim` is
// written resolved (ModuleSpec::HeadDim(): hidden_size / num_attention_heads when the field is
// 0); enums as their names. python/tests/test_bindings.py checks this list against the struct's
// declaration in include/weft/spec/model.h, so a new field must be added here.
struct ModuleField {
  const char* key;
  py::object (*get)(const spec::ModuleSpec&);
};
#define WEFT_FIELD(f) \
  {#f, [](const spec::ModuleSpec& m) -> py::object { return py::cast(m.f); }}
const ModuleField kModuleFields[] = {
    WEFT_FIELD(name),
    {"kind",
     [](const spec::ModuleSpec& m) -> py::object {
       return py::str(std::string(spec::ModuleKindName(m.kind)));
     }},
    {"modality",
     [](const spec::ModuleSpec& m) -> py::object {
       return py::str(std::string(spec::ModalityName(m.modality)));
     }},
    WEFT_FIELD(frozen),
    WEFT_FIELD(num_layers),
    WEFT_FIELD(hidden_size),
    WEFT_FIELD(ffn_hidden_size),
    WEFT_FIELD(num_attention_heads),
    WEFT_FIELD(num_kv_groups),
    WEFT_FIELD(gated_mlp),
    {"activation",
     [](const spec::ModuleSpec& m) -> py::object {
       return py::str(std::string(spec::ActivationName(m.activation)));
     }},
    WEFT_FIELD(causal_attention),
    WEFT_FIELD(qkv_bias),
    WEFT_FIELD(rms_norm),
    {"head_dim", [](const spec::ModuleSpec& m) -> py::object { return py::cast(m.HeadDim()); }},
    WEFT_FIELD(linear_bias),
    WEFT_FIELD(qk_norm),
    WEFT_FIELD(learned_position_embeddings),
    WEFT_FIELD(vocab_size),
    WEFT_FIELD(tied_embeddings),
    WEFT_FIELD(patch_size),
    WEFT_FIELD(spatial_merge),
    WEFT_FIELD(image_size_px),
    {"resize_rule",
     [](const spec::ModuleSpec& m) -> py::object {
       return py::str(std::string(spec::ResizeRuleName(m.resize_rule)));
     }},
    WEFT_FIELD(max_pixels),
    WEFT_FIELD(in_channels),
    WEFT_FIELD(temporal_patch),
    {"grid_pinpoints",
     [](const spec::ModuleSpec& m) -> py::object {
       py::list out;
       for (const auto& p : m.grid_pinpoints) out.append(py::make_tuple(p.height_px, p.width_px));
       return out;
     }},
    WEFT_FIELD(anyres_max_tiles),
    WEFT_FIELD(min_tiles),
    WEFT_FIELD(max_tiles),
    WEFT_FIELD(thumbnail),
    WEFT_FIELD(attention_window_px),
    WEFT_FIELD(full_attention_layers),
    WEFT_FIELD(vae_spatial_downsample),
    WEFT_FIELD(vae_temporal_downsample),
    WEFT_FIELD(text_condition_hidden),
    WEFT_FIELD(shared_adaln),
    WEFT_FIELD(mel_bins),
    WEFT_FIELD(frames_per_second),
    WEFT_FIELD(conv_downsample),
    WEFT_FIELD(max_source_positions),
    WEFT_FIELD(output_pool),
    WEFT_FIELD(input_size),
    WEFT_FIELD(output_size),
};
#undef WEFT_FIELD

py::dict ModuleToDict(const spec::ModuleSpec& mod) {
  py::dict d;
  for (const ModuleField& f : kModuleFields) d[f.key] = f.get(mod);
  // Derived.
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
  // Module indices in ModelSpec::TopologicalOrder() (ties by declaration order).
  d["topological_order"] = preset.model.TopologicalOrder();
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
      "module_spec_fields",
      [] {
        py::list out;
        for (const ModuleField& f : kModuleFields) out.append(f.key);
        return out;
      },
      "Names of every spec::ModuleSpec field, in declaration order: the keys every module dict "
      "of load_model has (besides the derived parameters_per_layer and parameter_count).");
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
      py::arg("name_or_path"),
      "A model preset name, YAML/JSON path, or Hugging Face config.json (or its directory) → "
      "dict (modules, edges, setup).");
  m.def(
      "import_hf_config",
      [](const std::string& json_text, const std::string& source,
         const std::vector<std::string>& freeze, int64_t max_pixels) {
        spec::HfImportOptions options;
        options.freeze = freeze;
        options.max_pixels = max_pixels;
        spec::HfImport imported = Unwrap(spec::ParseHfConfig(json_text, source, options));
        py::dict d = ModelToDict(imported.preset);
        d["hf_notes"] = imported.notes;
        d["yaml"] = spec::HfImportToYaml(imported);
        return d;
      },
      py::arg("json_text"), py::arg("source") = "config.json",
      py::arg("freeze") = std::vector<std::string>{}, py::arg("max_pixels") = 0,
      "A Hugging Face config.json's text -> the load_model dict, plus hf_notes (what weft does "
      "not model) and yaml (the weft YAML with the source of every value).");
  m.def(
      "is_hf_config_path", [](const std::string& path) { return spec::IsHfConfigPath(path); },
      py::arg("path"), "True for a Hugging Face config.json or a directory holding one.");
  m.def(
      "load_cluster",
      [](const std::string& name_or_path) {
        return ClusterToDict(Unwrap(spec::LoadCluster(name_or_path)));
      },
      py::arg("name_or_path"), "A cluster preset name or YAML/JSON path → dict.");
}

}  // namespace weft::python
