"""Executes weft execution plans with one worker process per rank of the plan.

A plan is one pipeline (weft.plan) or a world plan (weft.plan(..., world=True): every rank of
every data-parallel replica), schema weft.plan/v3: it carries its data tables, so a job is the
plan alone. Each worker builds only the model chunks its rank holds (the plan's
data.ranks[rank].chunks, the same in every plan of a run), then runs its rank's actions in
order, one executor method per op (weft.runtime.plan.Op): forward / backward / backward_input /
backward_weight on chunks, isend / irecv of boundary buffers over torch.distributed (gloo on
127.0.0.1), wait_send / wait_recv (polled with a timeout, never hanging), free, and
all_reduce_grads: a SUM all-reduce of the module's gradients over the action's `ranks`, on a
gloo process group per (module, ranks) (created from the plan, in the same order on every rank;
docs/runtime.md). Errors name the rank, the action index, the action and the peer; a collective
that a member never joins times out naming the module, the ranks and the members that never
arrived.

Every iteration also yields a measured record (weft.measured/v1, weft.runtime.measured): per
executed compute action its plan stage, shape (instances and tokens from the plan's tables) and
measured seconds, per rank the iteration's wall time. A test may slow one module's pass down
for one input shape (inject_slowdown) to check that a planner learns it.
"""
from __future__ import annotations

import dataclasses
import math
import os
import queue as queue_mod
import socket
import time
import traceback
from datetime import timedelta
from typing import Callable, Optional

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from weft.runtime.measured import measured_iteration
from weft.runtime.model import MicrobatchData, ModuleChunk
from weft.runtime.plan import PASSES, Action, Chunk, ExecutionPlan, Op, StageKey, parse_plan
from weft.runtime.pool import (PoolConfig, PoolState, gloo_reason, pool_irecv, pool_put,
                               pool_wait_recv)


class PlanExecutionError(RuntimeError):
    """A rank could not execute its plan (bad plan, timeout, shape mismatch)."""


def module_layers(plan: ExecutionPlan, rank: int, module: int) -> list[tuple[int, int]]:
    """The layers of `module` that `rank` of the plan holds (its data.ranks chunk table), as
    sorted maximal ranges (first, count): two ranks whose chunks cut the same layers differently
    hold the same parameters."""
    layers = sorted({layer for c in plan.data.ranks[rank].chunks if c.module == module
                     for layer in range(c.first_layer, c.first_layer + c.num_layers)})
    out: list[tuple[int, int]] = []
    for layer in layers:
        if out and out[-1][0] + out[-1][1] == layer:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((layer, 1))
    return out


def load_plan(plan: dict | ExecutionPlan) -> ExecutionPlan:
    """A parsed plan that can run: parse_plan's checks, and its data tables present (a plan
    compiled from a bare stage graph has none). Raises ValueError naming the problem."""
    if not isinstance(plan, ExecutionPlan):
        plan = parse_plan(plan)
    if not plan.data.has_data:
        raise ValueError("plan: no data tables (a plan compiled from a bare stage graph); run a "
                         "plan from weft.plan(...) or `weft plan ... --out FILE`")
    return plan


@dataclasses.dataclass(frozen=True)
class Slowdown:
    """Test-only: after each compute action of `module` in pass `pass_` (whose stage has
    `tokens` tokens in the plan's tables, any when None) sleep (factor - 1) x its measured time,
    so that the action takes `factor` times as long."""
    module: int
    pass_: str
    factor: float
    tokens: Optional[int] = None

    @staticmethod
    def parse(model: dict, spec: Optional[dict]) -> Optional["Slowdown"]:
        """From {"module": name, "pass": "forward", "factor": 3.0, "tokens": N (optional)};
        ValueError naming a bad field."""
        if spec is None:
            return None
        names = [m["name"] for m in model["modules"]]
        unknown = set(spec) - {"module", "pass", "factor", "tokens"}
        if unknown:
            raise ValueError(f"inject_slowdown: unknown keys {sorted(unknown)}")
        if spec.get("module") not in names:
            raise ValueError(f"inject_slowdown: module = {spec.get('module')!r}; must be one of "
                             f"{', '.join(names)}")
        if spec.get("pass", "forward") not in PASSES:
            raise ValueError(f"inject_slowdown: pass = {spec.get('pass')!r}; must be one of "
                             f"{', '.join(PASSES)}")
        factor = spec.get("factor")
        if not isinstance(factor, (int, float)) or isinstance(factor, bool) or \
                not 1.0 <= factor <= 1000.0:
            raise ValueError(f"inject_slowdown: factor = {factor!r}; must be in [1, 1000]")
        tokens = spec.get("tokens")
        if tokens is not None and (not isinstance(tokens, int) or isinstance(tokens, bool)
                                   or tokens < 0):
            raise ValueError(f"inject_slowdown: tokens = {tokens!r}; must be an integer >= 0")
        return Slowdown(names.index(spec["module"]), spec.get("pass", "forward"), float(factor),
                        tokens)

    def matches(self, a: Action, tokens: int) -> bool:
        return (a.op.is_compute and a.stage.module == self.module and a.op.value == self.pass_
                and (self.tokens is None or tokens == self.tokens))


