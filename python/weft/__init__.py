"""weft: planner / simulator / runtime for distributed training of multimodal LLMs.

The C++ library is exposed through the extension module ``_weft``; this package re-exports it.
"""
from _weft import (  # noqa: F401
    FeedbackPlanner,
    PlannerService,
    chunk_cost,
    generate_samples,
    generator_profiles,
    layer_cost,
    list_presets,
    load_cluster,
    load_model,
    module_spec_fields,
    module_workload,
    normalize_plan,
    pack,
    plan,
    read_samples,
    simulate,
    strategy_names,
    validate_measured,
    validate_plan,
)

__all__ = [
    "FeedbackPlanner", "PlannerService",
    "chunk_cost", "generate_samples", "generator_profiles", "layer_cost", "list_presets",
    "load_cluster", "load_model", "module_spec_fields", "module_workload", "normalize_plan",
    "pack", "plan", "read_samples", "simulate", "strategy_names", "validate_measured",
    "validate_plan",
]
