"""Sequence classification pieces shared by the classify recipe, `bertkit predict` and `bertkit evaluate`:
tokenization (real A/B segments for pairs), logits -> labels and probabilities, and the metrics of each label kind."""

from __future__ import annotations

import numpy as np
import torch

from .data import ColumnMap, LabelSpace
from .metrics import ClassificationMetric, MultiLabelMetric, RegressionMetric

# The dev metric that picks the best checkpoint, per label kind.
SELECTION_METRIC = {"single": "macro_f1", "multi": "micro_f1", "regression": "pearson"}
DEFAULT_THRESHOLD = 0.5


def tokenize_function(tokenizer, columns: ColumnMap, max_length: int):
    """For `datasets.map(batched=True)`: a sentence pair becomes segments A and B (token_type_ids 0 / 1), and
    truncation trims the longer segment first."""

    def tokenize(batch):
        pairs = batch[columns.text_pair] if columns.text_pair else None
        encoded = tokenizer(batch[columns.text], pairs, truncation=True, max_length=max_length)
        if "labels" in batch:
            encoded["labels"] = batch["labels"]
        return encoded

    return tokenize


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


def compute_metrics_fn(label_space: LabelSpace, threshold: float = DEFAULT_THRESHOLD):
    """A Trainer `compute_metrics` for the label kind."""

    def compute_metrics(eval_prediction):
        logits = eval_prediction.predictions
        logits = logits[0] if isinstance(logits, tuple) else logits
        return score(probabilities(logits, label_space.kind), eval_prediction.label_ids, label_space, threshold)

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


__all__ = ["SELECTION_METRIC", "DEFAULT_THRESHOLD", "tokenize_function", "probabilities", "decide", "score",
           "compute_metrics_fn", "describe_prediction"]