class _Iteration:
    """What one rank holds during one iteration of a plan."""

    def __init__(self, plan: ExecutionPlan, rank: int, step: int, iteration: int = 0):
        self.plan = plan
        self.step = step  # iterations this executor ran before (names the collectives' keys)
        self.iteration = iteration  # the job's iteration (names pool entries)
        self.pooled: set[int] = set()  # buffers sent into / fetched from the pool (pool.py)
        self.rank_plan = plan.ranks[rank]
        # The stage data of this rank's replica (a world plan numbers microbatches per replica).
        self.replica = plan.data.ranks[rank].replica
        self.group = plan.data.ranks[rank].group
        self.stage_instances = plan.replica_instances.get(self.replica, {})
        self.stage_samples = plan.replica_samples.get(self.replica, {})
        self.denom = float(plan.data.loss_tokens)
        self.mb_data: dict[int, MicrobatchData] = {}
        # (module, microbatch, sub) -> (data view, instance range)
        self.views: dict[tuple[int, int, int], tuple[MicrobatchData, tuple[int, int]]] = {}
        self.buffers: dict[int, torch.Tensor] = {}
        self.sends: dict[int, object] = {}
        self.recvs: dict[int, tuple[object, torch.Tensor]] = {}
        # stage -> (input buffer ids, inputs, output[, output grad kept for backward_weight])
        self.saved: dict[StageKey, tuple] = {}
        self.rows: dict[int, Optional[torch.Tensor]] = {}  # buffer -> routed rows (cache)
        self.loss = 0.0


