"""All-gather context parallelism with Cornstarch's bitfield attention mask (BAM) on torch.distributed.

Each of G ranks holds the tokens of its blocks (the distribution weft's planner computes:
`_weft.cp_distribute`, LPT / zigzag / ring / random over 128-token blocks), all-gathers K and V of
every token, and computes the attention rows of its own tokens under the mask, one query block at a
time (a boolean mask per query block; nothing of size T x T is built on a rank). The backward of the
all-gather sums every rank's K/V gradient (an all-reduce) and keeps the rows the rank owns.

BAM rule (Cornstarch's bitfield attention kernel; see include/weft/cp/mask.h): a text query
(bit 0) attends every key at a position <= its own whose bits 0..61 intersect its own; a modality
query attends every key whose bits 0..61 equal its own; never across documents (packed samples).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.distributed as dist

import _weft

TEXT_BIT = 1
CAUSAL_BIT = 1 << 62
MODALITY_BITS_MASK = (1 << 62) - 1


@dataclass
class TokenMask:
    """Per-token BAM words and document indices of a layout (T entries each)."""
    bits: torch.Tensor      # int64
    document: torch.Tensor  # int64


def token_mask(layout_json: str) -> TokenMask:
    m = _weft.cp_token_mask(layout_json)
    return TokenMask(torch.tensor(m["bits"], dtype=torch.int64),
                     torch.tensor(m["document"], dtype=torch.int64))


def bam_mask(mask: TokenMask, query_pos: torch.Tensor, key_pos: torch.Tensor) -> torch.Tensor:
    """Boolean [len(query_pos), len(key_pos)]: True where the query attends the key."""
    qb = mask.bits[query_pos][:, None]
    kb = mask.bits[key_pos][None, :]
    q = qb & MODALITY_BITS_MASK
    k = kb & MODALITY_BITS_MASK
    same_doc = mask.document[query_pos][:, None] == mask.document[key_pos][None, :]
    is_text = (qb & TEXT_BIT) != 0
    causal = key_pos[None, :] <= query_pos[:, None]
    text_rule = is_text & causal & ((q & k) != 0)
    modality_rule = (~is_text) & (q == k) & (q != 0)
    return same_doc & (text_rule | modality_rule)


def rank_tokens(layout_json: str, ranks: int, method: str = "lpt", seed: int = 0,
                block_tokens: int = 128) -> list[torch.Tensor]:
    """Token indices (ascending) of every rank under weft's block distribution."""
    d = _weft.cp_distribute(layout_json, ranks, method, seed, block_tokens)
    total = d["tokens"]
    out = []
    for blocks in d["blocks_of_rank"]:
        idx = [torch.arange(b * block_tokens, min(total, (b + 1) * block_tokens)) for b in blocks]
        out.append(torch.cat(idx) if idx else torch.empty(0, dtype=torch.int64))
    return out


class _AllGatherRows(torch.autograd.Function):
    """Rows held by each rank -> all rows in global token order; backward sums over ranks."""

    @staticmethod
    def forward(ctx, local: torch.Tensor, indices: list[torch.Tensor], rank: int, group):
        ctx.indices, ctx.rank, ctx.group = indices, rank, group
        width = max(len(i) for i in indices)
        padded = local.new_zeros((width,) + tuple(local.shape[1:]))
        padded[: local.shape[0]] = local
        pieces = [torch.empty_like(padded) for _ in indices]
        dist.all_gather(pieces, padded.contiguous(), group=group)
        total = sum(len(i) for i in indices)
        full = local.new_empty((total,) + tuple(local.shape[1:]))
        for idx, piece in zip(indices, pieces):
            full[idx] = piece[: len(idx)]
        return full

    @staticmethod
    def backward(ctx, grad_full: torch.Tensor):
        # Every rank's queries used every key: the gradient of a key row is the sum over ranks.
        summed = grad_full.contiguous().clone()
        dist.all_reduce(summed, group=ctx.group)
        return summed[ctx.indices[ctx.rank]], None, None, None


def all_gather_rows(local: torch.Tensor, indices: list[torch.Tensor], rank: int,
                    group=None) -> torch.Tensor:
    return _AllGatherRows.apply(local, indices, rank, group)


def masked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     allowed: torch.Tensor) -> torch.Tensor:
    """q [H, Q, d], k/v [H, K, d], allowed [Q, K] bool -> [H, Q, d]. Every query attends at
    least itself under BAM, so no row is empty."""
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def cp_attention(q_local: torch.Tensor, k_local: torch.Tensor, v_local: torch.Tensor,
                 mask: TokenMask, indices: list[torch.Tensor], rank: int, group=None,
                 query_block: int = 128) -> torch.Tensor:
    """Attention rows of this rank's tokens. q/k/v_local: [n_rank, H, d] for the tokens
    indices[rank] (ascending); returns [n_rank, H, d]. K and V are gathered in one collective."""
    kv = all_gather_rows(torch.cat([k_local, v_local], dim=-1), indices, rank, group)
    d = k_local.shape[-1]
    k_full, v_full = kv[..., :d].transpose(0, 1), kv[..., d:].transpose(0, 1)  # [H, T, d]
    mine = indices[rank]
    keys = torch.arange(kv.shape[0])
    outs = []
    for start in range(0, len(mine), query_block):
        rows = mine[start:start + query_block]
        allowed = bam_mask(mask, rows, keys)
        qb = q_local[start:start + query_block].transpose(0, 1)  # [H, Qb, d]
        outs.append(masked_attention(qb, k_full, v_full, allowed).transpose(0, 1))
    return torch.cat(outs, dim=0)
