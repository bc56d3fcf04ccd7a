"""Reading datasets for fine-tuning: local files and Hub datasets, column detection, label maps.

    read_table("data/en_sentiment/train.csv")       -> datasets.Dataset, rows in file order
    resolve_columns(ds.features, "train.csv")       -> ColumnMap(text="text", text_pair=None, label="label")
    LabelSpace.from_values(ds["label"])             -> LabelSpace(kind="single", names=["negative", "positive"])
    load_split("train.csv", {}, None, True)         -> all of the above, plus an encoded `labels` column

Every mistake in the input raises `BertkitError` with one line naming the file, the line as the user sees it in
an editor (a CSV header is line 1) and the column, and saying what to do. To make that possible the text formats
are parsed here, in Python, instead of by pandas / pyarrow / datasets: those report a byte offset, a pandas row
index, or a traceback from three libraries down. The files a fine-tuning run reads fit in memory, so the parsed
rows go straight into an in-memory Arrow table (no cache files, no `load_dataset` fingerprinting).
"""

from __future__ import annotations

import csv
import dataclasses
import difflib
import functools
import io
import json
import math
import os
import re
import weakref
from array import array
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Literal, Mapping, Sequence

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
from datasets.table import InMemoryTable

from bertkit.errors import BertkitError

SUPPORTED_EXTENSIONS = (".csv", ".tsv", ".json", ".jsonl", ".parquet", ".txt")


def _clip(text: Any, width: int = 60) -> str:
    """Any text made safe for a one-line message: whitespace collapsed, cut at `width` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _listing(names: Iterable[Any], most: int = 20) -> str:
    names = [str(name) for name in names]
    shown = ", ".join(names[:most])
    return shown if len(names) <= most else f"{shown}, ... ({len(names)} in all)"


# ---------------------------------------------------------------------------------------------------------------
# Where a row came from: "line 7" of a text file, "row 7" of a Parquet file or a Hub dataset.
#
# Row i is not always line i + 2 of a CSV (a quoted field may span lines, blank lines are skipped), and a
# `datasets.Dataset` has nowhere to keep that mapping. So the reader remembers it beside the dataset object, weakly
# (nothing leaks), and every later check (empty texts, unseen labels) asks `row_location`.


@dataclasses.dataclass(frozen=True)
class _Rows:
    unit: str  # "line" or "row"
    first: int = 1  # the number of row 0 when the rows sit on consecutive lines
    numbers: array | None = None  # each row's own line number when they do not


_ROWS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _remember_rows(dataset: datasets.Dataset, unit: str, numbers: Sequence[int] | None = None) -> None:
    first = numbers[0] if numbers else 1
    consecutive = numbers is None or all(n == first + i for i, n in enumerate(numbers))
    _ROWS[dataset] = _Rows(unit, first, None if consecutive else array("q", numbers))


def _carry_rows(source: datasets.Dataset, derived: datasets.Dataset) -> datasets.Dataset:
    """A column added or cast keeps the rows where they were: the derived dataset has the same locations."""
    if source in _ROWS:
        _ROWS[derived] = _ROWS[source]
    return derived


def row_location(dataset: datasets.Dataset, index: int) -> str:
    """'line 7' (text files: the line an editor shows, header = line 1) or 'row 7' (Parquet, Hub, unknown)."""
    rows = _ROWS.get(dataset, _Rows("row"))
    number = rows.numbers[index] if rows.numbers is not None else rows.first + index
    return f"{rows.unit} {number}"


# ---------------------------------------------------------------------------------------------------------------
# Reading bytes: existence, encoding, emptiness


def read_text(path: str) -> str:
    """The file decoded as strict UTF-8 without its BOM (Excel writes one; it would end up in the first column name)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise BertkitError(f"no such file: {path} — check the path") from None
    except OSError as err:
        raise BertkitError(f"{path} cannot be read ({_clip(err, 80)}) — check its permissions") from None
    if not data.strip():
        raise BertkitError(f"{path} is empty — put the data in it")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise BertkitError(
            f"{path} is not UTF-8: byte 0x{data[err.start]:02x} at offset {err.start} (line {line}) cannot be "
            f"decoded{_encoding_guess(data)} — re-save the file as UTF-8"
        ) from None
    return text.removeprefix("\ufeff")


