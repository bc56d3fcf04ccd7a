"""Sequence classification (single-label, multi-label, regression; sentences or sentence pairs): the task interface
of bertkit.tasks and the pieces the classify and distill recipes, `bertkit inspect` and `bertkit export` share.
Long documents (truncation, or windows aggregated per document) are cut and pooled in bertkit/tasks/long_documents.py.

    settings     the inference settings a run saves with the model (config.json): what predict / evaluate need to
                 read a file and cut its texts the way training did
    encoding     files -> examples -> model rows (real A/B segments for pairs; a `doc_id` per row, the document it
                 came from, split off before the model sees the rows)
    scoring      logits -> probabilities and labels (per document when documents became several windows), the
                 metrics of each label kind during training and on the final model, one prediction as a record
    predict      `bertkit predict` / `bertkit evaluate`: load a run's output directory, read a file, and run the model
                 in length-sorted batches under a token budget, giving results back in input order

Long documents follow the run's saved `long_doc` settings: with strategy chunk each document's windows are batched like
any other rows and their probabilities aggregated (aggregate=attention: the windows' pooled vectors, gathered from the
same batches, go through the document model's attention), so there is always one result per input document.
"""

from __future__ import annotations

import csv
import dataclasses
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import datasets
import numpy as np
import sklearn.metrics as skm
import torch
import transformers
from pydantic import Field

from bertkit.tasks import reporting, serving
from bertkit import calibration, tasks
from bertkit.tasks import check_min_confidence
from bertkit.checkpoints import load_finetuned, load_tokenizer
from bertkit.console import ExamplesProgress, warn
from bertkit.datafiles import ColumnMap, column_values, read_table, row_location
from bertkit.errors import BertkitError
from bertkit.inference import run_batch, sigmoid, softmax, token_budget_batches
from bertkit.metrics import (ClassificationMetric, MultiLabelMetric, RegressionMetric, best_threshold,
                             classification_report_text, confusion_matrix_table)
from bertkit.modeling_bert import BertkitForSequenceClassification
from bertkit.labels import LabelSpace
from bertkit.modeling_document import BertkitForDocumentClassification
from bertkit.report_html import (SHOWN_EXAMPLES, bar_chart, esc, fmt, heat_map, line_chart, missing, per_class_rows,
                                 scatter, section, table)
from bertkit.rundir import atomic_output, check_output_path, model_task, write_json
from bertkit.splits import load_split
from bertkit.tasks.label_issues import (Issue, by_name, check_fold_count, is_json_array, kfold, location_number,
                                        multi_label_issues, single_label_issues, write_json_records)
from bertkit.tasks.long_documents import (DocumentCollator, LongDocConfig, Windows, aggregate, document_logits,
                                          encode_documents, first_windows, is_document_model, uses_attention,
                                          warn_capped)


# ------------------------------------------------------------------------------------------------ settings


COLUMN_KEYS = ("text_column", "text_pair_column", "label_column")


@dataclass
class Settings:
    max_length: int | None = None
    """Tokens per row (per window), [CLS] and [SEP] included (None: the model's positions, at most 512)."""
    text_column: str | None = None
    """Column holding the text (None: auto-detected)."""
    text_pair_column: str | None = None
    """Column holding the second segment of a sentence pair (None: auto-detected)."""
    label_column: str | None = None
    """Column holding the label of a file to evaluate (None: auto-detected)."""
    long_doc: LongDocConfig = field(default_factory=LongDocConfig)
    """Texts longer than max_length: head / tail / head_tail truncation or chunk windows, as the run trained."""
    temperature: list[Annotated[float, Field(gt=0)]] | None = None
    """Logits are divided by this before the softmax / sigmoid (fitted on dev; one per label for multi-label)."""
    abstain_below: Annotated[float, Field(gt=0, lt=1)] | None = None
    """Rows whose confidence is below this get no label, marked abstained (predict --min-confidence overrides)."""

    def columns(self) -> dict:
        """The column overrides bertkit.splits.load_split takes."""
        return {key: getattr(self, key) for key in COLUMN_KEYS}

    def check(self, kind: str | None = None) -> None:
        """Raise a one-line BertkitError naming the key when the settings cannot work (`kind`: the label kind)."""
        if self.max_length is not None and self.max_length < 3:
            raise BertkitError(f"max_length={self.max_length} must be at least 3 ([CLS], [SEP] and some text)")
        self.long_doc.check(self.max_length or 512, kind)
        if kind == "regression" and (self.temperature or self.abstain_below is not None):
            raise BertkitError("temperature / abstain_below are for classifiers: a regression model has no "
                               "probabilities to calibrate or abstain on — remove them")


# ------------------------------------------------------------------------------------------------ encoding


def read_examples(path: str, columns: dict | None = None, labels: LabelSpace | None = None, require_label: bool = True,
                  label_kind: str = "auto", delimiter: str = ";") -> tuple[datasets.Dataset, ColumnMap, LabelSpace]:
    """A classification file as (examples, its columns, the label space): `columns` overrides text_column /
    text_pair_column / label_column; labels are encoded by `labels` (the training split's; None: built from this
    file, of `label_kind`, several in one cell split at `delimiter`)."""
    return load_split(path, columns, labels, require_label, label_kind=label_kind, delimiter=delimiter)


def encode(tokenizer, split, columns: ColumnMap, max_length: int, long_doc: LongDocConfig | None = None,
           name: str = "train") -> datasets.Dataset:
    """Model rows of a split under the long-document strategy: input_ids, token_type_ids (real A/B segments for
    pairs), `labels` (each window carries its document's label) and `doc_id` (the row of the split it came from;
    drop it before the model sees the rows). Under long_doc.aggregate=attention a row is a document: input_ids and
    token_type_ids hold its windows, and doc_id is the row's own index."""
    long_doc = long_doc or LongDocConfig()
    pairs = list(split[columns.text_pair]) if columns.text_pair else None
    windows = encode_documents(tokenizer, list(split[columns.text]), pairs, max_length, long_doc)
    warn_capped(windows, long_doc, name)
    if long_doc.strategy == "chunk" and long_doc.aggregate == "attention":
        rows, features = document_rows(windows)
    else:
        rows, features = window_rows(windows)
    if "labels" in split.column_names:
        labels = list(split["labels"])
        rows["labels"] = [labels[i] for i in rows["doc_id"]]
        features["labels"] = split.features["labels"]
    return datasets.Dataset.from_dict(rows, features=datasets.Features(features))


