"""A pretraining corpus through `datasets`: memory flat in corpus size, tokenized on all cores, cached on disk.

    lines = read_lines("corpus.txt")                       # Arrow, memory-mapped; one row per line
    split = split_rows(blank_flags(lines), 0.05, seed=42)  # held-out documents, as row numbers
    tokens = tokenize_rows(lines, tokenizer, "wordpiece")  # datasets.map, num_proc workers, cached
    train = GroupBlocks(tokens, split.train, max_length=128, cls=..., sep=...)   # blocks.py: a torch Dataset view

Why rows are lines and blocks are a view:
- A document can be the whole file (a corpus without blank lines is one document), so the unit that goes through
  `datasets.map` is a line (a paragraph), whose size is bounded. Documents are recovered from blank-line flags
  with two numpy passes (`split_rows`), never by holding text in Python.
- Tokenizing is row-wise (a line's tokens do not depend on any other line), so its result is the same for any
  num_proc and any shard boundaries, and the cache written by one num_proc serves another.
- Blocks of the concatenated text (`GroupBlocks`), windows of long lines (`LineWindows`) and NSP sentence pairs
  (`NspPairs`) are read on demand from the memory-mapped token column (zero-copy numpy slices), through small
  per-row offset arrays: no second copy of the corpus on disk, and exactly the blocks that concatenating all
  training paragraphs in one process gives (`examples.group_examples`) — block k is tokens
  [k*(L-2), (k+1)*(L-2)) of the training paragraphs in file order, whatever num_proc was.
- Fingerprints are explicit (`Hasher.hash` of the parent fingerprint, the step's settings, a digest of the
  tokenizer's vocabulary and rules, and CORPUS_VERSION), so a second run with the same corpus and settings finds
  the cache files whatever process computes them, and any change of tokenizer or settings misses.

Streaming (`streaming.py`): the same blocks and windows built from a `datasets` streaming read, for corpora
larger than the disk cache; held-out rows are picked by a hash of (seed, row), so no length is needed.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import datasets
import numpy as np
from datasets.fingerprint import Hasher
from filelock import FileLock

from bertkit.errors import BertkitError
from bertkit.tasks.mlm.nsp import split_sentences
from bertkit.tasks.mlm.pages import ReleasingReadPages, mapped_files, release_mapped_pages
from bertkit.tasks.mlm.read_errors import cache_folder, corpus_error, disk_full_error, disk_full_in
from bertkit.tasks.mlm.words import add_word_ids

CORPUS_VERSION = "1"
"""Part of every fingerprint: bump it when a map function changes what it writes, so old caches are not reused."""
ROW_BATCH = 1000
"""Rows per `datasets.map` batch (and per Arrow record batch written)."""
_TABLE_LOADERS = {".jsonl": ("json", {}), ".json": ("json", {}), ".parquet": ("parquet", {}),
                  ".csv": ("csv", {}), ".tsv": ("csv", {"delimiter": "\t"})}


def default_num_proc() -> int:
    """Worker processes for tokenizing: the cores this process may use, at most 8 (past that the Arrow writes and
    the pickling of results, not the tokenizer, set the pace)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, 8))


