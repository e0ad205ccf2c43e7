"""DFLOP's model profiler (DFLOP §3.2.1): per-layer forward / backward times and memory of a
weft model's modules, measured on real torch layers, written as `weft.profile/v1` JSON.

  python -m weft.profile --model llava-ov-qwen2.5-7b --device cuda --out profile.json   # GPU
  python -m weft.profile --model tiny-vlm --scale 0.5 --quick --out /tmp/p.json         # CPU

What is measured (times in seconds per ONE layer, bytes in bytes):
- encoder modules (ViT, audio encoder; role "encoder"): one layer's forward and backward vs the
  effective batch size b (instances of the module's tokens_per_instance tokens; attention per
  instance) x TP;
- the LLM (role "llm"): one layer vs the packed sequence length s (one causal sequence) x TP,
  attention and linear parts apart: the layer is run with its attention core and with the core
  replaced by identity on V (the fused QKV, output projection, norms and MLP still run, and the
  QKV GEMM's backward still runs in full); linear = without, attention = with - without,
  clamped at >= 0 (the file's notes count the clamped values);
- memory per layer and TP rank: parameters of the torch layer, and activation bytes per
  instance (encoder) / per token (LLM): the bytes of the tensors autograd saves for backward
  (torch.autograd.graph.saved_tensors_hooks; storages counted once, parameters excluded) at two
  batch sizes / sequence lengths, the slope between them. Also measured with 2 layers stacked:
  state_linear_in_layers says parameters and saved bytes of 2 layers are twice those of 1.

The layer is built from the module's spec (hidden, ffn, heads, kv groups, head_dim, gated MLP,
activation, RMSNorm / LayerNorm, qkv / linear biases, qk norm): at TP 1 and scale 1 its
parameter count is the spec's parameters_per_layer (checked; a mismatch is an error). Attention
is torch's scaled_dot_product_attention (flash / memory-efficient kernels, GQA without
repeating K and V), so 32K-token sequences fit where the runtime's tiny TransformerLayer
(weft.runtime.model, an explicit [T, T] mask) would not. No rotary embedding, no dropout.

TP > 1 is emulated on one device with per-rank shapes: heads / tp, kv heads / tp, ffn / tp
(rounded up when tp does not divide it), hidden and norms whole, row-parallel biases whole; no
TP collectives (the cost model adds communication itself). A module is timed only at the TP
values of the grid that divide its heads and kv heads.

Timing: `warmup` untimed steps, then `steps` timed steps, each a forward and a backward of
fresh gradients (weights and input); the first half of the timed steps is discarded and the
median of the rest kept. On a GPU: CUDA events, torch.cuda.synchronize, and an L2 flush (a
256 MiB buffer written) before each step, bf16. On the CPU: time.perf_counter, float32.
`scale` < 1 shrinks widths (hidden, ffn, heads, kv heads) for CPU runs: such a file's numbers
are not the real model's, and its provenance says so.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F

import weft

SCHEMA = "weft.profile/v1"
DEFAULT_GRID = {"encoder_batch": [1, 2, 4, 8, 16, 32, 64],
                "llm_seq": [512, 1024, 2048, 4096, 8192, 16384, 32768],
                "tp": [1, 2, 4, 8]}
QUICK_GRID = {"encoder_batch": [1, 2, 4], "llm_seq": [128, 256, 512], "tp": [1, 2]}
STATISTIC = "median of the second half of timed steps"
TP_EMULATION = "TP>1 timed on one device with per-rank shapes; no TP communication"
L2_FLUSH_BYTES = 256 << 20
ENCODER_KINDS = ("vit", "audio_encoder")


class ProfileError(ValueError):
    """Bad input: the message names the option and the rule (the CLI exits 2)."""


class ProfileOutOfMemory(RuntimeError):
    """A grid point did not fit on the device (the CLI exits 1 naming the point)."""


@dataclass(frozen=True)
class LayerShape:
    """One TP rank's shape of a transformer layer (widths already scaled and divided by TP)."""
    hidden: int
    ffn: int            # per rank
    heads: int          # per rank
    kv_heads: int       # per rank
    head_dim: int
    gated: bool
    activation: str     # "gelu" | "silu" | "relu" ...
    rms_norm: bool
    qkv_bias: bool
    linear_bias: bool
    qk_norm: bool
    causal: bool


