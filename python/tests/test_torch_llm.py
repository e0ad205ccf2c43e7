"""A client no one here wrote: PyTorch's own lowered-schedule runtime runs weft's exported plan.

The LLM of tiny-vlm alone (4 layers; 8 for megatron-vpp, two chunks per rank) is planned with
megatron-1f1b, gpipe, zb-h1 (split backward: torch's I and W actions) and megatron-vpp (torch's
loop placement, stage = rank + chunk · P) on a pipeline of 4 ranks. Each compiled plan runs
twice on 4 gloo processes:
  1. with weft's executor (weft.runtime.executor.run_plans), and
  2. exported by the weft CLI to torch's CSV schedule (`weft export --format torch-csv`) and run
     by torch.distributed.pipelining's _PipelineScheduleRuntime (`_load_csv(...,
     format="compute_comms")`), one PipelineStage per chunk wrapping weft's own ModuleChunk of
     that chunk's layer (same seed, hence the same weights).
Both must give the same loss and the same gradient for every parameter.

torch's PipelineStage needs one static shape per stage, so every sample has the same text length
and the context is that length: each packed sequence holds one sample and each microbatch one
sequence ([1, T] token ids at stage 0, [1, T, H] hidden states after it).
"""
import csv
import json
import os
import subprocess

import pytest

torch = pytest.importorskip("torch")
schedules = pytest.importorskip("torch.distributed.pipelining.schedules")

import weft  # noqa: E402
from weft.runtime.executor import run_plans  # noqa: E402
from weft.runtime.harness import max_relative_error  # noqa: E402
from weft.runtime.model import MicrobatchData, ModuleChunk  # noqa: E402
from weft.runtime.plan import parse_plan  # noqa: E402

NUM_RANKS = 4
NUM_MICROBATCHES = 8
TEXT_TOKENS = 32
SEED = 1

MODEL_YAML = """\
# The LLM of tiny-vlm alone, for a linear chain of pipeline stages (one layer each).
description: "tiny-vlm's LM alone (hidden 64, vocab 256)"
modules:
  - {{use: tiny-vlm, module: llm, num_layers: {layers}}}
edges: []
setup:
  cluster: a100
  gpus: {ranks}
  context_tokens: {tokens}
  global_batch_sequences: {microbatches}
  parallel:
    num_microbatches: {microbatches}
    global_batch_size: {microbatches}
    all: {{tp: 1, pp: {ranks}, dp: 1}}
"""


class LlmStage(torch.nn.Module):
    """Adapts one LLM ModuleChunk to PipelineStage's batched tensors (batch dim 1 = one sample):
    the first stage takes token ids [1, T] (embedding), the others hidden states [1, T, H]; the
    last returns logits [1, T, V] (the loss is torch's loss_fn). Same ops as ModuleChunk.forward
    for an LLM chunk with no upstream modules."""

    def __init__(self, chunk: ModuleChunk, mask: torch.Tensor):
        super().__init__()
        self.chunk = chunk
        self.mask = mask  # additive causal mask of one sample, [T, T]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.chunk
        h = c.embed[x[0]] if c.is_first else x[0]
        for layer in c.layers:
            h = layer(h, self.mask)
        # Not a view: torch's split backward (I) detaches the stage output in place.
        if c.is_last:
            return (c.final_norm(h) @ c.head.T).unsqueeze(0).clone()
        return h.unsqueeze(0).clone()


def _torch_rank(rank: int, world: int, csv_path: str, init_file: str, result_dir: str,
                model: dict, chunks: list[dict], mask: torch.Tensor, token_ids: torch.Tensor,
                labels: torch.Tensor, denom: float) -> None:
    from datetime import timedelta

    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

    torch.set_num_threads(1)
    # A schedule torch cannot run fails in 30 s instead of gloo's 30 min default.
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=30))
    # This rank's chunks, in chunk order; torch's stage index of chunk c is rank + c * world.
    mine = sorted((c for c in chunks if c["group"] == rank), key=lambda c: c["chunk"])
    num_stages = len(chunks)
    mcs = [ModuleChunk(model, c["module"], c["first_layer"], c["num_layers"], SEED) for c in mine]
    stages = [PipelineStage(LlmStage(mc, mask), rank + c["chunk"] * world, num_stages,
                            torch.device("cpu")) for mc, c in zip(mcs, mine)]

    def loss_fn(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits[0], target[0], reduction="sum") / denom

    sched = _PipelineScheduleRuntime(stages, n_microbatches=NUM_MICROBATCHES, loss_fn=loss_fn,
                                     scale_grads=False)
    sched._load_csv(csv_path, format="compute_comms")
    with open(csv_path, newline="") as f:
        row = list(csv.reader(f))[rank]
    # The runtime executes weft's cells as written (no re-lowering of its own).
    assert list(map(str, sched.pipeline_order_with_comms[rank])) == row
    losses: list[torch.Tensor] = []
    first = any(st.is_first for st in stages)
    last = any(st.is_last for st in stages)
    if first and last:
        sched.step(token_ids, target=labels, losses=losses)
    elif first:
        sched.step(token_ids)
    elif last:
        sched.step(target=labels, losses=losses)
    else:
        sched.step()
    grads = {n: p.grad.detach().clone() for mc in mcs for n, p in mc.parameter_names().items()}
    torch.save({"grads": grads, "losses": [float(x.detach()) for x in losses]},
               os.path.join(result_dir, f"rank{rank}.pt"))
    dist.destroy_process_group()


