"""Measured feedback end to end (issue 28, item 4): the runtime executes weft's plans and records
what it measured (weft.measured/v1); weft.FeedbackPlanner folds the records into its cost
correction (Planner::Observe) and plans the next iteration with it. One module's forward is made
3x slower for one input shape (the runtime's test-only inject_slowdown); after a few observed
iterations weft predicts those stages within 10% of what they measure, and the other stages'
predictions do not take the slowdown.

The runtime runs on this machine's CPU while weft's cost model predicts the cluster's GPUs, so
the first observed iterations calibrate every stage (CPU time / GPU prediction); the slowdown
comes after. Timing noise on a shared 2-core machine is large per stage, so the checks compare
sums over the stages of a kind (the same stages in every iteration: one batch is planned again
and again)."""
import json
import statistics
import random

import pytest

torch = pytest.importorskip("torch")

import weft  # noqa: E402
from weft.runtime.executor import run_plans, run_streamed  # noqa: E402
from weft.runtime.harness import OnlinePlanner, OnlinePlannerSource  # noqa: E402
from weft.runtime.measured import measured_document  # noqa: E402
from weft.runtime.plan import parse_plan  # noqa: E402

CALIBRATE, SLOWED, FACTOR = 4, 4, 3.0


def _key(rank: int, module: int, chunk: int, mb: int, sub: int, op: str) -> tuple:
    """A compute stage by what it computes (action indices move when timings move the
    compiled plan's sends and waits)."""
    return rank, module, chunk, mb, sub, op


def _stage_kinds(plan_json: dict, tokens: int) -> dict:
    """stage key -> 'slow' (vision forward of `tokens` tokens) or 'other'."""
    plan = parse_plan(plan_json)
    out = {}
    for r, rank in enumerate(plan.ranks):
        for a in rank.actions:
            if not a.op.is_compute:
                continue
            slow = (plan.modules[a.stage.module] == "vision" and a.op.value == "forward" and
                    plan.data.instance_tokens(0, a.stage.microbatch, a.stage.module,
                                              *a.instances) == tokens)
            out[_key(r, a.stage.module, a.stage.chunk, a.stage.microbatch, a.stage.sub,
                     a.op.value)] = "slow" if slow else "other"
    return out


def _predicted(plan_json: dict, kinds: dict) -> dict:
    plan = parse_plan(plan_json)
    out = {"slow": 0.0, "other": 0.0}
    for r, rank in enumerate(plan.ranks):
        for a in rank.actions:
            if a.op.is_compute:
                out[kinds[_key(r, a.stage.module, a.stage.chunk, a.stage.microbatch,
                               a.stage.sub, a.op.value)]] += a.raw["latency_s"]
    return out


def _measured(record: dict, kinds: dict) -> dict:
    out = {"slow": 0.0, "other": 0.0}
    for s in record["stages"]:
        st = s["stage"]
        out[kinds[_key(s["rank"], st["module"], st["chunk"], st["mb"], st["sub"],
                       st["pass"])]] += s["measured_s"]
    return out


