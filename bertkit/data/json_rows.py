"""JSON lines and JSON arrays of objects, each row knowing the line its object starts on."""

from __future__ import annotations

import json
import re
from typing import Any

import datasets

from bertkit.errors import BertkitError

from .decoding import read_text
from .messages import clip, listing
from .rows import in_memory_dataset, no_rows, value_kind


def json_lines(path: str, text: str):
    """(line number, parsed value) for every non-blank line of a JSON-lines text; a line that is not JSON is an
    error naming it."""
    # Split on "\n" only: str.splitlines() would also split at U+2028, which json.dumps leaves inside strings.
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.strip()  # also drops the "\r" of Windows line ends
        if not line:
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as err:
            raise BertkitError(
                f"{path} line {number} is not valid JSON ({err.msg}, column {err.colno}): {clip(line, 50)} — "
                f"fix that line; each line must hold one complete JSON object"
            ) from None


def read_jsonl(path: str, text: str | None = None) -> datasets.Dataset:
    """A JSON-lines file (or its `text`, already read): one object per line."""
    numbered = list(json_lines(path, read_text(path) if text is None else text))
    return _dataset_from_rows([row for _, row in numbered], [number for number, _ in numbered], path)


_JSON_SPACE = re.compile(r"[ \t\n\r]*")


def _read_json_array(path: str, text: str) -> datasets.Dataset:
    """Parse `[{...}, {...}]` one element at a time so that each row knows the line its object starts on."""
    decoder, rows, lines = json.JSONDecoder(), [], []
    pos = _JSON_SPACE.match(text, text.index("[") + 1).end()
    counted, line = 0, 1  # newlines are counted incrementally: once over the file, not once per row
    while pos < len(text) and text[pos] != "]":
        try:
            row, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as err:
            raise _json_error(path, err) from None
        line, counted = line + text.count("\n", counted, pos), pos
        rows.append(row)
        lines.append(line)
        pos = _JSON_SPACE.match(text, end).end()
        if text[pos : pos + 1] == ",":
            pos = _JSON_SPACE.match(text, pos + 1).end()
        elif text[pos : pos + 1] != "]":
            break
    if text[pos : pos + 1] != "]" or text[pos + 1 :].strip():
        line = text.count("\n", 0, pos) + 1
        raise BertkitError(
            f"{path} line {line}: expected ',' between elements and one ']' at the end — fix the JSON there"
        )
    return _dataset_from_rows(rows, lines, path)


def _json_error(path: str, err: json.JSONDecodeError) -> BertkitError:
    return BertkitError(f"{path} line {err.lineno} is not valid JSON ({err.msg}, column {err.colno}) — fix it there")


def read_json(path: str) -> datasets.Dataset:
    """A .json file is either an array of objects or JSON lines (datasets writes .json files as JSON lines)."""
    text = read_text(path)
    if text.lstrip().startswith("["):
        return _read_json_array(path, text)
    try:
        return read_jsonl(path, text)
    except BertkitError:
        whole = _json_value(text)
        if isinstance(whole, dict):  # a pretty-printed object such as SQuAD's {"version": ..., "data": [...]}
            raise BertkitError(
                f"{path} holds one JSON object (keys: {listing(whole, 6)}), not rows — write a JSON array of "
                f"objects or one object per line (JSONL)"
            ) from None
        raise


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _dataset_from_rows(rows: list, lines: list[int], path: str) -> datasets.Dataset:
    """Rows are objects; a key missing from some rows is None there (datasets' from_list would silently drop
    keys that the first row lacks)."""
    if not rows:
        raise no_rows(path)
    for row, line in zip(rows, lines):
        if not isinstance(row, dict):
            raise BertkitError(
                f"{path} line {line} holds {value_kind(row)}, not an object — write each row as "
                f'{{"text": ..., "label": ...}}'
            )
    names = list(dict.fromkeys(key for row in rows for key in row))
    return in_memory_dataset({name: [row.get(name) for row in rows] for name in names}, path, "line", lines)


__all__ = ["json_lines", "read_jsonl", "read_json"]
