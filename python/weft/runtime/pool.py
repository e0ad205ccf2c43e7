"""FlowTrain's unified memory pool on torch.distributed (FlowTrain §3.2; docs/runtime.md "The pool").

The ranks of a world plan split into producers and consumers:

  producers  ranks holding only frozen modules with no trainable module upstream (the encoders
             FlowTrain places on device groups of their own). They run their forward actions
             iteration after iteration, put every embedding that leaves for a consumer rank into
             their own bounded pool segment and move on; they wait for the backbone only when
             their segment is full.
  consumers  every other rank (the backbone with its own TP/PP/DP from the plan, and the
             trainable glue on its first stage). They run their actions as in lockstep, except
             that a receive from a producer rank is a fetch from the pool; their updates stay
             synchronous per global batch (their all-reduces and a consumer-only barrier).

The pool is the union of the producers' segments. A segment has two tiers, `device` (first) and
`host` (when the device tier has no room), each a fixed-size float32 storage allocated once
(sizes are options, bytes); an entry is a first-fit extent of one tier. Every entry has a
global address (owner rank, tier, offset in elements) and metadata (iteration, the producing
stage's module / microbatch / sub-microbatch, elements, the samples it carries from the plan's
tables). Flow control and transport are torch.distributed point to point, nothing else:

  put    the producer copies the embedding into its extent and posts two isends to the
         consumer rank the plan names: the entry's metadata (8 int64: its address and key) and
         the extent itself (tag POOL_TAG). gloo (and NCCL) move the bytes only once the
         receiver posts the matching receive, so the extent stays occupied until fetched.
  fetch  the consumer, at its plan's irecv of that buffer, posts the two receives; at the
         wait_recv it waits for them (measured as consumer wait), checks the metadata against
         the plan (same iteration and stage, same size) and records the address in its page
         table (for the trace).
  free   an entry is reclaimed when both sends completed; a producer whose segment has no room
         reclaims completed entries, then waits for the oldest entry's fetch (measured as
         producer blocked time). A wait longer than the timeout fails naming the consumer rank,
         the iteration and the samples.

Lossless and bounded: a segment never holds more than its capacity (an entry larger than a
whole tier is refused before anything runs, naming its size); every put is matched by exactly
one fetch, in the plan order of the pair (gloo matches a pair's messages of one tag in order);
a producer that dies or stalls makes the consumer's fetch fail after `timeout_s` (or at once,
when gloo sees the connection close) with a one-line error naming the producer rank, the
iteration, the microbatch and the samples.

Where this differs from FlowTrain: FlowTrain replicates a page table of every entry to every
consumer so that a consumer may pick any entry; here the plan dispatches every sample to one
consumer rank before the iteration runs (FlowTrain's packer and zig-zag dispatch, in the
planner), so an entry's address travels with it to that consumer and no table is shared.
"""
from __future__ import annotations

import collections
import dataclasses
import math
import os
import queue as queue_mod
import threading
import time
from datetime import timedelta
from typing import Optional

import torch
import torch.distributed as dist

POOL_TAG = 7
META_FIELDS = ("iteration", "module", "microbatch", "sub", "tier", "offset", "numel", "owner")
TIERS = ("device", "host")
ELEMENT_BYTES = 4  # float32 (the runtime's dtype)


@dataclasses.dataclass(frozen=True)
class PoolConfig:
    """Which ranks produce, and each producer segment's tier sizes in bytes."""
    producer_ranks: tuple[int, ...]
    consumer_ranks: tuple[int, ...]
    producer_modules: tuple[int, ...]
    device_bytes: int
    host_bytes: int

    @property
    def segment_bytes(self) -> int:
        return self.device_bytes + self.host_bytes

    @property
    def capacity_bytes(self) -> int:
        return self.segment_bytes * len(self.producer_ranks)

    def describe(self) -> str:
        return (f"pool: {len(self.producer_ranks)} producer ranks "
                f"{list(self.producer_ranks)} x (device {_fmt_bytes(self.device_bytes)} + host "
                f"{_fmt_bytes(self.host_bytes)}) = {_fmt_bytes(self.capacity_bytes)}; consumers "
                f"{list(self.consumer_ranks)}")


