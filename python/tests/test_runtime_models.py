"""Runtime on tiny-valm (ViT + Whisper-style audio encoder fan-in into the LM) and tiny-t2v (LM
text states conditioning a DiT): executing weft plans on 4 worker processes equals a
single-process reference (loss, every gradient, weights after the SGD step)."""
import json
import random

import pytest

torch = pytest.importorskip("torch")

from weft.runtime.executor import run_plans  # noqa: E402
from weft.runtime.harness import max_relative_error, plan_jobs, reference  # noqa: E402
from weft.runtime.model import MicrobatchData  # noqa: E402
from weft.runtime.plan import parse_plan  # noqa: E402

import weft  # noqa: E402


def test_valm_token_counts_match_weft_workload(valm_data):
    # The runtime's samples have exactly the tokens weft planned for, read from the plan's data
    # tables: audio windows padded to max_source_positions for the encoder, unpadded for the
    # projector and the LM; LM sequences = images + audio + text.
    r = weft.plan("megatron-1f1b", "tiny-valm", data=valm_data, iteration=0, seed=1, gpus=4,
                  pipeline_size=4)
    model = weft.load_model("tiny-valm")
    plan = parse_plan(json.loads(r["plan_json"]))
    batch = r["batch"]
    assert [list(plan.data.microbatches[k].sequences) for k in sorted(plan.data.microbatches)] \
        == r["microbatches"]
    for key in sorted(plan.data.microbatches):
        seqs = list(plan.data.microbatches[key].sequences)
        mb = MicrobatchData(model, plan, plan.data.microbatches[key], 1, 1.0)
        audio = weft.module_workload("tiny-valm", "audio", batch, seqs)
        assert len(mb.audio_features) == sum(sum(i) for i in audio) > 0
        assert mb.audio_mask.shape == (len(mb.audio_features),) * 2
        assert len(mb.audio_keep) == sum(sum(i) for i in weft.module_workload(
            "tiny-valm", "audio_projector", batch, seqs)) < len(mb.audio_features)
        llm = weft.module_workload("tiny-valm", "llm", batch, seqs)
        assert sum(mb.llm_segments) == sum(sum(i) for i in llm)
        assert len(mb.pixels) == sum(sum(i) for i in weft.module_workload(
            "tiny-valm", "vision", batch, seqs))


def test_valm_plan_execution_matches_single_process_reference(valm_data):
    # megatron-1f1b and zb-h1 plans, 3 iterations each (different batches), on one spawn of 4
    # workers; the reference runs the same batches with the same SGD steps.
    jobs = []
    for strategy in ["megatron-1f1b", "zb-h1"]:
        f, j = plan_jobs(strategy, "tiny-valm", iterations=3, data=valm_data, gpus=4, pipeline_size=4)
        assert f["pipeline_size"] == 4
        jobs += j
    assert all(job["plan"]["data"]["ranks"] == jobs[0]["plan"]["data"]["ranks"] for job in jobs)
    runs = run_plans(weft.load_model("tiny-valm"), jobs, timeout_s=30)
    ref = reference("tiny-valm", jobs)
    want_params = ref[-1]["params"]
    names = set()
    for job, got, want in zip(jobs, runs, ref):
        name = job["summary"]["strategy"]
        assert got["loss"] == pytest.approx(want["loss"], rel=1e-5), name
        got_grads = {k: torch.as_tensor(v) for k, v in got["grads"].items()}
        assert max_relative_error(got_grads, want["grads"]) < 1e-5, name
        names |= set(got_grads)
    # Both encoders, both projectors and the LM have parameters with gradients.
    for prefix in ["vision.", "audio.", "vision_projector.", "audio_projector.", "llm."]:
        assert any(n.startswith(prefix) for n in names), prefix
    # Every parameter after the last SGD step equals the reference's.
    assert max_relative_error(runs[-1]["params"], want_params) < 1e-5
    # Iterations see different batches; the SGD step is the reference's: the loss of every
    # iteration (computed with the weights after all earlier steps) matches above.
    assert len({round(r["loss"], 6) for r in runs}) == len(runs)


