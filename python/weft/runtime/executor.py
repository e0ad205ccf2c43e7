"""Executes weft execution plans (weft.plan/v1) with one worker process per pipeline rank.

Each worker builds only the model chunks its rank holds, then runs its rank's actions in order:
forward / backward / backward_input / backward_weight on chunks, isend / irecv of boundary
buffers over torch.distributed (gloo on 127.0.0.1), wait_send / wait_recv (polled with a
timeout, never hanging), free. Errors name the rank, the action index, the action and the peer.
"""
from __future__ import annotations

import os
import queue as queue_mod
import re
import socket
import time
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from weft.runtime.model import MicrobatchData, ModuleChunk, batch_llm_tokens, even_slice


class PlanExecutionError(RuntimeError):
    """A rank could not execute its plan (bad plan, timeout, shape mismatch)."""


def describe(action: dict) -> str:
    op = action["op"]
    st = action.get("stage", {})
    if op in ("forward", "backward", "backward_input", "backward_weight"):
        sub = f".{st['sub']}" if st.get("sub") else ""
        return f"{op} m{st['module']} c{st['chunk']} mb{st['mb']}{sub}"
    if op in ("isend", "wait_send"):
        return f"{op} buf {action['buffer']} to rank {action['peer']}"
    if op in ("irecv", "wait_recv"):
        return f"{op} buf {action['buffer']} from rank {action['peer']}"
    return f"{op} buf {action['buffer']}"


_STAGE_NAME = re.compile(r"g(\d+) (\w+) mb(\d+)\.(\d+) c(\d+) (\S+)")


def buffer_ends(name: str):
    """((pass, mb, sub, module name) of the producing stage, same of the consuming stage) from a
    buffer name "g1 F mb0.1 c0 vision_projector -> g2 F mb0.0 c0 llm"; backward buffers name
    the consumer first, so they are swapped here (producer = the module whose output it is).
    None for a name in another form."""
    parts = name.split(" -> ")
    if len(parts) != 2:
        return None
    m = [_STAGE_NAME.fullmatch(p.strip()) for p in parts]
    if not all(m):
        return None
    a, b = [(x.group(2), int(x.group(3)), int(x.group(4)), x.group(6)) for x in m]
    return (b, a) if a[0] != "F" else (a, b)