def window_rows(windows: Windows) -> tuple[dict, dict]:
    """One row per window, with the document it came from."""
    rows = {"input_ids": windows.input_ids, "token_type_ids": windows.token_type_ids,
            "doc_id": windows.doc_ids.tolist()}
    features = {"input_ids": datasets.List(datasets.Value("int32")),
                "token_type_ids": datasets.List(datasets.Value("int8")), "doc_id": datasets.Value("int64")}
    return rows, features


def document_rows(windows: Windows) -> tuple[dict, dict]:
    """One row per document holding its windows (aggregate=attention: the model pools them; DocumentCollator
    flattens a batch's windows). Its doc_id is its own index, so per-document scoring needs no aggregation."""
    bounds = [*first_windows(windows.doc_ids).tolist(), len(windows.doc_ids)]  # a document's windows are adjacent
    spans = list(zip(bounds, bounds[1:]))
    rows = {"input_ids": [windows.input_ids[a:b] for a, b in spans],
            "token_type_ids": [windows.token_type_ids[a:b] for a, b in spans], "doc_id": list(range(len(spans)))}
    features = {"input_ids": datasets.List(datasets.List(datasets.Value("int32"))),
                "token_type_ids": datasets.List(datasets.List(datasets.Value("int8"))),
                "doc_id": datasets.Value("int64")}
    return rows, features


def pop_doc_ids(split):
    """The split without its doc_id column (the model must not see it), and the column as an array."""
    return (split.remove_columns("doc_id"), np.asarray(split["doc_id"])) if split is not None else (None, None)


# ------------------------------------------------------------------------------------------------ scoring


# The dev metric that picks the best checkpoint, per label kind.
SELECTION_METRIC = {"single": "macro_f1", "multi": "micro_f1", "regression": "pearson"}
DEFAULT_THRESHOLD = 0.5


def probabilities(logits: np.ndarray, kind: str, temperature: list[float] | None = None) -> np.ndarray:
    """Softmax for single-label, sigmoid per label for multi-label, the raw value for regression. (N, C) -> (N, C).
    `temperature`: the calibration the run fitted on dev (bertkit/calibration.py), dividing the logits first."""
    logits = calibration.scale(np.asarray(logits, dtype=np.float32), temperature)
    if kind == "single":
        return softmax(logits)  # numpy, as the sigmoid: no torch op between ONNX Runtime's calls (inference.softmax)
    if kind == "multi":
        return sigmoid(logits)
    return logits


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


def document_probabilities(logits, doc_ids: np.ndarray | None, kind: str, how: str = "mean",
                           temperature: list[float] | None = None) -> np.ndarray:
    """(W, C) window logits -> (D, C) probabilities, one row per document (doc_ids None: a window per document)."""
    probs = probabilities(logits, kind, temperature)
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


@dataclass
class FinalEvaluation:
    """What the dev split says of the final model, and what it decides for predict."""

    metrics: dict
    """Dev metrics of the final model, per document."""
    files: dict = field(default_factory=dict)
    """Report files to write beside the model (single-label: classification report, confusion matrix)."""
    threshold: float | None = None
    """Multi-label: the decision threshold tuned on dev (on the calibrated probabilities)."""
    temperature: list[float] | None = None
    """The temperature(s) fitted on dev (calibrate=true), saved in the task settings."""
    calibration: dict = field(default_factory=dict)
    """ECE before and after calibration, and the coverage table at confidence 0.5 / 0.7 / 0.9."""
    slices: dict = field(default_factory=dict)
    """Dev metrics by token-length bucket and by label frequency (head / tail labels of the training split)."""


def final_evaluation(trainer, dev, doc_ids: np.ndarray, labels: LabelSpace, aggregate: str,
                     memory: DevPredictions | None = None, calibrate: bool = True,
                     train_counts: np.ndarray | None = None) -> FinalEvaluation:
    """Dev metrics of the final model, per document (window predictions aggregated). With `calibrate`, the
    temperature that makes the dev probabilities honest is fitted first (bertkit/calibration.py); for multi-label,
    the threshold that maximises micro-F1 on the calibrated dev probabilities next. Also the report files of a
    single-label run and the slice metrics (`train_counts`: rows per label in the training split). The predictions
    come from `memory` when an evaluation during training scored these very weights."""
    kept = memory.of_final_model(trainer) if memory is not None else None
    if kept is None:
        output = trainer.predict(dev, metric_key_prefix="eval")
        predictions = output.predictions[0] if isinstance(output.predictions, tuple) else output.predictions
        kept = (predictions, output.label_ids)
    logits = np.asarray(kept[0], dtype=np.float32)
    references = np.asarray(kept[1])[first_windows(doc_ids)]

    def to_probabilities(scaled_logits):
        return document_probabilities(scaled_logits, doc_ids, labels.kind, aggregate)

    result = FinalEvaluation(metrics={})
    raw = probs = to_probabilities(logits)
    if calibrate and labels.kind != "regression":
        result.temperature = checked_temperatures(
            calibration.fit_temperatures(logits, references, labels.kind, to_probabilities), labels)
    if result.temperature:
        probs = to_probabilities(calibration.scale(logits, result.temperature))
        result.calibration = {
            "temperature": result.temperature[0] if labels.kind == "single" else result.temperature,
            "ece_before": calibration.expected_calibration_error(raw, references, labels.kind),
            "ece": calibration.expected_calibration_error(probs, references, labels.kind),
            "coverage": calibration.coverage_table(probs, references, labels.kind)}
    threshold = DEFAULT_THRESHOLD
    if labels.kind == "multi":
        result.threshold = threshold = best_threshold(probs, references.astype(int))
    result.metrics = {**score(probs, references, labels, threshold), "documents": len(references)}
    if dev is not None:
        result.slices = slice_metrics(probs, references, labels, threshold, document_lengths(dev, doc_ids),
                                      train_counts)
    if labels.kind == "single":
        predicted = probs.argmax(-1)
        result.files["classification_report.txt"] = classification_report_text(references, predicted, labels.names)
        result.files["confusion_matrix.json"] = confusion_matrix_table(references, predicted, labels.names)
    return result


