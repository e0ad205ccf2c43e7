"""Plans iterations with weft, runs them on the runtime and on a single-process reference."""
from __future__ import annotations

import dataclasses
import json
import time

import torch

import weft
from weft.runtime.executor import load_plan, run_plans
from weft.runtime.measured import measured_document
from weft.runtime.model import build_chunks, reference_step


def plan_jobs(strategy: str, model: str = "tiny-vlm", iterations: int = 2, data: str = "coco-llava",
              seed: int = 1, **kwargs) -> tuple[dict, list[dict]]:
    """Plans `iterations` iterations; returns (first plan result, jobs for run_plans). kwargs go
    to weft.plan (world=True: world plans, every rank of every DP replica)."""
    jobs, first = [], None
    for it in range(iterations):
        t0 = time.perf_counter()
        r = weft.plan(strategy, model, data=data, iteration=it, seed=seed, **kwargs)
        jobs.append(job_from_plan(r, time.perf_counter() - t0))
        first = first or r
    return first, jobs


def model_chunks(plan) -> list[dict]:
    """The chunks that make up the model once, from a plan's chunk table (data.ranks): every
    distinct (module, first_layer, num_layers) of the module's DP replica 0 (the ranks of a
    world plan's other replicas, and an unfolded placement's other module replicas, hold copies
    of the same parameters)."""
    seen, out = set(), []
    for rank in load_plan(plan).data.ranks:
        for c in rank.chunks:
            key = (c.module, c.first_layer, c.num_layers)
            if c.module_replica == 0 and key not in seen:
                seen.add(key)
                out.append({"module": c.module, "first_layer": c.first_layer,
                            "num_layers": c.num_layers})
    return out


def reference(model_name: str, jobs: list[dict], seed: int = 1, lr: float = 0.1) -> list[dict]:
    """Single process: the model's chunks from the first plan's chunk table in model order, every
    microbatch of each job's plan (a world plan's: the whole global batch, every replica's), the
    same SGD. Returns per iteration {loss, grads, samples (per microbatch, the batch samples it
    ran)}; the last one also has params (after its SGD step)."""
    model = weft.load_model(model_name)
    # The bindings' topological order of the modules (ModelSpec::TopologicalOrder), then layers.
    position = {m: i for i, m in enumerate(model["topological_order"])}
    plans = [load_plan(job["plan"]) for job in jobs]
    ordered = sorted(model_chunks(plans[0]) if plans else [],
                     key=lambda c: (position[c["module"]], c["first_layer"]))
    modules = build_chunks(model, ordered, seed)
    out = []
    for plan in plans:
        samples: list[list[int]] = []
        loss = reference_step(model, modules, plan, seed, samples)
        # Frozen modules' parameters get no gradient (zero here) and no SGD step.
        grads = {n: p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)
                 for m in modules for n, p in m.parameter_names().items()}
        with torch.no_grad():
            for m in modules:
                for p in m.parameters():
                    if p.grad is not None:
                        p -= lr * p.grad
                    p.grad = None
        out.append({"loss": loss, "grads": grads, "samples": samples})
    if out:
        out[-1]["params"] = {n: p.detach().clone() for m in modules
                             for n, p in m.parameter_names().items()}
    return out


def max_relative_error(a: dict, b: dict) -> float:
    """max over tensors of |a - b|_max / max(|b|_max, 1e-12); keys must match."""
    if set(a) != set(b):
        raise AssertionError(f"parameter sets differ: {sorted(set(a) ^ set(b))}")
    return max(float((a[k] - b[k]).abs().max() / max(float(b[k].abs().max()), 1e-12)) for k in a)


def run(strategy: str, model_name: str = "tiny-vlm", iterations: int = 2, timeout_s: float = 30.0,
        **kwargs):
    first, jobs = plan_jobs(strategy, model_name, iterations, **kwargs)
    runs = run_plans(weft.load_model(model_name), jobs, timeout_s=timeout_s)
    return first, jobs, runs


# Strategies whose PlanIteration searches (per-batch, within a time budget); the others are rules
# that plan in microseconds, so `python -m weft.train` plans them offline by default.
SEARCH_STRATEGIES = ("dip", "dip-interleave", "dip-reorder", "dip-partition-only", "nnscaler")


def job_from_plan(r: dict, plan_wall_s: float) -> dict:
    """A runtime job from a weft.plan-style dict: the plan (weft.plan/v3, which carries its data
    and chunk tables: the workers need nothing else) and, for reports, the iteration, the
    planning wall time and the planner's summary."""
    return {"iteration": r["iteration"], "plan": json.loads(r["plan_json"]),
            "plan_wall_s": plan_wall_s, "summary": r}


