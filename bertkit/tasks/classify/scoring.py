"""Classification outputs: logits -> probabilities and labels (per document when documents became several windows),
the metrics of each label kind during training and on the final model, and one prediction as an output record."""

from __future__ import annotations

import numpy as np
import torch
import transformers

from bertkit.labels import LabelSpace
from bertkit.metrics import (ClassificationMetric, MultiLabelMetric, RegressionMetric, best_threshold,
                             classification_report_text, confusion_matrix_table)

from .long_docs import aggregate, first_windows

# The dev metric that picks the best checkpoint, per label kind.
SELECTION_METRIC = {"single": "macro_f1", "multi": "micro_f1", "regression": "pearson"}
DEFAULT_THRESHOLD = 0.5


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


class DevPredictions(transformers.TrainerCallback):
    """The dev logits and labels of each evaluation during training, by step: the final evaluation of the model a
    run keeps (its best checkpoint, or its last step) reuses them instead of one more pass over the dev set, which
    costs as much as an epoch's evaluation (a third of the evaluation time of a 2-epoch run)."""

    def __init__(self):
        self.pending, self.by_step = None, {}

    def record(self, logits, label_ids) -> None:  # from compute_metrics, which sees the predictions
        self.pending = (np.asarray(logits), np.asarray(label_ids))

    def on_evaluate(self, args, state, control, **kwargs):  # then the Trainer tells the step they belong to
        if self.pending is not None:
            self.by_step[state.global_step], self.pending = self.pending, None

    def of_final_model(self, trainer) -> tuple | None:
        """(logits, label_ids) of the weights the trainer holds after training, if an evaluation scored them."""
        step, best = trainer.state.global_step, trainer.state.best_model_checkpoint
        if trainer.args.load_best_model_at_end and best:
            step = int(str(best).rstrip("/").rsplit("-", 1)[-1])
        return self.by_step.get(step)


def compute_metrics_fn(label_space: LabelSpace, threshold: float = DEFAULT_THRESHOLD, doc_ids=None,
                       how: str = "mean", memory: DevPredictions | None = None):
    """A Trainer `compute_metrics` for the label kind. With `doc_ids` (the document of each eval row, in the eval
    set's order, which the Trainer keeps) the window predictions are aggregated and scored per document. With
    `memory` (also passed to the Trainer as a callback) each evaluation's predictions are kept for the final one."""

    def compute_metrics(eval_prediction):
        logits = eval_prediction.predictions
        logits = logits[0] if isinstance(logits, tuple) else logits
        references = np.asarray(eval_prediction.label_ids)
        if memory is not None:
            memory.record(logits, references)
        if doc_ids is not None:
            if len(doc_ids) != len(logits):
                raise ValueError(f"{len(logits)} eval rows but {len(doc_ids)} window->document ids")
            references = references[first_windows(doc_ids)]
        probs = document_probabilities(logits, doc_ids, label_space.kind, how)
        return score(probs, references, label_space, threshold)

    return compute_metrics


def final_evaluation(trainer, dev, doc_ids: np.ndarray, labels: LabelSpace, aggregate: str,
                     memory: DevPredictions | None = None):
    """Dev metrics of the final model, per document (window predictions aggregated); for multi-label, the threshold
    that maximises micro-F1 on dev first. Also the report files a single-label run writes beside its model. The
    predictions come from `memory` when an evaluation during training scored these very weights."""
    kept = memory.of_final_model(trainer) if memory is not None else None
    if kept is None:
        output = trainer.predict(dev, metric_key_prefix="eval")
        predictions = output.predictions[0] if isinstance(output.predictions, tuple) else output.predictions
        kept = (predictions, output.label_ids)
    probs = document_probabilities(kept[0], doc_ids, labels.kind, aggregate)
    references = np.asarray(kept[1])[first_windows(doc_ids)]
    threshold = DEFAULT_THRESHOLD
    if labels.kind == "multi":
        threshold = best_threshold(probs, references.astype(int))
    metrics = {**score(probs, references, labels, threshold), "documents": len(references)}
    files = {}
    if labels.kind == "single":
        predicted = probs.argmax(-1)
        files["classification_report.txt"] = classification_report_text(references, predicted, labels.names)
        files["confusion_matrix.json"] = confusion_matrix_table(references, predicted, labels.names)
    return metrics, threshold, files


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


__all__ = ["SELECTION_METRIC", "DEFAULT_THRESHOLD", "probabilities", "document_probabilities", "decide", "score",
           "DevPredictions", "compute_metrics_fn", "final_evaluation", "describe_prediction"]