def checked_temperatures(temperatures: list[float], labels: LabelSpace) -> list[float] | None:
    """The fitted temperatures, less those at the edge of the search range (bertkit/calibration.py): single-label,
    no calibration at all and a warning to check the dev labels; multi-label, 1.0 for those labels."""
    edge = calibration.at_range_edge(temperatures)
    if labels.kind == "single" and edge[0]:
        warn(f"calibration skipped: the best temperature on dev is {temperatures[0]}, the edge of the range: the dev "
             "labels disagree with the model (a swapped label mapping?); check them with `bertkit diagnose`. "
             "Predictions stay uncalibrated.")
        return None
    if any(edge):
        names = [name for name, at_edge in zip(labels.names, edge) if at_edge]
        warn(f"calibration left out label(s) {', '.join(names)}: their best temperature on dev is at the edge of the "
             "range (too few dev rows with and without them to fit one)")
    return [1.0 if at_edge else t for t, at_edge in zip(temperatures, edge)]


LENGTH_EDGES = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)  # token-length buckets of the slice metrics
# the metrics a slice reports, by label kind (single-label micro-F1 is the accuracy again)
SLICE_KEYS = {"single": ("accuracy", "macro_f1"), "multi": ("micro_f1", "macro_f1"), "regression": ("mse",)}


def document_lengths(rows, doc_ids: np.ndarray) -> np.ndarray:
    """Tokens the model read per document (its windows added up; a document row of the attention model holds
    them all), in document order."""
    def tokens(ids):
        return sum(len(window) for window in ids) if ids and isinstance(ids[0], list) else len(ids)
    lengths = np.array([tokens(ids) for ids in rows["input_ids"]])
    _, document = np.unique(doc_ids, return_inverse=True)  # doc ids grow with the rows: sorted = document order
    return np.bincount(document, weights=lengths).astype(int)


def slice_metrics(probs: np.ndarray, references: np.ndarray, labels: LabelSpace, threshold: float,
                  lengths: np.ndarray, train_counts: np.ndarray | None = None) -> dict:
    """Dev metrics where a weak slice hides in the average: by token-length bucket (`tokens 33-64`: the documents
    of that length), and for classifiers by label frequency in training: head labels (at least the median count)
    against tail labels, as macro-F1 over those labels on the whole dev split."""
    slices = {"length": {}}
    bucket = np.searchsorted(LENGTH_EDGES, lengths)  # 0: <= 16, 1: 17-32, ...
    for b in np.unique(bucket):
        rows = bucket == b
        low = LENGTH_EDGES[b - 1] + 1 if b > 0 else 1
        name = f"tokens {low}-{LENGTH_EDGES[b]}" if b < len(LENGTH_EDGES) else f"tokens > {LENGTH_EDGES[-1]}"
        scores = score(probs[rows], references[rows], labels, threshold)
        slices["length"][name] = {"documents": int(rows.sum()),
                                  **{key: round(scores[key], 4) for key in SLICE_KEYS[labels.kind]}}
    if labels.kind == "regression" or train_counts is None or len(train_counts) < 2:
        return slices
    train_counts = np.asarray(train_counts)
    head = train_counts >= np.median(train_counts)
    predicted = decide(probs, labels.kind, threshold)
    for name, members in (("head", np.flatnonzero(head)), ("tail", np.flatnonzero(~head))):
        if len(members):
            f1 = skm.f1_score(references.astype(int), predicted, labels=members.tolist(), average="macro",
                              zero_division=0)
            slices[f"{name}_labels"] = {"labels": len(members), "train_rows": int(train_counts[members].sum()),
                                        "macro_f1": round(float(f1), 4)}
    return slices


def label_counts(split, labels: LabelSpace) -> np.ndarray | None:
    """Rows per label in a split (multi-label: rows carrying it); None for regression."""
    if labels.kind == "regression":
        return None
    values = np.asarray(split["labels"])
    if labels.kind == "single":
        return np.bincount(values.astype(int), minlength=len(labels.names))
    return values.astype(int).sum(0)


def describe_prediction(probs_row: np.ndarray, label_space: LabelSpace, threshold: float,
                        min_confidence: float | None = None) -> dict:
    """One output record: the label(s), the score, and every label's probability. With `min_confidence`, a row
    less sure than that (bertkit/calibration.py: confidence) gets no label and `abstained: true`, for a person to
    decide; every record then says whether it abstained."""
    if label_space.kind == "regression":
        return {"score": float(probs_row.reshape(-1)[0])}
    named = {name: round(float(p), 6) for name, p in zip(label_space.names, probs_row)}
    abstained = (min_confidence is not None
                 and float(calibration.confidence(probs_row[None], label_space.kind)[0]) < min_confidence)
    abstention = {} if min_confidence is None else {"abstained": abstained}
    if label_space.kind == "multi":
        chosen = None if abstained else [name for name, p in named.items() if p >= threshold]
        return {"labels": chosen, **abstention, "probabilities": named}
    best = int(np.argmax(probs_row))
    return {"label": None if abstained else label_space.names[best], "score": round(float(probs_row[best]), 6),
            **abstention, "probabilities": named}


