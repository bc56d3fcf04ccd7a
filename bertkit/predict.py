"""`bertkit predict` and `bertkit evaluate` for classification models: load a run's output directory, read a file,
and run the model in length-sorted batches under a token budget, giving results back in input order."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import yaml
from rich.progress import Progress

from .checkpoints import load_tokenizer, require_task
from .classification import describe_prediction, probabilities, score
from .data import ColumnMap, LabelSpace, load_split
from .errors import BertkitError
from .modeling_bert import BertkitForSequenceClassification
from .training import RUN_CONFIG_FILE, write_json

CHUNK_ROWS = 2048  # rows tokenized and sorted together; bounds memory on large files


@dataclass
class Classifier:
    model: BertkitForSequenceClassification
    tokenizer: object
    labels: LabelSpace
    max_length: int
    column_overrides: dict


def load_classifier(model_dir: str) -> Classifier:
    if not Path(model_dir).is_dir():
        raise BertkitError(f"model directory {model_dir} does not exist — give the output_dir of a classify run")
    require_task(model_dir, "ForSequenceClassification", "classification predict/evaluate")
    model = BertkitForSequenceClassification.from_pretrained(model_dir).eval()
    run = _run_config(model_dir)
    data = run.get("data", {})
    max_length = data.get("max_length") or min(512, model.config.max_position_embeddings)
    overrides = {key: data.get(key) for key in ("text_column", "text_pair_column", "label_column")}
    return Classifier(model, load_tokenizer(model_dir), LabelSpace.from_model_config(model.config), max_length,
                      overrides)


def _run_config(model_dir: str) -> dict:
    path = Path(model_dir) / RUN_CONFIG_FILE
    return yaml.safe_load(path.read_text(encoding="utf-8")) or {} if path.exists() else {}


def token_budget_batches(lengths: list[int], max_tokens: int, max_rows: int) -> list[list[int]]:
    """Indices sorted by length, cut into batches whose padded size (rows x longest) stays within max_tokens."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    batches, current, longest = [], [], 0
    for index in order:
        longest_if_added = max(longest, lengths[index])
        if current and (len(current) + 1 > max_rows or (len(current) + 1) * longest_if_added > max_tokens):
            batches.append(current)
            current, longest_if_added = [], lengths[index]
        current.append(index)
        longest = longest_if_added
    return batches + ([current] if current else [])


@torch.inference_mode()
def predict_probabilities(classifier: Classifier, texts: list[str], pairs: list[str] | None,
                          batch_size: int = 64, progress: Progress | None = None, task=None) -> np.ndarray:
    """(N, C) probabilities for the rows, in the order given."""
    encoded = classifier.tokenizer(texts, pairs, truncation=True, max_length=classifier.max_length)
    features = [{k: encoded[k][i] for k in encoded.keys()} for i in range(len(texts))]
    batches = token_budget_batches([len(f["input_ids"]) for f in features], batch_size * classifier.max_length,
                                   batch_size)
    results = [None] * len(texts)
    for batch_indices in batches:
        padded = classifier.tokenizer.pad([features[i] for i in batch_indices], return_tensors="pt")
        logits = classifier.model(**padded).logits.float().numpy()
        for row, index in enumerate(batch_indices):
            results[index] = logits[row]
        if progress is not None:
            progress.advance(task, len(batch_indices))
    return probabilities(np.stack(results), classifier.labels.kind)


def _chunks(dataset, columns: ColumnMap):
    for start in range(0, len(dataset), CHUNK_ROWS):
        rows = dataset[start:start + CHUNK_ROWS]
        yield rows[columns.text], rows[columns.text_pair] if columns.text_pair else None


def predict_file(model_dir: str, input_path: str, output_path: str, batch_size: int = 64) -> int:
    """Write one record per input row (label, score, every probability) as JSONL or CSV, in input order."""
    classifier = load_classifier(model_dir)
    dataset, columns, _ = load_split(input_path, classifier.column_overrides, classifier.labels, require_label=False)
    writer = _RecordWriter(output_path, classifier.labels)
    with writer, Progress(transient=True) as progress:
        task = progress.add_task("predicting", total=len(dataset))
        for texts, pairs in _chunks(dataset, columns):
            probs = predict_probabilities(classifier, texts, pairs, batch_size, progress, task)
            for text, row in zip(texts, probs):
                writer.write({"text": text, **describe_prediction(row, classifier.labels, classifier.labels.threshold)})
    return len(dataset)


def evaluate_file(model_dir: str, input_path: str, output_path: str | None = None, batch_size: int = 64) -> dict:
    """Metrics of the model on a labelled file; labels the model never saw are an error, not a silent mismatch."""
    classifier = load_classifier(model_dir)
    dataset, columns, _ = load_split(input_path, classifier.column_overrides, classifier.labels, require_label=True)
    with Progress(transient=True) as progress:
        task = progress.add_task("evaluating", total=len(dataset))
        probs = np.concatenate([predict_probabilities(classifier, texts, pairs, batch_size, progress, task)
                                for texts, pairs in _chunks(dataset, columns)])
    metrics = score(probs, list(dataset["labels"]), classifier.labels, classifier.labels.threshold)
    if output_path:
        write_json(Path(output_path), {"file": str(input_path), "examples": len(dataset), **metrics})
    return metrics


class _RecordWriter:
    """JSONL (one object per line) or CSV (label, score, prob_<name> columns), chosen by the output's extension."""

    def __init__(self, path: str, labels: LabelSpace):
        self.path, self.labels = Path(path), labels
        self.is_csv = self.path.suffix.lower() in (".csv", ".tsv")
        if not self.is_csv and self.path.suffix.lower() not in (".jsonl", ".json"):
            raise BertkitError(f"output file {path}: use a .jsonl or .csv name")

    def __enter__(self):
        self.handle = self.path.open("w", encoding="utf-8", newline="")
        if self.is_csv:
            self.csv = csv.writer(self.handle, delimiter="\t" if self.path.suffix.lower() == ".tsv" else ",")
            self.csv.writerow(["text", "label", "score", *[f"prob_{name}" for name in self.labels.names]])
        return self

    def write(self, record: dict) -> None:
        if not self.is_csv:
            self.handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            return
        label = record.get("label", ";".join(record.get("labels", [])))
        probs = record.get("probabilities", {})
        self.csv.writerow([record["text"], label, record.get("score", ""), *[probs[n] for n in self.labels.names]])

    def __exit__(self, *exc):
        self.handle.close()


__all__ = ["Classifier", "load_classifier", "token_budget_batches", "predict_probabilities", "predict_file",
           "evaluate_file"]
