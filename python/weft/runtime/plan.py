"""A weft execution plan (parsed JSON) as typed objects, checked once when it is loaded.

parse_plan(plan_dict) turns every action's "op" into an Op, its stage into a StageKey and each
buffer's two ends into StageRefs; an unknown op or a missing field raises ValueError naming the
rank and the action. The executor then dispatches on Op (one method per op) without looking at
strings again.

A world plan (weft.plan(..., world=True)) holds every rank of every data-parallel replica; the
`mb` indices of a rank's stages refer to its replica's microbatches (rank_replica), so stage
data (instances, samples) is kept per replica.
"""
from __future__ import annotations

import dataclasses
import enum
from typing import Optional


class Op(enum.Enum):
    """The plan's actions (docs/plan_schema.md)."""
    FORWARD = "forward"
    BACKWARD = "backward"
    BACKWARD_INPUT = "backward_input"
    BACKWARD_WEIGHT = "backward_weight"
    ISEND = "isend"
    IRECV = "irecv"
    WAIT_SEND = "wait_send"
    WAIT_RECV = "wait_recv"
    FREE = "free"
    ALL_REDUCE_GRADS = "all_reduce_grads"  # plan schema v2: DP gradient all-reduce of a module

    @property
    def is_compute(self) -> bool:
        return self in COMPUTE_OPS


COMPUTE_OPS = frozenset({Op.FORWARD, Op.BACKWARD, Op.BACKWARD_INPUT, Op.BACKWARD_WEIGHT})
_OPS_BY_NAME = {op.value: op for op in Op}

PASSES = ("forward", "backward", "backward_input", "backward_weight")


@dataclasses.dataclass(frozen=True)
class StageKey:
    """A compute stage: (module, chunk, microbatch, sub-microbatch)."""
    module: int
    chunk: int
    microbatch: int
    sub: int

    @property
    def slice_key(self) -> tuple[int, int, int]:
        """(module, microbatch, sub): the data a stage computes on (same on every chunk)."""
        return self.module, self.microbatch, self.sub

    def __str__(self) -> str:
        sub = f".{self.sub}" if self.sub else ""
        return f"m{self.module} c{self.chunk} mb{self.microbatch}{sub}"


@dataclasses.dataclass(frozen=True)
class StageRef:
    """One end of a buffer: the stage that produces or consumes it, and in which pass."""
    rank: int
    stage: StageKey
    pass_: str  # forward, backward, backward_input, backward_weight

    @property
    def is_forward(self) -> bool:
        return self.pass_ == "forward"


@dataclasses.dataclass(frozen=True)
class Buffer:
    id: int
    shape: tuple[int, ...]
    name: str
    producer: StageRef
    consumer: StageRef
    samples: Optional[tuple[int, ...]] = None  # samples whose rows it carries (None: unknown)
    rows: Optional[int] = None                # producer output rows it carries (None: unknown)


@dataclasses.dataclass(frozen=True)
class Action:
    index: int
    op: Op
    stage: Optional[StageKey]
    inputs: tuple[int, ...] = ()
    outputs: tuple[int, ...] = ()
    buffer: int = -1
    peer: int = -1
    module: int = -1          # all_reduce_grads
    bytes: int = 0            # all_reduce_grads
    dp: int = 1               # all_reduce_grads
    ranks: tuple[int, ...] = ()  # all_reduce_grads: the ranks reducing together (() = unnamed)
    samples: Optional[tuple[int, ...]] = None    # compute: sample ids of the batch (None: [])
    instances: Optional[tuple[int, int]] = None  # compute: [begin, end) of the module's
                                                 # workload instances
    raw: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)

    def describe(self) -> str:
        op = self.op.value
        if self.op.is_compute:
            return f"{op} {self.stage}"
        if self.op in (Op.ISEND, Op.WAIT_SEND):
            return f"{op} buf {self.buffer} to rank {self.peer}"
        if self.op in (Op.IRECV, Op.WAIT_RECV):
            return f"{op} buf {self.buffer} from rank {self.peer}"
        if self.op is Op.ALL_REDUCE_GRADS:
            ranks = f" ranks {list(self.ranks)}" if self.ranks else ""
            return f"{op} m{self.module} dp {self.dp}{ranks}"
        return f"{op} buf {self.buffer}"


