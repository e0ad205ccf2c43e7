"""Measured Chrome traces of runtime iterations (python -m weft.train --trace)."""
from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("torch")

from weft import train  # noqa: E402
from weft.runtime.trace import PASS_SHORT, build_trace  # noqa: E402


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> tuple[dict, dict]:
    path = tmp_path_factory.mktemp("trace") / "measured.json"
    rc = train.main(["--model", "tiny-vlm", "--strategy", "megatron-1f1b", "--procs", "2",
                     "--iterations", "1", "--offline", "--trace", str(path)])
    assert rc == 0
    import weft
    plan = json.loads(weft.plan("megatron-1f1b", "tiny-vlm", data="coco-llava", gpus=2,
                                pipeline_size=2)["plan_json"])
    with open(path, encoding="utf-8") as f:
        return json.load(f), plan


def test_one_process_and_compute_track_per_rank(measured):
    trace, plan = measured
    assert trace["otherData"]["layout"] == "weft-trace-v1"
    meta = [e for e in trace["traceEvents"] if e["ph"] == "M"]
    procs = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
    # Same process naming as the simulator: pid = group + 1, named by the group label.
    assert procs == {r["rank"] + 1: r["label"] for r in plan["ranks"]}
    compute = {e["pid"] for e in meta if e["name"] == "thread_name" and e["tid"] == 1
               and e["args"]["name"] == "compute"}
    assert compute == set(procs)
    sends = [e for e in meta if e["name"] == "thread_name" and e["tid"] >= 1000]
    assert sends and all(re.fullmatch(r"send \u2192 pp\d+", e["args"]["name"]) for e in sends)


def test_every_compute_action_appears_with_its_simulator_name(measured):
    trace, plan = measured
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["tid"] == 1]
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in slices)
    for r in plan["ranks"]:
        want = sorted(f"{plan['modules'][a['stage']['module']]} {PASS_SHORT[a['op']]}"
                      for a in r["actions"] if a["op"] in PASS_SHORT)
        got = sorted(e["name"] for e in slices if e["pid"] == r["rank"] + 1)
        assert got == want and want
    transfers = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["tid"] >= 1000]
    assert transfers and all(re.fullmatch(r"send \w+ (F|B|Bi|W) mb\d+(\.\d+)?", e["name"])
                             for e in transfers)


def test_build_trace_rejects_nothing_to_trace():
    with pytest.raises(ValueError):
        build_trace([])