class RankExecutor:
    """State of one rank across iterations: its chunks (parameters persist) and the SGD step."""

    def __init__(self, rank: int, model: dict, chunks: list[dict], seed: int, lr: float,
                 timeout_s: float):
        self.rank, self.model, self.seed, self.lr, self.timeout_s = rank, model, seed, lr, timeout_s
        self.history: list[int] = []  # iterations run, in order
        self.chunks: dict[tuple[int, int], ModuleChunk] = {}
        for c in chunks:
            if c["group"] == rank:
                self.chunks[(c["module"], c["chunk"])] = ModuleChunk(
                    model, c["module"], c["first_layer"], c["num_layers"], seed)

    def params(self) -> dict[str, torch.nn.Parameter]:
        out = {}
        for chunk in self.chunks.values():
            out.update(chunk.parameter_names())
        return out

    def _fail(self, index: int, action: dict, why: str):
        raise PlanExecutionError(f"rank {self.rank} action {index} ({describe(action)}): {why}")

    def _wait(self, index: int, action: dict, work) -> None:
        # gloo's p2p works report completion only through wait(); wait with a timeout.
        try:
            work.wait(timeout=timedelta(seconds=self.timeout_s))
        except RuntimeError as e:
            what = "no data from" if action["op"] == "wait_recv" else "no matching receive on"
            self._fail(index, action, f"timed out after {self.timeout_s:g} s: {what} rank "
                       f"{action['peer']} ({str(e).splitlines()[0][-60:]})")

    def _gradient_targets(self, index: int, action: dict, input_ids: list[int],
                          ends: dict) -> list[tuple[int, int]]:
        """(gradient output buffer, index of the forward input it is the gradient of) for a
        backward action. Matched by the producing stage both buffer names give (module,
        microbatch, sub-microbatch): a stage may send gradients to only some of its producers
        (none to a frozen module that has no backward). Positional when names are not parsed."""
        outputs = action["outputs"]
        by_producer = {}
        for x_index, b in enumerate(input_ids):
            e = ends.get(b)
            if e is None:
                by_producer = None
                break
            by_producer[(e[0][1], e[0][2], e[0][3])] = x_index
        if by_producer is None or any(ends.get(b) is None for b in outputs):
            if len(outputs) > len(input_ids):
                self._fail(index, action, f"{len(outputs)} gradient outputs for "
                           f"{len(input_ids)} forward inputs")
            return list(zip(outputs, range(len(outputs))))
        out = []
        for b in outputs:
            p = ends[b][0]
            if (p[1], p[2], p[3]) not in by_producer:
                self._fail(index, action, f"gradient buf {b} goes to m {p[3]} mb{p[1]}.{p[2]}, "
                           f"which fed this stage no input")
            out.append((b, by_producer[(p[1], p[2], p[3])]))
        return out

    def run_iteration(self, plan: dict, batch: dict, microbatches: list[list[int]],
                      on_action=None) -> dict:
        """Runs this rank's actions of `plan` on `batch`, then the SGD step. Returns {loss, grads}.

        on_action, when given, is called as on_action(index, action, t_start_s, t_end_s) after
        each action, with time.perf_counter() timestamps taken around the action."""
        rank_plan = plan["ranks"][self.rank]
        specs = {b["id"]: b["shape"] for b in rank_plan["buffers"]}
        # A buffer's ends are in its name: "g1 F mb0.1 c0 vision_projector -> g2 F mb0.0 c0 llm".
        ends = {b["id"]: buffer_ends(b.get("name", "")) for b in rank_plan["buffers"]}
        producers = {b: e[0][3] if e else "" for b, e in ends.items()}
        module_index = {m["name"]: i for i, m in enumerate(self.model["modules"])}
        # Sub-microbatches per (module, microbatch): DIP slices a module's instances evenly.
        num_subs: dict[tuple[int, int], int] = {}
        for r in plan["ranks"]:
            for a in r["actions"]:
                if a["op"] == "forward":
                    k = (a["stage"]["module"], a["stage"]["mb"])
                    num_subs[k] = max(num_subs.get(k, 1), a["stage"].get("sub", 0) + 1)
        denom = float(batch_llm_tokens(batch))
        mb_data: dict[int, MicrobatchData] = {}
        views: dict[tuple[int, int, int], tuple[MicrobatchData, tuple[int, int]]] = {}

        def view_of(module: int, mb: int, sub: int):
            """(data view, instance range) of a stage's sub-microbatch."""
            k = (module, mb, sub)
            if k not in views:
                n = len(mb_data[mb].instances(module))
                rng = even_slice(n, num_subs.get((module, mb), 1), sub)
                views[k] = (mb_data[mb].restrict(module, *rng), rng)
            return views[k]

        def routed(b: int, producer_side: bool):
            """Rows of the producer's output a cross-module buffer carries (None: all rows)."""
            e = ends[b]
            if not e or e[0][3] == e[1][3]:
                return None
            (_, mb, ps, pname), (_, _, cs, cname) = e
            pm, cm = module_index[pname], module_index[cname]
            return mb_data[mb].routed_rows(pm, view_of(pm, mb, ps)[1], cm,
                                           view_of(cm, mb, cs)[1])
        buffers: dict[int, torch.Tensor] = {}
        sends: dict[int, object] = {}
        recvs: dict[int, tuple[object, torch.Tensor]] = {}
        saved: dict[tuple, tuple] = {}  # (input buffer ids, inputs, output[, output grad])
        loss = 0.0
        for i, a in enumerate(rank_plan["actions"]):
            t_start_s = time.perf_counter() if on_action is not None else 0.0
            op = a["op"]
            st = a.get("stage", {})
            key = (st.get("module"), st.get("chunk"), st.get("mb"), st.get("sub", 0))
            if op == "forward":
                chunk = self.chunks.get((st["module"], st["chunk"]))
                if chunk is None:
                    self._fail(i, a, "this rank holds no such chunk")
                mb = st["mb"]
                if mb not in mb_data:
                    if mb >= len(microbatches):
                        self._fail(i, a, f"microbatch {mb} not in the batch ({len(microbatches)})")
                    mb_data[mb] = MicrobatchData(self.model, batch, microbatches[mb], self.seed,
                                                 denom)
                inputs = []
                for b in a["inputs"]:
                    if b not in buffers:
                        self._fail(i, a, f"input buf {b} is not ready")
                    inputs.append(buffers[b].detach().reshape(-1, buffers[b].shape[-1])
                                  .requires_grad_())
                # Inputs from other modules: per producer module, its sub-microbatches' rows
                # in sub order (= instance order).
                by_source: dict[str, list[tuple[int, torch.Tensor]]] = {}
                for b, x in zip(a["inputs"], inputs):
                    by_source.setdefault(producers.get(b, ""), []).append(
                        (ends[b][0][2] if ends[b] else 0, x))
                sources = list(by_source)
                joined = [torch.cat([x for _, x in sorted(by_source[n], key=lambda t: t[0])])
                          for n in sources]
                data = view_of(st["module"], mb, st.get("sub", 0))[0]
                out = chunk(joined, data, sources)
                saved[key] = (a["inputs"], inputs, out)
                if out.dim() == 0:
                    loss += float(out.detach())
                for b in a["outputs"]:
                    shape = specs[b]
                    rows = routed(b, True)
                    part = out if rows is None else out[rows]
                    if part.numel() != torch.Size(shape).numel():
                        self._fail(i, a, f"output has {list(part.shape)}; plan buf {b} is "
                                   f"{shape}")
                    buffers[b] = part.detach().reshape(shape)
            elif op in ("backward", "backward_input", "backward_weight"):
                if key not in saved:
                    self._fail(i, a, "no forward of this stage ran before")
                input_ids, inputs, out = saved[key][:3]
                grad = None
                if op == "backward_weight" and len(saved[key]) == 4:
                    grad = saved[key][3]  # the output gradient its backward_input consumed
                elif out.dim() != 0:
                    if not a["inputs"] and out.numel() != 0:
                        self._fail(i, a, "no output gradient among the inputs")
                    # A stage with no work in this microbatch (no audio clip): zero gradient.
                    grad = torch.zeros_like(out)
                    for b in a["inputs"]:
                        if b not in buffers:
                            self._fail(i, a, f"gradient buf {b} is not ready")
                        rows = routed(b, False)
                        if rows is None:
                            grad = grad + buffers[b].reshape(out.shape)
                        else:  # a consumer sub-microbatch's share of this output
                            grad = grad.index_add(0, rows, buffers[b].reshape(len(rows), -1))
                if op == "backward_weight":
                    params = list(self.chunks[(st["module"], st["chunk"])].parameters())
                    pg = torch.autograd.grad(out, params, grad, allow_unused=True)
                    for p, g in zip(params, pg):
                        if g is not None:
                            p.grad = g if p.grad is None else p.grad + g
                    del saved[key]
                    if on_action is not None:
                        on_action(i, a, t_start_s, time.perf_counter())
                    continue
                # No graph behind the output: a frozen chunk whose inputs need no gradient
                # (or a stage with no work in this microbatch): every input gradient is zero.
                live = out.requires_grad
                if op == "backward_input":
                    igrads = torch.autograd.grad(out, inputs, grad, retain_graph=True,
                                                 allow_unused=True) \
                        if inputs and live else [None] * len(inputs)
                    saved[key] = (input_ids, inputs, out, grad)
                else:
                    if live:
                        out.backward(grad)
                    igrads = [x.grad for x in inputs]
                    del saved[key]
                for b, x_index in self._gradient_targets(i, a, input_ids, ends):
                    g, x = igrads[x_index], inputs[x_index]
                    buffers[b] = (g if g is not None else torch.zeros_like(x)).detach() \
                        .reshape(specs[b])
            elif op == "isend":
                b = a["buffer"]
                if b not in buffers:
                    self._fail(i, a, "buffer is not ready")
                sends[b] = dist.isend(buffers[b].contiguous(), a["peer"])
            elif op == "irecv":
                b = a["buffer"]
                t = torch.empty(specs[b])
                recvs[b] = (dist.irecv(t, a["peer"]), t)
            elif op == "wait_send":
                if a["buffer"] not in sends:
                    self._fail(i, a, "no isend of this buffer was posted")
                self._wait(i, a, sends.pop(a["buffer"]))
            elif op == "wait_recv":
                if a["buffer"] not in recvs:
                    self._fail(i, a, f"no irecv of this buffer was posted (peer rank {a['peer']})")
                work, t = recvs.pop(a["buffer"])
                self._wait(i, a, work)
                buffers[a["buffer"]] = t
            elif op == "free":
                if a["buffer"] in sends:
                    self._fail(i, a, "freed while its send is in flight")
                buffers.pop(a["buffer"], None)
            else:
                self._fail(i, a, f"unknown op {op!r}")
            if on_action is not None:
                on_action(i, a, t_start_s, time.perf_counter())
        if sends or recvs:
            raise PlanExecutionError(
                f"rank {self.rank}: end of plan with posts never waited for: sends {sorted(sends)}, "
                f"receives {sorted(recvs)}")
        grads = {n: (p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p))
                 for n, p in self.params().items()}
        with torch.no_grad():
            for p in self.params().values():
                if p.grad is not None:
                    p -= self.lr * p.grad
                p.grad = None
        return {"loss": loss, "grads": grads}

    def param_values(self) -> dict[str, torch.Tensor]:
        """Copies of this rank's parameters by global name (after the last SGD step)."""
        return {n: p.detach().clone() for n, p in self.params().items()}


