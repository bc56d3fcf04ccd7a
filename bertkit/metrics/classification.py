"""Classification metrics (single-label, multi-label, regression) and the plain helpers recipes print or
tune with: the per-class report, the confusion matrix, the multi-label decision threshold."""

import datasets
import numpy as np
from scipy import stats
from sklearn import metrics as skm

from bertkit.errors import BertkitError

from .base import (
    OfflineMetric,
    as_class_ids,
    as_multi_hot,
    as_scores,
    check_ids_in_range,
    check_not_empty,
    check_pair,
    metric_info,
)


# ----------------------------------------------------------------------------------------------------------------
# Single-label classification


def _resolve_labels(references, predictions, labels, label_names):
    """The class ids to score: `labels` if given, else one per name, else whatever occurs (sklearn's default)."""
    if labels is not None and label_names is not None and len(labels) != len(label_names):
        raise BertkitError(f"got {len(labels)} labels but {len(label_names)} label_names: pass one name per label id")
    if labels is not None:
        return list(labels)
    if label_names is None:
        return None
    check_ids_in_range(references, len(label_names), "references")
    check_ids_in_range(predictions, len(label_names), "predictions")
    return list(range(len(label_names)))


def _f1(y_true, y_pred, average, labels=None):
    # zero_division=0: a class never predicted scores 0 instead of warning on every eval step
    return float(skm.f1_score(y_true, y_pred, labels=labels, average=average, zero_division=0))


def _averaged_scores(y_true, y_pred, labels):
    macro = dict(labels=labels, average="macro", zero_division=0)
    return {
        "accuracy": float(skm.accuracy_score(y_true, y_pred)),
        "macro_f1": _f1(y_true, y_pred, "macro", labels),
        "micro_f1": _f1(y_true, y_pred, "micro", labels),
        "weighted_f1": _f1(y_true, y_pred, "weighted", labels),
        "mcc": float(skm.matthews_corrcoef(y_true, y_pred)),
        "macro_precision": float(skm.precision_score(y_true, y_pred, **macro)),
        "macro_recall": float(skm.recall_score(y_true, y_pred, **macro)),
    }


# Per-class outputs stay bounded in the number of classes (5,000 classes once made a 225 MB confusion_matrix.json):
# up to PER_CLASS_LIMIT classes everything is per class; past it, metrics keep the PER_CLASS_SHOWN classes with the
# most dev examples, and the confusion matrix becomes a list of the TOP_CONFUSIONS largest off-diagonal cells.
# classification_report.txt keeps one line per class (linear, about 60 bytes a class).
PER_CLASS_LIMIT = 100
PER_CLASS_SHOWN = 20
TOP_CONFUSIONS = 100


def most_supported(support, shown: int = PER_CLASS_SHOWN) -> list[int]:
    """Indices of the `shown` largest supports, largest first (ties: lower index first)."""
    support = np.asarray(support)
    return [int(i) for i in np.lexsort((np.arange(len(support)), -support))[:shown]]


def _per_class_scores(y_true, y_pred, labels, label_names):
    precision, recall, f1, support = skm.precision_recall_fscore_support(
        y_true, y_pred, labels=labels, average=None, zero_division=0
    )
    kept = range(len(label_names))
    if len(label_names) > PER_CLASS_LIMIT:  # the classes with the most examples, in that order
        kept = most_supported(support[: len(label_names)])
    scores = {}
    for i in kept:
        name = label_names[i]
        scores.update({f"f1_{name}": float(f1[i]), f"precision_{name}": float(precision[i]),
                       f"recall_{name}": float(recall[i])})
    return scores


