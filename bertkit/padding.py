"""Unpadding: run a variable-length batch as one packed stream of its real tokens, then put it back.

A padded batch is (B, T, ...) with an attention mask (B, T) that is 1 on real tokens. Its N real tokens, read row by
row, form the packed tensor (N, ...). Everything that treats tokens independently (embeddings' LayerNorm, every
linear layer, the feed-forward) can run on the packed tensor and skip the padding; only attention needs to know where
one sequence ends and the next begins, which `cu_seqlens` (cumulative lengths, as flash-attention's varlen kernels
take them) or the (batch, position) of each token tells it.

    packed, indices, cu_seqlens, max_seqlen = unpad_input(hidden, attention_mask)   # (B, T, D) -> (N, D)
    ... work on packed ...
    hidden = pad_input(packed, indices, batch, seqlen)                              # (N, D) -> (B, T, D), zeros

Pure functions of tensors; gradients flow through both directions (gather one way, scatter the other).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def unpadding_indices(attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Where the real tokens are. attention_mask (B, T), nonzero = real.

    Returns indices (N,) int64 into the flattened (B*T) positions, in row-major order; cu_seqlens (B+1,) int32 with
    cu_seqlens[0] = 0 and cu_seqlens[b+1] - cu_seqlens[b] = number of real tokens of row b; max_seqlen (int)."""
    mask = attention_mask.bool()
    seqlens = mask.sum(dim=-1, dtype=torch.int32)  # (B,)
    indices = torch.nonzero(mask.flatten(), as_tuple=False).flatten()  # (N,)
    cu_seqlens = F.pad(torch.cumsum(seqlens, dim=0, dtype=torch.int32), (1, 0))  # (B+1,)
    max_seqlen = int(seqlens.max().item()) if seqlens.numel() else 0
    return indices, cu_seqlens, max_seqlen


def gather_tokens(tensor: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """The rows of the flattened batch at `indices`. (B, T, ...) -> (N, ...)."""
    return tensor.reshape(-1, *tensor.shape[2:])[indices]  # (B*T, ...) -> (N, ...)


def unpad_input(hidden: torch.Tensor,
                attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """Keep the real tokens only. hidden (B, T, ...), attention_mask (B, T).

    Returns packed (N, ...), indices (N,), cu_seqlens (B+1,) int32, max_seqlen (int)."""
    indices, cu_seqlens, max_seqlen = unpadding_indices(attention_mask)
    return gather_tokens(hidden, indices), indices, cu_seqlens, max_seqlen


def pad_input(packed: torch.Tensor, indices: torch.Tensor, batch: int, seqlen: int) -> torch.Tensor:
    """Inverse of `unpad_input`: packed (N, ...) back to (B, T, ...), zeros at the padding positions."""
    output = packed.new_zeros(batch * seqlen, *packed.shape[1:])  # (B*T, ...)
    output = output.index_put((indices,), packed)  # out of place: autograd sees a plain scatter
    return output.view(batch, seqlen, *packed.shape[1:])  # (B, T, ...)


def pad_heads(packed: torch.Tensor, batch_index: torch.Tensor, position_index: torch.Tensor, batch: int,
              seqlen: int) -> torch.Tensor:
    """Packed per-head vectors scattered straight into the (B, H, T, hd) layout attention kernels read.

    packed (N, H, hd); batch_index, position_index (N,): the row and column of each real token
    (`indices // T`, `indices % T`). Zeros at the padding positions. Same values as
    `pad_input(packed, indices, B, T).transpose(1, 2)`, but contiguous, which the CPU sdpa kernel reads faster."""
    output = packed.new_zeros(batch, packed.shape[1], seqlen, packed.shape[2])  # (B, H, T, hd)
    output[batch_index, :, position_index] = packed  # advanced indices around a slice: the value is (N, H, hd)
    return output


def length_buckets(seqlens: torch.Tensor, granularity: int) -> list[torch.Tensor]:
    """Rows grouped by length rounded up to a multiple of `granularity`, shortest group first. seqlens (B,) ->
    index tensors of the rows in each group (ascending). Rows of length 0 are in no group.

    Attention over a group padded to its own longest row costs sum(B_g * T_g^2) instead of B * T^2."""
    rounded = (seqlens + granularity - 1) // granularity  # (B,)
    return [torch.nonzero(rounded == value).flatten() for value in rounded.unique().tolist() if value > 0]


__all__ = ["unpadding_indices", "gather_tokens", "unpad_input", "pad_input", "pad_heads", "length_buckets"]
