"""A split of the data made ready for training, and a look at it first.

    load_split("train.csv", {}, None, True)         -> the dataset read, its ColumnMap and LabelSpace, and an
                                                       encoded `labels` column

`load_split` reads a split (`bertkit.datafiles.read_table`), finds its columns, checks its texts and encodes its
labels (`bertkit.labels`); a bad row raises, no row is ever dropped. `duplicate_and_overlap_report` is what
`bertkit inspect` shows before training: empty and duplicate texts, conflicting labels, and train/dev overlap.
"""

from __future__ import annotations

import functools
from collections import Counter
from typing import Any, Literal, Mapping

import datasets

from bertkit.errors import BertkitError

from .datafiles import (
    ColumnMap,
    carry_rows,
    clip,
    column_values,
    is_string_feature,
    read_table,
    resolve_columns,
    row_location,
)
from .labels import LabelKind, LabelSpace, check_missing_labels, column_label_space


# ----------------------------------------------------------------------------------------------------------------
# One split read, its columns found, its texts checked and its labels encoded (`load_split`)


def check_texts(dataset: datasets.Dataset, columns: ColumnMap, source: str) -> None:
    """Refuse a row whose text (or text pair) is missing, empty or only whitespace: it would train on nothing."""
    for column in (columns.text, columns.text_pair):
        if column is None:
            continue
        for index, value in enumerate(column_values(dataset, column)):
            if value is None or (isinstance(value, str) and not value.strip()):
                raise BertkitError(
                    f"{source} {row_location(dataset, index)}: column '{column}' is empty — fill in the text or "
                    f"delete the row"
                )


def _texts_as_strings(dataset: datasets.Dataset, columns: ColumnMap, source: str) -> datasets.Dataset:
    """A text column of numbers (a CSV of numeric codes) becomes strings for the tokenizer; lists are refused."""
    for column in (columns.text, columns.text_pair):
        feature = dataset.features[column] if column else None
        if feature is None or is_string_feature(feature):
            continue
        if not isinstance(feature, datasets.Value):
            raise BertkitError(
                f"column '{column}' of {source} holds lists or objects, not text — point data.text_column "
                f"(or data.text_pair_column) at a column of strings"
            )
        dataset = carry_rows(dataset, dataset.cast_column(column, datasets.Value("string")))
    return dataset


_OVERRIDE_KEYS = {"text": "text", "text_column": "text", "text_pair": "text_pair", "text_pair_column": "text_pair",
                  "label": "label", "label_column": "label"}  # fmt: skip


def _column_overrides(overrides: Mapping[str, str | None] | None) -> dict[str, str]:
    chosen = {}
    for key, name in (overrides or {}).items():
        if key not in _OVERRIDE_KEYS:
            raise BertkitError(f"unknown column setting '{key}' — use text_column, text_pair_column or label_column")
        if name:
            chosen[_OVERRIDE_KEYS[key]] = name
    return chosen


def _raw_labels(dataset: datasets.Dataset, column: str) -> tuple[list, list[str] | None]:
    """The label values, with ClassLabel ids (Hub datasets) turned back into their names; also those names in
    the dataset's own order, which is the mapping its authors intended."""
    feature, values = dataset.features[column], column_values(dataset, column)
    inner = getattr(feature, "feature", None)
    if isinstance(feature, datasets.ClassLabel):
        names = feature.names  # -1 (the unlabeled test split of GLUE-style datasets) is no label
        return [names[v] if v is not None and 0 <= v < len(names) else None for v in values], names
    if isinstance(inner, datasets.ClassLabel):
        return [[inner.names[v] for v in row] if row is not None else None for row in values], inner.names
    return values, None


_LABEL_FEATURES = {
    "single": datasets.Value("int64"),
    "multi": datasets.List(datasets.Value("float32")),
    "regression": datasets.Value("float32"),
}


def load_split(
    path: str,
    columns_override: Mapping[str, str | None] | None = None,
    label_space: LabelSpace | None = None,
    require_label: bool = True,
    *,
    split: str = "train",
    label_kind: LabelKind | Literal["auto"] = "auto",
    delimiter: str = ";",
) -> tuple[datasets.Dataset, ColumnMap, LabelSpace | None]:
    """Read a split, find its columns, check its texts and add an encoded `labels` column.

    `columns_override` takes text_column / text_pair_column / label_column (None = detect). Without a
    `label_space` one is built from this split (pass the training split's to the dev split). A bad row raises;
    no row is ever dropped. When the label column is itself called `labels`, the encoded column replaces it.
    With `require_label=False` (prediction) a label column is still found, so it is never taken for the text,
    but it is left as it is: no `labels` column, and the label space is returned unchanged.
    """
    dataset = read_table(path, split)
    overrides = _column_overrides(columns_override)
    columns = resolve_columns(dataset.features, path, **overrides, require_label=require_label)
    dataset = _texts_as_strings(dataset, columns, path)
    check_texts(dataset, columns, path)
    if columns.label is None or not require_label:  # predicting must not fail on a label the model never saw
        return dataset, columns, label_space
    values, class_names = _raw_labels(dataset, columns.label)
    if label_space is None:
        label_space = column_label_space(values, columns.label, class_names, label_kind, delimiter, path,
                                        functools.partial(row_location, dataset))
    check_missing_labels(values, label_space.kind, dataset, path)
    encoded = [label_space.encode(value, path, row_location(dataset, i)) for i, value in enumerate(values)]
    base = dataset.remove_columns("labels") if "labels" in dataset.column_names else dataset
    labeled = base.add_column("labels", encoded, feature=_LABEL_FEATURES[label_space.kind])
    return carry_rows(dataset, labeled), columns, label_space


# ----------------------------------------------------------------------------------------------------------------
# A look at the data before training (`bertkit inspect`): empty and duplicate texts, conflicting labels, and
# train/dev overlap


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


__all__ = ["check_texts", "load_split", "duplicate_and_overlap_report"]
