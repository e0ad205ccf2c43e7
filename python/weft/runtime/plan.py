"""A weft execution plan (parsed JSON, schema weft.plan/v3) as typed objects, checked once when it
is loaded.

parse_plan(plan_dict) turns every action's "op" into an Op, its stage into a StageKey, each
buffer's two ends into StageRefs and the plan's data tables ("data", docs/plan_schema.md) into
PlanData: the batch's samples and sequences, every microbatch the ranks run with each module's
workload instances (tokens per segment, samples, item, unpadded tokens), and per rank its
replica, device group and chunks. An unknown op, a missing field or a table that does not fit
the actions raises ValueError naming the rank and the action (or the table entry). The executor
then dispatches on Op (one method per op) without looking at strings again, and takes every
shape from the tables: the runtime derives no token count itself.

A world plan (weft.plan(..., world=True)) holds every rank of every data-parallel replica; the
`mb` indices of a rank's stages refer to its replica's microbatches (data.ranks[r].replica), so
stage data (instances, samples) is kept per replica.
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
    ALL_REDUCE_GRADS = "all_reduce_grads"  # DP gradient all-reduce of a module

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


@dataclasses.dataclass(frozen=True)
class Instance:
    """One workload instance of a module in a microbatch (data::DeriveModuleWorkload's order):
    an image, an audio window or clip, a video, or an LLM sequence whose segments are samples."""
    tokens: tuple[int, ...]   # per segment
    samples: tuple[int, ...]  # per segment: the sample id (index into PlanData.samples)
    item: int                 # the item of its sample (image / clip / video number); -1 none
    unpadded_tokens: int      # tokens holding data (< sum(tokens) for a padded audio window)

    @property
    def total_tokens(self) -> int:
        return sum(self.tokens)


@dataclasses.dataclass(frozen=True)
class Microbatch:
    replica: int
    microbatch: int
    sequences: tuple[int, ...]
    instances: tuple[tuple[Instance, ...], ...]  # [module]


@dataclasses.dataclass(frozen=True)
class Chunk:
    """Layers [first_layer, first_layer + num_layers) of `module` in pipeline slot `chunk`."""
    module: int
    chunk: int
    first_layer: int
    num_layers: int
    module_replica: int = 0  # the module's DP replica (unfolded placements)


@dataclasses.dataclass(frozen=True)
class RankData:
    replica: int  # whose microbatches the rank's `mb` indices name
    group: int    # the placement's device group it runs
    chunks: tuple[Chunk, ...]


@dataclasses.dataclass(frozen=True)
class Sample:
    id: int           # the data's sample id (seeds its tensors)
    text_tokens: int


@dataclasses.dataclass(frozen=True)
class Sequence:
    samples: tuple[int, ...]  # sample ids in packing order
    llm_tokens: int


@dataclasses.dataclass
class PlanData:
    """The plan's data tables (weft.plan/v3 "data"); empty for a plan compiled from a bare
    stage graph (such a plan cannot run: has_data is False)."""
    samples: list[Sample]
    sequences: list[Sequence]
    microbatches: dict[tuple[int, int], Microbatch]  # (replica, microbatch) -> its entry
    ranks: list[RankData]

    @property
    def has_data(self) -> bool:
        return bool(self.ranks)

    @property
    def loss_tokens(self) -> int:
        """LLM tokens of the whole global batch: the loss denominator of every microbatch."""
        return sum(q.llm_tokens for q in self.sequences)

    def instance_tokens(self, replica: int, mb: int, module: int, begin: int, end: int) -> int:
        """Tokens of instances [begin, end) of `module` in microbatch (replica, mb)."""
        m = self.microbatches.get((replica, mb))
        if m is None or module >= len(m.instances):
            return 0
        return sum(i.total_tokens for i in m.instances[module][begin:end])


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
    data: PlanData
    # Per replica (key = rank_replica[rank]): (module, microbatch, sub) -> [begin, end) of the
    # module's workload instances and the samples of that stage, from the compute actions of
    # every rank of the replica (the same on every chunk).
    replica_instances: dict[int, dict[tuple[int, int, int], tuple[int, int]]]
    replica_samples: dict[int, dict[tuple[int, int, int], tuple[int, ...]]]
    # Per rank: the replica whose microbatches its `mb` indices refer to (data.ranks[r].replica:
    # all equal for one pipeline or an unfolded world plan, r // ranks per replica for a folded
    # world plan).
    rank_replica: tuple[int, ...] = ()
    iteration: int = 0
    model: str = ""
    strategy: str = ""
    modules: tuple[str, ...] = ()

    def compute_samples(self, module: int, replica: int = 0) -> dict[int, set[int]]:
        """Microbatch -> the samples the compute actions of `module` process (in `replica`)."""
        out: dict[int, set[int]] = {}
        for (m, mb, _), samples in self.replica_samples.get(replica, {}).items():
            if m == module:
                out.setdefault(mb, set()).update(samples)
        return out

    def collectives(self) -> list[tuple[int, tuple[int, ...]]]:
        """Every (module, ranks) of the plan's all_reduce_grads with more than one member, sorted:
        the data-parallel process groups a runtime creates, in the same order on every rank."""
        return sorted({(a.module, a.ranks) for r in self.ranks for a in r.actions
                       if a.op is Op.ALL_REDUCE_GRADS and len(a.ranks) > 1})


SCHEMA = "weft.plan/v3"


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


def _ints(v, where: str, lo: int = 0) -> tuple[int, ...]:
    if not isinstance(v, list) or not all(
            isinstance(x, int) and not isinstance(x, bool) and x >= lo for x in v):
        raise ValueError(f"{where} = {v!r}; must be a list of integers >= {lo}")
    return tuple(v)


def _entries(d: dict, key: str, where: str) -> list[dict]:
    """d[key] (default []): a list of objects."""
    v = d.get(key, [])
    if not isinstance(v, list) or not all(isinstance(x, dict) for x in v):
        raise ValueError(f"{where}.{key} must be a list of objects")
    return v


def _parse_data(d: dict, num_ranks: int, num_modules: int) -> PlanData:
    """The "data" object (docs/plan_schema.md "Data tables"): the entries the runtime reads,
    checked where the runtime relies on them (ids in range, one instance list per module)."""
    if not isinstance(d, dict):
        raise ValueError("plan: data must be an object (weft.plan/v3)")
    for key in ("samples", "sequences", "microbatches", "ranks"):
        _entries(d, key, "plan: data")
    samples = [Sample(_int(x, "id", f"plan: data.samples[{i}]"),
                      _int(x, "text_tokens", f"plan: data.samples[{i}]"))
               for i, x in enumerate(d.get("samples", []))]
    sequences = []
    for i, x in enumerate(d.get("sequences", [])):
        where = f"plan: data.sequences[{i}]"
        members = _ints(x.get("samples"), f"{where}.samples")
        if any(s >= len(samples) for s in members):
            raise ValueError(f"{where}.samples = {list(members)}; must be < {len(samples)}")
        sequences.append(Sequence(members, _int(x, "llm_tokens", where)))
    microbatches: dict[tuple[int, int], Microbatch] = {}
    for i, x in enumerate(d.get("microbatches", [])):
        where = f"plan: data.microbatches[{i}]"
        key = (_int(x, "replica", where), _int(x, "microbatch", where))
        seqs = _ints(x.get("sequences"), f"{where}.sequences")
        if any(q >= len(sequences) for q in seqs):
            raise ValueError(f"{where}.sequences = {list(seqs)}; must be < {len(sequences)}")
        lists = x.get("instances")
        if not isinstance(lists, list) or len(lists) != num_modules:
            raise ValueError(f"{where}.instances must have one list per module ({num_modules})")
        instances = []
        for m, lst in enumerate(lists):
            insts = []
            if not isinstance(lst, list):
                raise ValueError(f"{where}.instances[{m}] must be a list")
            for k, inst in enumerate(lst):
                at = f"{where}.instances[{m}][{k}]"
                if not isinstance(inst, dict):
                    raise ValueError(f"{at} must be an object")
                tokens = _ints(inst.get("tokens"), f"{at}.tokens")
                members = _ints(inst.get("samples"), f"{at}.samples")
                if len(members) != len(tokens) or any(s >= len(samples) for s in members):
                    raise ValueError(f"{at}: samples {list(members)} must name one sample "
                                     f"(< {len(samples)}) per segment of tokens {list(tokens)}")
                unpadded = inst.get("unpadded_tokens", sum(tokens))
                if not isinstance(unpadded, int) or not 0 <= unpadded <= sum(tokens):
                    raise ValueError(f"{at}.unpadded_tokens = {unpadded!r}; must be in "
                                     f"[0, {sum(tokens)}]")
                insts.append(Instance(tokens, members, _int(inst, "item", at), unpadded))
            instances.append(tuple(insts))
        if key in microbatches:
            raise ValueError(f"{where}: (replica, microbatch) {key} is listed twice")
        microbatches[key] = Microbatch(key[0], key[1], seqs, tuple(instances))
    ranks = []
    entries = d.get("ranks", [])
    if entries and len(entries) != num_ranks:
        raise ValueError(f"plan: data.ranks has {len(entries)} entries; the plan has "
                         f"{num_ranks} ranks")
    for r, x in enumerate(entries):
        where = f"plan: data.ranks[{r}]"
        chunks = tuple(Chunk(_int(c, "module", where), _int(c, "chunk", where),
                             _int(c, "first_layer", where), _int(c, "num_layers", where),
                             _int(c, "module_replica", where, 0))
                       for c in _entries(x, "chunks", where))
        if any(c.module >= num_modules for c in chunks):
            raise ValueError(f"{where}: a chunk names a module >= {num_modules}")
        ranks.append(RankData(_int(x, "replica", where), _int(x, "group", where), chunks))
    return PlanData(samples, sequences, microbatches, ranks)


def parse_plan(plan: dict) -> ExecutionPlan:
    """Parses a plan dict (json.loads of a weft.plan/v3 file, docs/plan_schema.md), its data
    tables included. Raises ValueError with one line naming the rank and the action (or buffer,
    or table entry) on a malformed plan; a v1 or v2 plan (no data tables) says to regenerate it."""
    schema = plan.get("schema", "")
    if schema in ("weft.plan/v1", "weft.plan/v2"):
        raise ValueError(f"plan: {schema} is no longer read (its data came on the side); "
                         "regenerate it with weft.plan(...) or `weft plan ... --out FILE` "
                         f"(writes {SCHEMA})")
    if schema != SCHEMA:
        raise ValueError(f"plan: schema = {schema!r}; expected {SCHEMA!r}")
    ranks: list[RankPlan] = []
    num_ranks = len(plan.get("ranks", []))
    modules = tuple(plan.get("modules", []))
    if "data" not in plan:
        raise ValueError("plan: data: missing (weft.plan/v3 carries its data tables)")
    data = _parse_data(plan["data"], num_ranks, len(modules))
    rank_replica = tuple(x.replica for x in data.ranks) or (0,) * num_ranks
    replica_instances: dict[int, dict] = {q: {} for q in set(rank_replica)}
    replica_samples: dict[int, dict] = {q: {} for q in set(rank_replica)}
    replicas = len(replica_instances)
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
                if data.has_data:
                    mb = data.microbatches.get((rank_replica[r], stage.microbatch))
                    if mb is None:
                        raise ValueError(f"{where}: microbatch {stage.microbatch} of replica "
                                         f"{rank_replica[r]} is not in data.microbatches")
                    n = len(mb.instances[stage.module]) if stage.module < len(modules) else -1
                    if inst[1] > n:
                        raise ValueError(f"{where}: instances {inst} of {stage}; the "
                                         f"microbatch has {max(n, 0)} instances of that module")
                k = stage.slice_key
                if stage_instances.setdefault(k, act.instances) != act.instances:
                    raise ValueError(f"{where}: instances {list(act.instances)} of {stage}; "
                                     f"another stage of m{k[0]} mb{k[1]}.{k[2]} has "
                                     f"{list(stage_instances[k])}"
                                     + ("" if replicas > 1 else " (a world plan of several "
                                        "replicas needs data.ranks)"))
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
                         _int(plan, "num_replicas", "plan", 1), data, replica_instances,
                         replica_samples, rank_replica, _int(plan, "iteration", "plan", 0),
                         plan.get("model", ""), plan.get("strategy", ""), modules)
