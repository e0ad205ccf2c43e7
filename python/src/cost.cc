// Bindings: analytical layer / chunk costs.
#include "bindings.h"
#include "weft/cost/cost_model.h"
#include "weft/spec/preset.h"

namespace weft::python {

namespace {

void FillTotals(py::dict& d, const cost::CostTotals& t) {
  d["forward_s"] = t.forward_s;
  d["backward_input_s"] = t.backward_input_s;
  d["backward_weight_s"] = t.backward_weight_s;
  d["forward_flops"] = t.forward_flops;
  d["backward_input_flops"] = t.backward_input_flops;
  d["backward_weight_flops"] = t.backward_weight_flops;
  d["activation_bytes"] = t.ActivationBytes(spec::Recompute::kNone);
  d["parameters"] = t.parameters;
  d["state_bytes"] = t.StateBytes();
}

struct Loaded {
  spec::ModelSpec model;
  int module;
};

Loaded LoadModule(const std::string& model, const std::string& module) {
  auto preset = Unwrap(spec::LoadModel(model));
  auto index = preset.model.FindModule(module);
  if (!index) throw py::value_error("module = \"" + module + "\"; not in model " + model);
  return {preset.model, *index};
}

}  // namespace

void RegisterCost(py::module_& m) {
  m.def(
      "chunk_cost",
      [](const std::string& model, const std::string& module, int first_layer, int num_layers,
         int64_t tokens, const std::string& cluster, int tp, int instances,
         bool sequence_parallel) {
        auto l = LoadModule(model, module);
        auto c = Unwrap(spec::LoadCluster(cluster));
        cost::CostModel cm(c);
        spec::ModuleParallel par;
        par.tp = tp;
        par.sequence_parallel = sequence_parallel;
        const int64_t per_instance = instances > 0 ? tokens / instances : tokens;
        auto r = Unwrap(cm.Chunk(l.model, l.module, first_layer, num_layers,
                                 cost::TokenShape::Uniform(per_instance, instances), par));
        py::dict d;
        FillTotals(d, r);
        d["output_activation_bytes"] = r.output_activation_bytes;
        d["tp"] = tp;
        d["sequence_parallel"] = sequence_parallel;
        return d;
      },
      py::arg("model"), py::arg("module"), py::arg("first_layer"), py::arg("num_layers"),
      py::arg("tokens"), py::arg("cluster") = "a100", py::arg("tp") = 1, py::arg("instances") = 1,
      py::arg("sequence_parallel") = false,
      "Cost of layers [first_layer, first_layer+num_layers) of a module for `instances` "
      "segments of tokens/instances tokens (seconds, FLOPs, bytes per TP rank). "
      "sequence_parallel: Megatron SP (off by default, like `weft cost` without --sp); the "
      "result says which was used.");
  m.def(
      "layer_cost",
      [](const std::string& model, const std::string& module, int layer, int64_t tokens,
         const std::string& cluster, int tp, bool sequence_parallel) {
        auto l = LoadModule(model, module);
        auto c = Unwrap(spec::LoadCluster(cluster));
        cost::CostModel cm(c);
        spec::ModuleParallel par;
        par.tp = tp;
        par.sequence_parallel = sequence_parallel;
        auto r = Unwrap(cm.Layer(l.model, l.module, layer, cost::TokenShape::Uniform(tokens), par));
        py::dict d;
        FillTotals(d, r);
        py::list ops;
        for (const auto& op : r.ops) ops.append(op.name);
        d["ops"] = ops;
        d["tp"] = tp;
        d["sequence_parallel"] = sequence_parallel;
        return d;
      },
      py::arg("model"), py::arg("module"), py::arg("layer"), py::arg("tokens"),
      py::arg("cluster") = "a100", py::arg("tp") = 1, py::arg("sequence_parallel") = false,
      "Cost of one layer for one segment. sequence_parallel: Megatron SP (off by default, like "
      "`weft cost` without --sp); the result says which was used.");
}

}  // namespace weft::python
