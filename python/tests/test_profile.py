"""weft.profile (DFLOP's model profiler) on the CPU: the weft.profile/v1 file's schema, grid
coverage, closed-form parameter counts, growth of time with batch / sequence, and bad input.

Timings are noisy on a shared host: growth is checked between the grid's ends (4x the work)
and, between neighbours, within a tolerance; one CPU thread keeps the runs steady."""
import json
import os
import subprocess
import sys

import pytest
import torch

import weft
from weft.profile import SCHEMA, STATISTIC, TP_EMULATION, main, profile_model

PROVENANCE = {"device": str, "torch": str, "date": str, "host": str, "dtype": str, "timer": str,
              "l2_flush": bool, "warmup_steps": int, "timed_steps": int, "statistic": str,
              "scale": float, "tp_emulation": str, "notes": str}
ENCODER_TIME = {"tp": int, "batch": int, "forward_s": float, "backward_s": float}
LLM_TIME = {"tp": int, "seq": int, "attention_forward_s": float, "attention_backward_s": float,
            "linear_forward_s": float, "linear_backward_s": float}
ENCODER_MEMORY = {"tp": int, "parameters_per_layer": int,
                  "activation_bytes_per_layer_per_instance": float,
                  "state_linear_in_layers": bool}
LLM_MEMORY = {"tp": int, "parameters_per_layer": int,
              "activation_bytes_per_layer_per_token": float, "state_linear_in_layers": bool}


def check_keys(obj: dict, types: dict, where: str) -> None:
    assert set(obj) == set(types), f"{where}: keys {sorted(obj)} != {sorted(types)}"
    for key, t in types.items():
        assert isinstance(obj[key], t), f"{where}.{key} = {obj[key]!r} is not {t.__name__}"


def validate(doc: dict, model: dict, scale: float) -> None:
    """Every key and type of weft.profile/v1, and the grid covered in grid order."""
    assert set(doc) == {"schema", "model", "source", "provenance", "grid", "modules"}
    assert doc["schema"] == SCHEMA and doc["source"] == "measured"
    assert doc["model"] == model["name"]
    prov = doc["provenance"]
    check_keys(prov, PROVENANCE, "provenance")
    assert prov["dtype"] == "float32" and prov["timer"] == "perf_counter"
    assert prov["l2_flush"] is False and prov["scale"] == scale
    assert prov["statistic"] == STATISTIC and prov["tp_emulation"] == TP_EMULATION
    if scale != 1.0:
        assert "NOT real-model numbers" in prov["notes"]
    assert "projector" in prov["notes"]  # skipped, and the file says so
    grid = doc["grid"]
    assert set(grid) == {"encoder_batch", "llm_seq", "tp"}
    specs = {m["name"]: m for m in model["modules"]}
    for mod in doc["modules"]:
        spec = specs[mod["name"]]
        assert mod["layers"] == spec["num_layers"]
        encoder = mod["role"] == "encoder"
        assert mod["role"] == ("encoder" if spec["kind"] in ("vit", "audio_encoder") else "llm")
        assert set(mod) == ({"name", "role", "tokens_per_instance", "layers", "time", "memory"}
                            if encoder else {"name", "role", "layers", "time", "memory"})
        tps = [row["tp"] for row in mod["memory"]]
        assert tps and set(tps) <= set(grid["tp"]) and 1 in tps
        axis, key = (grid["encoder_batch"], "batch") if encoder else (grid["llm_seq"], "seq")
        assert [(r["tp"], r[key]) for r in mod["time"]] == [(t, v) for t in tps for v in axis]
        for r in mod["time"]:
            check_keys(r, ENCODER_TIME if encoder else LLM_TIME, f"{mod['name']}.time")
            if encoder:
                assert r["forward_s"] > 0 and r["backward_s"] > 0
            else:
                assert r["linear_forward_s"] > 0 and r["linear_backward_s"] > 0
                assert r["attention_forward_s"] >= 0 and r["attention_backward_s"] >= 0
        for r in mod["memory"]:
            check_keys(r, ENCODER_MEMORY if encoder else LLM_MEMORY, f"{mod['name']}.memory")
            act = r["activation_bytes_per_layer_per_instance" if encoder
                    else "activation_bytes_per_layer_per_token"]
            assert r["parameters_per_layer"] > 0 and act > 0
            assert r["state_linear_in_layers"] is True


def total(row: dict) -> float:
    return sum(v for k, v in row.items() if k.endswith("_s"))