def class_weights(spec: str | dict | None, counts: np.ndarray | None, rows: int,
                  labels: LabelSpace) -> dict[str, float] | None:
    """The loss weight of each label by name, from the `class_weights` key: "auto" is inverse frequency normalised
    so that the average training row weighs 1 (single-label: rows / (labels x count), scikit-learn's "balanced");
    for multi-label, each label's positive weight negatives / positives (BCE's pos_weight). A mapping names labels
    (the rest weigh 1). `counts`: training rows per label (label_counts), `rows`: training rows."""
    if spec is None:
        return None
    if labels.kind == "regression":
        raise BertkitError("class_weights needs class labels, and this training split holds numbers (regression) "
                           "— remove class_weights")
    if isinstance(spec, dict):
        unknown = [name for name in spec if name not in labels.names]
        if unknown:
            raise BertkitError(f"class_weights.{unknown[0]}: no such label in the training split — use "
                               f"{', '.join(labels.names[:10])}")
        return {name: float(spec.get(name, 1.0)) for name in labels.names}
    counts = np.maximum(np.asarray(counts, dtype=np.float64), 1)  # every label of the space occurs in training
    weights = rows / (len(counts) * counts) if labels.kind == "single" else (rows - counts) / counts
    return {name: round(float(w), 4) for name, w in zip(labels.names, weights)}


# ------------------------------------------------------------------------------------------------ predict / evaluate


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
    temperature: list[float] | None = None
    """The calibration fitted on dev (None: the raw softmax / sigmoid)."""
    abstain_below: float | None = None
    """The saved confidence cut below which predict / serve abstain (None: always answer)."""


def read_model_settings(model_dir: str, model_config) -> Settings:
    """The run's Settings from config.json (the defaults for a model that saved none, e.g. a stock classifier)."""
    return tasks.read_settings(Settings, model_config, str(Path(model_dir) / "config.json"))


def load_predictor(model_dir: str) -> Classifier:
    """The classifier of a run directory (or a stock BERT classifier), with the settings it was trained under."""
    model = load_finetuned(model_class(model_dir), model_dir, "classify")
    settings = read_model_settings(model_dir, model.config)
    if settings.max_length is None:
        settings = dataclasses.replace(settings, max_length=min(512, model.config.max_position_embeddings))
    labels = LabelSpace.from_model_config(model.config)
    settings.check(labels.kind)
    if settings.temperature and len(settings.temperature) != (1 if labels.kind == "single" else len(labels.names)):
        raise BertkitError(f"{model_dir}/config.json: {tasks.SETTINGS_KEY}.temperature has "
                           f"{len(settings.temperature)} values for {len(labels.names)} {labels.kind}-label classes "
                           "— the file was edited by hand or mixed from two runs; retrain, or remove the key")
    return Classifier(model, load_tokenizer(model_dir), labels, settings.max_length, settings.columns(),
                      settings.long_doc, settings.temperature, settings.abstain_below)


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
        return probabilities(logits, classifier.labels.kind, classifier.temperature)
    batches = token_budget_batches([len(f["input_ids"]) for f in features], batch_size * classifier.max_length,
                                   batch_size)
    results = [None] * len(features)
    for batch_indices in batches:
        padded = classifier.tokenizer.pad([features[i] for i in batch_indices], return_tensors="pt")
        logits = run_batch(classifier.model, padded).logits.float().cpu().numpy()
        for row, index in enumerate(batch_indices):
            results[index] = logits[row]
        advance(len(batch_indices))
    probs = probabilities(np.stack(results), classifier.labels.kind, classifier.temperature)
    return probs if long_doc.strategy != "chunk" else aggregate(probs, windows.doc_ids, classifier.labels.kind,
                                                                long_doc.aggregate)


def _chunks(dataset, columns: ColumnMap, rows_per_chunk: int = CHUNK_ROWS):
    for start in range(0, len(dataset), rows_per_chunk):
        rows = dataset[start:start + rows_per_chunk]
        yield rows[columns.text], rows[columns.text_pair] if columns.text_pair else None


def predict_file(model_dir: str, input_path: str, output_path: str, batch_size: int = 64,
                 min_confidence: float | None = None) -> int:
    """Write one record per input row (label, score, every probability) as JSONL or CSV, in input order (through a
    temporary file, renamed when complete). Rows less sure than `min_confidence` (default: the run's saved
    abstain_below) get no label and are marked abstained."""
    output_path = check_output_path(output_path, inputs=[input_path], model_dirs=[model_dir])
    return write_predictions(load_predictor(model_dir), predict_probabilities, input_path, output_path, batch_size,
                             min_confidence)


def evaluate_file(model_dir: str, input_path: str, output_path: str | None = None, batch_size: int = 64) -> dict:
    """Metrics of the model on a labelled file; labels the model never saw are an error, not a silent mismatch."""
    if output_path:
        output_path = check_output_path(output_path, inputs=[input_path], model_dirs=[model_dir], what="metrics")
    classifier = load_predictor(model_dir)
    metrics, rows = file_metrics(classifier, predict_probabilities, input_path, batch_size)
    if output_path:
        write_json(Path(output_path), {"file": str(input_path), "examples": rows,
                                       "long_doc": classifier.long_doc.strategy, **metrics})
    return metrics


# A classifier's predict and evaluate, for any predictor with classify's attributes (labels, column_overrides,
# abstain_below, long_doc) and its probabilities function `predict(predictor, texts, pairs, batch_size, progress)`:
# classify's own, and the few-shot model's (bertkit/tasks/fewshot.py).


def write_predictions(predictor, predict, input_path: str, output_path: str, batch_size: int = 64,
                      min_confidence: float | None = None) -> int:
    """predict_file's records for a loaded `predictor` (output_path already checked)."""
    check_min_confidence(min_confidence, predictor.labels.kind)
    cut = min_confidence if min_confidence is not None else predictor.abstain_below
    dataset, columns, _ = read_examples(input_path, predictor.column_overrides, predictor.labels,
                                        require_label=False)
    writer = _RecordWriter(output_path, predictor.labels, abstains=cut is not None)
    with writer, ExamplesProgress("predicting", len(dataset)) as progress:
        for texts, pairs in _chunks(dataset, columns, _rows_per_chunk(predictor)):
            probs = predict(predictor, texts, pairs, batch_size, progress)
            for text, row in zip(texts, probs):
                writer.write({"text": text, **describe_prediction(row, predictor.labels, predictor.labels.threshold,
                                                                  cut)})
    return len(dataset)


