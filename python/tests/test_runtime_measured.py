"""Measured feedback from the runtime (weft.measured/v1): every executed compute stage with its plan
stage, shape (instances and tokens from the plan's tables) and measured seconds, every rank's
wall time; C++ reads the records back and ties them to their plans. A test-only slowdown of one
module's pass for one input shape shows up on exactly the matching stages."""
import collections
import json
import random
import statistics

import pytest

torch = pytest.importorskip("torch")

import weft  # noqa: E402
from weft.runtime.executor import run_plans  # noqa: E402
from weft.runtime.harness import plan_jobs  # noqa: E402
from weft.runtime.measured import measured_document, write_measured  # noqa: E402
from weft.runtime.plan import parse_plan  # noqa: E402


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    """tiny-vlm, megatron-1f1b on a pipeline of 2 ranks, 3 iterations of fresh batches whose
    samples have 1 to 3 images of 56 px (16 patch tokens each): the vision forward of a
    microbatch comes in several shapes."""
    path = tmp_path_factory.mktemp("measured") / "images.jsonl"
    rnd = random.Random(11)
    with open(path, "w") as f:
        for i in range(48):
            f.write(json.dumps({"id": i, "text_tokens": rnd.randint(8, 40),
                                "images": [{"w": 56, "h": 56}] * rnd.randint(1, 3)}) + "\n")
    _, jobs = plan_jobs("megatron-1f1b", iterations=3, data=str(path), gpus=2, pipeline_size=2)
    return jobs


@pytest.fixture(scope="module")
def baseline(planned):
    return run_plans(weft.load_model("tiny-vlm"), planned, timeout_s=30)


def _key(stage: dict) -> tuple:
    return stage["rank"], stage["action"]


def test_records_name_every_compute_action_with_the_plans_shape(planned, baseline, tmp_path):
    for job, run in zip(planned, baseline):
        m = run["measured"]
        plan = parse_plan(job["plan"])
        assert m["iteration"] == job["iteration"] and m["model"] == "tiny-vlm"
        assert m["strategy"] == "megatron-1f1b" and m["modules"] == list(plan.modules)
        # One stage per compute action of every rank, in (rank, action) order.
        want = [(r, a.index) for r, rank in enumerate(plan.ranks) for a in rank.actions
                if a.op.is_compute]
        assert [_key(s) for s in m["stages"]] == want
        for s in m["stages"]:
            a = plan.ranks[s["rank"]].actions[s["action"]]
            st = s["stage"]
            assert (st["module"], st["chunk"], st["mb"], st["sub"], st["pass"]) == \
                (a.stage.module, a.stage.chunk, a.stage.microbatch, a.stage.sub, a.op.value)
            assert tuple(s["instances"]) == a.instances
            assert (s["replica"], s["group"]) == (0, s["rank"])
            entry = plan.data.microbatches[(0, a.stage.microbatch)]
            assert s["tokens"] == sum(sum(i.tokens) for i in
                                      entry.instances[a.stage.module][slice(*a.instances)])
            assert s["measured_s"] > 0 and s["planned_s"] == a.raw["latency_s"]
        # Per rank the iteration's wall time holds its computes.
        assert [x["rank"] for x in m["ranks"]] == [0, 1]
        for x in m["ranks"]:
            assert x["wall_s"] >= sum(s["measured_s"] for s in m["stages"]
                                      if s["rank"] == x["rank"])
    # C++ reads the document back (hardened reader) and ties each record to its plan.
    path = tmp_path / "measured.json"
    doc = write_measured(str(path), [run["measured"] for run in baseline])
    assert doc == measured_document([run["measured"] for run in baseline])
    text = path.read_text()
    canonical = weft.validate_measured(text, [json.dumps(job["plan"]) for job in planned])
    assert json.loads(canonical) == json.loads(text)
    bad = json.loads(text)
    bad["iterations"][1]["stages"][0]["tokens"] += 1
    with pytest.raises(ValueError, match=r"^iterations\[1\]: measured rank 0 action \d+ "):
        weft.validate_measured(json.dumps(bad), [json.dumps(job["plan"]) for job in planned])
    bad["iterations"][1]["stages"][0]["measured_s"] = -1.0
    with pytest.raises(ValueError, match=r"measured_s = -1.0; must be finite and >= 0"):
        weft.validate_measured(json.dumps(bad))


def _vision_forward_tokens(jobs) -> collections.Counter:
    """How often each vision-forward shape (tokens) occurs in the plans."""
    counts = collections.Counter()
    for job in jobs:
        plan = parse_plan(job["plan"])
        for r, rank in enumerate(plan.ranks):
            for a in rank.actions:
                if a.op.value == "forward" and plan.modules[a.stage.module] == "vision":
                    counts[plan.data.instance_tokens(0, a.stage.microbatch, a.stage.module,
                                                     *a.instances)] += 1
    return counts


def test_an_injected_slowdown_shows_on_the_matching_stages_only(planned, baseline):
    counts = _vision_forward_tokens(planned)
    assert len(counts) >= 2, counts  # several shapes: some stages match, some do not
    tokens = counts.most_common(1)[0][0]
    factor = 6.0
    slowed = run_plans(weft.load_model("tiny-vlm"), planned, timeout_s=30,
                       inject_slowdown={"module": "vision", "pass": "forward",
                                        "factor": factor, "tokens": tokens})
    vision = planned[0]["plan"]["modules"].index("vision")
    ratios = {"match": [], "same module, other shape": [], "other": []}
    for base, slow in zip(baseline, slowed):
        by_key = {_key(s): s for s in base["measured"]["stages"]}
        for s in slow["measured"]["stages"]:
            b = by_key[_key(s)]
            assert (s["stage"], s["tokens"]) == (b["stage"], b["tokens"])
            is_vision_forward = s["stage"]["module"] == vision and s["stage"]["pass"] == "forward"
            kind = ("match" if is_vision_forward and s["tokens"] == tokens else
                    "same module, other shape" if is_vision_forward else "other")
            ratios[kind].append(s["measured_s"] / b["measured_s"])
    assert len(ratios["match"]) == counts[tokens]
    assert ratios["same module, other shape"] and ratios["other"]
    medians = {k: statistics.median(v) for k, v in ratios.items()}
    # The sleep makes a matching stage take `factor` times its own compute; the others only move
    # by the machine's noise. The baseline and the slowed run are separate runs on a shared
    # machine, so every stage may move by a common load factor: compare against the unrelated
    # stages' median rather than against 1.
    load = medians["other"]
    assert medians["match"] / load > factor / 2, medians
    assert medians["same module, other shape"] / load < 2.0, medians


def test_inject_slowdown_is_checked_before_any_worker_starts(planned):
    model = weft.load_model("tiny-vlm")
    with pytest.raises(ValueError, match=r"inject_slowdown: module = 'vit'; must be one of "
                       r"vision, projector, llm"):
        run_plans(model, planned[:1], inject_slowdown={"module": "vit", "factor": 3.0})
    with pytest.raises(ValueError, match=r"inject_slowdown: factor = 0.5; must be in \[1, 1000\]"):
        run_plans(model, planned[:1], inject_slowdown={"module": "vision", "factor": 0.5})
    with pytest.raises(ValueError, match=r"inject_slowdown: pass = 'fwd'"):
        run_plans(model, planned[:1], inject_slowdown={"module": "vision", "pass": "fwd",
                                                       "factor": 2.0})
