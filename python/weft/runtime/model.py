"""A tiny real model for a weft model spec (tiny-vlm: ViT + MLP projector + decoder LM), float32.

The model is cut into chunks exactly like a weft placement: a chunk is (module, first_layer,
num_layers). Layer parameters are drawn from a generator seeded by (seed, module, layer), so a
worker that builds only its chunks holds the same weights as a single-process reference.

Token counts are the plan's (weft.plan/v3 data tables: each microbatch's workload instances per
module, as data::DeriveModuleWorkload derived them): a ViT image has the patch tokens of its ViT
instance; the projector sees them merged spatial_merge^2 : 1 (the reshape [T, h] ->
[T / merge^2, h * merge^2] at the projector's input) into its own instance's tokens; an LLM
packed sequence is the concatenation of its samples, each = its image tokens, audio tokens, then
text tokens. Attention is block-diagonal per image (ViT) and per sample (LLM, causal). Nothing
here derives a token count from sample metadata.
"""
from __future__ import annotations

import copy
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


class DiTLayer(TransformerLayer):
    """A DiT block: self-attention over the video's latent tokens, cross-attention to the text
    states of its sample (the LLM's output, width text_condition_hidden), MLP."""

    def __init__(self, spec: dict, g: torch.Generator):
        super().__init__(spec, g)
        h = spec["hidden_size"]
        ctx = spec["text_condition_hidden"]
        self.norm_c = torch.nn.LayerNorm(h)
        self.wq_c = _param(g, self.heads * self.head_dim, h)
        self.wkv_c = _param(g, 2 * self.heads * self.head_dim, ctx)
        self.wo_c = _param(g, h, self.heads * self.head_dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, context: torch.Tensor,
                cross_mask: torch.Tensor) -> torch.Tensor:
        t, c = x.shape[0], context.shape[0]
        y = self.norm1(x)
        q = (y @ self.wq.T).view(t, self.heads, self.head_dim).transpose(0, 1)
        k, v = (y @ self.wkv.T).view(t, 2, self.kv_groups, self.head_dim).unbind(1)
        rep = self.heads // self.kv_groups
        k = k.transpose(0, 1).repeat_interleave(rep, 0)
        v = v.transpose(0, 1).repeat_interleave(rep, 0)
        att = torch.softmax(q @ k.transpose(1, 2) * self.head_dim ** -0.5 + mask, dim=-1)
        x = x + ((att @ v).transpose(0, 1).reshape(t, -1) @ self.wo.T)
        y = self.norm_c(x)
        q = (y @ self.wq_c.T).view(t, self.heads, self.head_dim).transpose(0, 1)
        k, v = (context @ self.wkv_c.T).view(c, 2, self.heads, self.head_dim).unbind(1)
        att = torch.softmax(q @ k.transpose(0, 1).transpose(1, 2) * self.head_dim ** -0.5
                            + cross_mask, dim=-1)
        x = x + ((att @ v.transpose(0, 1)).transpose(0, 1).reshape(t, -1) @ self.wo_c.T)
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
            self.source_kind = upstream_encoder_kind(model, s["name"])
            sizes = ([s["input_size"]] + [s["ffn_hidden_size"]] * (s["num_layers"] - 1)
                     + [s["output_size"]])
            for layer in range(first_layer, first_layer + num_layers):
                g = _generator(seed, module, layer)
                lin = torch.nn.Linear(sizes[layer], sizes[layer + 1])
                with torch.no_grad():
                    lin.weight.copy_(torch.randn(lin.weight.shape, generator=g) * sizes[layer] ** -0.5)
                    lin.bias.copy_(torch.randn(lin.bias.shape, generator=g) * 0.02)
                self.layers.append(lin)
            self._follow_frozen()
            return
        if self.is_first:
            g = _generator(seed, module, "embed")
            if self.kind == "vit":
                patch_dim = s["in_channels"] * s["patch_size"] ** 2
                self.embed = _param(g, s["hidden_size"], patch_dim)
            elif self.kind == "audio_encoder":
                self.embed = _param(g, s["hidden_size"], audio_feature_size(s))
            elif self.kind == "dit":
                self.embed = _param(g, s["hidden_size"], dit_patch_size(s))
            else:
                self.embed = _param(g, s["vocab_size"], s["hidden_size"], scale=1.0)
        if self.kind == "dit":
            if s["modality"] != "video":
                raise ValueError(f"module {s['name']}: the runtime models video DiTs only")
            if s["text_condition_hidden"] != s["hidden_size"]:
                raise ValueError(f"module {s['name']}: the runtime needs text_condition_hidden = "
                                 f"hidden_size (the context travels with the activations)")
        layer_type = DiTLayer if self.kind == "dit" else TransformerLayer
        for layer in range(first_layer, first_layer + num_layers):
            self.layers.append(layer_type(s, _generator(seed, module, layer)))
        if self.kind == "llm":
            self.source_kinds = {a: upstream_encoder_kind(model, a) for a, b in model["edges"]
                                 if b == s["name"]}
        # A module feeding no other module ends in the loss.
        self.is_sink = not any(a == s["name"] for a, _ in model["edges"])
        if self.is_last and self.kind == "dit":
            g = _generator(seed, module, "head")
            self.final_norm = torch.nn.LayerNorm(s["hidden_size"])
            self.head = _param(g, dit_patch_size(s), s["hidden_size"])
        if self.is_last and self.kind == "llm" and self.is_sink:
            g = _generator(seed, module, "head")
            self.final_norm = torch.nn.LayerNorm(s["hidden_size"])
            self.head = _param(g, s["vocab_size"], s["hidden_size"])
        self._follow_frozen()

    def _follow_frozen(self) -> None:
        """A frozen module (spec `frozen: true`) has no weight gradients: its parameters do not
        require grad, so a backward through it computes input gradients only (Cornstarch's
        frozen-status rule; weft plans no backward at all when nothing upstream trains)."""
        if self.spec.get("frozen", False):
            for p in self.parameters():
                p.requires_grad_(False)

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

    def forward(self, inputs: list[torch.Tensor], mb: "MicrobatchData",
                sources: list[str] | None = None):
        """Runs the chunk on a microbatch. `inputs` are the boundary tensors from upstream:
        for an LLM's first chunk the projector outputs (`sources` names each one's module;
        without it the single input is image tokens); else the previous chunk's output.
        Returns the boundary output, or the loss for the model's last chunk."""
        s = self.spec
        if self.kind == "mlp_projector":
            if inputs:
                x = inputs[0]
            else:  # no upstream work in this microbatch (e.g. no audio clip)
                x = torch.zeros(0, s["input_size"])
            if self.is_first:
                if self.source_kind == "audio_encoder":
                    x = x[mb.audio_keep]  # drop the padding of each audio window
                x = x.reshape(-1, s["input_size"])
            for i, lin in enumerate(self.layers):
                x = lin(x)
                if self.first + i < s["num_layers"] - 1:
                    x = F.gelu(x)
            return x
        if self.kind == "dit":
            # Inputs: the text states of this sub-microbatch's samples (first chunk), else the
            # previous chunk's [latent tokens; text states] rows.
            t = len(mb.dit_latents)
            if self.is_first:
                x = mb.dit_latents @ self.embed.T
                context = torch.cat(inputs) if inputs else torch.zeros(0, s["hidden_size"])
            else:
                x, context = inputs[0][:t], inputs[0][t:]
            for layer in self.layers:
                x = layer(x, mb.dit_mask, context, mb.cross_mask)
            if self.is_last:
                pred = self.final_norm(x) @ self.head.T
                return ((pred - mb.dit_targets) ** 2).sum() / mb.loss_denominator
            return torch.cat([x, context])
        if self.kind == "vit":
            x = mb.pixels @ self.embed.T if self.is_first else inputs[0]
            mask = mb.vit_mask
        elif self.kind == "audio_encoder":
            x = mb.audio_features @ self.embed.T if self.is_first else inputs[0]
            mask = mb.audio_mask
        else:
            if self.is_first:
                x = self.embed[mb.token_ids]
                srcs = sources if sources is not None else [None] * len(inputs)
                for inp, src in zip(inputs, srcs):
                    kind = "vit" if src is None else self.source_kinds[src]
                    pos = mb.audio_positions if kind == "audio_encoder" else mb.image_positions
                    x = x.index_copy(0, pos, inp)
            else:
                x = inputs[0]
            mask = mb.llm_mask
        for layer in self.layers:
            x = layer(x, mask)
        if self.kind == "llm" and self.is_last and self.is_sink:
            logits = self.final_norm(x) @ self.head.T
            return F.cross_entropy(logits, mb.labels, reduction="sum") / mb.loss_denominator
        return x


