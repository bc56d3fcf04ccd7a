"""A look at the data before training (`bertkit inspect`): empty and duplicate texts, conflicting labels, and
train/dev overlap."""

from __future__ import annotations

from collections import Counter
from typing import Any

import datasets

from .columns import ColumnMap
from .messages import clip
from .rows import column_values


def _text_keys(dataset: datasets.Dataset, columns: ColumnMap) -> list[tuple]:
    """Each row's text (and pair) exactly as written: what a duplicate or a train/dev leak is judged by."""
    texts = column_values(dataset, columns.text)
    pairs = column_values(dataset, columns.text_pair) if columns.text_pair else [None] * len(texts)
    return list(zip(texts, pairs))


def _is_empty(key: tuple) -> bool:
    return key[0] is None or not str(key[0]).strip() or (key[1] is not None and not str(key[1]).strip())


def _show_key(key: tuple) -> str:
    return clip(key[0]) if key[1] is None else f"{clip(key[0], 30)} ||| {clip(key[1], 30)}"


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _split_report(dataset: datasets.Dataset, columns: ColumnMap, examples: int) -> tuple[dict, Counter]:
    keys = _text_keys(dataset, columns)
    counts = Counter(key for key in keys if not _is_empty(key))
    repeated = [key for key, count in counts.items() if count > 1]
    report = {
        "rows": len(keys),
        "empty_texts": sum(map(_is_empty, keys)),
        "duplicate_texts": sum(counts[key] - 1 for key in repeated),  # the extra copies, not the distinct texts
        "duplicate_examples": [_show_key(key) for key in repeated[:examples]],
    }
    label = columns.label if columns.label in dataset.column_names else None
    if label:  # the same text with two different labels: noise the model cannot learn
        seen: dict[tuple, set] = {}
        for key, value in zip(keys, column_values(dataset, label)):
            if key in counts and counts[key] > 1:
                seen.setdefault(key, set()).add(_hashable(value))
        report["conflicting_labels"] = sum(len(labels) > 1 for labels in seen.values())
    return report, counts


def duplicate_and_overlap_report(
    train: datasets.Dataset, dev: datasets.Dataset | None, columns: ColumnMap, examples: int = 3
) -> dict:
    """Counts for `bertkit inspect`: per split rows / empty texts / duplicate texts (extra copies) / texts with
    conflicting labels, and how many dev rows have a text that is also in train (a leak that inflates dev scores)."""
    train_report, train_counts = _split_report(train, columns, examples)
    report = {"train": train_report, "dev": None, "train_dev_overlap": 0, "overlap_examples": []}
    if dev is not None:
        report["dev"], _ = _split_report(dev, columns, examples)
        leaked = [key for key in _text_keys(dev, columns) if key in train_counts]
        report["train_dev_overlap"] = len(leaked)
        report["overlap_examples"] = [_show_key(key) for key in list(dict.fromkeys(leaked))[:examples]]
    return report


__all__ = ["duplicate_and_overlap_report"]
