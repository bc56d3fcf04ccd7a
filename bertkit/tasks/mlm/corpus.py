"""A masked-LM corpus of real size: read through `datasets` (memory flat in corpus size, tokenized on all cores,
cached on disk) or streamed; the model rows made from it (group blocks, line windows, NSP sentence pairs); and the
same rows from a corpus held in memory.

    lines = read_lines("corpus.txt")                       # Arrow, memory-mapped; one row per line
    split = split_rows(blank_flags(lines), 0.05, seed=42)  # held-out documents, as row numbers
    tokens = tokenize_rows(lines, tokenizer, "wordpiece")  # datasets.map, num_proc workers, cached
    train = GroupBlocks(tokens, split.train, max_length=128, cls=..., sep=...)   # a torch Dataset view

Why rows are lines and blocks are a view:
- A document can be the whole file (a corpus without blank lines is one document), so the unit that goes through
  `datasets.map` is a line (a paragraph), whose size is bounded. Documents are recovered from blank-line flags
  with two numpy passes (`split_rows`), never by holding text in Python.
- Tokenizing is row-wise (a line's tokens do not depend on any other line), so its result is the same for any
  num_proc and any shard boundaries, and the cache written by one num_proc serves another.
- Blocks of the concatenated text (`GroupBlocks`), windows of long lines (`LineWindows`) and NSP sentence pairs
  (`NspPairs`) are read on demand from the memory-mapped token column (zero-copy numpy slices), through small
  per-row offset arrays: no second copy of the corpus on disk, and exactly the blocks that concatenating all
  training paragraphs in one process gives (`group_examples`) — block k is tokens [k*(L-2), (k+1)*(L-2)) of the
  training paragraphs in file order, whatever num_proc was.
- Fingerprints are explicit (`Hasher.hash` of the parent fingerprint, the step's settings, a digest of the
  tokenizer's vocabulary and rules, and CORPUS_VERSION), so a second run with the same corpus and settings finds
  the cache files whatever process computes them, and any change of tokenizer or settings misses.
- Pages of the memory-mapped Arrow files that a process has read are handed back as it goes
  (`release_mapped_pages`): they count in its RSS though nothing of them is its own memory.

Why a read failed is said in one line (`corpus_error`): a full disk under the datasets cache is the disk's fault,
not the corpus's; bytes that are not UTF-8 are named by byte offset and line.

Streaming (`stream_examples`): the same blocks and windows built from a `datasets` streaming read, for corpora
larger than the disk cache; held-out rows are picked by a hash of (seed, row), so no length is needed.

In memory (`read_examples`, `encode`, `make_nsp_examples`): documents read from a file and model rows built from
plain lists, as `bertkit evaluate` reads an mlm model's file; they give the same group blocks and line windows as
the cached path (tests/test_mlm.py compares them).
"""

from __future__ import annotations

import bisect
import codecs
import ctypes
import errno
import hashlib
import json
import logging
import os
import random
import re
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Literal, NamedTuple, Sequence

import datasets
import numpy as np
import pyarrow.compute as pc
import torch
from datasets.fingerprint import Hasher
from filelock import FileLock

