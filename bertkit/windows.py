"""Sliding token windows: the one rule long documents (classify) and long sentences (NER) are cut by."""

from __future__ import annotations

from bertkit.errors import BertkitError


def sliding_windows(n_tokens: int, size: int, stride: int, full_last: bool = False) -> list[tuple[int, int]]:
    """[start, end) ranges of at most `size` tokens over 0..n_tokens, each sharing `stride` tokens with the one
    before. The last window ends at n_tokens: cut short there (the fast tokenizer's overflow windows, so
    sliding_windows(30, 10, 3) -> [(0, 10), (7, 17), (14, 24), (21, 30)]), or with `full_last` moved back to start
    at n_tokens - size so that it is full: sliding_windows(11, 4, 2, full_last=True) -> [..., (6, 10), (7, 11)].
    No tokens give one empty window, (0, 0)."""
    if not 0 <= stride < size:
        raise BertkitError(f"stride {stride} must be smaller than the {size} tokens of a window — lower the stride "
                           f"or raise data.max_length")
    step = size - stride
    count = 1 + -(-max(n_tokens - size, 0) // step)  # ceil division
    starts = [k * step for k in range(count)]
    if full_last and n_tokens > size:
        starts[-1] = n_tokens - size
    return [(start, min(start + size, n_tokens)) for start in starts]


__all__ = ["sliding_windows"]
