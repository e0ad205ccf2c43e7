"""Shared pytest fixtures of weft's Python tests."""
import json
import random

import pytest


@pytest.fixture
def valm_data(tmp_path) -> str:
    """Path of a JSONL data file: 16 samples, each with 1-2 fixed-size images and one 0.3-1.5 s
    audio clip (no generator profile mixes images and audio)."""
    path = tmp_path / "valm.jsonl"
    rnd = random.Random(3)
    with open(path, "w") as f:
        for i in range(16):
            f.write(json.dumps({"id": i, "text_tokens": rnd.randint(8, 40),
                                "images": [{"w": 56, "h": 56}] * rnd.randint(1, 2),
                                "audios": [{"duration_s": round(rnd.uniform(0.3, 1.5), 2)}]})
                    + "\n")
    return str(path)
