"""Where a row came from ('line 7' of a text file, 'row 7' of Parquet or the Hub), and the in-memory
dataset that parsed rows become."""

from __future__ import annotations

import dataclasses
import weakref
from array import array
from typing import Any, Sequence

import datasets
import pyarrow as pa
from datasets.table import InMemoryTable

from bertkit.errors import BertkitError

from .messages import clip


# Row i is not always line i + 2 of a CSV (a quoted field may span lines, blank lines are skipped), and a
# `datasets.Dataset` has nowhere to keep that mapping. So the reader remembers it beside the dataset object, weakly
# (nothing leaks), and every later check (empty texts, unseen labels) asks `row_location`.


@dataclasses.dataclass(frozen=True)
class _Rows:
    unit: str  # "line" or "row"
    first: int = 1  # the number of row 0 when the rows sit on consecutive lines
    numbers: array | None = None  # each row's own line number when they do not


_ROWS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def remember_rows(dataset: datasets.Dataset, unit: str, numbers: Sequence[int] | None = None) -> None:
    """Keep where the dataset's rows came from: `numbers` = each row's line (None: row i is number i + 1)."""
    first = numbers[0] if numbers else 1
    consecutive = numbers is None or all(n == first + i for i, n in enumerate(numbers))
    _ROWS[dataset] = _Rows(unit, first, None if consecutive else array("q", numbers))


def carry_rows(source: datasets.Dataset, derived: datasets.Dataset) -> datasets.Dataset:
    """A column added or cast keeps the rows where they were: the derived dataset has the same locations."""
    if source in _ROWS:
        _ROWS[derived] = _ROWS[source]
    return derived


def row_location(dataset: datasets.Dataset, index: int) -> str:
    """'line 7' (text files: the line an editor shows, header = line 1) or 'row 7' (Parquet, Hub, unknown)."""
    rows = _ROWS.get(dataset, _Rows("row"))
    number = rows.numbers[index] if rows.numbers is not None else rows.first + index
    return f"{rows.unit} {number}"


def column_values(dataset: datasets.Dataset, column: str) -> list:
    """A column's values as a list."""
    return dataset[column][:]  # one Arrow read; iterating the Column object goes row by row


def no_rows(path: str, detail: str = "") -> BertkitError:
    """The error for a file (or Hub split) without a single example."""
    return BertkitError(f"{path} has no rows{detail} — add at least one example")


def value_kind(value: Any) -> str:
    """What a parsed value is, in a user's words ('a number', 'null'), for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


def in_memory_dataset(columns: dict[str, list], path: str, unit: str, lines: list[int] | None) -> datasets.Dataset:
    """Parsed columns as an in-memory `datasets.Dataset` that remembers each row's line (`lines`, None: i + 1)."""
    if not columns or not next(iter(columns.values())):
        raise no_rows(path)
    arrays = {name: _arrow_column(name, values, path, lines) for name, values in columns.items()}
    dataset = datasets.Dataset(InMemoryTable(pa.table(arrays)))
    remember_rows(dataset, unit, lines)
    return dataset


def _arrow_column(name: str, values: list, path: str, lines: list[int] | None) -> pa.Array:
    """One column as Arrow; values of different kinds ('1' and 1) would fail deep in pyarrow, so say where."""
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as err:
        kinds = [(i, value_kind(v)) for i, v in enumerate(values) if v is not None]
        first = kinds[0]
        other = next(((i, kind) for i, kind in kinds if kind != first[1]), None)
        if other is None:  # same kinds, still refused: e.g. an integer beyond int64, or lists of mixed kinds
            raise BertkitError(
                f"{path} column '{name}' cannot be stored ({clip(err, 80)}) — use one simple type for the column"
            ) from None
        where = (lambda i: f"line {lines[i]}") if lines else (lambda i: f"line {i + 1}")
        raise BertkitError(
            f"{path} column '{name}': {where(first[0])} has {first[1]} but {where(other[0])} has {other[1]} — "
            f"use one type for the whole column"
        ) from None


__all__ = ["remember_rows", "carry_rows", "row_location", "column_values", "no_rows", "value_kind", "in_memory_dataset"]