class ClassificationMetric(OfflineMetric):
    """Single-label classification: accuracy, micro/macro/weighted F1, MCC, macro precision/recall.

    compute(predictions=ids, references=ids, labels=None, label_names=None): `labels` restricts the averaged
    scores to those class ids; `label_names` (one per id, in id order) adds f1_/precision_/recall_<name> (past
    PER_CLASS_LIMIT classes, for the PER_CLASS_SHOWN classes with the most references only).
    """

    def _info(self):
        return metric_info(
            self.__doc__,
            datasets.Value("int64"),
            datasets.Value("int64"),
            "predictions, references: one class id per example.",
        )

    def _prepare_batch(self, predictions, references):
        return as_class_ids(predictions, "predictions"), as_class_ids(references, "references")

    def _compute(self, predictions, references, labels=None, label_names=None):
        check_not_empty(predictions)
        labels = _resolve_labels(references, predictions, labels, label_names)
        scores = _averaged_scores(references, predictions, labels)
        if label_names is not None:
            scores.update(_per_class_scores(references, predictions, labels, label_names))
        return scores


# ----------------------------------------------------------------------------------------------------------------
# Multi-label classification


class MultiLabelMetric(OfflineMetric):
    """Multi-label classification on 0/1 multi-hot rows: micro/macro/samples F1, subset accuracy, Hamming loss."""

    def _info(self):
        return metric_info(
            self.__doc__,
            datasets.List(datasets.Value("int8")),
            datasets.List(datasets.Value("int8")),
            "predictions, references: one 0/1 row of length num_labels per example.",
        )

    def _prepare_batch(self, predictions, references):
        return as_multi_hot(predictions, "predictions"), as_multi_hot(references, "references")

    def _compute(self, predictions, references):
        check_not_empty(predictions)
        y_pred, y_true = as_multi_hot(predictions, "predictions"), as_multi_hot(references, "references")
        if y_pred.shape != y_true.shape:  # batches added separately may disagree on width
            raise BertkitError(f"predictions are {y_pred.shape} but references {y_true.shape}: use one label set")
        return {
            "micro_f1": _f1(y_true, y_pred, "micro"),
            "macro_f1": _f1(y_true, y_pred, "macro"),
            "samples_f1": _f1(y_true, y_pred, "samples"),
            "subset_accuracy": float(skm.accuracy_score(y_true, y_pred)),
            "hamming_loss": float(skm.hamming_loss(y_true, y_pred)),
        }


# ----------------------------------------------------------------------------------------------------------------
# Regression


def _correlation(correlate, x, y):
    """A constant input has no correlation; scipy would warn and return nan, which breaks best-model selection."""
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return 0.0
    return float(correlate(x, y).statistic)


class RegressionMetric(OfflineMetric):
    """Regression: Pearson and Spearman correlation (0.0 when either side is constant), MSE, MAE."""

    def _info(self):
        return metric_info(
            self.__doc__,
            datasets.Value("float64"),
            datasets.Value("float64"),
            "predictions, references: one number per example ((N, 1) arrays are flattened).",
        )

    def _prepare_batch(self, predictions, references):
        return as_scores(predictions, "predictions"), as_scores(references, "references")

    def _compute(self, predictions, references):
        check_not_empty(predictions)
        y_pred, y_true = np.asarray(predictions, np.float64), np.asarray(references, np.float64)
        return {
            "pearson": _correlation(stats.pearsonr, y_pred, y_true),
            "spearman": _correlation(stats.spearmanr, y_pred, y_true),
            "mse": float(skm.mean_squared_error(y_true, y_pred)),
            "mae": float(skm.mean_absolute_error(y_true, y_pred)),
        }

# ----------------------------------------------------------------------------------------------------------------
# Plain helpers for recipes


def classification_report_text(y_true, y_pred, label_names):
    """sklearn's per-class precision/recall/F1 table as text, one row per name in id order."""
    check_pair(y_pred, y_true)
    check_not_empty(y_pred)
    for values, what in ((y_true, "y_true"), (y_pred, "y_pred")):
        check_ids_in_range(as_class_ids(values, what), len(label_names), what)
    return skm.classification_report(
        y_true, y_pred, labels=list(range(len(label_names))), target_names=list(label_names), digits=4, zero_division=0
    )


