"""Model rows read on demand from a tokenized corpus (`corpus.tokenize_rows`): group blocks of the concatenated
text, windows of long lines, and NSP sentence pairs, as torch Datasets over zero-copy slices of the memory-mapped
token column. Each row carries its number as `example_id`, the identity its training masks are drawn from."""

from __future__ import annotations

import bisect
import random
from typing import Any

import datasets
import numpy as np
import pyarrow.compute as pc
import torch

from bertkit.errors import BertkitError
from bertkit.tasks.mlm.nsp import Sentence, pair_example
from bertkit.tasks.mlm.pages import mapped_files, release_mapped_pages


class ListColumn:
    """Rows of a list<int32> column of an Arrow-backed dataset as zero-copy numpy slices of the memory-mapped
    file. Pickles as the dataset (which pickles as its file paths); the slices are rebuilt on first use. Every
    `RELEASE_EVERY` rows read, the file pages read so far are released (pages.py), so that an epoch over a large
    corpus does not grow the process's RSS by the size of the token table."""

    RELEASE_EVERY = 10_000

    def __init__(self, dataset: datasets.Dataset, column: str):
        self.dataset, self.column = dataset, column
        self.files = mapped_files(dataset)
        self._parts: list | None = None
        self._reads = 0

    def __getstate__(self):
        return {**self.__dict__, "_parts": None, "_reads": 0}

    def _load(self) -> None:
        chunks = self.dataset.data.column(self.column).chunks
        self._starts = np.cumsum([0] + [len(chunk) for chunk in chunks])
        self._parts = [(chunk.offsets.to_numpy(), chunk.values.to_numpy(zero_copy_only=False)) for chunk in chunks]

    def lengths(self) -> np.ndarray:
        """(N,) int64 list lengths (reads only the offsets, but the kernel maps the pages around them too)."""
        chunks = self.dataset.data.column(self.column).chunks
        lengths = np.concatenate([pc.list_value_length(c).to_numpy(zero_copy_only=False).astype(np.int64)
                                  for c in chunks] or [np.zeros(0, np.int64)])
        release_mapped_pages(self.files)
        return lengths

    def __getitem__(self, row: int) -> np.ndarray:
        if self._parts is None:
            self._load()
        self._reads += 1
        if self._reads % self.RELEASE_EVERY == 0:
            release_mapped_pages(self.files)
        chunk = bisect.bisect_right(self._starts, row) - 1
        offsets, values = self._parts[chunk]
        local = row - self._starts[chunk]
        return values[offsets[local]:offsets[local + 1]]


def _cumulative(lengths: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])


class _View(torch.utils.data.Dataset):
    """Examples made on demand from token rows; `limit` keeps the first ones only (a capped held-out set)."""

    count: int
    limit: int | None = None

    def __len__(self) -> int:
        return self.count if self.limit is None else min(self.count, self.limit)

    def __getitem__(self, k: int) -> dict[str, Any]:
        if not 0 <= k < len(self):
            raise IndexError(k)
        return {**self.example(int(k)), "example_id": int(k)}

    def __iter__(self):
        return (self[k] for k in range(len(self)))


