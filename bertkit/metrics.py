"""Offline metrics: classification, multi-label, regression, NER entity F1 and SQuAD / CMRC answer EM/F1.

`evaluate.load("accuracy")` fetches a script from the Hub and fails offline, so every metric here is an
`evaluate.Metric` subclass that is instantiated directly and computes with scikit-learn, scipy or seqeval:

    ClassificationMetric().compute(predictions=logits.argmax(-1), references=labels, label_names=names)

Each metric keeps its inputs in memory (no cache files under ~/.cache) and turns bad input (mismatched lengths,
nothing to score, logits where ids belong) into a one-line `BertkitError` before `evaluate` sees it.

Bottom up: the input checks and the offline `evaluate.Metric` base; classification (single-label, multi-label,
regression) with the plain helpers recipes print or tune with (per-class report, confusion matrix, multi-label
decision threshold); named-entity recognition with seqeval; extractive question answering; a metric by task name.
"""

import re
import string
import unicodedata
import warnings
from collections import Counter

import datasets
import evaluate
import numpy as np
from scipy import stats
from seqeval import metrics as seqeval_metrics
from seqeval import scheme as seqeval_scheme
from sklearn import metrics as skm

from bertkit.errors import BertkitError


# ================================================================================================================
# The offline `evaluate.Metric` base every bertkit metric subclasses (inputs kept in memory), and the input
# checks that turn bad input into a one-line `BertkitError` before `evaluate` sees it


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


# ================================================================================================================
# Classification metrics (single-label, multi-label, regression) and the plain helpers recipes print or
# tune with: the per-class report, the confusion matrix, the multi-label decision threshold


# ----------------------------------------------------------------------------------------------------------------
# Single-label classification


def _resolve_labels(references, predictions, labels, label_names):
    """The class ids to score: `labels` if given, else one per name, else whatever occurs (sklearn's default)."""
    if labels is not None and label_names is not None and len(labels) != len(label_names):
        raise BertkitError(f"got {len(labels)} labels but {len(label_names)} label_names: pass one name per label id")
    if labels is not None:
        return list(labels)
    if label_names is None:
        return None
    check_ids_in_range(references, len(label_names), "references")
    check_ids_in_range(predictions, len(label_names), "predictions")
    return list(range(len(label_names)))


def _f1(y_true, y_pred, average, labels=None):
    # zero_division=0: a class never predicted scores 0 instead of warning on every eval step
    return float(skm.f1_score(y_true, y_pred, labels=labels, average=average, zero_division=0))


def _averaged_scores(y_true, y_pred, labels):
    macro = dict(labels=labels, average="macro", zero_division=0)
    return {
        "accuracy": float(skm.accuracy_score(y_true, y_pred)),
        "macro_f1": _f1(y_true, y_pred, "macro", labels),
        "micro_f1": _f1(y_true, y_pred, "micro", labels),
        "weighted_f1": _f1(y_true, y_pred, "weighted", labels),
        # one class in both (a small slice): MCC is 0 by definition, and sklearn would warn about it
        "mcc": float(skm.matthews_corrcoef(y_true, y_pred)) if len(np.union1d(y_true, y_pred)) > 1 else 0.0,
        "macro_precision": float(skm.precision_score(y_true, y_pred, **macro)),
        "macro_recall": float(skm.recall_score(y_true, y_pred, **macro)),
    }


# Per-class outputs stay bounded in the number of classes (5,000 classes once made a 225 MB confusion_matrix.json):
# up to PER_CLASS_LIMIT classes everything is per class; past it, metrics keep the PER_CLASS_SHOWN classes with the
# most dev examples, and the confusion matrix becomes a list of the TOP_CONFUSIONS largest off-diagonal cells.
# classification_report.txt keeps one line per class (linear, about 60 bytes a class).
PER_CLASS_LIMIT = 100
PER_CLASS_SHOWN = 20
TOP_CONFUSIONS = 100


def most_supported(support, shown: int = PER_CLASS_SHOWN) -> list[int]:
    """Indices of the `shown` largest supports, largest first (ties: lower index first)."""
    support = np.asarray(support)
    return [int(i) for i in np.lexsort((np.arange(len(support)), -support))[:shown]]


