"""weft: planner / simulator / runtime for distributed training of multimodal LLMs.

The C++ library is exposed through the extension module ``_weft``; this package re-exports it.
"""
from _weft import (  # noqa: F401
    FeedbackPlanner,
    PlannerService,
    chunk_cost,
    compare,
    generate_samples,
    generator_profiles,
    import_hf_config,
    is_hf_config_path,
    layer_cost,
    list_presets,
    load_cluster,
    module_spec_fields,
    module_workload,
    normalize_plan,
    pack,
    plan,
    read_samples,
    simulate,
    strategy_names,
    tune,
    validate_measured,
    validate_plan,
)

__all__ = [
    "FeedbackPlanner", "PlannerService",
    "chunk_cost", "compare", "generate_samples", "generator_profiles", "import_hf_config",
    "is_hf_config_path", "layer_cost", "list_presets",
    "load_cluster", "load_model", "module_spec_fields", "module_workload", "normalize_plan",
    "pack", "plan", "read_samples", "simulate", "strategy_names", "tune", "validate_measured",
    "validate_plan",
]


def load_model(path_or_config):
    """A model as a dict (modules, edges, setup) from a preset name, a YAML/JSON spec path, a
    Hugging Face config.json path (or the checkpoint directory holding one), a config dict as
    config.json holds it, or a ``transformers.PretrainedConfig`` (transformers is optional)."""
    import _weft

    if isinstance(path_or_config, (str, bytes)) or hasattr(path_or_config, "__fspath__"):
        import os

        return _weft.load_model(os.fsdecode(path_or_config))
    if hasattr(path_or_config, "to_dict") and hasattr(path_or_config, "model_type"):
        path_or_config = path_or_config.to_dict()  # transformers.PretrainedConfig
    if isinstance(path_or_config, dict):
        import json

        if "modules" in path_or_config or "model_type" not in path_or_config:
            raise ValueError("load_model(dict): a Hugging Face config dict needs a model_type "
                             "(a weft spec is read from a file or preset name)")
        return _weft.import_hf_config(json.dumps(path_or_config), "<config dict>")
    raise TypeError(f"load_model: {type(path_or_config).__name__}; expected a preset name, a path, "
                    "a config dict or a transformers.PretrainedConfig")