def file_metrics(predictor, predict, input_path: str, batch_size: int = 64) -> tuple[dict, int]:
    """(evaluate_file's metrics, rows) of a loaded `predictor` on a labelled file."""
    dataset, columns, _ = read_examples(input_path, predictor.column_overrides, predictor.labels,
                                        require_label=True)
    with ExamplesProgress("evaluating", len(dataset)) as progress:
        probs = np.concatenate([predict(predictor, texts, pairs, batch_size, progress)
                                for texts, pairs in _chunks(dataset, columns, _rows_per_chunk(predictor))])
    references = np.asarray(dataset["labels"])
    metrics = score(probs, references, predictor.labels, predictor.labels.threshold)
    if predictor.labels.kind != "regression":  # how honest the (calibrated) probabilities are on this file
        metrics["ece"] = calibration.expected_calibration_error(probs, references, predictor.labels.kind)
        metrics["coverage"] = calibration.coverage_table(probs, references, predictor.labels.kind)
    return metrics, len(dataset)


def _rows_per_chunk(predictor) -> int:
    return CHUNK_ROWS if predictor.long_doc.strategy == "head" else LONG_DOC_CHUNK_ROWS


class _RecordWriter:
    """JSONL (one object per line) or CSV (label, score, prob_<name> columns), chosen by the output's extension."""

    def __init__(self, path: str, labels: LabelSpace, abstains: bool = False):
        self.path, self.labels, self.abstains = Path(path), labels, abstains
        self.is_csv = self.path.suffix.lower() in (".csv", ".tsv")
        if not self.is_csv and self.path.suffix.lower() not in (".jsonl", ".json"):
            raise BertkitError(f"output file {path}: use a .jsonl or .csv name")

    def __enter__(self):
        self.output = atomic_output(self.path, "predictions", newline="")  # renamed over path when complete
        self.handle = self.output.__enter__()
        if self.is_csv:
            self.csv = csv.writer(self.handle, delimiter="\t" if self.path.suffix.lower() == ".tsv" else ",")
            abstained = ["abstained"] if self.abstains else []
            self.csv.writerow(["text", "label", "score", *abstained, *[f"prob_{name}" for name in self.labels.names]])
        return self

    def write(self, record: dict) -> None:
        if not self.is_csv:
            self.handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            return
        label = record.get("label", ";".join(record.get("labels") or []))
        probs = record.get("probabilities", {})
        abstained = [str(record.get("abstained", False)).lower()] if self.abstains else []
        self.csv.writerow([record["text"], label or "", record.get("score", ""), *abstained,
                           *[probs[n] for n in self.labels.names]])

    def __exit__(self, *exc):
        return self.output.__exit__(*exc)


def dev_label_predictions(run_dir: str, dev_file: str):
    """(texts, gold label ids, (N, C) probabilities, label names) of a single-label classify run on its dev file
    (None for another label kind): what `bertkit diagnose` looks for suspect labels in."""
    return label_predictions(load_predictor(run_dir), predict_probabilities, dev_file)


def label_predictions(predictor, predict, dev_file: str):
    """dev_label_predictions of a loaded `predictor` (see write_predictions for what it has)."""
    # The model's own (uncalibrated) confidence: the errors it is sure of point at the labels, however honest the
    # calibrated probabilities are on average.
    predictor.temperature = None
    if predictor.labels.kind != "single":
        return None
    dataset, columns, _ = read_examples(dev_file, predictor.column_overrides, predictor.labels)
    texts = list(dataset[columns.text])
    pairs = list(dataset[columns.text_pair]) if columns.text_pair else None
    probs = predict(predictor, texts, pairs)
    return texts, [int(label) for label in dataset["labels"]], probs, list(predictor.labels.names)


# ================================================================================================ serving


class Endpoint(serving.Endpoint):
    """Texts or pairs in; label, score and every probability out (multi-label: the labels over the threshold)."""

    name = "classify"

    def __init__(self, run_dir: str):
        self.predictor = classifier = load_predictor(run_dir)
        # Whether the model reads pairs is known when its run named the pair column; TEI reads ["a", "b"] as one
        # pair, and so does bertkit then; otherwise a list of strings is a batch of single texts.
        self.takes_pairs = bool(classifier.column_overrides.get("text_pair_column"))
        self.count = serving.token_counter(classifier.tokenizer, classifier.max_length)
        self.info = {"labels": classifier.labels.names, "label_kind": classifier.labels.kind,
                     "pairs": self.takes_pairs, "max_length": classifier.max_length,
                     "long_doc": classifier.long_doc.strategy, "temperature": classifier.temperature,
                     "abstain_below": classifier.abstain_below}

    @property
    def form(self) -> tuple[str, ...]:
        return ("text", "text_pair") if self.takes_pairs else ("text",)

    def body_of(self, values: dict) -> dict:
        return {"inputs": [[values["text"], values["text_pair"]] if self.takes_pairs else values["text"]]}

    @staticmethod
    def one(value, where: str) -> tuple[str, str | None]:
        if isinstance(value, str):
            return serving.filled(value, where), None
        if isinstance(value, dict):
            if set(value) - {"text", "text_pair"} or "text" not in value:
                raise serving.InputError(f"{where}: an object input takes \"text\" (and \"text_pair\"), got "
                                 f"{sorted(value)}")
            pair = value.get("text_pair")
            return (serving.filled(value["text"], f"{where}.text"),
                    None if pair is None else serving.filled(pair, f"{where}.text_pair"))
        if isinstance(value, list) and len(value) in (1, 2):
            texts = [serving.filled(v, f"{where}[{i}]") for i, v in enumerate(value)]
            return texts[0], texts[1] if len(texts) == 2 else None
        raise serving.InputError(f"{where} must be a text, [text], [text, text_pair] or {{\"text\", \"text_pair\"}}")

    def parse(self, inputs) -> list:
        if isinstance(inputs, list) and self.takes_pairs and len(inputs) == 2 and \
                all(isinstance(v, str) for v in inputs):
            inputs = [inputs]  # TEI: ["a", "b"] is one pair
        examples = [self.one(value, f"inputs[{i}]") for i, value in enumerate(serving.items(inputs))]
        if len({pair is None for _, pair in examples}) > 1:
            raise serving.InputError("mixed inputs: give every input as a pair, or none")
        return examples

    def chars(self, example) -> int:
        return len(example[0]) + len(example[1] or "")

    def tokens(self, examples: list) -> list[int]:
        paired = examples[0][1] is not None
        return self.count([t for t, _ in examples], [p for _, p in examples] if paired else None)

    def predict(self, examples: list) -> list[dict]:
        labels, records = self.predictor.labels, [None] * len(examples)
        for paired in (False, True):  # a batch may join requests of pairs and of single texts
            indices = [i for i, (_, pair) in enumerate(examples) if (pair is not None) == paired]
            if indices:
                probs = predict_probabilities(self.predictor, [examples[i][0] for i in indices],
                                              [examples[i][1] for i in indices] if paired else None)
                for i, row in zip(indices, probs):
                    records[i] = describe_prediction(row, labels, labels.threshold,
                                                     self.predictor.abstain_below)
        return records


