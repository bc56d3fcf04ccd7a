"""Masked-token accuracy and perplexity from evaluation predictions, scored at the labelled positions only."""

from __future__ import annotations

import math

import numpy as np

from bertkit.errors import BertkitError
from bertkit.tasks.mlm.masking import IGNORE_INDEX

CHUNK_ROWS = 1024  # positions whose log-softmax is computed at once (float64 over the vocabulary)


def masked_token_scores(logits: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Accuracy, mean negative log-likelihood (loss) and perplexity over the labelled positions. `logits` are the
    full (B, T, V) with `labels` (B, T), or a sparse head's (M, V) for the M labelled positions in row order."""
    labels = np.asarray(labels)
    chosen = labels != IGNORE_INDEX  # (B, T)
    targets = labels[chosen]  # (M,)
    logits = np.asarray(logits)
    logits = logits[chosen] if logits.ndim == 3 else logits  # (M, V)
    if len(targets) == 0:
        raise BertkitError("the evaluation set has no masked token — give it more text")
    nll, right = 0.0, 0
    for start in range(0, len(targets), CHUNK_ROWS):
        rows = logits[start:start + CHUNK_ROWS].astype(np.float64)  # (C, V)
        gold = targets[start:start + CHUNK_ROWS]  # (C,)
        top = rows.max(-1, keepdims=True)  # (C, 1)
        log_norm = top[:, 0] + np.log(np.exp(rows - top).sum(-1))  # (C,)
        nll += float((log_norm - rows[np.arange(len(gold)), gold]).sum())
        right += int((rows.argmax(-1) == gold).sum())
    loss = nll / len(targets)
    return {"accuracy": right / len(targets), "loss": loss, "perplexity": math.exp(min(loss, 700.0))}


def compute_metrics_fn():
    """The Trainer's compute_metrics for a masked LM: `masked_token_scores` of the MLM logits (the first of a
    pre-training model's two outputs) against the labels."""
    def compute_metrics(eval_pred) -> dict[str, float]:
        logits, labels = eval_pred.predictions, eval_pred.label_ids
        logits = logits[0] if isinstance(logits, (tuple, list)) else logits
        labels = labels[0] if isinstance(labels, (tuple, list)) else labels
        return masked_token_scores(logits, labels)
    return compute_metrics


__all__ = ["compute_metrics_fn", "masked_token_scores"]
