"""weft.validate_plan on hostile input: one-line ValueError, never a crash (plan schema v3)."""
import json
import pathlib

import pytest

import weft

DATA = pathlib.Path(__file__).parent / "data"


def _good():
    return (DATA / "1f1b_p2_m4.plan.json").read_text()


def test_valid_plan_is_accepted():
    assert weft.validate_plan(_good())["brief"].startswith("valid plan")


def test_deep_json_raises_value_error_with_one_line():
    with pytest.raises(ValueError) as info:
        weft.validate_plan("[" * 80000 + "]" * 80000)
    message = str(info.value)
    assert "\n" not in message
    assert message == "byte 32: JSON nested deeper than 32 levels (ReadOptions::max_depth)"


@pytest.mark.parametrize("mutate, expected", [
    (lambda p: p["ranks"][0].__setitem__("static_bytes", 9223372036854775807),
     "ranks[0].static_bytes = 9223372036854775807; must be <= 1125899906842624 (2^50)"),
    (lambda p: p["ranks"][0]["buffers"][0].__setitem__("shape", [16, 4294967297]),
     "ranks[0].buffers[0].shape[1] = 4294967297; must be <= 2147483647"),
    (lambda p: p["ranks"][0]["actions"][0]["stage"].__setitem__("module", 1),
     "ranks[0].actions[0].stage.module = 1; must be < 1 (the number of modules)"),
    (lambda p: p.__setitem__("schema", "weft.plan/v1"),
     "weft.plan/v1 is no longer read; regenerate it with `weft plan ... --out FILE` "
     "(writes weft.plan/v3)"),
    (lambda p: p.__setitem__("schema", "weft.plan/v2"),
     "weft.plan/v2 is no longer read; regenerate it with `weft plan ... --out FILE` "
     "(writes weft.plan/v3)"),
    (lambda p: p.__delitem__("data"), "data: missing"),
])
def test_out_of_range_fields_raise_value_error_naming_field_and_rule(mutate, expected):
    plan = json.loads(_good())
    mutate(plan)
    with pytest.raises(ValueError) as info:
        weft.validate_plan(json.dumps(plan))
    assert str(info.value) == expected


def test_truncated_json_raises_value_error():
    with pytest.raises(ValueError, match=r"^not valid JSON \(byte \d+\)"):
        weft.validate_plan(_good()[:500])
