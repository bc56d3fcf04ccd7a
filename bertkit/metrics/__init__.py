"""Offline metrics: classification, multi-label, regression, NER entity F1 and SQuAD / CMRC answer EM/F1.

`evaluate.load("accuracy")` fetches a script from the Hub and fails offline, so every metric here is an
`evaluate.Metric` subclass that is instantiated directly and computes with scikit-learn, scipy or seqeval:

    ClassificationMetric().compute(predictions=logits.argmax(-1), references=labels, label_names=names)

Each metric keeps its inputs in memory (no cache files under ~/.cache) and turns bad input (mismatched lengths,
nothing to score, logits where ids belong) into a one-line `BertkitError` before `evaluate` sees it.
"""

from bertkit.errors import BertkitError

from .classification import (
    ClassificationMetric,
    MultiLabelMetric,
    RegressionMetric,
    best_threshold,
    classification_report_text,
    confusion_matrix_table,
)
from .entities import SEQEVAL_SCHEMES, SeqevalMetric
from .squad import SquadMetric, answer_scorer

_METRIC_FOR_TASK = {
    "single_label_classification": ClassificationMetric,
    "multi_label_classification": MultiLabelMetric,
    "regression": RegressionMetric,
    "ner": SeqevalMetric,
    "qa": SquadMetric,
}


def metric_for_task(task):
    """A fresh metric instance for a task name (the `problem_type` names plus "ner" and "qa")."""
    if task not in _METRIC_FOR_TASK:
        raise BertkitError(f"no metric for task {task!r}: use one of {', '.join(_METRIC_FOR_TASK)}")
    return _METRIC_FOR_TASK[task]()


__all__ = [
    "ClassificationMetric",
    "MultiLabelMetric",
    "RegressionMetric",
    "SeqevalMetric",
    "SquadMetric",
    "SEQEVAL_SCHEMES",
    "answer_scorer",
    "best_threshold",
    "classification_report_text",
    "confusion_matrix_table",
    "metric_for_task",
]
