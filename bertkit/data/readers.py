"""Any local data file (by extension) or Hub dataset name as a `datasets.Dataset`, rows in file order."""

from __future__ import annotations

import os
import re
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
from datasets.table import InMemoryTable

from bertkit.errors import BertkitError

from .decoding import read_text
from .delimited import read_delimited
from .json_rows import read_json, read_jsonl
from .messages import clip, listing
from .rows import in_memory_dataset, no_rows, remember_rows


SUPPORTED_EXTENSIONS = (".csv", ".tsv", ".json", ".jsonl", ".parquet", ".txt")


def _read_txt(path: str) -> datasets.Dataset:
    """One text per line. Blank lines are kept as empty rows (so row i is line i + 1) and `check_texts`
    reports them; only the newline that ends the file does not make a row."""
    lines = [line.rstrip("\r") for line in read_text(path).split("\n")]
    if lines and lines[-1] == "":
        lines.pop()
    return in_memory_dataset({"text": lines}, path, "line", None)


def _read_parquet(path: str) -> datasets.Dataset:
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
    if os.path.isdir(path):
        found = sorted(p.name for p in Path(path).iterdir() if p.suffix.lower() in SUPPORTED_EXTENSIONS)
        hint = f" (it holds {listing(found, 6)})" if found else ""
        raise BertkitError(f"{path} is a folder — pass one data file in it{hint}")
    if os.path.isfile(path):
        reader = _READERS.get(Path(path).suffix.lower())
        if reader is None:
            raise BertkitError(
                f"{path}: unsupported file type '{Path(path).suffix or '(none)'}' — use one of "
                f"{', '.join(SUPPORTED_EXTENSIONS)}"
            )
        return reader(path)
    if looks_like_hub_name(path):
        return _read_hub(path, split)
    raise BertkitError(f"no such file: {path} — check the path")


__all__ = ["SUPPORTED_EXTENSIONS", "looks_like_hub_name", "read_table"]
