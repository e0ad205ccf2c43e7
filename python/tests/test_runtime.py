"""Runtime: executing weft plans on 4 worker processes equals a single-process reference."""
import copy

import pytest

torch = pytest.importorskip("torch")

from weft.runtime.executor import PlanExecutionError, run_plans  # noqa: E402
from weft.runtime.harness import max_relative_error, plan_jobs, reference  # noqa: E402

import weft  # noqa: E402


def test_plan_execution_matches_single_process_reference():
    # megatron-1f1b, gpipe and zb-h1 plans, 2 iterations each, one after the other on the same
    # 4 worker processes (one pipeline of 4 ranks, one spawn); the reference runs the same batches
    # with the same SGD steps.
    jobs = []
    for strategy in ["megatron-1f1b", "gpipe", "zb-h1"]:
        f, j = plan_jobs(strategy, iterations=2, gpus=4, pipeline_size=4)
        assert f["pipeline_size"] == 4 and f["dp"] == 1
        jobs += j
    # Same placement: every plan gives each rank the same chunks (the workers keep theirs).
    assert all(job["plan"]["data"]["ranks"] == jobs[0]["plan"]["data"]["ranks"] for job in jobs)
    runs = run_plans(weft.load_model("tiny-vlm"), jobs, timeout_s=30)
    ref = reference("tiny-vlm", jobs)
    assert len(runs) == len(jobs) == 6
    for job, got, want in zip(jobs, runs, ref):
        name = job["summary"]["strategy"]
        assert got["loss"] == pytest.approx(want["loss"], rel=1e-5), name
        assert len(got["grads"]) == len(want["grads"]) > 10
        assert max_relative_error(got["grads"], want["grads"]) < 1e-5, name
    # The SGD step between iterations changes the loss (same batch 0, updated weights).
    assert runs[0]["loss"] != runs[2]["loss"]


def _broken(remove_op=None, move=None):
    first, jobs = plan_jobs("megatron-1f1b", iterations=1)
    plan = copy.deepcopy(jobs[0]["plan"])
    actions = plan["ranks"][1]["actions"]
    if remove_op:
        del actions[next(i for i, a in enumerate(actions) if a["op"] == remove_op)]
    if move:
        rank, op = move  # move the first `op` of `rank` to the front of its list
        acts = plan["ranks"][rank]["actions"]
        acts.insert(0, acts.pop(next(i for i, a in enumerate(acts) if a["op"] == op)))
    jobs[0]["plan"] = plan
    return first, jobs


def test_missing_irecv_fails_naming_rank_action_and_peer():
    _, jobs = _broken(remove_op="irecv")
    with pytest.raises(PlanExecutionError,
                       match=r"rank 1 action \d+ \(wait_recv buf \d+ from rank 0\): no irecv"):
        run_plans(weft.load_model("tiny-vlm"), jobs, timeout_s=3)


def test_wrong_order_deadlock_times_out_naming_both_ranks():
    # Rank 0 waits for a backward gradient before it sends any activation: both ranks wait.
    _, jobs = _broken(move=(0, "wait_recv"))
    plan = jobs[0]["plan"]
    # The moved wait has no irecv before it: post its irecv first so it truly blocks.
    acts = plan["ranks"][0]["actions"]
    irecv = next(i for i, a in enumerate(acts)
                 if a["op"] == "irecv" and a["buffer"] == acts[0]["buffer"])
    acts.insert(0, acts.pop(irecv))
    with pytest.raises(PlanExecutionError) as e:
        run_plans(weft.load_model("tiny-vlm"), jobs, timeout_s=3)
    msg = str(e.value)
    assert "rank 0 action 1 (wait_recv" in msg and "timed out after 3 s" in msg
    assert "rank 1 action" in msg


def test_train_cli_rejects_bad_input(capsys):
    from weft.train import main
    assert main(["--procs", "64", "--iterations", "1"]) == 2
    assert "error" in capsys.readouterr().err
    assert main(["--iterations", "0"]) == 2
    assert "--iterations = 0" in capsys.readouterr().err


@pytest.mark.parametrize("strategy,ranks", [("megatron-vpp", 2), ("optimus", 2), ("dip", 4)])
def test_more_strategies_match_the_reference_over_three_iterations(strategy, ranks):
    # Interleaved chunks (vpp), encoder-first ordering (optimus) and DIP's per-batch plans with
    # separated partitioning and searched orders: 3 iterations of fresh batches each.
    first, jobs = plan_jobs(strategy, iterations=3, gpus=ranks, pipeline_size=ranks)
    assert first["pipeline_size"] == ranks and first["dp"] == 1
    runs = run_plans(weft.load_model("tiny-vlm"), jobs, timeout_s=30)
    ref = reference("tiny-vlm", jobs)
    for it, (got, want) in enumerate(zip(runs, ref)):
        assert got["loss"] == pytest.approx(want["loss"], rel=1e-5), (strategy, it)
        assert max_relative_error(got["grads"], want["grads"]) < 1e-5, (strategy, it)
