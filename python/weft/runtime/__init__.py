"""Runtime: executes weft execution plans on a tiny real PyTorch model (CPU, gloo)."""
from weft.runtime.executor import (  # noqa: F401
    PlanExecutionError, RankExecutor, Slowdown, load_plan, run_plans, run_streamed)
from weft.runtime.measured import measured_iteration, write_measured  # noqa: F401
from weft.runtime.model import (  # noqa: F401
    MicrobatchData, ModuleChunk, build_chunks, reference_step)
from weft.runtime.plan import ExecutionPlan, Op, PlanData, parse_plan  # noqa: F401
