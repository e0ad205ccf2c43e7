"""Issue 34 item 9: `python -m weft.train` refuses a model over its stated size up front (one
line, exit 2) instead of starting workers that fail to allocate; the tiny presets pass the check."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import weft
from weft.train import MAX_TRAIN_PARAMETERS, main


def test_a_full_size_model_is_refused_in_one_line_with_exit_2():
    r = subprocess.run([sys.executable, "-m", "weft.train", "--model", "vlm-s"],
                       capture_output=True, text=True, env=os.environ, timeout=120)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "vlm-s has 12,444.9M parameters" in lines[0]
    assert "at most 100M" in lines[0]
    assert r.stdout == ""  # no worker was started, nothing was planned


def test_an_unknown_model_is_one_line_exit_2(capsys):
    assert main(["--model", "no-such-model"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown model preset 'no-such-model'" in err[0]


@pytest.mark.parametrize("model", ["tiny-vlm", "tiny-valm", "tiny-vlm-frozen-vit", "tiny-t2v"])
def test_the_tiny_presets_are_under_the_limit(model):
    assert 0 < weft.load_model(model)["parameter_count"] <= MAX_TRAIN_PARAMETERS
