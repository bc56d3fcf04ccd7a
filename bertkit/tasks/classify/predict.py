"""`bertkit predict` and `bertkit evaluate` for classification models: load a run's output directory, read a file,
and run the model in length-sorted batches under a token budget, giving results back in input order. Long documents
follow the run's saved `long_doc` settings: with strategy chunk each document's windows are batched like any other
rows and their probabilities aggregated (aggregate=attention: the windows' pooled vectors, gathered from the same
batches, go through the document model's attention), so there is always one result per input document."""

from __future__ import annotations

import csv
import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from bertkit import tasks
from bertkit.checkpoints import load_finetuned, load_tokenizer
from bertkit.datafiles import ColumnMap
from bertkit.labels import LabelSpace
from bertkit.console import ExamplesProgress
from bertkit.errors import BertkitError
from bertkit.inference import run_batch, token_budget_batches
from bertkit.modeling_bert import BertkitForSequenceClassification
from bertkit.modeling_document import BertkitForDocumentClassification
from bertkit.rundir import RUN_CONFIG_FILE, atomic_output, check_output_path, model_task, write_json

from .documents import document_logits, is_document_model

from .encode import read_examples
from .long_docs import LongDocConfig, aggregate, encode_documents, warn_capped
from .scoring import describe_prediction, probabilities, score
from .settings import Settings, legacy_settings

CHUNK_ROWS = 2048  # rows tokenized and sorted together; bounds memory on large files
LONG_DOC_CHUNK_ROWS = 256  # fewer when whole documents come back as token ids (every strategy but head)


@dataclass
class Classifier:
    model: BertkitForSequenceClassification | BertkitForDocumentClassification
    tokenizer: object
    labels: LabelSpace
    max_length: int
    column_overrides: dict
    long_doc: LongDocConfig = field(default_factory=LongDocConfig)


def read_model_settings(model_dir: str, model_config) -> Settings:
    """The run's Settings from config.json, or (a model saved by an earlier bertkit) from its bertkit_config.yaml."""
    saved = getattr(model_config, tasks.SETTINGS_KEY, None) is not None
    source = Path(model_dir) / ("config.json" if saved else RUN_CONFIG_FILE)
    legacy = None if saved else legacy_settings(model_dir)
    return tasks.read_settings(Settings, model_config, str(source), legacy=legacy)


def load_predictor(model_dir: str) -> Classifier:
    """The classifier of a run directory (or a stock BERT classifier), with the settings it was trained under."""
    model = load_finetuned(model_class(model_dir), model_dir, "classify")
    settings = read_model_settings(model_dir, model.config)
    if settings.max_length is None:
        settings = dataclasses.replace(settings, max_length=min(512, model.config.max_position_embeddings))
    labels = LabelSpace.from_model_config(model.config)
    settings.check(labels.kind)
    return Classifier(model, load_tokenizer(model_dir), labels, settings.max_length, settings.columns(),
                      settings.long_doc)


def model_class(model_dir: str) -> type:
    """The class of a run's model: the document model of long_doc.aggregate=attention, else the sequence head."""
    architecture = model_task(model_dir) or ""
    document = architecture.endswith(BertkitForDocumentClassification.__name__.removeprefix("Bertkit"))
    return BertkitForDocumentClassification if document else BertkitForSequenceClassification


@torch.inference_mode()
def predict_probabilities(classifier: Classifier, texts: list[str], pairs: list[str] | None,
                          batch_size: int = 64, progress: ExamplesProgress | None = None) -> np.ndarray:
    """(N, C) probabilities for the N documents, in the order given; with long_doc.strategy=chunk, each document's
    windows are run in the same token-budget batches as everything else and aggregated per document (attention: the
    document model pools their vectors)."""
    long_doc = classifier.long_doc
    windows = encode_documents(classifier.tokenizer, texts, pairs, classifier.max_length, long_doc)
    warn_capped(windows, long_doc, "input")
    features = windows.features()

    def advance(rows: int) -> None:  # progress in documents: windows count as their share of the documents
        if progress is not None:
            progress.advance(rows * len(texts) / len(features))

    if is_document_model(classifier.model):  # aggregate=attention: the model pools each document's windows
        logits = document_logits(classifier.model, classifier.tokenizer, features, windows.doc_ids,
                                 batch_size * classifier.max_length, batch_size, advance)
        return probabilities(logits, classifier.labels.kind)
    batches = token_budget_batches([len(f["input_ids"]) for f in features], batch_size * classifier.max_length,
                                   batch_size)
    results = [None] * len(features)
    for batch_indices in batches:
        padded = classifier.tokenizer.pad([features[i] for i in batch_indices], return_tensors="pt")
        logits = run_batch(classifier.model, padded).logits.float().cpu().numpy()
        for row, index in enumerate(batch_indices):
            results[index] = logits[row]
        advance(len(batch_indices))
    probs = probabilities(np.stack(results), classifier.labels.kind)
    return probs if long_doc.strategy != "chunk" else aggregate(probs, windows.doc_ids, classifier.labels.kind,
                                                                long_doc.aggregate)


def _chunks(dataset, columns: ColumnMap, rows_per_chunk: int = CHUNK_ROWS):
    for start in range(0, len(dataset), rows_per_chunk):
        rows = dataset[start:start + rows_per_chunk]
        yield rows[columns.text], rows[columns.text_pair] if columns.text_pair else None


def predict_file(model_dir: str, input_path: str, output_path: str, batch_size: int = 64) -> int:
    """Write one record per input row (label, score, every probability) as JSONL or CSV, in input order (through a
    temporary file, renamed when complete)."""
    output_path = check_output_path(output_path, inputs=[input_path], model_dirs=[model_dir])
    classifier = load_predictor(model_dir)
    dataset, columns, _ = read_examples(input_path, classifier.column_overrides, classifier.labels,
                                        require_label=False)
    writer = _RecordWriter(output_path, classifier.labels)
    with writer, ExamplesProgress("predicting", len(dataset)) as progress:
        for texts, pairs in _chunks(dataset, columns, _rows_per_chunk(classifier)):
            probs = predict_probabilities(classifier, texts, pairs, batch_size, progress)
            for text, row in zip(texts, probs):
                writer.write({"text": text, **describe_prediction(row, classifier.labels, classifier.labels.threshold)})
    return len(dataset)


def evaluate_file(model_dir: str, input_path: str, output_path: str | None = None, batch_size: int = 64) -> dict:
    """Metrics of the model on a labelled file; labels the model never saw are an error, not a silent mismatch."""
    if output_path:
        output_path = check_output_path(output_path, inputs=[input_path], model_dirs=[model_dir], what="metrics")
    classifier = load_predictor(model_dir)
    dataset, columns, _ = read_examples(input_path, classifier.column_overrides, classifier.labels,
                                        require_label=True)
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
        self.output = atomic_output(self.path, "predictions", newline="")  # renamed over path when complete
        self.handle = self.output.__enter__()
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
        return self.output.__exit__(*exc)


__all__ = ["Classifier", "read_model_settings", "model_class", "load_predictor", "predict_probabilities",
           "predict_file", "evaluate_file"]
