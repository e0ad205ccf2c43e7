"""Train a tiny real model with weft plans: plan each iteration, execute it on one worker process
per pipeline rank, print loss, wall time and planning time.

  python -m weft.train --model tiny-vlm --strategy megatron-1f1b --procs 4 --iterations 5
"""
from __future__ import annotations

import argparse
import sys

import weft
from weft.runtime.executor import PlanExecutionError, run_plans
from weft.runtime.harness import max_relative_error, plan_jobs, reference


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m weft.train", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="tiny-vlm", help="model preset (the runtime builds tiny-vlm-"
                   "like models: ViT + MLP projector + LLM)")
    p.add_argument("--strategy", default="megatron-1f1b")
    p.add_argument("--procs", type=int, default=0,
                   help="worker processes = pipeline ranks of one pipeline (0 = the model's setup)")
    p.add_argument("--iterations", type=int, default=5)
    p.add_argument("--data", default="coco-llava", help="generator profile or data file")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout-s", type=float, default=60.0, help="per wait before failing")
    p.add_argument("--check", action="store_true",
                   help="also run a single-process reference and print the max gradient error")
    a = p.parse_args(argv)
    if a.iterations <= 0:
        print(f"error: --iterations = {a.iterations}; must be > 0", file=sys.stderr)
        return 2
    try:
        first, jobs = plan_jobs(a.strategy, a.model, a.iterations, data=a.data, seed=a.seed,
                                gpus=a.procs, pipeline_size=a.procs)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if first["dp"] != 1:
        print(f"error: --procs {a.procs} plans {first['pipeline_size']} pipeline ranks x DP "
              f"{first['dp']}; the runtime executes one pipeline (no DP all-reduce yet): use "
              f"--procs {first['pipeline_size']}", file=sys.stderr)
        return 2
    print(f"{a.strategy} on {first['model']}: {first['pipeline_size']} ranks, "
          f"{first['num_microbatches']} microbatches; {first['placement']}")
    try:
        runs = run_plans(weft.load_model(a.model), first["chunks"], jobs, first["pipeline_size"],
                         seed=a.seed, timeout_s=a.timeout_s)
    except PlanExecutionError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    refs = reference(a.model, first["chunks"], jobs, seed=a.seed) if a.check else None
    for it, (job, run) in enumerate(zip(jobs, runs)):
        line = (f"iteration {it}: loss {run['loss']:.6f}  wall {run['wall_s'] * 1e3:.1f} ms  "
                f"plan {job['plan_wall_s'] * 1e3:.1f} ms  simulated "
                f"{job['summary']['iteration_time_s'] * 1e3:.3f} ms")
        if refs:
            line += f"  max grad rel err {max_relative_error(run['grads'], refs[it]['grads']):.2e}"
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
