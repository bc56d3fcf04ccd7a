"""Long documents for sequence classification: which tokens of a document the model sees, and how the predictions
of a document's windows become one prediction per document.

    strategy    what each document becomes (positions count text tokens; `room` = how many fit in one row)
    head        [CLS] first room tokens [SEP]                   plain truncation, one row per document (default)
    tail        [CLS] last room tokens [SEP]                    one row
    head_tail   [CLS] first head_tokens + last (room - head_tokens) [SEP]   one row (Sun et al. 2019: 128 + 382)
    chunk       windows of room tokens overlapping by `stride`  several rows, each with its document's label;
                window predictions are aggregated per document (mean | max | vote), or (aggregate=attention)
                one row per document holding its windows, pooled by learned attention inside the model
                (bertkit/modeling_document.py; the last section here)

Sentence pairs: the strategy applies to the longer segment; the shorter one is kept whole in every row when it takes
at most half the room, else cut to half the room (the rule of the tokenizer's `longest_first`). The windows are the
fast tokenizer's `return_overflowing_tokens=True, stride=...` windows (tests/test_long_docs.py checks they agree),
built here from the full token ids by `sliding_windows`, the one rule long documents and NER's long sentences are cut
by, so that every strategy, the max_windows cap and `bertkit inspect` share one plan.

long_doc.aggregate=attention: documents, not windows, are the rows. Training batches flatten the windows of their
documents into one encoder batch (DocumentCollator); predict / evaluate encode windows in token-budget batches under
no_grad and pool each document's window vectors afterwards (`document_logits`), so a long document never needs all
its windows in one encoder call. The model is bertkit.modeling_document.BertkitForDocumentClassification.

Memory: per_device_train_batch_size counts documents, and each keeps at most long_doc.max_windows windows
(ATTENTION_MAX_WINDOWS = 16 when null): one training step runs up to batch x that many windows of max_length tokens
through the encoder with their activations kept, e.g. 16 x 16 x 128 tokens = 32k tokens.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Literal

import numpy as np

from bertkit.errors import BertkitError

if TYPE_CHECKING:
    from bertkit.modeling_document import BertkitForDocumentClassification

# torch and the document model are imported by the three functions of aggregate=attention that use them: LongDocConfig
# is part of the classify recipe's config, which `bertkit validate` checks without loading the model stack

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




# ------------------------------------------------------------------------------------------------ sliding windows


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



# ------------------------------------------------------------------------------------------------ aggregate=attention


def uses_attention(long_doc: LongDocConfig) -> bool:
    """Whether documents are rows of windows pooled by the model (chunk windows, aggregate=attention)."""
    return long_doc.strategy == "chunk" and long_doc.aggregate == "attention"


@dataclass
class DocumentCollator:
    """Document rows (input_ids / token_type_ids: lists of windows) -> one batch: every window of the batch's
    documents flattened and padded, `document_ids` (W,) = each window's document 0..D-1, labels stacked (D,)|(D, C)."""
    tokenizer: Any

    def __call__(self, features: list[dict]) -> dict:
        import torch

        windows = [{"input_ids": ids, "token_type_ids": types} for feature in features
                   for ids, types in zip(feature["input_ids"], feature["token_type_ids"])]
        batch = dict(self.tokenizer.pad(windows, return_tensors="pt"))
        counts = torch.tensor([len(feature["input_ids"]) for feature in features])
        batch["document_ids"] = torch.repeat_interleave(torch.arange(len(features)), counts)
        if "labels" in features[0]:
            batch["labels"] = torch.tensor([feature["labels"] for feature in features])
        return batch


def is_document_model(model) -> bool:
    """A model that pools windows itself (also under int8 quantization, which keeps the class)."""
    from bertkit.modeling_document import BertkitForDocumentClassification

    return isinstance(model, BertkitForDocumentClassification)


def document_logits(model: BertkitForDocumentClassification, tokenizer, features: list[dict], doc_ids: np.ndarray,
                    max_tokens: int, max_rows: int, advance: Callable[[int], None] | None = None) -> np.ndarray:
    """(D, C) logits of the documents whose windows are `features` (window i of document doc_ids[i]): the windows
    run through the encoder in length-sorted batches of at most max_tokens padded tokens, their pooled vectors are
    gathered in input order, then each document's vectors are pooled by the model's attention."""
    import torch

    from bertkit.inference import token_budget_batches

    vectors = [None] * len(features)
    with torch.inference_mode():
        for indices in token_budget_batches([len(f["input_ids"]) for f in features], max_tokens, max_rows):
            padded = tokenizer.pad([features[i] for i in indices], return_tensors="pt")
            pooled = model.window_vectors(**{key: value.to(model.device) for key, value in padded.items()})
            for row, index in enumerate(indices):
                vectors[index] = pooled[row]
            if advance is not None:
                advance(len(indices))
        document_ids = torch.as_tensor(np.asarray(doc_ids), dtype=torch.long, device=model.device)
        return model.classify_windows(torch.stack(vectors), document_ids).logits.float().cpu().numpy()



__all__ = ["ATTENTION_MAX_WINDOWS", "LongDocConfig", "sliding_windows", "Windows", "evenly_spaced", "plan_windows",
           "short_segment_keep", "covered", "with_special_tokens", "encode_documents", "warn_capped", "aggregate",
           "combine", "first_windows", "uses_attention", "DocumentCollator", "is_document_model", "document_logits"]
