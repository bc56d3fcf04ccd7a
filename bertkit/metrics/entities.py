"""Named-entity recognition: entity-level precision/recall/F1 with seqeval, strict or conlleval-style."""

import warnings

import datasets
from seqeval import metrics as seqeval_metrics
from seqeval import scheme as seqeval_scheme

from bertkit.errors import BertkitError

from .base import OfflineMetric, check_not_empty, metric_info


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


__all__ = ["SEQEVAL_SCHEMES", "SeqevalMetric"]
