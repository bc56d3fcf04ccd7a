"""`bertkit predict` and `bertkit evaluate` for classification models: load a run's output directory, read a file,
and run the model in length-sorted batches under a token budget, giving results back in input order. Long documents
follow the run's saved `long_doc` settings: with strategy chunk each document's windows are batched like any other
rows and their probabilities aggregated, so there is always one result per input document."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .checkpoints import load_finetuned, load_tokenizer
from .classification import describe_prediction, probabilities, score
from .display import ExamplesProgress
from .data import ColumnMap, LabelSpace, load_split
from .errors import BertkitError
from .inference import INFERENCE_PRECISIONS, inference_precision, run_batch, token_budget_batches
from .long_docs import LongDocConfig, aggregate, encode_documents, warn_capped
from .modeling_bert import BertkitForSequenceClassification
from .training import RUN_CONFIG_FILE, read_run_config, write_json

CHUNK_ROWS = 2048  # rows tokenized and sorted together; bounds memory on large files
LONG_DOC_CHUNK_ROWS = 256  # fewer when whole documents come back as token ids (every strategy but head)


@dataclass
class Classifier:
    model: BertkitForSequenceClassification
    tokenizer: object
    labels: LabelSpace
    max_length: int
    column_overrides: dict
    long_doc: LongDocConfig = field(default_factory=LongDocConfig)


def load_classifier(model_dir: str) -> Classifier:
    model = load_finetuned(BertkitForSequenceClassification, model_dir, "classify")
    run = read_run_config(model_dir)
    data = run.get("data", {})
    max_length = data.get("max_length") or min(512, model.config.max_position_embeddings)
    overrides = {key: data.get(key) for key in ("text_column", "text_pair_column", "label_column")}
    labels = LabelSpace.from_model_config(model.config)
    long_doc = _long_doc_config(run.get("long_doc"), model_dir)
    long_doc.check(max_length, labels.kind)
    return Classifier(model, load_tokenizer(model_dir), labels, max_length, overrides, long_doc)


def _long_doc_config(saved: dict | None, model_dir: str) -> LongDocConfig:
    """The run's long_doc settings (a model without them, or trained before they existed, truncates: head)."""
    try:
        return LongDocConfig(**(saved or {}))
    except TypeError as error:
        raise BertkitError(f"{Path(model_dir) / RUN_CONFIG_FILE}: long_doc has a key this bertkit does not know "
                           f"({error}) — fix or remove it") from None


@torch.inference_mode()
def predict_probabilities(classifier: Classifier, texts: list[str], pairs: list[str] | None,
                          batch_size: int = 64, progress: ExamplesProgress | None = None) -> np.ndarray:
    """(N, C) probabilities for the N documents, in the order given; with long_doc.strategy=chunk, each document's
    windows are run in the same token-budget batches as everything else and aggregated per document."""
    long_doc = classifier.long_doc
    windows = encode_documents(classifier.tokenizer, texts, pairs, classifier.max_length, long_doc)
    warn_capped(windows, long_doc, "input")
    features = windows.features()
    batches = token_budget_batches([len(f["input_ids"]) for f in features], batch_size * classifier.max_length,
                                   batch_size)
    results = [None] * len(features)
    for batch_indices in batches:
        padded = classifier.tokenizer.pad([features[i] for i in batch_indices], return_tensors="pt")
        logits = run_batch(classifier.model, padded).logits.float().cpu().numpy()
        for row, index in enumerate(batch_indices):
            results[index] = logits[row]
        if progress is not None:  # in documents: windows count as their share of the documents
            progress.advance(len(batch_indices) * len(texts) / len(features))
    probs = probabilities(np.stack(results), classifier.labels.kind)
    return probs if long_doc.strategy != "chunk" else aggregate(probs, windows.doc_ids, classifier.labels.kind,
                                                                long_doc.aggregate)


def _chunks(dataset, columns: ColumnMap, rows_per_chunk: int = CHUNK_ROWS):
    for start in range(0, len(dataset), rows_per_chunk):
        rows = dataset[start:start + rows_per_chunk]
        yield rows[columns.text], rows[columns.text_pair] if columns.text_pair else None


def predict_file(model_dir: str, input_path: str, output_path: str, batch_size: int = 64) -> int:
    """Write one record per input row (label, score, every probability) as JSONL or CSV, in input order."""
    classifier = load_classifier(model_dir)
    dataset, columns, _ = load_split(input_path, classifier.column_overrides, classifier.labels, require_label=False)
    writer = _RecordWriter(output_path, classifier.labels)
    with writer, ExamplesProgress("predicting", len(dataset)) as progress:
        for texts, pairs in _chunks(dataset, columns, _rows_per_chunk(classifier)):
            probs = predict_probabilities(classifier, texts, pairs, batch_size, progress)
            for text, row in zip(texts, probs):
                writer.write({"text": text, **describe_prediction(row, classifier.labels, classifier.labels.threshold)})
    return len(dataset)


def evaluate_file(model_dir: str, input_path: str, output_path: str | None = None, batch_size: int = 64) -> dict:
    """Metrics of the model on a labelled file; labels the model never saw are an error, not a silent mismatch."""
    classifier = load_classifier(model_dir)
    dataset, columns, _ = load_split(input_path, classifier.column_overrides, classifier.labels, require_label=True)
    with ExamplesProgress("evaluating", len(dataset)) as progress:
        probs = np.concatenate([predict_probabilities(classifier, texts, pairs, batch_size, progress)
                                for texts, pairs in _chunks(dataset, columns, _rows_per_chunk(classifier))])
    metrics = score(probs, list(dataset["labels"]), classifier.labels, classifier.labels.threshold)
    if output_path:
        write_json(Path(output_path), {"file": str(input_path), "examples": len(dataset),
                                       "long_doc": classifier.long_doc.strategy, **metrics})
    return metrics


def _rows_per_chunk(classifier: Classifier) -> int:
    return CHUNK_ROWS if classifier.long_doc.strategy == "head" else LONG_DOC_CHUNK_ROWS


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


__all__ = ["INFERENCE_PRECISIONS", "Classifier", "load_classifier", "run_batch", "inference_precision",
           "token_budget_batches", "predict_probabilities", "predict_file", "evaluate_file"]