def _encoding_guess(data: bytes) -> str:
    """A hint for the two encodings users most often have by accident: Excel's 'Unicode text' and Chinese GBK."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return " (it is UTF-16, as Excel's 'Unicode Text' writes)"
    try:
        text = data.decode("gb18030")
    except UnicodeDecodeError:
        return ""
    if re.search("[\u4e00-\u9fff]", text):
        return " (it looks like GBK/GB18030; e.g. `iconv -f GB18030 -t UTF-8`)"
    return ""


def _no_rows(path: str, detail: str = "") -> BertkitError:
    return BertkitError(f"{path} has no rows{detail} — add at least one example")


# ---------------------------------------------------------------------------------------------------------------
# CSV / TSV


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
            f"{path} line {number} has a single column '{_clip(header.strip(), 40)}': the file seems to be separated "
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


def _read_delimited(path: str, delimiter: str) -> datasets.Dataset:
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
        raise _no_rows(path, " (only the header line)")
    columns = {name: _typed_cells([row[i] for row in rows]) for i, name in enumerate(header)}
    return _dataset(columns, path, "line", lines)


def _ragged(path: str, line: int, count: int, header: list[str], delimiter: str) -> BertkitError:
    if delimiter == "\t":
        hint = "every line needs one tab between fields"
    else:
        hint = 'put quotes around values that contain commas ("a, b")'
    return BertkitError(
        f"{path} line {line} has {count} fields but the header has {len(header)} ({_listing(header, 8)}) — {hint}"
    )


_INT_CELL = re.compile(r"[+-]?\d{1,18}")  # 18 digits always fit in int64
_FLOAT_CELL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
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
    if all(_FLOAT_CELL.fullmatch(cell) for cell in filled):
        return [float(cell) if cell.strip() else None for cell in cells]
    return cells


# ---------------------------------------------------------------------------------------------------------------
# JSON lines, JSON arrays


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
                f"{path} line {number} is not valid JSON ({err.msg}, column {err.colno}): {_clip(line, 50)} — "
                f"fix that line; each line must hold one complete JSON object"
            ) from None


def _read_jsonl(path: str, text: str | None = None) -> datasets.Dataset:
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


def _read_json(path: str) -> datasets.Dataset:
    """A .json file is either an array of objects or JSON lines (datasets writes .json files as JSON lines)."""
    text = read_text(path)
    if text.lstrip().startswith("["):
        return _read_json_array(path, text)
    try:
        return _read_jsonl(path, text)
    except BertkitError:
        whole = _json_value(text)
        if isinstance(whole, dict):  # a pretty-printed object such as SQuAD's {"version": ..., "data": [...]}
            raise BertkitError(
                f"{path} holds one JSON object (keys: {_listing(whole, 6)}), not rows — write a JSON array of "
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
        raise _no_rows(path)
    for row, line in zip(rows, lines):
        if not isinstance(row, dict):
            raise BertkitError(
                f"{path} line {line} holds {_json_kind(row)}, not an object — write each row as "
                f'{{"text": ..., "label": ...}}'
            )
    names = list(dict.fromkeys(key for row in rows for key in row))
    return _dataset({name: [row.get(name) for row in rows] for name in names}, path, "line", lines)


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


# ---------------------------------------------------------------------------------------------------------------
# Plain text, Parquet, and the in-memory dataset they all become


def _read_txt(path: str) -> datasets.Dataset:
    """One text per line. Blank lines are kept as empty rows (so row i is line i + 1) and `check_texts`
    reports them; only the newline that ends the file does not make a row."""
    lines = [line.rstrip("\r") for line in read_text(path).split("\n")]
    if lines and lines[-1] == "":
        lines.pop()
    return _dataset({"text": lines}, path, "line", None)


def _read_parquet(path: str) -> datasets.Dataset:
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as err:
        raise BertkitError(
            f"{path} cannot be read as Parquet ({_clip(err, 80)}) — check that it is a Parquet file "
            f"(e.g. written by pandas' to_parquet)"
        ) from None
    # pandas stores a non-default index as a column; it is not data.
    table = table.drop_columns([name for name in table.column_names if name.startswith("__index_level_")])
    if table.num_rows == 0:
        raise _no_rows(path)
    dataset = datasets.Dataset(InMemoryTable(table))  # keeps the features datasets wrote into the metadata
    _remember_rows(dataset, "row")
    return dataset


def _dataset(columns: dict[str, list], path: str, unit: str, lines: list[int] | None) -> datasets.Dataset:
    if not columns or not next(iter(columns.values())):
        raise _no_rows(path)
    arrays = {name: _arrow_column(name, values, path, lines) for name, values in columns.items()}
    dataset = datasets.Dataset(InMemoryTable(pa.table(arrays)))
    _remember_rows(dataset, unit, lines)
    return dataset


def _arrow_column(name: str, values: list, path: str, lines: list[int] | None) -> pa.Array:
    """One column as Arrow; values of different kinds ('1' and 1) would fail deep in pyarrow, so say where."""
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as err:
        kinds = [(i, _json_kind(v)) for i, v in enumerate(values) if v is not None]
        first = kinds[0]
        other = next(((i, kind) for i, kind in kinds if kind != first[1]), None)
        if other is None:  # same kinds, still refused: e.g. an integer beyond int64, or lists of mixed kinds
            raise BertkitError(
                f"{path} column '{name}' cannot be stored ({_clip(err, 80)}) — use one simple type for the column"
            ) from None
        where = (lambda i: f"line {lines[i]}") if lines else (lambda i: f"line {i + 1}")
        raise BertkitError(
            f"{path} column '{name}': {where(first[0])} has {first[1]} but {where(other[0])} has {other[1]} — "
            f"use one type for the whole column"
        ) from None


# ---------------------------------------------------------------------------------------------------------------
# Files, folders, Hub names

_READERS = {
    ".csv": lambda path: _read_delimited(path, ","),
    ".tsv": lambda path: _read_delimited(path, "\t"),
    ".json": _read_json,
    ".jsonl": _read_jsonl,
    ".parquet": _read_parquet,
    ".txt": _read_txt,
}

# `imdb`, `stanfordnlp/imdb`, `glue:sst2`, `glue:sst2@validation`, `imdb@train[:100]`
_HUB_NAME = re.compile(
    r"(?P<name>[A-Za-z0-9][\w.-]*(?:/[\w.-]+)?)(?::(?P<config>[\w.-]+))?(?:@(?P<split>[\w.\[\]:%+-]+))?"
)


# A name ending in one of these is a file the user meant, even if bertkit cannot read it.
_FILE_SUFFIXES = SUPPORTED_EXTENSIONS + (".xlsx", ".xls", ".gz", ".bz2", ".xz", ".zip", ".arrow", ".conll", ".tar")


def _looks_like_hub_name(path: str) -> bool:
    match = _HUB_NAME.fullmatch(path)
    if not match or Path(match["name"]).suffix.lower() in _FILE_SUFFIXES:
        return False
    # `data/train` with a local `data/` folder is a mistyped path, not the Hub dataset `data/train`.
    return not ("/" in match["name"] and os.path.isdir(match["name"].split("/")[0]))


def _read_hub(spec: str, split: str) -> datasets.Dataset:
    match = _HUB_NAME.fullmatch(spec)
    name, config, split = match["name"], match["config"], match["split"] or split
    try:
        dataset = datasets.load_dataset(name, config, split=split)
    except Exception as err:  # noqa: BLE001 - datasets raises a dozen kinds; the user needs one sentence
        offline = "; HF_HUB_OFFLINE is set, so only datasets already in the cache load" if _offline() else ""
        raise BertkitError(
            f"'{spec}' is not a local file, and the Hub dataset could not be loaded ({type(err).__name__}: "
            f"{_clip(err, 100)}) — check the path or the dataset name, config and split, and the network{offline}"
        ) from None
    if len(dataset) == 0:
        raise _no_rows(f"{spec} (split {split})")
    _remember_rows(dataset, "row")
    return dataset


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def read_table(path: str | os.PathLike, split: str = "train") -> datasets.Dataset:
    """A local file (.csv .tsv .json .jsonl .parquet .txt) or a Hub dataset name (`user/name`, `name:config`,
    `name@split`) as a `datasets.Dataset`, rows in file order. `split` only applies to Hub datasets."""
    path = os.fspath(path)
    if os.path.isdir(path):
        found = sorted(p.name for p in Path(path).iterdir() if p.suffix.lower() in SUPPORTED_EXTENSIONS)
        hint = f" (it holds {_listing(found, 6)})" if found else ""
        raise BertkitError(f"{path} is a folder — pass one data file in it{hint}")
    if os.path.isfile(path):
        reader = _READERS.get(Path(path).suffix.lower())
        if reader is None:
            raise BertkitError(
                f"{path}: unsupported file type '{Path(path).suffix or '(none)'}' — use one of "
                f"{', '.join(SUPPORTED_EXTENSIONS)}"
            )
        return reader(path)
    if _looks_like_hub_name(path):
        return _read_hub(path, split)
    raise BertkitError(f"no such file: {path} — check the path")


# ---------------------------------------------------------------------------------------------------------------
# Which column is which

# Case-insensitive, in priority order: the first name in the list that a file has wins.
TEXT_COLUMNS = (
    "text", "sentence", "sentence1", "text_a", "premise", "question", "query", "content", "review", "comment",
    "document", "文本", "句子", "内容", "评论", "正文", "问题",
)  # fmt: skip
TEXT_PAIR_COLUMNS = ("text_pair", "sentence2", "text_b", "hypothesis", "answer", "passage", "句子2", "文本2")
LABEL_COLUMNS = (
    "label", "labels", "score", "class", "category", "target", "sentiment", "标签", "类别", "情感", "分数",
)  # fmt: skip
# Columns that never hold the text, even when they are the only string column besides the label.
_ID_COLUMNS = {"id", "idx", "index", "guid", "uid", "key"}


@dataclasses.dataclass(frozen=True)
class ColumnMap:
    """The columns of a split that hold the text, the optional second text of a pair, and the label."""

    text: str
    text_pair: str | None = None
    label: str | None = None


def _names_and_kinds(columns: Sequence[str] | Mapping[str, Any]) -> tuple[list[str], dict[str, bool] | None]:
    """Column names, and which of them hold strings when the features are known (a list of names says nothing)."""
    if isinstance(columns, Mapping):
        return list(columns), {name: _is_string(feature) for name, feature in columns.items()}
    return list(columns), None


def _is_string(feature: Any) -> bool:
    return isinstance(feature, datasets.Value) and feature.dtype in ("string", "large_string")


def _by_name(candidates: Sequence[str], names: list[str], taken: set, source: str, role: str) -> str | None:
    """The first candidate that names a column (case-insensitive); two columns for one candidate is ambiguous."""
    for candidate in candidates:
        hits = [name for name in names if name.strip().lower() == candidate and name not in taken]
        if len(hits) > 1:
            raise BertkitError(
                f"columns {', '.join(repr(h) for h in hits)} of {source} could all be the {role} column — "
                f"set data.{role}_column=<name>"
            )
        if hits:
            return hits[0]
    return None


def _explicit(name: str, names: list[str], source: str, role: str) -> str:
    if name in names:
        return name
    close = difflib.get_close_matches(name, names, n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    raise BertkitError(
        f"column '{name}' (data.{role}_column) is not in {source} (columns: {_listing(names)}) — {hint}"
        f"set data.{role}_column to one of those"
    )


def _only_text_column(names: list[str], kinds: dict | None, taken: set, source: str) -> str:
    """No column has a known text name: the one remaining string column is the text, if there is exactly one."""
    rest = [name for name in names if name not in taken and name.strip().lower() not in _ID_COLUMNS]
    if kinds is not None:
        rest = [name for name in rest if kinds[name]]
    if len(rest) == 1:
        return rest[0]
    raise BertkitError(
        f"cannot tell which column of {source} holds the text (columns: {_listing(names)}) — set "
        f"data.text_column=<name> (and data.text_pair_column=<name> for sentence pairs)"
    )


def resolve_columns(
    column_names: Sequence[str] | Mapping[str, Any],
    source: str,
    text: str | None = None,
    text_pair: str | None = None,
    label: str | None = None,
    require_label: bool = True,
) -> ColumnMap:
    """Pick the text / text-pair / label columns: explicit names win, else the first known name in priority
    order (`TEXT_COLUMNS`, ...), else the only string column left is the text. `column_names` may be a list of
    names or `dataset.features` (which also says which columns hold strings)."""
    names, kinds = _names_and_kinds(column_names)
    if label:
        label = _explicit(label, names, source, "label")
    else:
        label = _by_name(LABEL_COLUMNS, names, set(), source, "label")
    if label is None and require_label:
        raise BertkitError(
            f"no label column in {source} (columns: {_listing(names)}) — name it 'label' or set "
            f"data.label_column=<name>"
        )
    taken = {label} - {None}
    text = _explicit(text, names, source, "text") if text else _by_name(TEXT_COLUMNS, names, taken, source, "text")
    taken |= {text} - {None}
    if text_pair:
        text_pair = _explicit(text_pair, names, source, "text_pair")
    else:
        text_pair = _by_name(TEXT_PAIR_COLUMNS, names, taken, source, "text_pair")
    taken |= {text_pair} - {None}
    text = text or _only_text_column(names, kinds, taken, source)
    if text == text_pair or text == label or (text_pair and text_pair == label):
        raise BertkitError(
            f"{source}: one column is used twice (text={text}, text_pair={text_pair}, label={label}) — give "
            f"data.text_column, data.text_pair_column and data.label_column different columns"
        )
    return ColumnMap(text, text_pair, label)


# ---------------------------------------------------------------------------------------------------------------
# Labels

LabelKind = Literal["single", "multi", "regression"]
_PROBLEM_TYPES = {
    "single": "single_label_classification",
    "multi": "multi_label_classification",
    "regression": "regression",
}


def _as_number(value: Any) -> float | None:
    """A label as a number (3, 2.5, '2.5'), or None when it is not one. True is not a number to a user."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return None if isinstance(value, float) and math.isnan(value) else float(value)
    if isinstance(value, str) and _FLOAT_CELL.fullmatch(value.strip()):
        return float(value)
    return None