@pytest.mark.skipif(not os.environ.get("WEFT_CLI"), reason="set WEFT_CLI to the weft binary")
@pytest.mark.parametrize("strategy,layers", [("megatron-1f1b", 4), ("gpipe", 4), ("zb-h1", 4),
                                             ("megatron-vpp", 8)])
def test_torch_runtime_runs_weft_plans_of_the_tiny_llm_like_weft(tmp_path, strategy, layers):
    import torch.multiprocessing as mp

    model_path = tmp_path / "tiny-llm.yaml"
    model_path.write_text(MODEL_YAML.format(layers=layers, ranks=NUM_RANKS, tokens=TEXT_TOKENS,
                                            microbatches=NUM_MICROBATCHES))
    data_path = tmp_path / "text.jsonl"
    with open(data_path, "w") as f:
        for i in range(2 * NUM_MICROBATCHES):
            f.write(json.dumps({"id": i, "text_tokens": TEXT_TOKENS}) + "\n")

    r = weft.plan(strategy, str(model_path), data=str(data_path), iteration=0, seed=SEED,
                  gpus=NUM_RANKS, pipeline_size=NUM_RANKS)
    assert r["pipeline_size"] == NUM_RANKS and r["dp"] == 1
    # One layer per chunk, layer k on rank k % P as its chunk k // P (torch's loop placement);
    # one single-sample sequence per microbatch.
    assert sorted((c["first_layer"], c["group"], c["chunk"], c["num_layers"])
                  for c in r["chunks"]) == \
        [(k, k % NUM_RANKS, k // NUM_RANKS, 1) for k in range(layers)]
    ops = {a["op"] for rank in json.loads(r["plan_json"])["ranks"] for a in rank["actions"]}
    assert ("backward_weight" in ops) == (strategy == "zb-h1")
    batch = r["batch"]
    assert r["microbatches"] == [[q] for q in range(NUM_MICROBATCHES)]
    assert [s["sample_indices"] for s in batch["sequences"]] == \
        [[q] for q in range(NUM_MICROBATCHES)]
    assert {s["llm_tokens"] for s in batch["sequences"]} == {TEXT_TOKENS}

    # 1. weft's executor.
    model = weft.load_model(str(model_path))
    job = {"iteration": 0, "plan": json.loads(r["plan_json"])}
    [ran] = run_plans(model, [job], seed=SEED, timeout_s=30)

    # 2. The same compiled plan, exported by the CLI to torch's CSV.
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(r["plan_json"])
    csv_path = tmp_path / "sched.csv"
    exported = subprocess.run([os.environ["WEFT_CLI"], "export", "--format", "torch-csv",
                               "--plan", str(plan_path), "--out", str(csv_path)],
                              capture_output=True, text=True)
    assert exported.returncode == 0, exported.stderr
    with open(csv_path, newline="") as f:
        actions = {rank: [schedules._Action.from_str(s) for s in row]
                   for rank, row in enumerate(csv.reader(f))}
    schedules._validate_schedule(actions, NUM_RANKS, layers, NUM_MICROBATCHES)
    schedules._simulate_comms_compute(actions, lambda s: s % NUM_RANKS, layers)

    # Inputs from weft's own MicrobatchData (same RNG draws as the executor), microbatch order.
    plan = parse_plan(job["plan"])
    denom = float(plan.data.loss_tokens)
    assert denom == sum(s["llm_tokens"] for s in batch["sequences"])
    mbs = [MicrobatchData(model, plan, plan.data.microbatches[key], SEED, denom)
           for key in sorted(plan.data.microbatches)]
    for mb in mbs:
        assert mb.llm_segments == [TEXT_TOKENS]
        assert torch.equal(mb.llm_mask, mbs[0].llm_mask)
    token_ids = torch.stack([mb.token_ids for mb in mbs])  # [M, T]; step() splits along dim 0
    labels = torch.stack([mb.labels for mb in mbs])
    mp.spawn(_torch_rank, args=(NUM_RANKS, str(csv_path), str(tmp_path / "init"), str(tmp_path),
                                model, r["chunks"], mbs[0].llm_mask, token_ids, labels, denom),
             nprocs=NUM_RANKS, join=True)

    results = [torch.load(tmp_path / f"rank{rank}.pt") for rank in range(NUM_RANKS)]
    losses = results[-1]["losses"]
    assert len(losses) == NUM_MICROBATCHES
    torch_loss = sum(losses)
    assert torch_loss == pytest.approx(ran["loss"], rel=1e-5)
    torch_grads = {n: g for res in results for n, g in res["grads"].items()}
    assert len(torch_grads) == len(ran["grads"]) > 10
    assert max_relative_error(torch_grads, ran["grads"]) < 1e-5
    print(f"{strategy}: weft executor loss {ran['loss']:.7f}, torch runtime loss {torch_loss:.7f}, "
          f"max grad rel err {max_relative_error(torch_grads, ran['grads']):.2e}")
