"""Few-shot classification: SetFit (Tunstall et al. 2022) through the `setfit` package. A sentence-embedding body is
fine-tuned contrastively on pairs built from a few labelled texts (same label: similar; different: not), then a
light head (scikit-learn's logistic regression; one-vs-rest for multi-label) is fitted on its vectors. With 8-64
texts per class it is far steadier than fine-tuning a fresh classification head (docs/benchmarks.md#fewshot).

A run saves SetFit's own folder: the sentence-transformers body, `model_head.pkl` and `config_setfit.json`, so
`SetFitModel.from_pretrained(path)` loads it without bertkit and gives the same probabilities. bertkit's settings
(label kind, columns, the dev-fitted temperature, the multi-label threshold, abstain_below) ride in config.json under
`bertkit_task_settings`, which stock libraries ignore. The texts, labels and files are classify's
(bertkit/tasks/classify.py: `read_examples`, the label space, the prediction records), so predict, evaluate and serve
answer as a classify run does; only the model differs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

import datasets
import numpy as np
from pydantic import Field

from bertkit import calibration
from bertkit.console import ExamplesProgress
from bertkit.errors import BertkitError
from bertkit.labels import LabelSpace
from bertkit.metrics import best_threshold, classification_report_text, confusion_matrix_table
from bertkit.rundir import check_output_path, write_json
from bertkit.tasks import classify, read_settings, reporting, serving
from bertkit.tasks.classify import (DEFAULT_THRESHOLD, SELECTION_METRIC, checked_temperatures, describe_prediction,
                                    probabilities, read_examples, score)
from bertkit.tasks.long_documents import LongDocConfig

SETFIT_FILE = "config_setfit.json"  # what tells a SetFit folder from another sentence-transformers one
HEAD_FILE = "model_head.pkl"
MODEL_FILES = (SETFIT_FILE, HEAD_FILE)  # what a push uploads and an export copies besides the body's files


# ------------------------------------------------------------------------------------------------ settings


@dataclass
class Settings:
    label_kind: Literal["single", "multi"] = "single"
    """single-label (one logistic regression) or multi-label (one per label, one-vs-rest)."""
    threshold: Annotated[float, Field(gt=0, lt=1)] = DEFAULT_THRESHOLD
    """Multi-label: a label is given at this probability or more (tuned on dev)."""
    text_column: str | None = None
    """Column holding the text (None: auto-detected)."""
    label_column: str | None = None
    """Column holding the label of a file to evaluate (None: auto-detected)."""
    temperature: list[Annotated[float, Field(gt=0)]] | None = None
    """Log-probabilities are divided by this before the softmax / sigmoid (fitted on dev; one per label for
    multi-label)."""
    abstain_below: Annotated[float, Field(gt=0, lt=1)] | None = None
    """Rows whose confidence is below this get no label, marked abstained (predict --min-confidence overrides)."""

    def columns(self) -> dict:
        """The column overrides classify's read_examples takes (a few-shot model reads single texts)."""
        return {"text_column": self.text_column, "text_pair_column": None, "label_column": self.label_column}

    def check(self) -> None:
        """Field ranges are checked as the settings are read (tasks.read_settings); nothing else can clash."""


# ------------------------------------------------------------------------------------------------ encoding


def encode(split, columns) -> datasets.Dataset:
    """A read classification split as SetFit trains on it: `text` and `label` (an id, or a multi-hot list)."""
    if columns.text_pair:
        raise BertkitError(f"the data has a second text column ({columns.text_pair}): the few-shot recipe embeds one "
                           "text per row — join the two texts into one column, or use `bertkit run classify` for "
                           "sentence pairs")
    labels = [list(map(int, value)) if isinstance(value, (list, tuple)) else int(value) for value in split["labels"]]
    return datasets.Dataset.from_dict({"text": list(split[columns.text]), "label": labels})


def compute_metrics_fn(label_space: LabelSpace, threshold: float = DEFAULT_THRESHOLD):
    """(probabilities, references) -> the classify metrics of the label kind (accuracy, macro F1, per class...)."""
    return lambda probs, references: score(probs, references, label_space, threshold)


