"""Checks weft's torch-csv export with PyTorch's own pipelining code.

The CSV fixtures in data/ are written by weft's exporter (src/plan/compiler_test.cc keeps them
equal to the current output: TorchCsvGolden). Here torch parses them with its own action grammar
(_Action.from_str, as _PipelineScheduleRuntime._load_csv does), validates them
(_validate_schedule), dry-runs the communication (_simulate_comms_compute: flags missing or
misordered send/recv), and finally executes the 1F1B schedule for real with 4 gloo processes and
compares the gradients with a single-process reference.
"""
import csv
import os
import pathlib

import pytest

torch = pytest.importorskip("torch")
schedules = pytest.importorskip("torch.distributed.pipelining.schedules")

DATA = pathlib.Path(__file__).parent / "data"
NUM_RANKS = 4
NUM_MICROBATCHES = 8

# file, number of stages, stage -> rank
CASES = [
    ("1f1b_p4_m8.csv", 4),
    ("gpipe_p4_m8.csv", 4),
    ("interleaved_p4_v2_m8.csv", 8),
    ("zbh1_p4_m8.csv", 4),
]


def load(name):
    with open(DATA / name, newline="") as f:
        rows = list(csv.reader(f))
    return {rank: [schedules._Action.from_str(s) for s in row] for rank, row in enumerate(rows)}


def stage_to_rank(num_stages):
    return lambda s: s % NUM_RANKS


@pytest.mark.parametrize("name,num_stages", CASES)
def test_torch_validates_and_simulates_compute_comms(name, num_stages):
    actions = load(name)
    assert len(actions) == NUM_RANKS
    mapping = schedules._validate_schedule(actions, NUM_RANKS, num_stages, NUM_MICROBATCHES)
    assert mapping == {s: s % NUM_RANKS for s in range(num_stages)}
    # Raises "Schedule is not progressing" on a deadlock or a missing / misordered send-recv.
    simulated = schedules._simulate_comms_compute(actions, stage_to_rank(num_stages), num_stages)
    for rank in range(NUM_RANKS):
        executed = [a for a in simulated[rank] if a is not None]
        assert executed == actions[rank]


@pytest.mark.parametrize("name,num_stages", CASES)
def test_every_send_has_one_receive(name, num_stages):
    actions = load(name)
    sends, recvs = set(), set()
    for rank, row in actions.items():
        for a in row:
            t = a.computation_type
            if t == schedules.SEND_F:
                sends.add((a.stage_index + 1, "F", a.microbatch_index))
            elif t == schedules.SEND_B:
                sends.add((a.stage_index - 1, "B", a.microbatch_index))
            elif t == schedules.RECV_F:
                recvs.add((a.stage_index, "F", a.microbatch_index))
            elif t == schedules.RECV_B:
                recvs.add((a.stage_index, "B", a.microbatch_index))
    assert sends == recvs
    # Every non-first stage receives its forward input and every non-last stage its gradient.
    assert len(sends) == 2 * (num_stages - 1) * NUM_MICROBATCHES


def test_compute_only_matches_and_lowers_like_torch():
    compute = load("1f1b_p4_m8_compute_only.csv")
    comms = load("1f1b_p4_m8.csv")
    for rank in range(NUM_RANKS):
        assert compute[rank] == [a for a in comms[rank] if a.is_compute_op]
    lowered = schedules._add_send_recv(
        {r: list(v) for r, v in compute.items()}, stage_to_rank(4), 4
    )
    schedules._simulate_comms_compute(lowered, stage_to_rank(4), 4)
    # torch's lowering has the same communication cells per rank (its positions may differ).
    for rank in range(NUM_RANKS):
        assert sorted(map(str, lowered[rank])) == sorted(map(str, comms[rank]))


def _run_rank(rank, world, csv_path, init_file, result_dir):
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    torch.manual_seed(0)
    layers = [torch.nn.Linear(16, 16) for _ in range(world)]
    stage = PipelineStage(layers[rank], rank, world, torch.device("cpu"))
    loss_fn = lambda out, target: ((out - target) ** 2).sum()  # noqa: E731
    sched = _PipelineScheduleRuntime([stage], n_microbatches=NUM_MICROBATCHES, loss_fn=loss_fn,
                                     scale_grads=False)
    sched._load_csv(csv_path, format="compute_comms")
    x = torch.randn(NUM_MICROBATCHES * 2, 16, generator=torch.Generator().manual_seed(1))
    y = torch.randn(NUM_MICROBATCHES * 2, 16, generator=torch.Generator().manual_seed(2))
    losses = []
    if rank == 0:
        sched.step(x)
    elif rank == world - 1:
        sched.step(target=y, losses=losses)
    else:
        sched.step()
    torch.save({"grad": layers[rank].weight.grad, "losses": losses},
               os.path.join(result_dir, f"rank{rank}.pt"))
    dist.destroy_process_group()