def scaled_module(spec: dict, scale: float) -> dict:
    """The module's spec with widths multiplied by `scale` (hidden, ffn, heads, kv heads; head_dim
    kept); kv heads lowered to a divisor of heads where rounding broke GQA grouping."""
    if scale == 1.0:
        return dict(spec)
    out = dict(spec)
    heads = max(1, round(spec["num_attention_heads"] * scale))
    kv = max(1, round((spec["num_kv_groups"] or spec["num_attention_heads"]) * scale))
    while heads % kv:
        kv -= 1
    out.update(hidden_size=max(1, round(spec["hidden_size"] * scale)),
               ffn_hidden_size=max(1, round(spec["ffn_hidden_size"] * scale)),
               num_attention_heads=heads, num_kv_groups=kv)
    return out


def layer_shape(spec: dict, tp: int) -> LayerShape:
    heads = spec["num_attention_heads"]
    kv = spec["num_kv_groups"] or heads
    return LayerShape(hidden=spec["hidden_size"], ffn=math.ceil(spec["ffn_hidden_size"] / tp),
                      heads=heads // tp, kv_heads=kv // tp, head_dim=spec["head_dim"],
                      gated=spec["gated_mlp"], activation=spec["activation"],
                      rms_norm=spec["rms_norm"], qkv_bias=spec["qkv_bias"] or spec["linear_bias"],
                      linear_bias=spec["linear_bias"], qk_norm=spec["qk_norm"],
                      causal=spec["causal_attention"])


def valid_tps(spec: dict, tps: list[int]) -> list[int]:
    """The grid's TP values that divide the module's heads and kv heads."""
    heads = spec["num_attention_heads"]
    kv = spec["num_kv_groups"] or heads
    return [tp for tp in tps if heads % tp == 0 and kv % tp == 0]


# The spec's activations (spec::Activation); quick_gelu is CLIP's x * sigmoid(1.702 x).
_ACTIVATIONS = {"gelu": F.gelu, "silu": F.silu, "relu": F.relu,
                "quick_gelu": lambda x: x * torch.sigmoid(1.702 * x)}


class ProfiledLayer(torch.nn.Module):
    """A pre-norm transformer layer of one TP rank: fused QKV (column parallel), SDPA, output
    projection (row parallel), MLP (gated or not). forward(x, attention=False) replaces the
    attention core by identity on V (each query head takes its group's V)."""

    def __init__(self, s: LayerShape):
        super().__init__()
        norm = torch.nn.RMSNorm if s.rms_norm else torch.nn.LayerNorm
        if s.activation not in _ACTIVATIONS:
            raise ProfileError(f"activation = {s.activation}; the profiler knows "
                               f"{', '.join(sorted(_ACTIVATIONS))}")
        self.s = s
        self.act = _ACTIVATIONS[s.activation]
        d = s.head_dim
        self.norm1 = norm(s.hidden)
        self.qkv = torch.nn.Linear(s.hidden, (s.heads + 2 * s.kv_heads) * d, bias=s.qkv_bias)
        self.q_norm = norm(d) if s.qk_norm else None
        self.k_norm = norm(d) if s.qk_norm else None
        self.proj = torch.nn.Linear(s.heads * d, s.hidden, bias=s.linear_bias)
        self.norm2 = norm(s.hidden)
        self.fc1 = torch.nn.Linear(s.hidden, (2 if s.gated else 1) * s.ffn, bias=s.linear_bias)
        self.fc2 = torch.nn.Linear(s.ffn, s.hidden, bias=s.linear_bias)

    def forward(self, x: torch.Tensor, attention: bool = True) -> torch.Tensor:
        s = self.s
        b, n, _ = x.shape
        qkv = self.qkv(self.norm1(x)).view(b, n, s.heads + 2 * s.kv_heads, s.head_dim)
        q, k, v = qkv.split([s.heads, s.kv_heads, s.kv_heads], dim=2)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if attention:
            o = F.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=s.causal,
                enable_gqa=s.heads != s.kv_heads).transpose(1, 2)
        else:
            o = v.repeat_interleave(s.heads // s.kv_heads, dim=2) if s.heads != s.kv_heads else v
        x = x + self.proj(o.reshape(b, n, s.heads * s.head_dim))
        z = self.fc1(self.norm2(x))
        if s.gated:
            gate, up = z.chunk(2, dim=-1)
            z = self.act(gate) * up
        else:
            z = self.act(z)
        return x + self.fc2(z)


class LayerStack(torch.nn.Module):
    def __init__(self, shape: LayerShape, layers: int):
        super().__init__()
        self.layers = torch.nn.ModuleList(ProfiledLayer(shape) for _ in range(layers))

    def forward(self, x: torch.Tensor, attention: bool = True) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, attention)
        return x


