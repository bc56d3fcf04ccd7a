"""From logits to answers, and their scores: the span candidates of each window, an example's best span over all
its windows (cut from the original context by character offsets), the SQuAD v2 null answer against a threshold
tuned on dev, and SQuAD EM / F1 over examples (not windows).

    predictions = postprocess(start_logits, end_logits, windows, examples)   one Prediction per example
    threshold = tune_null_threshold(margins, f1_if_answered, f1_if_null)     v2: when to answer ""

Under SQuAD v2 the best span competes with the null answer ([CLS] start + end): the example is answered "" when
`null_score - best_score > threshold`. Everything here is a pure function over numpy arrays and offsets, tested on
exact small cases.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...errors import BertkitError
from .read import QAExample
from .windows import QuestionWindows


@dataclass(frozen=True)
class Span:
    score: float  # start logit + end logit
    start: int  # character offsets into the context, end exclusive
    end: int


@dataclass
class Prediction:
    """The best non-null span of an example over all its windows, and its null score (min over windows)."""

    text: str
    start: int | None
    end: int | None
    score: float  # -inf when no window had a valid span
    null_score: float

    @property
    def null_margin(self) -> float:
        """How much the null answer beats the best span; answer "" when this exceeds the threshold."""
        return self.null_score - self.score

    def decide(self, null_threshold: float | None) -> tuple[str, int | None, int | None, float]:
        """(answer, start, end, score) after the v2 null decision; None threshold = always answer (v1)."""
        if self.start is None or (null_threshold is not None and self.null_margin > null_threshold):
            return "", None, None, self.null_score
        return self.text, self.start, self.end, self.score


def candidate_spans(start_logits, end_logits, offsets: list, n_best: int = 20,
                 max_answer_length: int = 30) -> list[Span]:
    """Candidate spans of one window, best first: the n_best start and n_best end positions among the context
    tokens, paired; spans that are reversed or longer than max_answer_length tokens are skipped."""
    context = np.array([i for i, span in enumerate(offsets) if span is not None], dtype=np.int64)
    if context.size == 0:
        return []
    start_logits, end_logits = np.asarray(start_logits, np.float64), np.asarray(end_logits, np.float64)
    starts = context[np.argsort(-start_logits[context], kind="stable")[:n_best]]
    ends = context[np.argsort(-end_logits[context], kind="stable")[:n_best]]
    spans = []
    for s in starts:
        for e in ends:
            if e < s or e - s + 1 > max_answer_length:
                continue
            spans.append(Span(float(start_logits[s] + end_logits[e]), offsets[s][0], offsets[e][1]))
    return sorted(spans, key=lambda span: (-span.score, span.start, span.end))


def best_prediction(windows: list[tuple], context: str, n_best: int = 20, max_answer_length: int = 30) -> Prediction:
    """One example from its windows [(start_logits, end_logits, offsets)]: the best span across all windows, the
    text cut from the original context, and the smallest null score ([CLS] start + end) of any window."""
    best, null_score = None, math.inf
    for start_logits, end_logits, offsets in windows:
        null_score = min(null_score, float(start_logits[0]) + float(end_logits[0]))
        spans = candidate_spans(start_logits, end_logits, offsets, n_best, max_answer_length)
        if spans and (best is None or spans[0].score > best.score):
            best = spans[0]
    if best is None:
        return Prediction("", None, None, -math.inf, null_score)
    return Prediction(context[best.start:best.end], best.start, best.end, best.score, null_score)


def postprocess(start_logits, end_logits, windows: QuestionWindows, examples: list[QAExample], n_best: int = 20,
                max_answer_length: int = 30) -> list[Prediction]:
    """One Prediction per example from per-window logits, in window order (rows may carry padding past each
    window's length, as Trainer's concatenated eval outputs do)."""
    grouped: list[list[tuple]] = [[] for _ in examples]
    for w, example in enumerate(windows.example_index):
        length = len(windows.offsets[w])
        grouped[example].append((start_logits[w][:length], end_logits[w][:length], windows.offsets[w]))
    return [best_prediction(grouped[i], example.context, n_best, max_answer_length)
            for i, example in enumerate(examples)]


# ------------------------------------------------------------------------------------------------ scoring


def tune_null_threshold(margins, f1_if_answered, f1_if_null) -> tuple[float, float]:
    """(threshold, mean F1) that maximises F1 when example i is answered "" iff margins[i] > threshold.

    Candidates lie below all margins (all null), between neighbouring distinct margins (midpoints) and above all
    (never null); among equally good ones the threshold nearest 0 wins (then the lower)."""
    margins = np.asarray(margins, np.float64)
    answered, null = np.asarray(f1_if_answered, np.float64), np.asarray(f1_if_null, np.float64)
    finite = np.unique(margins[np.isfinite(margins)])
    if finite.size == 0:
        return 0.0, float(np.mean(null)) if margins.size else 0.0
    candidates = np.concatenate([[finite[0] - 1.0], (finite[:-1] + finite[1:]) / 2, [finite[-1] + 1.0]])
    f1 = np.array([np.where(margins > t, null, answered).mean() for t in candidates])
    best = candidates[np.isclose(f1, f1.max(), rtol=0, atol=1e-12)]
    threshold = float(min(best, key=lambda t: (abs(t), t)))
    return threshold, float(f1.max())


def references(examples: list[QAExample]) -> list[list[str]]:
    return [[a["text"] for a in e.answers] for e in examples]


def score_predictions(predictions: list[Prediction], examples: list[QAExample], lang: str,
                      null_threshold: float | None) -> dict:
    """SQuAD EM/F1 (0-100, HasAns/NoAns breakdown when both kinds occur) with the given null threshold."""
    from ...metrics import SquadMetric

    answers = [p.decide(null_threshold)[0] for p in predictions]
    return SquadMetric().compute(predictions=answers, references=references(examples), lang=lang)


def tune_and_score(predictions: list[Prediction], examples: list[QAExample], lang: str,
                   allow_no_answer: bool) -> tuple[dict, float | None]:
    """Dev metrics and the null threshold: tuned on these examples for v2 (metrics at that threshold, plus the
    untuned ones at threshold 0 as `*_threshold_0`); None and plain metrics for v1."""
    if not allow_no_answer:
        return score_predictions(predictions, examples, lang, None), None
    from ...metrics import answer_scorer  # the exact normalisation SquadMetric uses

    scorer, golds = answer_scorer(lang), references(examples)
    f1_answered = [scorer(p.text, g)[1] for p, g in zip(predictions, golds)]
    f1_null = [scorer("", g)[1] for g in golds]
    threshold, _ = tune_null_threshold([p.null_margin for p in predictions], f1_answered, f1_null)
    metrics = score_predictions(predictions, examples, lang, threshold)
    untuned = score_predictions(predictions, examples, lang, 0.0)
    metrics.update({"exact_match_threshold_0": untuned["exact_match"], "f1_threshold_0": untuned["f1"],
                    "null_threshold": threshold})
    return metrics, threshold


def compute_metrics_fn(windows: QuestionWindows, examples: list[QAExample], lang: str, allow_no_answer: bool,
                       n_best: int = 20, max_answer_length: int = 30):
    """A Trainer `compute_metrics` scoring examples, not windows. Trainer does not shuffle the eval set, so row w
    of its (padded, concatenated) start/end logits is window w of `windows`; the closure maps windows back to
    examples, picks answers and scores them (v2: at the threshold tuned on this eval set, as the final model is)."""

    def compute_metrics(eval_prediction):
        start_logits, end_logits = eval_prediction.predictions[:2]
        if len(start_logits) != len(windows):
            raise BertkitError(f"got logits for {len(start_logits)} windows but the eval set has {len(windows)} — "
                               "evaluate on the unshuffled eval set built by encode")
        predictions = postprocess(start_logits, end_logits, windows, examples, n_best, max_answer_length)
        return tune_and_score(predictions, examples, lang, allow_no_answer)[0]

    return compute_metrics


def prediction_record(example: QAExample, prediction: Prediction, null_threshold: float | None) -> dict:
    """One output line: the answer text, its character offsets into the context (end exclusive) and its score;
    under v2, "" with the null score when the null answer wins, and the null score always."""
    text, start, end, score = prediction.decide(null_threshold)
    record = {"id": example.id, "question": example.question, "answer": text, "start": start, "end": end,
              "score": round(score, 4) if math.isfinite(score) else None}
    if null_threshold is not None:
        record["null_score"] = round(prediction.null_score, 4)
    return record


__all__ = ["compute_metrics_fn", "Span", "Prediction", "candidate_spans", "best_prediction", "postprocess",
           "tune_null_threshold", "references", "score_predictions", "tune_and_score", "prediction_record"]