# How tables spell a missing value (pandas, R, spreadsheets): a label written so is no label, never a class.
MISSING_LABELS = frozenset({"", "nan", "none", "null", "na", "n/a", "<na>"})


def _label_name(value: Any) -> str | None:
    """The name a single label value goes by, surrounding whitespace stripped: 3, 3.0 and '3' are all '3', so that
    int labels in a CSV match the same labels in a JSON file and in a model's id2label. None, NaN and the
    MISSING_LABELS spellings ('', 'NaN', 'None', 'null', 'NA') are no label."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    name = str(value).strip()
    return None if name.lower() in MISSING_LABELS else name


def _label_names(value: Any, kind: str, delimiter: str) -> list[str]:
    """The label names in one value: one for single-label; a list, or a delimited string, for multi-label."""
    if kind != "multi":
        name = _label_name(value)
        return [] if name is None else [name]
    if isinstance(value, (list, tuple)):
        parts = value
    else:
        parts = value.split(delimiter) if isinstance(value, str) else [value]
    return [name for name in map(_label_name, parts) if name is not None]


def _name_order(name: str) -> tuple:
    """Numbers in numeric order ('2' before '10'), then strings in code-point order: ids never depend on the
    order rows happen to come in, so the same training file always gives the same mapping."""
    number = _as_number(name)
    return (0, number, name) if number is not None else (1, 0.0, name)


Where = Callable[[int], str]  # row index -> 'line 7' / 'row 7', for messages


def _rows(items: list[tuple[int, Any]], where: Where | None, most: int = 3) -> str:
    """"line 7 ('x'), line 9 ('y') and 4 more": where the odd values of a column are."""
    shown = ", ".join(f"{where(i) if where else f'value {i + 1}'} ({_clip(repr(v), 20)})" for i, v in items[:most])
    return shown + (f" and {len(items) - most} more" if len(items) > most else "")


def _guess_kind(labelled: list[tuple[int, Any]], delimiter: str, source: str = "", where: Where | None = None
                ) -> LabelKind:  # fmt: skip
    """Lists or `delimiter`-joined strings are multi-label; numbers with fractions a score; anything else classes.
    A column that mostly follows one rule and breaks it in a few rows is refused, naming them: one stray value
    must not turn a classifier into a regression, or a score into forty classes."""
    values = [v for _, v in labelled]
    if any(isinstance(v, (list, tuple)) for v in values) or any(isinstance(v, str) and delimiter in v for v in values):
        return "multi"
    numbers = [(i, _as_number(v)) for i, v in labelled]
    words = [(i, v) for (i, v), (_, n) in zip(labelled, numbers) if n is None]
    if words and len(words) < len(labelled):
        _refuse_mixed_labels(labelled, words, source, where)
    if words:
        return "single"
    fractions = [(i, n) for i, n in numbers if not n.is_integer()]
    if fractions and len(fractions) < len(numbers) - len(fractions):
        raise BertkitError(
            f"labels{_in(source)} are whole numbers except at {_rows(fractions, where)} — for a score set "
            f"data.label_kind=regression; for classes fix those rows (or set data.label_kind=single)"
        )
    return "regression" if fractions else "single"


def _in(source: str) -> str:
    return f" in {source}" if source else ""


def _refuse_mixed_labels(labelled: list, words: list, source: str, where: Where | None) -> None:
    if 2 * len(words) <= len(labelled):  # mostly numbers: a few words are typos in a score or a class id
        raise BertkitError(
            f"labels{_in(source)} are numbers except at {_rows(words, where)} — fix those rows, or set "
            f"data.label_kind=single to make every value a class name"
        )
    numbers = [(i, v) for i, v in labelled if _as_number(v) is not None]
    raise BertkitError(
        f"labels{_in(source)} are class names except at {_rows(numbers, where)}, which are numbers — fix those "
        f"rows, or set data.label_kind=single to keep them as classes"
    )


def _refuse_case_variants(labelled: list, kind: str, delimiter: str, source: str, where: Where | None) -> None:
    """'Positive' beside 'positive' would be two classes: refuse, naming the first row of each spelling."""
    first: dict[str, int] = {}
    for i, value in labelled:
        for name in _label_names(value, kind, delimiter):
            first.setdefault(name, i)
    spellings: dict[str, list[str]] = {}
    for name in first:
        spellings.setdefault(name.casefold(), []).append(name)
    clash = next((names for names in spellings.values() if len(names) > 1), None)
    if clash:
        shown = " and ".join(f"{name!r} ({where(first[name]) if where else f'value {first[name] + 1}'})"
                             for name in clash[:3])
        raise BertkitError(f"labels {shown}{_in(source)} differ only in case, so they would be "
                           f"{len(clash)} classes — write each label one way")


@dataclasses.dataclass
class LabelSpace:
    """What the labels are: single-label classes, multi-label classes, or a regression score.

    `names[i]` is the label of class id i (empty for regression). Multi-label values are lists or strings joined
    by `delimiter`; `threshold` is the probability at which a multi-label class is predicted.
    """

    kind: LabelKind
    names: list[str] = dataclasses.field(default_factory=list)
    delimiter: str = ";"
    threshold: float = 0.5

    def __post_init__(self):
        if self.kind not in _PROBLEM_TYPES:
            raise BertkitError(f"unknown label kind {self.kind!r} — use one of {', '.join(_PROBLEM_TYPES)}")
        self.names = [str(name) for name in self.names]
        duplicates = [name for name, count in Counter(self.names).items() if count > 1]
        if duplicates:
            raise BertkitError(f"label {duplicates[0]!r} is listed twice in the label names — list each label once")

    @classmethod
    def from_values(
        cls, values: Iterable[Any], kind: LabelKind | Literal["auto"] = "auto", delimiter: str = ";", source: str = "",
        where: Where | None = None,
    ) -> LabelSpace:
        """The label space of a TRAINING split's label values. `kind="auto"`: lists or `delimiter`-joined strings
        are multi-label, numbers with fractions are regression, anything else single-label; a column that breaks
        its own pattern in a few rows, or spells one label in two cases, is refused. `where(i)` says where value i
        is ('line 7') in those messages. Missing values (None, NaN, MISSING_LABELS) are left out here."""
        labelled = [(i, v) for i, v in enumerate(values) if _label_name(v) is not None]
        values = [v for _, v in labelled]
        where_text = _in(source)
        if not values:
            raise BertkitError(
                f"no label values found{where_text} — fill in the labels, or point data.label_column at them"
            )
        kind = _guess_kind(labelled, delimiter, source, where) if kind == "auto" else kind
        if kind == "regression":
            return cls("regression", [], delimiter)
        _refuse_case_variants(labelled, kind, delimiter, source, where)
        names = sorted({name for value in values for name in _label_names(value, kind, delimiter)}, key=_name_order)
        if not names:  # multi-label rows that are all empty lists
            raise BertkitError(f"no label values found{where_text} — every row's label list is empty; fill them in")
        if kind == "single" and len(names) < 2:
            raise BertkitError(
                f"only one label ({names[0]!r}) was found{where_text} — a classifier needs at least two; for a "
                f"score use numbers with decimals, or set data.label_kind=regression"
            )
        return cls(kind, names, delimiter)

    @classmethod
    def from_model_config(cls, config: Any) -> LabelSpace:
        """The label space a trained model was saved with: its id2label, problem_type, and (multi-label)
        multi_label_threshold and label_delimiter, which `config_kwargs` writes."""
        problem = getattr(config, "problem_type", None)
        id2label = {int(i): str(name) for i, name in (getattr(config, "id2label", None) or {}).items()}
        if problem == "regression" or (problem is None and len(id2label) <= 1):  # transformers' own convention
            return cls("regression", [])
        if sorted(id2label) != list(range(len(id2label))):
            raise BertkitError(
                f"the model config's id2label has ids {_listing(sorted(id2label))}, not 0..{len(id2label) - 1} — "
                f"fix id2label in its config.json"
            )
        kind = "multi" if problem == "multi_label_classification" else "single"
        threshold = float(getattr(config, "multi_label_threshold", None) or 0.5)
        delimiter = getattr(config, "label_delimiter", None) or ";"
        return cls(kind, [id2label[i] for i in range(len(id2label))], delimiter, threshold)

    @functools.cached_property
    def _ids(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.names)}

    @property
    def id2label(self) -> dict[int, str]:
        return dict(enumerate(self.names))

    @property
    def label2id(self) -> dict[str, int]:
        return dict(self._ids)

    @property
    def num_labels(self) -> int:
        return 1 if self.kind == "regression" else len(self.names)

    @property
    def problem_type(self) -> str:
        return _PROBLEM_TYPES[self.kind]

    def config_kwargs(self) -> dict:
        """Keyword arguments for the model config, so that a saved model carries its labels."""
        kwargs = {"num_labels": self.num_labels, "problem_type": self.problem_type}
        if self.kind != "regression":
            kwargs.update(id2label=self.id2label, label2id=self.label2id)
        if self.kind == "multi":
            kwargs.update(multi_label_threshold=self.threshold, label_delimiter=self.delimiter)
        return kwargs

    def encode(self, value: Any, source: str = "", row: int | str | None = None) -> int | list[float] | float:
        """One label value -> class id (single), multi-hot floats (multi) or a float (regression).
        `row` is the line number the user sees (or a ready 'row 7'); it only goes into error messages."""
        where = " ".join(part for part in (source, f"line {row}" if isinstance(row, int) else row) if part)
        where = where or "the data"
        if self.kind == "regression":
            return self._encode_number(value, where)
        names = _label_names(value, self.kind, self.delimiter)
        if not names and self.kind == "single":
            raise BertkitError(f"{where}: the label is empty — fill it in or delete the row")
        for name in names:
            if name not in self._ids:
                raise BertkitError(
                    f"label {name!r} in {where} was never seen in training (known: {_listing(self.names)}) — "
                    f"fix the label or add it to the training data"
                )
        if self.kind == "single":
            return self._ids[names[0]]
        hot = [0.0] * len(self.names)
        for name in names:
            hot[self._ids[name]] = 1.0
        return hot

    @staticmethod
    def _encode_number(value: Any, where: str) -> float:
        number = _as_number(value)
        if number is None:
            if _label_name(value) is None:
                raise BertkitError(f"{where}: the label is empty — fill in a number or delete the row")
            raise BertkitError(
                f"label {_clip(repr(value), 40)} in {where} is not a number — a score must be like 3.5"
            )
        return number


# ---------------------------------------------------------------------------------------------------------------
# Checking and loading one split


def _values(dataset: datasets.Dataset, column: str) -> list:
    return dataset[column][:]  # one Arrow read; iterating the Column object goes row by row


def check_texts(dataset: datasets.Dataset, columns: ColumnMap, source: str) -> None:
    """Refuse a row whose text (or text pair) is missing, empty or only whitespace: it would train on nothing."""
    for column in (columns.text, columns.text_pair):
        if column is None:
            continue
        for index, value in enumerate(_values(dataset, column)):
            if value is None or (isinstance(value, str) and not value.strip()):
                raise BertkitError(
                    f"{source} {row_location(dataset, index)}: column '{column}' is empty — fill in the text or "
                    f"delete the row"
                )


def _texts_as_strings(dataset: datasets.Dataset, columns: ColumnMap, source: str) -> datasets.Dataset:
    """A text column of numbers (a CSV of numeric codes) becomes strings for the tokenizer; lists are refused."""
    for column in (columns.text, columns.text_pair):
        feature = dataset.features[column] if column else None
        if feature is None or _is_string(feature):
            continue
        if not isinstance(feature, datasets.Value):
            raise BertkitError(
                f"column '{column}' of {source} holds lists or objects, not text — point data.text_column "
                f"(or data.text_pair_column) at a column of strings"
            )
        dataset = _carry_rows(dataset, dataset.cast_column(column, datasets.Value("string")))
    return dataset


_OVERRIDE_KEYS = {"text": "text", "text_column": "text", "text_pair": "text_pair", "text_pair_column": "text_pair",
                  "label": "label", "label_column": "label"}  # fmt: skip


def _column_overrides(overrides: Mapping[str, str | None] | None) -> dict[str, str]:
    chosen = {}
    for key, name in (overrides or {}).items():
        if key not in _OVERRIDE_KEYS:
            raise BertkitError(f"unknown column setting '{key}' — use text_column, text_pair_column or label_column")
        if name:
            chosen[_OVERRIDE_KEYS[key]] = name
    return chosen


def _raw_labels(dataset: datasets.Dataset, column: str) -> tuple[list, list[str] | None]:
    """The label values, with ClassLabel ids (Hub datasets) turned back into their names; also those names in
    the dataset's own order, which is the mapping its authors intended."""
    feature, values = dataset.features[column], _values(dataset, column)
    inner = getattr(feature, "feature", None)
    if isinstance(feature, datasets.ClassLabel):
        names = feature.names  # -1 (the unlabeled test split of GLUE-style datasets) is no label
        return [names[v] if v is not None and 0 <= v < len(names) else None for v in values], names
    if isinstance(inner, datasets.ClassLabel):
        return [[inner.names[v] for v in row] if row is not None else None for row in values], inner.names
    return values, None