def confusion_matrix_table(y_true, y_pred, label_names, top: int = TOP_CONFUSIONS):
    """Up to PER_CLASS_LIMIT classes: {"labels": names, "matrix": counts}, matrix[i][j] = examples of true class i
    predicted as class j. Past it, a sparse form that never holds a classes x classes table: {"format": "sparse",
    "classes", "examples", "correct" (the diagonal's sum), "confusions": the `top` largest off-diagonal cells as
    {"true", "predicted", "count"}, largest first, "other_confusions" (the wrong predictions not listed)}."""
    check_pair(y_pred, y_true)
    check_not_empty(y_pred)
    for values, what in ((y_true, "y_true"), (y_pred, "y_pred")):
        check_ids_in_range(as_class_ids(values, what), len(label_names), what)
    if len(label_names) <= PER_CLASS_LIMIT:
        matrix = skm.confusion_matrix(y_true, y_pred, labels=list(range(len(label_names))))
        return {"labels": [str(name) for name in label_names], "matrix": matrix.tolist()}
    gold, predicted = as_class_ids(y_true, "y_true"), as_class_ids(y_pred, "y_pred")
    wrong = gold != predicted
    cells, counts = np.unique(gold[wrong].astype(np.int64) * len(label_names) + predicted[wrong], return_counts=True)
    order = np.lexsort((cells, -counts))[:top]
    confusions = [{"true": str(label_names[int(cells[i]) // len(label_names)]),
                   "predicted": str(label_names[int(cells[i]) % len(label_names)]), "count": int(counts[i])}
                  for i in order]
    return {"format": "sparse", "classes": len(label_names), "examples": int(len(gold)),
            "correct": int((~wrong).sum()), "confusions": confusions,
            "other_confusions": int(wrong.sum()) - sum(entry["count"] for entry in confusions)}


_THRESHOLD_GRID = np.round(np.arange(0.05, 0.951, 0.05), 2)  # 0.05, 0.10, ..., 0.95


def _check_probabilities(probs, refs):
    probs = np.asarray(probs, dtype=np.float64)
    if probs.shape != refs.shape:
        raise BertkitError(f"probs are {probs.shape} but multi_hot_refs {refs.shape}: pass one row per example")
    if probs.min() < 0 or probs.max() > 1:
        raise BertkitError("probs must lie in [0, 1]: apply a sigmoid to the logits first")
    return probs


def best_threshold(probs, multi_hot_refs, grid=None):
    """The one decision threshold (positive when prob >= t) with the best micro-F1 on held-out data.

    `grid` defaults to 0.05, 0.10, ..., 0.95; among equally good thresholds the one closest to 0.5 wins (then the
    lower one), so a flat F1 curve keeps the usual default.
    """
    check_pair(probs, multi_hot_refs)
    check_not_empty(probs)
    refs = as_multi_hot(multi_hot_refs, "multi_hot_refs")
    probs = _check_probabilities(probs, refs)
    grid = _THRESHOLD_GRID if grid is None else np.asarray(grid, dtype=np.float64)
    if grid.size == 0:
        raise BertkitError("grid is empty: pass at least one threshold, or grid=None for 0.05..0.95")
    f1 = np.array([skm.f1_score(refs, (probs >= t).astype(np.int64), average="micro", zero_division=0) for t in grid])
    tied_best = grid[np.isclose(f1, f1.max())]
    # Rounding the distance keeps float noise (0.45 vs 0.55) from breaking the tie arbitrarily.
    return float(min(tied_best, key=lambda t: (round(abs(t - 0.5), 9), t)))


__all__ = [
    "ClassificationMetric",
    "MultiLabelMetric",
    "RegressionMetric",
    "classification_report_text",
    "confusion_matrix_table",
    "best_threshold",
    "most_supported",
    "PER_CLASS_LIMIT",
    "PER_CLASS_SHOWN",
    "TOP_CONFUSIONS",
]
