"""The FlowTrain pool, simulated vs measured, on the same tiny job (issue 31; docs/runtime.md).

Runs `weft simulate --strategy flowtrain --trace` (the window simulation) and the runtime's pool
(weft.runtime.pool: flowtrain's world plans of the same iterations on one process per rank)
with the same pool capacity counted in embeddings (the simulator prices bf16 activations, the
tiny runtime runs float32: an entry is twice as many bytes there, so the runtime's segments get
twice the simulator's bytes), and prints per iteration the pool's peak occupancy and the
producers' lead (iterations every producer had finished when the consumers started this one,
minus its index) from both, side by side as a markdown table.

  .venv/bin/python bench/pool_sim_vs_measured.py --weft build/default/weft --iterations 8
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile


def simulated(weft_bin: str, model: str, gpus: int, data: str, iterations: int,
              pool_bytes: int) -> tuple[list[dict], int]:
    """Per consumer iteration {pool_peak_bytes, producer_lead} from the window trace, and the
    pool capacity the simulation used."""
    with tempfile.TemporaryDirectory() as tmp:
        trace_path = os.path.join(tmp, "sim.json")
        cmd = [weft_bin, "simulate", "--model", model, "--strategy", "flowtrain", "--gpus",
               str(gpus), "--data", data, "--iterations", str(iterations), "--trace",
               trace_path]
        if pool_bytes:
            cmd += ["--pool-bytes", str(pool_bytes)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(trace_path, encoding="utf-8") as f:
            trace = json.load(f)
    events = trace["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e["name"] == "process_name"}
    spans: dict[int, dict[int, tuple[float, float]]] = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "iteration":
            spans.setdefault(e["pid"], {})[e["args"]["iteration"]] = (e["ts"], e["ts"] + e["dur"])
    producers = [p for p in spans if names[p].startswith("vision")]
    consumers = [p for p in spans if p not in producers]
    counter = sorted((e["ts"], e["args"]["bytes"]) for e in events
                     if e.get("ph") == "C" and e["name"] == "buffer pool")
    out = []
    for k in range(iterations):
        start = min(spans[p][k][0] for p in consumers)
        end = max(spans[p][k][1] for p in consumers)
        before = [b for t, b in counter if t <= start]
        peak = max([before[-1] if before else 0] + [b for t, b in counter if start < t <= end])
        lead = min(sum(1 for s, e in spans[p].values() if e <= start) for p in producers) - k
        out.append({"pool_peak_bytes": peak, "producer_lead": lead,
                    "iteration_s": end - start})
    capacity = trace["otherData"]["buffers"][0]["capacity_bytes"]
    return out, capacity


def measured(model: str, gpus: int, data: str, iterations: int, segment_bytes: int):
    import weft
    from weft.runtime.executor import load_plan, run_streamed
    from weft.runtime.harness import plan_jobs
    from weft.runtime.pool import check_entries_fit, pool_config, pool_summary
    first, jobs = plan_jobs("flowtrain", model, iterations, data=data, seed=1, gpus=gpus,
                            world=True)
    m = weft.load_model(model)
    config = pool_config(m, load_plan(jobs[0]["plan"]), segment_bytes, 0)
    for job in jobs:
        check_entries_fit(load_plan(job["plan"]), config)
    runs = run_streamed(m, first["num_ranks"],
                        lambda i, _: jobs[i] if i < len(jobs) else None, timeout_s=60,
                        pool=config)
    return pool_summary(runs, config), config


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--weft", default="build/default/weft")
    p.add_argument("--model", default="tiny-vlm-frozen-vit")
    p.add_argument("--gpus", type=int, default=4)
    p.add_argument("--data", default="coco-llava")
    p.add_argument("--iterations", type=int, default=8)
    p.add_argument("--pool-bytes", type=int, nargs="+", default=[0, 40960],
                   help="simulated pool capacities in bf16 bytes (0 = flowtrain's sizing rule; "
                   "the runtime then gets 1 MiB per producer)")
    a = p.parse_args()
    print(f"{a.model}, flowtrain, {a.gpus} GPUs / processes, {a.data}, {a.iterations} "
          f"iterations\n")
    for pool_bytes in a.pool_bytes:
        sim, capacity = simulated(a.weft, a.model, a.gpus, a.data, a.iterations, pool_bytes)
        num_producers = 2
        segment = (2 * pool_bytes // num_producers) if pool_bytes else 1 << 20
        meas, config = measured(a.model, a.gpus, a.data, a.iterations, segment)
        print(f"pool: simulated {capacity} B (bf16) | measured {config.capacity_bytes} B "
              f"(float32, {len(config.producer_ranks)} segments of {segment} B)\n")
        print("| iteration | sim pool peak (KiB bf16) | measured pool peak (KiB f32) | "
              "sim producer lead | measured producer lead | measured consumer wait (ms) |")
        print("|---|---|---|---|---|---|")
        for k, (s, m) in enumerate(zip(sim, meas)):
            print(f"| {k} | {s['pool_peak_bytes'] / 1024:.0f} | "
                  f"{m['pool_peak_bytes'] / 1024:.0f} | {s['producer_lead']} | "
                  f"{m['producer_lead']} | {m['consumer_wait_s'] * 1e3:.1f} |")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
