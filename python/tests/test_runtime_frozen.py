"""Frozen modules follow the spec in the runtime: a frozen module's parameters get no gradient
and no SGD step; weft plans no backward for a frozen module with nothing trainable upstream and an
input-gradient backward for one with a trainable module upstream (Cornstarch's frozen-status
rule); executing those plans on 4 worker processes equals the single-process reference."""
import os

import pytest

torch = pytest.importorskip("torch")

from weft.runtime.executor import run_plans  # noqa: E402
from weft.runtime.harness import max_relative_error, plan_jobs, reference  # noqa: E402

import weft  # noqa: E402

DATA_DIR = os.path.join(os.path.dirname(__file__), "data")


def _backward_modules(jobs) -> set[int]:
    return {a["stage"]["module"] for job in jobs for r in job["plan"]["ranks"]
            for a in r["actions"] if a["op"].startswith("backward")}


def _check(model_path: str, jobs: list, first: dict, trained: set[str], frozen: set[str]):
    model = weft.load_model(model_path)
    assert {m["name"] for m in model["modules"] if m["frozen"]} == frozen
    assert len(jobs[0]["plan"]["ranks"]) == first["pipeline_size"]
    runs = run_plans(model, jobs, timeout_s=30)
    ref = reference(model_path, jobs)
    for got, want in zip(runs, ref):
        assert got["loss"] == pytest.approx(want["loss"], rel=1e-5)
        grads = {k: torch.as_tensor(v) for k, v in got["grads"].items()}
        assert max_relative_error(grads, want["grads"]) < 1e-5
        for name, g in grads.items():
            module = name.split(".")[0]
            if module in frozen:
                assert float(g.abs().max()) == 0.0, name
        for module in trained:  # every trained module has a nonzero gradient somewhere
            assert any(float(g.abs().max()) > 0 for n, g in grads.items()
                       if n.split(".")[0] == module), module
    # Weights after the last SGD step: the reference's; frozen ones never moved.
    assert max_relative_error(runs[-1]["params"], ref[-1]["params"]) < 1e-5
    return runs


@pytest.mark.parametrize("strategy", ["megatron-1f1b", "zb-h1"])
def test_frozen_vit_and_lm_train_only_the_projector(strategy):
    # zb-h1 splits backward into I and W: the frozen LM gets backward_input only.
    path = os.path.join(DATA_DIR, "tiny-vlm-frozen.yaml")
    first, jobs = plan_jobs(strategy, path, iterations=3, data="coco-llava", gpus=4,
                            pipeline_size=4)
    model = weft.load_model(path)
    index = {m["name"]: i for i, m in enumerate(model["modules"])}
    # No backward for the ViT (nothing trainable upstream); the frozen LM keeps its
    # input-gradient backward so the projector gets its gradient.
    assert index["vision"] not in _backward_modules(jobs)
    assert {index["projector"], index["llm"]} <= _backward_modules(jobs)
    if strategy == "zb-h1":
        weight = {a["stage"]["module"] for job in jobs for r in job["plan"]["ranks"]
                  for a in r["actions"] if a["op"] == "backward_weight"}
        assert index["projector"] in weight and index["llm"] not in weight
    _check(path, jobs, first, trained={"projector"}, frozen={"vision", "llm"})


@pytest.mark.parametrize("strategy", ["megatron-1f1b", "dip"])
def test_frozen_vision_branch_of_a_fan_in(valm_data, strategy):
    # The LM's first chunk takes the vision projector's and the audio projector's outputs but
    # sends a gradient to the audio projector only: gradients go to the producer the buffer names.
    path = os.path.join(DATA_DIR, "tiny-valm-frozen-vision.yaml")
    kwargs = {"budget_s": 0.3} if strategy == "dip" else {}
    first, jobs = plan_jobs(strategy, path, iterations=2, data=valm_data, gpus=4,
                            pipeline_size=4, **kwargs)
    model = weft.load_model(path)
    index = {m["name"]: i for i, m in enumerate(model["modules"])}
    back = _backward_modules(jobs)
    assert index["vision"] not in back and index["vision_projector"] not in back
    assert {index["audio"], index["audio_projector"], index["llm"]} <= back
    _check(path, jobs, first, trained={"audio", "audio_projector", "llm"},
           frozen={"vision", "vision_projector"})
