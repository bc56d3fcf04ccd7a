"""Padding and unpadding: run a variable-length batch as one packed stream of its real tokens, then put it back.

A padded batch is (B, T, ...) with an attention mask (B, T) that is 1 on real tokens. Its N real tokens, read row by
row, form the packed tensor (N, ...). Everything that treats tokens independently (embeddings' LayerNorm, every
linear layer, the feed-forward) can run on the packed tensor and skip the padding; only attention needs to know where
one sequence ends and the next begins, which `cu_seqlens` (cumulative lengths, as flash-attention's varlen kernels
take them) or the (batch, position) of each token tells it.

    packed, indices, cu_seqlens, max_seqlen = unpad_input(hidden, attention_mask)   # (B, T, D) -> (N, D)
    ... work on packed ...
    hidden = pad_input(packed, indices, batch, seqlen)                              # (N, D) -> (B, T, D), zeros

Pure functions of tensors; gradients flow through both directions (gather one way, scatter the other).

The encoder's speed machinery, built on them: unpadded execution (`config.unpad`, or `unpad=` per call; on by
default). When a batch has padding, the encoder runs on its N real tokens only: embeddings' LayerNorm, every linear
layer, every LayerNorm and the feed-forward see a packed (N, D) tensor. `Unpadding` says where those tokens sit,
computed once per forward from the (B, T) attention mask. Attention scatters the packed q, k, v into padded
(B_b, H, T_b, hd) layouts for the kernel, one per `AttentionBucket` of rows of similar length so that short rows are
not padded to the longest (or, under flash-attention, keeps them packed and passes `cu_seqlens`); each sequence
attends to itself only, exactly as in the padded path. The heads read the packed tokens (`unpack`, `first_tokens`,
`select`): the real tokens' vectors equal the padded path's, and the padding positions of per-token outputs
(last_hidden_state, hidden_states, MLM / token / QA logits) are zeros, where transformers would return values
computed for the pad tokens. Inputs without padding, `output_attentions=True` and `unpad=False` take the padded
path, which matches transformers everywhere, padding positions included; so do graphs (torch.export, torch.compile,
torch.jit.trace, torch.fx), which cannot branch on the mask's values.

Training on CPU: dropout draws its masks from 16 random bits per element instead of torch's per-element Bernoulli
(`fast_dropout`, the `Dropout` module), and sdpa with attention dropout runs as eager attention (CPU sdpa has no
fused kernel with dropout). Outputs in eval mode are unchanged; training sees dropout at the same rates, from
different random masks.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from . import speed


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


def pad_heads(packed: torch.Tensor, slots: torch.Tensor, batch: int, seqlen: int) -> torch.Tensor:
    """Packed per-head vectors scattered into the (B, H, T, hd) layout attention kernels read.

    packed (N, H, hd), or (N, G, H, hd) for G groups of heads (query, key, value) -> (B, H, T, hd), or (G, B, H, T, hd)
    with each group contiguous. slots (N,): each token's place in the flattened (B * T) layout, row * T + column.
    Zeros at the padding positions. Same values as `pad_input(packed, slots, B, T).transpose(1, 2)`: whole rows are
    copied at once (index_copy along one dimension), then the layout is made contiguous, which the CPU kernels read
    faster than the transposed view (and whose (B, H) dimensions then merge without a copy)."""
    flat = packed.new_zeros(batch * seqlen, *packed.shape[1:])  # (B*T, [G,] H, hd)
    flat.index_copy_(0, slots, packed)  # in place on a fresh tensor: autograd records a scatter, with no extra copy
    groups = packed.dim() - 3  # 0 or 1
    order = (*range(2, 2 + groups), 0, 2 + groups, 1, 3 + groups)  # (B, T, [G,] H, hd) -> ([G,] B, H, T, hd)
    return flat.view(batch, seqlen, *packed.shape[1:]).permute(order).contiguous()


def length_buckets(seqlens: torch.Tensor, granularity: int) -> list[torch.Tensor]:
    """Rows grouped by length rounded up to a multiple of `granularity`, shortest group first. seqlens (B,) ->
    index tensors of the rows in each group (ascending). Rows of length 0 are in no group.

    Attention over a group padded to its own longest row costs sum(B_g * T_g^2) instead of B * T^2."""
    rounded = (seqlens + granularity - 1) // granularity  # (B,)
    return [torch.nonzero(rounded == value).flatten() for value in rounded.unique().tolist() if value > 0]


# ------------------------------------------------------------------------- unpadded execution of the encoder

RANDOM_BITS = 16  # a CPU dropout mask draws this many random bits per element


def fast_dropout(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """Inverted dropout, as `F.dropout`, with a cheaper random mask on CPU.

    torch's CPU dropout draws one random number per element (`bernoulli_`), about a fifth of a BERT training step
    here. This draws 64 random bits per 4 elements and drops an element when its 16 bits fall under
    round(p * 2^16): p is kept to within 2^-17, and the kept values are scaled by 1 / (1 - that exact rate), so the
    expectation is unchanged. Other devices, and rates too close to 0 or 1 for 16 bits, use `F.dropout`."""
    if not training or p == 0.0:
        return x
    dropped = round(p * 2**RANDOM_BITS)
    if x.device.type != "cpu" or not 0 < dropped < 2**RANDOM_BITS or not speed.on("dropout"):
        return F.dropout(x, p, training=True)
    keep = random_int16(x.numel(), x.device).view(x.shape) >= dropped - 2 ** (RANDOM_BITS - 1)  # (x.shape) bool
    return x * keep.to(x.dtype).mul_(2**RANDOM_BITS / (2**RANDOM_BITS - dropped))


def random_int16(count: int, device) -> torch.Tensor:
    """`count` uniform random int16, four from each 64-bit draw of torch's generator (so torch.manual_seed rules)."""
    draws = torch.randint(-(2**63), 2**63 - 1, ((count + 3) // 4,), dtype=torch.int64, device=device)
    return draws.view(torch.int16)[:count]


class Dropout(nn.Dropout):
    """nn.Dropout through `fast_dropout` (the same `p`, `training` and state dict)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return fast_dropout(x, self.p, self.training)


class AttentionBucket(NamedTuple):
    """Rows of similar length that attend together in one padded (B_b, H, T_b, hd) layout."""

    tokens: slice  # their real tokens: a contiguous run of the packed order
    rows: torch.Tensor | None  # (B_b,) rows of the batch; None = all of them
    slots: torch.Tensor  # (N_b,) each token's place in the flattened (B_b * T_b) layout: row * T_b + column
    batch: int  # B_b
    seqlen: int  # T_b


class Unpadding(NamedTuple):
    """Where a padded batch's N real tokens sit, computed once per forward from the (B, T) attention mask.

    The packed order is row-major, except with attention buckets: then the tokens of each bucket's rows come together
    (bucket by bucket, row-major inside one), so that attention reads each bucket as a slice and writes its context
    back with one concatenation. Everything position-wise is indifferent to the order; `pack`, `unpack`,
    `first_tokens` and `select` follow `indices`, and `cu_seqlens` (varlen kernels, which take no buckets) describes
    the row-major order."""

    indices: torch.Tensor  # (N,) into the flattened B*T positions
    batch_index: torch.Tensor  # (N,) row of each real token
    position_index: torch.Tensor  # (N,) column of each real token (its position id when none are given)
    cu_seqlens: torch.Tensor  # (B+1,) int32 cumulative lengths, for varlen kernels
    max_seqlen: int
    batch: int  # B
    seqlen: int  # T
    buckets: tuple[AttentionBucket, ...] = ()  # how attention groups the rows; () = all rows in one (B, T) layout

    @classmethod
    def from_mask(cls, attention_mask: torch.Tensor) -> "Unpadding":
        indices, cu_seqlens, max_seqlen = unpadding_indices(attention_mask)
        batch, seqlen = attention_mask.shape
        return cls(indices, indices // seqlen, indices % seqlen, cu_seqlens, max_seqlen, batch, seqlen)

    def with_length_buckets(self, granularity: int) -> "Unpadding":
        """The same tokens, packed bucket by bucket, with the rows grouped into attention buckets of similar length
        (see `length_buckets`)."""
        groups = length_buckets(self.cu_seqlens.diff(), granularity)
        if len(groups) <= 1:
            return self
        bucket_of_row = torch.full((self.batch,), -1, dtype=torch.long, device=self.indices.device)  # (B,)
        local_row = torch.zeros(self.batch, dtype=torch.long, device=self.indices.device)  # (B,)
        for number, rows in enumerate(groups):
            bucket_of_row[rows], local_row[rows] = number, torch.arange(len(rows), device=rows.device)
        bucket_of_token = bucket_of_row[self.batch_index]  # (N,)
        order = torch.argsort(bucket_of_token, stable=True)  # (N,): bucket by bucket, row-major inside one
        regrouped = self._replace(indices=self.indices[order], batch_index=self.batch_index[order],
                                  position_index=self.position_index[order])
        ends = torch.bincount(bucket_of_token, minlength=len(groups)).cumsum(0).tolist()  # each bucket's last + 1
        starts = [0] + ends[:-1]
        buckets = tuple(regrouped._bucket(rows, slice(start, end), local_row)
                        for rows, start, end in zip(groups, starts, ends))
        return regrouped._replace(buckets=buckets)

    def _bucket(self, rows, tokens: slice, local_row) -> AttentionBucket:
        positions = self.position_index[tokens]  # (N_b,)
        width = int(positions.max()) + 1  # the longest row (or, left-padded, the rightmost real token)
        return AttentionBucket(tokens, rows, local_row[self.batch_index[tokens]] * width + positions, len(rows), width)

    def attention_buckets(self) -> tuple[AttentionBucket, ...]:
        return self.buckets or (AttentionBucket(slice(None), None, self.indices, self.batch, self.seqlen),)

    def pack(self, tensor):
        """(B, T, ...) -> (N, ...); None stays None."""
        return None if tensor is None else gather_tokens(tensor, self.indices)

    def unpack(self, packed: torch.Tensor) -> torch.Tensor:
        """(N, ...) -> (B, T, ...), zeros at padding."""
        return pad_input(packed, self.indices, self.batch, self.seqlen)

    def first_tokens(self, packed: torch.Tensor) -> torch.Tensor:
        """(N, D) -> (B, 1, D): each row's token in column 0, what a pooler reads ([CLS]); zeros where it is padding,
        as `unpack(packed)[:, :1]` without re-padding the rest."""
        first = self.position_index == 0  # (N,)
        output = packed.new_zeros(self.batch, *packed.shape[1:])  # (B, D)
        return output.index_put((self.batch_index[first],), packed[first]).unsqueeze(1)

    def select(self, packed: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """(N, D) -> (M, D): the M positions where `positions` (B, T) is True, in row-major order, as
        `unpack(packed)[positions]` (zeros for a selected padding position) without re-padding the rest."""
        slot = torch.full((self.batch * self.seqlen,), -1, dtype=torch.long, device=packed.device)  # (B*T,)
        slot[self.indices] = torch.arange(len(self.indices), device=packed.device)
        selected = slot[positions.flatten()]  # (M,) places in the packed order; -1 at padding
        if bool((selected < 0).any()):
            return self.unpack(packed)[positions]
        return packed[selected]


def attend_buckets(attend, qkv: torch.Tensor, attention_mask, unpadding: Unpadding) -> torch.Tensor:
    """Attention on packed tokens through a kernel that reads padded layouts. qkv (N, 3H, hd) -> context (N, H, hd).

    The packed q, k, v are scattered into padded (B_b, H, T_b, hd) layouts, one per attention bucket, and the padding
    mask (B, 1, 1 or T, T) hides the pad keys, so each sequence attends to itself only. `attend(q, k, v, mask)` is
    the kernel: three (B_b, H, T_b, hd) -> context (B_b, T_b, H, hd)."""
    buckets = unpadding.attention_buckets()
    if len(buckets) == 1:
        return _attend_bucket(attend, qkv, attention_mask, buckets[0])
    # split, not slices: its backward is one concatenation, where each slice's would fill a zero tensor of all N
    parts = qkv.split([bucket.tokens.stop - bucket.tokens.start for bucket in buckets])  # (N_b, 3H, hd) each
    pieces = [_attend_bucket(attend, part, attention_mask, bucket) for part, bucket in zip(parts, buckets)]
    return torch.cat(pieces)  # the buckets' tokens in turn: the packed order


def _attend_bucket(attend, qkv, attention_mask, bucket: AttentionBucket) -> torch.Tensor:
    """Attention for one bucket of rows. qkv (N_b, 3H, hd), its tokens -> their context (N_b, H, hd)."""
    if bucket.rows is not None and attention_mask is not None:
        attention_mask = attention_mask[bucket.rows][:, :, :bucket.seqlen, :bucket.seqlen]  # (B_b, 1, ., T_b)
    grouped = qkv.view(len(qkv), 3, -1, qkv.shape[-1])  # (N_b, 3, H, hd)
    padded = pad_heads(grouped, bucket.slots, bucket.batch, bucket.seqlen)  # (3, B_b, H, T_b, hd), zeros at padding
    context = attend(*padded, attention_mask)  # 3 x (B_b, H, T_b, hd) -> (B_b, T_b, H, hd)
    return context.reshape(bucket.batch * bucket.seqlen, *context.shape[2:])[bucket.slots]  # (N_b, H, hd)


def attend_varlen(attend, qkv: torch.Tensor, unpadding: Unpadding) -> torch.Tensor:
    """Attention on packed tokens through flash-attention's varlen kernel, which reads the sequence boundaries
    (`cu_seqlens`). qkv (N, 3H, hd) -> context (N, H, hd)."""
    q, k, v = (x.transpose(0, 1).unsqueeze(0) for x in qkv.chunk(3, dim=1))  # (N, H, hd) -> (1, H, N, hd)
    boundaries = {"cu_seq_lens_q": unpadding.cu_seqlens, "cu_seq_lens_k": unpadding.cu_seqlens,
                  "max_length_q": unpadding.max_seqlen, "max_length_k": unpadding.max_seqlen}
    return attend(q, k, v, None, **boundaries)[0]  # (1, N, H, hd) -> (N, H, hd)


class Encoded(NamedTuple):
    """The encoder's output as the heads read it, before any re-padding."""

    hidden: torch.Tensor  # (N, D) packed real tokens when `unpadding` is set, else (B, T, D)
    unpadding: Unpadding | None
    hidden_states: tuple[torch.Tensor, ...] | None  # for output_hidden_states: (B, T, D) each
    attentions: tuple[torch.Tensor, ...] | None  # for output_attentions: (B, H, T, T) each

    def padded(self) -> torch.Tensor:
        """(B, T, D), zeros at padding when unpadded."""
        return self.hidden if self.unpadding is None else self.unpadding.unpack(self.hidden)

    def per_token(self, head) -> torch.Tensor:
        """A per-token head on the real tokens only, padded once: (B, T, C), zeros at padding when unpadded."""
        output = head(self.hidden)  # (N, C) or (B, T, C)
        return output if self.unpadding is None else self.unpadding.unpack(output)

    def first_tokens(self) -> torch.Tensor:
        """(B, 1, D): what a pooler reads."""
        return self.hidden[:, :1] if self.unpadding is None else self.unpadding.first_tokens(self.hidden)

    def select(self, positions: torch.Tensor) -> torch.Tensor:
        """(M, D): the positions where `positions` (B, T) is True, in row-major order."""
        return self.hidden[positions] if self.unpadding is None else self.unpadding.select(self.hidden, positions)


__all__ = ["unpadding_indices", "gather_tokens", "unpad_input", "pad_input", "pad_heads", "length_buckets",
           "RANDOM_BITS", "fast_dropout", "random_int16", "Dropout", "AttentionBucket", "Unpadding", "attend_buckets",
           "attend_varlen", "Encoded"]
