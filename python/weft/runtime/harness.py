"""Plans iterations with weft, runs them on the runtime and on a single-process reference."""
from __future__ import annotations

import json
import time

import torch

import weft
from weft.runtime.executor import run_plans
from weft.runtime.model import build_chunks, reference_step


def plan_jobs(strategy: str, model: str = "tiny-vlm", iterations: int = 2, data: str = "coco-llava",
              seed: int = 1, **kwargs) -> tuple[dict, list[dict]]:
    """Plans `iterations` iterations; returns (first plan result, jobs for run_plans)."""
    jobs, first = [], None
    for it in range(iterations):
        t0 = time.perf_counter()
        r = weft.plan(strategy, model, data=data, iteration=it, seed=seed, **kwargs)
        jobs.append({"plan": json.loads(r["plan_json"]), "batch": r["batch"],
                     "microbatches": r["microbatches"], "plan_wall_s": time.perf_counter() - t0,
                     "chunks": r["chunks"], "summary": r})
        first = first or r
    return first, jobs


def reference(model_name: str, chunks: list[dict], jobs: list[dict], seed: int = 1,
              lr: float = 0.1) -> list[dict]:
    """Single process: same chunks in model order, same batches and microbatches, same SGD."""
    model = weft.load_model(model_name)
    ordered = sorted(chunks, key=lambda c: (model_order(model, c["module"]), c["first_layer"]))
    modules = build_chunks(model, ordered, seed)
    out = []
    for job in jobs:
        loss = reference_step(model, modules, job["batch"], job["microbatches"], seed)
        grads = {}
        for m in modules:
            for n, p in m.parameter_names().items():
                grads[n] = p.grad.detach().clone()
        with torch.no_grad():
            for m in modules:
                for p in m.parameters():
                    p -= lr * p.grad
                    p.grad = None
        out.append({"loss": loss, "grads": grads})
    return out


def model_order(model: dict, module: int) -> int:
    names = [m["name"] for m in model["modules"]]
    order, pending = [], list(range(len(names)))
    preds = {i: {names.index(a) for a, b in model["edges"] if b == names[i]} for i in pending}
    while pending:
        ready = [i for i in pending if preds[i] <= set(order)]
        order.append(ready[0])
        pending.remove(ready[0])
    return order.index(module)


def max_relative_error(a: dict, b: dict) -> float:
    """max over tensors of |a - b|_max / max(|b|_max, 1e-12); keys must match."""
    if set(a) != set(b):
        raise AssertionError(f"parameter sets differ: {sorted(set(a) ^ set(b))}")
    return max(float((a[k] - b[k]).abs().max() / max(float(b[k].abs().max()), 1e-12)) for k in a)


def run(strategy: str, model_name: str = "tiny-vlm", iterations: int = 2, timeout_s: float = 30.0,
        **kwargs):
    first, jobs = plan_jobs(strategy, model_name, iterations, **kwargs)
    model = weft.load_model(model_name)
    runs = run_plans(model, first["chunks"], jobs, first["pipeline_size"], timeout_s=timeout_s)
    return first, jobs, runs
