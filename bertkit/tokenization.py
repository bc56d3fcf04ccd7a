"""The bundled bert-base-chinese tokenizer, built offline from the vocabulary file shipped with bertkit.

Two traps of transformers 5.x shape this file (see docs/notes.md): `BertTokenizer(vocab_file=path)` silently ignores
the path and builds a 5-token vocabulary, and the Chinese vocabulary has entries that are U+2028 (LINE
SEPARATOR), so `str.splitlines()` would shift every id after 343. We read the file ourselves, split on "\\n"
only, and hand the tokenizer a ready `{token: id}` dict.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np

from transformers import BertTokenizerFast

from bertkit.errors import BertkitError

CHINESE_VOCAB_SIZE = 21128


def chinese_vocab_path() -> Path:
    """Path of the bundled bert-base-chinese `vocab.txt` (21,128 entries)."""
    return Path(str(resources.files("bertkit") / "resources" / "bert-base-chinese-vocab.txt"))


def read_vocab(path: str | Path) -> dict[str, int]:
    """Read a WordPiece `vocab.txt` into `{token: id}`: one token per "\\n"-separated line, id = line number.

    Splitting on "\\n" only (not `splitlines`) keeps tokens such as U+2028 intact; a final newline adds no token.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise BertkitError(f"cannot read vocabulary file {path}: {exc.strerror or exc}") from exc
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    vocab = {token: i for i, token in enumerate(lines)}
    if len(vocab) != len(lines):
        raise BertkitError(f"vocabulary file {path} has duplicate tokens; each line must be a distinct token")
    return vocab


@lru_cache(maxsize=1)
def _chinese_vocab() -> tuple[tuple[str, int], ...]:
    # Cached as an immutable tuple so every tokenizer built here gets its own fresh dict.
    vocab = read_vocab(chinese_vocab_path())
    if len(vocab) != CHINESE_VOCAB_SIZE:
        raise BertkitError(
            f"bundled Chinese vocab has {len(vocab)} entries, expected {CHINESE_VOCAB_SIZE}; reinstall bertkit")
    return tuple(vocab.items())


def chinese_bert_tokenizer(model_max_length: int = 512) -> BertTokenizerFast:
    """A fast (Rust-backed) tokenizer with bert-base-chinese's exact vocabulary and settings (lower-case,
    every CJK character its own token). `我爱北京` -> [101, 2769, 4263, 1266, 776, 102]."""
    return BertTokenizerFast(
        vocab=dict(_chinese_vocab()),
        do_lower_case=True,
        tokenize_chinese_chars=True,
        model_max_length=model_max_length,
    )


def token_lengths(tokenizer, texts: list[str], pairs: list[str] | None) -> np.ndarray:
    """Full length of each example in tokens, special tokens included, before any truncation."""
    encoded = tokenizer(texts, pairs, truncation=False, verbose=False)["input_ids"]
    return np.array([len(ids) for ids in encoded])


def word_token_lengths(tokenizer, sentences: list[list[str]]) -> np.ndarray:
    """Full length in tokens of each pre-split sentence (ner's words), special tokens included."""
    if not sentences:
        return np.array([], dtype=int)
    encoded = tokenizer(sentences, is_split_into_words=True, truncation=False, verbose=False)["input_ids"]
    return np.array([len(ids) for ids in encoded])

__all__ = ["CHINESE_VOCAB_SIZE", "chinese_bert_tokenizer", "chinese_vocab_path", "read_vocab", "token_lengths",
           "word_token_lengths"]
