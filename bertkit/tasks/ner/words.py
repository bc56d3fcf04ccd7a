"""Words of a sentence: raw text split the way BERT's basic tokenizer splits it (or one word per character), with
each word's character offsets into the original string."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field


def _is_cjk(char: str) -> bool:
    cp = ord(char)
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2FA1F or 0xF900 <= cp <= 0xFAFF
            or 0x2F800 <= cp <= 0x2FA1F)


def _is_punctuation(char: str) -> bool:
    """BERT's rule: every ASCII non-alphanumeric symbol counts, plus Unicode category P*."""
    cp = ord(char)
    return 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126 or \
        unicodedata.category(char).startswith("P")


def _is_separator(char: str) -> bool:
    """Whitespace, and what BERT's tokenizer deletes (control/format characters, U+FFFD)."""
    return char.isspace() or char == "\ufffd" or unicodedata.category(char) in ("Cc", "Cf")


def split_words(text: str, split: str = "bert", cuts=()) -> list[tuple[int, int]]:
    """(start, end) of each word of `text`. split="bert": runs of letters/digits, each punctuation mark and each
    CJK character alone (BERT's basic tokenizer); split="chars": every non-space character is a word. Words are
    also cut at every offset in `cuts` (entity boundaries), so an entity never starts or ends inside a word."""
    cuts, words, start = set(cuts), [], None
    for i, char in enumerate(text):
        if start is not None and i in cuts:
            words.append((start, i))
            start = None
        if _is_separator(char):
            if start is not None:
                words.append((start, i))
            start = None
        elif split == "chars" or _is_cjk(char) or _is_punctuation(char):
            if start is not None:
                words.append((start, i))
            words.append((i, i + 1))
            start = None
        elif start is None:
            start = i
    if start is not None:
        words.append((start, len(text)))
    return words


def joined_text(words: list[str]) -> tuple[str, list[tuple[int, int]]]:
    """Pre-split words (CoNLL, JSONL tokens) as one space-joined string with each word's offsets."""
    offsets, position = [], 0
    for word in words:
        offsets.append((position, position + len(word)))
        position += len(word) + 1
    return " ".join(words), offsets


@dataclass
class Sentence:
    """One sentence: its words with their tags and character offsets into the original text, and where it came from."""

    words: list[str]
    tags: list[str] | None  # None when the input has no labels (predict)
    where: str  # "train.conll line 12": where the sentence starts
    text: str = ""  # the original string; offsets index into it
    offsets: list[tuple[int, int]] = field(default_factory=list)
    word_lines: list[int] | None = None  # CoNLL: the line of each word

    def __post_init__(self):
        if not self.offsets and self.words:
            self.text, self.offsets = joined_text(self.words)

    def location(self, index: int) -> str:
        index = min(index, len(self.words) - 1)
        if self.word_lines:
            return f"{self.where.rsplit(' line ', 1)[0]} line {self.word_lines[index]}"
        return f"{self.where}, word {index + 1} ({self.words[index]!r})"


__all__ = ["Sentence", "split_words", "joined_text"]
