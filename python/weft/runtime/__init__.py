"""Runtime: executes weft execution plans on a tiny real PyTorch model (CPU, gloo)."""
from weft.runtime.executor import PlanExecutionError, RankExecutor, run_plans  # noqa: F401
from weft.runtime.model import (  # noqa: F401
    MicrobatchData, ModuleChunk, build_chunks, reference_step)