def check_few_shot_labels(train, labels: LabelSpace) -> None:
    """Every label needs rows of its own (a class the head never saw has no column in its probabilities); a
    multi-label one also rows without it."""
    counts = classify.label_counts(train, labels)
    missing = [name for name, count in zip(labels.names, counts) if count == 0]
    if missing:
        raise BertkitError(f"label(s) {', '.join(missing)} have no training row: the few-shot head learns each label "
                           "from its own rows — give at least one (better 8+) per label, or drop the label")
    if labels.kind == "multi":
        always = [name for name, count in zip(labels.names, counts) if count == len(train)]
        if always:
            raise BertkitError(f"label(s) {', '.join(always)} are on every training row: a one-vs-rest head needs "
                               "rows without them too")


# ------------------------------------------------------------------------------------------------ the dev split


@dataclass
class DevEvaluation:
    """What the dev split says of the trained model and decides for predict (classify's FinalEvaluation, for a
    model that gives probabilities, not logits)."""

    metrics: dict
    files: dict = field(default_factory=dict)
    threshold: float | None = None
    temperature: list[float] | None = None
    calibration: dict = field(default_factory=dict)


def log_odds(probs: np.ndarray, kind: str) -> np.ndarray:
    """The head's probabilities as the logits a temperature divides: log p (single: the softmax of log p is p
    again), log(p / (1 - p)) per label (multi: the sigmoid of it is p again)."""
    probs = np.clip(np.asarray(probs, dtype=np.float64), 1e-7, 1 - 1e-7)
    return (np.log(probs) if kind == "single" else np.log(probs / (1 - probs))).astype(np.float32)


def dev_evaluation(raw: np.ndarray, references: np.ndarray, labels: LabelSpace, calibrate: bool) -> DevEvaluation:
    """Dev metrics of the head's probabilities `raw`; with `calibrate`, the temperature fitted first; for
    multi-label, the threshold that maximises micro-F1 next; single-label: the report files."""
    result = DevEvaluation(metrics={})
    logits, probs = log_odds(raw, labels.kind), raw
    if calibrate:
        def to_probabilities(scaled):
            return probabilities(scaled, labels.kind)

        result.temperature = checked_temperatures(
            calibration.fit_temperatures(logits, references, labels.kind, to_probabilities), labels)
    if result.temperature:
        probs = probabilities(logits, labels.kind, result.temperature)
        result.calibration = {
            "temperature": result.temperature[0] if labels.kind == "single" else result.temperature,
            "ece_before": calibration.expected_calibration_error(raw, references, labels.kind),
            "ece": calibration.expected_calibration_error(probs, references, labels.kind),
            "coverage": calibration.coverage_table(probs, references, labels.kind)}
    threshold = DEFAULT_THRESHOLD
    if labels.kind == "multi":
        result.threshold = threshold = best_threshold(probs, references.astype(int))
    result.metrics = score(probs, references, labels, threshold)
    if labels.kind == "single":
        predicted = probs.argmax(-1)
        result.files["classification_report.txt"] = classification_report_text(references, predicted, labels.names)
        result.files["confusion_matrix.json"] = confusion_matrix_table(references, predicted, labels.names)
    return result


# ------------------------------------------------------------------------------------------------ predict


@dataclass
class FewShot:
    """A trained few-shot classifier with the settings it was trained under; the attributes classify's report and
    endpoint read (tokenizer, max_length, long_doc, column_overrides) mean what they mean there."""

    setfit: object  # setfit.SetFitModel: its sentence-transformers body and its scikit-learn head
    labels: LabelSpace
    column_overrides: dict
    temperature: list[float] | None = None
    abstain_below: float | None = None
    long_doc: LongDocConfig = field(default_factory=LongDocConfig)  # texts are cut at max_length (head)

    @property
    def model(self):
        """The body (a torch module, as every predictor's model is: serve reads its class and parameters)."""
        return self.setfit.model_body

    @property
    def tokenizer(self):
        return self.model.tokenizer

    @property
    def max_length(self) -> int:
        return int(self.model.max_seq_length)


class ExportedSetFit:
    """A few-shot export (`bertkit export`): the body's ONNX graph, pooling and normalisation inside
    (onnx_model.OnnxEmbedder), and the scikit-learn head beside it, behind the part of SetFitModel's interface that
    predict uses."""

    def __init__(self, export_dir: str):
        import joblib

        from bertkit.checkpoints import LOAD_PRECISION
        from bertkit.onnx_model import load_onnx_embedder

        saved = reporting.read_json(Path(export_dir) / SETFIT_FILE, {})
        self.model_body = load_onnx_embedder(export_dir, LOAD_PRECISION.get())
        self.model_head = joblib.load(Path(export_dir) / HEAD_FILE)  # setfit's own format (a pickle, as it saves)
        self.labels, self.normalize_embeddings = saved.get("labels"), bool(saved.get("normalize_embeddings"))

    def predict_proba(self, texts: list[str], batch_size: int = 64, **_) -> np.ndarray:
        vectors = self.model_body.encode(texts, batch_size=batch_size, normalize_embeddings=self.normalize_embeddings)
        return np.asarray(self.model_head.predict_proba(vectors), dtype=np.float32)


