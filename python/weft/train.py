"""Train a tiny real model with weft plans: plan each iteration, execute it on one worker process
per GPU of the placement (every rank of every data-parallel replica: the world plan), print loss,
wall time and planning time.

  python -m weft.train --model tiny-vlm --strategy megatron-1f1b --procs 4 --iterations 5
      (tiny-vlm's pipeline has 2 stages: 4 processes = pp 2 x dp 2; --pp 4 for one pipeline)
  python -m weft.train --model tiny-vlm --strategy dip --procs 4 --iterations 5 --check \\
      --trace out/measured.json

Online planning (default for search strategies such as dip): rank 0 plans iteration i + 1 with
weft.PlannerService (background C++ threads) while the ranks run iteration i and broadcasts each
plan to the other ranks with torch.distributed; a plan that is not ready when its iteration starts
is replaced by the service's fallback plan. --offline plans
every iteration first (weft.plan), then runs them.

The pool (FlowTrain §3.2; default for flowtrain, flowtrain-no-allocator, flowtrain-no-scheduler;
--pool for any plan whose frozen encoders sit on ranks of their own): producer ranks run the
frozen encoders ahead, iteration after iteration, through bounded segments; the backbone ranks
fetch from them and update synchronously per global batch (weft.runtime.pool, docs/runtime.md):

  python -m weft.train --model tiny-vlm-frozen-vit --strategy flowtrain --procs 4 --iterations 6 --check
  python -m weft.train --model tiny-vlm-frozen-vit --procs 6 --pool --check \
      --placement presets/placements/tiny-vlm-frozen-vit-pool-pp2-dp2.yaml
"""
from __future__ import annotations

import argparse
import json
import math
import sys

import torch

import weft
from weft.runtime.executor import PlanExecutionError, run_streamed
from weft.runtime.harness import (SEARCH_STRATEGIES, OnlinePlannerSource, max_relative_error,
                                  plan_jobs, reference)
from weft.runtime.executor import load_plan
from weft.runtime.measured import write_measured
from weft.runtime.pool import pool_config, check_entries_fit, pool_summary, pool_trace_events
from weft.runtime.trace import write_trace

# The largest model the runtime trains (parameters over every module). It trains in fp32 on CPU
# processes: each worker holds its chunks' weights and gradients (8 bytes per parameter) and the
# --check reference holds the whole model again, so 100M parameters is ~0.8 GB per process
# before activations. The tiny presets have < 1M; a full-size model (vlm-s: 12.4B) would fail to
# allocate in the workers (docs/runtime.md "Model size").
MAX_TRAIN_PARAMETERS = 100_000_000

