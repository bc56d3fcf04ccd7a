"""Word ids for whole-word masking: which tokens form one word, computed once at tokenization time.

Why our own word ids: transformers 5.x's `DataCollatorForLanguageModeling(whole_word_mask=True)` finds words by
gaps in character offsets, so an unsegmented Chinese sentence is one "word"; it never reads a segmenter's output
(NOTES.md). Here word boundaries are computed when a text is tokenized (`add_word_ids`, stored as a `word_ids`
column: `##` pieces for "wordpiece", rjieba words for "chinese"), and the collator (`masking.py`) only groups,
selects and replaces. `resolve_whole_word` picks the mode of whole-word="auto" from the corpus's script.
"""

from __future__ import annotations

import bisect
from typing import Any, Literal, Sequence

import rjieba

from bertkit.errors import BertkitError

WholeWord = Literal["none", "wordpiece", "chinese"]
WHOLE_WORD_MODES = ("none", "wordpiece", "chinese")
# Tokens that never form a word and are never masked. [UNK] is deliberately absent: it stands for real text.
NON_WORD_TOKENS = frozenset({"[CLS]", "[SEP]", "[PAD]", "[MASK]"})


def _renumber(raw: Sequence[int | None]) -> list[int | None]:
    """Map word indices to 0, 1, 2, ... in order of first appearance; None stays None."""
    new: dict[int, int] = {}
    return [None if w is None else new.setdefault(w, len(new)) for w in raw]


def wordpiece_word_ids(
    tokens: Sequence[str], special_tokens: frozenset[str] | set[str] = NON_WORD_TOKENS
) -> list[int | None]:
    """Word index per WordPiece token: a token starts a word, its following `##` tokens continue it.

    `["[CLS]", "un", "##able", "to", "[SEP]"]` -> `[None, 0, 0, 1, None]`.
    """
    raw: list[int | None] = []
    word = -1
    for token in tokens:
        if token in special_tokens:
            raw.append(None)
            continue
        # A `##` piece right after a special token has no word to continue: it starts one.
        if not (token.startswith("##") and raw and raw[-1] is not None):
            word += 1
        raw.append(word)
    return _renumber(raw)


def jieba_spans(text: str) -> list[tuple[int, int]]:
    """Character spans `(start, end)` of the words rjieba cuts `text` into (whitespace pieces included)."""
    spans, cursor = [], 0
    for piece in rjieba.cut(text):
        # Locate each piece rather than summing lengths, so a segmenter that drops characters cannot shift spans.
        start = text.find(piece, cursor)
        if not piece or start < 0:
            continue
        spans.append((start, start + len(piece)))
        cursor = start + len(piece)
    return spans


def chinese_word_ids(
    text: str, offsets: Sequence[Sequence[int]], tokens: Sequence[str] | None = None
) -> list[int | None]:
    """Word index per token from rjieba's segmentation of `text`.

    `offsets` are the fast tokenizer's character spans (`return_offsets_mapping=True`); a token with an empty span
    ([CLS], [SEP], [PAD]) gets None. Given `tokens`, a `##` piece always joins the previous token's word, so an
    English word that WordPiece splits stays one unit even where rjieba cuts inside it ("Müller" -> M|ü|ller).
    """
    starts = [s for s, _ in jieba_spans(text)]
    raw: list[int | None] = []
    for i, (start, end) in enumerate(offsets):
        if end <= start:
            raw.append(None)
        elif tokens is not None and tokens[i].startswith("##") and raw and raw[-1] is not None:
            raw.append(raw[-1])
        else:
            raw.append(max(bisect.bisect_right(starts, start) - 1, 0))  # the word whose span holds `start`
    return _renumber(raw)