def _per_class_scores(y_true, y_pred, labels, label_names):
    precision, recall, f1, support = skm.precision_recall_fscore_support(
        y_true, y_pred, labels=labels, average=None, zero_division=0
    )
    kept = range(len(label_names))
    if len(label_names) > PER_CLASS_LIMIT:  # the classes with the most examples, in that order
        kept = most_supported(support[: len(label_names)])
    scores = {}
    for i in kept:
        name = label_names[i]
        scores.update({f"f1_{name}": float(f1[i]), f"precision_{name}": float(precision[i]),
                       f"recall_{name}": float(recall[i])})
    return scores


class ClassificationMetric(OfflineMetric):
    """Single-label classification: accuracy, micro/macro/weighted F1, MCC, macro precision/recall.

    compute(predictions=ids, references=ids, labels=None, label_names=None): `labels` restricts the averaged
    scores to those class ids; `label_names` (one per id, in id order) adds f1_/precision_/recall_<name> (past
    PER_CLASS_LIMIT classes, for the PER_CLASS_SHOWN classes with the most references only).
    """

    def _info(self):
        return metric_info(
            self.__doc__,
            datasets.Value("int64"),
            datasets.Value("int64"),
            "predictions, references: one class id per example.",
        )

    def _prepare_batch(self, predictions, references):
        return as_class_ids(predictions, "predictions"), as_class_ids(references, "references")

    def _compute(self, predictions, references, labels=None, label_names=None):
        check_not_empty(predictions)
        labels = _resolve_labels(references, predictions, labels, label_names)
        scores = _averaged_scores(references, predictions, labels)
        if label_names is not None:
            scores.update(_per_class_scores(references, predictions, labels, label_names))
        return scores


# ----------------------------------------------------------------------------------------------------------------
# Multi-label classification


class MultiLabelMetric(OfflineMetric):
    """Multi-label classification on 0/1 multi-hot rows: micro/macro/samples F1, subset accuracy, Hamming loss."""

    def _info(self):
        return metric_info(
            self.__doc__,
            datasets.List(datasets.Value("int8")),
            datasets.List(datasets.Value("int8")),
            "predictions, references: one 0/1 row of length num_labels per example.",
        )

    def _prepare_batch(self, predictions, references):
        return as_multi_hot(predictions, "predictions"), as_multi_hot(references, "references")

    def _compute(self, predictions, references):
        check_not_empty(predictions)
        y_pred, y_true = as_multi_hot(predictions, "predictions"), as_multi_hot(references, "references")
        if y_pred.shape != y_true.shape:  # batches added separately may disagree on width
            raise BertkitError(f"predictions are {y_pred.shape} but references {y_true.shape}: use one label set")
        return {
            "micro_f1": _f1(y_true, y_pred, "micro"),
            "macro_f1": _f1(y_true, y_pred, "macro"),
            "samples_f1": _f1(y_true, y_pred, "samples"),
            "subset_accuracy": float(skm.accuracy_score(y_true, y_pred)),
            "hamming_loss": float(skm.hamming_loss(y_true, y_pred)),
        }


# ----------------------------------------------------------------------------------------------------------------
# Regression


def _correlation(correlate, x, y):
    """A constant input has no correlation; scipy would warn and return nan, which breaks best-model selection."""
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return 0.0
    return float(correlate(x, y).statistic)


class RegressionMetric(OfflineMetric):
    """Regression: Pearson and Spearman correlation (0.0 when either side is constant), MSE, MAE."""

    def _info(self):
        return metric_info(
            self.__doc__,
            datasets.Value("float64"),
            datasets.Value("float64"),
            "predictions, references: one number per example ((N, 1) arrays are flattened).",
        )

    def _prepare_batch(self, predictions, references):
        return as_scores(predictions, "predictions"), as_scores(references, "references")

    def _compute(self, predictions, references):
        check_not_empty(predictions)
        y_pred, y_true = np.asarray(predictions, np.float64), np.asarray(references, np.float64)
        return {
            "pearson": _correlation(stats.pearsonr, y_pred, y_true),
            "spearman": _correlation(stats.spearmanr, y_pred, y_true),
            "mse": float(skm.mean_squared_error(y_true, y_pred)),
            "mae": float(skm.mean_absolute_error(y_true, y_pred)),
        }

# ----------------------------------------------------------------------------------------------------------------
# Plain helpers for recipes