def _label_space_from(values: list, column: str, class_names: list[str] | None, kind: str, delimiter: str,
                      source: str, where: Where | None = None) -> LabelSpace:  # fmt: skip
    if class_names is not None and kind == "auto":
        multi = any(isinstance(v, list) for v in values)
        return LabelSpace("multi" if multi else "single", list(class_names), delimiter)
    if kind == "auto" and column.strip().lower() in ("score", "分数"):
        if all(_as_number(v) is not None for v in values if _label_name(v) is not None):
            kind = "regression"  # scores of 1, 2, 3 are still scores when the column says so
    return LabelSpace.from_values(values, kind, delimiter, source=f"{source} column '{column}'", where=where)


def check_missing_labels(values: list, kind: str, dataset: datasets.Dataset, source: str) -> None:
    """A labelled row without a label (empty, NaN, None, null, NA) is refused, naming the rows: it would
    otherwise be trained on as whatever the label column defaults to. A multi-label row may be empty ('' or [],
    no label applies), but not null / NaN / None / NA: that is a row nobody labelled."""
    missing = [i for i, value in enumerate(values) if _label_name(value) is None
               and not (kind == "multi" and (isinstance(value, (list, tuple)) or value == ""))]
    if not missing:
        return
    also = ", ".join(row_location(dataset, i) for i in missing[1:4]) + (", ..." if len(missing) > 4 else "")
    more = f" (also {also}: {len(missing)} rows in all)" if also else ""
    spellings = ("NaN, None, null, NA count as missing (an empty cell or [] is a row no label applies to)"
                 if kind == "multi" else "empty cells and NaN, None, null, NA count as missing")
    raise BertkitError(
        f"{source} {row_location(dataset, missing[0])}: the label is empty{more} — {spellings}; fill in the labels "
        f"or delete those rows"
    )


