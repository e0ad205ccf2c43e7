"""Runtime with data parallelism: world plans (every rank of every DP replica) executed on one
worker process per rank, gradients all-reduced over each all_reduce_grads' ranks, equal to the
single-process reference over the whole global batch (loss, every gradient, weights after the
SGD step)."""
import copy
import json
import pathlib
import re

import pytest

torch = pytest.importorskip("torch")

from weft.runtime.executor import PlanExecutionError, RankExecutor, run_plans  # noqa: E402
from weft.runtime.harness import max_relative_error, plan_jobs, reference  # noqa: E402
from weft.runtime.plan import parse_plan  # noqa: E402

import weft  # noqa: E402

PLACEMENTS = pathlib.Path(__file__).resolve().parents[2] / "presets" / "placements"


def test_world_plan_names_every_rank_its_replica_chunks_and_reduce_set():
    r = weft.plan("megatron-1f1b", "tiny-vlm", data="coco-llava", gpus=4, pipeline_size=2,
                  world=True)
    assert r["world"] and r["pipeline_size"] == 2 and r["dp"] == 2 and r["num_ranks"] == 4
    plan = json.loads(r["plan_json"])
    assert plan["num_ranks"] == 4 and plan["num_replicas"] == 1
    data = plan["data"]
    for rank, entry in enumerate(data["ranks"]):
        q, p = divmod(rank, 2)
        assert (entry["replica"], entry["group"]) == (q, p)
        assert [(c["module"], c["chunk"], c["first_layer"], c["num_layers"])
                for c in entry["chunks"]] == \
            [(c["module"], c["chunk"], c["first_layer"], c["num_layers"])
             for c in r["chunks"] if c["group"] == p]
        reduces = [a for a in plan["ranks"][rank]["actions"] if a["op"] == "all_reduce_grads"]
        assert reduces and all(a["ranks"] == [p, p + 2] and a["dp"] == 2 for a in reduces)
    # The replicas' microbatches are the iteration's, each sequence in exactly one replica.
    table = data["microbatches"]
    assert {m["replica"] for m in table} == {0, 1}
    assert [m["sequences"] for m in table] == r["microbatches"]
    seqs = [q for m in table for q in m["sequences"]]
    assert sorted(seqs) == list(range(len(data["sequences"]))) == \
        list(range(len(r["batch"]["sequences"])))
    # world=False keeps one replica's plan (2 ranks) with replica 0's microbatches only.
    one = weft.plan("megatron-1f1b", "tiny-vlm", data="coco-llava", gpus=4, pipeline_size=2)
    assert not one["world"] and one["num_ranks"] == 2
    one_data = json.loads(one["plan_json"])["data"]
    assert [x["replica"] for x in one_data["ranks"]] == [0, 0]
    assert one_data["microbatches"] == [m for m in table if m["replica"] == 0]
    assert one["microbatches"] == [m["sequences"] for m in one_data["microbatches"]]


@pytest.mark.parametrize("strategy", ["megatron-1f1b", "dip"])
def test_pp2_dp2_matches_the_single_process_reference(strategy):
    # tiny-vlm with the LLM (and its encoder) at pp 2 x dp 2: 4 processes, 3 iterations of fresh
    # global batches. Each replica runs its half of the batch; the per-module all-reduce (SUM)
    # over {pp rank p of both replicas} gives the gradient of the global batch's mean loss.
    first, jobs = plan_jobs(strategy, iterations=3, gpus=4, pipeline_size=2, world=True,
                            budget_s=0.2)
    assert first["num_ranks"] == 4 and first["dp"] == 2
    runs = run_plans(weft.load_model("tiny-vlm"), jobs, timeout_s=30)
    ref = reference("tiny-vlm", jobs)
    assert len(runs) == 3
    for it, (got, want) in enumerate(zip(runs, ref)):
        assert got["loss"] == pytest.approx(want["loss"], rel=1e-5), it
        assert len(got["grads"]) == len(want["grads"]) > 10
        assert max_relative_error(got["grads"], want["grads"]) <= 1e-5, it
        assert got["replica_max_rel_diff"] == 0.0  # both replicas hold the same sums
    assert max_relative_error(runs[-1]["params"], ref[-1]["params"]) <= 1e-5
    # Different batches each iteration; the replicas ran disjoint halves of each.
    assert len({json.dumps(job["summary"]["batch"]["samples"]) for job in jobs}) == 3
    plan = parse_plan(jobs[0]["plan"])
    assert plan.rank_replica == (0, 0, 1, 1)
    samples = [set().union(*plan.compute_samples(2, q).values()) for q in (0, 1)]
    assert samples[0] and samples[1] and not samples[0] & samples[1]