def classification_report_text(y_true, y_pred, label_names):
    """sklearn's per-class precision/recall/F1 table as text, one row per name in id order."""
    check_pair(y_pred, y_true)
    check_not_empty(y_pred)
    for values, what in ((y_true, "y_true"), (y_pred, "y_pred")):
        check_ids_in_range(as_class_ids(values, what), len(label_names), what)
    return skm.classification_report(
        y_true, y_pred, labels=list(range(len(label_names))), target_names=list(label_names), digits=4, zero_division=0
    )


def confusion_matrix_table(y_true, y_pred, label_names, top: int = TOP_CONFUSIONS):
    """Up to PER_CLASS_LIMIT classes: {"labels": names, "matrix": counts}, matrix[i][j] = examples of true class i
    predicted as class j. Past it, a sparse form that never holds a classes x classes table: {"format": "sparse",
    "classes", "examples", "correct" (the diagonal's sum), "confusions": the `top` largest off-diagonal cells as
    {"true", "predicted", "count"}, largest first, "other_confusions" (the wrong predictions not listed)}."""
    check_pair(y_pred, y_true)
    check_not_empty(y_pred)
    for values, what in ((y_true, "y_true"), (y_pred, "y_pred")):
        check_ids_in_range(as_class_ids(values, what), len(label_names), what)
    if len(label_names) <= PER_CLASS_LIMIT:
        matrix = skm.confusion_matrix(y_true, y_pred, labels=list(range(len(label_names))))
        return {"labels": [str(name) for name in label_names], "matrix": matrix.tolist()}
    gold, predicted = as_class_ids(y_true, "y_true"), as_class_ids(y_pred, "y_pred")
    wrong = gold != predicted
    cells, counts = np.unique(gold[wrong].astype(np.int64) * len(label_names) + predicted[wrong], return_counts=True)
    order = np.lexsort((cells, -counts))[:top]
    confusions = [{"true": str(label_names[int(cells[i]) // len(label_names)]),
                   "predicted": str(label_names[int(cells[i]) % len(label_names)]), "count": int(counts[i])}
                  for i in order]
    return {"format": "sparse", "classes": len(label_names), "examples": int(len(gold)),
            "correct": int((~wrong).sum()), "confusions": confusions,
            "other_confusions": int(wrong.sum()) - sum(entry["count"] for entry in confusions)}


_THRESHOLD_GRID = np.round(np.arange(0.05, 0.951, 0.05), 2)  # 0.05, 0.10, ..., 0.95


def _check_probabilities(probs, refs):
    probs = np.asarray(probs, dtype=np.float64)
    if probs.shape != refs.shape:
        raise BertkitError(f"probs are {probs.shape} but multi_hot_refs {refs.shape}: pass one row per example")
    if probs.min() < 0 or probs.max() > 1:
        raise BertkitError("probs must lie in [0, 1]: apply a sigmoid to the logits first")
    return probs


def best_threshold(probs, multi_hot_refs, grid=None):
    """The one decision threshold (positive when prob >= t) with the best micro-F1 on held-out data.

    `grid` defaults to 0.05, 0.10, ..., 0.95; among equally good thresholds the one closest to 0.5 wins (then the
    lower one), so a flat F1 curve keeps the usual default.
    """
    check_pair(probs, multi_hot_refs)
    check_not_empty(probs)
    refs = as_multi_hot(multi_hot_refs, "multi_hot_refs")
    probs = _check_probabilities(probs, refs)
    grid = _THRESHOLD_GRID if grid is None else np.asarray(grid, dtype=np.float64)
    if grid.size == 0:
        raise BertkitError("grid is empty: pass at least one threshold, or grid=None for 0.05..0.95")
    f1 = np.array([skm.f1_score(refs, (probs >= t).astype(np.int64), average="micro", zero_division=0) for t in grid])
    tied_best = grid[np.isclose(f1, f1.max())]
    # Rounding the distance keeps float noise (0.45 vs 0.55) from breaking the tie arbitrarily.
    return float(min(tied_best, key=lambda t: (round(abs(t - 0.5), 9), t)))


# ================================================================================================================
# Named-entity recognition: entity-level precision/recall/F1 with seqeval, strict or conlleval-style


# BIOES is the same scheme as seqeval's IOBES under another name.
SEQEVAL_SCHEMES = {
    "IOB1": seqeval_scheme.IOB1,
    "IOB2": seqeval_scheme.IOB2,
    "IOE1": seqeval_scheme.IOE1,
    "IOE2": seqeval_scheme.IOE2,
    "IOBES": seqeval_scheme.IOBES,
    "BIOES": seqeval_scheme.IOBES,
    "BILOU": seqeval_scheme.BILOU,
}


def _seqeval_options(mode, scheme):
    """seqeval ignores `scheme` unless mode="strict"; a silently ignored option is a trap, so refuse it."""
    if mode not in (None, "strict"):
        raise BertkitError(f"unknown seqeval mode {mode!r}: use mode=None (conlleval) or mode='strict'")
    if mode is None:
        if scheme is not None:
            raise BertkitError(f"scheme={scheme!r} only applies in strict mode: also pass mode='strict'")
        return {}
    scheme = scheme or "IOB2"
    if scheme not in SEQEVAL_SCHEMES:
        raise BertkitError(f"unknown tagging scheme {scheme!r}: use one of {', '.join(SEQEVAL_SCHEMES)}")
    return {"mode": "strict", "scheme": SEQEVAL_SCHEMES[scheme]}


def _check_sentence_lengths(predictions, references):
    for i, (pred, ref) in enumerate(zip(predictions, references)):
        if len(pred) != len(ref):
            raise BertkitError(
                f"sentence {i} has {len(pred)} predicted tags but {len(ref)} gold tags: align tags to words first"
            )


def _seqeval_report(references, predictions, options):
    # An all-"O" set makes seqeval's macro average take the mean of nothing; that warning is noise here.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            return seqeval_metrics.classification_report(
                references, predictions, output_dict=True, zero_division=0, **options
            )
        except ValueError as err:  # strict mode: a tag that the scheme does not allow
            raise BertkitError(f"{err} (pass the scheme= that matches your tags)") from None


class SeqevalMetric(OfflineMetric):
    """Entity-level precision/recall/F1 (micro over entities) and token accuracy, with per-type scores.

    compute(predictions=tag_lists, references=tag_lists, mode=None, scheme=None): mode=None scores like
    conlleval; mode="strict" uses `scheme` ("IOB2" by default; "IOB1", "IOBES"/"BIOES", ...).
    """

    def _info(self):
        return metric_info(
            self.__doc__,
            datasets.List(datasets.Value("string")),
            datasets.List(datasets.Value("string")),
            "predictions, references: one list of tag strings (e.g. 'B-PER') per sentence.",
        )

    def _prepare_batch(self, predictions, references):
        _check_sentence_lengths(predictions, references)
        return [list(tags) for tags in predictions], [list(tags) for tags in references]

    def _compute(self, predictions, references, mode=None, scheme=None):
        check_not_empty(predictions)
        report = _seqeval_report(references, predictions, _seqeval_options(mode, scheme))
        overall = report["micro avg"]  # micro over entities: the number CoNLL papers report
        scores = {
            "precision": float(overall["precision"]),
            "recall": float(overall["recall"]),
            "f1": float(overall["f1-score"]),
            "accuracy": float(seqeval_metrics.accuracy_score(references, predictions)),
        }
        for entity_type, row in report.items():
            if not entity_type.endswith(" avg"):
                scores.update(_entity_type_scores(entity_type, row))
        return scores


def _entity_type_scores(entity_type, row):
    return {
        f"precision_{entity_type}": float(row["precision"]),
        f"recall_{entity_type}": float(row["recall"]),
        f"f1_{entity_type}": float(row["f1-score"]),
        f"number_{entity_type}": int(row["support"]),
    }


# ================================================================================================================
# Extractive question answering: SQuAD v1/v2 (English) and CMRC-style (Chinese) exact match and token F1


_ASCII_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff"
# One token per CJK character, or a run of anything else that is not whitespace (English words, numbers).
_ZH_TOKEN = re.compile(f"[{_CJK}]|[^\\s{_CJK}]+")


def _english_tokens(text):
    """SQuAD's official normalisation: lowercase, drop ASCII punctuation, drop articles, split on whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _ASCII_PUNCTUATION)
    return _ARTICLES.sub(" ", text).split()


def _chinese_tokens(text):
    """CMRC-style: NFKC folds full-width letters/digits to ASCII; punctuation and symbols of any script go."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = "".join(ch for ch in text if unicodedata.category(ch)[0] not in "PS")
    return _ZH_TOKEN.findall(text)


_ANSWER_TOKENIZERS = {"en": _english_tokens, "zh": _chinese_tokens}


def _token_f1(pred_tokens, gold_tokens):
    """Bag-of-tokens F1; an empty side (unanswerable) scores 1 only when both sides are empty."""
    if not pred_tokens or not gold_tokens:
        return float(pred_tokens == gold_tokens)
    overlap = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(pred_tokens), overlap / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def _score_answer(prediction, gold_answers, tokenize):
    """(exact, f1) of one prediction, each the max over gold answers. Like SQuAD v2's script, golds that
    normalise to nothing are dropped, and no gold answer at all means the correct answer is ""."""
    pred_tokens = tokenize(prediction)
    gold_token_lists = [tokens for tokens in map(tokenize, gold_answers) if tokens] or [[]]
    exact = max(float(pred_tokens == gold) for gold in gold_token_lists)
    return exact, max(_token_f1(pred_tokens, gold) for gold in gold_token_lists)


def answer_scorer(lang: str):
    """(prediction, gold answers) -> (exact, f1) in 0/1 units, with SquadMetric's normalisation for `lang` (en, zh)."""
    if lang not in _ANSWER_TOKENIZERS:
        raise BertkitError(f"unknown answer language {lang!r}: use lang='en' or lang='zh'")
    tokenize = _ANSWER_TOKENIZERS[lang]
    return lambda prediction, golds: _score_answer(prediction, golds, tokenize)


def _gold_texts(reference):
    """A list of answer strings; SQuAD's {"text": [...], "answer_start": [...]} dicts are accepted as they are."""
    if isinstance(reference, dict):
        return list(reference.get("text", []))
    if isinstance(reference, str):
        raise BertkitError("each reference must be a list of gold answers, not one string: wrap it as [answer]")
    return list(reference)


def _percent(values):
    return 100.0 * float(np.mean(values))


class SquadMetric(OfflineMetric):
    """Extractive QA exact match and token F1 on a 0-100 scale, max over gold answers (SQuAD v1/v2, CMRC).

    compute(predictions=answer_strings, references=lists_of_gold_answers, lang="en"): an empty gold list marks
    an unanswerable question whose correct prediction is "". With both kinds present the result also has
    HasAns_exact, HasAns_f1, NoAns_exact and NoAns_f1. lang="zh" scores Chinese characters as tokens.
    """

    def _info(self):
        return metric_info(
            self.__doc__,
            datasets.Value("string"),
            datasets.List(datasets.Value("string")),
            "predictions: one answer string per question; references: a list of gold answers (empty = no answer).",
        )

    def _prepare_batch(self, predictions, references):
        if not all(isinstance(p, str) for p in predictions):
            raise BertkitError("each prediction must be an answer string: use '' for 'no answer'")
        return list(predictions), [_gold_texts(r) for r in references]

    def _compute(self, predictions, references, lang="en"):
        check_not_empty(predictions)
        score = answer_scorer(lang)
        exact, f1 = np.array([score(p, golds) for p, golds in zip(predictions, references)]).T
        scores = {"exact_match": _percent(exact), "f1": _percent(f1)}
        has_answer = np.array([len(golds) > 0 for golds in references])
        if has_answer.any() and not has_answer.all():  # SQuAD v2 reports the two kinds separately too
            for prefix, subset in (("HasAns_", has_answer), ("NoAns_", ~has_answer)):
                scores.update({f"{prefix}exact": _percent(exact[subset]), f"{prefix}f1": _percent(f1[subset])})
        return scores


# ================================================================================================================
# A metric by task name


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
    "check_pair",
    "check_not_empty",
    "check_ids_in_range",
    "as_class_ids",
    "as_multi_hot",
    "as_scores",
    "metric_info",
    "OfflineMetric",
    "ClassificationMetric",
    "MultiLabelMetric",
    "RegressionMetric",
    "classification_report_text",
    "confusion_matrix_table",
    "best_threshold",
    "most_supported",
    "PER_CLASS_LIMIT",
    "PER_CLASS_SHOWN",
    "TOP_CONFUSIONS",
    "SEQEVAL_SCHEMES",
    "SeqevalMetric",
    "answer_scorer",
    "SquadMetric",
    "metric_for_task",
]