def load_predictor(model_dir: str) -> FewShot:
    """The SetFit model of a run directory (or of its ONNX export), with bertkit's settings from its config.json."""
    from bertkit.onnx_model import is_onnx_export
    from bertkit.rundir import read_config_json

    if not (Path(model_dir) / HEAD_FILE).is_file():
        raise BertkitError(f"{model_dir} has {SETFIT_FILE} but no {HEAD_FILE}: the few-shot head is missing — "
                           "retrain, or copy the whole run directory")
    config = read_config_json(Path(model_dir) / "config.json")
    settings = read_settings(Settings, config, str(Path(model_dir) / "config.json"))
    if is_onnx_export(model_dir):
        model = ExportedSetFit(model_dir)
    else:
        from setfit import SetFitModel

        model = SetFitModel.from_pretrained(model_dir, local_files_only=True)
    names = [str(name) for name in (model.labels or [])]
    if not names:
        raise BertkitError(f"{model_dir}/{SETFIT_FILE} names no labels — retrain with `bertkit run fewshot`")
    labels = LabelSpace(settings.label_kind, names, threshold=settings.threshold)
    return FewShot(model, labels, settings.columns(), settings.temperature, settings.abstain_below)


def predict_probabilities(predictor: FewShot, texts: list[str], pairs=None, batch_size: int = 64,
                          progress: ExamplesProgress | None = None) -> np.ndarray:
    """(N, C) probabilities in input order: the head's, calibrated by the run's temperature."""
    if pairs:
        raise BertkitError("a few-shot model reads single texts, and these rows are pairs — give one text per row")
    raw = np.asarray(predictor.setfit.predict_proba(texts, batch_size=batch_size, as_numpy=True,
                                                   show_progress_bar=False), dtype=np.float32)
    if progress is not None:
        progress.advance(len(texts))
    if not predictor.temperature:
        return raw
    return probabilities(log_odds(raw, predictor.labels.kind), predictor.labels.kind, predictor.temperature)


def predict_file(model_dir: str, input_path: str, output_path: str, batch_size: int = 64,
                 min_confidence: float | None = None) -> int:
    """One record per input row (label, score, every probability), as classify writes them."""
    output_path = check_output_path(output_path, inputs=[input_path], model_dirs=[model_dir])
    return classify.write_predictions(load_predictor(model_dir), predict_probabilities, input_path, output_path,
                                      batch_size, min_confidence)


def evaluate_file(model_dir: str, input_path: str, output_path: str | None = None, batch_size: int = 64) -> dict:
    """Metrics of the model on a labelled file (classify's), with the calibration error and coverage."""
    if output_path:
        output_path = check_output_path(output_path, inputs=[input_path], model_dirs=[model_dir], what="metrics")
    metrics, rows = classify.file_metrics(load_predictor(model_dir), predict_probabilities, input_path, batch_size)
    if output_path:
        write_json(Path(output_path), {"file": str(input_path), "examples": rows, **metrics})
    return metrics


def dev_label_predictions(run_dir: str, dev_file: str):
    """(texts, gold label ids, (N, C) probabilities, label names) of a single-label run on its dev file (None for
    multi-label): what `bertkit diagnose` looks for suspect labels in, as for classify."""
    return classify.label_predictions(load_predictor(run_dir), predict_probabilities, dev_file)


PARITY_TEXTS = ["a", "A warm, funny and moving film.", "The plot goes nowhere and the jokes fall flat; " * 10]


