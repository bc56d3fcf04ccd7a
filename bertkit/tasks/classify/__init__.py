"""Sequence classification (single-label, multi-label, regression; sentences or sentence pairs; long documents as
truncation or windows aggregated per document): the task interface of bertkit.tasks and the pieces the classify and
distill recipes, `bertkit inspect` and `bertkit export` share.

    encode.py     files -> examples -> model rows (a `doc_id` per row: the document it came from)
    long_docs.py  which tokens of a long document the model sees, and windows -> one prediction per document
    documents.py  long_doc.aggregate=attention: documents as rows of windows, their collator, pooled inference
    scoring.py    logits -> probabilities, labels, metrics (during training and on the final model), output records
    settings.py   the inference settings saved with the model (Settings), and those of older run directories
    predict.py    `bertkit predict` / `bertkit evaluate`: a run directory on a file, in token-budget batches
"""

from __future__ import annotations

from .documents import DocumentCollator, document_logits, uses_attention
from .encode import encode, pop_doc_ids, read_examples
from .long_docs import LongDocConfig, first_windows
from .predict import Classifier, evaluate_file, load_predictor, predict_file, predict_probabilities
from .scoring import (DEFAULT_THRESHOLD, SELECTION_METRIC, DevPredictions, compute_metrics_fn, describe_prediction,
                      document_probabilities, final_evaluation, probabilities, score)
from .settings import Settings

__all__ = ["read_examples", "encode", "compute_metrics_fn", "Settings", "load_predictor", "predict_file",
           "evaluate_file", "LongDocConfig", "first_windows", "Classifier", "predict_probabilities", "pop_doc_ids",
           "SELECTION_METRIC", "DEFAULT_THRESHOLD", "probabilities", "document_probabilities", "score",
           "final_evaluation", "describe_prediction", "uses_attention", "DocumentCollator", "document_logits",
           "DevPredictions"]
