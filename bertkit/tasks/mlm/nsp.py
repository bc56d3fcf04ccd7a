"""Next-sentence-prediction pairs: sentences cut from paragraphs, [CLS] A [SEP] B [SEP] with IsNext / NotNext."""

from __future__ import annotations

import random
import re
from typing import Any, NamedTuple

from bertkit.errors import BertkitError
from bertkit.tasks.mlm.words import WHOLE_WORD_MODES, WholeWord, chinese_word_ids, wordpiece_word_ids

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])")


def split_sentences(paragraph: str) -> list[str]:
    """Sentences for NSP pairs: after . ! ? followed by space, and after Chinese 。！？；."""
    return [s.strip() for s in _SENTENCE_END.split(paragraph) if s and s.strip()]


class Sentence(NamedTuple):
    """One tokenized sentence (no special tokens) and, for whole-word masking, its word ids."""
    ids: list[int]
    word_ids: list[int | None] | None


def _encode_sentences(docs: list[list[str]], tokenizer, whole_word: str) -> list[list[Sentence]]:
    """Tokenize every sentence once (no special tokens), with word ids when whole-word masking will follow."""
    flat = [s for doc in docs for s in doc]
    enc = tokenizer(flat, add_special_tokens=False, return_offsets_mapping=whole_word == "chinese")
    sentences = []
    for i, ids in enumerate(enc["input_ids"]):
        word_ids = None
        if whole_word != "none":
            tokens = tokenizer.convert_ids_to_tokens(ids)
            word_ids = (wordpiece_word_ids(tokens) if whole_word == "wordpiece"
                        else chinese_word_ids(flat[i], enc["offset_mapping"][i], tokens))
        sentences.append(Sentence(list(ids), word_ids))
    it = iter(sentences)
    return [[next(it) for _ in doc] for doc in docs]


def _truncate_pair(a: list[list], b: list[list], budget: int) -> None:
    """Drop tokens from the end of the longer side (B on ties, as Google does) until both fit, in place;
    each side is [ids] or [ids, word_ids], trimmed together."""
    while len(a[0]) + len(b[0]) > budget:
        longer = a if len(a[0]) > len(b[0]) else b
        for column in longer:
            column.pop()


def pair_example(a: Sentence, b: Sentence, label: int, tokenizer, max_length: int) -> dict[str, Any]:
    """[CLS] A [SEP] B [SEP] with token_type_ids 0 for A's part and 1 for B's part."""
    with_words = a.word_ids is not None
    side_a = [list(a.ids)] + ([list(a.word_ids)] if with_words else [])
    side_b = [list(b.ids)] + ([list(b.word_ids)] if with_words else [])
    _truncate_pair(side_a, side_b, max_length - 3)
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    example = {
        "input_ids": [cls] + side_a[0] + [sep] + side_b[0] + [sep],
        "token_type_ids": [0] * (len(side_a[0]) + 2) + [1] * (len(side_b[0]) + 1),
        "next_sentence_label": label,
    }
    if with_words:  # shift B's words past A's so word ids stay unique within the pair
        shift = 1 + max((w for w in side_a[1] if w is not None), default=-1)
        b_words = [None if w is None else w + shift for w in side_b[1]]
        example["word_ids"] = [None] + side_a[1] + [None] + b_words + [None]
    return example


def _other_document(nonempty: list[int], current: int, rng: random.Random) -> int:
    """A random non-empty document other than `current` (rejection sampling: at least two exist)."""
    while True:
        other = rng.choice(nonempty)
        if other != current:
            return other


def make_nsp_examples(
    documents: list[list[str]], tokenizer, max_length: int = 128, seed: int = 0, whole_word: WholeWord = "none"
) -> list[dict[str, Any]]:
    """Next-sentence-prediction pairs: each pair of consecutive sentences in a document, label 0 (IsNext); with
    probability 1/2 the second sentence is swapped for a random sentence of another document, label 1 (NotNext).

    Each example has `input_ids`, `token_type_ids`, `next_sentence_label` and, unless whole_word="none",
    `word_ids` for `MaskingCollator(whole_word=...)`. The longer side is cut first to fit `max_length`.
    """
    if max_length < 5:
        raise BertkitError(f"max_length must be at least 5 for [CLS] A [SEP] B [SEP], got {max_length}")
    if whole_word not in WHOLE_WORD_MODES:
        raise BertkitError(f"whole_word must be one of {', '.join(WHOLE_WORD_MODES)}; got {whole_word!r}")
    docs = [[s for s in doc if s.strip()] for doc in documents]
    nonempty = [d for d, doc in enumerate(docs) if doc]
    if len(nonempty) < 2:
        raise BertkitError("NSP needs at least two non-empty documents to draw NotNext sentences from")
    encoded = _encode_sentences(docs, tokenizer, whole_word)
    rng, examples = random.Random(seed), []
    for d, doc in enumerate(encoded):
        for i in range(len(doc) - 1):
            if rng.random() < 0.5:
                other = _other_document(nonempty, d, rng)
                examples.append(pair_example(doc[i], rng.choice(encoded[other]), 1, tokenizer, max_length))
            else:
                examples.append(pair_example(doc[i], doc[i + 1], 0, tokenizer, max_length))
    return examples


__all__ = ["Sentence", "make_nsp_examples", "pair_example", "split_sentences"]
