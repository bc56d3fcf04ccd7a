"""One split read, its columns found, its texts checked and its labels encoded (`load_split`)."""

from __future__ import annotations

import functools
from typing import Literal, Mapping

import datasets

from bertkit.errors import BertkitError

from .columns import ColumnMap, is_string_feature, resolve_columns
from .labels import LabelKind, LabelSpace, check_missing_labels, column_label_space
from .readers import read_table
from .rows import carry_rows, column_values, row_location


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


__all__ = ["check_texts", "load_split"]