def check_growth(mod: dict, key: str) -> None:
    """Time (forward + backward) grows along the axis at every TP: strictly between the ends,
    within 40% between neighbours (a median of two samples on a shared host)."""
    for tp in sorted({r["tp"] for r in mod["time"]}):
        rows = [r for r in mod["time"] if r["tp"] == tp]
        times = [total(r) for r in rows]
        assert times[-1] > times[0], f"{mod['name']} tp{tp}: {times} along {key}"
        for a, b in zip(times, times[1:]):
            assert b >= 0.6 * a, f"{mod['name']} tp{tp}: {times} along {key}"
        if "linear_forward_s" in rows[0]:
            lin = [r["linear_forward_s"] + r["linear_backward_s"] for r in rows]
            assert lin[-1] > lin[0], f"{mod['name']} tp{tp}: linear {lin}"


def tiny_vit_params(h: int, f: int, heads: int, hd: int) -> int:
    """A LayerNorm / GELU / biased ViT layer of one TP rank: qkv, proj, fc1, fc2, two norms."""
    return (h * 3 * heads * hd + 3 * heads * hd) + (heads * hd * h + h) + (h * f + f) \
        + (f * h + h) + 4 * h


def test_tiny_vlm_cli_writes_a_valid_profile(tmp_path):
    out = tmp_path / "profile.json"
    assert main(["--model", "tiny-vlm", "--quick", "--threads", "1", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    model = weft.load_model("tiny-vlm")
    validate(doc, model, 1.0)
    assert [m["name"] for m in doc["modules"]] == ["vision", "llm"]
    vision, llm = doc["modules"]
    assert vision["tokens_per_instance"] == (56 // 14) ** 2
    # tiny-vlm: ViT 4 heads / 4 kv, LLM 4 heads / 2 kv: both profiled at TP 1 and 2.
    assert [r["tp"] for r in vision["memory"]] == [1, 2]
    assert [r["tp"] for r in llm["memory"]] == [1, 2]
    # At TP 1 the torch layer is the spec's layer; at TP 2 heads and ffn are halved.
    spec = {m["name"]: m for m in model["modules"]}
    assert vision["memory"][0]["parameters_per_layer"] == spec["vision"]["parameters_per_layer"]
    assert llm["memory"][0]["parameters_per_layer"] == spec["llm"]["parameters_per_layer"]
    assert vision["memory"][0]["parameters_per_layer"] == tiny_vit_params(64, 256, 4, 16)
    assert vision["memory"][1]["parameters_per_layer"] == tiny_vit_params(64, 128, 2, 16)
    # Per-rank activations shrink with TP (heads and ffn split; hidden-sized tensors stay).
    assert (vision["memory"][1]["activation_bytes_per_layer_per_instance"]
            < vision["memory"][0]["activation_bytes_per_layer_per_instance"])
    assert (llm["memory"][1]["activation_bytes_per_layer_per_token"]
            < llm["memory"][0]["activation_bytes_per_layer_per_token"])


def test_scaled_llava_profile_grows_with_batch_and_sequence():
    model = weft.load_model("llava-ov-qwen2.5-7b")
    doc = profile_model("llava-ov-qwen2.5-7b", "cpu", scale=0.125, quick=True, threads=1)
    validate(doc, model, 0.125)
    vision, llm = doc["modules"]
    assert vision["tokens_per_instance"] == 729  # SigLIP 384 px / 14 px patches
    check_growth(vision, "batch")
    check_growth(llm, "seq")
    # float32 saved tensors of one token hold at least the layer input and the MLP's
    # intermediate (the scaled LLM: hidden 448, ffn 2368).
    per_token = llm["memory"][0]["activation_bytes_per_layer_per_token"]
    assert per_token >= 4 * (448 + 2368)


def run_cli(*args, tmp_path):
    out = tmp_path / "p.json"
    proc = subprocess.run([sys.executable, "-m", "weft.profile", *args, "--out", str(out)],
                          capture_output=True, text=True, timeout=120, env=os.environ.copy())
    return proc, out


def test_unknown_model_exits_2_without_a_file(tmp_path):
    proc, out = run_cli("--model", "no-such-model", "--quick", tmp_path=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--model" in lines[0]
    assert not out.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, option", [
    (["--model", "tiny-vlm", "--device", "tpu"], "--device"),
    (["--model", "tiny-vlm", "--scale", "0"], "--scale"),
    (["--model", "tiny-vlm", "--tp", "two"], "--tp"),
    (["--model", "tiny-vlm", "--steps", "1"], "--steps"),
])
def test_bad_options_exit_2_without_a_file(tmp_path, capsys, args, option):
    out = tmp_path / "p.json"
    assert main([*args, "--quick", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and option in err[0]
    assert not out.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU error")
def test_cuda_without_a_gpu_exits_2(tmp_path, capsys):
    out = tmp_path / "p.json"
    assert main(["--model", "tiny-vlm", "--device", "cuda", "--quick", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--device" in err[0]
    assert not out.exists()
