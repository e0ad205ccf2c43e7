#!/usr/bin/env python3
"""Measures the cost model's operators on one GPU with torch and writes a table with provenance.

Ops (forward, bf16): the GEMMs of the presets' LLM layers per TP rank (qkv_proj, out_proj, mlp_up,
mlp_down of Llama-2-7B, Llama-3-8B and Llama-3-70B at TP 1 and 8), causal SDPA / flash attention
(torch.nn.functional.scaled_dot_product_attention), RMSNorm and LayerNorm, and pinned host copies
(H2D, D2H) for the offload model. Timed with CUDA events after warm-up; the median of --reps.

  python bench/gpu_harness.py --out out/gpu_table.csv        # on a GPU machine
  build/default/weft cost --validate-table out/gpu_table.csv --cluster h100   # model error

Without a GPU (or with --smoke) it runs small shapes on the CPU with few reps: a check of the
table format only, never numbers to report. The CSV's columns are what
`weft cost --validate-table` reads (cost::ValidateHarnessTable); the provenance (GPU, driver,
torch, CUDA, date, smoke flag) goes to <out>.json beside it together with the rows.
"""
import argparse
import csv
import datetime
import json
import platform
import statistics
import subprocess
import sys
import time

import torch

COLUMNS = ["op", "kind", "model", "tp", "m", "n", "k", "tokens", "heads", "kv_heads",
           "head_dim", "bytes", "causal", "dtype", "reps", "latency_ms"]

# (name, hidden, ffn, heads, kv_heads, head_dim, gated): presets/models/llama3-8b.yaml,
# llama3-70b.yaml and vidur's Llama-2-7B (the cost model's calibration set).
MODELS = [
    ("llama2-7b", 4096, 11008, 32, 32, 128, True),
    ("llama3-8b", 4096, 14336, 32, 8, 128, True),
    ("llama3-70b", 8192, 28672, 64, 8, 128, True),
]


def provenance(device, smoke):
    info = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "device": str(device),
        "smoke": smoke,
        "host": platform.node(),
        "python": platform.python_version(),
    }
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
        try:
            info["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=10).stdout.strip().splitlines()[0]
        except (OSError, IndexError, subprocess.SubprocessError):
            info["driver"] = None
    else:
        info["gpu"] = None
        info["driver"] = None
        info["cpu"] = platform.processor() or platform.machine()
    return info


def time_ms(fn, device, reps, warmup):
    """Median wall time of fn() in milliseconds (CUDA events on a GPU)."""
    for _ in range(warmup):
        fn()
    samples = []
    if device.type == "cuda":
        for _ in range(reps):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize(device)
            samples.append(start.elapsed_time(end))
    else:
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def rms_norm(x, weight, eps=1e-6):
    if hasattr(torch.nn.functional, "rms_norm"):
        return torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, eps)
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps).to(x.dtype) * weight


def measure(device, smoke, reps, warmup):
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    esize = torch.finfo(dtype).bits // 8
    rows = []

    def row(**kw):
        r = {c: 0 for c in COLUMNS}
        r.update(dtype=str(dtype).replace("torch.", ""), reps=reps, **kw)
        rows.append(r)

    token_counts = [64, 128] if smoke else [256, 512, 1024, 2048, 4096, 8192]
    models = [("tiny", 256, 512, 4, 2, 64, True)] if smoke else MODELS
    tps = [1] if smoke else [1, 8]
    for name, h, f, a, g, d, gated in models:
        for tp in tps:
            gemms = {
                "qkv_proj": ((a + 2 * g) * d // tp, h),
                "out_proj": (h, a * d // tp),
                "mlp_up": ((2 if gated else 1) * f // tp, h),
                "mlp_down": (h, f // tp),
            }
            for op, (n, k) in gemms.items():
                w = torch.randn(k, n, device=device, dtype=dtype)
                for t in token_counts:
                    x = torch.randn(t, k, device=device, dtype=dtype)
                    ms = time_ms(lambda: x @ w, device, reps, warmup)
                    row(op=op, kind="gemm", model=name, tp=tp, m=t, n=n, k=k, tokens=t,
                        bytes=esize * (t * k + k * n + t * n), latency_ms=ms)
        for t in token_counts:
            for op, fn_of in (("rms_norm", lambda x, w, b: rms_norm(x, w)),
                              ("layer_norm", lambda x, w, b: torch.nn.functional.layer_norm(
                                  x, (x.shape[-1],), w, b))):
                x = torch.randn(t, h, device=device, dtype=dtype)
                w = torch.ones(h, device=device, dtype=dtype)
                b = torch.zeros(h, device=device, dtype=dtype)
                ms = time_ms(lambda: fn_of(x, w, b), device, reps, warmup)
                row(op=op, kind="norm", model=name, tp=1, tokens=t, bytes=2 * esize * t * h,
                    latency_ms=ms)
        attn_tokens = [64, 128] if smoke else [512, 1024, 2048, 4096, 8192]
        for t in attn_tokens:
            q = torch.randn(1, a, t, d, device=device, dtype=dtype)
            kv = torch.randn(1, g, t, d, device=device, dtype=dtype)
            rep = a // g
            k_full = kv.repeat_interleave(rep, dim=1)  # GQA expanded outside the timed region
            ms = time_ms(lambda: torch.nn.functional.scaled_dot_product_attention(
                q, k_full, k_full, is_causal=True), device, reps, warmup)
            row(op="attention", kind="attention", model=name, tp=1, tokens=t, heads=a,
                kv_heads=g, head_dim=d, causal=1, bytes=esize * t * d * (2 * a + 2 * g),
                latency_ms=ms)
    copy_bytes = [1 << 20, 4 << 20] if smoke else [16 << 20, 64 << 20, 256 << 20, 1 << 30]
    for nbytes in copy_bytes:
        numel = nbytes // 2
        if device.type == "cuda":
            host = torch.empty(numel, dtype=torch.bfloat16, pin_memory=True)
            dev = torch.empty(numel, dtype=torch.bfloat16, device=device)
            h2d = lambda: dev.copy_(host, non_blocking=True)
            d2h = lambda: host.copy_(dev, non_blocking=True)
        else:  # smoke: host-to-host copies stand in, to exercise the format only
            src = torch.empty(numel, dtype=torch.bfloat16)
            dst = torch.empty(numel, dtype=torch.bfloat16)
            h2d = d2h = lambda: dst.copy_(src)
        for op, fn in (("h2d", h2d), ("d2h", d2h)):
            row(op=op, kind=op, tokens=0, bytes=nbytes, latency_ms=time_ms(fn, device, reps, warmup))
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="CSV path; provenance + rows also go to <out>.json")
    p.add_argument("--smoke", action="store_true", help="small shapes, few reps (CPU format check)")
    p.add_argument("--reps", type=int, default=None)
    p.add_argument("--warmup", type=int, default=None)
    args = p.parse_args(argv)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    smoke = args.smoke or device.type != "cuda"
    reps = args.reps or (3 if smoke else 50)
    warmup = args.warmup or (1 if smoke else 10)
    if smoke and device.type != "cuda":
        print("gpu_harness: no GPU; CPU smoke test (format check only, not numbers to report)",
              file=sys.stderr)
    rows = measure(device, smoke, reps, warmup)
    with open(args.out, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    with open(args.out + ".json", "w") as fh:
        json.dump({"provenance": provenance(device, smoke), "columns": COLUMNS, "rows": rows}, fh,
                  indent=1)
    print(f"gpu_harness: {len(rows)} rows -> {args.out} (+ .json)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
