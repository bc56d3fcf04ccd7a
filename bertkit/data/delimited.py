"""CSV and TSV files, parsed in Python so that every error names the line an editor shows."""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import datasets

from bertkit.errors import BertkitError

from .decoding import read_text
from .messages import clip, listing
from .rows import in_memory_dataset, no_rows


@contextmanager
def _big_fields():
    """The csv module refuses fields over 128 KiB by default; a long document in one cell is legitimate."""
    old = csv.field_size_limit()
    csv.field_size_limit(2**31 - 1)
    try:
        yield
    finally:
        csv.field_size_limit(old)


def _csv_records(text: str, path: str, delimiter: str) -> list[tuple[int, list[str]]]:
    """(line, fields) for every non-blank record; `line` is where the record starts (a quoted field may span
    several lines). `strict` makes a stray quote an error here instead of text silently losing its quotes."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    records, start = [], 1
    with _big_fields():
        while True:
            try:
                fields = next(reader)
            except StopIteration:
                return records
            except csv.Error as err:
                raise BertkitError(
                    f"{path} line {start}: the row cannot be parsed ({err}) — check the quotes on that line: a "
                    f'field with quotes in it must be wrapped in quotes and its quotes doubled ("say ""hi""")'
                ) from None
            line, start = start, reader.line_num + 1
            if fields and not (len(fields) == 1 and not fields[0].strip()):  # blank lines are not rows
                records.append((line, fields))


def _check_separator(text: str, path: str, delimiter: str) -> None:
    """A header line without the file's separator but with another one: the file was saved with the wrong
    separator. Checked on the raw first line, before any row, so that a stray quote in a later row is not blamed."""
    lines = text.lstrip("\ufeff").split("\n")
    number, header = next(((i + 1, line) for i, line in enumerate(lines) if line.strip()), (1, ""))
    if delimiter in header:
        return
    other = next((sep for sep in (";", "\t", ",", "|") if sep != delimiter and sep in header), None)
    if other:
        want = "tab" if delimiter == "\t" else "comma"
        raise BertkitError(
            f"{path} line {number} has a single column '{clip(header.strip(), 40)}': the file seems to be separated "
            f"by {other!r}, but a {Path(path).suffix} file is read as {want}-separated — re-save it {want}-separated"
        )


def _csv_header(fields: list[str], path: str, delimiter: str, line: int) -> list[str]:
    names = [name.strip() or f"Unnamed: {i}" for i, name in enumerate(fields)]  # pandas' name for an index column
    for name, count in Counter(names).items():
        if count > 1:
            raise BertkitError(
                f"{path} line {line}: column '{name}' appears {count} times in the header — rename them"
            )
    return names


def read_delimited(path: str, delimiter: str) -> datasets.Dataset:
    """A CSV (delimiter ',') or TSV ('\\t') file: a header line, then one row per example."""
    text = read_text(path)
    _check_separator(text, path, delimiter)
    records = _csv_records(text, path, delimiter)
    if not records:
        raise BertkitError(f"{path} is empty — put a header line, then one row per example, in it")
    header = _csv_header(records[0][1], path, delimiter, records[0][0])
    rows, lines = [], []
    for line, fields in records[1:]:
        if len(fields) != len(header):
            raise _ragged(path, line, len(fields), header, delimiter)
        rows.append(fields)
        lines.append(line)
    if not rows:
        raise no_rows(path, " (only the header line)")
    columns = {name: _typed_cells([row[i] for row in rows]) for i, name in enumerate(header)}
    return in_memory_dataset(columns, path, "line", lines)


def _ragged(path: str, line: int, count: int, header: list[str], delimiter: str) -> BertkitError:
    if delimiter == "\t":
        hint = "every line needs one tab between fields"
    else:
        hint = 'put quotes around values that contain commas ("a, b")'
    return BertkitError(
        f"{path} line {line} has {count} fields but the header has {len(header)} ({listing(header, 8)}) — {hint}"
    )


_INT_CELL = re.compile(r"[+-]?\d{1,18}")  # 18 digits always fit in int64
FLOAT_CELL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_LEADING_ZERO = re.compile(r"[+-]?0\d")


def _typed_cells(cells: list[str]) -> list:
    """CSV cells are text. A column whose every non-empty cell is a number becomes numbers (as pandas would read
    it), so integer labels stay integers and scores floats; an empty cell is then None. Codes with a leading
    zero ('007') keep the column as text: turning them into 7 would lose information."""
    filled = [cell.strip() for cell in cells if cell.strip()]
    if not filled or any(_LEADING_ZERO.match(cell) for cell in filled):
        return cells
    if all(_INT_CELL.fullmatch(cell) for cell in filled):
        return [int(cell) if cell.strip() else None for cell in cells]
    if all(FLOAT_CELL.fullmatch(cell) for cell in filled):
        return [float(cell) if cell.strip() else None for cell in cells]
    return cells


__all__ = ["FLOAT_CELL", "read_delimited"]