@dataclasses.dataclass
class RankPlan:
    rank: int
    buffers: dict[int, Buffer]
    actions: list[Action]


@dataclasses.dataclass
class ExecutionPlan:
    schema: str
    ranks: list[RankPlan]
    replica: int
    num_replicas: int
    # Per replica (index = rank_replica[rank]): (module, microbatch, sub) -> [begin, end) of the
    # module's workload instances and the samples of that stage, from the compute actions of
    # every rank of the replica (the same on every chunk).
    replica_instances: list[dict[tuple[int, int, int], tuple[int, int]]]
    replica_samples: list[dict[tuple[int, int, int], tuple[int, ...]]]
    # Per rank: the replica whose microbatches its `mb` indices refer to (all 0 for one pipeline
    # or an unfolded world plan, r // ranks per replica for a folded world plan).
    rank_replica: tuple[int, ...] = ()

    @property
    def stage_instances(self) -> dict[tuple[int, int, int], tuple[int, int]]:
        """Replica 0's stage instances (a one-pipeline plan's)."""
        return self.replica_instances[0] if self.replica_instances else {}

    @property
    def stage_samples(self) -> dict[tuple[int, int, int], tuple[int, ...]]:
        """Replica 0's stage samples (a one-pipeline plan's)."""
        return self.replica_samples[0] if self.replica_samples else {}

    def compute_samples(self, module: int, replica: int = 0) -> dict[int, set[int]]:
        """Microbatch -> the samples the compute actions of `module` process (in `replica`)."""
        out: dict[int, set[int]] = {}
        for (m, mb, _), samples in self.replica_samples[replica].items():
            if m == module:
                out.setdefault(mb, set()).update(samples)
        return out

    def collectives(self) -> list[tuple[int, tuple[int, ...]]]:
        """Every (module, ranks) of the plan's all_reduce_grads with more than one member, sorted:
        the data-parallel process groups a runtime creates, in the same order on every rank."""
        return sorted({(a.module, a.ranks) for r in self.ranks for a in r.actions
                       if a.op is Op.ALL_REDUCE_GRADS and len(a.ranks) > 1})


SCHEMA = "weft.plan/v2"


def _where(rank: int, index: int) -> str:
    return f"plan: rank {rank} action {index}"


def _int(d: dict, key: str, where: str, default: Optional[int] = None) -> int:
    v = d.get(key, default)
    if not isinstance(v, int) or isinstance(v, bool):
        raise ValueError(f"{where}: {key} = {v!r}; must be an integer")
    return v


def _stage_key(d: dict, where: str) -> StageKey:
    return StageKey(_int(d, "module", where), _int(d, "chunk", where, 0), _int(d, "mb", where),
                    _int(d, "sub", where, 0))


def _stage_ref(d: dict, where: str) -> StageRef:
    p = d.get("pass", "")
    if p not in PASSES:
        raise ValueError(f"{where}: pass = {p!r}; must be one of {', '.join(PASSES)}")
    return StageRef(_int(d, "rank", where), _stage_key(d, where), p)


