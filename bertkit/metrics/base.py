"""The offline `evaluate.Metric` base every bertkit metric subclasses (inputs kept in memory), and the input
checks that turn bad input into a one-line `BertkitError` before `evaluate` sees it."""

import datasets
import evaluate
import numpy as np

from bertkit.errors import BertkitError


# ----------------------------------------------------------------------------------------------------------------
# Input checks shared by the metrics and the plain helpers


def check_pair(predictions, references):
    """Both inputs given and one prediction per reference."""
    if predictions is None or references is None:
        raise BertkitError("metric needs both predictions= and references=: pass the two together")
    if len(predictions) != len(references):
        raise BertkitError(
            f"got {len(predictions)} predictions but {len(references)} references: pass one prediction per reference"
        )


def check_not_empty(predictions):
    """At least one example: every average over nothing is undefined."""
    if len(predictions) == 0:
        raise BertkitError("no examples to score: predictions and references are empty; evaluate on a non-empty set")


def check_ids_in_range(ids, num_labels, what):
    """An id past the end of `label_names` means the model and the label map disagree on the number of classes."""
    ids = np.asarray(ids)
    bad = ids[(ids < 0) | (ids >= num_labels)]
    if bad.size:
        raise BertkitError(
            f"{what} holds label id {int(bad[0])} but label_names has {num_labels} names: "
            f"pass one name per class id 0..{num_labels - 1}"
        )


def as_class_ids(values, what):
    """1-D int ids; a 2-D array here is almost always logits that were not argmax-ed."""
    values = np.asarray(values)
    if values.ndim != 1:
        raise BertkitError(
            f"{what} has shape {values.shape} but must hold one class id per example: take logits.argmax(-1) first"
        )
    return values.astype(np.int64)


def as_multi_hot(rows, what):
    """(N, L) array of 0/1; probabilities would be silently truncated to 0 by the int features, so refuse them."""
    try:
        array = np.asarray(rows, dtype=np.float64)
    except ValueError:
        raise BertkitError(f"{what} rows have different lengths: every row needs one 0/1 entry per label") from None
    if array.ndim != 2:
        raise BertkitError(f"{what} has shape {array.shape}: pass one multi-hot row (N, num_labels) per example")
    if not np.isin(array, (0.0, 1.0)).all():
        raise BertkitError(f"{what} holds values other than 0/1: threshold the probabilities first (probs >= t)")
    return array.astype(np.int64)


def as_scores(values, what):
    """One float per example; Trainer hands regression logits over as (N, 1)."""
    array = np.asarray(values, dtype=np.float64)
    if array.ndim == 2 and array.shape[1] == 1:
        array = array[:, 0]  # (N, 1) -> (N,)
    if array.ndim != 1:
        raise BertkitError(f"{what} has shape {array.shape}: regression needs one number per example")
    return array


# ----------------------------------------------------------------------------------------------------------------
# The shared base: in-memory storage and BertkitError on bad input


def metric_info(description, predictions, references, inputs_description):
    """The `evaluate.MetricInfo` of a metric: its docstring and the features of its two inputs."""
    return evaluate.MetricInfo(
        description=description,
        citation="",
        inputs_description="\n" + inputs_description,  # evaluate appends this to compute()'s docstring
        features=datasets.Features({"predictions": predictions, "references": references}),
    )


class OfflineMetric(evaluate.Metric):
    """Checks and normalises each batch before `evaluate` stores it, so users see `BertkitError`, not Arrow errors."""

    def __init__(self, keep_in_memory=True, **kwargs):
        # Metric inputs are small; in memory avoids cache files and lock files shared between processes.
        super().__init__(keep_in_memory=keep_in_memory, **kwargs)

    def compute(self, *, predictions=None, references=None, **kwargs):
        """Score the given predictions/references (plus any added with `add_batch`)."""
        if predictions is None and references is None and self.writer is None:
            raise BertkitError("nothing to score: pass predictions= and references=, or call add_batch() first")
        return super().compute(predictions=predictions, references=references, **kwargs)

    def add_batch(self, *, predictions=None, references=None, **kwargs):
        """Store one batch of predictions/references for a later `compute()`."""
        check_pair(predictions, references)
        if len(predictions):  # an empty batch is harmless; an empty total is caught in _compute
            predictions, references = self._prepare_batch(predictions, references)
        super().add_batch(predictions=predictions, references=references, **kwargs)

    def _prepare_batch(self, predictions, references):
        """Validate and reshape one batch; subclasses override."""
        return predictions, references


__all__ = [
    "check_pair",
    "check_not_empty",
    "check_ids_in_range",
    "as_class_ids",
    "as_multi_hot",
    "as_scores",
    "metric_info",
    "OfflineMetric",
]