# ------------------------------------------------------------------------------------------------ its audit


class Audit:
    """`bertkit audit classify`: a classification training file as the audit sees it: texts and labels read as the
    recipe reads them, and the file as written (`raw`), whose rows the output files copy with only the label cell
    changed."""

    unit = "rows"
    columns_out = ["line", "text", "given", "suggested", "score"]

    def __init__(self, cfg):
        if not cfg.data.train:
            raise BertkitError("no training data — set data.train=<file> (csv, tsv, json, jsonl, parquet)")
        self.path = cfg.data.train
        dataset, self.columns, self.labels = read_examples(
            self.path, dataclasses.asdict(cfg.data.columns), None, require_label=True,
            label_kind=cfg.data.label_kind, delimiter=cfg.data.label_delimiter)
        self.check_labels()
        self.names = list(self.labels.names)
        self.raw = read_table(self.path)  # the same rows in the same order, as written (load_split drops none)
        self.texts = column_values(dataset, self.columns.text)
        self.pairs = column_values(dataset, self.columns.text_pair) if self.columns.text_pair else None
        self.given = column_values(dataset, "labels")  # class ids, or multi-hot rows
        self.raw_labels = column_values(self.raw, self.columns.label)
        self.raw_class = {}  # single-label: class id -> the label as the file writes it (1, "positive", an id)
        if self.labels.kind == "single":
            for value, raw in zip(self.given, self.raw_labels):
                self.raw_class.setdefault(value, raw)
        self.thresholds = np.full(len(self.texts), 0.5)  # multi-label: each row's fold model's threshold
        suffix = Path(self.path).suffix.lower()
        self.suffix = suffix if Path(self.path).is_file() and suffix in (".csv", ".tsv", ".json", ".jsonl",
                                                                          ".parquet") else ".parquet"
        self.json_array = self.suffix == ".json" and is_json_array(self.path)
        if self.pairs is not None:
            self.columns_out = ["line", "text", "text_pair", "given", "suggested", "score"]

    @property
    def size(self) -> int:
        return len(self.texts)

    def check_labels(self) -> None:
        column = f"column '{self.columns.label}' of data.train {self.path}"
        if self.labels.kind == "regression":
            raise BertkitError(f"{column} holds regression scores — the audit looks for rows in the wrong class: "
                               f"audit a column of classes (set data.label_kind=single if these numbers are classes)")
        if len(self.labels.names) < 2:
            raise BertkitError(f"{column} has one class ({self.labels.names[0]!r}) — the audit compares classes, "
                               f"so it needs at least two")

    def folds(self, folds: int, seed: int):
        check_fold_count(folds, self.size, self.unit, self.path)
        if self.labels.kind != "single":
            return kfold(self.size, folds, seed)
        counts = Counter(self.given)
        smallest, count = min(counts.items(), key=lambda item: (item[1], item[0]))
        if folds > count:
            fewer = f"set audit.folds={count} or fewer, or " if count >= 2 else ""
            raise BertkitError(f"audit.folds={folds} is more than the {count} row{'s' * (count > 1)} of class "
                               f"{self.labels.names[smallest]!r} in data.train {self.path}: stratified folds need a "
                               f"row of every class in each — {fewer}add rows of that class")
        return kfold(self.size, folds, seed, np.asarray(self.given))

    def write(self, rows, target: Path, relabel: dict | None = None) -> Path:
        """The training file's `rows` (in file order) at `target`, in the input's format; `relabel`: row -> the
        label cell to write instead."""
        records = self.raw.select([int(r) for r in rows]).to_list()
        for record, row in zip(records, rows):
            if relabel and int(row) in relabel:
                record[self.columns.label] = relabel[int(row)]
        target.parent.mkdir(parents=True, exist_ok=True)
        if self.suffix in (".csv", ".tsv"):
            with open(target, "w", encoding="utf-8", newline="") as handle:
                writer = csv.writer(handle, delimiter="\t" if self.suffix == ".tsv" else ",")
                writer.writerow(self.raw.column_names)
                writer.writerows([["" if r[c] is None else r[c] for c in self.raw.column_names] for r in records])
        elif self.suffix == ".parquet":  # also a Hub dataset: its features (ClassLabel names) travel along
            datasets.Dataset.from_list(records, features=self.raw.features).to_parquet(str(target))
        else:
            write_json_records(records, target, self.json_array)
        return target

    def predict(self, model_dir: Path, rows, batch_size: int) -> list[np.ndarray]:
        """Each held-out row's probabilities from the fold's model, columns in the training file's label order."""
        classifier = load_predictor(str(model_dir))
        texts = [self.texts[i] for i in rows]
        pairs = [self.pairs[i] for i in rows] if self.pairs is not None else None
        probs = predict_probabilities(classifier, texts, pairs, batch_size)
        self.thresholds[rows] = classifier.labels.threshold
        return list(by_name(probs, classifier.labels.names, self.labels.names, self.labels.kind == "single"))

    def issues(self, predictions: list[np.ndarray]) -> tuple[list[Issue], dict]:
        """The likely label errors, worst first, and row -> the relabelled label cell."""
        probs, names = np.stack(predictions), self.labels.names
        if self.labels.kind == "single":
            found = single_label_issues(np.asarray(self.given), probs)
            relabel = {row: self.raw_class[suggested] for row, suggested, _ in found}
            shown = [(row, names[self.given[row]], names[suggested], score) for row, suggested, score in found]
        else:
            given = [[int(c) for c in np.flatnonzero(np.asarray(hot) > 0.5)] for hot in self.given]
            found = multi_label_issues(given, probs, self.thresholds)
            relabel = {row: self.multi_cell(row, [names[c] for c in suggested]) for row, suggested, _ in found}
            shown = [(row, self.joined(given[row]), self.joined(suggested), score) for row, suggested, score in found]
        return [self.issue(row, given, suggested, score) for row, given, suggested, score in shown], relabel

    def agreement(self, predictions: list[np.ndarray]) -> tuple[float, float]:
        """(how often the fold models' out-of-fold prediction is the given label, the same for always answering the
        commonest one): per row for single-label, per (row, label) decision for multi-label."""
        probs = np.stack(predictions)
        if self.labels.kind == "single":
            given = np.asarray(self.given)
            return float((probs.argmax(1) == given).mean()), float(np.bincount(given).max() / len(given))
        hot = np.asarray(self.given) > 0.5
        chosen = probs >= self.thresholds[:, None]
        return float((chosen == hot).mean()), float(np.maximum(hot.mean(0), 1 - hot.mean(0)).mean())

    def issue(self, row: int, given: str, suggested: str, score: float) -> Issue:
        text = self.texts[row] if self.pairs is None else f"{self.texts[row]} ||| {self.pairs[row]}"
        return Issue(row, row_location(self.raw, row), text, given, suggested, score, pairs=[(given, suggested)])

    def issue_row(self, issue: Issue) -> list:
        texts = [self.texts[issue.row]] + ([self.pairs[issue.row]] if self.pairs is not None else [])
        return [location_number(issue.where), *texts, issue.given, issue.suggested, round(issue.score, 6)]

    def joined(self, ids: list[int]) -> str:
        """Multi-label class ids as one string for people: 'billing;returns', or '(none)'."""
        return self.labels.delimiter.join(self.labels.names[c] for c in ids) or "(none)"

    def multi_cell(self, row: int, names: list[str]):
        """Multi-label names as the file writes this row's labels: a list (of ClassLabel ids, for a Hub dataset's
        feature), or one string joined by data.label_delimiter."""
        if not isinstance(self.raw_labels[row], list):
            return self.labels.delimiter.join(names)
        inner = getattr(self.raw.features[self.columns.label], "feature", None)
        return [inner.str2int(name) for name in names] if isinstance(inner, datasets.ClassLabel) else names