_LABEL_FEATURES = {
    "single": datasets.Value("int64"),
    "multi": datasets.List(datasets.Value("float32")),
    "regression": datasets.Value("float32"),
}


def load_split(
    path: str,
    columns_override: Mapping[str, str | None] | None = None,
    label_space: LabelSpace | None = None,
    require_label: bool = True,
    *,
    split: str = "train",
    label_kind: LabelKind | Literal["auto"] = "auto",
    delimiter: str = ";",
) -> tuple[datasets.Dataset, ColumnMap, LabelSpace | None]:
    """Read a split, find its columns, check its texts and add an encoded `labels` column.

    `columns_override` takes text_column / text_pair_column / label_column (None = detect). Without a
    `label_space` one is built from this split (pass the training split's to the dev split). A bad row raises;
    no row is ever dropped. When the label column is itself called `labels`, the encoded column replaces it.
    With `require_label=False` (prediction) a label column is still found, so it is never taken for the text,
    but it is left as it is: no `labels` column, and the label space is returned unchanged.
    """
    dataset = read_table(path, split)
    overrides = _column_overrides(columns_override)
    columns = resolve_columns(dataset.features, path, **overrides, require_label=require_label)
    dataset = _texts_as_strings(dataset, columns, path)
    check_texts(dataset, columns, path)
    if columns.label is None or not require_label:  # predicting must not fail on a label the model never saw
        return dataset, columns, label_space
    values, class_names = _raw_labels(dataset, columns.label)
    if label_space is None:
        label_space = _label_space_from(values, columns.label, class_names, label_kind, delimiter, path,
                                        functools.partial(row_location, dataset))
    check_missing_labels(values, label_space.kind, dataset, path)
    encoded = [label_space.encode(value, path, row_location(dataset, i)) for i, value in enumerate(values)]
    base = dataset.remove_columns("labels") if "labels" in dataset.column_names else dataset
    labeled = base.add_column("labels", encoded, feature=_LABEL_FEATURES[label_space.kind])
    return _carry_rows(dataset, labeled), columns, label_space