class MicrobatchData:
    """Seeded input tensors of one microbatch of a plan, shaped by the plan's data tables.

    `plan` is a parsed weft.plan/v3 plan (weft.runtime.plan.ExecutionPlan) and `microbatch` one
    of its data.microbatches. The microbatch is kept per instance, in weft's workload order
    (the plan's instance lists): images (ViT, and the vision projector's merged tokens of each),
    audio windows (audio encoder: padded rows and the unpadded tokens that reach the LLM), audio
    clips (audio projector), sequences (LLM: one segment per sample), videos (DiT latents).
    Per sample, in sequence order, its tensors are drawn from a generator seeded by (seed,
    iteration, sample id): its images (ViT patches), its audio windows (mel features), its LLM
    token ids and labels, then its videos (noisy latents, targets).

    restrict() gives the view of a DIP sub-microbatch, a slice of one module's instances;
    route() says which output rows of a producer's slice a consumer's slice takes."""

    def __init__(self, model: dict, plan, microbatch, seed: int, loss_denominator: float):
        self.model = model
        mods = model["modules"]

        def first(kind: str):
            return next((i for i, m in enumerate(mods) if m["kind"] == kind), None)

        vit_m, audio_m, llm_m, dit_m = (first(k) for k in ("vit", "audio_encoder", "llm", "dit"))
        vit = mods[vit_m] if vit_m is not None else None
        audio = mods[audio_m] if audio_m is not None else None
        dit = mods[dit_m] if dit_m is not None else None
        self.patch_dim = vit["in_channels"] * vit["patch_size"] ** 2 if vit is not None else 0
        self.feat = audio_feature_size(audio) if audio is not None else 0
        self.dit_patch = dit_patch_size(dit) if dit is not None else 0
        inst = microbatch.instances

        def of(module) -> list:
            return list(inst[module]) if module is not None and module < len(inst) else []

        def by_sample(module) -> dict[int, list]:
            out: dict[int, list] = {}
            for x in of(module):
                out.setdefault(x.samples[0], []).append(x)
            return out

        # The tokens each upstream branch hands the LLM per sample: its last module's instances
        # (a projector's merged image tokens or unpadded audio tokens), by encoder kind.
        names = [m["name"] for m in mods]
        branch_tokens: dict[str, dict[int, int]] = {"vit": {}, "audio_encoder": {}}
        self.merged_of: dict[tuple[int, int], int] = {}
        if llm_m is not None:
            for a, b in model["edges"]:
                if b != names[llm_m]:
                    continue
                p = names.index(a)
                kind = upstream_encoder_kind(model, a) if mods[p]["kind"] == "mlp_projector" \
                    else mods[p]["kind"]
                for x in of(p):
                    tokens = branch_tokens.setdefault(kind, {})
                    tokens[x.samples[0]] = tokens.get(x.samples[0], 0) + x.total_tokens
                    if kind == "vit":
                        self.merged_of[(x.samples[0], x.item)] = x.total_tokens
        aproj = next((i for i, m in enumerate(mods) if m["kind"] == "mlp_projector"
                      and upstream_encoder_kind(model, m["name"]) == "audio_encoder"), None)
        images_of, windows_of, videos_of = by_sample(vit_m), by_sample(audio_m), by_sample(dit_m)
        llm_segments = {s: t for x in of(llm_m) for s, t in zip(x.samples, x.tokens)}
        # Instances: images (si, item, pixels); windows (si, item, features, unpadded tokens);
        # clips (si, item, tokens); sequences: [(si, image tokens, audio tokens, ids, labels)]
        # per LLM instance; videos (si, item, noisy latents, target).
        self.images, self.windows, self.videos = [], [], []
        self.clips = [(x.samples[0], x.item, x.total_tokens) for x in of(aproj)]
        members: dict[int, tuple] = {}
        llm_vocab = mods[llm_m]["vocab_size"] if llm_m is not None else 0
        samples = [si for q in microbatch.sequences for si in plan.data.sequences[q].samples]
        for si in samples:
            g = _generator(seed, plan.iteration, plan.data.samples[si].id)
            for x in images_of.get(si, []):
                self.images.append((si, x.item, torch.randn(x.total_tokens, self.patch_dim,
                                                            generator=g)))
            for x in windows_of.get(si, []):
                self.windows.append((si, x.item, torch.randn(x.total_tokens, self.feat,
                                                             generator=g), x.unpadded_tokens))
            n_tokens = llm_segments.get(si, 0)
            n_img = branch_tokens["vit"].get(si, 0)
            n_audio = branch_tokens["audio_encoder"].get(si, 0)
            if si in llm_segments and n_tokens - n_img - n_audio != \
                    plan.data.samples[si].text_tokens:
                raise ValueError(f"plan data: sample {si} has {n_tokens} LLM tokens; its "
                                 f"{n_img} image and {n_audio} audio tokens and "
                                 f"{plan.data.samples[si].text_tokens} text tokens do not add up")
            members[si] = (si, n_img, n_audio,
                           torch.randint(0, max(llm_vocab, 1), (n_tokens,), generator=g),
                           torch.randint(0, max(llm_vocab, 1), (n_tokens,), generator=g))
            for x in videos_of.get(si, []):
                self.videos.append((si, x.item,
                                    torch.randn(x.total_tokens, self.dit_patch, generator=g),
                                    torch.randn(x.total_tokens, self.dit_patch, generator=g)))
        self.sequences = [[members[s] for s in x.samples] for x in of(llm_m)]
        # The batch samples of the microbatch (ascending): what its LLM instances hold.
        self.sample_ids = sorted(samples)
        self.loss_denominator = loss_denominator
        self._set_images(self.images)
        self._set_windows(self.windows)
        self._set_sequences(self.sequences)
        self._set_videos(self.videos)

    def _set_videos(self, videos) -> None:
        self.dit_latents = (torch.cat([x for _, _, x, _ in videos]) if videos
                            else torch.zeros(0, self.dit_patch))
        self.dit_targets = (torch.cat([y for _, _, _, y in videos]) if videos
                            else torch.zeros(0, self.dit_patch))
        self.dit_mask = _segment_mask([len(x) for _, _, x, _ in videos], causal=False)
        # The context rows a DiT slice receives: the LLM segments of its samples, in the LLM's
        # instance order; a video attends to its own sample's rows.
        wanted = {v[0] for v in videos}
        context = [(si, len(ids)) for members in self.sequences
                   for si, _, _, ids, _ in members if si in wanted]
        cross = torch.full((len(self.dit_latents), sum(n for _, n in context)), float("-inf"))
        row = 0
        for si, _, x, _ in videos:
            col = 0
            for sj, n in context:
                if sj == si:
                    cross[row:row + len(x), col:col + n] = 0
                col += n
            row += len(x)
        self.cross_mask = cross

    def _set_images(self, images) -> None:
        self.pixels = (torch.cat([p for _, _, p in images]) if images
                       else torch.zeros(0, self.patch_dim))
        self.vit_segments = [len(p) for _, _, p in images]
        self.vit_mask = _segment_mask(self.vit_segments, causal=False)

    def _set_windows(self, windows) -> None:
        self.audio_features = (torch.cat([f for _, _, f, _ in windows]) if windows
                               else torch.zeros(0, self.feat))
        keep, rows = [], 0
        for _, _, f, kept in windows:
            keep.extend(range(rows, rows + kept))
            rows += len(f)
        self.audio_keep = torch.tensor(keep, dtype=torch.long)
        self.audio_mask = _segment_mask([len(f) for _, _, f, _ in windows], causal=False)

    def _set_sequences(self, sequences) -> None:
        token_ids, labels, image_pos, audio_pos, segments = [], [], [], [], []
        offset = 0
        for members in sequences:
            for _, n_img, n_audio, ids, lab in members:
                image_pos.extend(range(offset, offset + n_img))
                start = offset + n_img
                audio_pos.extend(range(start, start + n_audio))
                token_ids.append(ids)
                labels.append(lab)
                segments.append(len(ids))
                offset += len(ids)
        self.token_ids = torch.cat(token_ids) if token_ids else torch.zeros(0, dtype=torch.long)
        self.labels = torch.cat(labels) if labels else torch.zeros(0, dtype=torch.long)
        self.image_positions = torch.tensor(image_pos, dtype=torch.long)
        self.audio_positions = torch.tensor(audio_pos, dtype=torch.long)
        self.llm_segments = segments
        self.llm_mask = _segment_mask(segments, causal=True)

    def instances(self, module: int) -> list:
        """The module's instances in weft's order (what its sub-microbatches slice)."""
        spec = self.model["modules"][module]
        kind = spec["kind"]
        if kind == "mlp_projector":
            kind = upstream_encoder_kind(self.model, spec["name"])
            return self.clips if kind == "audio_encoder" else self.images
        if kind == "vit":
            return self.images
        if kind == "audio_encoder":
            return self.windows
        if kind == "llm":
            return self.sequences
        if kind == "dit":
            return self.videos
        raise ValueError(f"module {spec['name']}: kind {kind} is not modelled by the runtime")

    def restrict(self, module: int, begin: int, end: int) -> "MicrobatchData":
        """The view of instances [begin, end) of `module` (a DIP sub-microbatch): the fields
        that module's chunks read describe only those instances."""
        view = copy.copy(self)
        spec = self.model["modules"][module]
        kind = spec["kind"]
        if kind == "mlp_projector" and upstream_encoder_kind(self.model, spec["name"]) \
                == "audio_encoder":
            keys = {(si, item) for si, item, _ in self.clips[begin:end]}
            view._set_windows([w for w in self.windows if (w[0], w[1]) in keys])
        elif kind == "vit":
            view._set_images(self.images[begin:end])
        elif kind == "audio_encoder":
            view._set_windows(self.windows[begin:end])
        elif kind == "llm":
            view._set_sequences(self.sequences[begin:end])
        elif kind == "dit":
            view._set_videos(self.videos[begin:end])
        return view

    def keys(self, module: int, begin: int, end: int) -> list[tuple[int, int | None]]:
        """(sample, item) of instances [begin, end) of `module`, in instance order; item is
        the image / clip / video index within the sample, None for the LLM (whose instance, a
        packed sequence, holds one key per sample)."""
        inst = self.instances(module)[begin:end]
        if self.model["modules"][module]["kind"] == "llm":
            return [(m[0], None) for members in inst for m in members]
        return [(x[0], x[1]) for x in inst]

    def samples(self, module: int, begin: int, end: int) -> list[int]:
        """The samples (batch indices, ascending) of instances [begin, end) of `module`."""
        return sorted({si for si, _ in self.keys(module, begin, end)})

    def _segments(self, module: int, begin: int, end: int) -> list[tuple[tuple, int]]:
        """Per token segment of instances [begin, end) of `module`, in output row order:
        ((sample, item), rows); an LLM sequence has one segment per sample (item None)."""
        spec = self.model["modules"][module]
        kind = spec["kind"]
        if kind == "llm":
            return [((si, None), len(ids)) for members in self.sequences[begin:end]
                    for si, _, _, ids, _ in members]
        if kind == "vit":
            return [((si, item), len(p)) for si, item, p in self.images[begin:end]]
        if kind == "audio_encoder":
            return [((si, item), len(f)) for si, item, f, _ in self.windows[begin:end]]
        if kind == "mlp_projector":
            if upstream_encoder_kind(self.model, spec["name"]) == "audio_encoder":
                return [((si, item), kept) for si, item, kept in self.clips[begin:end]]
            return [((si, item), self.merged_of[(si, item)])
                    for si, item, _ in self.images[begin:end]]
        raise ValueError(f"module {spec['name']} ({kind}) does not feed another module here")

    def route(self, producer: int, p_range: tuple[int, int], consumer: int,
              c_range: tuple[int, int], samples: tuple[int, ...] | None = None
              ) -> torch.Tensor:
        """Rows of the producer slice's output (instances p_range) that the consumer slice
        (instances c_range) takes: a token segment (sample, item) goes to the consumer slice
        holding that sample, and that item when both sides number items (an image to the
        projector instance of the same image, an audio window to its clip). With `samples`
        (the plan's buffer samples) only those samples' segments."""
        by_sample: dict[int, set] = {}
        for si, item in self.keys(consumer, *c_range):
            by_sample.setdefault(si, set()).add(item)
        rows, offset = [], 0
        for (si, item), n in self._segments(producer, *p_range):
            items = by_sample.get(si)
            if items is not None and (samples is None or si in samples) and (
                    item is None or None in items or item in items):
                rows.extend(range(offset, offset + n))
            offset += n
        return torch.tensor(rows, dtype=torch.long)


