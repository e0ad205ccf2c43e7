"""Measured Chrome traces of runtime iterations, in the simulator's "weft-trace-v1" track layout.

Each rank is one process (pid = rank + 1, named by the plan's rank label, e.g. "pp0"); its
compute actions (forward / backward / backward_input / backward_weight) go on tid 1 "compute",
named "<module> <pass>" ("llm F", "vision B", "llm Bi", "llm W") like the simulator's stages; its
sends (isend .. wait_send of one buffer) go on tid 1000 + peer, named "send → <peer label>", with
the event named "send <module> <pass> mb<microbatch>". Times are wall-clock (time.perf_counter,
one system-wide monotonic clock on Linux) in microseconds from the first recorded iteration start.
Open the file in https://ui.perfetto.dev or chrome://tracing.
"""
from __future__ import annotations

import json
from typing import Iterable

COMPUTE_TID = 1
SEND_TID_BASE = 1000
PASS_SHORT = {"forward": "F", "backward": "B", "backward_input": "Bi", "backward_weight": "W"}
PASS_CNAME = {"forward": "rail_load", "backward": "rail_animation",
              "backward_input": "rail_animation", "backward_weight": "rail_idle"}


def microbatch_label(stage: dict) -> str:
    """"3" or "3.1" (sub-microbatch), as the simulator labels microbatches."""
    sub = stage.get("sub", 0)
    return f"{stage['mb']}.{sub}" if sub else f"{stage['mb']}"


def action_events(plan: dict, rank: int, records: Iterable[tuple[int, float, float]],
                  origin_s: float, iteration: int) -> list[dict]:
    """Trace events of one rank's iteration. records: (action index, t_start_s, t_end_s)."""
    rank_plan = plan["ranks"][rank]
    actions = rank_plan["actions"]
    modules = plan.get("modules", [])
    labels = {r["rank"]: r.get("label") or f"g{r['rank']}" for r in plan["ranks"]}
    pid = rank + 1
    events: list[dict] = []
    send_start: dict[int, float] = {}
    send_action: dict[int, dict] = {}
    for index, t0, t1 in records:
        a = actions[index]
        op = a["op"]
        st = a.get("stage", {})
        if op in PASS_SHORT:
            module = modules[st["module"]] if st["module"] < len(modules) else f"m{st['module']}"
            events.append({
                "ph": "X", "name": f"{module} {PASS_SHORT[op]}",
                "cat": "stage,forward" if op == "forward" else "stage,backward",
                "pid": pid, "tid": COMPUTE_TID, "ts": (t0 - origin_s) * 1e6,
                "dur": max(t1 - t0, 0.0) * 1e6, "cname": PASS_CNAME[op],
                "args": {"action": index, "iteration": iteration, "module": module,
                         "chunk": st["chunk"], "microbatch": microbatch_label(st),
                         "pass": PASS_SHORT[op], "group": rank,
                         "recompute": a.get("recompute", "none"),
                         "planned_latency_s": a.get("latency_s", 0.0),
                         "measured_s": max(t1 - t0, 0.0)}})
        elif op == "isend":
            send_start[a["buffer"]] = t0
            send_action[a["buffer"]] = a
        elif op == "wait_send" and a["buffer"] in send_start:
            s = send_action.pop(a["buffer"])
            start = send_start.pop(a["buffer"])
            sst = s.get("stage", {})
            module = modules[sst["module"]] if sst.get("module", -1) in range(len(modules)) \
                else "?"
            pass_short = PASS_SHORT.get(sst.get("pass", ""), "?")
            mb = microbatch_label(sst) if "mb" in sst else "?"
            events.append({
                "ph": "X", "name": f"send {module} {pass_short} mb{mb}", "cat": "transfer",
                "pid": pid, "tid": SEND_TID_BASE + a["peer"], "ts": (start - origin_s) * 1e6,
                "dur": max(t1 - start, 0.0) * 1e6, "cname": "generic_work",
                "args": {"buffer": a["buffer"], "dst_group": a["peer"], "iteration": iteration,
                         "dst_label": labels.get(a["peer"], "")}})
    return events


def metadata_events(plan: dict) -> list[dict]:
    """process_name / thread_name metadata: one process per rank, its compute and send tracks."""
    events: list[dict] = []
    labels = {r["rank"]: r.get("label") or f"g{r['rank']}" for r in plan["ranks"]}
    for r in plan["ranks"]:
        rank, pid = r["rank"], r["rank"] + 1
        events += [
            {"ph": "M", "name": "process_name", "pid": pid, "args": {"name": labels[rank]}},
            {"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": rank}},
            {"ph": "M", "name": "thread_name", "pid": pid, "tid": COMPUTE_TID,
             "args": {"name": "compute"}},
            {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": COMPUTE_TID,
             "args": {"sort_index": 0}},
        ]
        peers = sorted({a["peer"] for a in r["actions"] if a["op"] == "isend"})
        for d in peers:
            events += [
                {"ph": "M", "name": "thread_name", "pid": pid, "tid": SEND_TID_BASE + d,
                 "args": {"name": f"send \u2192 {labels.get(d, f'g{d}')}"}},
                {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": SEND_TID_BASE + d,
                 "args": {"sort_index": 2 + d}},
            ]
    return events


def build_trace(iterations: list[dict], title: str = "", extra_events=None,
                pool_capacity_bytes: int | None = None) -> dict:
    """iterations: [{iteration, plan, records: {rank: [(index, t0, t1), ...]}}] (wall-clock
    perf_counter seconds). Returns the Chrome trace object (weft-trace-v1 layout, measured).
    extra_events(origin_s) adds events on the same clock (the pool's counter and fetches,
    weft.runtime.pool.pool_trace_events); pool_capacity_bytes names the pool in otherData
    "buffers" as the simulator's window trace does."""
    if not iterations:
        raise ValueError("no iterations to trace")
    starts = [t0 for it in iterations for recs in it["records"].values() for _, t0, _ in recs]
    origin_s = min(starts) if starts else 0.0
    events = metadata_events(iterations[0]["plan"])
    for it in iterations:
        for rank, recs in sorted(it["records"].items()):
            events += action_events(it["plan"], rank, recs, origin_s, it["iteration"])
    if extra_events is not None:
        events += extra_events(origin_s)
    other = {"source": "weft runtime (measured)", "title": title, "layout": "weft-trace-v1",
             "iterations": len(iterations)}
    if pool_capacity_bytes is not None:
        other["buffers"] = [{"name": "pool", "capacity_bytes": pool_capacity_bytes}]
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": other}


def write_trace(path: str, iterations: list[dict], title: str = "", extra_events=None,
                pool_capacity_bytes: int | None = None) -> dict:
    """Writes build_trace(...) as JSON to `path`; returns it."""
    trace = build_trace(iterations, title, extra_events, pool_capacity_bytes)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(trace, f)
    return trace