class RankExecutor:
    """State of one rank across iterations: its chunks (parameters persist) and the SGD step.

    run_iteration executes a plan's actions for this rank in order, one method per Op (a
    dispatch table; the plan is parsed into typed actions once per iteration by parse_plan).
    The rank's chunks come from the first plan it runs (data.ranks[rank].chunks); every later
    plan must give it the same chunks. store: the torch.distributed store of the workers (a
    collective's members record their arrival there, so that a timeout names who never joined;
    None: not recorded). The data-parallel process groups are created from each plan's
    all_reduce_grads `ranks` (ensure_groups). slowdown: test-only (Slowdown)."""

    def __init__(self, rank: int, model: dict, seed: int, lr: float, timeout_s: float,
                 store=None, slowdown: Optional[Slowdown] = None):
        self.rank, self.model, self.seed, self.lr, self.timeout_s = rank, model, seed, lr, timeout_s
        self.store = store
        self.slowdown = slowdown
        self.module_names = [m["name"] for m in model["modules"]]
        self.history: list[int] = []  # iterations run, in order
        self._step = 0  # iterations started
        # Process group per (module, ranks) of an all_reduce_grads with more than one member.
        self.groups: dict[tuple[int, tuple[int, ...]], object] = {}
        self.chunks: dict[tuple[int, int], ModuleChunk] = {}
        self.chunk_table: Optional[tuple[Chunk, ...]] = None  # this rank's, from the first plan
        # The pool (weft.runtime.pool), set by the worker in pool mode: pool_config on every rank,
        # pool (the segment) on a producer; fetches: a consumer's measured fetches.
        self.pool_config: Optional[PoolConfig] = None
        self.pool: Optional[PoolState] = None
        self.fetches: list[dict] = []
        self._handlers = {
            Op.FORWARD: self._forward,
            Op.BACKWARD: self._backward,
            Op.BACKWARD_INPUT: self._backward,
            Op.BACKWARD_WEIGHT: self._backward_weight,
            Op.ISEND: self._isend,
            Op.IRECV: self._irecv,
            Op.WAIT_SEND: self._wait_send,
            Op.WAIT_RECV: self._wait_recv,
            Op.FREE: self._free,
            Op.ALL_REDUCE_GRADS: self._all_reduce_grads,
        }
        missing = set(Op) - set(self._handlers)
        assert not missing, f"no executor method for {missing}"

    def ensure_chunks(self, plan: ExecutionPlan) -> None:
        """Builds this rank's chunks from the plan's chunk table the first time; afterwards the
        plan must give the rank the same chunks (its parameters persist across iterations)."""
        if self.rank >= len(plan.data.ranks):
            raise PlanExecutionError(f"rank {self.rank}: the plan has {len(plan.data.ranks)} "
                                     f"ranks")
        table = plan.data.ranks[self.rank].chunks
        if self.chunk_table is not None:
            if table != self.chunk_table:
                raise PlanExecutionError(
                    f"rank {self.rank}: the plan's chunks {_describe_chunks(table)} are not the "
                    f"ones this worker holds {_describe_chunks(self.chunk_table)} (the placement "
                    f"must stay the same across iterations)")
            return
        for c in table:
            key = (c.module, c.chunk)
            if key in self.chunks:
                raise PlanExecutionError(f"rank {self.rank}: two chunks of m{key[0]} in slot "
                                         f"{key[1]}")
            self.chunks[key] = ModuleChunk(self.model, c.module, c.first_layer, c.num_layers,
                                           self.seed)
        self.chunk_table = table

    def params(self) -> dict[str, torch.nn.Parameter]:
        out = {}
        for chunk in self.chunks.values():
            out.update(chunk.parameter_names())
        return out

    def _fail(self, a: Action, why: str):
        raise PlanExecutionError(f"rank {self.rank} action {a.index} ({a.describe()}): {why}")

    def _wait(self, a: Action, work) -> None:
        # gloo's p2p works report completion only through wait(); wait with a timeout.
        t0 = time.monotonic()
        try:
            work.wait(timeout=timedelta(seconds=self.timeout_s))
        except RuntimeError as e:
            what = "no data from" if a.op is Op.WAIT_RECV else "no matching receive on"
            waited_s = time.monotonic() - t0
            # A peer that fails first closes its connections: this wait then ends early.
            how = (f"timed out after {self.timeout_s:g} s" if waited_s >= 0.9 * self.timeout_s
                   else f"failed after {waited_s:.1f} s")
            self._fail(a, f"{how}: {what} rank {a.peer} ({gloo_reason(e)})")

    # --- data of a stage ---------------------------------------------------------------------

    def _microbatch(self, it: _Iteration, a: Action, mb: int) -> MicrobatchData:
        if mb not in it.mb_data:
            entry = it.plan.data.microbatches.get((it.replica, mb))
            if entry is None:
                self._fail(a, f"microbatch {mb} of replica {it.replica} is not in the plan's "
                           f"data.microbatches")
            try:
                it.mb_data[mb] = MicrobatchData(self.model, it.plan, entry, self.seed, it.denom)
            except ValueError as e:
                self._fail(a, str(e))
        return it.mb_data[mb]

    def _view(self, it: _Iteration, a: Action, key: tuple[int, int, int]):
        """(data view, instance range) of the stage slice key = (module, microbatch, sub): the
        plan's `instances` of that stage; its `samples` must be what those instances hold."""
        if key not in it.views:
            module, mb, sub = key
            rng = it.stage_instances.get(key)
            if rng is None:
                self._fail(a, f"the plan has no compute of m{module} mb{mb}.{sub} (its "
                           f"instances are unknown)")
            data = self._microbatch(it, a, mb)
            n = len(data.instances(module))
            if rng[1] > n:
                self._fail(a, f"instances {list(rng)} of m{module} mb{mb}.{sub}: microbatch "
                           f"{mb} has {n}")
            want = it.stage_samples.get(key)
            if want is not None and tuple(data.samples(module, *rng)) != want:
                self._fail(a, f"the plan gives m{module} mb{mb}.{sub} samples {list(want)}; "
                           f"its instances {list(rng)} hold samples "
                           f"{data.samples(module, *rng)}")
            it.views[key] = (data.restrict(module, *rng), rng)
        return it.views[key]

    def _routed_rows(self, it: _Iteration, a: Action, b: int) -> Optional[torch.Tensor]:
        """Rows of the forward producer's output that buffer b carries (a gradient buffer: the
        rows its gradient belongs to); None = all rows (a buffer inside one module's chain)."""
        if b in it.rows:
            return it.rows[b]
        buf = it.rank_plan.buffers.get(b)
        if buf is None:
            self._fail(a, f"buf {b} is not declared on this rank")
        rows = None
        # Forward orientation: a gradient buffer goes from the forward consumer back.
        fwd_prod, fwd_cons = ((buf.producer, buf.consumer) if buf.producer.is_forward
                              else (buf.consumer, buf.producer))
        if fwd_prod.stage.module != fwd_cons.stage.module:
            p, c = fwd_prod.stage.slice_key, fwd_cons.stage.slice_key
            data = self._microbatch(it, a, p[1])
            p_rng, c_rng = self._view(it, a, p)[1], self._view(it, a, c)[1]
            rows = data.route(p[0], p_rng, c[0], c_rng, samples=buf.samples)
            if buf.rows is not None and len(rows) != buf.rows:
                self._fail(a, f"buf {b} carries {buf.rows} rows of m{p[0]} mb{p[1]}.{p[2]} "
                           f"(samples {list(buf.samples or ())}); the batch gives {len(rows)}")
        it.rows[b] = rows
        return rows

    # --- one method per op --------------------------------------------------------------------

    def _forward(self, it: _Iteration, a: Action) -> None:
        st = a.stage
        chunk = self.chunks.get((st.module, st.chunk))
        if chunk is None:
            self._fail(a, "this rank holds no such chunk")
        inputs = []
        for b in a.inputs:
            if b not in it.buffers:
                self._fail(a, f"input buf {b} is not ready")
            x = it.buffers[b]
            inputs.append(x.detach().reshape(-1, x.shape[-1]).requires_grad_())
        # Inputs per producer module, each one's sub-microbatches in sub order (= instance order).
        by_source: dict[int, list[tuple[int, torch.Tensor]]] = {}
        for b, x in zip(a.inputs, inputs):
            prod = it.rank_plan.buffers[b].producer
            by_source.setdefault(prod.stage.module, []).append((prod.stage.sub, x))
        sources = list(by_source)
        joined = [torch.cat([x for _, x in sorted(by_source[m], key=lambda t: t[0])])
                  for m in sources]
        data = self._view(it, a, st.slice_key)[0]
        out = chunk(joined, data, [self.module_names[m] for m in sources])
        it.saved[st] = (a.inputs, inputs, out)
        if out.dim() == 0:
            it.loss += float(out.detach())
        for b in a.outputs:
            shape = it.rank_plan.buffers[b].shape
            rows = self._routed_rows(it, a, b)
            part = out if rows is None else out[rows]
            if part.numel() != math.prod(shape):
                self._fail(a, f"output has {list(part.shape)}; plan buf {b} is {list(shape)}")
            it.buffers[b] = part.detach().reshape(shape)

    def _output_grad(self, it: _Iteration, a: Action, out: torch.Tensor):
        """Gradient of a stage's output: the sum of its gradient input buffers, each added into
        the rows its consumer took (None for the loss)."""
        if out.dim() == 0:
            return None
        if not a.inputs and out.numel() != 0:
            self._fail(a, "no output gradient among the inputs")
        # A stage with no work in this microbatch (no audio clip): zero gradient.
        grad = torch.zeros_like(out)
        for b in a.inputs:
            if b not in it.buffers:
                self._fail(a, f"gradient buf {b} is not ready")
            rows = self._routed_rows(it, a, b)
            if rows is None:
                grad = grad + it.buffers[b].reshape(out.shape)
            else:  # a consumer sub-microbatch's share of this output
                grad = grad.index_add(0, rows, it.buffers[b].reshape(len(rows), -1))
        return grad

    def _gradient_targets(self, it: _Iteration, a: Action,
                          input_ids: tuple[int, ...]) -> list[tuple[int, int]]:
        """(gradient output buffer, index of the forward input it is the gradient of): the
        output's consumer is the backward of the stage that produced that input (a stage may
        send gradients to only some producers: none to a frozen module without backward)."""
        by_producer = {}
        for x_index, b in enumerate(input_ids):
            by_producer[it.rank_plan.buffers[b].producer.stage.slice_key] = x_index
        out = []
        for b in a.outputs:
            c = it.rank_plan.buffers[b].consumer
            if c.stage.slice_key not in by_producer:
                self._fail(a, f"gradient buf {b} goes to {c.stage}, which fed this stage no "
                           f"input")
            out.append((b, by_producer[c.stage.slice_key]))
        return out

    def _backward(self, it: _Iteration, a: Action) -> None:
        """backward (input and weight gradients) or backward_input (input gradients only, the
        graph and the output gradient kept for backward_weight)."""
        st = a.stage
        if st not in it.saved:
            self._fail(a, "no forward of this stage ran before")
        input_ids, inputs, out = it.saved[st][:3]
        grad = self._output_grad(it, a, out)
        # No graph behind the output: a frozen chunk whose inputs need no gradient (or a stage
        # with no work in this microbatch): every input gradient is zero.
        live = out.requires_grad
        if a.op is Op.BACKWARD_INPUT:
            igrads = torch.autograd.grad(out, inputs, grad, retain_graph=True,
                                         allow_unused=True) \
                if inputs and live else [None] * len(inputs)
            it.saved[st] = (input_ids, inputs, out, grad)
        else:
            if live:
                out.backward(grad)
            igrads = [x.grad for x in inputs]
            del it.saved[st]
        for b, x_index in self._gradient_targets(it, a, input_ids):
            g, x = igrads[x_index], inputs[x_index]
            it.buffers[b] = (g if g is not None else torch.zeros_like(x)).detach() \
                .reshape(it.rank_plan.buffers[b].shape)

    def _backward_weight(self, it: _Iteration, a: Action) -> None:
        st = a.stage
        if st not in it.saved:
            self._fail(a, "no forward of this stage ran before")
        saved = it.saved.pop(st)
        out = saved[2]
        # The output gradient its backward_input consumed (else from the inputs).
        grad = saved[3] if len(saved) == 4 else self._output_grad(it, a, out)
        params = [p for p in self.chunks[(st.module, st.chunk)].parameters() if p.requires_grad]
        if not params or not out.requires_grad:
            return
        pg = torch.autograd.grad(out, params, grad, allow_unused=True)
        for p, g in zip(params, pg):
            if g is not None:
                p.grad = g if p.grad is None else p.grad + g

    def _isend(self, it: _Iteration, a: Action) -> None:
        if pool_put(self, it, a):
            return
        if a.buffer not in it.buffers:
            self._fail(a, "buffer is not ready")
        it.sends[a.buffer] = dist.isend(it.buffers[a.buffer].contiguous(), a.peer)

    def _irecv(self, it: _Iteration, a: Action) -> None:
        if pool_irecv(self, it, a):
            return
        buf = it.rank_plan.buffers.get(a.buffer)
        if buf is None:
            self._fail(a, "buffer is not declared on this rank")
        t = torch.empty(buf.shape)
        it.recvs[a.buffer] = (dist.irecv(t, a.peer), t)

    def _wait_send(self, it: _Iteration, a: Action) -> None:
        if a.buffer in it.pooled:  # the pool's reclaimer waits for it
            return
        if a.buffer not in it.sends:
            self._fail(a, "no isend of this buffer was posted")
        self._wait(a, it.sends.pop(a.buffer))

    def _wait_recv(self, it: _Iteration, a: Action) -> None:
        if a.buffer not in it.recvs:
            self._fail(a, f"no irecv of this buffer was posted (peer rank {a.peer})")
        if a.buffer in it.pooled:
            pool_wait_recv(self, it, a)
            return
        work, t = it.recvs.pop(a.buffer)
        self._wait(a, work)
        it.buffers[a.buffer] = t

    def _free(self, it: _Iteration, a: Action) -> None:
        if a.buffer in it.sends:
            self._fail(a, "freed while its send is in flight")
        it.buffers.pop(a.buffer, None)

    def ensure_groups(self, plan: ExecutionPlan) -> None:
        """Creates the gloo process group of every (module, ranks) of the plan's
        all_reduce_grads that has none yet. Every rank runs the same plans in the same order and
        walks them sorted, so every rank calls torch.distributed.new_group identically (it must
        be called by every rank, members or not). One group per module, not per ranks set: a
        member that skips one module's all-reduce then cannot be matched with another module's
        (gloo matches collectives of a group by order), and each side's timeout names its
        module. Checks first that the members of each (module, ranks) hold the same layers of
        the module: the all-reduce pairs their parameters by name."""
        collectives = plan.collectives()
        n = len(plan.data.ranks)
        for module, members in collectives:
            layers = module_layers(plan, members[0], module) if members[0] < n else None
            for r in members[1:]:
                if r >= n or module_layers(plan, r, module) != layers:
                    other = module_layers(plan, r, module) if r < n else None
                    raise PlanExecutionError(
                        f"all_reduce_grads of {self._module_name(module)} over ranks "
                        f"{list(members)}: rank {members[0]} holds layers "
                        f"{_describe_layers(layers)}, rank {r} {_describe_layers(other)} (members "
                        f"must hold the same layers)")
        new = [c for c in collectives if c not in self.groups]
        if new and not dist.is_initialized():
            raise PlanExecutionError(f"rank {self.rank}: the plan all-reduces "
                                     f"{self._module_name(new[0][0])} over ranks "
                                     f"{list(new[0][1])} but torch.distributed is not "
                                     f"initialized")
        for module, members in new:
            self.groups[(module, members)] = dist.new_group(
                list(members), backend="gloo", timeout=timedelta(seconds=self.timeout_s))

    def _module_name(self, module: int) -> str:
        name = self.module_names[module] if 0 <= module < len(self.module_names) else "?"
        return f"module {module} ({name})"

    def _all_reduce_grads(self, it: _Iteration, a: Action) -> None:
        """Sums this rank's gradients of module a.module over a.ranks (SUM, not mean: every
        microbatch's loss is already divided by the whole global batch's loss denominator, so
        the sum over all ranks is the gradient of the global batch's mean loss; docs/runtime.md).
        One member: nothing to reduce. The gradients travel as one flat tensor, parameters in
        name order (the members hold the same layers: ensure_groups)."""
        if len(a.ranks) <= 1:
            if a.dp > 1 and not a.ranks:
                self._fail(a, f"dp = {a.dp} but the plan names no ranks to reduce with (a "
                           f"one-replica plan); execute the world plan: "
                           f"weft.plan(..., world=True)")
            return
        group = self.groups.get((a.module, a.ranks))
        if group is None:
            self._fail(a, f"no process group for ranks {list(a.ranks)} (ensure_groups)")
        params = [p for chunk in self.chunks.values() if chunk.module == a.module
                  for p in chunk.parameter_names().items()]
        params = [p for _, p in sorted(params, key=lambda kv: kv[0]) if p.requires_grad]
        if not params:  # a frozen module: no member has gradients to reduce
            return
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                          for p in params])
        key = f"weft/all_reduce/{it.step}/{a.module}/{','.join(map(str, a.ranks))}/"
        if self.store is not None:
            self.store.set(key + str(self.rank), "1")  # arrived
        work = dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=group, async_op=True)
        t0 = time.monotonic()
        try:
            work.wait(timeout=timedelta(seconds=self.timeout_s))
        except RuntimeError as e:
            waited_s = time.monotonic() - t0
            missing = "some members"
            if self.store is not None:
                try:
                    gone = [r for r in a.ranks if not self.store.check([key + str(r)])]
                    missing = f"rank{'s' if len(gone) != 1 else ''} {', '.join(map(str, gone))}"
                except RuntimeError:
                    pass
            # A member that fails first closes its connections: this wait then ends early.
            how = (f"timed out after {self.timeout_s:g} s" if waited_s >= 0.9 * self.timeout_s
                   else f"failed after {waited_s:.1f} s")
            self._fail(a, f"{how}: the all-reduce of {self._module_name(a.module)} over ranks "
                       f"{list(a.ranks)}: {missing} never joined "
                       f"({str(e).splitlines()[0][-60:]})")
        offset = 0
        for p in params:
            n = p.numel()
            p.grad = flat[offset:offset + n].view_as(p).clone()
            offset += n

    # --- one iteration ------------------------------------------------------------------------

    def run_iteration(self, plan: dict | ExecutionPlan, on_action=None,
                      iteration: Optional[int] = None) -> dict:
        """Runs this rank's actions of `plan` (a parsed JSON dict, parsed here once, or an
        ExecutionPlan; weft.plan/v3 with its data tables: every shape comes from them), then
        the SGD step. Losses are divided by the LLM tokens of the plan's whole global batch.
        Returns {loss, grads, stages}: stages are the measured records of this rank's compute
        actions (weft.measured/v1 stage dicts, in action order).
        on_action, when given, is called as on_action(index, action, t_start_s, t_end_s) after
        each action, with time.perf_counter() timestamps taken around the action. iteration:
        the job's iteration (names pool entries; default: the plan's own)."""
        try:
            plan = load_plan(plan)
        except ValueError as e:
            raise PlanExecutionError(f"rank {self.rank}: {e}") from None
        if self.rank >= len(plan.ranks):
            raise PlanExecutionError(f"rank {self.rank}: the plan has {len(plan.ranks)} ranks")
        self.ensure_chunks(plan)
        for a in plan.ranks[self.rank].actions:
            if a.op.is_compute and (a.stage.module, a.stage.chunk) not in self.chunks:
                raise PlanExecutionError(
                    f"rank {self.rank} action {a.index} ({a.describe()}): this rank holds no "
                    f"such chunk (it holds {sorted(self.chunks)} as (module, chunk))")
        self.ensure_groups(plan)
        it = _Iteration(plan, self.rank, self._step,
                        plan.iteration if iteration is None else iteration)
        self._step += 1
        handlers = self._handlers
        stages: list[dict] = []
        slowdown = self.slowdown
        for a in it.rank_plan.actions:
            t_start_s = time.perf_counter()
            try:
                handlers[a.op](it, a)
            except PlanExecutionError:
                raise
            except RuntimeError as e:  # torch / gloo (a peer died: "connection closed by peer")
                self._fail(a, gloo_reason(e))
            t_end_s = time.perf_counter()
            if a.op.is_compute:
                st = a.stage
                tokens = plan.data.instance_tokens(it.replica, st.microbatch, st.module,
                                                   *a.instances)
                if slowdown is not None and slowdown.matches(a, tokens):
                    time.sleep((slowdown.factor - 1.0) * (t_end_s - t_start_s))
                    t_end_s = time.perf_counter()
                stages.append({
                    "action": a.index, "group": it.group, "instances": list(a.instances),
                    "measured_s": t_end_s - t_start_s,
                    "planned_s": float(a.raw.get("latency_s", 0.0)), "rank": self.rank,
                    "replica": it.replica,
                    "stage": {"chunk": st.chunk, "mb": st.microbatch, "module": st.module,
                              "pass": a.op.value, "sub": st.sub},
                    "tokens": tokens})
            if on_action is not None:
                on_action(a.index, a, t_start_s, t_end_s)
        if it.sends or it.recvs:
            raise PlanExecutionError(
                f"rank {self.rank}: end of plan with posts never waited for: sends "
                f"{sorted(it.sends)}, receives {sorted(it.recvs)}")
        grads = {n: (p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p))
                 for n, p in self.params().items()}
        with torch.no_grad():
            for p in self.params().values():
                if p.grad is not None:
                    p -= self.lr * p.grad
                p.grad = None
        return {"loss": it.loss, "grads": grads, "stages": stages}

    def param_values(self) -> dict[str, torch.Tensor]:
        """Copies of this rank's parameters by global name (after the last SGD step)."""
        return {n: p.detach().clone() for n, p in self.params().items()}


