"""weft.PlannerService: the asynchronous planner (background threads, deadlines, fallback)."""
from __future__ import annotations

import json
import time

import pytest

import weft

JOB = dict(data="coco-llava", gpus=4, pipeline_size=4, seed=1)


def test_plans_come_back_in_order_and_match_weft_plan():
    svc = weft.PlannerService("dip", "tiny-vlm", budget_s=0.2, threads=2, **JOB)
    assert svc.threads == 2
    for it in range(3):
        svc.submit(it)
    for it in range(3):
        r = svc.get(it, timeout_s=60.0)
        assert r["iteration"] == it
        assert isinstance(r["fallback"], bool) and r["search_time_s"] >= 0
        plan = json.loads(r["plan_json"])
        assert plan["iteration"] == it and plan["num_ranks"] == 4
        weft.validate_plan(r["plan_json"], False)
        ref = weft.plan("dip", "tiny-vlm", iteration=it, budget_s=0.2, **JOB)
        # Same data generator, same batch; same static placement.
        assert r["batch"] == ref["batch"]
        assert r["chunks"] == ref["chunks"]
        assert r["microbatches"] == ref["microbatches"]
        assert r["iteration_time_s"] > 0 and r["pipeline_size"] == 4


def test_tiny_timeout_serves_a_valid_fallback_plan():
    svc = weft.PlannerService("dip", "tiny-vlm", budget_s=5.0, threads=1, **JOB)
    svc.submit(0)
    svc.submit(1)
    t0 = time.perf_counter()
    r = svc.get(1, timeout_s=0.0)  # iteration 0 holds the only thread: 1 is not searched yet
    assert time.perf_counter() - t0 < 4.0
    assert r["fallback"] is True and r["fallback_reason"]
    weft.validate_plan(r["plan_json"], False)
    assert json.loads(r["plan_json"])["num_ranks"] == 4
    assert r["iteration_time_s"] > 0


def test_errors_become_python_exceptions():
    with pytest.raises(ValueError, match="strateg"):
        weft.PlannerService("no-such-strategy", "tiny-vlm", **JOB)
    with pytest.raises(ValueError):
        weft.PlannerService("dip", "no-such-model", **JOB)
    svc = weft.PlannerService("megatron-1f1b", "tiny-vlm", budget_s=0.1, **JOB)
    with pytest.raises(ValueError, match="never submitted"):
        svc.get(7, timeout_s=0.1)
    svc.submit(0)
    with pytest.raises(ValueError, match="already submitted"):
        svc.submit(0)
    with pytest.raises(ValueError):
        svc.get(0, timeout_s=-1.0)


def test_online_training_plans_ahead_and_matches_the_reference(capsys):
    pytest.importorskip("torch")
    from weft import train
    rc = train.main(["--model", "tiny-vlm", "--strategy", "dip", "--procs", "2",
                     "--iterations", "2", "--budget-s", "0.2", "--check"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "online planning" in out
    lines = [ln for ln in out.splitlines() if ln.startswith("iteration ")]
    assert len(lines) == 2
    for ln in lines:
        assert "search " in ln and ("ready" in ln or "fallback" in ln)
        assert float(ln.split("max grad rel err ")[1]) < 1e-4