def test_valm_dip_sub_microbatches_match_the_reference(valm_data):
    # DIP slices each module's instances into sub-microbatches (images, audio windows, clips,
    # sequences); the stage graph routes each slice's rows to the consumer slices that hold its
    # samples, and the runtime executes exactly that routing: same loss, gradients and weights.
    _, jobs = plan_jobs("dip", "tiny-valm", iterations=2, data=valm_data, gpus=4,
                        pipeline_size=4, budget_s=0.3)
    subs = {(a["stage"]["module"], a["stage"].get("sub", 0)) for job in jobs
            for r in job["plan"]["ranks"] for a in r["actions"] if a["op"] == "forward"}
    assert {m for m, s in subs if s > 0} >= {0, 1}, subs  # both encoders are sliced
    runs = run_plans(weft.load_model("tiny-valm"), jobs, timeout_s=30)
    ref = reference("tiny-valm", jobs)
    for got, want in zip(runs, ref):
        assert got["loss"] == pytest.approx(want["loss"], rel=1e-5)
        assert max_relative_error({k: torch.as_tensor(v) for k, v in got["grads"].items()},
                                  want["grads"]) < 1e-5
    assert max_relative_error(runs[-1]["params"], ref[-1]["params"]) < 1e-5


def _t2v_data(path) -> str:
    """8 samples: 6 with one small clip (64x64 px or 128x64 px, 0.25-1 s: 16-128 latent tokens),
    2 text-only (their text states go nowhere: the LLM routes the DiT only samples with video)."""
    rnd = random.Random(5)
    with open(path, "w") as f:
        for i in range(8):
            videos = [] if i in (2, 5) else [{"duration_s": rnd.choice([0.25, 0.5, 0.75, 1.0]),
                                             "w": rnd.choice([64, 128]), "h": 64}]
            f.write(json.dumps({"id": i, "text_tokens": rnd.randint(6, 20), "videos": videos})
                    + "\n")
    return str(path)


@pytest.mark.parametrize("strategy", ["megatron-1f1b", "dip"])
def test_t2v_plan_execution_matches_single_process_reference(tmp_path, strategy):
    # tiny-t2v: the LLM's text states condition the DiT by cross-attention; the states travel
    # with the DiT's activations down its chunks (and their gradient back to the LLM). 4 ranks,
    # 2 iterations of different batches.
    data = _t2v_data(tmp_path / "t2v.jsonl")
    _, jobs = plan_jobs(strategy, "tiny-t2v", iterations=2, data=data, gpus=4,
                        pipeline_size=4, budget_s=0.3)
    model = weft.load_model("tiny-t2v")
    # The DiT's latent tokens per video are the plan's (weft's 16 fps / 16 s rule, in C++ only).
    plan = parse_plan(jobs[0]["plan"])
    mb = MicrobatchData(model, plan, plan.data.microbatches[(0, 0)], 1, 1.0)
    assert [len(v[2]) for v in mb.videos] == [
        sum(i) for i in weft.module_workload("tiny-t2v", "dit", jobs[0]["summary"]["batch"],
                                             jobs[0]["summary"]["microbatches"][0])]
    runs = run_plans(model, jobs, timeout_s=30)
    ref = reference("tiny-t2v", jobs)
    names = set()
    for got, want in zip(runs, ref):
        assert got["loss"] == pytest.approx(want["loss"], rel=1e-5)
        grads = {k: torch.as_tensor(v) for k, v in got["grads"].items()}
        assert max_relative_error(grads, want["grads"]) < 1e-5
        names |= {n for n, g in grads.items() if g.abs().max() > 0}
    # The DiT's loss trains the LLM through the cross-attention.
    assert any(n.startswith("llm.") for n in names) and any(n.startswith("dit.") for n in names)
    assert max_relative_error(runs[-1]["params"], ref[-1]["params"]) < 1e-5
