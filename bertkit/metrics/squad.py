"""Extractive question answering: SQuAD v1/v2 (English) and CMRC-style (Chinese) exact match and token F1."""

import re
import string
import unicodedata
from collections import Counter

import datasets
import numpy as np

from bertkit.errors import BertkitError

from .base import OfflineMetric, check_not_empty, metric_info


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


__all__ = ["answer_scorer", "SquadMetric"]