def test_a_strategy_with_its_own_assignment_matches_the_reference():
    # megatron-1f1b-lpt (the assignment seam's example: sequences dealt by LPT of LLM tokens over
    # the DP x microbatch buckets, not round-robin) at pp 2 x dp 2 on mixed data.
    kw = dict(data="mixed", gpus=4, pipeline_size=2, world=True, sequences_per_batch=12)
    lpt = weft.plan("megatron-1f1b-lpt", "tiny-vlm", **kw)
    rr = weft.plan("megatron-1f1b", "tiny-vlm", **kw)
    assert lpt["microbatches"] != rr["microbatches"]
    assert sorted(s for mb in lpt["microbatches"] for s in mb) == list(range(12))
    _, jobs = plan_jobs("megatron-1f1b-lpt", iterations=2, **kw)
    runs = run_plans(weft.load_model("tiny-vlm"), jobs, timeout_s=30)
    ref = reference("tiny-vlm", jobs)
    for it, (got, want) in enumerate(zip(runs, ref)):
        assert got["loss"] == pytest.approx(want["loss"], rel=1e-5), it
        assert max_relative_error(got["grads"], want["grads"]) <= 1e-5, it
    assert max_relative_error(runs[-1]["params"], ref[-1]["params"]) <= 1e-5


def _pp1_dp2_job():
    first, jobs = plan_jobs("megatron-1f1b", iterations=1, gpus=2, pipeline_size=1, world=True)
    assert first["num_ranks"] == 2 and first["dp"] == 2
    return first, jobs


def test_a_collective_a_rank_never_joins_times_out_naming_module_and_ranks():
    # Rank 1 skips its all-reduce of the vision encoder (module 0): rank 0 waits in module 0's,
    # rank 1 in the projector's (module 1), each on its own (module, ranks) group, and each
    # timeout names the module, the ranks and who never arrived.
    first, jobs = _pp1_dp2_job()
    plan = jobs[0]["plan"]
    acts = plan["ranks"][1]["actions"]
    del acts[next(i for i, a in enumerate(acts)
                  if a["op"] == "all_reduce_grads" and a["module"] == 0)]
    with pytest.raises(PlanExecutionError) as e:
        run_plans(weft.load_model("tiny-vlm"), jobs, timeout_s=3)
    msg = str(e.value)
    assert ("rank 0 action" in msg and "(all_reduce_grads m0 dp 2 ranks [0, 1]): " in msg
            and "the all-reduce of module 0 (vision) over ranks [0, 1]: rank 1 never joined"
            in msg), msg
    assert ("rank 1 action" in msg and "(all_reduce_grads m1 dp 2 ranks [0, 1]): " in msg
            and "the all-reduce of module 1 (projector) over ranks [0, 1]: rank 0 never joined"
            in msg), msg
    # The first rank to time out waited the full 3 s; the other's wait may end sooner ("failed
    # after"), when the first one's failure closes their connection. Which comes first depends
    # on when each began to wait.
    assert re.search(r"\(all_reduce_grads m[01] dp 2 ranks \[0, 1\]\): timed out after 3 s: ",
                     msg), msg


def test_reduce_set_members_must_hold_the_same_layers():
    # A chunk table where the two members of the LLM's reduce set hold different layers is
    # refused before any collective runs.
    _, jobs = _pp1_dp2_job()
    plan = copy.deepcopy(jobs[0]["plan"])
    llm = plan["modules"].index("llm")
    next(c for c in plan["data"]["ranks"][1]["chunks"] if c["module"] == llm)["num_layers"] -= 1
    ex = RankExecutor(0, weft.load_model("tiny-vlm"), 1, 0.1, 5.0)
    with pytest.raises(PlanExecutionError,
                       match=r"all_reduce_grads of module 2 \(llm\) over ranks \[0, 1\]: rank 0 "
                       r"holds layers \[0, 4\), rank 1 \[0, 3\) \(members must hold the same "
                       r"layers\)"):
        ex.ensure_groups(parse_plan(plan))


def test_plan_tables_are_checked_when_the_plan_is_loaded():
    _, jobs = _pp1_dp2_job()
    bad = copy.deepcopy(jobs[0]["plan"])
    bad["data"]["ranks"].pop()
    with pytest.raises(ValueError, match=r"plan: data.ranks has 1 entries; the plan has 2 ranks"):
        parse_plan(bad)
    bad = copy.deepcopy(jobs[0]["plan"])
    bad["data"]["ranks"][1]["replica"] = 5
    with pytest.raises(ValueError, match=r"rank 1 action \d+: microbatch 0 of replica 5 is not "
                       r"in data.microbatches"):
        parse_plan(bad)
    bad = copy.deepcopy(jobs[0]["plan"])
    a = next(a for a in bad["ranks"][1]["actions"] if a["op"] == "all_reduce_grads")
    a["ranks"] = [0]
    with pytest.raises(ValueError, match=r"rank 1 action \d+: all_reduce_grads ranks = \[0\]; "
                       r"must be 2 ascending ranks < 2, rank 1 included"):
        parse_plan(bad)
    bad = copy.deepcopy(jobs[0]["plan"])
    bad["schema"] = "weft.plan/v2"
    with pytest.raises(ValueError, match=r"plan: weft.plan/v2 is no longer read .* regenerate"):
        parse_plan(bad)


