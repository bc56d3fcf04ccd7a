"""Classification files -> model rows: read a split (texts, pairs, labels), tokenize it under the long-document
strategy (real A/B segments for pairs), and split off the window -> document column before the model sees the rows."""

from __future__ import annotations

import datasets
import numpy as np

from bertkit.datafiles import ColumnMap
from bertkit.labels import LabelSpace
from bertkit.splits import load_split

from .long_docs import LongDocConfig, Windows, encode_documents, first_windows, warn_capped


def read_examples(path: str, columns: dict | None = None, labels: LabelSpace | None = None, require_label: bool = True,
                  label_kind: str = "auto", delimiter: str = ";") -> tuple[datasets.Dataset, ColumnMap, LabelSpace]:
    """A classification file as (examples, its columns, the label space): `columns` overrides text_column /
    text_pair_column / label_column; labels are encoded by `labels` (the training split's; None: built from this
    file, of `label_kind`, several in one cell split at `delimiter`)."""
    return load_split(path, columns, labels, require_label, label_kind=label_kind, delimiter=delimiter)


def encode(tokenizer, split, columns: ColumnMap, max_length: int, long_doc: LongDocConfig | None = None,
           name: str = "train") -> datasets.Dataset:
    """Model rows of a split under the long-document strategy: input_ids, token_type_ids (real A/B segments for
    pairs), `labels` (each window carries its document's label) and `doc_id` (the row of the split it came from;
    drop it before the model sees the rows). Under long_doc.aggregate=attention a row is a document: input_ids and
    token_type_ids hold its windows, and doc_id is the row's own index."""
    long_doc = long_doc or LongDocConfig()
    pairs = list(split[columns.text_pair]) if columns.text_pair else None
    windows = encode_documents(tokenizer, list(split[columns.text]), pairs, max_length, long_doc)
    warn_capped(windows, long_doc, name)
    if long_doc.strategy == "chunk" and long_doc.aggregate == "attention":
        rows, features = document_rows(windows)
    else:
        rows, features = window_rows(windows)
    if "labels" in split.column_names:
        labels = list(split["labels"])
        rows["labels"] = [labels[i] for i in rows["doc_id"]]
        features["labels"] = split.features["labels"]
    return datasets.Dataset.from_dict(rows, features=datasets.Features(features))


def window_rows(windows: Windows) -> tuple[dict, dict]:
    """One row per window, with the document it came from."""
    rows = {"input_ids": windows.input_ids, "token_type_ids": windows.token_type_ids,
            "doc_id": windows.doc_ids.tolist()}
    features = {"input_ids": datasets.List(datasets.Value("int32")),
                "token_type_ids": datasets.List(datasets.Value("int8")), "doc_id": datasets.Value("int64")}
    return rows, features


def document_rows(windows: Windows) -> tuple[dict, dict]:
    """One row per document holding its windows (aggregate=attention: the model pools them; DocumentCollator
    flattens a batch's windows). Its doc_id is its own index, so per-document scoring needs no aggregation."""
    bounds = [*first_windows(windows.doc_ids).tolist(), len(windows.doc_ids)]  # a document's windows are adjacent
    spans = list(zip(bounds, bounds[1:]))
    rows = {"input_ids": [windows.input_ids[a:b] for a, b in spans],
            "token_type_ids": [windows.token_type_ids[a:b] for a, b in spans], "doc_id": list(range(len(spans)))}
    features = {"input_ids": datasets.List(datasets.List(datasets.Value("int32"))),
                "token_type_ids": datasets.List(datasets.List(datasets.Value("int8"))),
                "doc_id": datasets.Value("int64")}
    return rows, features


def pop_doc_ids(split):
    """The split without its doc_id column (the model must not see it), and the column as an array."""
    return (split.remove_columns("doc_id"), np.asarray(split["doc_id"])) if split is not None else (None, None)


__all__ = ["read_examples", "encode", "window_rows", "document_rows", "pop_doc_ids"]
