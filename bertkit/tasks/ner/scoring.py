"""Decoding and scoring NER predictions: per-word probabilities -> tags -> entity spans with character offsets, and
entity-level precision / recall / F1 (seqeval), for the Trainer's evaluation and for `bertkit evaluate`."""

from __future__ import annotations

import numpy as np

from bertkit.metrics import SEQEVAL_SCHEMES, SeqevalMetric

from .encode import SentenceWindows, window_rows
from .tags import tags_to_spans
from .words import Sentence


def entities_from_tags(sentence: Sentence, tags: list[str], scores: np.ndarray) -> list[dict]:
    """Entity spans of one sentence: text, type, character offsets into sentence.text (end exclusive) and score,
    the mean over the entity's words of the predicted tag's probability."""
    entities = []
    for first, end, kind in tags_to_spans(tags):
        start_char, end_char = sentence.offsets[first][0], sentence.offsets[end - 1][1]
        entities.append({"text": sentence.text[start_char:end_char], "type": kind, "start": start_char,
                         "end": end_char, "score": round(float(np.mean(scores[first:end])), 4)})
    return entities


def decode(probs: np.ndarray, id2label: dict[int, str]) -> tuple[list[str], np.ndarray]:
    """(words, C) probabilities -> the predicted tags and each one's probability."""
    best = probs.argmax(-1)
    return [id2label[int(i)] for i in best], probs[np.arange(len(best)), best]


def score_tags(predicted: list[list[str]], gold: list[list[str]], strict: bool, scheme: str) -> dict:
    """Entity-level precision / recall / F1 (micro) and per type, with seqeval; strict mode under `scheme`."""
    options = {"mode": "strict", "scheme": scheme} if strict else {}
    return SeqevalMetric().compute(predictions=predicted, references=gold, **options)


def entity_report(predicted: list[list[str]], gold: list[list[str]], strict: bool, scheme: str) -> str:
    """seqeval's per-type table as text (for entity_report.txt)."""
    import warnings

    from seqeval.metrics import classification_report

    options = {"mode": "strict", "scheme": SEQEVAL_SCHEMES[scheme]} if strict else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return classification_report(gold, predicted, digits=4, zero_division=0, **options)


def predicted_tags(logits: np.ndarray, windows: SentenceWindows, id2label: dict[int, str]) -> list[list[str]]:
    """Trainer's padded (windows, T, C) logits -> each sentence's predicted tags, one per word."""
    o_id = {v: k for k, v in id2label.items()}["O"]
    word_probs = windows.word_probabilities(window_rows(logits, windows), o_id, len(id2label))
    return [decode(p, id2label)[0] for p in word_probs]


def compute_metrics_fn(windows: SentenceWindows, sentences: list[Sentence], id2label: dict[int, str],
                       strict: bool, scheme: str):
    """A Trainer `compute_metrics` that stitches the eval windows back into sentences and scores words."""

    def compute_metrics(eval_prediction):
        logits = eval_prediction.predictions
        logits = logits[0] if isinstance(logits, tuple) else logits
        return score_tags(predicted_tags(logits, windows, id2label), [s.tags for s in sentences], strict, scheme)

    return compute_metrics


__all__ = ["compute_metrics_fn", "predicted_tags", "entities_from_tags", "decode", "score_tags", "entity_report"]