def test_train_cli_runs_data_parallel(capsys):
    from weft.train import main
    assert main(["--model", "tiny-vlm", "--strategy", "megatron-1f1b", "--procs", "4",
                 "--iterations", "3", "--check"]) == 0
    out = capsys.readouterr().out
    assert "4 ranks (pp 2 x dp 2)" in out and "PASS" in out
    assert main(["--procs", "3", "--iterations", "1"]) == 2
    assert "--procs 3: tiny-vlm plans 2 pipeline ranks x DP 1 = 2 processes" in \
        capsys.readouterr().err


def test_planner_service_serves_world_plans():
    # What online planning hands the workers at dp 2: the same world plan weft.plan gives.
    service = weft.PlannerService("megatron-1f1b", "tiny-vlm", data="coco-llava", gpus=4,
                                  world=True)
    service.submit(0)
    got = service.get(0, 60.0)
    want = weft.plan("megatron-1f1b", "tiny-vlm", data="coco-llava", gpus=4, world=True)
    assert got["world"] and got["num_ranks"] == 4
    assert json.loads(got["plan_json"]) == json.loads(want["plan_json"])
    assert got["microbatches"] == want["microbatches"]


def _run_placement(model: str, placement: str, data: str):
    """3 iterations of a user placement's world plan (strategy manual) on 4 processes, and the
    single-process reference."""
    first, jobs = plan_jobs("manual", model, iterations=3, data=data, gpus=4,
                            placement=str(PLACEMENTS / placement), world=True)
    assert first["num_ranks"] == 4
    runs = run_plans(weft.load_model(model), jobs, timeout_s=30)
    ref = reference(model, jobs)
    for it, (got, want) in enumerate(zip(runs, ref)):
        assert got["loss"] == pytest.approx(want["loss"], rel=1e-5), it
        assert max_relative_error(got["grads"], want["grads"]) <= 1e-5, it
        assert got["replica_max_rel_diff"] == 0.0
    assert max_relative_error(runs[-1]["params"], ref[-1]["params"]) <= 1e-5
    return first, jobs


def _senders_into(plan: dict, rank: int) -> set[int]:
    """Ranks that send rank `rank` forward activations."""
    return {b["producer"]["rank"] for b in plan["ranks"][rank]["buffers"]
            if b["producer"]["pass"] == "forward" and b["producer"]["rank"] != rank}


def test_heterogeneous_dp_placement_matches_the_reference():
    # Issue 12 item 5b: the vision encoder + projector at dp 2 on ranks 0-1, the LLM at pp 2 x
    # dp 1 on ranks 2-3 (presets/placements/tiny-vlm-hetero-dp.yaml): one unfolded replica, each
    # microbatch's images split over both encoder replicas and gathered into the LLM's first
    # stage; the encoder's gradients all-reduced over ranks [0, 1].
    _, jobs = _run_placement("tiny-vlm", "tiny-vlm-hetero-dp.yaml", "coco-llava")
    plan = jobs[0]["plan"]
    assert [x["replica"] for x in plan["data"]["ranks"]] == [0, 0, 0, 0]
    # The encoder's two module replicas on ranks 0 and 1 hold the same layers.
    assert [[c["module_replica"] for c in plan["data"]["ranks"][r]["chunks"]] for r in (0, 1)] == \
        [[0, 0], [1, 1]]
    assert _senders_into(plan, 2) == {0, 1}
    reduces = {(a["module"], tuple(a["ranks"])) for r in plan["ranks"] for a in r["actions"]
               if a["op"] == "all_reduce_grads"}
    assert (0, (0, 1)) in reduces and (1, (0, 1)) in reduces


def test_modality_parallel_placement_matches_the_reference(valm_data):
    # Issue 12 item 5c: tiny-valm with the vision branch on rank 0, the audio branch on rank 1,
    # the LLM at pp 2 on ranks 2-3 (presets/placements/tiny-valm-modality-parallel.yaml).
    _, jobs = _run_placement("tiny-valm", "tiny-valm-modality-parallel.yaml", valm_data)
    assert _senders_into(jobs[0]["plan"], 2) == {0, 1}


@pytest.mark.parametrize("strategy", ["cornstarch", "cornstarch-frozen-unaware"])
def test_cornstarch_plans_execute_with_gradient_equivalence(strategy, valm_data):
    # Issue 13: Cornstarch's modality-parallel plans (each encoder on groups of its own, stage
    # counts from Algorithm 1) on tiny-valm, 4 GPUs, executed from the world plan.
    first, jobs = plan_jobs(strategy, "tiny-valm", iterations=3, data=valm_data, gpus=4,
                            pipeline_size=4, world=True)
    n = first["num_ranks"]
    assert 2 <= n <= 4
    runs = run_plans(weft.load_model("tiny-valm"), jobs, timeout_s=30)
    ref = reference("tiny-valm", jobs)
    for it, (got, want) in enumerate(zip(runs, ref)):
        assert got["loss"] == pytest.approx(want["loss"], rel=1e-5), it
        assert max_relative_error(got["grads"], want["grads"]) <= 1e-5, it
    assert max_relative_error(runs[-1]["params"], ref[-1]["params"]) <= 1e-5