def test_torch_runtime_executes_the_1f1b_plan(tmp_path):
    """Runs the exported 1F1B schedule on 4 CPU processes (gloo) with torch's runtime."""
    import torch.multiprocessing as mp

    world = NUM_RANKS
    mp.spawn(_run_rank, args=(world, str(DATA / "1f1b_p4_m8.csv"), str(tmp_path / "init"),
                              str(tmp_path)), nprocs=world, join=True)
    # Reference: the same 4 layers in one process, whole batch at once.
    torch.manual_seed(0)
    layers = [torch.nn.Linear(16, 16) for _ in range(world)]
    x = torch.randn(NUM_MICROBATCHES * 2, 16, generator=torch.Generator().manual_seed(1))
    y = torch.randn(NUM_MICROBATCHES * 2, 16, generator=torch.Generator().manual_seed(2))
    out = x
    for layer in layers:
        out = layer(out)
    loss = ((out - y) ** 2).sum()
    loss.backward()
    results = [torch.load(tmp_path / f"rank{r}.pt") for r in range(world)]
    assert len(results[-1]["losses"]) == NUM_MICROBATCHES
    assert torch.allclose(sum(results[-1]["losses"]), loss.detach(), rtol=1e-4, atol=1e-4)
    for r in range(world):
        assert torch.allclose(results[r]["grad"], layers[r].weight.grad, rtol=1e-4, atol=1e-4), r


@pytest.mark.skipif(not os.environ.get("WEFT_CLI"), reason="set WEFT_CLI to the weft binary")
def test_cli_validates_and_exports_a_compiled_plan(tmp_path):
    """`weft validate` / `weft export` on a compiled 2-rank plan; torch simulates the result."""
    import subprocess

    cli = os.environ["WEFT_CLI"]
    plan = DATA / "1f1b_p2_m4.plan.json"
    ok = subprocess.run([cli, "validate", str(plan)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("OK ")
    out = tmp_path / "sched.csv"
    exported = subprocess.run([cli, "export", "--format", "torch-csv", "--plan", str(plan),
                               "--out", str(out)], capture_output=True, text=True)
    assert exported.returncode == 0, exported.stderr
    with open(out, newline="") as f:
        actions = {r: [schedules._Action.from_str(s) for s in row]
                   for r, row in enumerate(csv.reader(f))}
    schedules._validate_schedule(actions, 2, 2, 4)
    schedules._simulate_comms_compute(actions, lambda s: s, 2)
    bad = tmp_path / "bad.json"
    bad.write_text(plan.read_text().replace("weft.plan/v3", "weft.plan/v9"))
    refused = subprocess.run([cli, "validate", str(bad)], capture_output=True, text=True)
    assert refused.returncode == 2
    assert "schema = \"weft.plan/v9\"; expected \"weft.plan/v3\"" in refused.stderr


def test_the_schedule_weft_tune_emits_for_torchtitan_loads_in_torch(tmp_path):
    """Issue 33: `weft tune --emit torchtitan` for a strategy with weft's own schedule writes
    torch's pipelining CSV; torch parses and validates it."""
    import subprocess
    import tomllib

    import _weft

    binary = pathlib.Path(_weft.__file__).resolve().parent.parent / "weft"
    if not binary.exists():
        pytest.skip(f"no weft binary beside the bindings ({binary})")
    out = tmp_path / "titan.toml"
    # tiny-vlm on 16 GPUs: zb-h1's tuned configuration pipelines (pp 4); ZB-H1 is weft's own
    # schedule for torchtitan (no stock name), so it goes as the CSV.
    subprocess.run([str(binary), "tune", "--model", "tiny-vlm", "--gpus", "16", "--strategies",
                    "zb-h1", "--quiet", "--emit", "torchtitan", "--out", str(out)],
                   check=True, capture_output=True)
    cfg = tomllib.loads(out.read_text())
    par = cfg["parallelism"]
    csv_path = par.get("pipeline_parallel_schedule_csv")
    assert par["pipeline_parallel_degree"] > 1, par
    with open(csv_path, newline="") as f:
        rows = list(csv.reader(f))
    actions = {rank: [schedules._Action.from_str(s) for s in row] for rank, row in enumerate(rows)}
    assert len(actions) == par["pipeline_parallel_degree"]
    num_stages = 1 + max(a.stage_index for row in actions.values() for a in row)
    num_microbatches = 1 + max(a.microbatch_index for row in actions.values() for a in row
                               if a.microbatch_index is not None)
    schedules._validate_schedule(actions, len(actions), num_stages, num_microbatches)