# ---------------------------------------------------------------------------------------------------------------
# A look at the data before training (`bertkit inspect`)


def _text_keys(dataset: datasets.Dataset, columns: ColumnMap) -> list[tuple]:
    """Each row's text (and pair) exactly as written: what a duplicate or a train/dev leak is judged by."""
    texts = _values(dataset, columns.text)
    pairs = _values(dataset, columns.text_pair) if columns.text_pair else [None] * len(texts)
    return list(zip(texts, pairs))


def _is_empty(key: tuple) -> bool:
    return key[0] is None or not str(key[0]).strip() or (key[1] is not None and not str(key[1]).strip())


def _show_key(key: tuple) -> str:
    return _clip(key[0]) if key[1] is None else f"{_clip(key[0], 30)} ||| {_clip(key[1], 30)}"


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _split_report(dataset: datasets.Dataset, columns: ColumnMap, examples: int) -> tuple[dict, Counter]:
    keys = _text_keys(dataset, columns)
    counts = Counter(key for key in keys if not _is_empty(key))
    repeated = [key for key, count in counts.items() if count > 1]
    report = {
        "rows": len(keys),
        "empty_texts": sum(map(_is_empty, keys)),
        "duplicate_texts": sum(counts[key] - 1 for key in repeated),  # the extra copies, not the distinct texts
        "duplicate_examples": [_show_key(key) for key in repeated[:examples]],
    }
    label = columns.label if columns.label in dataset.column_names else None
    if label:  # the same text with two different labels: noise the model cannot learn
        seen: dict[tuple, set] = {}
        for key, value in zip(keys, _values(dataset, label)):
            if key in counts and counts[key] > 1:
                seen.setdefault(key, set()).add(_hashable(value))
        report["conflicting_labels"] = sum(len(labels) > 1 for labels in seen.values())
    return report, counts


