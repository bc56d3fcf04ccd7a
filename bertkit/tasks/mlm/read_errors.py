"""Why `datasets` could not read a corpus, in one line: a full disk under the datasets cache is the disk's fault,
not the corpus's (it names the cache and the keys that move it); bytes that are not UTF-8 are named by byte offset
and line; anything else is said as datasets said it."""

from __future__ import annotations

import codecs
import errno
import os
from typing import Iterator

import datasets

from bertkit.errors import BertkitError

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
    found = first_invalid_utf8(path) if os.path.isfile(path) else None
    where = (f": byte offset {found[0]:,} (line {found[1]:,}) is 0x{found[2]:02x}" if found else "")
    return BertkitError(f"{path} is not UTF-8 text{where} — a corpus is a UTF-8 text file: convert it (e.g. iconv "
                        "-f latin1 -t utf-8), or check that data.train names the text and not a binary file")


def corpus_error(path: str, loader: str, err: BaseException, cache_dir: str | None) -> BertkitError:
    """One line for a corpus `datasets` could not read: a full disk under the cache is the disk's fault, not the
    corpus's; bytes that are not UTF-8 are named by offset and line; anything else as datasets said it."""
    if disk_full_in(err) is not None:
        return disk_full_error(cache_folder(cache_dir), f"copying {path} into it")
    if any(isinstance(e, UnicodeDecodeError) for e in _chain(err)):
        return not_text_error(path)
    cause = next((e for e in _chain(err) if not isinstance(e, datasets.exceptions.DatasetGenerationError)), err)
    return BertkitError(f"{path}: could not be read as {loader} ({type(cause).__name__}: {str(cause)[:120]})")


__all__ = ["DISK_FULL", "disk_full_in", "cache_folder", "disk_full_error", "first_invalid_utf8", "not_text_error",
           "corpus_error"]
