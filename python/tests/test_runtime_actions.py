"""Typed plan actions: parse_plan turns every op into an Op once; the executor has one method per
op; all_reduce_grads is a no-op with dp = 1 (test_runtime_dp.py: dp > 1)."""
import copy

import pytest

torch = pytest.importorskip("torch")

import weft  # noqa: E402
from weft.runtime.executor import PlanExecutionError, RankExecutor, run_plans  # noqa: E402
from weft.runtime.harness import max_relative_error, plan_jobs, reference  # noqa: E402
from weft.runtime.plan import COMPUTE_OPS, Op, parse_plan  # noqa: E402


def _one_rank_job():
    # One pipeline rank: the whole model runs in this process (no torch.distributed needed).
    first, jobs = plan_jobs("megatron-1f1b", iterations=1, gpus=1, pipeline_size=1)
    assert first["pipeline_size"] == 1 and first["dp"] == 1
    return first, jobs[0]


def test_parse_plan_types_every_action_once():
    _, jobs = plan_jobs("zb-h1", iterations=1, gpus=2, pipeline_size=2)
    plan = parse_plan(jobs[0]["plan"])
    ops = {a.op for r in plan.ranks for a in r.actions}
    assert {Op.FORWARD, Op.BACKWARD_INPUT, Op.BACKWARD_WEIGHT, Op.ISEND, Op.IRECV,
            Op.WAIT_SEND, Op.WAIT_RECV, Op.FREE} <= ops
    assert all(isinstance(a.op, Op) for r in plan.ranks for a in r.actions)
    assert all(a.stage is not None for r in plan.ranks for a in r.actions
               if a.op in COMPUTE_OPS)
    # Every buffer's two ends are known (structure, not names).
    assert all(b.producer is not None and b.consumer is not None
               for r in plan.ranks for b in r.buffers.values())


def test_unknown_op_is_refused_when_the_plan_is_loaded_naming_rank_and_action():
    _, jobs = plan_jobs("megatron-1f1b", iterations=1)
    jobs[0]["plan"]["ranks"][1]["actions"][3]["op"] = "fwd"
    with pytest.raises(ValueError, match=r"rank 1 action 3: unknown op 'fwd'; must be one of "
                       r"forward, .*all_reduce_grads"):
        parse_plan(jobs[0]["plan"])
    # run_plans parses before it starts any worker.
    with pytest.raises(ValueError, match=r"rank 1 action 3: unknown op 'fwd'"):
        run_plans(weft.load_model("tiny-vlm"), jobs, timeout_s=3)


def test_every_op_has_an_executor_method():
    ex = RankExecutor(0, weft.load_model("tiny-vlm"), 1, 0.1, 5.0)
    assert set(ex._handlers) == set(Op)


def _with_all_reduce(plan: dict, dp: int) -> dict:
    """The plan with an all_reduce_grads of every module after its last backward (a v1 plan
    has none; weft.plan/v2 and later compile them)."""
    plan = copy.deepcopy(plan)
    for r in plan["ranks"]:
        acts = r["actions"]
        if any(a["op"] == "all_reduce_grads" for a in acts):
            for a in acts:
                if a["op"] == "all_reduce_grads":
                    a["dp"] = dp
            continue
        last = {a["stage"]["module"]: i for i, a in enumerate(acts)
                if a["op"] in ("backward", "backward_weight")}
        for module, i in sorted(last.items(), key=lambda kv: -kv[1]):
            acts.insert(i + 1, {"op": "all_reduce_grads", "module": module, "bytes": 0,
                                "dp": dp})
    return plan


def test_all_reduce_grads_with_dp_1_is_a_no_op():
    _, job = _one_rank_job()
    plan = _with_all_reduce(job["plan"], dp=1)
    assert sum(a["op"] == "all_reduce_grads" for a in plan["ranks"][0]["actions"]) == 3
    model = weft.load_model("tiny-vlm")
    ex = RankExecutor(0, model, 1, 0.1, 5.0)
    seen = []
    got = ex.run_iteration(plan, on_action=lambda i, a, t0, t1: seen.append(a.op))
    assert seen.count(Op.ALL_REDUCE_GRADS) == 3
    want = reference("tiny-vlm", [job])[0]
    assert got["loss"] == pytest.approx(want["loss"], rel=1e-5)
    assert max_relative_error(got["grads"], want["grads"]) < 1e-5


def test_all_reduce_grads_with_dp_2_needs_the_ranks_it_reduces_with():
    # A one-replica plan of a dp-2 iteration names no ranks: the runtime executes world plans.
    _, job = _one_rank_job()
    plan = _with_all_reduce(job["plan"], dp=2)
    for a in plan["ranks"][0]["actions"]:
        a.pop("ranks", None)
    ex = RankExecutor(0, weft.load_model("tiny-vlm"), 1, 0.1, 5.0)
    with pytest.raises(PlanExecutionError,
                       match=r"rank 0 action \d+ \(all_reduce_grads m\d dp 2\): dp = 2 but the "
                       r"plan names no ranks to reduce with \(a one-replica plan\); execute the "
                       r"world plan"):
        ex.run_iteration(plan)