def _row_word_ids(encoding, row: int, tokenizer, mode: str, texts: Sequence[str] | None) -> list[int | None]:
    """Word ids of one row of a batch encoding (a window of a long text maps back through
    `overflow_to_sample_mapping`)."""
    tokens = tokenizer.convert_ids_to_tokens(list(encoding["input_ids"][row]))
    special = set(tokenizer.all_special_tokens) - {tokenizer.unk_token}
    if mode == "wordpiece":
        return wordpiece_word_ids(tokens, special)
    if texts is None or "offset_mapping" not in encoding:
        raise BertkitError("chinese word ids need the texts and an encoding made with return_offsets_mapping=True")
    sample = encoding["overflow_to_sample_mapping"][row] if "overflow_to_sample_mapping" in encoding else row
    word_ids = chinese_word_ids(texts[sample], encoding["offset_mapping"][row], tokens)
    return [None if t in special else w for t, w in zip(tokens, word_ids)]


def add_word_ids(
    batch_encoding_or_texts: Any, tokenizer, mode: WholeWord, texts: Sequence[str] | None = None, **tokenizer_kwargs
) -> dict[str, list]:
    """Tokenize (if given texts) and add a `word_ids` column; made for `datasets.map(batched=True)`.

        ds.map(lambda b: add_word_ids(b["text"], tok, "chinese", truncation=True, max_length=128),
               batched=True, remove_columns=ds.column_names)

    Returns `input_ids`, `token_type_ids` (when the tokenizer makes them) and `word_ids`. An existing batch
    encoding works too (for "chinese" it must carry `offset_mapping`, and `texts` must be passed). Single
    sequences only: for sentence pairs use `make_nsp_examples`.
    """
    if mode not in ("wordpiece", "chinese"):
        raise BertkitError(f"add_word_ids mode must be 'wordpiece' or 'chinese', got {mode!r}")
    if isinstance(batch_encoding_or_texts, str) or (
        isinstance(batch_encoding_or_texts, Sequence) and all(isinstance(t, str) for t in batch_encoding_or_texts)
    ):
        texts = [batch_encoding_or_texts] if isinstance(batch_encoding_or_texts, str) else list(batch_encoding_or_texts)
        tokenizer_kwargs.setdefault("return_offsets_mapping", mode == "chinese")
        encoding = tokenizer(texts, **tokenizer_kwargs)
    else:
        encoding = batch_encoding_or_texts
    _reject_pairs(encoding, mode)
    out = {key: list(encoding[key]) for key in ("input_ids", "token_type_ids") if key in encoding}
    out["word_ids"] = [_row_word_ids(encoding, i, tokenizer, mode, texts) for i in range(len(encoding["input_ids"]))]
    return out


def _reject_pairs(encoding, mode: str) -> None:
    # Offsets of a pair's second text count from that text's start: mapping them onto the first text is wrong.
    if mode == "chinese" and any(1 in row for row in encoding.get("token_type_ids", [])):
        raise BertkitError(
            "add_word_ids(mode='chinese') takes single texts, not pairs; use make_nsp_examples for pairs")


# ----------------------------------------------------------------------------------------- whole-word mode
def is_cjk(char: str) -> bool:
    """Whether `char` is a CJK ideograph (the unified blocks, extensions and compatibility ideographs)."""
    code = ord(char)
    return (0x4E00 <= code <= 0x9FFF or 0x3400 <= code <= 0x4DBF or 0x20000 <= code <= 0x2FA1F
            or 0xF900 <= code <= 0xFAFF)


def cjk_fraction(texts: Sequence[str], limit: int = 200_000) -> float:
    """Share of CJK ideographs among the non-space characters of the first `limit` characters."""
    chars = [c for c in "".join(texts)[:limit] if not c.isspace()]
    return sum(map(is_cjk, chars)) / len(chars) if chars else 0.0


def resolve_whole_word(mode: str, texts: Sequence[str]) -> str:
    """`auto` -> "chinese" when most characters are CJK, else "wordpiece"; other modes as given."""
    if mode != "auto":
        return mode
    return "chinese" if cjk_fraction(texts) > 0.5 else "wordpiece"


__all__ = [
    "NON_WORD_TOKENS",
    "WHOLE_WORD_MODES",
    "WholeWord",
    "add_word_ids",
    "chinese_word_ids",
    "cjk_fraction",
    "is_cjk",
    "jieba_spans",
    "resolve_whole_word",
    "wordpiece_word_ids",
]
