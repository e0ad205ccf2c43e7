"""Tests of the _weft bindings (spec, data, cost, strategy, plan)."""
import json

import pytest

import weft


def test_presets_list_models_and_clusters():
    names = {p["name"] for p in weft.list_presets("model")}
    assert "tiny-vlm" in names
    assert all(p["kind"] == "cluster" for p in weft.list_presets("cluster"))
    with pytest.raises(ValueError, match="kind"):
        weft.list_presets("nope")


def test_load_model_gives_modules_and_setup():
    m = weft.load_model("tiny-vlm")
    assert [x["name"] for x in m["modules"]] == ["vision", "projector", "llm"]
    assert m["modules"][2]["hidden_size"] == 64
    assert m["setup"]["gpus"] == 2
    assert ("vision", "projector") in m["edges"]


def test_unknown_model_raises_value_error_with_message():
    with pytest.raises(ValueError, match="no-such-model"):
        weft.load_model("no-such-model")


def test_generate_and_pack_samples():
    samples = weft.generate_samples("coco-llava", num_samples=6, seed=3)
    assert len(samples) == 6 and all(len(s["images"]) >= 1 for s in samples)
    assert samples == weft.generate_samples("coco-llava", num_samples=6, seed=3)
    batch = weft.pack("tiny-vlm", samples, context_tokens=128)
    assert batch["sequences"]
    assert all(q["llm_tokens"] <= 128 for q in batch["sequences"])
    workload = weft.module_workload("tiny-vlm", "vision", batch, [0])
    # 56 px images cut into 14 px patches: 16 patch tokens each.
    assert workload and all(seg == [16] for seg in workload)


def test_chunk_cost_scales_with_layers():
    one = weft.chunk_cost("tiny-vlm", "llm", 0, 1, 128)
    three = weft.chunk_cost("tiny-vlm", "llm", 1, 3, 128)
    assert one["forward_s"] > 0 and three["forward_s"] > one["forward_s"]
    assert weft.layer_cost("tiny-vlm", "llm", 1, 128)["ops"]


def test_plan_returns_valid_plan_and_summary():
    r = weft.plan("megatron-1f1b", "tiny-vlm", data="coco-llava")
    assert r["pipeline_size"] == 2 and r["num_microbatches"] == 4
    assert r["iteration_time_s"] > 0 and 0 < r["mfu"] < 1 and 0 <= r["bubble_ratio"] < 1
    plan = json.loads(r["plan_json"])
    assert plan["schema"] == "weft.plan/v3" and len(plan["ranks"]) == 2
    # The plan carries its data: the batch's samples, its microbatches, each rank's chunks.
    assert len(plan["data"]["samples"]) == len(r["batch"]["samples"])
    assert [m["sequences"] for m in plan["data"]["microbatches"]] == r["microbatches"]
    assert [c["num_layers"] for c in plan["data"]["ranks"][1]["chunks"]] == \
        [c["num_layers"] for c in r["chunks"] if c["group"] == 1]
    assert weft.validate_plan(r["plan_json"])["brief"].startswith("valid plan")
    assert sum(c["num_layers"] for c in r["chunks"] if c["module_name"] == "llm") == 4


def test_validate_plan_names_rank_and_action_of_a_broken_plan():
    plan = json.loads(weft.plan("gpipe", "tiny-vlm", data="coco-llava")["plan_json"])
    actions = plan["ranks"][1]["actions"]
    i = next(k for k, a in enumerate(actions) if a["op"] == "irecv")
    del actions[i]
    with pytest.raises(ValueError, match=r"rank \d action \d+"):
        weft.validate_plan(json.dumps(plan))


def test_simulate_gives_one_summary_per_iteration():
    out = weft.simulate("gpipe", "tiny-vlm", data="coco-llava", iterations=2)
    assert [o["iteration"] for o in out] == [0, 1]
    with pytest.raises(ValueError, match="iterations"):
        weft.simulate("gpipe", "tiny-vlm", iterations=0)
    with pytest.raises(ValueError):
        weft.plan("no-such-strategy", "tiny-vlm")


def _module_spec_fields_in_header() -> list[str]:
    """Data members of `struct ModuleSpec` in include/weft/spec/model.h, in declaration order
    (the C++ struct is the authority; methods and comments are skipped)."""
    import pathlib
    import re
    header = pathlib.Path(__file__).resolve().parents[2] / "include/weft/spec/model.h"
    text = header.read_text()
    body = text[text.index("struct ModuleSpec {"):]
    body = body[:body.index("\n};")]
    fields = []
    for line in body.splitlines()[1:]:
        code = line.split("//")[0].strip()
        m = re.fullmatch(r"[\w:<>]+ (\w+)(?: = [^;(]+|\{\})?;", code)
        if m:
            fields.append(m.group(1))
    return fields


def test_module_dicts_expose_every_module_spec_field_for_every_preset():
    fields = _module_spec_fields_in_header()
    # The parse found the struct: a field of each group (transformer, DiT, audio, projector).
    assert {"frozen", "head_dim", "vae_temporal_downsample", "max_source_positions",
            "output_size", "resize_rule"} <= set(fields)
    assert weft.module_spec_fields() == fields
    models = [p["name"] for p in weft.list_presets("model")]
    assert len(models) > 20
    for name in models:
        for mod in weft.load_model(name)["modules"]:
            missing = [f for f in fields if f not in mod]
            assert not missing, (name, mod["name"], missing)


def test_module_dict_values_follow_the_spec():
    whisper = next(m for m in weft.load_model("tiny-valm")["modules"]
                   if m["kind"] == "audio_encoder")
    # Set in presets/models/tiny-valm.yaml (the old dict left these out).
    assert (whisper["mel_bins"], whisper["conv_downsample"]) == (16, 2)
    assert (whisper["max_source_positions"], whisper["frames_per_second"]) == (100, 100)
    dit = next(m for m in weft.load_model("tiny-t2v")["modules"] if m["kind"] == "dit")
    assert dit["text_condition_hidden"] == dit["hidden_size"] == 64
    assert (dit["vae_spatial_downsample"], dit["vae_temporal_downsample"]) == (8, 4)
    assert (dit["temporal_patch"], dit["resize_rule"]) == (1, "fixed")  # spec defaults
    m = weft.load_model("tiny-vlm")
    # head_dim is resolved (hidden / heads when the spec leaves it 0).
    llm = m["modules"][2]
    assert llm["head_dim"] == llm["hidden_size"] // llm["num_attention_heads"]
    assert [m["modules"][i]["name"] for i in m["topological_order"]] == \
        ["vision", "projector", "llm"]


def test_cost_api_sequence_parallel_default_matches_cli():
    """Issue 17.4: the Python cost API uses the CLI's default (no sequence parallelism) and says
    which it used; SP is opt-in like `weft cost --sp`."""
    plain = weft.layer_cost("vlm-s", "llm", 0, 4096, cluster="h800", tp=2)
    sp = weft.layer_cost("vlm-s", "llm", 0, 4096, cluster="h800", tp=2, sequence_parallel=True)
    assert plain["sequence_parallel"] is False and plain["tp"] == 2
    assert sp["sequence_parallel"] is True
    assert plain["forward_s"] != sp["forward_s"]
    chunk = weft.chunk_cost("vlm-s", "llm", 0, 2, 4096, cluster="h800", tp=2)
    assert chunk["sequence_parallel"] is False
