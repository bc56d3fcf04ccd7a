"""Sequence classification pieces shared by the classify recipe, `bertkit predict` and `bertkit evaluate`:
tokenization (real A/B segments for pairs, long documents as bertkit.long_docs says), logits -> labels and
probabilities (per document when documents became several windows), and the metrics of each label kind."""

from __future__ import annotations

import datasets
import numpy as np
import torch

from .data import ColumnMap, LabelSpace
from .long_docs import LongDocConfig, aggregate, encode_documents, first_windows, warn_capped
from .metrics import ClassificationMetric, MultiLabelMetric, RegressionMetric

# The dev metric that picks the best checkpoint, per label kind.
SELECTION_METRIC = {"single": "macro_f1", "multi": "micro_f1", "regression": "pearson"}
DEFAULT_THRESHOLD = 0.5


def encode_split(tokenizer, split, columns: ColumnMap, max_length: int, long_doc: LongDocConfig | None = None,
                 name: str = "train") -> datasets.Dataset:
    """Model rows of a split under the long-document strategy: input_ids, token_type_ids (real A/B segments for
    pairs), `labels` (each window carries its document's label) and `doc_id` (the row of the split it came from;
    drop it before the model sees the rows)."""
    long_doc = long_doc or LongDocConfig()
    pairs = list(split[columns.text_pair]) if columns.text_pair else None
    windows = encode_documents(tokenizer, list(split[columns.text]), pairs, max_length, long_doc)
    warn_capped(windows, long_doc, name)
    rows = {"input_ids": windows.input_ids, "token_type_ids": windows.token_type_ids,
            "doc_id": windows.doc_ids.tolist()}
    features = {"input_ids": datasets.List(datasets.Value("int32")),
                "token_type_ids": datasets.List(datasets.Value("int8")), "doc_id": datasets.Value("int64")}
    if "labels" in split.column_names:
        labels = list(split["labels"])
        rows["labels"] = [labels[i] for i in windows.doc_ids]
        features["labels"] = split.features["labels"]
    return datasets.Dataset.from_dict(rows, features=datasets.Features(features))


def probabilities(logits: np.ndarray, kind: str) -> np.ndarray:
    """Softmax for single-label, sigmoid per label for multi-label, the raw value for regression. (N, C) -> (N, C)."""
    logits = torch.as_tensor(np.asarray(logits, dtype=np.float32))
    if kind == "single":
        return logits.softmax(-1).numpy()
    if kind == "multi":
        return logits.sigmoid().numpy()
    return logits.numpy()


def decide(probs: np.ndarray, kind: str, threshold: float = DEFAULT_THRESHOLD) -> np.ndarray:
    """Class ids (single), multi-hot 0/1 rows (multi) or values (regression) from probabilities."""
    if kind == "single":
        return probs.argmax(-1)
    if kind == "multi":
        return (probs >= threshold).astype(np.int64)
    return probs.reshape(len(probs), -1)[:, 0]


def score(probs: np.ndarray, references, label_space: LabelSpace, threshold: float = DEFAULT_THRESHOLD) -> dict:
    """The metrics of the label kind, on predictions decided from `probs`."""
    predictions = decide(probs, label_space.kind, threshold)
    if label_space.kind == "single":
        return ClassificationMetric().compute(predictions=predictions, references=np.asarray(references),
                                              label_names=label_space.names)
    if label_space.kind == "multi":
        return MultiLabelMetric().compute(predictions=predictions, references=np.asarray(references).astype(int))
    return RegressionMetric().compute(predictions=predictions, references=np.asarray(references, dtype=float))


def document_probabilities(logits, doc_ids: np.ndarray | None, kind: str, how: str = "mean") -> np.ndarray:
    """(W, C) window logits -> (D, C) probabilities, one row per document (doc_ids None: a window per document)."""
    probs = probabilities(logits, kind)
    return probs if doc_ids is None else aggregate(probs, doc_ids, kind, how)


def compute_metrics_fn(label_space: LabelSpace, threshold: float = DEFAULT_THRESHOLD, doc_ids=None,
                       how: str = "mean"):
    """A Trainer `compute_metrics` for the label kind. With `doc_ids` (the document of each eval row, in the eval
    set's order, which the Trainer keeps) the window predictions are aggregated and scored per document."""

    def compute_metrics(eval_prediction):
        logits = eval_prediction.predictions
        logits = logits[0] if isinstance(logits, tuple) else logits
        references = np.asarray(eval_prediction.label_ids)
        if doc_ids is not None:
            if len(doc_ids) != len(logits):
                raise ValueError(f"{len(logits)} eval rows but {len(doc_ids)} window->document ids")
            references = references[first_windows(doc_ids)]
        probs = document_probabilities(logits, doc_ids, label_space.kind, how)
        return score(probs, references, label_space, threshold)

    return compute_metrics


def describe_prediction(probs_row: np.ndarray, label_space: LabelSpace, threshold: float) -> dict:
    """One output record: the label(s), the score, and every label's probability."""
    if label_space.kind == "regression":
        return {"score": float(probs_row.reshape(-1)[0])}
    named = {name: round(float(p), 6) for name, p in zip(label_space.names, probs_row)}
    if label_space.kind == "multi":
        chosen = [name for name, p in named.items() if p >= threshold]
        return {"labels": chosen, "probabilities": named}
    best = int(np.argmax(probs_row))
    return {"label": label_space.names[best], "score": round(float(probs_row[best]), 6), "probabilities": named}


__all__ = ["SELECTION_METRIC", "DEFAULT_THRESHOLD", "encode_split", "probabilities", "document_probabilities",
           "decide", "score", "compute_metrics_fn", "describe_prediction"]