def duplicate_and_overlap_report(
    train: datasets.Dataset, dev: datasets.Dataset | None, columns: ColumnMap, examples: int = 3
) -> dict:
    """Counts for `bertkit inspect`: per split rows / empty texts / duplicate texts (extra copies) / texts with
    conflicting labels, and how many dev rows have a text that is also in train (a leak that inflates dev scores)."""
    train_report, train_counts = _split_report(train, columns, examples)
    report = {"train": train_report, "dev": None, "train_dev_overlap": 0, "overlap_examples": []}
    if dev is not None:
        report["dev"], _ = _split_report(dev, columns, examples)
        leaked = [key for key in _text_keys(dev, columns) if key in train_counts]
        report["train_dev_overlap"] = len(leaked)
        report["overlap_examples"] = [_show_key(key) for key in list(dict.fromkeys(leaked))[:examples]]
    return report


__all__ = [
    "SUPPORTED_EXTENSIONS",
    "read_text",
    "json_lines",
    "TEXT_COLUMNS",
    "TEXT_PAIR_COLUMNS",
    "LABEL_COLUMNS",
    "ColumnMap",
    "LabelSpace",
    "MISSING_LABELS",
    "check_missing_labels",
    "read_table",
    "row_location",
    "resolve_columns",
    "check_texts",
    "load_split",
    "duplicate_and_overlap_report",
]