def gloo_reason(e: BaseException) -> str:
    """A short reason from a torch.distributed error (gloo's messages are long, multi-line)."""
    text = str(e)
    for needle, short in (("Connection closed by peer", "connection closed by peer"),
                          ("Connection reset by peer", "connection reset by peer"),
                          ("Timed out", "timed out"), ("timed out", "timed out")):
        if needle in text:
            return short
    first = text.strip().splitlines()[0] if text.strip() else type(e).__name__
    return first[:80]


def _fmt_bytes(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def producer_modules(model: dict) -> set[int]:
    """Frozen modules with no trainable module upstream (their outputs need no gradient)."""
    names = [m["name"] for m in model["modules"]]
    upstream: dict[str, list[str]] = {n: [] for n in names}
    for e in model.get("edges", []):
        src, dst = (e["from"], e["to"]) if isinstance(e, dict) else e
        upstream[dst].append(src)
    frozen = {m["name"]: bool(m.get("frozen", False)) for m in model["modules"]}
    memo: dict[str, bool] = {}

    def ok(n: str) -> bool:
        if n not in memo:
            memo[n] = frozen[n] and all(ok(u) for u in upstream[n])
        return memo[n]

    return {i for i, n in enumerate(names) if ok(n)}


def pool_config(model: dict, plan, device_bytes: int, host_bytes: int) -> PoolConfig:
    """The pool of a parsed world plan (weft.runtime.plan.ExecutionPlan). ValueError (one line)
    when no rank holds only producer modules, when every rank does, or when a producer rank
    runs a backward (it would need gradients the pool does not carry back)."""
    if device_bytes < 0 or host_bytes < 0 or device_bytes + host_bytes <= 0:
        raise ValueError(f"pool: device bytes {device_bytes}, host bytes {host_bytes}; both "
                         f"must be >= 0 and their sum > 0")
    prods = producer_modules(model)
    names = [m["name"] for m in model["modules"]]
    if not prods:
        raise ValueError(f"pool: model {model.get('name', '?')} has no frozen encoder (a module "
                         f"with frozen: true and nothing trainable upstream); the pool streams "
                         f"frozen encoders' outputs only")
    producer_ranks, consumer_ranks = [], []
    for r, rank in enumerate(plan.data.ranks):
        mods = {c.module for c in rank.chunks}
        (producer_ranks if mods and mods <= prods else consumer_ranks).append(r)
    if not producer_ranks:
        raise ValueError(f"pool: no rank of the plan holds only frozen encoders "
                         f"({', '.join(names[m] for m in sorted(prods))}); place them on ranks of "
                         f"their own (strategy flowtrain, or a placement file)")
    if not consumer_ranks:
        raise ValueError("pool: every rank of the plan holds only frozen encoders: nothing "
                         "trains")
    for r in producer_ranks:
        for a in plan.ranks[r].actions:
            if a.op.is_compute and a.op.value != "forward":
                raise ValueError(f"pool: producer rank {r} runs {a.describe()}; producers run "
                                 f"forward only")
    return PoolConfig(tuple(producer_ranks), tuple(consumer_ranks), tuple(sorted(prods)),
                      int(device_bytes), int(host_bytes))


def check_entries_fit(plan, config: PoolConfig) -> None:
    """Every embedding a producer rank sends to a consumer must fit one tier of its segment;
    ValueError naming the largest one otherwise (before anything runs)."""
    largest = max(config.device_bytes, config.host_bytes)
    producers = set(config.producer_ranks)
    for r in config.producer_ranks:
        rp = plan.ranks[r]
        for a in rp.actions:
            if a.op.value == "isend" and a.peer not in producers:
                nbytes = math.prod(rp.buffers[a.buffer].shape) * ELEMENT_BYTES
                if nbytes > largest:
                    raise ValueError(
                        f"pool: rank {r} puts buf {a.buffer} ({a.describe()}) of {nbytes} bytes; "
                        f"a tier holds at most {largest} bytes (raise --pool-device-bytes or "
                        f"--pool-host-bytes)")


class Segment:
    """One producer's two-tier storage with a first-fit allocator over element offsets."""

    def __init__(self, device_bytes: int, host_bytes: int):
        # On a GPU the device tier would be torch.empty(..., device="cuda") and the host tier
        # pinned host memory; here both are host tensors (gloo), the accounting is the same.
        self.storage = [torch.empty(device_bytes // ELEMENT_BYTES),
                        torch.empty(host_bytes // ELEMENT_BYTES)]
        self.free = [[(0, s.numel())] if s.numel() else [] for s in self.storage]
        self.used_bytes = 0

    def allocate(self, numel: int) -> Optional[tuple[int, int]]:
        """(tier, offset) of a free extent of numel elements, device tier first; None if none."""
        for tier, extents in enumerate(self.free):
            for i, (start, length) in enumerate(extents):
                if length >= numel:
                    if length == numel:
                        extents.pop(i)
                    else:
                        extents[i] = (start + numel, length - numel)
                    self.used_bytes += numel * ELEMENT_BYTES
                    return tier, start
        return None

    def release(self, tier: int, offset: int, numel: int) -> None:
        extents = self.free[tier]
        extents.append((offset, numel))
        extents.sort()
        merged: list[tuple[int, int]] = []
        for start, length in extents:
            if merged and merged[-1][0] + merged[-1][1] == start:
                merged[-1] = (merged[-1][0], merged[-1][1] + length)
            else:
                merged.append((start, length))
        self.free[tier] = merged
        self.used_bytes -= numel * ELEMENT_BYTES

    def view(self, tier: int, offset: int, numel: int) -> torch.Tensor:
        return self.storage[tier][offset:offset + numel]


@dataclasses.dataclass(eq=False)
class _Entry:
    tier: int
    offset: int
    numel: int
    peer: int
    iteration: int
    stage: tuple[int, int, int]  # (module, microbatch, sub) of the producing stage
    samples: tuple[int, ...]
    works: tuple
    t_put_s: float


class PoolState:
    """A producer's side of the pool: its segment, the entries not yet fetched, and the
    measurements. A reclaimer thread waits for the entries' sends in put order (gloo's p2p works
    report completion only through wait()) and frees each extent as soon as its fetch is done;
    put waits on the segment (at most timeout_s) while it has no room."""

    def __init__(self, config: PoolConfig, rank: int, timeout_s: float):
        self.config, self.rank, self.timeout_s = config, rank, timeout_s
        self.segment = Segment(config.device_bytes, config.host_bytes)
        self.cond = threading.Condition()
        self.pending: collections.deque[_Entry] = collections.deque()  # put, not yet fetched
        self.queue: "queue_mod.Queue[Optional[_Entry]]" = queue_mod.Queue()
        self.error: Optional[str] = None
        self.events: list[tuple[float, int]] = []  # (perf_counter s, this segment's used bytes)
        self.puts: list[dict] = []  # one per put: time, consumer, key, address, bytes
        self.blocked_s = 0.0
        self.num_puts = 0
        self.fault_after_puts: Optional[int] = None  # test-only: die after this many puts
        self.thread = threading.Thread(target=self._reclaimer, daemon=True)
        self.thread.start()

    def _reclaimer(self) -> None:
        while True:
            e = self.queue.get()
            if e is None:
                return
            try:
                for w in e.works:
                    w.wait()
            except RuntimeError as err:
                with self.cond:
                    self.error = (f"consumer rank {e.peer} did not fetch m{e.stage[0]} "
                                  f"mb{e.stage[1]}.{e.stage[2]} of iteration {e.iteration} "
                                  f"(samples {list(e.samples)}): {gloo_reason(err)}")
                    self.cond.notify_all()
                return
            with self.cond:
                self.segment.release(e.tier, e.offset, e.numel)
                self.pending.remove(e)
                self.events.append((time.perf_counter(), self.segment.used_bytes))
                self.cond.notify_all()

    def _oldest(self) -> str:
        if not self.pending:
            return "no entry is waiting"
        e = self.pending[0]
        return (f"consumer rank {e.peer} has not fetched m{e.stage[0]} mb{e.stage[1]}.{e.stage[2]} "
                f"of iteration {e.iteration} (samples {list(e.samples)})")

    def put(self, x: torch.Tensor, peer: int, iteration: int, stage: tuple[int, int, int],
            samples: tuple[int, ...]) -> None:
        numel = x.numel()
        with self.cond:
            slot = self.segment.allocate(numel)
            if slot is None:
                t0 = time.perf_counter()
                deadline = t0 + self.timeout_s
                while slot is None and self.error is None:
                    left = deadline - time.perf_counter()
                    if left <= 0:
                        raise RuntimeError(
                            f"pool: rank {self.rank}'s segment stayed full for "
                            f"{self.timeout_s:g} s: {self._oldest()}")
                    self.cond.wait(timeout=left)
                    slot = self.segment.allocate(numel)
                self.blocked_s += time.perf_counter() - t0
            if self.error is not None:
                raise RuntimeError(f"pool: rank {self.rank}: {self.error}")
            tier, offset = slot
            view = self.segment.view(tier, offset, numel)
            view.copy_(x.reshape(-1))
            meta = torch.tensor([iteration, stage[0], stage[1], stage[2], tier, offset, numel,
                                 self.rank], dtype=torch.int64)
            try:
                works = (dist.isend(meta, peer, tag=POOL_TAG),
                         dist.isend(view, peer, tag=POOL_TAG))
            except RuntimeError as err:
                self.segment.release(tier, offset, numel)
                raise RuntimeError(f"pool: rank {self.rank} could not put m{stage[0]} "
                                   f"mb{stage[1]}.{stage[2]} of iteration {iteration} for consumer "
                                   f"rank {peer}: {gloo_reason(err)}") from None
            now = time.perf_counter()
            e = _Entry(tier, offset, numel, peer, iteration, stage, samples, works, now)
            self.pending.append(e)
            self.events.append((now, self.segment.used_bytes))
            self.puts.append({"t_s": now, "owner": self.rank, "consumer": peer,
                              "iteration": iteration, "module": stage[0], "mb": stage[1],
                              "sub": stage[2], "tier": TIERS[tier], "offset": offset,
                              "bytes": numel * ELEMENT_BYTES})
        self.queue.put(e)
        self.num_puts += 1
        if self.fault_after_puts is not None and self.num_puts >= self.fault_after_puts:
            os._exit(17)  # test-only: a producer that dies mid-run

    def drain(self) -> None:
        """Waits (at most timeout_s) until every entry was fetched, then stops the reclaimer."""
        with self.cond:
            deadline = time.perf_counter() + self.timeout_s
            while self.pending and self.error is None:
                left = deadline - time.perf_counter()
                if left <= 0:
                    raise RuntimeError(f"pool: rank {self.rank} at the end of the run: "
                                       f"{self._oldest()} within {self.timeout_s:g} s")
                self.cond.wait(timeout=left)
            if self.error is not None:
                raise RuntimeError(f"pool: rank {self.rank}: {self.error}")
        self.queue.put(None)
        self.thread.join(timeout=self.timeout_s)

    def take_records(self) -> dict:
        """This iteration's measurements (and resets them)."""
        with self.cond:
            out = {"pool_events": self.events, "puts": self.puts,
                   "pool_blocked_s": self.blocked_s}
            self.events, self.puts, self.blocked_s = [], [], 0.0
        return out


def pool_put(executor, it, a) -> bool:
    """A producer's isend to a consumer rank becomes a pool put (True); any other send is an
    ordinary isend (False)."""
    pool: Optional[PoolState] = getattr(executor, "pool", None)
    if pool is None or a.peer in pool.config.producer_ranks:
        return False
    buf = it.rank_plan.buffers[a.buffer]
    if a.buffer not in it.buffers:
        executor._fail(a, "buffer is not ready")
    st = buf.producer.stage
    try:
        pool.put(it.buffers[a.buffer], a.peer, it.iteration, (st.module, st.microbatch, st.sub),
                 tuple(buf.samples or ()))
    except RuntimeError as e:
        executor._fail(a, str(e))
    it.pooled.add(a.buffer)
    return True


def pool_irecv(executor, it, a) -> bool:
    """A consumer's irecv from a producer rank posts the two receives of a fetch (True)."""
    cfg: Optional[PoolConfig] = getattr(executor, "pool_config", None)
    if cfg is None or a.peer not in cfg.producer_ranks or executor.rank in cfg.producer_ranks:
        return False
    buf = it.rank_plan.buffers.get(a.buffer)
    if buf is None:
        executor._fail(a, "buffer is not declared on this rank")
    meta = torch.empty(len(META_FIELDS), dtype=torch.int64)
    data = torch.empty(math.prod(buf.shape))
    try:
        works = (dist.irecv(meta, a.peer, tag=POOL_TAG), dist.irecv(data, a.peer, tag=POOL_TAG))
    except RuntimeError as e:
        st = buf.producer.stage
        executor._fail(a, f"pool: cannot fetch m{st.module} mb{st.microbatch}.{st.sub} of "
                       f"iteration {it.iteration} (samples {list(buf.samples or ())}) from "
                       f"producer rank {a.peer}: {gloo_reason(e)}; the producer died")
    it.recvs[a.buffer] = (works, (meta, data), time.perf_counter())
    it.pooled.add(a.buffer)
    return True


def pool_wait_recv(executor, it, a) -> None:
    """Waits for a fetch, checks its metadata against the plan, records the wait and address."""
    (w_meta, w_data), (meta, data), t_post = it.recvs.pop(a.buffer)
    buf = it.rank_plan.buffers[a.buffer]
    st = buf.producer.stage
    where = (f"pool: the entry of m{st.module} mb{st.microbatch}.{st.sub} of iteration "
             f"{it.iteration} (samples {list(buf.samples or ())}) from producer rank {a.peer}")
    t0 = time.perf_counter()
    try:
        w_meta.wait(timeout=timedelta(seconds=executor.timeout_s))
        w_data.wait(timeout=timedelta(seconds=executor.timeout_s))
    except RuntimeError as e:
        waited = time.perf_counter() - t0
        how = (f"timed out after {executor.timeout_s:g} s"
               if waited >= 0.9 * executor.timeout_s else f"failed after {waited:.1f} s")
        executor._fail(a, f"{where} never arrived: {how}; the producer stalled or died "
                       f"({gloo_reason(e)})")
    t1 = time.perf_counter()
    got = dict(zip(META_FIELDS, (int(v) for v in meta)))
    want = {"iteration": it.iteration, "module": st.module, "microbatch": st.microbatch,
            "sub": st.sub, "numel": data.numel(), "owner": a.peer}
    bad = {k: (got[k], v) for k, v in want.items() if got[k] != v}
    if bad:
        executor._fail(a, f"{where}: got an entry with " + ", ".join(
            f"{k} {g} (expected {w})" for k, (g, w) in bad.items()))
    it.buffers[a.buffer] = data.reshape(buf.shape)
    executor.fetches.append({"t_post_s": t_post, "t_wait_s": t0, "t_end_s": t1,
                             "owner": a.peer, "tier": TIERS[got["tier"]],
                             "offset": got["offset"], "bytes": got["numel"] * ELEMENT_BYTES,
                             "iteration": it.iteration, "module": st.module,
                             "mb": st.microbatch, "sub": st.sub})


def occupancy_timeline(runs: list[dict]) -> list[tuple[float, int]]:
    """The pool's occupancy over time, (perf_counter s, bytes, all segments), after every change:
    an entry occupies its extent from its put until its reclaimer saw both sends complete
    (the consumer has the bytes; one system-wide monotonic clock on Linux). This is the
    simulator's pool counter (bytes put and not yet got), measured; it never exceeds the
    capacity, by construction of the segments."""
    events = sorted((t, r, b) for run in runs for r, o in run["ranks"].items()
                    for t, b in o.get("pool_events", ()))
    level: dict[int, int] = {}
    out = []
    for t, r, b in events:
        level[r] = b
        out.append((t, sum(level.values())))
    return out


def pool_summary(runs: list[dict], config: PoolConfig) -> list[dict]:
    """Per iteration (runs: run_streamed's per-iteration results, with every rank's record),
    measured on one clock:
      pool_peak_bytes     the pool's peak occupancy (occupancy_timeline, all segments) while
                          the consumers ran the iteration;
      segment_peak_bytes  the largest one segment held in that time;
      producer_lead       iterations every producer had finished when the consumers started
                          this one, minus this one's index (1 = one whole iteration ahead);
      consumer_wait_s     the slowest consumer rank's time blocked on fetches;
      producer_blocked_s  the slowest producer's time blocked on a full segment (its run of
                          this iteration)."""
    timeline = occupancy_timeline(runs)
    seg_events = sorted((t, b) for run in runs for o in run["ranks"].values()
                        for t, b in o.get("pool_events", ()))
    finished = {r: sorted(run["ranks"][r]["t_end_s"] for run in runs if r in run["ranks"])
                for r in config.producer_ranks}

    def peak_in(events, start, end):
        before = [b for t, b in events if t <= start]
        return max([before[-1] if before else 0] + [b for t, b in events if start < t <= end])

    out = []
    for k, run in enumerate(runs):
        cons = [run["ranks"][r] for r in config.consumer_ranks if r in run["ranks"]]
        start = min(o["t_start_s"] for o in cons)
        end = max(o["t_end_s"] for o in cons)
        lead = min(sum(1 for t in finished[r] if t <= start) for r in config.producer_ranks) - k
        out.append({
            "iteration": run["iteration"], "pool_peak_bytes": peak_in(timeline, start, end),
            "segment_peak_bytes": peak_in(seg_events, start, end),
            "pool_capacity_bytes": config.capacity_bytes, "producer_lead": lead,
            "consumer_wait_s": max(sum(f["t_end_s"] - f["t_wait_s"] for f in o["fetches"])
                                   for o in cons),
            "producer_blocked_s": max(run["ranks"][r]["pool_blocked_s"]
                                      for r in config.producer_ranks if r in run["ranks"]),
            "consumer_wall_s": end - start})
    return out


def pool_trace_events(runs: list[dict], config: PoolConfig, num_ranks: int,
                      origin_s: float) -> list[dict]:
    """The pool counter ("buffer pool", bytes, on a process "buffers" after the ranks: the
    simulator's window-trace layout) and each consumer's fetches (tid 2000 + owner)."""
    pid = num_ranks + 1
    events: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": pid, "args": {"name": "buffers"}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": num_ranks}}]
    for t, b in occupancy_timeline(runs):
        events.append({"ph": "C", "name": "buffer pool", "pid": pid,
                       "ts": (t - origin_s) * 1e6, "args": {"bytes": b}})
    owners: set[tuple[int, int]] = set()
    for run in runs:
        for r, o in run["ranks"].items():
            for f in o.get("fetches", ()):
                owners.add((r, f["owner"]))
                events.append({
                    "ph": "X", "name": f"fetch m{f['module']} mb{f['mb']}", "cat": "pool",
                    "pid": r + 1, "tid": 2000 + f["owner"], "ts": (f["t_post_s"] - origin_s) * 1e6,
                    "dur": max(f["t_end_s"] - f["t_post_s"], 0.0) * 1e6,
                    "cname": "generic_work",
                    "args": {"owner": f["owner"], "tier": f["tier"], "offset": f["offset"],
                             "bytes": f["bytes"], "iteration": f["iteration"],
                             "wait_s": f["t_end_s"] - f["t_wait_s"]}})
    for r, owner in sorted(owners):
        events.append({"ph": "M", "name": "thread_name", "pid": r + 1, "tid": 2000 + owner,
                       "args": {"name": f"pool fetch \u2190 rank {owner}"}})
    return events