def _stream_worker(rank: int, world: int, port: int, model: dict, chunks: list[dict], seed: int,
                   lr: float, timeout_s: float, record: bool, keep_grads: bool, keep_params: bool,
                   jobs, results, source=None) -> None:
    try:
        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world, timeout=timedelta(seconds=max(timeout_s, 30)))
        ex = RankExecutor(rank, model, chunks, seed, lr, timeout_s)
        # With a source, rank 0 plans (source() gives its next_job) and broadcasts every job to
        # the other ranks over torch.distributed; else each job comes from the parent's queue.
        next_job = source() if source is not None and rank == 0 else None
        previous = None
        while True:
            if source is not None:
                box = [next_job(len(ex.history), previous) if rank == 0 else None]
                dist.broadcast_object_list(box, src=0)
                job = box[0]
            else:
                job = jobs.get()
            if job is None:
                break
            records: list[tuple[int, float, float]] = []
            on_action = (lambda i, a, t0, t1: records.append((i, t0, t1))) if record else None
            dist.barrier()
            t0 = time.perf_counter()
            r = ex.run_iteration(job["plan"], job["batch"], job["microbatches"],
                                 on_action=on_action)
            wall_s = time.perf_counter() - t0
            grads = {n: g.numpy() for n, g in r["grads"].items()} if keep_grads else {}
            out = {"step": len(ex.history), "iteration": job["iteration"], "loss": r["loss"],
                   "wall_s": wall_s, "grads": grads, "records": records}
            ex.history.append(job["iteration"])
            previous = {"iteration": job["iteration"], "loss": r["loss"], "wall_s": wall_s}
            if source is not None and rank == 0:
                out["job"] = job  # the parent learns the plan from the rank that made it
            results.put(("ok", rank, out))
        dist.barrier()
        dist.destroy_process_group()
        params = ({n: v.numpy() for n, v in ex.param_values().items()} if keep_params else {})
        results.put(("done", rank, params))
    except Exception as e:  # reported to the parent, which raises
        msg = str(e) if isinstance(e, PlanExecutionError) else traceback.format_exc()
        results.put(("error", rank, msg))
        results.close()
        results.join_thread()
        os._exit(1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_plans(model: dict, chunks: list[dict], jobs: list[dict], num_ranks: int, seed: int = 1,
              lr: float = 0.1, timeout_s: float = 30.0) -> list[dict]:
    """Runs the iterations `jobs` ({plan (parsed JSON), batch, microbatches}) on num_ranks worker
    processes. Returns per iteration {loss, grads (all ranks' parameters), wall_s}; the last one
    also has params (every parameter after its SGD step). Raises
    PlanExecutionError with every failing rank's message."""
    jobs = [dict(job, iteration=job.get("iteration", i)) for i, job in enumerate(jobs)]
    runs = run_streamed(model, chunks, num_ranks,
                        lambda i, _: jobs[i] if i < len(jobs) else None, seed=seed, lr=lr,
                        timeout_s=timeout_s, keep_grads=True, keep_params=True)
    merged = []
    for run in runs:
        out = {"loss": run["loss"], "wall_s": run["wall_s"],
               "grads": {n: torch.from_numpy(g) for n, g in run["grads"].items()}}
        if "params" in run:
            out["params"] = {n: torch.from_numpy(v) for n, v in run["params"].items()}
        merged.append(out)
    return merged


def run_streamed(model: dict, chunks: list[dict], num_ranks: int,
                 next_job: Optional[Callable[[int, Optional[dict]], Optional[dict]]] = None,
                 seed: int = 1, lr: float = 0.1, timeout_s: float = 30.0, record: bool = False,
                 keep_grads: bool = False, keep_params: bool = False,
                 source: Optional[Callable[[], Callable]] = None) -> list[dict]:
    """Runs iterations on num_ranks worker processes, one at a time. A job is {iteration, plan
    (parsed JSON), batch, microbatches, ...}; None = stop. The jobs come either from
    next_job(i, previous merged result), called here in the parent for job 0 before any iteration
    runs and for job i + 1 once iteration i has finished on all ranks, or, with `source` (a
    picklable factory, e.g. OnlinePlannerSource), from rank 0: it calls source() once to get its
    next_job and broadcasts each job to the other ranks with torch.distributed. Planning ahead
    happens in next_job's own background threads (PlannerService).
    Returns per iteration {iteration, loss, wall_s, grads (numpy, when keep_grads),
    records {rank: [(index, t0, t1)]}, job}; with keep_params the last one also has params (every
    parameter after its SGD step, numpy). Raises PlanExecutionError with every failing rank's
    message; a rank that hangs fails on its own wait timeout (timeout_s)."""
    if (next_job is None) == (source is None):
        raise ValueError("run_streamed: give exactly one of next_job and source")
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    queues = [ctx.Queue() for _ in range(num_ranks)]
    port = free_port()
    procs = [ctx.Process(target=_stream_worker,
                         args=(r, num_ranks, port, model, chunks, seed, lr, timeout_s, record,
                               keep_grads, keep_params, queues[r], results, source), daemon=True)
             for r in range(num_ranks)]
    for p in procs:
        p.start()
    merged: list[dict] = []
    errors: list[tuple[int, str]] = []

    # Messages by step: ("ok", k) for the k-th iteration run, ("done",) at the end. A fast rank
    # may report step k + 1 before a slow rank's step k arrives; they wait here.
    pending: dict[tuple, dict[int, object]] = {}
    deadline_s = timeout_s + 60 + (180 if source is not None else 0)  # rank 0 may be planning

    def collect(step: int) -> tuple[str, dict[int, object]]:
        """Every rank's message of step `step` (or every rank's "done")."""
        deadline = time.monotonic() + deadline_s
        while True:
            for key in (("ok", step), ("done",)):
                if len(pending.get(key, {})) == num_ranks:
                    return key[0], pending.pop(key)
            if errors and (len(errors) >= num_ranks or not any(p.is_alive() for p in procs)
                           or time.monotonic() > deadline):
                break
            try:
                kind, rank, payload = results.get(timeout=1.0)
            except queue_mod.Empty:
                if time.monotonic() > deadline:
                    if errors:
                        break
                    raise PlanExecutionError("runtime: workers did not report before the deadline")
                continue
            if kind == "error":
                errors.append((rank, payload))
                deadline = min(deadline, time.monotonic() + timeout_s + 10)
                continue
            key = ("ok", payload["step"]) if kind == "ok" else ("done",)
            pending.setdefault(key, {})[rank] = payload
        errors.sort()
        raise PlanExecutionError("; ".join(msg for _, msg in errors))

    def merge(job: dict, outs: dict) -> dict:
        return {"iteration": job["iteration"], "job": job,
                "loss": sum(o["loss"] for o in outs.values()),
                "wall_s": max(o["wall_s"] for o in outs.values()),
                "grads": {n: g for o in outs.values() for n, g in o["grads"].items()},
                "records": {r: o["records"] for r, o in outs.items()}}

    try:
        if source is not None:
            while True:
                kind, outs = collect(len(merged))
                if kind == "done":
                    params = outs
                    break
                merged.append(merge(outs[0]["job"], outs))
        else:
            job = next_job(0, None)
            while job is not None:
                for q in queues:
                    q.put(job)
                kind, outs = collect(len(merged))
                if kind != "ok":
                    raise PlanExecutionError("runtime: workers ended before the last job")
                merged.append(merge(job, outs))
                job = next_job(len(merged), merged[-1])
            for q in queues:
                q.put(None)
            _, params = collect(len(merged))
        if keep_params and merged:
            merged[-1]["params"] = {n: v for p in params.values() for n, v in p.items()}
    finally:
        for p in procs:
            p.join(timeout=5 if not errors else 0.5)
            if p.is_alive():
                p.kill()
                p.join()
    return merged