def dit_patch_size(dit: dict) -> int:
    """Values of one DiT latent token: in_channels x patch_size^2 (x temporal_patch)."""
    return dit["in_channels"] * dit["patch_size"] ** 2 * max(1, dit["temporal_patch"])


def audio_feature_size(audio: dict) -> int:
    """Input features of one audio encoder token: conv_downsample mel frames stacked."""
    return audio["mel_bins"] * audio["conv_downsample"]


def upstream_encoder_kind(model: dict, name: str) -> str:
    """Kind of the first non-projector module upstream of `name` through projectors."""
    by_name = {m["name"]: m for m in model["modules"]}
    stack, seen = [name], {name}
    while stack:
        cur = stack.pop()
        for a, b in model["edges"]:
            if b != cur or a in seen:
                continue
            seen.add(a)
            if by_name[a]["kind"] == "mlp_projector":
                stack.append(a)
            else:
                return by_name[a]["kind"]
    return by_name[name]["kind"]


def build_chunks(model: dict, chunks: list[dict], seed: int) -> list[ModuleChunk]:
    return [ModuleChunk(model, c["module"], c["first_layer"], c["num_layers"], seed) for c in chunks]


def reference_step(model: dict, chunk_modules: list[ModuleChunk], plan, seed: int,
                   samples_used: list[list[int]] | None = None) -> float:
    """Single-process reference: runs every microbatch of `plan` (a parsed weft.plan/v3 plan:
    all of its data.microbatches, every replica's in a world plan) through the whole model in
    module order (`chunk_modules` sorted by module topological order, then layer), accumulating
    gradients. A module's first chunk takes the outputs of its predecessor modules (model
    edges); later chunks the previous chunk's output. Returns the loss; appends each
    microbatch's batch samples (ascending) to samples_used when given."""
    denom = float(plan.data.loss_tokens)
    names = [m["name"] for m in model["modules"]]
    total = 0.0
    for key in sorted(plan.data.microbatches):
        mb = MicrobatchData(model, plan, plan.data.microbatches[key], seed, denom)
        if samples_used is not None:
            samples_used.append(mb.sample_ids)
        outs: dict[int, torch.Tensor] = {}
        loss = None
        for chunk in chunk_modules:
            if chunk.is_first:
                preds = [names.index(a) for a, b in model["edges"] if b == names[chunk.module]]
                c = chunk.module
                whole = lambda m: (0, len(mb.instances(m)))  # noqa: E731
                # What each producer routes to this module (an LLM sends a DiT only the
                # samples that have a video).
                inputs = [outs[p][mb.route(p, whole(p), c, whole(c))]
                          for p in preds if p in outs]
                sources = [names[p] for p in preds if p in outs]
            else:
                inputs, sources = [outs[chunk.module]], None
            out = chunk(inputs, mb, sources) if sources else chunk(inputs, mb)
            if out.dim() == 0:
                loss = out
            else:
                outs[chunk.module] = out
        loss.backward()
        total += float(loss.detach())
    return total