def test_weft_learns_an_injected_slowdown_and_nothing_else(tmp_path):
    path = tmp_path / "images.jsonl"
    rnd = random.Random(5)
    with open(path, "w") as f:
        for i in range(48):
            f.write(json.dumps({"id": i, "text_tokens": rnd.randint(8, 40),
                                "images": [{"w": 56, "h": 56}] * rnd.randint(1, 3)}) + "\n")
    # The CPU runs ~10^3-10^4x slower than the GPU predictions: the clamp of the update rule
    # (default [1/8, 8] per observation, against outliers on a real cluster) is widened.
    planner = weft.FeedbackPlanner("megatron-1f1b", "tiny-vlm", data=str(path), gpus=2,
                                   pipeline_size=2, alpha=0.8, min_ratio=1e-6,
                                   max_ratio=1e6)
    model = weft.load_model("tiny-vlm")
    first = json.loads(planner.plan(0)["plan_json"])
    plan = parse_plan(first)
    vision = plan.modules.index("vision")
    shapes = sorted({plan.data.instance_tokens(0, a.stage.microbatch, vision, *a.instances)
                     for rank in plan.ranks for a in rank.actions
                     if a.op.value == "forward" and a.stage.module == vision})
    assert len(shapes) >= 2, shapes  # the slowed shape and at least one that is not
    tokens = shapes[-1]
    kinds = _stage_kinds(first, tokens)
    assert "slow" in kinds.values()

    plan_json, history = first, []
    for step in range(CALIBRATE + SLOWED):
        slowdown = ({"module": "vision", "pass": "forward", "factor": FACTOR, "tokens": tokens}
                    if step >= CALIBRATE else None)
        run = run_plans(model, [{"plan": plan_json, "iteration": step}], timeout_s=60,
                        inject_slowdown=slowdown)[0]
        history.append({"predicted": _predicted(plan_json, kinds),
                        "measured": _measured(run["measured"], kinds)})
        planner.observe(json.dumps(measured_document([run["measured"]])))
        plan_json = json.loads(planner.plan(0)["plan_json"])
        assert _stage_kinds(plan_json, tokens) == kinds  # the same stages every time
    assert planner.iterations_planned == CALIBRATE + SLOWED + 1
    calibrated = history[CALIBRATE]["predicted"]  # planned after the calibrating runs
    final = _predicted(plan_json, kinds)
    # Several stages of one key observed in one iteration weigh as that many observations
    # (cost::UpdateCorrection): the factor follows the last iteration's measurements.
    # The last two slowed runs' mean: on a shared 2-core machine one run's CPU timing moves by
    # 10-40% with the load, and the update (alpha 0.8) mixes the last runs. The slowed stages are
    # predicted within 20% of what they now measure, about 3x before. (Within 10% of a steady
    # measurement is exact in C++ with synthetic measurements:
    # Planner.ObservedStagesCorrectTheirPredictionsAndNoOthers.)
    measured_slow = statistics.mean(h["measured"]["slow"] for h in history[-2:])
    assert abs(final["slow"] / measured_slow - 1) <= 0.20, (final, measured_slow, history)
    assert final["slow"] / calibrated["slow"] > 0.6 * FACTOR, (final, calibrated)
    # The other stages did not take the slowdown: relative to them the slowed stages moved by
    # about the factor. (That no other prediction moves at all is exact in C++, where the
    # measurements are synthetic: Planner.ObservedStagesCorrectTheirPredictionsAndNoOthers. Here
    # the runs' own timing noise — up to ~1.5x between runs of the same stages on a shared
    # 2-core machine — moves every stage a little.)
    moved_slow = final["slow"] / calibrated["slow"]
    moved_other = final["other"] / calibrated["other"]
    assert 0.5 <= moved_other <= 2.0, (final, calibrated, history)
    assert moved_slow / moved_other > 0.6 * FACTOR, (moved_slow, moved_other, history)
    factors = {(c["module"], c["pass"]) for c in planner.correction()}
    assert ("vision", "fwd") in factors and ("llm", "fwd") in factors


def _compute_latency_s(plan_json: dict) -> float:
    plan = parse_plan(plan_json)
    return sum(a.raw["latency_s"] for rank in plan.ranks for a in rank.actions
               if a.op.is_compute)


@pytest.mark.parametrize("mode", ["parent", "rank0"])
def test_online_planning_learns_from_what_the_ranks_measured(mode):
    # weft.PlannerService.report through OnlinePlanner(learn_from_measured): each iteration's
    # weft.measured/v1 record goes back to the service, whose correction prices the searches
    # started afterwards. The CPU runs far slower than the GPU predictions, so the corrected
    # plans predict more (each observation's ratio is clamped to at most 8: the default rule).
    # parent: run_streamed(next_job) hands the merged record to the planner in the parent;
    # rank0: the planner lives on rank 0 (weft.train --online) and the ranks gather their
    # times there.
    iterations = 5
    kw = dict(data="coco-llava", seed=1, budget_s=0.5, deadline_s=60.0, lookahead=1,
              work_budget=50, learn_from_measured=True)
    model = weft.load_model("tiny-vlm")
    if mode == "parent":
        planner = OnlinePlanner("dip", "tiny-vlm", iterations,
                                gpus=2, pipeline_size=2, world=True, **kw)
        runs = run_streamed(model, 2, next_job=planner.next_job, timeout_s=60)
        assert planner.service.reports == iterations
        factors = planner.service.correction()
        assert factors and statistics.median(f["factor"] for f in factors) > 1, factors
        assert {"vision", "llm"} <= {f["module"] for f in factors}
        with pytest.raises(Exception, match="report: iteration 0 was not served"):
            planner.service.report(0, json.dumps(measured_document([runs[0]["measured"]])))
    else:
        source = OnlinePlannerSource("dip", "tiny-vlm", iterations,
                                     kwargs={"gpus": 2, "pipeline_size": 2, "world": True},
                                     **kw)
        runs = run_streamed(model, 2, source=source, timeout_s=60)
    assert len(runs) == iterations
    # Lookahead 1: iteration i is planned after the report of i - 2 (searches start when i - 1
    # is handed out); iterations 0 and 1 are planned with no correction.
    first = _compute_latency_s(runs[0]["job"]["plan"])
    last = _compute_latency_s(runs[-1]["job"]["plan"])
    assert last > 2 * first, (first, last)


def test_train_learn_from_measured_needs_online_planning(capsys):
    from weft.train import main
    assert main(["--model", "tiny-vlm", "--strategy", "megatron-1f1b", "--offline",
                 "--learn-from-measured"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --learn-from-measured needs online planning (--online; not with "
                   "--pool or --placement)"]
