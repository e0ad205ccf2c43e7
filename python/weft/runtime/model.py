"""A tiny real model for a weft model spec (tiny-vlm: ViT + MLP projector + decoder LM), float32.

The model is cut into chunks exactly like a weft placement: a chunk is (module, first_layer,
num_layers). Layer parameters are drawn from a generator seeded by (seed, module, layer), so a
worker that builds only its chunks holds the same weights as a single-process reference.

Token counts follow weft's workload derivation (data::DeriveModuleWorkload): a ViT image is
(image_size_px / patch_size)^2 patch tokens; the projector sees them merged spatial_merge^2 : 1
(the merge is the reshape [T, h] -> [T / merge^2, h * merge^2] at the projector's input); an LLM
packed sequence is the concatenation of its samples, each = its image tokens then its text tokens.
Attention is block-diagonal per image (ViT) and per sample (LLM, causal).
"""
from __future__ import annotations

import zlib

import torch
import torch.nn.functional as F


def _generator(*key) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(zlib.crc32(repr(key).encode()))
    return g


def _param(g: torch.Generator, *shape, scale: float | None = None) -> torch.nn.Parameter:
    fan_in = shape[-1] if len(shape) > 1 else 1
    s = scale if scale is not None else fan_in ** -0.5
    return torch.nn.Parameter(torch.randn(*shape, generator=g) * s)


def _segment_mask(segments: list[int], causal: bool) -> torch.Tensor:
    """Additive [T, T] mask: 0 inside a segment (lower triangle if causal), -inf elsewhere."""
    total = sum(segments)
    allowed = torch.zeros(total, total, dtype=torch.bool)
    start = 0
    for s in segments:
        block = torch.ones(s, s, dtype=torch.bool)
        if causal:
            block = torch.tril(block)
        allowed[start:start + s, start:start + s] = block
        start += s
    mask = torch.zeros(total, total)
    mask.masked_fill_(~allowed, float("-inf"))
    return mask


class TransformerLayer(torch.nn.Module):
    def __init__(self, spec: dict, g: torch.Generator):
        super().__init__()
        h, f = spec["hidden_size"], spec["ffn_hidden_size"]
        self.heads = spec["num_attention_heads"]
        self.kv_groups = spec["num_kv_groups"] or self.heads
        self.head_dim = spec["head_dim"]
        self.norm1 = torch.nn.LayerNorm(h)
        self.norm2 = torch.nn.LayerNorm(h)
        self.wq = _param(g, self.heads * self.head_dim, h)
        self.wkv = _param(g, 2 * self.kv_groups * self.head_dim, h)
        self.wo = _param(g, h, self.heads * self.head_dim)
        self.w1 = _param(g, f, h)
        self.w2 = _param(g, h, f)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        t = x.shape[0]
        y = self.norm1(x)
        q = (y @ self.wq.T).view(t, self.heads, self.head_dim).transpose(0, 1)
        k, v = (y @ self.wkv.T).view(t, 2, self.kv_groups, self.head_dim).unbind(1)
        rep = self.heads // self.kv_groups
        k = k.transpose(0, 1).repeat_interleave(rep, 0)
        v = v.transpose(0, 1).repeat_interleave(rep, 0)
        att = torch.softmax(q @ k.transpose(1, 2) * self.head_dim ** -0.5 + mask, dim=-1)
        x = x + ((att @ v).transpose(0, 1).reshape(t, -1) @ self.wo.T)
        return x + F.gelu(self.norm2(x) @ self.w1.T) @ self.w2.T