class GroupBlocks(_View):
    """The training rows' tokens concatenated in order and cut into `[CLS] max_length-2 tokens [SEP]` blocks (the
    last may be shorter); chinese word ids ride along, each row's shifted past the previous row's in the block."""

    def __init__(self, tokens: datasets.Dataset, rows: np.ndarray, max_length: int, cls: int, sep: int,
                 limit: int | None = None):
        self.ids = ListColumn(tokens, "input_ids")
        self.words = ListColumn(tokens, "word_ids") if "word_ids" in tokens.column_names else None
        self.rows, self.size, self.cls, self.sep, self.limit = rows, max_length - 2, cls, sep, limit
        self.starts = _cumulative(self.ids.lengths()[rows])  # (R+1,) token offset of each row in the stream
        self.count = -(-int(self.starts[-1]) // self.size)

    def example(self, k: int) -> dict[str, Any]:
        start = k * self.size
        end = min(start + self.size, int(self.starts[-1]))
        ids, words, shift = [self.cls], [None], 0
        i = int(np.searchsorted(self.starts, start, side="right")) - 1
        while i < len(self.rows) and self.starts[i] < end:
            lo, hi = max(start - self.starts[i], 0), min(end - self.starts[i], self.starts[i + 1] - self.starts[i])
            ids += self.ids[int(self.rows[i])][lo:hi].tolist()
            if self.words is not None:
                shift = extend_words(words, self.words[int(self.rows[i])][lo:hi].tolist(), shift)
            i += 1
        out = {"input_ids": ids + [self.sep]}
        if self.words is not None:
            out["word_ids"] = words + [None]
        return out


def extend_words(words: list, row: list[int], shift: int) -> int:
    """Append one row's word ids (-1 = none) shifted by `shift`; the next row's shift (ids stay distinct)."""
    top = -1
    for w in row:
        words.append(None if w < 0 else w + shift)
        top = max(top, w)
    return shift + top + 1


class LineWindows(_View):
    """One example per row; a row longer than max_length-2 tokens continues in further windows (as the fast
    tokenizer's overflowing tokens make them, no stride), so no text is lost."""

    def __init__(self, tokens: datasets.Dataset, rows: np.ndarray, max_length: int, cls: int, sep: int,
                 limit: int | None = None):
        self.ids = ListColumn(tokens, "input_ids")
        self.words = ListColumn(tokens, "word_ids") if "word_ids" in tokens.column_names else None
        self.rows, self.size, self.cls, self.sep, self.limit = rows, max_length - 2, cls, sep, limit
        windows = np.maximum(1, -(-self.ids.lengths()[rows] // self.size))
        self.starts = _cumulative(windows)
        self.count = int(self.starts[-1])

    def example(self, k: int) -> dict[str, Any]:
        i = int(np.searchsorted(self.starts, k, side="right")) - 1
        row, lo = int(self.rows[i]), (k - int(self.starts[i])) * self.size
        out = {"input_ids": [self.cls, *self.ids[row][lo:lo + self.size].tolist(), self.sep]}
        if self.words is not None:
            window = [None if w < 0 else w for w in self.words[row][lo:lo + self.size].tolist()]
            out["word_ids"] = [None, *window, None]
        return out


class NspPairs(_View):
    """Next-sentence pairs: each pair of consecutive sentences of a document (its rows' sentences in order), label
    0; with probability 1/2 the second is swapped for a random sentence of another document, label 1. Each pair's
    draw is its own generator's, seeded from (seed, pair number): the same pairs in any process, read in any order."""

    def __init__(self, tokens: datasets.Dataset, rows: np.ndarray, document: np.ndarray, tokenizer, max_length: int,
                 seed: int, whole_word: str, limit: int | None = None):
        if max_length < 5:
            raise BertkitError(f"max_length must be at least 5 for [CLS] A [SEP] B [SEP], got {max_length}")
        self.ids, self.lengths = ListColumn(tokens, "input_ids"), ListColumn(tokens, "sentence_lengths")
        self.words = ListColumn(tokens, "word_ids") if whole_word == "chinese" else None
        self.tokenizer, self.max_length, self.seed, self.limit = tokenizer, max_length, seed, limit
        counts = self.lengths.lengths()[rows]  # sentences per row
        keep = counts > 0
        self.rows, doc = rows[keep], document[rows][keep]
        self.row_starts = _cumulative(counts[keep])  # (R+1,) first sentence number of each row
        first_row = np.flatnonzero(np.concatenate([[True], doc[1:] != doc[:-1]])) if len(doc) else np.zeros(0, int)
        self.doc_starts = self.row_starts[np.append(first_row, len(self.rows))]  # (D+1,) first sentence of each doc
        if len(self.doc_starts) < 3:
            raise BertkitError("NSP needs at least two non-empty documents to draw NotNext sentences from")
        self.pair_starts = _cumulative(np.diff(self.doc_starts) - 1)  # (D+1,) pairs before each document
        self.count = int(self.pair_starts[-1])

    def sentence(self, g: int):
        i = int(np.searchsorted(self.row_starts, g, side="right")) - 1
        row, local = int(self.rows[i]), g - int(self.row_starts[i])
        lengths = self.lengths[row]
        lo = int(lengths[:local].sum())
        hi = lo + int(lengths[local])
        words = None
        if self.words is not None:
            words = [None if w < 0 else w for w in self.words[row][lo:hi].tolist()]
        return Sentence(self.ids[row][lo:hi].tolist(), words)

    def example(self, k: int) -> dict[str, Any]:
        d = int(np.searchsorted(self.pair_starts, k, side="right")) - 1
        g = int(self.doc_starts[d]) + k - int(self.pair_starts[d])
        rng = random.Random(f"nsp/{self.seed}/{k}")
        documents = len(self.doc_starts) - 1
        if rng.random() < 0.5:
            other = rng.randrange(documents - 1)
            other += other >= d  # uniform over the other documents
            partner = rng.randrange(int(self.doc_starts[other]), int(self.doc_starts[other + 1]))
            return pair_example(self.sentence(g), self.sentence(partner), 1, self.tokenizer, self.max_length)
        return pair_example(self.sentence(g), self.sentence(g + 1), 0, self.tokenizer, self.max_length)


def nonempty(view) -> None:
    """Refuse a corpus that gave no example (every line empty)."""
    if len(view) == 0:
        raise BertkitError("the corpus gave no example — every line is empty")


__all__ = ["GroupBlocks", "LineWindows", "ListColumn", "NspPairs", "extend_words", "nonempty"]