def _stream_worker(rank: int, world: int, port: int, model: dict, seed: int, lr: float,
                   timeout_s: float, record: bool, keep_grads: bool, keep_params: bool,
                   jobs, results, source=None, slowdown: Optional[Slowdown] = None,
                   pool: Optional[PoolConfig] = None, fault: Optional[dict] = None) -> None:
    try:
        torch.set_num_threads(1)
        pg_timeout = timedelta(seconds=max(timeout_s, 30))
        # The parent hosts the store, so it outlives a failing rank (its peers still read who
        # arrived at a collective).
        store = dist.TCPStore("127.0.0.1", port, world, False, pg_timeout)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world,
                                timeout=pg_timeout)
        ex = RankExecutor(rank, model, seed, lr, timeout_s, store=store, slowdown=slowdown)
        # With a source, rank 0 plans (source() gives its next_job) and broadcasts every job to
        # the other ranks over torch.distributed; else each job comes from the parent's queue.
        next_job = source() if source is not None and rank == 0 else None
        # A source that learns from measured times (OnlinePlannerSource(learn_from_measured))
        # gets each iteration's weft.measured/v1 record: every rank's stage times gathered on
        # rank 0 (one gather per iteration, only then).
        gather_measured = bool(getattr(source, "learn_from_measured", False))
        previous = None
        consumer_group = None
        if pool is not None:
            # Pool mode (weft.runtime.pool): every job is queued up front (producers run ahead),
            # so every process group the plans need is created first, in one order everywhere;
            # the consumers alone start each iteration together.
            queued = []
            while (job := jobs.get()) is not None:
                queued.append(job)
            for job in queued:
                ex.ensure_groups(load_plan(job["plan"]))
            consumer_group = dist.new_group(list(pool.consumer_ranks), backend="gloo",
                                            timeout=pg_timeout)
            ex.pool_config = pool
            if rank in pool.producer_ranks:
                ex.pool = PoolState(pool, rank, timeout_s)
                if fault and fault.get("kill_rank") == rank:
                    ex.pool.fault_after_puts = int(fault["after_puts"])
            queued.append(None)
            jobs = queue_mod.SimpleQueue()
            for job in queued:
                jobs.put(job)
        while True:
            if source is not None:
                box = [next_job(len(ex.history), previous) if rank == 0 else None]
                dist.broadcast_object_list(box, src=0)
                job = box[0]
            else:
                job = jobs.get()
            if job is None:
                break
            iteration = job.get("iteration", job["plan"].get("iteration", 0))
            records: list[tuple[int, float, float]] = []
            on_action = (lambda i, a, t0, t1: records.append((i, t0, t1))) if record else None
            if pool is None:
                dist.barrier()
            elif rank in pool.consumer_ranks:
                dist.barrier(group=consumer_group)
            t0 = time.perf_counter()
            r = ex.run_iteration(job["plan"], on_action=on_action, iteration=iteration)
            t_end = time.perf_counter()
            wall_s = t_end - t0
            grads = {n: g.numpy() for n, g in r["grads"].items()} if keep_grads else {}
            out = {"step": len(ex.history), "iteration": iteration, "loss": r["loss"],
                   "wall_s": wall_s, "grads": grads, "records": records, "stages": r["stages"],
                   "t_start_s": t0, "t_end_s": t_end}
            if pool is not None:
                out["fetches"], ex.fetches = ex.fetches, []
                if ex.pool is not None:
                    out.update(ex.pool.take_records())
            ex.history.append(iteration)
            previous = {"iteration": iteration, "loss": r["loss"], "wall_s": wall_s}
            if gather_measured:
                gathered = [None] * world if rank == 0 else None
                dist.gather_object((r["stages"], wall_s), gathered, dst=0)
                if rank == 0:
                    previous["measured"] = measured_iteration(
                        job["plan"], iteration, {q: g for q, g in enumerate(gathered)})
            if source is not None and rank == 0:
                out["job"] = job  # the parent learns the plan from the rank that made it
            results.put(("ok", rank, out))
        if ex.pool is not None:
            try:
                ex.pool.drain()  # every entry fetched before this rank leaves
            except RuntimeError as e:
                raise PlanExecutionError(str(e)) from None
            results.put(("tail", rank, ex.pool.take_records()))  # the last reclaims
        dist.barrier()
        dist.destroy_process_group()
        params = ({n: v.numpy() for n, v in ex.param_values().items()} if keep_params else {})
        results.put(("done", rank, params))
    except Exception as e:  # reported to the parent, which raises
        # A bad plan (PlanExecutionError, or ValueError from parse_plan) is one line.
        msg = str(e) if isinstance(e, (PlanExecutionError, ValueError)) else \
            traceback.format_exc()
        results.put(("error", rank, msg))
        results.close()
        results.join_thread()
        os._exit(1)


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (the CP runtime's rendezvous; run_streamed's store picks its
    own)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _describe_chunks(chunks) -> str:
    return "[" + ", ".join(f"m{c.module} c{c.chunk} layers [{c.first_layer}, "
                           f"{c.first_layer + c.num_layers})" for c in chunks) + "]"


