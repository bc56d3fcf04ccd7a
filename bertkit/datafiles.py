"""Reading data files for fine-tuning: local files and Hub datasets as `datasets.Dataset`, and which columns hold
the text, the text pair and the label.

    read_table("data/en_sentiment/train.csv")       -> datasets.Dataset, rows in file order
    resolve_columns(ds.features, "train.csv")       -> ColumnMap(text="text", text_pair=None, label="label")

Every mistake in the input raises `BertkitError` with one line naming the file, the line as the user sees it in
an editor (a CSV header is line 1) and the column, and saying what to do. To make that possible the text formats
are parsed here, in Python, instead of by pandas / pyarrow / datasets: those report a byte offset, a pandas row
index, or a traceback from three libraries down. The files a fine-tuning run reads fit in memory, so the parsed
rows go straight into an in-memory Arrow table (no cache files, no `load_dataset` fingerprinting).

Bottom up: the pieces of the one-line messages, where each row came from, a file's bytes as text, the text
formats (CSV/TSV, JSON lines and arrays), `read_table` (any file by extension, or a Hub dataset), and the columns.
Label maps are in `bertkit.labels`; a split read, checked and label-encoded is `bertkit.splits.load_split`.
"""

from __future__ import annotations

import codecs
import csv
import dataclasses
import difflib
import io
import json
import os
import re
import weakref
from array import array
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from typing import TYPE_CHECKING

from bertkit.errors import BertkitError

if TYPE_CHECKING:
    import datasets
    import pyarrow as pa

# datasets and pyarrow are imported by the functions that build tables: the checks of file names and paths here run
# before a run or a predict loads its model stack (bertkit/checks.py), and must not import it


# ----------------------------------------------------------------------------------------------------------------
# Pieces of the one-line error messages the data readers raise


def clip(text: Any, width: int = 60) -> str:
    """Any text made safe for a one-line message: whitespace collapsed, cut at `width` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 3] + "..."


def listing(names: Iterable[Any], most: int = 20) -> str:
    """Names joined for a message, cut after `most` with the total count."""
    names = [str(name) for name in names]
    shown = ", ".join(names[:most])
    return shown if len(names) <= most else f"{shown}, ... ({len(names)} in all)"


# ----------------------------------------------------------------------------------------------------------------
# Where a row came from ('line 7' of a text file, 'row 7' of Parquet or the Hub), and the in-memory
# dataset that parsed rows become


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
    import datasets
    import pyarrow as pa
    from datasets.table import InMemoryTable

    dataset = datasets.Dataset(InMemoryTable(pa.table(arrays)))
    remember_rows(dataset, unit, lines)
    return dataset


def _arrow_column(name: str, values: list, path: str, lines: list[int] | None) -> pa.Array:
    """One column as Arrow; values of different kinds ('1' and 1) would fail deep in pyarrow, so say where."""
    import pyarrow as pa

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


# ----------------------------------------------------------------------------------------------------------------
# A data file's bytes as text: existence, permissions, emptiness, strict UTF-8 with a guess at the real encoding


def read_text(path: str) -> str:
    """The file decoded as strict UTF-8 without its BOM (Excel writes one; it would end up in the first column name)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise BertkitError(f"no such file: {path} — check the path") from None
    except OSError as err:
        raise BertkitError(f"{path} cannot be read ({clip(err, 80)}) — check its permissions") from None
    if not data.strip():
        raise BertkitError(f"{path} is empty — put the data in it")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise BertkitError(
            f"{path} is not UTF-8: byte 0x{data[err.start]:02x} at offset {err.start} (line {line}) cannot be "
            f"decoded{encoding_guess(data)} — re-save the file as UTF-8"
        ) from None
    return text.removeprefix("\ufeff")