# Strategies whose plans stream through the pool by default (their static plan has a PoolSpec).
POOL_STRATEGIES = ("flowtrain", "flowtrain-no-allocator", "flowtrain-no-scheduler")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m weft.train", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="tiny-vlm", help="model preset: tiny-vlm (ViT + projector + LLM) or "
                   "tiny-valm (vision and audio encoders feeding one LLM)")
    p.add_argument("--strategy", default="megatron-1f1b")
    p.add_argument("--procs", type=int, default=0,
                   help="worker processes = GPUs of the placement: pipeline ranks x DP replicas "
                   "(0 = the model's setup)")
    p.add_argument("--pp", type=int, default=0,
                   help="pipeline ranks per replica (0 = the model's setup); DP = procs / pp")
    p.add_argument("--placement", default="",
                   help="user placement file (YAML, docs/placements.md; strategy manual, planned "
                   "offline), e.g. presets/placements/tiny-vlm-hetero-dp.yaml with --procs 4")
    p.add_argument("--iterations", type=int, default=5)
    p.add_argument("--data", default="coco-llava", help="generator profile or data file")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout-s", type=float, default=60.0, help="per wait before failing")
    p.add_argument("--check", action="store_true",
                   help="also run a single-process reference and print the max gradient error")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--online", dest="online", action="store_true", default=None,
                      help="plan iteration i+1 with PlannerService while iteration i runs "
                      f"(default for {', '.join(SEARCH_STRATEGIES)})")
    mode.add_argument("--offline", dest="online", action="store_false",
                      help="plan all iterations first, then run them")
    p.add_argument("--budget-s", type=float, default=0.5,
                   help="search budget per iteration (online: the first searches' budget and the "
                   "most the budget rule gives)")
    p.add_argument("--plan-deadline-s", type=float, default=0.0,
                   help="online: how long iteration i+1 may wait for its search after iteration "
                   "i ends before the fallback plan is used")
    p.add_argument("--lookahead", type=int, default=2,
                   help="online: plan this many iterations ahead; each search's time budget is "
                   "fitted to the measured iteration time (docs/runtime.md)")
    p.add_argument("--work-budget", type=int, default=0,
                   help="online: bound every search by deterministic work units instead of time "
                   "(same seed, same plans)")
    p.add_argument("--learn-from-measured", action="store_true",
                   help="online: report each iteration's measured stage times to the planner "
                   "service, whose cost correction then prices later searches (PlannerService."
                   "report; plans then vary from run to run with the timings)")
    pool = p.add_mutually_exclusive_group()
    pool.add_argument("--pool", dest="pool", action="store_true", default=None,
                      help="run the frozen encoders' ranks ahead through a bounded pool "
                      f"(default for {', '.join(POOL_STRATEGIES)}; offline planning)")
    pool.add_argument("--no-pool", dest="pool", action="store_false",
                      help="run every rank in lockstep, iteration by iteration")
    p.add_argument("--pool-device-bytes", type=int, default=1 << 20,
                   help="pool: each producer rank's device tier (bytes)")
    p.add_argument("--pool-host-bytes", type=int, default=1 << 20,
                   help="pool: each producer rank's host tier (bytes), used when the device "
                   "tier has no room")
    p.add_argument("--trace", default="", help="write a measured Chrome trace (JSON) here")
    p.add_argument("--measured", default="",
                   help="write the measured iterations (weft.measured/v1 JSON: per compute stage "
                   "its plan stage, shape and seconds; per rank the wall time) here")
    a = p.parse_args(argv)
    if weft.is_hf_config_path(a.model):
        print(f"error: --model {a.model}: a Hugging Face config describes a full-size model; "
              "python -m weft.train runs tiny models only (tiny-vlm, tiny-valm); use weft compare "
              "or weft.plan to plan it", file=sys.stderr)
        return 2
    if a.iterations <= 0:
        print(f"error: --iterations = {a.iterations}; must be > 0", file=sys.stderr)
        return 2
    if a.procs < 0 or a.pp < 0:
        print(f"error: --procs = {a.procs}, --pp = {a.pp}; must be >= 0", file=sys.stderr)
        return 2
    bad = [f"{name} = {value!r}" for name, value, ok in (
        ("--timeout-s", a.timeout_s, math.isfinite(a.timeout_s) and a.timeout_s > 0),
        ("--budget-s", a.budget_s, math.isfinite(a.budget_s) and a.budget_s > 0),
        ("--plan-deadline-s", a.plan_deadline_s,
         math.isfinite(a.plan_deadline_s) and a.plan_deadline_s >= 0),
        ("--seed", a.seed, a.seed >= 0),
        ("--pool-device-bytes", a.pool_device_bytes, a.pool_device_bytes >= 0),
        ("--pool-host-bytes", a.pool_host_bytes, a.pool_host_bytes >= 0)) if not ok]
    if bad:
        print(f"error: {bad[0]}: must be finite and > 0 (--plan-deadline-s, --seed and pool "
              f"sizes: >= 0)", file=sys.stderr)
        return 2
    if a.lookahead < 1 or a.work_budget < 0:
        print(f"error: --lookahead = {a.lookahead}, --work-budget = {a.work_budget}; must be "
              ">= 1 and >= 0", file=sys.stderr)
        return 2
    try:
        parameters = int(weft.load_model(a.model)["parameter_count"])
    except (ValueError, RuntimeError) as e:
        print(f"error: --model {a.model}: {e}", file=sys.stderr)
        return 2
    if parameters > MAX_TRAIN_PARAMETERS:
        print(f"error: --model {a.model} has {parameters / 1e6:,.1f}M parameters; python -m "
              f"weft.train runs models of at most {MAX_TRAIN_PARAMETERS // 1_000_000}M (fp32 "
              "weights and gradients in every CPU worker and the reference; the tiny presets "
              "have < 1M); plan it with weft compare / weft.plan instead", file=sys.stderr)
        return 2
    if a.placement:  # PlannerService takes no placement: plan offline
        if a.online:
            print("error: --placement plans offline (no --online)", file=sys.stderr)
            return 2
        a.strategy, a.online = "manual", False
    use_pool = a.strategy in POOL_STRATEGIES if a.pool is None else a.pool
    if use_pool and a.online:
        print("error: --pool runs offline-planned iterations (no --online)", file=sys.stderr)
        return 2
    online = (a.strategy in SEARCH_STRATEGIES and not use_pool) if a.online is None else a.online
    if a.learn_from_measured and not online:
        print("error: --learn-from-measured needs online planning (--online; not with --pool "
              "or --placement)", file=sys.stderr)
        return 2
    try:
        if online:
            # The placement (chunks) is static; a quick plan of iteration 0 gives it. Rank 0 then
            # plans every iteration with PlannerService and broadcasts the plans.
            # World plans: every rank of every DP replica, one worker process each.
            first = weft.plan(a.strategy, a.model, data=a.data, iteration=0, seed=a.seed,
                              gpus=a.procs, pipeline_size=a.pp, budget_s=0.01, world=True)
            source = OnlinePlannerSource(a.strategy, a.model, a.iterations, data=a.data,
                                         seed=a.seed, budget_s=a.budget_s,
                                         deadline_s=a.plan_deadline_s,
                                         lookahead=a.lookahead, work_budget=a.work_budget,
                                         learn_from_measured=a.learn_from_measured,
                                         kwargs={"gpus": a.procs, "pipeline_size": a.pp,
                                                 "world": True})
            jobs = None
        else:
            first, jobs = plan_jobs(a.strategy, a.model, a.iterations, data=a.data, seed=a.seed,
                                    gpus=a.procs, pipeline_size=a.pp, budget_s=a.budget_s,
                                    world=True, placement=a.placement)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if a.procs and first["num_ranks"] != a.procs:
        print(f"error: --procs {a.procs}: {first['model']} plans {first['pipeline_size']} "
              f"pipeline ranks x DP {first['dp']} = {first['num_ranks']} processes; use --procs "
              f"{first['num_ranks']} (or a multiple of the pipeline size)", file=sys.stderr)
        return 2
    # Folded: every replica runs the pipeline's ranks (the plan's data.ranks name the replicas).
    replicas = {x["replica"] for x in json.loads(first["plan_json"])["data"]["ranks"]}
    folded = len(replicas) * first["pipeline_size"] == first["num_ranks"]
    shape = (f"pp {first['pipeline_size']} x dp {first['dp']}" if folded
             else "per-module placement")
    print(f"{a.strategy} on {first['model']}: {first['num_ranks']} ranks ({shape}), "
          f"{first['num_microbatches']} microbatches; {first['placement']}; "
          f"{'online' if online else 'offline'} planning")
    model = weft.load_model(a.model)
    config = None
    if use_pool:
        try:
            config = pool_config(model, load_plan(first["plan_json"] if isinstance(
                first["plan_json"], dict) else json.loads(first["plan_json"])),
                a.pool_device_bytes, a.pool_host_bytes)
            for job in jobs:
                check_entries_fit(load_plan(job["plan"]), config)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(config.describe())
    def next_job(i: int, prev: dict | None) -> dict | None:
        return jobs[i] if i < len(jobs) else None
    try:
        runs = run_streamed(model, first["num_ranks"],
                            None if online else next_job, source=source if online else None,
                            seed=a.seed, timeout_s=a.timeout_s, record=bool(a.trace),
                            keep_grads=a.check, pool=config)
        jobs = [r["job"] for r in runs]
    except PlanExecutionError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    refs = reference(a.model, jobs, seed=a.seed) if a.check else None
    stats = pool_summary(runs, config) if config else None
    errors = []
    for it, (job, run) in enumerate(zip(jobs, runs)):
        wall_s = stats[it]["consumer_wall_s"] if stats else run["wall_s"]
        line = (f"iteration {it}: loss {run['loss']:.6f}  wall {wall_s * 1e3:.1f} ms  "
                f"plan {job['plan_wall_s'] * 1e3:.1f} ms  simulated "
                f"{job['summary']['iteration_time_s'] * 1e3:.3f} ms")
        if stats:
            s = stats[it]
            line += (f"  pool peak {s['pool_peak_bytes'] / 1024:.0f} of "
                     f"{s['pool_capacity_bytes'] / 1024:.0f} KiB, producers "
                     f"{s['producer_lead']:+d} ahead, consumer wait "
                     f"{s['consumer_wait_s'] * 1e3:.1f} ms, producer blocked "
                     f"{s['producer_blocked_s'] * 1e3:.1f} ms")
        if refs:
            grads = {n: torch.from_numpy(g) for n, g in run["grads"].items()}
            errors.append(max_relative_error(grads, refs[it]["grads"]))
            line += f"  max grad rel err {errors[-1]:.2e}"
        if online:  # "searched: ..." or "fallback: ...", and why
            line += f"  {job['reason']}"
        print(line, flush=True)
    if online:
        searched = sum(job["ready"] for job in jobs)
        print(f"online planning: {searched} of {len(jobs)} iterations searched, "
              f"{len(jobs) - searched} fallback (lookahead {a.lookahead})")
    if stats:
        steady = stats[1:] or stats
        wait_s = sum(s["consumer_wait_s"] for s in steady)
        wall_s = sum(s["consumer_wall_s"] for s in steady)
        print(f"pool: peak {max(s['pool_peak_bytes'] for s in stats) / 1024:.0f} KiB of "
              f"{config.capacity_bytes / 1024:.0f} KiB (segments' peak "
              f"{max(s['segment_peak_bytes'] for s in stats) / 1024:.0f} KiB); producers "
              f"ahead by {min(s['producer_lead'] for s in steady)} to "
              f"{max(s['producer_lead'] for s in steady)} iterations after iteration 0; "
              f"consumer starved {100 * wait_s / wall_s if wall_s else 0:.1f}% of its time "
              f"(waiting for the pool)")
    if a.trace:
        write_trace(a.trace, [{"iteration": it, "plan": job["plan"], "records": run["records"]}
                              for it, (job, run) in enumerate(zip(jobs, runs))],
                    title=f"{a.strategy} on {first['model']} (measured)",
                    extra_events=(lambda origin_s: pool_trace_events(
                        runs, config, first["num_ranks"], origin_s)) if config else None,
                    pool_capacity_bytes=config.capacity_bytes if config else None)
        print(f"wrote {a.trace}")
    if a.measured:
        write_measured(a.measured, [run["measured"] for run in runs])
        print(f"wrote {a.measured}")
    if refs:
        worst = max(range(len(errors)), key=errors.__getitem__)
        ok = errors[worst] <= 1e-5
        print(f"{'PASS' if ok else 'FAIL'}: max grad rel err {errors[worst]:.2e} "
              f"(iteration {worst}) {'<=' if ok else '>'} 1e-05 over {len(errors)} iterations")
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