class OnlinePlanner:
    """Plans `lookahead` iterations ahead with weft.PlannerService while the ranks run.

    next_job(i, previous) is what weft.runtime.executor.run_streamed calls when iteration i is
    about to start. Iterations 0 .. lookahead - 1 are submitted up front; each call then
    1. reports the measured time of iteration i - 1 (from the previous call's return to this
       call: the cadence at which plans are needed, broadcast and barrier included) to the
       service, whose budget rule sizes the searches it starts next — except the first
       `warmup_iterations` iterations, whose time includes one-time warm-up (first torch calls,
       gloo connections);
    2. takes the plan of iteration i: for i = 0 it waits for the searched plan (first_timeout_s;
       nothing runs yet to overlap with), for i > 0 it waits at most deadline_s, then the
       service serves the fallback plan (and cancels the search);
    3. submits iteration i + lookahead, so its search overlaps iterations i .. i + lookahead - 1.
    The job carries `ready` (searched plan served), `reason` (the service's why), and the
    search's budget and timing. work_budget > 0 makes every search deterministic (work units,
    no time limit, no rule).
    learn_from_measured: `previous` (run_streamed's merged result of iteration i - 1) carries
    what the ranks measured (weft.measured/v1); it is reported to the service
    (PlannerService.report under `correction_rule`, a dict of alpha, min_ratio, max_ratio), so
    searches started afterwards plan with the measured correction. Off by default: measured
    times differ from run to run, so the plans would too."""

    def __init__(self, strategy: str, model: str, iterations: int, data: str = "coco-llava",
                 seed: int = 1, budget_s: float = 0.5, deadline_s: float = 0.0,
                 first_timeout_s: float = 120.0, threads: int = 1, lookahead: int = 2,
                 work_budget: int = 0, warmup_iterations: int = 1,
                 learn_from_measured: bool = False, correction_rule: dict | None = None,
                 **kwargs):
        self.iterations, self.deadline_s, self.first_timeout_s = iterations, deadline_s, \
            first_timeout_s
        self.lookahead, self.warmup_iterations = lookahead, warmup_iterations
        self.learn_from_measured = learn_from_measured
        self.correction_rule = dict(correction_rule or {})
        self.service = weft.PlannerService(strategy, model, data=data, seed=seed,
                                           budget_s=budget_s, threads=threads,
                                           lookahead=lookahead, work_budget=work_budget, **kwargs)
        self.submitted_at: dict[int, int] = {}  # iteration -> iteration during which submitted
        for it in range(min(lookahead, iterations)):
            self._submit(it, -1)
        self._handed_out_at: float | None = None

    def _submit(self, iteration: int, now_running: int) -> None:
        self.service.submit(iteration)
        self.submitted_at[iteration] = now_running

    def next_job(self, i: int, previous: dict | None = None) -> dict | None:
        if (self.learn_from_measured and previous is not None and "measured" in previous
                and previous["measured"]["iteration"] == i - 1):
            self.service.report(i - 1, json.dumps(measured_document([previous["measured"]])),
                                **self.correction_rule)
        if i >= self.iterations:
            return None
        period_s = None
        if i > 0 and self._handed_out_at is not None:
            period_s = time.perf_counter() - self._handed_out_at
            if i - 1 >= self.warmup_iterations:
                self.service.report_iteration_time(i - 1, period_s)
        t0 = time.perf_counter()
        r = self.service.get(i, self.first_timeout_s if i == 0 else self.deadline_s)
        job = job_from_plan(r, time.perf_counter() - t0)
        if i + self.lookahead < self.iterations:
            self._submit(i + self.lookahead, i)
        job.update(ready=not r["fallback"], reason=r["reason"], search_time_s=r["search_time_s"],
                   search_budget_s=r["search_budget_s"], work_budget=r["work_budget"],
                   ready_ahead_s=r["ready_ahead_s"], wait_time_s=r["wait_time_s"],
                   submitted_at=self.submitted_at.pop(i), previous_period_s=period_s)
        self._handed_out_at = time.perf_counter()
        return job


@dataclasses.dataclass
class OnlinePlannerSource:
    """A picklable recipe for an OnlinePlanner, built in rank 0's process: pass it as
    run_streamed(source=...) and rank 0 plans with weft.PlannerService while the ranks run,
    broadcasting each plan with torch.distributed (the way a torchrun job would work)."""
    strategy: str
    model: str
    iterations: int
    data: str = "coco-llava"
    seed: int = 1
    budget_s: float = 0.5
    deadline_s: float = 0.0
    lookahead: int = 2
    work_budget: int = 0
    # Report each iteration's measured stage times to the service (OnlinePlanner); the workers
    # then gather every rank's times on rank 0 once per iteration.
    learn_from_measured: bool = False
    correction_rule: dict = dataclasses.field(default_factory=dict)
    kwargs: dict = dataclasses.field(default_factory=dict)

    def __call__(self):
        planner = OnlinePlanner(self.strategy, self.model, self.iterations, data=self.data,
                                seed=self.seed, budget_s=self.budget_s,
                                deadline_s=self.deadline_s, lookahead=self.lookahead,
                                work_budget=self.work_budget,
                                learn_from_measured=self.learn_from_measured,
                                correction_rule=self.correction_rule, **self.kwargs)
        return planner.next_job
