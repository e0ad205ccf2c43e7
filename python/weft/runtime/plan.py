"""A weft execution plan (parsed JSON) as typed objects, checked once when it is loaded.

parse_plan(plan_dict) turns every action's "op" into an Op, its stage into a StageKey and each
buffer's two ends into StageRefs; an unknown op or a missing field raises ValueError naming the
rank and the action. The executor then dispatches on Op (one method per op) without looking at
strings again.
"""
from __future__ import annotations

import dataclasses
import enum
import re
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

PASS_OF_NAME_TAG = {"F": "forward", "B": "backward", "Bi": "backward_input",
                    "W": "backward_weight"}


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
    producer: Optional[StageRef]   # None: the plan does not say (a v1 name in another form)
    consumer: Optional[StageRef]
    samples: Optional[tuple[int, ...]] = None  # samples whose rows it carries (v2)
    rows: Optional[int] = None                # producer output rows it carries (v2)


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
    samples: Optional[tuple[int, ...]] = None    # compute (v2): sample ids of the batch
    instances: Optional[tuple[int, int]] = None  # compute (v2): [begin, end) of the module's
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
            return f"{op} m{self.module} dp {self.dp}"
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
    # (module, microbatch, sub) -> [begin, end) of the module's instances / the samples of the
    # stage, from the compute actions of every rank (v2), or None (v1: even slices).
    stage_instances: dict[tuple[int, int, int], tuple[int, int]]
    stage_samples: dict[tuple[int, int, int], tuple[int, ...]]
    # v1 only: sub-microbatches per (module, microbatch) read from the forward actions.
    num_subs: dict[tuple[int, int], int]

    @property
    def structured(self) -> bool:
        """True when the plan names buffer ends and stage data (weft.plan/v2)."""
        return self.schema != "weft.plan/v1"

    def compute_samples(self, module: int) -> dict[int, set[int]]:
        """Microbatch -> the samples the compute actions of `module` process (v2)."""
        out: dict[int, set[int]] = {}
        for (m, mb, _), samples in self.stage_samples.items():
            if m == module:
                out.setdefault(mb, set()).update(samples)
        return out


SCHEMAS = ("weft.plan/v1", "weft.plan/v2")


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
    if p not in PASS_OF_NAME_TAG.values():
        raise ValueError(f"{where}: pass = {p!r}; must be one of "
                         f"{', '.join(PASS_OF_NAME_TAG.values())}")
    return StageRef(_int(d, "rank", where), _stage_key(d, where), p)


_STAGE_NAME = re.compile(r"g(\d+) (\w+) mb(\d+)\.(\d+) c(\d+) (\S+)")


def _v1_ends(name: str, module_index: dict[str, int]) -> tuple[Optional[StageRef],
                                                            Optional[StageRef]]:
    """v1 plans carry a buffer's ends only in its name ("g1 F mb0.1 c0 vision_projector -> g2 F
    mb0.0 c0 llm"); (None, None) for a name in another form."""
    parts = name.split(" -> ")
    if len(parts) != 2:
        return None, None
    refs = []
    for p in parts:
        m = _STAGE_NAME.fullmatch(p.strip())
        if not m or m.group(6) not in module_index or m.group(2) not in PASS_OF_NAME_TAG:
            return None, None
        refs.append(StageRef(int(m.group(1)), StageKey(module_index[m.group(6)], int(m.group(5)),
                                                       int(m.group(3)), int(m.group(4))),
                             PASS_OF_NAME_TAG[m.group(2)]))
    return refs[0], refs[1]


def parse_plan(plan: dict, module_names: Optional[list[str]] = None) -> ExecutionPlan:
    """Parses a plan dict (json.loads of a weft.plan/v1 or v2 file). module_names (the model's,
    by index) resolve v1 buffer names; v2 buffers name their ends structurally.
    Raises ValueError with one line naming the rank and action (or buffer) on a malformed plan."""
    schema = plan.get("schema", "")
    if schema not in SCHEMAS:
        raise ValueError(f"plan: schema = {schema!r}; the runtime reads {', '.join(SCHEMAS)} "
                         f"(regenerate the plan with this weft: weft.plan(...) or weft plan)")
    v2 = schema != "weft.plan/v1"
    names = module_names if module_names is not None else plan.get("modules", [])
    module_index = {n: i for i, n in enumerate(names)}
    ranks: list[RankPlan] = []
    stage_instances: dict[tuple[int, int, int], tuple[int, int]] = {}
    stage_samples: dict[tuple[int, int, int], tuple[int, ...]] = {}
    num_subs: dict[tuple[int, int], int] = {}
    for r, rank in enumerate(plan.get("ranks", [])):
        buffers: dict[int, Buffer] = {}
        for j, b in enumerate(rank.get("buffers", [])):
            where = f"plan: rank {r} buffers[{j}]"
            bid = _int(b, "id", where)
            if v2:
                if "producer" not in b or "consumer" not in b:
                    raise ValueError(f"{where}: buffer {bid} has no producer / consumer")
                producer = _stage_ref(b["producer"], f"{where}.producer")
                consumer = _stage_ref(b["consumer"], f"{where}.consumer")
                samples = tuple(b.get("samples", ())) or None  # [] = unknown
                rows = b.get("rows")
                rows = rows if isinstance(rows, int) and rows >= 0 else None
            else:
                producer, consumer = _v1_ends(b.get("name", ""), module_index)
                samples, rows = None, None
            buffers[bid] = Buffer(bid, tuple(b.get("shape", ())), b.get("name", ""), producer,
                                  consumer, samples, rows)
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
                actions.append(Action(i, op, None, module=_int(a, "module", where),
                                      bytes=_int(a, "bytes", where, 0), dp=dp, raw=a))
                continue
            if "stage" not in a and op.is_compute:
                raise ValueError(f"{where}: {op.value} has no stage")
            stage = _stage_key(a["stage"], where) if "stage" in a else None
            if op.is_compute:
                samples = tuple(a.get("samples", ())) or None  # [] = unknown (or no data)
                inst = a.get("instances")
                instances = (int(inst[0]), int(inst[1])) if inst is not None else None
                act = Action(i, op, stage, inputs=tuple(a.get("inputs", ())),
                             outputs=tuple(a.get("outputs", ())), samples=samples,
                             instances=instances, raw=a)
                k = stage.slice_key
                if instances is not None:
                    if stage_instances.setdefault(k, instances) != instances:
                        raise ValueError(f"{where}: instances {list(instances)} of {stage}; "
                                         f"another stage of m{k[0]} mb{k[1]}.{k[2]} has "
                                         f"{list(stage_instances[k])}")
                if samples is not None:
                    stage_samples.setdefault(k, samples)
                if op is Op.FORWARD:
                    nk = (stage.module, stage.microbatch)
                    num_subs[nk] = max(num_subs.get(nk, 1), stage.sub + 1)
            else:
                act = Action(i, op, stage, buffer=_int(a, "buffer", where),
                             peer=_int(a, "peer", where, -1), raw=a)
                if op is not Op.FREE and act.peer < 0:
                    raise ValueError(f"{where}: {op.value} has no peer")
            actions.append(act)
        ranks.append(RankPlan(r, buffers, actions))
    return ExecutionPlan(schema, ranks, stage_instances, stage_samples, num_subs)
