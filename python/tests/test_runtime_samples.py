"""The plan's recorded sample ids reproduce the single-process reference batch: per microbatch,
the samples of the LLM's compute actions are the batch samples of the replica's microbatch, their
union is the replica's share of the batch, and the reference runs exactly those samples."""
import pytest

torch = pytest.importorskip("torch")

import weft  # noqa: E402
from weft.runtime.executor import run_plans  # noqa: E402
from weft.runtime.harness import max_relative_error, plan_jobs, reference  # noqa: E402
from weft.runtime.plan import parse_plan  # noqa: E402


def _llm(model: dict) -> int:
    return next(i for i, m in enumerate(model["modules"]) if m["kind"] == "llm")


def _replica_samples(job: dict) -> list[list[int]]:
    """Per microbatch of the job (the replica's sequences, as the planner reports them in the
    weft.plan summary), its batch samples, ascending."""
    seqs = job["summary"]["batch"]["sequences"]
    return [sorted(si for q in mb for si in seqs[q]["sample_indices"])
            for mb in job["summary"]["microbatches"]]


def _plan_samples(job: dict, module: int) -> list[list[int]]:
    per_mb = parse_plan(job["plan"]).compute_samples(module)
    assert sorted(per_mb) == list(range(len(job["summary"]["microbatches"])))
    return [sorted(per_mb[mb]) for mb in sorted(per_mb)]


@pytest.mark.parametrize("strategy,gpus,pp", [("megatron-1f1b", 2, 2), ("dip", 4, 4),
                                              ("megatron-1f1b", 4, 2)])
def test_plan_sample_ids_are_the_replicas_batch(strategy, gpus, pp):
    first, jobs = plan_jobs(strategy, iterations=2, gpus=gpus, pipeline_size=pp)
    model = weft.load_model("tiny-vlm")
    llm = _llm(model)
    for job in jobs:
        got = _plan_samples(job, llm)
        assert got == _replica_samples(job), strategy
        # The plan's microbatch table ships the same: each microbatch's sequences' samples.
        data = parse_plan(job["plan"]).data
        assert [sorted(si for q in data.microbatches[k].sequences for si in
                       data.sequences[q].samples) for k in sorted(data.microbatches)] == got
        union = {si for mb in got for si in mb}
        packed = {si for q in job["summary"]["batch"]["sequences"] for si in q["sample_indices"]}
        if first["dp"] == 1:
            assert union == packed  # one replica: the whole (packed) batch
        else:  # replica 0 of dp: its share, no sample twice
            assert first["dp"] == 2 and 0 < len(union) < len(packed)
            assert sum(len(mb) for mb in got) == len(union)
        # Every compute of every module names samples of its microbatch only.
        plan = parse_plan(job["plan"])
        for (module, mb, sub), samples in plan.replica_samples[0].items():
            assert set(samples) <= set(got[mb]), (module, mb, sub)
    # The reference runs exactly the plan's samples.
    ref = reference("tiny-vlm", jobs)
    for job, want in zip(jobs, ref):
        assert want["samples"] == _plan_samples(job, llm)


def test_runtime_and_reference_run_the_plans_samples_with_sub_microbatches(valm_data):
    # DIP slices encoders, projectors and the LLM into sub-microbatches; every stage's view is
    # the plan's instances, checked against the plan's samples (a mismatch fails the rank).
    _, jobs = plan_jobs("dip", model="tiny-valm", iterations=1, data=valm_data, gpus=4,
                        pipeline_size=4)
    plan = parse_plan(jobs[0]["plan"])
    assert any(sub > 0 for (_, _, sub) in plan.replica_instances[0]), "no sub-microbatches"
    runs = run_plans(weft.load_model("tiny-valm"), jobs, timeout_s=30)
    ref = reference("tiny-valm", jobs)
    assert ref[0]["samples"] == _plan_samples(jobs[0], _llm(weft.load_model("tiny-valm")))
    assert runs[0]["loss"] == pytest.approx(ref[0]["loss"], rel=1e-5)
    assert max_relative_error(runs[0]["grads"], ref[0]["grads"]) < 1e-5


def test_a_plan_whose_samples_disagree_with_the_batch_fails_naming_the_stage():
    _, jobs = plan_jobs("megatron-1f1b", iterations=1, gpus=1, pipeline_size=1)
    plan = jobs[0]["plan"]
    for a in plan["ranks"][0]["actions"]:
        if a["op"] == "forward" and a["stage"]["mb"] == 1:
            a["samples"] = [s + 1000 for s in a["samples"]]
    from weft.runtime.executor import PlanExecutionError, RankExecutor
    ex = RankExecutor(0, weft.load_model("tiny-vlm"), 1, 0.1, 5.0)
    with pytest.raises(PlanExecutionError, match=r"rank 0 action \d+ \(forward m0 c0 mb1\): the "
                       r"plan gives m0 mb1.0 samples \[100\d"):
        ex.run_iteration(plan)


def test_a_buffer_whose_rows_disagree_with_the_batch_fails_naming_it():
    # The vision -> projector buffer of microbatch 0 claims one row fewer than its samples have.
    _, jobs = plan_jobs("megatron-1f1b", iterations=1, gpus=1, pipeline_size=1)
    plan = jobs[0]["plan"]
    buf = next(b for b in plan["ranks"][0]["buffers"]
               if b["producer"]["module"] == 0 and b["consumer"]["module"] == 1
               and b["producer"]["mb"] == 0)
    assert buf["rows"] > 0 and buf["samples"]
    buf["rows"] -= 1
    from weft.runtime.executor import PlanExecutionError, RankExecutor
    ex = RankExecutor(0, weft.load_model("tiny-vlm"), 1, 0.1, 5.0)
    with pytest.raises(PlanExecutionError, match=rf"\(forward m0 c0 mb0\): buf {buf['id']} "
                       rf"carries {buf['rows']} rows of m0 mb0.0 \(samples .*\); the batch "
                       rf"gives {buf['rows'] + 1}"):
        ex.run_iteration(plan)
