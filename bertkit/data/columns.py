"""Which column of a split holds the text, the text pair and the label."""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any, Mapping, Sequence

import datasets

from bertkit.errors import BertkitError

from .messages import listing


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


__all__ = ["TEXT_COLUMNS", "TEXT_PAIR_COLUMNS", "LABEL_COLUMNS", "ColumnMap", "is_string_feature", "resolve_columns"]