def tokens_per_instance(spec: dict) -> int:
    """Tokens of one encoder instance: a ViT image at the module's fixed size (native-resolution
    ViTs: at max_pixels), an audio encoder window (max_source_positions)."""
    if spec["kind"] == "audio_encoder":
        return spec["max_source_positions"]
    patch = spec["patch_size"]
    if spec["resize_rule"] == "native" and spec["max_pixels"] > 0:
        return spec["max_pixels"] // (patch * patch)
    return (spec["image_size_px"] // patch) ** 2


class _Timer:
    """Times forward and backward of one step: CUDA events on a GPU, perf_counter on the CPU."""

    def __init__(self, device: torch.device):
        self.device = device
        self.cuda = device.type == "cuda"
        self.flush = (torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device=device)
                      if self.cuda else None)

    def step(self, module: torch.nn.Module, x: torch.Tensor, grad: torch.Tensor,
             attention: bool) -> tuple[float, float]:
        for p in module.parameters():
            p.grad = None
        x.grad = None
        if self.cuda:
            self.flush.zero_()  # evict L2 between steps
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
            ev[0].record()
            y = module(x, attention)
            ev[1].record()
            y.backward(grad)
            ev[2].record()
            torch.cuda.synchronize(self.device)
            return ev[0].elapsed_time(ev[1]) / 1e3, ev[1].elapsed_time(ev[2]) / 1e3
        t0 = time.perf_counter()
        y = module(x, attention)
        t1 = time.perf_counter()
        y.backward(grad)
        t2 = time.perf_counter()
        return t1 - t0, t2 - t1


