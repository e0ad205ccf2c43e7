"""CPU smoke test of bench/gpu_harness.py: the table's format and provenance (no GPU numbers)."""
import csv
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gpu_harness  # noqa: E402


def test_smoke_table_has_every_kind_and_provenance(tmp_path):
    out = tmp_path / "table.csv"
    assert gpu_harness.main(["--out", str(out), "--smoke", "--reps", "2", "--warmup", "1"]) == 0
    with open(out) as fh:
        rows = list(csv.DictReader(fh))
    assert rows and list(rows[0].keys()) == gpu_harness.COLUMNS
    kinds = {r["kind"] for r in rows}
    assert kinds == {"gemm", "attention", "norm", "h2d", "d2h"}
    assert {r["op"] for r in rows if r["kind"] == "gemm"} == {
        "qkv_proj", "out_proj", "mlp_up", "mlp_down"}
    for r in rows:
        assert float(r["latency_ms"]) > 0
        assert float(r["bytes"]) > 0
    meta = json.load(open(str(out) + ".json"))
    prov = meta["provenance"]
    for key in ("date_utc", "torch", "cuda", "gpu", "driver", "device", "smoke"):
        assert key in prov
    assert prov["smoke"] is True
    assert len(meta["rows"]) == len(rows)


def test_weft_reads_the_table(tmp_path):
    weft = os.environ.get("WEFT_CLI") or os.path.join(HERE, "..", "build", "default", "weft")
    if not os.path.exists(weft):
        pytest.skip("weft binary not built")
    out = tmp_path / "table.csv"
    gpu_harness.main(["--out", str(out), "--smoke", "--reps", "1", "--warmup", "1"])
    r = subprocess.run([weft, "cost", "--validate-table", str(out), "--cluster", "h100"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for op in ("qkv_proj", "attention", "rms_norm", "h2d"):
        assert f"| harness | H100" in r.stdout and f"| {op} |" in r.stdout
