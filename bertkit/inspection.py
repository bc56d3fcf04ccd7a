"""`bertkit inspect`: a look at a dataset before training — labels, lengths in tokens, truncation, unknown tokens,
empty and duplicate rows, train/dev overlap."""

from __future__ import annotations

from collections import Counter

import numpy as np

from .checkpoints import DEFAULT_MODEL, load_tokenizer, resolve_model
from .data import duplicate_and_overlap_report, load_split, read_table, resolve_columns


def label_distribution(dataset, labels) -> dict[str, int]:
    if labels is None or labels.kind == "regression":
        return {}
    counts = Counter()
    for value in list(dataset["labels"]):
        if labels.kind == "single":
            counts[labels.names[value]] += 1
        else:
            counts.update(name for name, hot in zip(labels.names, value) if hot)
    return {name: counts[name] for name in labels.names}


def token_lengths(tokenizer, texts: list[str], pairs: list[str] | None) -> np.ndarray:
    """Full length of each example in tokens, special tokens included, before any truncation."""
    encoded = tokenizer(texts, pairs, truncation=False, verbose=False)["input_ids"]
    return np.array([len(ids) for ids in encoded])


def unknown_rate(tokenizer, texts: list[str]) -> float:
    encoded = tokenizer(texts, add_special_tokens=False, truncation=False, verbose=False)["input_ids"]
    total = sum(len(ids) for ids in encoded)
    unknown = sum(ids.count(tokenizer.unk_token_id) for ids in encoded)
    return unknown / max(total, 1)


def length_summary(lengths: np.ndarray, max_length: int) -> dict:
    return {
        "min": int(lengths.min()), "median": int(np.median(lengths)), "p90": int(np.percentile(lengths, 90)),
        "p99": int(np.percentile(lengths, 99)), "max": int(lengths.max()),
        "over_max_length": float((lengths > max_length).mean()),
        "tokens_kept_by_truncation": float(np.minimum(lengths, max_length).sum() / lengths.sum()),
    }


def inspect_data(train_path: str, dev_path: str | None = None, model: str = DEFAULT_MODEL, max_length: int = 128,
                 column_overrides: dict | None = None) -> dict:
    """The report `bertkit inspect` prints, as a dict."""
    has_labels = resolve_columns(read_table(train_path).column_names, train_path, require_label=False).label is not None
    train, columns, labels = load_split(train_path, column_overrides, None, require_label=has_labels)
    dev = load_split(dev_path, column_overrides, labels, require_label=has_labels)[0] if dev_path else None
    tokenizer = load_tokenizer(resolve_model(model))
    texts = list(train[columns.text])
    pairs = list(train[columns.text_pair]) if columns.text_pair else None
    lengths = token_lengths(tokenizer, texts, pairs)
    return {
        "file": train_path, "rows": len(train),
        "columns": {"text": columns.text, "text_pair": columns.text_pair, "label": columns.label},
        "label_kind": labels.kind if labels else None,
        "labels": label_distribution(train, labels),
        "tokens": length_summary(lengths, max_length),
        "unknown_token_rate": unknown_rate(tokenizer, texts + (pairs or [])),
        "quality": duplicate_and_overlap_report(train, dev, columns),
    }


__all__ = ["inspect_data", "label_distribution", "token_lengths", "unknown_rate", "length_summary"]