def encoding_guess(data: bytes) -> str:
    """A hint for the two encodings users most often have by accident: Excel's 'Unicode text' and Chinese GBK.
    `data` may be a sample of a larger file (the mlm corpus reader passes one), cut anywhere."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return " (it is UTF-16, as Excel's 'Unicode Text' writes)"
    try:
        text = codecs.getincrementaldecoder("gb18030")().decode(data, final=False)  # a cut last character waits
    except UnicodeDecodeError:
        return ""
    if re.search("[\u4e00-\u9fff]", text):
        return " (it looks like GBK/GB18030; e.g. `iconv -f GB18030 -t UTF-8`)"
    return ""


# ----------------------------------------------------------------------------------------------------------------
# CSV and TSV files, parsed in Python so that every error names the line an editor shows


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
    raw_lines = io.StringIO(text, newline="").readlines()  # split where the reader splits
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
            # a blank line is not a row; a line holding an empty quoted field ("") is one, of an empty text (which
            # the readers of texts refuse by its line): skipped, every later row would be one off its input line
            blank = len(fields) == 1 and not fields[0].strip() and not raw_lines[line - 1].strip()
            if fields and not blank:
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


# ----------------------------------------------------------------------------------------------------------------
# JSON lines and JSON arrays of objects, each row knowing the line its object starts on


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


# ----------------------------------------------------------------------------------------------------------------
# Any local data file (by extension) or Hub dataset name as a `datasets.Dataset`, rows in file order


SUPPORTED_EXTENSIONS = (".csv", ".tsv", ".json", ".jsonl", ".parquet", ".txt")


def _read_txt(path: str) -> datasets.Dataset:
    """One text per line. Blank lines are kept as empty rows (so row i is line i + 1) and `check_texts`
    reports them; only the newline that ends the file does not make a row."""
    lines = [line.rstrip("\r") for line in read_text(path).split("\n")]
    if lines and lines[-1] == "":
        lines.pop()
    return in_memory_dataset({"text": lines}, path, "line", None)


def _read_parquet(path: str) -> datasets.Dataset:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as err:
        raise BertkitError(
            f"{path} cannot be read as Parquet ({clip(err, 80)}) — check that it is a Parquet file "
            f"(e.g. written by pandas' to_parquet)"
        ) from None
    # pandas stores a non-default index as a column; it is not data.
    table = table.drop_columns([name for name in table.column_names if name.startswith("__index_level_")])
    if table.num_rows == 0:
        raise no_rows(path)
    import datasets
    from datasets.table import InMemoryTable

    dataset = datasets.Dataset(InMemoryTable(table))  # keeps the features datasets wrote into the metadata
    remember_rows(dataset, "row")
    return dataset


_READERS = {
    ".csv": lambda path: read_delimited(path, ","),
    ".tsv": lambda path: read_delimited(path, "\t"),
    ".json": read_json,
    ".jsonl": read_jsonl,
    ".parquet": _read_parquet,
    ".txt": _read_txt,
}

# `imdb`, `stanfordnlp/imdb`, `glue:sst2`, `glue:sst2@validation`, `imdb@train[:100]`
_HUB_NAME = re.compile(
    r"(?P<name>[A-Za-z0-9][\w.-]*(?:/[\w.-]+)?)(?::(?P<config>[\w.-]+))?(?:@(?P<split>[\w.\[\]:%+-]+))?"
)


# A name ending in one of these is a file the user meant, even if bertkit cannot read it.
_FILE_SUFFIXES = SUPPORTED_EXTENSIONS + (".xlsx", ".xls", ".gz", ".bz2", ".xz", ".zip", ".arrow", ".conll", ".tar")


def looks_like_hub_name(path: str) -> bool:
    """Whether a path that is not a local file reads as a Hub dataset name (`user/name:config@split`)."""
    match = _HUB_NAME.fullmatch(path)
    if not match or Path(match["name"]).suffix.lower() in _FILE_SUFFIXES:
        return False
    # `data/train` with a local `data/` folder is a mistyped path, not the Hub dataset `data/train`.
    return not ("/" in match["name"] and os.path.isdir(match["name"].split("/")[0]))


def _read_hub(spec: str, split: str) -> datasets.Dataset:
    match = _HUB_NAME.fullmatch(spec)
    name, config, split = match["name"], match["config"], match["split"] or split
    try:
        import datasets

        dataset = datasets.load_dataset(name, config, split=split)
    except Exception as err:  # noqa: BLE001 - datasets raises a dozen kinds; the user needs one sentence
        offline = "; HF_HUB_OFFLINE is set, so only datasets already in the cache load" if _offline() else ""
        raise BertkitError(
            f"'{spec}' is not a local file, and the Hub dataset could not be loaded ({type(err).__name__}: "
            f"{clip(err, 100)}) — check the path or the dataset name, config and split, and the network{offline}"
        ) from None
    if len(dataset) == 0:
        raise no_rows(f"{spec} (split {split})")
    remember_rows(dataset, "row")
    return dataset


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def read_table(path: str | os.PathLike, split: str = "train") -> datasets.Dataset:
    """A local file (.csv .tsv .json .jsonl .parquet .txt) or a Hub dataset name (`user/name`, `name:config`,
    `name@split`) as a `datasets.Dataset`, rows in file order. `split` only applies to Hub datasets."""
    path = os.fspath(path)
    check_data_path(path)
    if os.path.isfile(path):
        reader = _READERS.get(Path(path).suffix.lower())
        if reader is None:
            raise BertkitError(
                f"{path}: unsupported file type '{Path(path).suffix or '(none)'}' — use one of "
                f"{', '.join(SUPPORTED_EXTENSIONS)}"
            )
        return reader(path)
    return _read_hub(path, split)


def check_data_path(path: str | os.PathLike) -> None:
    """A folder, or a path that is neither a file nor a Hub dataset name, in one line: read_table's first check,
    which predict and evaluate ask before they load a model."""
    path = os.fspath(path)
    if os.path.isdir(path):
        found = sorted(p.name for p in Path(path).iterdir() if p.suffix.lower() in SUPPORTED_EXTENSIONS)
        hint = f" (it holds {listing(found, 6)})" if found else ""
        raise BertkitError(f"{path} is a folder — pass one data file in it{hint}")
    if not os.path.isfile(path) and not looks_like_hub_name(path):
        raise BertkitError(f"no such file: {path} — check the path")


# ----------------------------------------------------------------------------------------------------------------
# Which column of a split holds the text, the text pair and the label


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
        return list(columns), {name: is_string_feature(feature) for name, feature in columns.items()}
    return list(columns), None


def is_string_feature(feature: Any) -> bool:
    """Whether a datasets feature holds strings (a text column)."""
    import datasets

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
        f"column '{name}' (data.{role}_column) is not in {source} (columns: {listing(names)}) — {hint}"
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
        f"cannot tell which column of {source} holds the text (columns: {listing(names)}) — set "
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
            f"no label column in {source} (columns: {listing(names)}) — name it 'label' or set "
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


__all__ = [
    "clip",
    "encoding_guess",
    "listing",
    "remember_rows",
    "carry_rows",
    "row_location",
    "column_values",
    "no_rows",
    "value_kind",
    "in_memory_dataset",
    "read_text",
    "FLOAT_CELL",
    "read_delimited",
    "json_lines",
    "read_jsonl",
    "read_json",
    "SUPPORTED_EXTENSIONS",
    "looks_like_hub_name", "check_data_path",
    "read_table",
    "TEXT_COLUMNS",
    "TEXT_PAIR_COLUMNS",
    "LABEL_COLUMNS",
    "ColumnMap",
    "is_string_feature",
    "resolve_columns",
]