def tokenizer_digest(tokenizer) -> str:
    """What decides the ids a tokenizer gives: its class, its tokenizer.json without the truncation / padding state
    that a call may leave behind (which would change a pickle-based hash between two runs)."""
    spec = json.loads(tokenizer.backend_tokenizer.to_str())
    spec.pop("truncation", None)
    spec.pop("padding", None)
    text = json.dumps([type(tokenizer).__name__, spec], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def step_fingerprint(parent: str, step: str, **settings) -> str:
    """A deterministic fingerprint of a map step: the same inputs give the same cache file in any process."""
    return Hasher.hash([parent, step, CORPUS_VERSION, sorted(settings.items())])


def _cached(dataset: datasets.Dataset, fingerprint: str) -> bool:
    """Whether `map(new_fingerprint=fingerprint)` will load from cache (one file, or a complete set of shards)."""
    if not dataset.cache_files:
        return False
    path = Path(dataset._get_cache_file_path(fingerprint))
    if path.exists():
        return True
    shards = list(path.parent.glob(f"{path.stem}_*_of_*{path.suffix}"))
    counts = {int(p.stem.rsplit("_of_", 1)[1]) for p in shards}
    return any(sum(p.stem.endswith(f"_of_{n:05d}") for p in shards) == n for n in counts)


def cached_map(dataset: datasets.Dataset, function, fingerprint: str, num_proc: int, desc: str,
               **kwargs) -> tuple[datasets.Dataset, bool]:
    """`dataset.map(batched=True)` under an explicit fingerprint; also says whether it came from the cache."""
    workers = None if num_proc <= 1 or len(dataset) < 2 * ROW_BATCH else num_proc
    # A lock per cache file: under torchrun the first rank computes, the others wait and then load its files.
    lock = FileLock(dataset._get_cache_file_path(fingerprint) + ".lock") if dataset.cache_files else nullcontext()
    with lock:
        hit = _cached(dataset, fingerprint)
        try:
            out = dataset.map(ReleasingReadPages(function, mapped_files(dataset)), batched=True,
                              batch_size=ROW_BATCH, writer_batch_size=ROW_BATCH, num_proc=workers,
                              new_fingerprint=fingerprint, desc=desc, **kwargs)
        except OSError as err:  # the cache's disk, not the corpus: say where, and what to set
            if disk_full_in(err) is None:
                raise
            cache = (str(Path(dataset.cache_files[0]["filename"]).parent) if dataset.cache_files else
                     cache_folder(None))
            raise disk_full_error(cache, desc) from None
    # Opening a table reads the header of every record batch, and the kernel maps the cached pages around each
    # page read (fault-around): 150 MB of a 1 GB corpus's text table stayed in this process's RSS after loading it.
    release_mapped_pages(mapped_files(dataset) + mapped_files(out))
    return out, hit


# ----------------------------------------------------------------------------------------------------- reading


def read_lines(path: str, text_column: str | None = None, cache_dir: str | None = None,
               num_proc: int = 1) -> datasets.Dataset:
    """The corpus as one row per line (`text`), memory-mapped from the datasets cache. A .txt file as it is
    (blank lines separate documents); a table's text cells become their lines followed by one blank row, so
    each cell is a document, as `examples.read_examples` reads it."""
    suffix = Path(path).suffix.lower()
    if suffix == ".txt":
        return _load(path, "text", {"sample_by": "line"}, cache_dir)
    if os.path.isfile(path) and suffix in _TABLE_LOADERS:
        loader, options = _TABLE_LOADERS[suffix]
        table = _load(path, loader, options, cache_dir)
    else:  # a Hub dataset (or a file kind only bertkit's own readers take): read as bertkit.datafiles reads tables
        from bertkit.datafiles import read_table

        table = read_table(path)
    from bertkit.datafiles import resolve_columns

    column = resolve_columns(table.features, path, text=text_column, require_label=False).text
    fingerprint = step_fingerprint(table._fingerprint, "cells-to-lines", column=column)
    lines, _ = cached_map(table, CellsToLines(column), fingerprint, num_proc, "table cells to lines",
                          remove_columns=table.column_names)
    return lines


def _load(path: str, loader: str, options: dict, cache_dir: str | None) -> datasets.Dataset:
    try:
        table = datasets.load_dataset(loader, data_files=str(path), split="train", cache_dir=cache_dir, **options)
    except (OSError, ValueError, datasets.exceptions.DatasetGenerationError) as err:
        raise corpus_error(path, loader, err, cache_dir) from None
    release_mapped_pages(mapped_files(table))  # see cached_map
    return table


@dataclass(frozen=True)
class CellsToLines:
    """datasets.map function: each text cell -> its non-empty lines, then a blank row (the end of the document)."""
    column: str

    def __call__(self, batch: dict[str, list]) -> dict[str, list]:
        lines = []
        for value in batch[self.column]:
            cell = [line.strip() for line in ("" if value is None else str(value)).split("\n")]
            lines += [line for line in cell if line] + [""]
        return {"text": lines}


def first_texts(lines: datasets.Dataset, rows: np.ndarray, limit: int = 200_000) -> list[str]:
    """The first lines among `rows` up to `limit` characters (enough to tell a Chinese corpus from another)."""
    texts, size = [], 0
    for start in range(0, len(rows), ROW_BATCH):
        for text in lines[rows[start:start + ROW_BATCH].tolist()]["text"]:
            texts.append(text.strip())
            size += len(texts[-1])
            if size >= limit:
                return texts
    return texts


def iter_texts(lines: datasets.Dataset, rows: np.ndarray) -> Iterator[str]:
    """The stripped text of `rows`, read a batch at a time (for vocabulary counts and tokenizer training)."""
    for start in range(0, len(rows), ROW_BATCH):
        yield from (text.strip() for text in lines[rows[start:start + ROW_BATCH].tolist()]["text"])


# --------------------------------------------------------------------------------------------------- documents


@dataclass(frozen=True)
class BlankFlags:
    """datasets.map function: whether each line is blank (a document boundary)."""

    def __call__(self, batch: dict[str, list]) -> dict[str, list]:
        return {"blank": [not (text or "").strip() for text in batch["text"]]}


def blank_flags(lines: datasets.Dataset, num_proc: int = 1) -> np.ndarray:
    """(N,) bool: line i is blank. Computed in workers and cached: the main process never reads the text."""
    flags, _ = cached_map(lines, BlankFlags(), step_fingerprint(lines._fingerprint, "blank"), num_proc,
                          "finding documents", remove_columns=lines.column_names)
    return np.concatenate([chunk.to_numpy(zero_copy_only=False) for chunk in flags.data.column("blank").chunks]
                          or [np.zeros(0, bool)])


@dataclass
class RowSplit:
    train: np.ndarray
    """(R,) int64: rows (non-blank lines) of the training text, in file order."""
    held: np.ndarray
    """(H,) int64: rows of the held-out text, in file order."""
    document: np.ndarray
    """(N,) int64: document number of every row (held-out paragraphs of a small corpus get their own)."""
    documents: int
    """Documents in the corpus."""


def documents_of(blank: np.ndarray) -> tuple[np.ndarray, int]:
    """(document number per row, document count): a document is a run of non-blank lines."""
    text = ~blank
    starts = text & np.concatenate([[True], blank[:-1]])  # a text line after a blank one (or first)
    return np.cumsum(starts) - 1, int(starts.sum())


def split_rows(blank: np.ndarray, fraction: float, seed: int) -> RowSplit:
    """`examples.split_documents` on row numbers: the same seeded sample (random.sample picks
    positions, so sampling range(n) picks what sampling a list of n units does): documents with ten or more,
    else paragraphs (each held-out paragraph its own document)."""
    if not 0.0 < fraction < 1.0:
        raise BertkitError(f"data.eval_fraction must be between 0 and 1, got {fraction} — or give data.eval=<file>")
    document, count_docs = documents_of(blank)
    text_rows = np.flatnonzero(~blank)
    by_document = count_docs >= 10
    units = count_docs if by_document else len(text_rows)
    if units < 2:
        raise BertkitError("the corpus has a single paragraph: nothing to hold out — give data.eval=<file>")
    count = min(max(1, round(fraction * units)), units - 1)
    chosen = np.zeros(units, bool)
    chosen[random.Random(seed).sample(range(units), count)] = True
    held = chosen[document[text_rows]] if by_document else chosen
    if not by_document:  # a held-out paragraph is a document of its own, as split_documents makes it
        document = document.copy()
        document[text_rows[held]] = count_docs + np.arange(int(held.sum()))
    return RowSplit(text_rows[~held], text_rows[held], document, count_docs)


def all_rows(blank: np.ndarray) -> RowSplit:
    """Every non-blank row, for a separate held-out file (data.eval)."""
    document, count = documents_of(blank)
    return RowSplit(np.flatnonzero(~blank), np.zeros(0, np.int64), document, count)


# -------------------------------------------------------------------------------------------------- tokenizing


@dataclass
class EncodeRows:
    """datasets.map function: the token ids of each line, no special tokens (`input_ids`, int32); with
    whole_word="chinese" rjieba word ids per token (`word_ids`, -1 for none); with sentences=True each line is
    cut into sentences first (NSP) and `sentence_lengths` says where each ends. Row-wise: no line's result
    depends on another's, so any num_proc gives the same table."""
    tokenizer: Any
    whole_word: str
    sentences: bool = False

    def __call__(self, batch: dict[str, list]) -> dict[str, list]:
        texts = [(text or "").strip() for text in batch["text"]]
        parts = [split_sentences(t) if self.sentences else ([t] if t else []) for t in texts]
        flat = [p for row in parts for p in row]
        ids, words = self._encode(flat)
        out: dict[str, list] = {"input_ids": [], **({"word_ids": []} if words is not None else {}),
                                **({"sentence_lengths": []} if self.sentences else {})}
        cursor = 0
        for row in parts:
            pieces = range(cursor, cursor + len(row))
            cursor += len(row)
            out["input_ids"].append([i for p in pieces for i in ids[p]])
            if words is not None:
                out["word_ids"].append([w for p in pieces for w in words[p]])
            if self.sentences:
                out["sentence_lengths"].append([len(ids[p]) for p in pieces])
        return out

    def _encode(self, texts: list[str]) -> tuple[list[list[int]], list[list[int]] | None]:
        if not texts:
            return [], ([] if self.whole_word == "chinese" else None)
        if self.whole_word != "chinese":
            return self.tokenizer(texts, add_special_tokens=False)["input_ids"], None
        enc = add_word_ids(texts, self.tokenizer, "chinese", add_special_tokens=False)
        return enc["input_ids"], [[-1 if w is None else w for w in row] for row in enc["word_ids"]]


def token_features(whole_word: str, sentences: bool) -> datasets.Features:
    """The token table's columns: int32 lists of ids, and of word ids / sentence lengths where they are made."""
    ints = datasets.List(datasets.Value("int32"))
    features = {"input_ids": ints}
    if whole_word == "chinese":
        features["word_ids"] = ints
    if sentences:
        features["sentence_lengths"] = ints
    return datasets.Features(features)


def tokenize_rows(lines: datasets.Dataset, tokenizer, whole_word: str, sentences: bool = False,
                  num_proc: int = 1) -> tuple[datasets.Dataset, bool]:
    """(tokens, cache hit): `EncodeRows` over every line, in `num_proc` workers, cached by fingerprint."""
    chinese = "chinese" if whole_word == "chinese" else "none"
    fingerprint = step_fingerprint(lines._fingerprint, "tokenize", tokenizer=tokenizer_digest(tokenizer),
                                   whole_word=chinese, sentences=sentences)
    return cached_map(lines, EncodeRows(tokenizer, chinese, sentences), fingerprint, num_proc, "tokenizing",
                      remove_columns=lines.column_names, features=token_features(chinese, sentences))


# -------------------------------------------------------------------------------------------------- the corpus


@dataclass
class Corpus:
    """Training and held-out text as rows of line tables (the same table when the held-out slice is cut from the
    corpus), and the tokens once `tokenize` ran."""
    lines: datasets.Dataset
    split: RowSplit
    eval_lines: datasets.Dataset
    eval_split: RowSplit
    tokens: datasets.Dataset | None = None
    eval_tokens: datasets.Dataset | None = None

    @property
    def eval_rows(self) -> np.ndarray:
        return self.eval_split.train if self.eval_lines is not self.lines else self.split.held

    def sample_texts(self) -> list[str]:
        return first_texts(self.lines, self.split.train)

    def texts(self) -> Iterator[str]:
        return iter_texts(self.lines, self.split.train)

    def tokenize(self, tokenizer, whole_word: str, sentences: bool, num_proc: int) -> bool:
        """Tokenize both tables (cached); True when every table came from the cache."""
        self.tokens, hit = tokenize_rows(self.lines, tokenizer, whole_word, sentences, num_proc)
        self.eval_tokens, eval_hit = self.tokens, hit
        if self.eval_lines is not self.lines:
            self.eval_tokens, eval_hit = tokenize_rows(self.eval_lines, tokenizer, whole_word, sentences, num_proc)
        return hit and eval_hit


def open_corpus(train: str, eval_path: str | None, fraction: float, seed: int, text_column: str | None = None,
                cache_dir: str | None = None, num_proc: int = 1) -> Corpus:
    """Read the corpus (and data.eval) into the datasets cache and split off the held-out rows."""
    lines = read_lines(train, text_column, cache_dir, num_proc)
    blank = _with_text(blank_flags(lines, num_proc), train)
    if not eval_path:
        split = split_rows(blank, fraction, seed)
        return Corpus(lines, split, lines, split)
    eval_lines = read_lines(eval_path, text_column, cache_dir, num_proc)
    return Corpus(lines, all_rows(blank), eval_lines, all_rows(_with_text(blank_flags(eval_lines, num_proc),
                                                                          eval_path)))


def tokenized_file(path: str, tokenizer, whole_word: str, text_column: str | None = None,
                   cache_dir: str | None = None, num_proc: int = 1) -> tuple[datasets.Dataset, RowSplit]:
    """A whole file (a streaming run's data.eval) read and tokenized through the cache: its tokens and rows."""
    lines = read_lines(path, text_column, cache_dir, num_proc)
    rows = all_rows(blank_flags(lines, num_proc))
    tokens, _ = tokenize_rows(lines, tokenizer, whole_word, False, num_proc)
    return tokens, rows


def _with_text(blank: np.ndarray, path: str) -> np.ndarray:
    if blank.all():
        raise BertkitError(f"{path} holds no text — every line (or text cell) is empty")
    return blank


__all__ = [
    "CORPUS_VERSION", "ROW_BATCH", "BlankFlags", "CellsToLines", "Corpus", "EncodeRows", "RowSplit", "all_rows",
    "blank_flags", "cached_map", "default_num_proc", "documents_of", "first_texts", "iter_texts", "open_corpus",
    "read_lines", "split_rows", "step_fingerprint", "token_features", "tokenize_rows", "tokenized_file",
    "tokenizer_digest",
]