# ------------------------------------------------------------------------------------------------ its report


class Report(reporting.Report):
    """The classify part of report.html: per-class bars, the confusion matrix, the confidently wrong dev examples,
    the multi-label threshold curve or the regression scatter, and the data as the run read it."""

    shows_data = True

    def chance(self, view, examples: dict) -> tuple[float, str] | None:
        """Always answering the majority class: its share (accuracy), its F1 over the classes (macro F1)."""
        if view.metric not in ("accuracy", "macro_f1"):
            return None
        rows = reporting.read_json(view.path / "confusion_matrix.json", {}).get("matrix")
        if not rows:
            return None
        totals = [sum(row) for row in rows]
        share = max(totals) / max(sum(totals), 1)
        if view.metric == "accuracy":
            return share, "always answering the majority class"
        return 2 * share / (1 + share) / len(rows), "macro F1 of always answering the majority class"

    # the model the dev examples come from, and its probabilities (the few-shot task's Report gives its own)
    load_predictor = staticmethod(load_predictor)
    predict_probabilities = staticmethod(predict_probabilities)

    def examples(self, view) -> dict:
        why = reporting.cannot_run_on_dev(view)
        if why:
            return {"why": why}
        classifier = self.load_predictor(str(view.path))
        dataset, columns, _ = read_examples(view.dev_file, classifier.column_overrides, classifier.labels)
        texts = list(dataset[columns.text])
        pairs = list(dataset[columns.text_pair]) if columns.text_pair else None
        probs = self.predict_probabilities(classifier, texts, pairs)
        kind, gold = classifier.labels.kind, dataset["labels"]
        out = {"kind": kind, "texts": texts, "names": list(classifier.labels.names or [])}
        if kind == "single":
            out.update(gold=[int(g) for g in gold], probs=probs)
            out["predicted"] = [out["names"][int(i)] for i in probs.argmax(axis=1)]
        elif kind == "regression":
            out["scatter"] = [(float(g), float(p)) for g, p in zip(gold, np.asarray(probs).reshape(-1))]
            out["predicted"] = [round(float(p), 4) for p in np.asarray(probs).reshape(-1)]
        else:
            out["threshold_curve"] = self.threshold_curve(np.asarray(gold).astype(int), probs)
            threshold = classifier.labels.threshold or 0.5
            out["predicted"] = [tuple(n for n, p in zip(out["names"], row) if p >= threshold) for row in probs]
        out["keys"] = [f"{t} | {p}" if pairs else t for t, p in zip(texts, pairs or texts)]
        return {**out, **self.data(classifier, reporting.train_file(view), dataset, columns)}

    @staticmethod
    def threshold_curve(refs: np.ndarray, probs: np.ndarray) -> list[tuple[float, float]]:
        """(threshold, micro F1) of a multi-label classifier over thresholds 0.05 ... 0.95."""
        curve = []
        for threshold in np.round(np.arange(0.05, 0.951, 0.05), 2):
            chosen = probs >= threshold
            tp = float((chosen & (refs == 1)).sum())
            fp, fn = float((chosen & (refs == 0)).sum()), float((~chosen & (refs == 1)).sum())
            curve.append((float(threshold), 2 * tp / (2 * tp + fp + fn) if tp else 0.0))
        return curve

    @staticmethod
    def data(classifier, train_path: str | None, dev_set, columns) -> dict:
        """The data view: the training file read as the run read it (labels, lengths, quality)."""
        from bertkit.labels import label_distribution
        from bertkit.tokenization import token_lengths
        from bertkit.splits import duplicate_and_overlap_report

        if not train_path or not Path(train_path).is_file():
            return {"data_why": f"its training file {train_path} is not there any more" if train_path else
                    "the training data was not a local file"}
        train, train_columns, _ = read_examples(train_path, classifier.column_overrides, classifier.labels)
        texts = list(train[train_columns.text])
        pairs = list(train[train_columns.text_pair]) if train_columns.text_pair else None
        return {"data": {
            "labels": {"train": label_distribution(train, classifier.labels),
                       "dev": label_distribution(dev_set, classifier.labels)},
            "label_unit": "rows", "length_unit": "texts",
            "over": "of training texts over one window (chunked)" if classifier.long_doc.strategy == "chunk" else
            f"of training texts truncated ({classifier.long_doc.strategy})",
            "lengths": [int(n) for n in token_lengths(classifier.tokenizer, texts, pairs)],
            "max_length": classifier.max_length,
            "quality": duplicate_and_overlap_report(train, dev_set, columns)}}

    def sections(self, view, examples: dict, diagnosis) -> str:
        kind = examples.get("kind") or ("single" if (view.path / "confusion_matrix.json").is_file() else None)
        parts = []
        rows = per_class_rows(view.eval)
        if kind in (None, "single") or rows:
            parts.append(section("Per-class precision, recall and F1",
                                 bar_chart(rows, ["precision", "recall", "F1"], "per-class scores") if rows else
                                 missing("no per-class scores in metrics.json"), 3))
        if kind in (None, "single"):
            matrix = reporting.read_json(view.path / "confusion_matrix.json", {})
            if matrix.get("matrix"):
                body = heat_map(matrix["labels"], matrix["matrix"])
            elif matrix.get("format") == "sparse":
                body = table(["gold", "predicted", "count"], [[c["true"], c["predicted"], c["count"]]
                                                               for c in matrix.get("confusions", [])])
            else:
                body = missing("no confusion_matrix.json")
            parts.append(section("Confusion matrix", body, 3))
            parts.append(section("Confidently wrong on dev", self.confident_errors(diagnosis, examples), 3))
        if kind == "multi":
            parts.append(section("Multi-label threshold", self.threshold(view, examples), 3))
        if kind == "regression":
            points = examples.get("scatter") or []
            parts.append(section("Gold against predicted", scatter(points, "regression", "gold", "predicted")
                                 if points else
                                 missing("no dev predictions (the dev file is not there, or the run had none)"), 3))
        return "".join(parts)

    @staticmethod
    def confident_errors(diagnosis, examples: dict) -> str:
        if diagnosis is None or not examples.get("texts"):
            return missing(examples.get("why") or
                           "no dev predictions (the dev file is not there, or the run is training)")
        confident = calibration.CONFIDENT
        parts = [f"<p>wrong at probability {confident} or more, grouped gold → predicted</p>" if diagnosis.errors
                 else f"<p>none: no wrong dev prediction at probability {confident} or more</p>"]
        for gold, predicted, count, texts in diagnosis.errors[:SHOWN_EXAMPLES]:
            items = "".join(f'<div class="ex">{esc(text)}</div>' for text in texts)
            parts.append(f"<h4>{esc(gold)} → {esc(predicted)}: {count}</h4>{items}")
        names, probs = examples["names"], examples["probs"]
        wrong = sorted(((float(row.max()), text, names[label], names[int(row.argmax())])
                        for text, label, row in zip(examples["texts"], examples["gold"], probs)
                        if int(row.argmax()) != label), key=lambda item: -item[0])
        if wrong:
            rows = [[text, gold, predicted, round(p, 3)] for p, text, gold, predicted in wrong[:SHOWN_EXAMPLES]]
            parts.append(f"<h4>every wrong dev prediction, the most confident first ({len(wrong)} of "
                         f"{len(probs)})</h4>" + table(["text", "gold", "predicted", "probability"], rows))
        return "".join(parts)

    @staticmethod
    def threshold(view, examples: dict) -> str:
        threshold = view.metrics.get("threshold")
        curve = examples.get("threshold_curve") or []
        text = f"<p>decision threshold in force: {fmt(threshold)} (tuned on dev)</p>" if threshold is not None else ""
        if not curve:
            return text + missing("no threshold curve (no dev predictions)")
        marks = [(threshold, "tuned")] if isinstance(threshold, (int, float)) else []
        chart = line_chart([("micro F1", curve)], "micro F1 by threshold", "micro F1", marks, height=200)
        return text + chart.replace(">step<", ">threshold<")



__all__ = ["read_examples", "encode", "compute_metrics_fn", "Settings", "load_predictor", "predict_file",
           "evaluate_file", "LongDocConfig", "first_windows", "Classifier", "predict_probabilities", "pop_doc_ids",
           "SELECTION_METRIC", "DEFAULT_THRESHOLD", "probabilities", "document_probabilities", "score",
           "final_evaluation", "describe_prediction", "uses_attention", "DocumentCollator", "document_logits",
           "DevPredictions", "window_rows", "document_rows", "decide", "read_model_settings", "model_class",
           "FinalEvaluation", "slice_metrics", "document_lengths", "label_counts", "check_min_confidence",
           "class_weights", "dev_label_predictions", "Endpoint", "Report", "Audit", "write_predictions",
           "file_metrics", "label_predictions"]
