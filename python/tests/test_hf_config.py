"""Hugging Face config.json as a model (docs/spec.md "From Hugging Face")."""
import json
import os
import subprocess
import sys

import pytest

import weft

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
HF = os.path.join(ROOT, "tests", "data", "hf")


def test_load_model_takes_a_config_path_its_directory_and_a_dict():
    by_file = weft.load_model(os.path.join(HF, "qwen2.5-vl-7b", "config.json"))
    by_dir = weft.load_model(os.path.join(HF, "qwen2.5-vl-7b"))
    assert by_file == by_dir
    assert [m["name"] for m in by_file["modules"]] == ["vision", "projector", "llm"]
    assert by_file["modules"][0]["max_pixels"] == 12845056  # preprocessor_config.json
    with open(os.path.join(HF, "qwen3-4b", "config.json")) as f:
        config = json.load(f)
    from_dict = weft.load_model(config)
    assert from_dict["modules"][0]["head_dim"] == 128
    assert from_dict["modules"][0]["parameter_count"] == \
        weft.load_model("qwen3-4b")["modules"][0]["parameter_count"]


def test_import_hf_config_gives_workload_rule_yaml_and_freeze():
    with open(os.path.join(HF, "llava-onevision-qwen2-7b", "config.json")) as f:
        text = f.read()
    d = weft.import_hf_config(text, "llava/config.json", freeze=["vision"])
    assert d["modules"][0]["frozen"] and not d["modules"][2]["frozen"]
    vision = d["modules"][0]
    assert vision["resize_rule"] == "anyres" and vision["anyres_max_tiles"] == 9
    assert len(vision["grid_pinpoints"]) == 36 and vision["grid_pinpoints"][1] == (384, 768)
    assert "num_layers: 26  # vision_config.num_hidden_layers" in d["yaml"]


def test_bad_config_raises_one_line_naming_field_and_rule():
    with pytest.raises(ValueError, match=r"num_key_value_heads = 3; must divide num_attention_heads \(4\)"):
        weft.load_model({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64,
                         "intermediate_size": 8, "num_attention_heads": 4,
                         "num_key_value_heads": 3, "vocab_size": 9})
    with pytest.raises(ValueError, match="model_type"):
        weft.load_model({"modules": []})


def test_pretrained_config_when_transformers_is_installed():
    transformers = pytest.importorskip("transformers")
    config = transformers.Qwen2Config(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=100)
    m = weft.load_model(config)
    assert m["modules"][0]["num_kv_groups"] == 2 and m["modules"][0]["qkv_bias"]


def test_plan_takes_a_config_path():
    p = weft.plan("megatron-1f1b", os.path.join(HF, "qwen2.5-7b"), cluster="h100", gpus=8)
    assert p["model"].endswith("qwen2.5-7b")


def test_train_refuses_a_config():
    r = subprocess.run([sys.executable, "-m", "weft.train", "--model", os.path.join(HF, "qwen2.5-7b")],
                       capture_output=True, text=True, env=os.environ)
    assert r.returncode == 2
    assert "runs tiny models only" in r.stderr