def onnx_graph(run_dir: str):
    """`bertkit export` of a few-shot model: the body as an embedding model's graph (pooling and normalisation
    inside: bertkit/tasks/embed_export.py), the scikit-learn head copied beside it; checked as predict runs it,
    probabilities against the PyTorch model's."""
    from .embed_export import onnx_graph as embedding_graph

    graph = embedding_graph(run_dir)
    check_embeddings = graph.check

    def check(export_dir: Path) -> dict:
        from bertkit.onnx_model import PARITY_TOLERANCE

        differences = check_embeddings(export_dir)
        exported, reference = load_predictor(str(export_dir)), load_predictor(run_dir)
        exported.temperature = reference.temperature = None  # the head's own probabilities
        worst = float(np.abs(predict_probabilities(exported, PARITY_TEXTS)
                             - predict_probabilities(reference, PARITY_TEXTS)).max())
        if worst > PARITY_TOLERANCE:
            raise BertkitError(f"the ONNX export's probabilities differ from the PyTorch model's by {worst:.2e} (more "
                               f"than {PARITY_TOLERANCE:g}) — please report it with the run's {SETFIT_FILE}")
        return {**differences, "probabilities": worst}

    graph.check, graph.files, graph.dev_metrics = check, MODEL_FILES, True
    return graph


# ================================================================================================ serving


class Endpoint(classify.Endpoint):
    """classify's /predict (texts in; label, score and every probability out), answered by the few-shot model."""

    name = "fewshot"

    def __init__(self, run_dir: str):
        self.predictor = predictor = load_predictor(run_dir)
        self.takes_pairs = False
        self.count = serving.token_counter(predictor.tokenizer, predictor.max_length)
        self.info = {"labels": predictor.labels.names, "label_kind": predictor.labels.kind, "pairs": False,
                     "max_length": predictor.max_length, "temperature": predictor.temperature,
                     "abstain_below": predictor.abstain_below, "method": "setfit"}

    def parse(self, inputs) -> list:
        examples = super().parse(inputs)
        if any(pair is not None for _, pair in examples):
            raise serving.InputError("a few-shot model reads single texts: give each input as one text")
        return examples

    def predict(self, examples: list) -> list[dict]:
        probs = predict_probabilities(self.predictor, [text for text, _ in examples])
        labels = self.predictor.labels
        return [describe_prediction(row, labels, labels.threshold, self.predictor.abstain_below) for row in probs]


# ------------------------------------------------------------------------------------------------ its report


class Report(classify.Report):
    """classify's part of report.html (per-class bars, confusion matrix, confidently wrong dev texts, the data),
    with the few-shot model's dev predictions."""

    load_predictor = staticmethod(load_predictor)
    predict_probabilities = staticmethod(predict_probabilities)


class Card(reporting.Card):
    """The few-shot part of the model card: a SetFit model, loaded and used through the setfit package."""

    tag = "text-classification"
    tags = ["setfit", "sentence-transformers", "few-shot"]
    library = "setfit"
    intended_use = ("assigns one of the labels below to a piece of text; it was trained from a few labelled examples "
                    "per class (SetFit), so check it on more of your own data before relying on it")
    TEXTS = {"zh": ["这部电影真好看！", "剧情拖沓，不推荐。"],
             "en": ["This movie was great!", "Dull and far too long."]}

    def note(self) -> str:
        return ("It is a SetFit model (a sentence-transformers body fine-tuned contrastively on pairs of the few "
                "labelled examples, then a scikit-learn logistic-regression head): `SetFitModel.from_pretrained(path)` "
                "loads it with no custom code. `bertkit predict` divides its log-probabilities by the temperature "
                "fitted on dev when the run calibrated (config.json's `bertkit_task_settings`).")

    def usage(self, repo: str, lang: str) -> str:
        import json

        lines = ["from setfit import SetFitModel", "", f'model = SetFitModel.from_pretrained("{repo}")',
                 f"texts = {json.dumps(self.TEXTS[lang], ensure_ascii=False)}",
                 "print(model.predict(texts))        # labels",
                 "print(model.predict_proba(texts))  # one probability per label, in model.labels order"]
        return "```python\n" + "\n".join(lines) + "\n```"


__all__ = ["read_examples", "encode", "compute_metrics_fn", "Settings", "load_predictor", "predict_file",
           "evaluate_file", "DEFAULT_THRESHOLD", "SETFIT_FILE", "HEAD_FILE", "MODEL_FILES", "SELECTION_METRIC",
           "check_few_shot_labels", "DevEvaluation", "dev_evaluation", "log_odds", "FewShot",
           "predict_probabilities", "ExportedSetFit", "dev_label_predictions", "onnx_graph", "Endpoint", "Report",
           "Card"]