def parse_plan(plan: dict, rank_replica=None) -> ExecutionPlan:
    """Parses a plan dict (json.loads of a weft.plan/v2 file, docs/plan_schema.md). Raises
    ValueError with one line naming the rank and the action (or buffer) on a malformed plan.
    rank_replica: per rank the replica whose microbatches its `mb` indices refer to (weft.plan's
    ranks[r]["replica"]; None = all 0, one microbatch list)."""
    schema = plan.get("schema", "")
    if schema == "weft.plan/v1":
        raise ValueError("plan: weft.plan/v1 is no longer read (no buffer ends or samples); "
                         "regenerate it with weft.plan(...) or `weft plan ... --out FILE`")
    if schema != SCHEMA:
        raise ValueError(f"plan: schema = {schema!r}; expected {SCHEMA!r}")
    ranks: list[RankPlan] = []
    num_ranks = len(plan.get("ranks", []))
    if rank_replica is None:
        rank_replica = (0,) * num_ranks
    rank_replica = tuple(rank_replica)
    if len(rank_replica) != num_ranks or any(
            not isinstance(q, int) or q < 0 for q in rank_replica):
        raise ValueError(f"plan: rank_replica {list(rank_replica)} must give a replica >= 0 for "
                         f"each of the plan's {num_ranks} ranks")
    replicas = max(rank_replica, default=0) + 1
    replica_instances: list[dict] = [{} for _ in range(replicas)]
    replica_samples: list[dict] = [{} for _ in range(replicas)]
    for r, rank in enumerate(plan.get("ranks", [])):
        stage_instances = replica_instances[rank_replica[r]]
        stage_samples = replica_samples[rank_replica[r]]
        buffers: dict[int, Buffer] = {}
        for j, b in enumerate(rank.get("buffers", [])):
            where = f"plan: rank {r} buffers[{j}]"
            bid = _int(b, "id", where)
            if "producer" not in b or "consumer" not in b:
                raise ValueError(f"{where}: buffer {bid} has no producer / consumer")
            rows = b.get("rows", -1)
            buffers[bid] = Buffer(
                bid, tuple(b.get("shape", ())), b.get("name", ""),
                _stage_ref(b["producer"], f"{where}.producer"),
                _stage_ref(b["consumer"], f"{where}.consumer"),
                samples=tuple(b.get("samples", ())) or None,  # [] = unknown
                rows=rows if isinstance(rows, int) and rows >= 0 else None)
        actions: list[Action] = []
        for i, a in enumerate(rank.get("actions", [])):
            where = _where(r, i)
            op = _OPS_BY_NAME.get(a.get("op"))
            if op is None:
                raise ValueError(f"{where}: unknown op {a.get('op')!r}; must be one of "
                                 f"{', '.join(_OPS_BY_NAME)}")
            if op is Op.ALL_REDUCE_GRADS:
                dp = _int(a, "dp", where)
                if dp < 1:
                    raise ValueError(f"{where}: all_reduce_grads dp = {dp}; must be >= 1")
                members = a.get("ranks", [])
                if not (isinstance(members, list) and all(
                        isinstance(x, int) and not isinstance(x, bool) and 0 <= x < num_ranks
                        for x in members)) or (members and (
                        len(members) != dp or r not in members
                        or any(x >= y for x, y in zip(members, members[1:])))):
                    raise ValueError(f"{where}: all_reduce_grads ranks = {members!r}; must be "
                                     f"{dp} ascending ranks < {num_ranks}, rank {r} included")
                actions.append(Action(i, op, None, module=_int(a, "module", where),
                                      bytes=_int(a, "bytes", where, 0), dp=dp,
                                      ranks=tuple(members), raw=a))
                continue
            if "stage" not in a:
                raise ValueError(f"{where}: {op.value} has no stage")
            stage = _stage_key(a["stage"], where)
            if op.is_compute:
                inst = a.get("instances")
                if not (isinstance(inst, list) and len(inst) == 2
                        and all(isinstance(x, int) for x in inst) and 0 <= inst[0] <= inst[1]):
                    raise ValueError(f"{where}: instances = {inst!r}; must be [begin, end] with "
                                     f"0 <= begin <= end")
                act = Action(i, op, stage, inputs=tuple(a.get("inputs", ())),
                             outputs=tuple(a.get("outputs", ())),
                             samples=tuple(a.get("samples", ())) or None,
                             instances=(inst[0], inst[1]), raw=a)
                k = stage.slice_key
                if stage_instances.setdefault(k, act.instances) != act.instances:
                    raise ValueError(f"{where}: instances {list(act.instances)} of {stage}; "
                                     f"another stage of m{k[0]} mb{k[1]}.{k[2]} has "
                                     f"{list(stage_instances[k])}"
                                     + ("" if replicas > 1 else " (a world plan of several "
                                        "replicas needs rank_replica)"))
                if act.samples is not None:
                    stage_samples.setdefault(k, act.samples)
            else:
                act = Action(i, op, stage, buffer=_int(a, "buffer", where),
                             peer=_int(a, "peer", where, -1), raw=a)
                if op is not Op.FREE and act.peer < 0:
                    raise ValueError(f"{where}: {op.value} has no peer")
            actions.append(act)
        ranks.append(RankPlan(r, buffers, actions))
    return ExecutionPlan(schema, ranks, _int(plan, "replica", "plan", 0),
                         _int(plan, "num_replicas", "plan", 1), replica_instances,
                         replica_samples, rank_replica)