def _describe_layers(layers: Optional[list[tuple[int, int]]]) -> str:
    if layers is None:
        return "nothing (no such rank)"
    return " ".join(f"[{f}, {f + n})" for f, n in layers) or "none"


def _merge_copies(per_rank: list[dict]) -> tuple[dict, float]:
    """One dict of arrays by name from every rank's (the lowest rank's copy of a name held by
    several ranks) and the largest relative difference between copies of one name."""
    out: dict = {}
    diff = 0.0
    for d in per_rank:
        for n, v in d.items():
            if n in out:
                scale = max(float(abs(out[n]).max()) if out[n].size else 0.0, 1e-12)
                if v.size:
                    diff = max(diff, float(abs(v - out[n]).max()) / scale)
            else:
                out[n] = v
    return out, diff


def run_plans(model: dict, jobs: list[dict], seed: int = 1, lr: float = 0.1,
              timeout_s: float = 30.0, inject_slowdown: Optional[dict] = None) -> list[dict]:
    """Runs the iterations `jobs` ({plan (parsed weft.plan/v3 JSON), optional iteration}: the
    plan carries its data and its chunk table) on one worker process per rank of the plans
    (every plan of a run has the same ranks and chunks). Returns per iteration {loss, grads
    (all ranks' parameters), wall_s, replica_max_rel_diff, measured}; the last one also has
    params (every parameter after its SGD step). A parameter held by several ranks
    (data-parallel replicas) is reported once, from the lowest rank; replica_max_rel_diff is the
    largest relative difference between the copies (0 when the all-reduce kept them equal).
    measured: the iteration's weft.measured/v1 record (weft.runtime.measured). inject_slowdown
    (test-only, Slowdown.parse): {"module", "pass", "factor", "tokens"}. Raises
    PlanExecutionError with every failing rank's message, ValueError for a malformed plan
    before any worker starts."""
    if not jobs:
        return []
    jobs = [dict(job, iteration=job.get("iteration", job["plan"].get("iteration", i)))
            for i, job in enumerate(jobs)]
    num_ranks = None
    for job in jobs:  # a malformed plan fails here, before any worker starts (ValueError)
        n = len(load_plan(job["plan"]).ranks)
        if num_ranks is not None and n != num_ranks:
            raise ValueError(f"run_plans: iteration {job['iteration']}'s plan has {n} ranks; "
                             f"the first has {num_ranks}")
        num_ranks = n
    runs = run_streamed(model, num_ranks,
                        lambda i, _: jobs[i] if i < len(jobs) else None, seed=seed, lr=lr,
                        timeout_s=timeout_s, keep_grads=True, keep_params=True,
                        inject_slowdown=inject_slowdown)
    merged = []
    for run in runs:
        out = {"loss": run["loss"], "wall_s": run["wall_s"],
               "replica_max_rel_diff": run["replica_max_rel_diff"], "measured": run["measured"],
               "grads": {n: torch.from_numpy(g) for n, g in run["grads"].items()}}
        if "params" in run:
            out["params"] = {n: torch.from_numpy(v) for n, v in run["params"].items()}
        merged.append(out)
    return merged


