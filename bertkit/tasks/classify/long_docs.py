"""Long documents for sequence classification: which tokens of a document the model sees, and how the predictions
of a document's windows become one prediction per document.

    strategy    what each document becomes (positions count text tokens; `room` = how many fit in one row)
    head        [CLS] first room tokens [SEP]                   plain truncation, one row per document (default)
    tail        [CLS] last room tokens [SEP]                    one row
    head_tail   [CLS] first head_tokens + last (room - head_tokens) [SEP]   one row (Sun et al. 2019: 128 + 382)
    chunk       windows of room tokens overlapping by `stride`  several rows, each with its document's label;
                window predictions are aggregated per document (mean | max | vote), or (aggregate=attention)
                one row per document holding its windows, pooled by learned attention inside the model
                (bertkit/modeling_document.py; tasks/classify/documents.py)

Sentence pairs: the strategy applies to the longer segment; the shorter one is kept whole in every row when it takes
at most half the room, else cut to half the room (the rule of the tokenizer's `longest_first`). The windows are the
fast tokenizer's `return_overflowing_tokens=True, stride=...` windows (tests/test_long_docs.py checks they agree),
built here from the full token ids (bertkit.windows.sliding_windows, the rule NER's long sentences follow too) so that
every strategy, the max_windows cap and `bertkit inspect` share one plan.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

import numpy as np

from bertkit.errors import BertkitError
from bertkit.windows import sliding_windows

logger = logging.getLogger("bertkit")

Span = tuple[int, int]  # [start, end) in the long segment's text tokens
# aggregate=attention trains on documents: a batch of B documents puts up to B x this many windows through the encoder
# (with their activations kept for the backward pass), so a document keeps at most this many evenly spaced windows
# when long_doc.max_windows is null, in training, in dev evaluation and in predict / evaluate alike.
ATTENTION_MAX_WINDOWS = 16


@dataclass
class LongDocConfig:
    strategy: Literal["head", "tail", "head_tail", "chunk"] = "head"
    """Tokens of a long text the model sees: head (truncate), tail (keep the end), head_tail, chunk (windows)."""
    head_tokens: int = 128
    """head_tail: tokens kept from the start; the tail gets the rest (max_length - 2 - head_tokens)."""
    stride: int = 64
    """chunk: tokens each window shares with the previous one."""
    max_windows: int | None = None
    """chunk: most windows per document, evenly spaced with the first and last kept (None = all)."""
    aggregate: Literal["mean", "max", "vote", "attention"] = "mean"
    """chunk: window probabilities -> document: mean, per-label max, or majority vote (ties: higher mean); or
    attention: the model weighs each document's window vectors (learned) and classifies the document once, trained
    per document on at most max_windows windows (null: ATTENTION_MAX_WINDOWS = 16)."""

    def window_limit(self) -> int | None:
        """Most windows per document: max_windows, or under aggregate=attention (which trains on all the windows of
        a batch's documents in one encoder pass) ATTENTION_MAX_WINDOWS when max_windows is null."""
        if self.max_windows is None and self.aggregate == "attention":
            return ATTENTION_MAX_WINDOWS
        return self.max_windows

    def check(self, max_length: int, kind: str | None = None) -> None:
        """Raise a one-line BertkitError naming the key when the settings cannot work at this max_length."""
        room = max_length - 2
        if self.strategy == "head_tail" and not 0 <= self.head_tokens < room:
            raise BertkitError(f"long_doc.head_tokens={self.head_tokens} leaves no room for the tail at "
                               f"data.max_length={max_length} ({room} text tokens) — set long_doc.head_tokens "
                               f"between 0 and {room - 1}, e.g. {room // 4}")
        if self.strategy == "chunk" and not 0 <= self.stride < room:
            raise BertkitError(f"long_doc.stride={self.stride} must be below the {room} text tokens of a window at "
                               f"data.max_length={max_length} — set long_doc.stride={room // 4}")
        if self.max_windows is not None and self.max_windows < 1:
            raise BertkitError(f"long_doc.max_windows={self.max_windows} must be at least 1 (or null for all)")
        if self.aggregate == "attention" and self.strategy != "chunk":
            raise BertkitError(f"long_doc.aggregate=attention pools a document's windows, but long_doc.strategy="
                               f"{self.strategy} makes one row per document — set long_doc.strategy=chunk, or "
                               "long_doc.aggregate=mean")
        if self.strategy == "chunk" and self.aggregate == "vote" and kind == "regression":
            raise BertkitError("long_doc.aggregate=vote needs class labels — use mean or max for regression")


# ------------------------------------------------------------------------------------------------ which tokens


def evenly_spaced(count: int, keep: int) -> list[int]:
    """`keep` of the indices 0..count-1, evenly spaced, first and last included (the first alone when keep=1)."""
    if count <= keep:
        return list(range(count))
    if keep == 1:
        return [0]
    return [int(np.floor(i * (count - 1) / (keep - 1) + 0.5)) for i in range(keep)]


def plan_windows(n_tokens: int, room: int, cfg: LongDocConfig) -> tuple[list[list[Span]], bool]:
    """The rows one text of n_tokens becomes: each row a list of spans to concatenate. Also whether max_windows
    cut windows away."""
    if n_tokens <= room:
        return [[(0, n_tokens)]], False
    if cfg.strategy == "head":
        return [[(0, room)]], False
    if cfg.strategy == "tail":
        return [[(n_tokens - room, n_tokens)]], False
    if cfg.strategy == "head_tail":
        head = min(cfg.head_tokens, room)
        return [[span for span in ((0, head), (n_tokens - (room - head), n_tokens)) if span[1] > span[0]]], False
    stride = cfg.stride if cfg.stride < room else room // 2  # a pair's short segment can shrink the room
    spans = sliding_windows(n_tokens, room, stride)
    limit = cfg.window_limit()
    kept = evenly_spaced(len(spans), limit) if limit else range(len(spans))
    return [[spans[i]] for i in kept], len(kept) < len(spans)


def short_segment_keep(n_short: int, room: int) -> int:
    """Tokens of a pair's shorter segment that stay: all when they take at most half the room, else half."""
    return min(n_short, room // 2)


def covered(rows: list[list[Span]]) -> int:
    """How many distinct tokens the rows' spans cover (windows overlap)."""
    total, reach = 0, 0
    for start, end in sorted(span for row in rows for span in row):
        total += max(0, end - max(start, reach))
        reach = max(reach, end)
    return total


# ------------------------------------------------------------------------------------------------ encoding


@dataclass
class Windows:
    """Model rows for a list of documents: row i belongs to document doc_ids[i] (0-based, in input order)."""
    input_ids: list[list[int]]
    token_type_ids: list[list[int]]
    doc_ids: np.ndarray
    capped: int = 0
    """Documents that had more than max_windows windows."""

    def features(self) -> list[dict]:
        return [{"input_ids": ids, "token_type_ids": types} for ids, types in zip(self.input_ids, self.token_type_ids)]


def with_special_tokens(tokenizer, first: list[int], second: list[int] | None) -> tuple[list[int], list[int]]:
    """BERT's template: [CLS] first [SEP] (second [SEP]), token types 0 for the first segment and 1 for the second."""
    ids = [tokenizer.cls_token_id, *first, tokenizer.sep_token_id]
    if second is None:
        return ids, [0] * len(ids)
    return ids + [*second, tokenizer.sep_token_id], [0] * len(ids) + [1] * (len(second) + 1)


def _text_ids(tokenizer, texts: list[str]) -> list[list[int]]:
    return tokenizer(texts, add_special_tokens=False, truncation=False, verbose=False)["input_ids"]


def encode_documents(tokenizer, texts: list[str], pairs: list[str] | None, max_length: int,
                     cfg: LongDocConfig) -> Windows:
    """Token rows of at most max_length for each document (a text, or a text pair) under the strategy."""
    if cfg.strategy == "head":  # plain truncation, exactly what the tokenizer does
        encoded = tokenizer(texts, pairs, truncation=True, max_length=max_length)
        types = encoded.get("token_type_ids") or [[0] * len(ids) for ids in encoded["input_ids"]]
        return Windows(list(encoded["input_ids"]), list(types), np.arange(len(texts)))
    firsts = _text_ids(tokenizer, texts)
    seconds = _text_ids(tokenizer, pairs) if pairs is not None else [None] * len(texts)
    windows, doc_ids, capped = Windows([], [], np.zeros(0, dtype=np.int64)), [], 0
    for doc, (first, second) in enumerate(zip(firsts, seconds)):
        long_is_first = second is None or len(first) > len(second)
        long, short = (first, second) if long_is_first else (second, first)
        room = max_length - (2 if short is None else 3)
        if short is not None:
            short = short[:short_segment_keep(len(short), room)]
            room -= len(short)
        rows, was_capped = plan_windows(len(long), room, cfg)
        capped += was_capped
        for row in rows:
            part = [token for start, end in row for token in long[start:end]]
            ids, types = with_special_tokens(tokenizer, *((part, short) if long_is_first else (short, part)))
            windows.input_ids.append(ids)
            windows.token_type_ids.append(types)
            doc_ids.append(doc)
    windows.doc_ids, windows.capped = np.asarray(doc_ids, dtype=np.int64), capped
    return windows


def warn_capped(windows: Windows, cfg: LongDocConfig, what: str) -> None:
    if windows.capped:
        limit = f"{cfg.window_limit()}{' (the attention default)' if cfg.max_windows is None else ''}"
        logger.warning("long_doc.max_windows=%s: %d of %d %s documents had more windows; each keeps %d evenly "
                       "spaced ones (first and last included)", limit, windows.capped,
                       len(np.unique(windows.doc_ids)), what, cfg.window_limit())


# ------------------------------------------------------------------------------------------------ aggregation


def aggregate(probs: np.ndarray, doc_ids: np.ndarray, kind: str, how: str) -> np.ndarray:
    """(W, C) window probabilities (softmax / sigmoid / raw value) and each window's document (W,) -> (D, C),
    row d for document d = 0..D-1. A document with one window keeps that window's row."""
    probs, doc_ids = np.asarray(probs), np.asarray(doc_ids)
    order = np.argsort(doc_ids, kind="stable")
    counts = np.bincount(doc_ids)
    if (counts == 0).any():
        raise ValueError(f"document {int(np.argmin(counts))} has no window")
    groups = np.split(probs[order], np.cumsum(counts)[:-1])
    return np.stack([combine(group, kind, how) for group in groups])


def combine(rows: np.ndarray, kind: str, how: str) -> np.ndarray:
    """One document's (W, C) window rows -> (C,).
    mean: the mean probability. max: per-label max (single-label: rescaled to sum to 1, so the argmax is the class
    any window is surest of). vote, single-label: (votes + mean probability) / (W + 1) — a distribution whose
    argmax is the majority class, ties going to the higher mean probability. vote, multi-label: the per-label
    median, which is at or above any threshold exactly when at least half the windows are (a per-label majority)."""
    if len(rows) == 1:
        return rows[0]
    if how == "mean":
        return rows.mean(0)
    if how == "max":
        top = rows.max(0)
        return top / top.sum() if kind == "single" else top
    if how == "vote" and kind == "single":
        votes = np.bincount(rows.argmax(-1), minlength=rows.shape[1])
        return (votes + rows.mean(0)) / (len(rows) + 1)
    if how == "vote" and kind == "multi":
        return np.median(rows, 0)
    raise BertkitError(f"long_doc.aggregate={how} does not apply to {kind} labels — use mean or max")


def first_windows(doc_ids: np.ndarray) -> np.ndarray:
    """Index of each document's first window, in document order: picks one label per document."""
    return np.unique(np.asarray(doc_ids), return_index=True)[1]


__all__ = ["ATTENTION_MAX_WINDOWS", "LongDocConfig", "Windows", "evenly_spaced", "plan_windows", "short_segment_keep",
           "covered", "with_special_tokens", "encode_documents", "warn_capped", "aggregate", "combine",
           "first_windows"]