class ModuleChunk(torch.nn.Module):
    """Layers [first_layer, first_layer + num_layers) of one module, with the module's input
    extras on layer 0 (patch / token embedding) and output extras on the last layer (LM head)."""

    def __init__(self, model: dict, module: int, first_layer: int, num_layers: int, seed: int):
        super().__init__()
        self.spec = model["modules"][module]
        self.kind = self.spec["kind"]
        self.module, self.first, self.num = module, first_layer, num_layers
        self.is_first = first_layer == 0
        self.is_last = first_layer + num_layers == self.spec["num_layers"]
        s = self.spec
        self.layers = torch.nn.ModuleList()
        if self.kind == "mlp_projector":
            sizes = [s["input_size"], s["ffn_hidden_size"], s["output_size"]]
            for layer in range(first_layer, first_layer + num_layers):
                g = _generator(seed, module, layer)
                lin = torch.nn.Linear(sizes[layer], sizes[layer + 1])
                with torch.no_grad():
                    lin.weight.copy_(torch.randn(lin.weight.shape, generator=g) * sizes[layer] ** -0.5)
                    lin.bias.copy_(torch.randn(lin.bias.shape, generator=g) * 0.02)
                self.layers.append(lin)
            return
        if self.is_first:
            g = _generator(seed, module, "embed")
            if self.kind == "vit":
                patch_dim = s["in_channels"] * s["patch_size"] ** 2
                self.embed = _param(g, s["hidden_size"], patch_dim)
            else:
                self.embed = _param(g, s["vocab_size"], s["hidden_size"], scale=1.0)
        for layer in range(first_layer, first_layer + num_layers):
            self.layers.append(TransformerLayer(s, _generator(seed, module, layer)))
        if self.is_last and self.kind == "llm":
            g = _generator(seed, module, "head")
            self.final_norm = torch.nn.LayerNorm(s["hidden_size"])
            self.head = _param(g, s["vocab_size"], s["hidden_size"])

    def parameter_names(self) -> dict[str, torch.nn.Parameter]:
        """Parameters by a global name ("llm.L2.w1", "vision.embed") shared with the reference."""
        name = self.spec["name"]
        out = {}
        for pname, p in self.named_parameters():
            if pname.startswith("layers."):
                idx, rest = pname[len("layers."):].split(".", 1)
                out[f"{name}.L{self.first + int(idx)}.{rest}"] = p
            else:
                out[f"{name}.{pname}"] = p
        return out

    def forward(self, inputs: list[torch.Tensor], mb: "MicrobatchData"):
        """Runs the chunk on a microbatch. `inputs` are the boundary tensors from upstream:
        for an LLM's first chunk the projector outputs (image tokens); else the previous chunk's
        output. Returns the boundary output, or the loss for the model's last chunk."""
        s = self.spec
        if self.kind == "mlp_projector":
            x = inputs[0]
            if self.is_first:
                x = x.reshape(-1, s["input_size"])
            for i, lin in enumerate(self.layers):
                x = lin(x)
                if self.first + i < s["num_layers"] - 1:
                    x = F.gelu(x)
            return x
        if self.kind == "vit":
            x = mb.pixels @ self.embed.T if self.is_first else inputs[0]
            mask = mb.vit_mask
        else:
            if self.is_first:
                x = self.embed[mb.token_ids]
                if inputs:
                    x = x.index_copy(0, mb.image_positions, inputs[0])
            else:
                x = inputs[0]
            mask = mb.llm_mask
        for layer in self.layers:
            x = layer(x, mask)
        if self.kind == "llm" and self.is_last:
            logits = self.final_norm(x) @ self.head.T
            return F.cross_entropy(logits, mb.labels, reduction="sum") / mb.loss_denominator
        return x


class MicrobatchData:
    """Seeded input tensors of one microbatch (sequences of a weft batch)."""

    def __init__(self, model: dict, batch: dict, sequence_indices: list[int], seed: int,
                 loss_denominator: float):
        vit = next(m for m in model["modules"] if m["kind"] == "vit")
        llm = next(m for m in model["modules"] if m["kind"] == "llm")
        grid = vit["image_size_px"] // vit["patch_size"]
        patches = grid * grid
        merged = patches // (vit["spatial_merge"] ** 2)
        patch_dim = vit["in_channels"] * vit["patch_size"] ** 2
        pixels, token_ids, labels, image_pos, vit_segments, llm_segments = [], [], [], [], [], []
        offset = 0
        for q in sequence_indices:
            seq = batch["sequences"][q] if batch["sequences"] else {"sample_indices": [q]}
            for si in seq["sample_indices"]:
                sample = batch["samples"][si]
                g = _generator(seed, batch["iteration"], sample["id"])
                n_img = len(sample["images"])
                for _ in range(n_img):
                    pixels.append(torch.randn(patches, patch_dim, generator=g))
                    vit_segments.append(patches)
                n_tokens = n_img * merged + sample["text_tokens"]
                image_pos.extend(range(offset, offset + n_img * merged))
                token_ids.append(torch.randint(0, llm["vocab_size"], (n_tokens,), generator=g))
                labels.append(torch.randint(0, llm["vocab_size"], (n_tokens,), generator=g))
                llm_segments.append(n_tokens)
                offset += n_tokens
        self.pixels = torch.cat(pixels) if pixels else torch.zeros(0, patch_dim)
        self.token_ids = torch.cat(token_ids)
        self.labels = torch.cat(labels)
        self.image_positions = torch.tensor(image_pos, dtype=torch.long)
        self.vit_segments, self.llm_segments = vit_segments, llm_segments
        self.vit_mask = _segment_mask(vit_segments, causal=False)
        self.llm_mask = _segment_mask(llm_segments, causal=True)
        self.loss_denominator = loss_denominator


def batch_llm_tokens(batch: dict) -> int:
    return sum(q["llm_tokens"] for q in batch["sequences"])


def build_chunks(model: dict, chunks: list[dict], seed: int) -> list[ModuleChunk]:
    return [ModuleChunk(model, c["module"], c["first_layer"], c["num_layers"], seed) for c in chunks]


def reference_step(model: dict, chunk_modules: list[ModuleChunk], batch: dict,
                   microbatches: list[list[int]], seed: int) -> float:
    """Single-process reference: runs every microbatch through the whole model in module order
    (the chain of `chunk_modules`), accumulating gradients. Returns the loss."""
    denom = float(batch_llm_tokens(batch))
    total = 0.0
    for mb_seqs in microbatches:
        mb = MicrobatchData(model, batch, mb_seqs, seed, denom)
        x: list[torch.Tensor] = []
        for chunk in chunk_modules:
            out = chunk(x, mb)
            x = [out]
        x[0].backward()
        total += float(x[0].detach())
    return total
