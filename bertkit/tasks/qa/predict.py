"""A saved QA model answering files: `bertkit predict` writes one answer per question, `bertkit evaluate` scores
them with the null threshold the run saved."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ...errors import BertkitError
from ...rundir import atomic_output, check_output_path
from .. import read_settings
from .postprocess import Prediction, postprocess, prediction_record, score_predictions
from .read import QAExample, ReadReport, read_examples
from .settings import Settings, legacy_settings
from .windows import QuestionWindows, encode


@dataclass
class QAModel:
    """A saved QA model, its tokenizer, and the settings it was trained with."""

    model: object
    tokenizer: object
    settings: Settings


def load_predictor(model_dir: str) -> QAModel:
    """A qa run's output directory: the model, its tokenizer, and the window / answer settings it was trained with."""
    from ...checkpoints import load_finetuned, load_tokenizer
    from ...modeling_bert import BertkitForQuestionAnswering

    model = load_finetuned(BertkitForQuestionAnswering, model_dir, "qa")
    source = str(Path(model_dir) / "config.json")
    settings = read_settings(Settings, model.config, source, legacy=legacy_settings(model.config))
    return QAModel(model, load_tokenizer(model_dir), settings)


def run_windows(model, tokenizer, windows: QuestionWindows, batch_size: int = 64,
                progress=None) -> tuple[list, list]:
    """Start and end logits of every window (one 1-D array each, in window order), batched under a token budget."""
    import torch

    from ...inference import run_batch, token_budget_batches

    keys = [k for k in ("input_ids", "token_type_ids", "attention_mask") if k in windows.inputs]
    lengths = [len(ids) for ids in windows.inputs["input_ids"]]
    starts, ends = [None] * len(windows), [None] * len(windows)
    with torch.inference_mode():
        for batch in token_budget_batches(lengths, batch_size * max(lengths, default=1), batch_size):
            padded = tokenizer.pad([{k: windows.inputs[k][w] for k in keys} for w in batch], return_tensors="pt")
            output = run_batch(model, padded)
            for row, w in enumerate(batch):
                starts[w] = output.start_logits[row, :lengths[w]].float().cpu().numpy()
                ends[w] = output.end_logits[row, :lengths[w]].float().cpu().numpy()
            if progress is not None:  # in questions: windows count as their share of them
                progress.advance(len(batch) * progress.total / max(len(windows), 1))
    return starts, ends


def predict_examples(qa: QAModel, examples: list[QAExample], batch_size: int = 64) -> list[Prediction]:
    """One Prediction per example (before the null decision), windows cut as the model was trained."""
    from ...console import ExamplesProgress

    settings = qa.settings
    windows = encode(qa.tokenizer, examples, settings.max_length, settings.doc_stride, settings.max_question_length,
                     with_labels=False)
    with ExamplesProgress("answering", len(examples)) as progress:
        starts, ends = run_windows(qa.model, qa.tokenizer, windows, batch_size, progress)
    return postprocess(starts, ends, windows, examples, settings.n_best, settings.max_answer_length)


def _print_report(report: ReadReport) -> None:
    from ...console import warn

    for line in report.lines():
        warn(line)


def predict_file(model_dir: str, input_path: str, output_path: str, batch_size: int = 64) -> int:
    """Answer every {question, context} record of a file; write one JSON line per question, in input order."""
    if Path(output_path).suffix.lower() not in (".jsonl", ".json"):
        raise BertkitError(f"output file {output_path}: QA predictions are written as JSON lines — use a .jsonl name")
    output_path = check_output_path(output_path, inputs=[input_path], model_dirs=[model_dir])
    qa = load_predictor(model_dir)
    examples, report = read_examples(input_path, require_answers=False)
    _print_report(report)
    predictions = predict_examples(qa, examples, batch_size)
    with atomic_output(output_path, "predictions") as handle:
        for example, prediction in zip(examples, predictions):
            record = prediction_record(example, prediction, qa.settings.null_threshold)
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return len(examples)


def evaluate_file(model_dir: str, input_path: str, output_path: str | None = None, batch_size: int = 64) -> dict:
    """EM / F1 of the model on a labelled file with its saved null threshold (HasAns / NoAns for v2 data)."""
    if output_path:
        output_path = check_output_path(output_path, inputs=[input_path], model_dirs=[model_dir], what="metrics")
    from ...rundir import write_json

    qa = load_predictor(model_dir)
    examples, report = read_examples(input_path, require_answers=True)
    _print_report(report)
    predictions = predict_examples(qa, examples, batch_size)
    metrics = score_predictions(predictions, examples, qa.settings.language, qa.settings.null_threshold)
    if output_path:
        write_json(Path(output_path), {"file": str(input_path), "examples": len(examples),
                                       "skipped": report.skipped, **metrics})
    return metrics


__all__ = ["load_predictor", "predict_file", "evaluate_file", "QAModel", "run_windows", "predict_examples"]