from bertkit import speed
from bertkit.errors import BertkitError
from bertkit.tasks.mlm.whole_word_masking import (WHOLE_WORD_MODES, WholeWord, add_word_ids, chinese_word_ids,
                                                  piece_marker, wordpiece_word_ids)

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
    each cell is a document, as `read_examples` reads it."""
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
    builders = logging.getLogger("datasets.packaged_modules")  # the csv / json builders log a failed read before
    level = builders.level                                      # raising it: corpus_error says it in one line
    builders.setLevel(logging.CRITICAL)
    try:
        table = datasets.load_dataset(loader, data_files=str(path), split="train", cache_dir=cache_dir, **options)
    except (OSError, ValueError, datasets.exceptions.DatasetGenerationError) as err:
        raise corpus_error(path, loader, err, cache_dir) from None
    finally:
        builders.setLevel(level)
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
    """`split_documents` on row numbers: the same seeded sample (random.sample picks
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


# =========================================================================================== why a read failed
# Why `datasets` could not read a corpus, in one line: a full disk under the datasets cache is the disk's fault,
# not the corpus's (it names the cache and the keys that move it); bytes that are not UTF-8 are named by byte offset
# and line; anything else is said as datasets said it.

DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def _chain(err: BaseException) -> Iterator[BaseException]:
    """`err` and the errors it was raised from or during (datasets wraps the real one in DatasetGenerationError)."""
    seen = set()
    while err is not None and id(err) not in seen and len(seen) < 20:
        seen.add(id(err))
        yield err
        err = err.__cause__ or err.__context__


def disk_full_in(err: BaseException) -> OSError | None:
    return next((e for e in _chain(err) if isinstance(e, OSError) and e.errno in DISK_FULL), None)


def cache_folder(cache_dir: str | None) -> str:
    return str(cache_dir or datasets.config.HF_DATASETS_CACHE)


def disk_full_error(cache: str, doing: str) -> BertkitError:
    return BertkitError(f"the disk of the datasets cache {cache} is full (while {doing}) — the corpus is not at "
                        "fault: free space there, or point data.cache_dir (or HF_DATASETS_CACHE) at a folder on a "
                        "disk with room")


def first_invalid_utf8(path: str, chunk: int = 1 << 20) -> tuple[int, int, int] | None:
    """(byte offset, line, the byte) of the first byte of `path` that is not UTF-8; None if it all decodes."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    fed = lines = 0
    with open(path, "rb") as handle:
        while True:
            data = handle.read(chunk)
            pending = decoder.getstate()[0]
            try:
                decoder.decode(data, final=not data)
            except UnicodeDecodeError as err:
                offset = fed - len(pending) + err.start
                before = (pending + data)[:err.start]
                return offset, lines + before.count(b"\n") - pending.count(b"\n") + 1, (pending + data)[err.start]
            if not data:
                return None
            fed += len(data)
            lines += data.count(b"\n")


def not_text_error(path: str) -> BertkitError:
    from bertkit.datafiles import encoding_guess  # the classify reader's guess: UTF-16, GBK / GB18030

    found = first_invalid_utf8(path) if os.path.isfile(path) else None
    where = (f": byte offset {found[0]:,} (line {found[1]:,}) is 0x{found[2]:02x}" if found else "")
    guess = encoding_guess(_sample(path, found[0])) if found else ""
    convert = "convert it" if guess else "convert it (e.g. iconv -f latin1 -t utf-8)"
    return BertkitError(f"{path} is not UTF-8 text{where}{guess} — a corpus is a UTF-8 text file: {convert}, or "
                        "check that data.train names the text and not a binary file")


def _sample(path: str, offset: int, size: int = 1 << 16) -> bytes:
    """Bytes to guess the encoding from: the file's start (where a BOM is) when the first bad byte is near it,
    else from that byte on."""
    with open(path, "rb") as handle:
        handle.seek(0 if offset < size else offset)
        return handle.read(size)


def corpus_error(path: str, loader: str, err: BaseException, cache_dir: str | None) -> BertkitError:
    """One line for a corpus `datasets` could not read: a full disk under the cache is the disk's fault, not the
    corpus's; bytes that are not UTF-8 are named by offset and line; anything else as datasets said it."""
    if disk_full_in(err) is not None:
        return disk_full_error(cache_folder(cache_dir), f"copying {path} into it")
    if any(isinstance(e, UnicodeDecodeError) for e in _chain(err)):
        return not_text_error(path)
    cause = next((e for e in _chain(err) if not isinstance(e, datasets.exceptions.DatasetGenerationError)), err)
    return BertkitError(f"{path}: could not be read as {loader} ({type(cause).__name__}: {str(cause)[:120]})")


# ======================================================================================= pages of mapped files
# Pages of memory-mapped Arrow files that a process has read, handed back as it goes.
#
# Each page of a mapped file that a process has read counts in its RSS until the mapping is gone or the kernel needs
# the memory, so a process that reads a whole corpus table through its mapping (a map worker over its shard, a
# training run over an epoch of blocks) grows in RSS with the corpus, though nothing of it is its own memory.
# `release_mapped_pages` unmaps those pages (madvise MADV_DONTNEED; Linux only, elsewhere it does nothing): they
# stay in the kernel's page cache, and a later read maps them again. Only read-only mappings are touched, so
# nothing written can be dropped, and what is read is unchanged.

class ReleasingReadPages:
    """A datasets.map function that, every `every` batches, releases the pages it has read of its input's Arrow
    `files`: without it a map worker's RSS grows by the size of its shard (at 1 GB of text the process tree's peak
    RSS was 3,371 MB without it, 2,443 MB with it)."""

    def __init__(self, function, files: tuple[str, ...], every: int = 8):
        self.function, self.files, self.every, self.calls = function, files, every, 0

    def __call__(self, batch: dict[str, list]) -> dict[str, list]:
        out = self.function(batch)
        self.calls += 1
        if self.calls % self.every == 0:
            release_mapped_pages(self.files)
        return out


def mapped_files(dataset) -> tuple[str, ...]:
    """The Arrow files a datasets.Dataset is memory-mapped from, as /proc/self/maps names them."""
    return tuple(os.path.realpath(f["filename"]) for f in dataset.cache_files)


def release_mapped_pages(files: tuple[str, ...]) -> int:
    """madvise(MADV_DONTNEED) over this process's read-only mappings of `files`; returns how many it released (none
    with the `page_release` trick off: bertkit/speed.py)."""
    if not speed.on("page_release"):
        return 0
    try:
        maps = Path("/proc/self/maps").read_text().splitlines()
    except OSError:  # not Linux
        return 0
    wanted, released = set(files), 0
    for line in maps:
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or "w" in fields[1] or fields[5] not in wanted:
            continue
        start, end = (int(address, 16) for address in fields[0].split("-"))
        released += _madvise(start, end - start, _MADV_DONTNEED) == 0
    return released


_MADV_DONTNEED = 4
_libc = None


def _madvise(start: int, length: int, advice: int) -> int:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    return _libc.madvise(start, length, advice)


# =========================================================================== model rows from the cached tokens
# Model rows read on demand from a tokenized corpus (`tokenize_rows`): group blocks of the concatenated text,
# windows of long lines, and NSP sentence pairs, as torch Datasets over zero-copy slices of the memory-mapped token
# column. Each row carries its number as `example_id`, the identity its training masks are drawn from.

class ListColumn:
    """Rows of a list<int32> column of an Arrow-backed dataset as zero-copy numpy slices of the memory-mapped
    file. Pickles as the dataset (which pickles as its file paths); the slices are rebuilt on first use. Every
    `RELEASE_EVERY` rows read, the file pages read so far are released (`release_mapped_pages`), so that an epoch
    over a large corpus does not grow the process's RSS by the size of the token table."""

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


# =========================================================================================== a streamed corpus
# A corpus larger than the disk cache, read as a `datasets` stream: the same group blocks and line windows as the
# views above make from the cache, with held-out rows picked by a hash of (seed, row), so no length is needed.

def held_by_hash(seed: int, row: int, fraction: float) -> bool:
    """Whether streamed row `row` is held out: a hash of (seed, row) below `fraction` (no corpus length needed)."""
    digest = hashlib.blake2b(f"{seed}/{row}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") / 2.0 ** 64 < fraction


def stream_lines(path: str) -> Iterator[dict[str, str]]:
    """A .txt corpus as a `datasets` stream of lines (`text`); other kinds are refused. Bytes that are not UTF-8
    are one line naming the offset, as the cached read says it (`corpus_error`), wherever the stream is."""
    if Path(path).suffix.lower() != ".txt":
        raise BertkitError(f"data.streaming reads .txt corpora (one paragraph per line); {path} is not one")
    return _read_stream(path, datasets.load_dataset("text", data_files=str(path), split="train", streaming=True))


def _read_stream(path: str, stream: datasets.IterableDataset) -> Iterator[dict[str, str]]:
    try:
        yield from stream
    except (OSError, ValueError, datasets.exceptions.DatasetGenerationError) as err:
        raise corpus_error(path, "text", err, None) from None


def stream_examples(path: str, tokenizer, whole_word: str, mode: str, max_length: int, seed: int,
                    fraction: float, held: bool) -> Iterator[dict[str, Any]]:
    """Training (held=False) or held-out (held=True) examples of a streamed .txt corpus, in corpus order, each
    with its number in that order as `example_id`: group blocks of the concatenated text, or line windows. A row
    is held out when `held_by_hash`; fraction=0 holds out nothing (a separate data.eval)."""
    encode = EncodeRows(tokenizer, "chinese" if whole_word == "chinese" else "none")
    make = _stream_blocks if mode == "group" else _stream_windows
    rows = (text for row, text in enumerate(r["text"] for r in stream_lines(path))
            if text.strip() and held_by_hash(seed, row, fraction) == held)
    for k, example in enumerate(make(_encoded_batches(rows, encode), max_length, tokenizer)):
        yield {**example, "example_id": k}


def _encoded_batches(texts: Iterator[str], encode: EncodeRows) -> Iterator[tuple[list, list | None]]:
    """(ids, word ids or None) per row, tokenized ROW_BATCH rows at a time."""
    batch: list[str] = []
    for text in texts:
        batch.append(text)
        if len(batch) == ROW_BATCH:
            yield from _encode_batch(batch, encode)
            batch = []
    if batch:
        yield from _encode_batch(batch, encode)


def _encode_batch(batch: list[str], encode: EncodeRows):
    out = encode({"text": batch})
    yield from zip(out["input_ids"], out.get("word_ids", [None] * len(batch)))


def _stream_blocks(rows, max_length: int, tokenizer) -> Iterator[dict[str, Any]]:
    """GroupBlocks over a stream: the same blocks, carrying the unfinished one across rows."""
    size, cls, sep = max_length - 2, tokenizer.cls_token_id, tokenizer.sep_token_id
    ids: list[int] = []
    words: list | None = None
    shift = 0
    for row_ids, row_words in rows:
        if row_words is not None and words is None:
            words = []
        ids += row_ids
        if row_words is not None:
            shift = extend_words(words, row_words, shift)
        while len(ids) >= size:
            yield _block(ids[:size], None if words is None else words[:size], cls, sep)
            ids = ids[size:]
            words = None if words is None else words[size:]
    if ids:
        yield _block(ids, words, cls, sep)


def _block(ids: list[int], words: list | None, cls: int, sep: int) -> dict[str, Any]:
    out = {"input_ids": [cls, *ids, sep]}
    if words is not None:
        out["word_ids"] = [None, *words, None]
    return out


def _stream_windows(rows, max_length: int, tokenizer) -> Iterator[dict[str, Any]]:
    size, cls, sep = max_length - 2, tokenizer.cls_token_id, tokenizer.sep_token_id
    for row_ids, row_words in rows:
        for lo in range(0, max(len(row_ids), 1), size):
            words = None if row_words is None else [None if w < 0 else w for w in row_words[lo:lo + size]]
            yield _block(row_ids[lo:lo + size], words, cls, sep)


def streaming_dataset(path: str, tokenizer, whole_word: str, mode: str, max_length: int, seed: int,
                      fraction: float, shuffle_buffer: int) -> datasets.IterableDataset:
    """The training examples as a datasets IterableDataset (one shard, so its order is the corpus order; a seeded
    shuffle buffer, re-seeded per epoch by Trainer's set_epoch). Resuming replays the stream to the same example:
    Trainer skips the batches already trained on, and the masks are a function of (seed, epoch, example_id)."""
    kwargs = {"path": str(path), "tokenizer": tokenizer, "whole_word": whole_word, "mode": mode,
              "max_length": max_length, "seed": seed, "fraction": fraction, "held": False}
    stream = datasets.IterableDataset.from_generator(stream_examples, gen_kwargs=kwargs)
    return stream.shuffle(seed=seed, buffer_size=shuffle_buffer) if shuffle_buffer > 1 else stream


def take(examples, count: int) -> list[dict[str, Any]]:
    """The first `count` examples of an iterable (a held-out set from a stream)."""
    out = []
    for example in examples:
        if len(out) >= count:
            break
        out.append(example)
    return out


def first_texts_of(texts: Iterable[str], limit: int = 200_000) -> list[str]:
    """The first texts of a stream up to `limit` characters (what resolve_whole_word reads)."""
    out, size = [], 0
    for text in texts:
        out.append(text)
        size += len(text)
        if size >= limit:
            break
    return out


# ========================================================================================= next-sentence pairs
# Next-sentence-prediction pairs: sentences cut from paragraphs, [CLS] A [SEP] B [SEP] with IsNext / NotNext.

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
    marker = piece_marker(tokenizer) if whole_word == "wordpiece" else None  # once: it parses tokenizer.json
    for i, ids in enumerate(enc["input_ids"]):
        word_ids = None
        if whole_word != "none":
            tokens = tokenizer.convert_ids_to_tokens(ids)
            word_ids = (wordpiece_word_ids(tokens, marker=marker) if whole_word == "wordpiece"
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


# ========================================================================================== a corpus in memory
# Masked-LM examples from a corpus held in memory: documents read from a file, held-out documents, and the model
# rows (group blocks, line windows, NSP pairs) built from plain lists. The recipe builds the same rows from the
# `datasets` cache instead (above), so that memory stays flat in corpus size; the two paths give the same group
# blocks and line windows (tests/test_mlm.py compares them). `bertkit evaluate` on an mlm model reads its file
# through `read_examples` and `encode`.

# ----------------------------------------------------------------------------------------- in-memory documents


def documents_from_lines(lines: Sequence[str | None]) -> list[list[str]]:
    """Blank-line-separated blocks of non-empty lines: `["a", "b", "", "c"]` -> `[["a", "b"], ["c"]]`."""
    documents, current = [], []
    for line in lines:
        text = (line or "").strip()
        if text:
            current.append(text)
        elif current:
            documents.append(current)
            current = []
    if current:
        documents.append(current)
    return documents


def read_examples(path: str, text_column: str | None = None) -> list[list[str]]:
    """A corpus as documents of paragraphs. A .txt file: one paragraph per line, blank lines between documents.
    A table (csv, tsv, json, jsonl, parquet, Hub dataset): one document per row of the text column, its lines the
    paragraphs."""
    from bertkit.datafiles import read_table, resolve_columns

    table = read_table(path)
    if str(path).lower().endswith(".txt"):
        documents = documents_from_lines(table["text"])
    else:
        column = resolve_columns(table.features, path, text=text_column, require_label=False).text
        rows = ["" if value is None else str(value) for value in table[column]]
        documents = [[line for line in (part.strip() for part in row.split("\n")) if line] for row in rows]
        documents = [doc for doc in documents if doc]
    if not documents:
        raise BertkitError(f"{path} holds no text — every line (or text cell) is empty")
    return documents


def split_documents(documents: list[list[str]], fraction: float, seed: int) -> tuple[list, list]:
    """(train, held-out): a seeded random `fraction` of the documents (at least one) is held out. With fewer than
    ten documents, paragraphs are held out instead (each its own held-out document; the training documents keep
    the rest)."""
    if not 0.0 < fraction < 1.0:
        raise BertkitError(f"data.eval_fraction must be between 0 and 1, got {fraction} — or give data.eval=<file>")
    by_document = len(documents) >= 10
    units = [(d, None) for d in range(len(documents))] if by_document else \
        [(d, i) for d, doc in enumerate(documents) for i in range(len(doc))]
    if len(units) < 2:
        raise BertkitError("the corpus has a single paragraph: nothing to hold out — give data.eval=<file>")
    count = min(max(1, round(fraction * len(units))), len(units) - 1)
    held = sorted(random.Random(seed).sample(units, count))
    held_set = set(held)
    if by_document:
        return [doc for d, doc in enumerate(documents) if (d, None) not in held_set], [documents[d] for d, _ in held]
    train = [[line for i, line in enumerate(doc) if (d, i) not in held_set] for d, doc in enumerate(documents)]
    return [doc for doc in train if doc], [[documents[d][i]] for d, i in held]


# ---------------------------------------------------------------------------------------------- in-memory rows


def line_examples(texts: list[str], tokenizer, max_length: int, whole_word: str) -> dict[str, list]:
    """One example per text; a text longer than max_length continues in further windows (no text is lost)."""
    kwargs = {"truncation": True, "max_length": max_length, "return_overflowing_tokens": True}
    if whole_word == "chinese":
        out = add_word_ids(texts, tokenizer, "chinese", **kwargs)
        return {"input_ids": [list(x) for x in out["input_ids"]], "word_ids": out["word_ids"]}
    return {"input_ids": [list(x) for x in tokenizer(texts, **kwargs)["input_ids"]]}


def group_examples(texts: list[str], tokenizer, max_length: int, whole_word: str,
                   chunk: int = 1000) -> dict[str, list]:
    """All texts' tokens concatenated and cut into blocks `[CLS] max_length-2 tokens [SEP]` (the last may be
    shorter). With whole_word="chinese" each text's rjieba word ids ride along, shifted so they stay distinct."""
    size = max_length - 2
    if size < 1:
        raise BertkitError(f"data.max_length must be at least 3, got {max_length}")
    with_words = whole_word == "chinese"
    ids: list[int] = []
    words: list[int | None] = []
    shift = 0
    for start in range(0, len(texts), chunk):
        batch = texts[start:start + chunk]
        if with_words:
            enc = add_word_ids(batch, tokenizer, "chinese", add_special_tokens=False)
        else:
            enc = {"input_ids": tokenizer(batch, add_special_tokens=False)["input_ids"]}
        for row, row_ids in enumerate(enc["input_ids"]):
            ids.extend(row_ids)
            if with_words:
                row_words = enc["word_ids"][row]
                words.extend(None if w is None else w + shift for w in row_words)
                shift += 1 + max((w for w in row_words if w is not None), default=-1)
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    out: dict[str, list] = {"input_ids": [[cls, *ids[s:s + size], sep] for s in range(0, len(ids), size)]}
    if with_words:
        out["word_ids"] = [[None, *words[s:s + size], None] for s in range(0, len(ids), size)]
    return out


def nsp_examples(documents: list[list[str]], tokenizer, max_length: int, seed: int, whole_word: str) -> list[dict]:
    """Sentence pairs for next-sentence prediction: each document's paragraphs cut into sentences first."""
    sentences = [[s for paragraph in doc for s in split_sentences(paragraph)] for doc in documents]
    return make_nsp_examples(sentences, tokenizer, max_length, seed=seed, whole_word=whole_word)


def encode(tokenizer, documents: list[list[str]], max_length: int = 128, mode: Literal["line", "group"] = "group",
           whole_word: WholeWord = "wordpiece", nsp: bool = False, seed: int = 0) -> list[dict]:
    """Documents -> model rows, as the recipe makes them: NSP sentence pairs (drawn with `seed`), or group blocks /
    line windows of every paragraph in order. Each row has `input_ids` and, where the mode makes them,
    `word_ids`, `token_type_ids` and `next_sentence_label`."""
    if nsp:
        return nsp_examples(documents, tokenizer, max_length, seed, whole_word)
    build = line_examples if mode == "line" else group_examples
    columns = build([paragraph for doc in documents for paragraph in doc], tokenizer, max_length, whole_word)
    return [dict(zip(columns, row)) for row in zip(*columns.values())]


__all__ = [
    "CORPUS_VERSION", "ROW_BATCH", "BlankFlags", "CellsToLines", "Corpus", "EncodeRows", "RowSplit", "all_rows",
    "blank_flags", "cached_map", "default_num_proc", "documents_of", "first_texts", "iter_texts", "open_corpus",
    "read_lines", "split_rows", "step_fingerprint", "token_features", "tokenize_rows", "tokenized_file",
    "tokenizer_digest",
    # why a read failed
    "DISK_FULL", "disk_full_in", "cache_folder", "disk_full_error", "first_invalid_utf8", "not_text_error",
    "corpus_error",
    # pages of mapped files
    "ReleasingReadPages", "mapped_files", "release_mapped_pages",
    # model rows from the cached tokens
    "GroupBlocks", "LineWindows", "ListColumn", "NspPairs", "extend_words", "nonempty",
    # a streamed corpus
    "first_texts_of", "held_by_hash", "stream_examples", "stream_lines", "streaming_dataset", "take",
    # next-sentence pairs
    "Sentence", "make_nsp_examples", "pair_example", "split_sentences",
    # a corpus in memory
    "documents_from_lines", "encode", "group_examples", "line_examples", "nsp_examples", "read_examples",
    "split_documents",
]
