"""Measured iterations (schema weft.measured/v1, docs/plan_schema.md "Measured iterations").

What the runtime measured while it executed one iteration of a plan, in the plan's own terms,
for a planner to set beside its prediction (the C++ side reads it with plan::MeasuredFromJson;
weft.validate_measured checks a record against its plan):

  {"iteration": 3, "model": "tiny-vlm", "modules": ["vision", "projector", "llm"],
   "ranks": [{"rank": 0, "wall_s": 0.21}, ...],
   "stages": [{"action": 4, "group": 0, "instances": [0, 2], "measured_s": 0.0031,
               "planned_s": 0.0009, "rank": 0, "replica": 0,
               "stage": {"chunk": 0, "mb": 1, "module": 0, "pass": "forward", "sub": 0},
               "tokens": 128}, ...],
   "strategy": "megatron-1f1b"}

One stage per executed compute action, sorted by (rank, action): the action's stage as the plan
names it, the rank's replica and device group from the plan's data tables ((replica, group,
stage) names one stage of that replica's stage graph), its shape (instances [begin, end) of the
module in its microbatch and their tokens, from the plan's tables), the plan's latency_s and the
measured wall time around the action (executor.RankExecutor.run_iteration). Per rank the
iteration's wall time (from the barrier that starts it to the end of its SGD step). A file holds
{"schema": "weft.measured/v1", "iterations": [record, ...]}.
"""
from __future__ import annotations

import json

SCHEMA = "weft.measured/v1"


def measured_iteration(plan: dict, iteration: int,
                       per_rank: dict[int, tuple[list[dict], float]]) -> dict:
    """The record of one iteration of `plan` (its JSON dict) from each rank's (stages,
    wall_s): every rank of the plan must be present."""
    num_ranks = len(plan.get("ranks", []))
    missing = sorted(set(range(num_ranks)) - set(per_rank))
    if missing:
        raise ValueError(f"measured_iteration: no measurements of ranks {missing}")
    stages = sorted((s for r in range(num_ranks) for s in per_rank[r][0]),
                    key=lambda s: (s["rank"], s["action"]))
    return {"iteration": iteration, "model": plan.get("model", ""),
            "modules": list(plan.get("modules", [])),
            "ranks": [{"rank": r, "wall_s": per_rank[r][1]} for r in range(num_ranks)],
            "stages": stages, "strategy": plan.get("strategy", "")}


def measured_document(iterations: list[dict]) -> dict:
    """The weft.measured/v1 document of a list of records."""
    return {"iterations": list(iterations), "schema": SCHEMA}


def write_measured(path: str, iterations: list[dict]) -> dict:
    """Writes the records as one weft.measured/v1 document to `path`; returns the document."""
    doc = measured_document(iterations)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, sort_keys=True)
        f.write("\n")
    return doc