def run_streamed(model: dict, num_ranks: int,
                 next_job: Optional[Callable[[int, Optional[dict]], Optional[dict]]] = None,
                 seed: int = 1, lr: float = 0.1, timeout_s: float = 30.0, record: bool = False,
                 keep_grads: bool = False, keep_params: bool = False,
                 source: Optional[Callable[[], Callable]] = None,
                 inject_slowdown: Optional[dict] = None, pool: Optional[PoolConfig] = None,
                 inject_fault: Optional[dict] = None) -> list[dict]:
    """Runs iterations on num_ranks worker processes, one at a time. A job is {plan (parsed
    weft.plan/v3 JSON: its data tables and chunk table are all a worker needs), iteration, ...};
    None = stop. The jobs come either from next_job(i, previous merged result), called here in
    the parent for job 0 before any iteration runs and for job i + 1 once iteration i has
    finished on all ranks, or, with `source` (a picklable factory, e.g. OnlinePlannerSource),
    from rank 0: it calls source() once to get its next_job and broadcasts each job to the
    other ranks with torch.distributed. Planning ahead happens in next_job's own background
    threads (PlannerService).
    Returns per iteration {iteration, loss, wall_s, grads (numpy, when keep_grads), records
    {rank: [(index, t0, t1)]}, measured (the weft.measured/v1 record), job}; with keep_params
    the last one also has params (every parameter after its SGD step, numpy). Raises
    PlanExecutionError with every failing rank's message; a rank that hangs fails on its own
    wait timeout (timeout_s); a rank that dies without a message is named with its exit code.
    inject_slowdown: test-only, see run_plans.
    pool (weft.runtime.pool.PoolConfig): pool mode: every job is taken from next_job before
    any runs and queued to every rank, producers run ahead through the pool, and each rank's
    result also has t_start_s / t_end_s, fetches, puts, pool_events, pool_blocked_s (results
    keep per rank: ranks). inject_fault (test-only, pool mode): {"kill_rank": r, "after_puts":
    n}: producer rank r exits (code 17) right after its n-th put."""
    if (next_job is None) == (source is None):
        raise ValueError("run_streamed: give exactly one of next_job and source")
    if pool is not None and source is not None:
        raise ValueError("run_streamed: the pool runs offline-planned jobs (next_job), not a "
                         "source")
    slowdown = Slowdown.parse(model, inject_slowdown)
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    queues = [ctx.Queue() for _ in range(num_ranks)]
    # The workers' rendezvous store, served from this process (port 0: the OS picks one).
    store = dist.TCPStore("127.0.0.1", 0, num_ranks, True, timedelta(seconds=max(timeout_s, 30)),
                          wait_for_workers=False)
    port = store.port
    procs = [ctx.Process(target=_stream_worker,
                         args=(r, num_ranks, port, model, seed, lr, timeout_s, record,
                               keep_grads, keep_params, queues[r], results, source, slowdown,
                               pool, inject_fault),
                         daemon=True)
             for r in range(num_ranks)]
    for p in procs:
        p.start()
    merged: list[dict] = []
    errors: list[tuple[int, str]] = []

    # Messages by step: ("ok", k) for the k-th iteration run, ("done",) at the end. A fast rank
    # may report step k + 1 before a slow rank's step k arrives; they wait here.
    pending: dict[tuple, dict[int, object]] = {}
    tails: dict[int, dict] = {}
    deadline_s = timeout_s + 60 + (180 if source is not None else 0)  # rank 0 may be planning

    def collect(step: int) -> tuple[str, dict[int, object]]:
        """Every rank's message of step `step` (or every rank's "done")."""
        deadline = time.monotonic() + deadline_s
        while True:
            for key in (("ok", step), ("done",)):
                if len(pending.get(key, {})) == num_ranks:
                    return key[0], pending.pop(key)
            try:
                kind, rank, payload = results.get(timeout=0.2)
            except queue_mod.Empty:
                # Only once nothing is queued: a rank that exits right after queueing its error
                # is dead before its message is read, and must not be reported as silent.
                failed = {r for r, _ in errors}
                for r, p in enumerate(procs):  # a rank that died without a message
                    if r not in failed and not p.is_alive() and p.exitcode not in (0, None):
                        errors.append((r, f"rank {r} died (exit code {p.exitcode}) without a "
                                       f"message"))
                        failed.add(r)
                        deadline = min(deadline, time.monotonic() + timeout_s + 10)
                # Every rank failed or finished this step: nothing more will come for it.
                finished = set(pending.get(("ok", step), {})) | set(pending.get(("done",), {}))
                if errors and (len(failed | finished) >= num_ranks
                               or not any(p.is_alive() for p in procs)
                               or time.monotonic() > deadline):
                    break
                if time.monotonic() > deadline:
                    raise PlanExecutionError("runtime: workers did not report before the deadline")
                continue
            if kind == "tail":  # a producer's reclaims after its last iteration (pool mode)
                tails[rank] = payload
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
        grads, diff = _merge_copies([outs[r]["grads"] for r in sorted(outs)])
        iteration = outs[0]["iteration"]
        ranks = ({r: {k: o[k] for k in ("t_start_s", "t_end_s", "fetches", "puts",
                                         "pool_events", "pool_blocked_s") if k in o}
                  for r, o in outs.items()} if pool is not None else None)
        return {"iteration": iteration, "job": job, **({"ranks": ranks} if ranks else {}),
                "loss": sum(o["loss"] for o in outs.values()),
                "wall_s": max(o["wall_s"] for o in outs.values()),
                "grads": grads, "replica_max_rel_diff": diff,
                "records": {r: o["records"] for r, o in outs.items()},
                "measured": measured_iteration(
                    job["plan"], iteration,
                    {r: (o["stages"], o["wall_s"]) for r, o in outs.items()})}

    try:
        if source is not None:
            while True:
                kind, outs = collect(len(merged))
                if kind == "done":
                    params = outs
                    break
                merged.append(merge(outs[0]["job"], outs))
        elif pool is not None:
            queued = []
            while (job := next_job(len(queued), None)) is not None:
                queued.append(job)
            for q in queues:
                for job in queued:
                    q.put(job)
                q.put(None)
            for job in queued:
                kind, outs = collect(len(merged))
                if kind != "ok":
                    raise PlanExecutionError("runtime: workers ended before the last job")
                merged.append(merge(job, outs))
            _, params = collect(len(merged))
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
        for r, tail in tails.items():  # pool mode: reclaims after the last iteration
            last = merged[-1]["ranks"][r]
            last["pool_events"] = last.get("pool_events", []) + tail["pool_events"]
            last["pool_blocked_s"] = last.get("pool_blocked_s", 0.0) + tail["pool_blocked_s"]
        if keep_params and merged:
            merged[-1]["params"], diff = _merge_copies([params[r] for r in sorted(params)])
            merged[-1]["replica_max_rel_diff"] = max(merged[-1]["replica_max_rel_diff"], diff)
    finally:
        for p in procs:
            p.join(timeout=5 if not errors else 0.5)
            if p.is_alive():
                p.kill()
                p.join()
    return merged
