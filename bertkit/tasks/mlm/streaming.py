"""A corpus larger than the disk cache, read as a `datasets` stream: the same group blocks and line windows as
`blocks.py` makes from the cache, with held-out rows picked by a hash of (seed, row), so no length is needed."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Iterable, Iterator

import datasets

from bertkit.errors import BertkitError
from bertkit.tasks.mlm.blocks import extend_words
from bertkit.tasks.mlm.corpus import ROW_BATCH, EncodeRows
from bertkit.tasks.mlm.read_errors import corpus_error


def held_by_hash(seed: int, row: int, fraction: float) -> bool:
    """Whether streamed row `row` is held out: a hash of (seed, row) below `fraction` (no corpus length needed)."""
    digest = hashlib.blake2b(f"{seed}/{row}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") / 2.0 ** 64 < fraction


def stream_lines(path: str) -> Iterator[dict[str, str]]:
    """A .txt corpus as a `datasets` stream of lines (`text`); other kinds are refused. Bytes that are not UTF-8
    are one line naming the offset, as the cached read says it (corpus.corpus_error), wherever the stream is."""
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


__all__ = ["first_texts_of", "held_by_hash", "stream_examples", "stream_lines", "streaming_dataset", "take"]
