"""weft.compare and weft.tune (issue 34 item 18, issue 33): the CLI's comparison and tuner as
calls, with the CLI's defaults (the model's data profile, a deterministic work budget)."""
import pytest

import weft


def test_compare_returns_the_ranked_json_the_cli_writes():
    c = weft.compare("tiny-vlm", gpus=4, iterations=2, strategies=["megatron-1f1b", "gpipe"])
    assert c["schema"] == "weft.compare/v1"
    names = [s["name"] for s in c["strategies"]]
    assert sorted(names) == ["gpipe", "megatron-1f1b"]
    times = [s["iteration_time_s"] for s in c["strategies"]]
    assert times == sorted(times)  # ranked, fastest first
    assert c["best"] == names[0]
    for s in c["strategies"]:
        assert s["configuration"], s  # every row says its configuration


def test_tune_and_compare_tune():
    t = weft.tune("tiny-vlm", gpus=8, strategies=["megatron-1f1b"])
    assert t["schema"] == "weft.tune/v1"
    row = t["strategies"][0]
    assert row["best"]["iteration_time_s"] <= row["default"]["iteration_time_s"]
    c = weft.compare("tiny-vlm", gpus=8, iterations=2, strategies=["megatron-1f1b"], tune=True)
    best = row["best"]
    tag = "[tuned tp{} cp{} pp{} dp{} mb{}]".format(best["tp"], best["cp"], best["pp"], best["dp"],
                                                    best["microbatches"])
    assert c["strategies"][0]["description"].startswith(tag)


def test_defaults_are_deterministic_like_the_cli():
    a = weft.simulate("dip", "tiny-vlm", iterations=1)
    b = weft.simulate("dip", "tiny-vlm", iterations=1)
    assert a[0]["iteration_time_s"] == b[0]["iteration_time_s"]
    p = weft.plan("dip", "tiny-vlm")
    q = weft.plan("dip", "tiny-vlm")
    assert p["plan_json"] == q["plan_json"]


def test_bad_input_is_a_value_error():
    with pytest.raises(ValueError) as e:
        weft.compare("tiny-vlm", strategies=["no-such-strategy"])
    assert "no-such-strategy" in str(e.value)
    with pytest.raises(ValueError):
        weft.tune("tiny-vlm", max_simulations=0)
