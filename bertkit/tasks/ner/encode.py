"""NER examples as model rows: labels aligned to sub-tokens, long sentences cut into overlapping windows, and the
windows' predictions stitched back into one row per word.

    encode(tokenizer, sentences, 128, 32, label2id)  -> SentenceWindows: overlapping token windows + labels
    windows.word_probabilities(window_probs, o_id, C)  -> one (words, C) array per sentence

Labels go on each word's first sub-token; the others get -100, or with `label_all_tokens` the I- tag of the word's
entity. Each word takes the prediction of the window where its first sub-token is most central.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bertkit.errors import BertkitError
from bertkit.windows import sliding_windows

from .tags import continuation_ids
from .words import Sentence

IGNORE_INDEX = -100


def align_labels(word_ids: list[int | None], word_labels: list[int], continuation: dict[int, int] | None = None,
                 label_all_tokens: bool = False) -> list[int]:
    """One label per sub-token: the word's label on its first sub-token; on the others -100, or with
    label_all_tokens the continuation label (I-<type> of the entity, O for O). Special tokens (None) get -100."""
    labels, previous = [], None
    for word in word_ids:
        if word is None:
            labels.append(IGNORE_INDEX)
        elif word != previous:
            labels.append(word_labels[word])
        else:
            labels.append(continuation[word_labels[word]] if label_all_tokens else IGNORE_INDEX)
        previous = word
    return labels


def first_tokens(word_ids: list[int | None], num_words: int) -> list[int | None]:
    """Index of each word's first sub-token; None for a word that became no token at all (e.g. U+200B alone)."""
    first: list[int | None] = [None] * num_words
    for position, word in enumerate(word_ids):
        if word is not None and first[word] is None:
            first[word] = position
    return first


def sentence_windows(num_tokens: int, max_length: int, stride: int) -> list[tuple[int, int]]:
    """[start, end) sub-token ranges of a sentence's windows: the one sliding-window rule with full windows (the last
    moved back to end at the sentence's end), max_length - 2 sub-tokens each beside [CLS] / [SEP]. A sentence of no
    tokens gets no window, so it has no rows to predict (its words fall back to O)."""
    spans = sliding_windows(num_tokens, max_length - 2, stride, full_last=True)
    return spans if num_tokens else []


def stitch_windows(spans: list[tuple[int, int]], window_values: list[np.ndarray], num_tokens: int) -> np.ndarray:
    """Per-token rows from overlapping windows: each token takes the row of the window where it is most central
    (largest distance to the window's nearer edge; the earlier window on a tie). (num_tokens, C)."""
    width = window_values[0].shape[-1] if window_values else 0
    stitched = np.zeros((num_tokens, width), dtype=np.float32)
    best = np.full(num_tokens, -1)
    for (start, end), values in zip(spans, window_values):
        positions = np.arange(start, end)
        centrality = np.minimum(positions - start, end - 1 - positions)
        better = centrality > best[start:end]
        stitched[start:end][better] = values[better]
        best[start:end][better] = centrality[better]
    return stitched


@dataclass
class SentenceWindows:
    """Sentences as model rows: overlapping windows of sub-tokens, and what stitches them back into words."""

    features: list[dict]  # one per window: input_ids, attention_mask, token_type_ids [, labels]
    owner: list[int]  # the sentence of each window
    spans: list[tuple[int, int]]  # the window's [start, end) in its sentence's sub-tokens
    first_tokens: list[list[int | None]]  # per sentence, each word's first sub-token
    num_tokens: list[int]  # per sentence

    def word_probabilities(self, window_values: list[np.ndarray], fallback: int, width: int) -> list[np.ndarray]:
        """(words, width) per sentence from each window's (window tokens, width) rows; a word without sub-tokens
        gets a one-hot row at `fallback` (the O label)."""
        by_sentence: list[list[int]] = [[] for _ in self.first_tokens]
        for index, sentence in enumerate(self.owner):
            by_sentence[sentence].append(index)
        results = []
        for sentence, indices in enumerate(by_sentence):
            tokens = stitch_windows([self.spans[i] for i in indices], [window_values[i] for i in indices],
                                    self.num_tokens[sentence])
            rows = np.zeros((len(self.first_tokens[sentence]), width), dtype=np.float32)
            for word, position in enumerate(self.first_tokens[sentence]):
                if position is None:
                    rows[word, fallback] = 1.0
                else:
                    rows[word] = tokens[position]
            results.append(rows)
        return results


def encode(tokenizer, sentences: list[Sentence], max_length: int, stride: int,
           label2id: dict[str, int] | None = None, label_all_tokens: bool = False) -> SentenceWindows:
    """Tokenize whole sentences (is_split_into_words), then cut each into windows of max_length - 2 sub-tokens
    plus [CLS] / [SEP]. With label2id, each window carries its aligned labels."""
    if not getattr(tokenizer, "is_fast", False):
        raise BertkitError("NER needs a fast tokenizer (word_ids) — save the model with its tokenizer.json")
    windows = SentenceWindows([], [], [], [], [])
    if not sentences:
        return windows
    encoded = tokenizer([s.words for s in sentences], is_split_into_words=True, add_special_tokens=False)
    continuation = continuation_ids(label2id) if label2id else None
    for index, sentence in enumerate(sentences):
        ids, word_ids = encoded["input_ids"][index], encoded.word_ids(index)
        windows.first_tokens.append(first_tokens(word_ids, len(sentence.words)))
        windows.num_tokens.append(len(ids))
        labels = None
        if label2id is not None:
            word_labels = [_label_id(label2id, tag, sentence, i) for i, tag in enumerate(sentence.tags)]
            labels = align_labels(word_ids, word_labels, continuation, label_all_tokens)
        for start, end in sentence_windows(len(ids), max_length, stride):
            windows.features.append(_window_row(tokenizer, ids, labels, start, end))
            windows.owner.append(index)
            windows.spans.append((start, end))
    return windows


def _window_row(tokenizer, ids: list[int], labels: list[int] | None, start: int, end: int) -> dict:
    """[CLS] ids[start:end] [SEP] as one model row, with its labels (-100 on [CLS] / [SEP]) when there are labels."""
    row = {"input_ids": [tokenizer.cls_token_id, *ids[start:end], tokenizer.sep_token_id],
           "attention_mask": [1] * (end - start + 2), "token_type_ids": [0] * (end - start + 2)}
    if labels is not None:
        row["labels"] = [IGNORE_INDEX, *labels[start:end], IGNORE_INDEX]
    return row


def _label_id(label2id: dict[str, int], tag: str, sentence: Sentence, index: int) -> int:
    if tag not in label2id:
        raise BertkitError(f"{sentence.location(index)}: tag {tag} is not among the model's labels "
                           f"({', '.join(label2id)}) — the training data has no entity of that type")
    return label2id[tag]


def softmax(logits: np.ndarray) -> np.ndarray:
    logits = np.asarray(logits, dtype=np.float32)
    shifted = np.exp(logits - logits.max(-1, keepdims=True))
    return shifted / shifted.sum(-1, keepdims=True)


def window_rows(logits: np.ndarray, windows: SentenceWindows) -> list[np.ndarray]:
    """Trainer's padded (windows, T, C) logits -> each window's probabilities at its real tokens ([CLS] and
    [SEP] dropped)."""
    return [softmax(logits[i, 1:1 + end - start]) for i, (start, end) in enumerate(windows.spans)]


__all__ = ["IGNORE_INDEX", "SentenceWindows", "encode", "align_labels", "first_tokens", "sentence_windows",
           "stitch_windows", "window_rows", "softmax"]