def _measure_time(timer: _Timer, module, x, grad, attention, warmup, steps) -> tuple[float, float]:
    for _ in range(warmup):
        timer.step(module, x, grad, attention)
    samples = [timer.step(module, x, grad, attention) for _ in range(steps)]
    kept = samples[len(samples) // 2:]
    return (statistics.median(f for f, _ in kept), statistics.median(b for _, b in kept))


def _saved_bytes(module, x: torch.Tensor) -> int:
    """Bytes of the tensors autograd saves in one forward: storages counted once, parameters
    (saved by the GEMMs, not activations) excluded. The layer input is counted: the layer
    saves it (its first norm needs it)."""
    params = {p.untyped_storage().data_ptr() for p in module.parameters()}
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in params:
            storages[ptr] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = module(x)
    del y
    return sum(storages.values())


def _cuda_peak_bytes(module, x: torch.Tensor) -> int:
    """torch.cuda.max_memory_allocated delta of one forward (the output kept, as a pipeline
    stage keeps it until its backward; the input, allocated before, not counted; transient
    workspace counted)."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    y = module(x)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    del y
    return peak


class _Profiler:
    def __init__(self, device: torch.device, dtype: torch.dtype, warmup: int, steps: int):
        self.device, self.dtype = device, dtype
        self.timer = _Timer(device)
        self.warmup, self.steps = warmup, steps
        self.gen = torch.Generator(device=device)
        self.notes: list[str] = []
        self.clamped = [0, 0]  # attention values clamped at 0, attention values in all
        self.point = ""  # the grid point being measured (for error messages)

    def build(self, shape: LayerShape, layers: int) -> LayerStack:
        torch.manual_seed(0)
        return LayerStack(shape, layers).to(self.device, self.dtype)

    def inputs(self, b: int, n: int, h: int) -> tuple[torch.Tensor, torch.Tensor]:
        self.gen.manual_seed(b * 1_000_003 + n)
        x = torch.randn(b, n, h, generator=self.gen, device=self.device, dtype=self.dtype)
        grad = torch.randn(b, n, h, generator=self.gen, device=self.device, dtype=self.dtype)
        return x.requires_grad_(True), grad

    def memory(self, name: str, shape: LayerShape, tp: int, points: list[tuple[int, int]],
               units: list[int]) -> tuple[int, float, bool]:
        """(parameters per layer, activation bytes per layer per unit, linear in layers), from
        1 and 2 stacked layers at the two inputs `points` ((b, n) each, `units` instances or
        tokens)."""
        per_layers = {}
        for layers in (1, 2):
            stack = self.build(shape, layers)
            params = sum(p.numel() for p in stack.parameters())
            saved = [_saved_bytes(stack, self.inputs(b, n, shape.hidden)[0]) for b, n in points]
            peak = ([_cuda_peak_bytes(stack, self.inputs(b, n, shape.hidden)[0])
                     for b, n in points] if self.device.type == "cuda" else None)
            per_layers[layers] = (params, saved, peak)
            del stack
        du = units[1] - units[0]
        p1, s1, peak1 = per_layers[1]
        p2, s2, peak2 = per_layers[2]
        slope1 = (s1[1] - s1[0]) / du
        slope2 = (s2[1] - s2[0]) / du
        linear = p2 == 2 * p1 and all(abs(b2 - 2 * b1) <= 0.01 * b2 for b1, b2 in zip(s1, s2))
        note = (f"{name} tp{tp}: saved bytes at units {units}: 1 layer {s1}, 2 layers {s2} "
                f"(slope/layer {slope1:.1f} vs {slope2 / 2:.1f}); parameters {p1} vs {p2}")
        if peak1 is not None:
            note += (f"; cuda max_memory_allocated delta/unit/layer "
                     f"{(peak1[1] - peak1[0]) / du:.1f} (1 layer), "
                     f"{(peak2[1] - peak2[0]) / du / 2:.1f} (2 layers)")
        self.notes.append(note)
        return p1, slope1, linear

    def encoder(self, spec: dict, grid: dict, tps: list[int]) -> dict:
        n = tokens_per_instance(spec)
        times, memory = [], []
        for tp in tps:
            shape = layer_shape(spec, tp)
            stack = self.build(shape, 1)
            for b in grid["encoder_batch"]:
                self.point = f"tp {tp}, batch {b}"
                x, grad = self.inputs(b, n, shape.hidden)
                f, bwd = _measure_time(self.timer, stack, x, grad, True, self.warmup, self.steps)
                times.append({"tp": tp, "batch": b, "forward_s": f, "backward_s": bwd})
            del stack
            units = _two_units(grid["encoder_batch"])
            self.point = f"tp {tp}, memory at batch {units}"
            params, act, linear = self.memory(spec["name"], shape, tp,
                                              [(u, n) for u in units], units)
            memory.append({"tp": tp, "parameters_per_layer": params,
                           "activation_bytes_per_layer_per_instance": act,
                           "state_linear_in_layers": linear})
        return {"name": spec["name"], "role": "encoder", "tokens_per_instance": n,
                "layers": spec["num_layers"], "time": times, "memory": memory}

    def llm(self, spec: dict, grid: dict, tps: list[int]) -> dict:
        times, memory = [], []
        for tp in tps:
            shape = layer_shape(spec, tp)
            stack = self.build(shape, 1)
            for s in grid["llm_seq"]:
                self.point = f"tp {tp}, seq {s}"
                x, grad = self.inputs(1, s, shape.hidden)
                f_all, b_all = _measure_time(self.timer, stack, x, grad, True, self.warmup,
                                             self.steps)
                f_lin, b_lin = _measure_time(self.timer, stack, x, grad, False, self.warmup,
                                             self.steps)
                f_att, b_att = f_all - f_lin, b_all - b_lin
                self.clamped[0] += (f_att < 0) + (b_att < 0)
                self.clamped[1] += 2
                times.append({"tp": tp, "seq": s, "attention_forward_s": max(0.0, f_att),
                              "attention_backward_s": max(0.0, b_att),
                              "linear_forward_s": f_lin, "linear_backward_s": b_lin})
            del stack
            units = _two_units(grid["llm_seq"])
            self.point = f"tp {tp}, memory at seq {units}"
            params, act, linear = self.memory(spec["name"], shape, tp,
                                              [(1, u) for u in units], units)
            memory.append({"tp": tp, "parameters_per_layer": params,
                           "activation_bytes_per_layer_per_token": act,
                           "state_linear_in_layers": linear})
        return {"name": spec["name"], "role": "llm", "layers": spec["num_layers"],
                "time": times, "memory": memory}


def _two_units(values: list[int]) -> list[int]:
    """Two distinct sizes to fit a per-unit slope: the grid's two smallest, else v and 2v."""
    v = sorted(set(values))
    return v[:2] if len(v) >= 2 else [v[0], 2 * v[0]]


def _check_grid(grid: dict) -> None:
    for key in ("encoder_batch", "llm_seq", "tp"):
        vals = grid.get(key)
        if not vals or any(not isinstance(v, int) or v <= 0 for v in vals):
            raise ProfileError(f"grid.{key} = {vals}; must be a non-empty list of integers > 0")


def profile_model(model: str, device: str = "cpu", scale: float = 1.0, quick: bool = False,
                  grid: dict | None = None, warmup: int | None = None,
                  steps: int | None = None, threads: int | None = None) -> dict:
    """Profiles `model` (a preset name or a model YAML path) and returns the weft.profile/v1
    dict. grid overrides the default (or --quick) grid per key. Raises ProfileError on bad input.
    """
    if device not in ("cpu", "cuda"):
        raise ProfileError(f"--device = {device}; must be cpu or cuda")
    if device == "cuda" and not torch.cuda.is_available():
        raise ProfileError("--device = cuda; no CUDA device is available to torch")
    if not (isinstance(scale, (int, float)) and 0 < scale <= 1):
        raise ProfileError(f"--scale = {scale}; must be in (0, 1]")
    g = dict(QUICK_GRID if quick else DEFAULT_GRID)
    g.update(grid or {})
    _check_grid(g)
    on_gpu = device == "cuda"
    warmup = warmup if warmup is not None else (1 if quick else (5 if on_gpu else 2))
    steps = steps if steps is not None else (4 if quick else (20 if on_gpu else 6))
    if warmup < 0 or steps < 2:
        raise ProfileError(f"--warmup = {warmup}, --steps = {steps}; need warmup >= 0, steps >= 2")
    try:
        spec = weft.load_model(model)
    except Exception as e:  # the loader's status error names the problem
        raise ProfileError(f"--model = {model}: {str(e).splitlines()[0]}") from None

    if threads is not None:
        if threads <= 0:
            raise ProfileError(f"--threads = {threads}; must be > 0")
        torch.set_num_threads(threads)
    dev = torch.device(device)
    dtype = torch.bfloat16 if on_gpu else torch.float32
    prof = _Profiler(dev, dtype, warmup, steps)
    modules, skipped = [], []
    for m in spec["modules"]:
        if m["kind"] not in ENCODER_KINDS + ("llm",):
            why = {"mlp_projector": "not timed (a projector: small next to its encoder and LLM)",
                   "dit": "not timed (a DiT: its cross-attention context is not modelled here)"
                   }.get(m["kind"], "not timed (not an encoder or LLM)")
            skipped.append(f"{m['name']} ({m['kind']}): {why}")
            continue
        scaled = scaled_module(m, scale)
        tps = valid_tps(scaled, g["tp"])
        if not tps:
            skipped.append(f"{m['name']}: no grid TP divides heads {scaled['num_attention_heads']}"
                           f" and kv heads {scaled['num_kv_groups']}")
            continue
        if scale == 1.0:
            params = sum(p.numel() for p in ProfiledLayer(layer_shape(scaled, 1)).parameters())
            if params != m["parameters_per_layer"]:
                raise RuntimeError(f"module {m['name']}: the torch layer has {params} parameters,"
                                   f" the spec {m['parameters_per_layer']} per layer")
        print(f"weft.profile: {m['name']} ({m['kind']}), tp {tps}", file=sys.stderr)
        try:
            modules.append(prof.encoder(scaled, g, tps) if m["kind"] in ENCODER_KINDS
                           else prof.llm(scaled, g, tps))
        except torch.OutOfMemoryError as e:
            raise ProfileOutOfMemory(f"module {m['name']}: out of device memory at "
                                     f"{prof.point}; shrink the grid (--tp, --encoder-batch, "
                                     f"--llm-seq)") from e

    notes = []
    if scale != 1.0:
        notes.append(f"widths scaled by {scale}: NOT real-model numbers")
    notes += [f"skipped {s}" for s in skipped]
    notes.append("a module is timed at the grid's TP values dividing its heads and kv heads")
    notes.append("attention = (layer with its attention core) - (core replaced by identity on V),"
                 f" clamped at >= 0: {prof.clamped[0]} of {prof.clamped[1]} values clamped")
    notes.append("layers timed trainable (weight and input gradients) whatever the spec's frozen "
                 "flag; no rotary embedding, dropout, embeddings or heads")
    notes += prof.notes
    if on_gpu:
        dev_name = torch.cuda.get_device_name(dev)
    else:
        dev_name = f"cpu ({platform.machine()}, {torch.get_num_threads()} threads)"
    return {
        "schema": SCHEMA, "model": spec["name"], "source": "measured",
        "provenance": {
            "device": dev_name, "torch": torch.__version__,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "host": platform.node(), "dtype": str(dtype).replace("torch.", ""),
            "timer": "cuda-events" if on_gpu else "perf_counter", "l2_flush": on_gpu,
            "warmup_steps": warmup, "timed_steps": steps, "statistic": STATISTIC,
            "scale": float(scale), "tp_emulation": TP_EMULATION, "notes": "; ".join(notes)},
        "grid": {"encoder_batch": list(g["encoder_batch"]), "llm_seq": list(g["llm_seq"]),
                 "tp": list(g["tp"])},
        "modules": modules,
    }


def _int_list(option: str, text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        vals = [int(v) for v in text.split(",")]
    except ValueError:
        raise ProfileError(f"{option} = {text}; must be integers separated by commas") from None
    if not vals or any(v <= 0 for v in vals):
        raise ProfileError(f"{option} = {text}; must be integers > 0")
    return vals


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse prints the usage too)
        print(f"weft.profile: {message}", file=sys.stderr)
        sys.exit(2)


def main(argv: list[str] | None = None) -> int:
    p = _Parser(prog="python -m weft.profile", description=__doc__.splitlines()[0],
                epilog="example: python -m weft.profile --model tiny-vlm --quick --out p.json")
    p.add_argument("--model", required=True, help="preset name or model YAML path")
    p.add_argument("--device", default="cpu", help="cpu (float32) or cuda (bf16)")
    p.add_argument("--scale", type=float, default=1.0, help="width factor in (0, 1] (CPU runs)")
    p.add_argument("--quick", action="store_true", help="tiny grid and few steps (tests)")
    p.add_argument("--out", required=True, help="JSON path (written whole or not at all)")
    p.add_argument("--tp", help="comma list overriding the grid's TP values")
    p.add_argument("--encoder-batch", help="comma list overriding the encoder batch sizes")
    p.add_argument("--llm-seq", help="comma list overriding the LLM sequence lengths")
    p.add_argument("--warmup", type=int, help="untimed steps per point")
    p.add_argument("--steps", type=int, help="timed steps per point (the second half is kept)")
    p.add_argument("--threads", type=int,
                   help="torch CPU threads (default torch's; 1 is steadiest on a shared host)")
    args = p.parse_args(argv)
    try:
        grid = {k: v for k, v in (("tp", _int_list("--tp", args.tp)),
                                  ("encoder_batch", _int_list("--encoder-batch",
                                                              args.encoder_batch)),
                                  ("llm_seq", _int_list("--llm-seq", args.llm_seq)))
                if v is not None}
        out_dir = os.path.dirname(os.path.abspath(args.out))
        if not os.path.isdir(out_dir):
            raise ProfileError(f"--out = {args.out}; directory {out_dir} does not exist")
        result = profile_model(args.model, args.device, args.scale, args.quick, grid,
                               args.warmup, args.steps, args.threads)
    except ProfileError as e:
        print(f"weft.profile: {e}", file=sys.stderr)
        return 2
    except ProfileOutOfMemory as e:
        print(f"weft.profile: {e}", file=sys.stderr)
        return 1
    fd, tmp = tempfile.mkstemp(prefix=".profile-", suffix=".json", dir=out_dir)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(result, fh, indent=1)
            fh.write("\n")
        os.replace(tmp, args.out)
    except BaseException:
        os.unlink(tmp)
        raise
    n = sum(len(m["time"]) for m in result["modules"])
    print(f"weft.profile: {n} time rows for {len(result['modules'])} modules -> {args.out}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
