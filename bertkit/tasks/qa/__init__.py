"""Extractive question answering (SQuAD v1.1 / v2.0, CMRC-style Chinese): reading, question windows,
post-processing, and `bertkit predict` / `bertkit evaluate` for QA models.

    examples, report = read_examples("data/qa/en/dev.json")        SQuAD JSON, JSON array or JSONL records  (read)
    windows = encode(tokenizer, examples, max_length=384, doc_stride=128)   QuestionWindows              (windows)
    predictions = postprocess(start_logits, end_logits, windows, examples)   one Prediction per example  (postprocess)
    threshold = tune_null_threshold(margins, f1_if_answered, f1_if_null)     v2: when to answer ""
    qa = load_predictor("runs/qa")                                     model, tokenizer, saved Settings  (predict)

A long context is cut into overlapping windows (`doc_stride` tokens shared between neighbours). Each window is
scored on its own; an example's answer is the best span over all its windows, taken from the original context by
character offsets. Under SQuAD v2 the best span competes with the null answer: the example is answered "" when
`null_score - best_score > threshold`, the threshold tuned on dev to maximise F1 and saved with the model's Settings
(None for a v1 model, which always answers).
"""

from __future__ import annotations

from .postprocess import (Prediction, Span, best_prediction, candidate_spans, compute_metrics_fn, postprocess,
                          prediction_record, references, score_predictions, tune_and_score, tune_null_threshold)
from .predict import QAModel, evaluate_file, load_predictor, predict_examples, predict_file, run_windows
from .read import REPAIR_RADIUS, QAExample, ReadReport, detect_language, locate_answer, read_examples
from .settings import Settings, legacy_settings
from .windows import QuestionWindows, answer_token_span, check_window_settings, encode

__all__ = [
    "read_examples", "encode", "compute_metrics_fn", "Settings", "load_predictor", "predict_file", "evaluate_file",
    "QAExample", "ReadReport", "REPAIR_RADIUS", "locate_answer", "detect_language", "QuestionWindows",
    "check_window_settings", "answer_token_span", "Span", "Prediction", "candidate_spans", "best_prediction",
    "postprocess", "tune_null_threshold", "references", "score_predictions", "tune_and_score", "prediction_record",
    "legacy_settings", "QAModel", "run_windows", "predict_examples",
]
