"""Runtime: executes weft execution plans on a tiny real PyTorch model (CPU, gloo)."""
from weft.runtime.executor import (  # noqa: F401
    PlanExecutionError, RankExecutor, rank_chunks, run_plans, run_streamed)
from weft.runtime.model import (  # noqa: F401
    MicrobatchData, ModuleChunk, build_chunks, reference_step)
from weft.runtime.plan import ExecutionPlan, Op, parse_plan  # noqa: F401
