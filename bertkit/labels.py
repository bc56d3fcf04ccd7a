"""Label maps: what the labels are (single-label, multi-label, regression), how each value encodes, and missing
labels.

    LabelSpace.from_values(ds["label"])             -> LabelSpace(kind="single", names=["negative", "positive"])

Labels are never guessed silently: a column that breaks its own pattern in a few rows, spells one label in two
cases, or joins several labels with another separator is refused with a one-line `BertkitError` naming the rows.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections import Counter
from typing import Any, Callable, Iterable, Literal

import datasets

from bertkit.errors import BertkitError

from .datafiles import FLOAT_CELL, clip, listing, row_location


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
    if isinstance(value, str) and FLOAT_CELL.fullmatch(value.strip()):
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
    shown = ", ".join(f"{where(i) if where else f'value {i + 1}'} ({clip(repr(v), 20)})" for i, v in items[:most])
    return shown + (f" and {len(items) - most} more" if len(items) > most else "")


def _guess_kind(labelled: list[tuple[int, Any]], delimiter: str, source: str = "", where: Where | None = None
                ) -> LabelKind:  # fmt: skip
    """Lists or `delimiter`-joined strings are multi-label; numbers with fractions a score; anything else classes.
    A column that mostly follows one rule and breaks it in a few rows is refused, naming them: one stray value
    must not turn a classifier into a regression, or a score into forty classes."""
    values = [v for _, v in labelled]
    if any(isinstance(v, (list, tuple)) for v in values) or any(isinstance(v, str) and delimiter in v for v in values):
        return "multi"
    _refuse_joined_labels(labelled, delimiter, source, where)
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


JOINERS = (",", ";", "|")  # what a spreadsheet joins several labels of one row with


def _refuse_joined_labels(labelled: list, delimiter: str, source: str, where: Where | None,
                          explicit: str = "") -> None:  # fmt: skip
    """Labels such as 'billing,returns' are several labels joined by another separator than data.label_delimiter:
    read as classes, 6 labels make 28 combination classes, silently. Refused, with the keys that say so, when at
    least two distinct values hold the separator and at least half of those are made only of parts that recur in
    other values ('Paris, France' beside 'Lyon, France' is a class name: 'Paris' appears once), and the parts are
    fewer than the distinct values. data.label_kind=single keeps the combinations as classes."""
    strings = [(i, v.strip()) for i, v in labelled if isinstance(v, str)]
    if len(strings) < len(labelled):
        return
    distinct = {v for _, v in strings}
    for joiner in (j for j in JOINERS if j != delimiter):
        joined = [(i, v) for i, v in strings if joiner in v]
        combinations = {v for _, v in joined}
        if len(combinations) < 2:
            continue
        found_in = Counter(part for value in distinct for part in _parts(value, joiner))
        recurring = [v for v in combinations if all(found_in[part] >= 2 for part in _parts(v, joiner))]
        if 2 * len(recurring) < len(combinations) or len(recurring) < 2 or len(found_in) >= len(distinct):
            continue
        keys = (f"data.label_delimiter={joiner!r}" if explicit else
                f"data.label_kind=multi data.label_delimiter={joiner!r}")
        keep = (" (data.label_delimiter is the separator inside one cell)" if explicit else
                "; to keep each combination as a class of its own, set data.label_kind=single")
        raise BertkitError(
            f"labels{_in(source)} look like several labels joined by {joiner!r} ({_rows(joined, where, 2)}): "
            f"{len(distinct)} distinct values made of {len(found_in)} labels — for multi-label set {keys}{keep}"
        )


def _parts(value: str, joiner: str) -> set[str]:
    return {part.strip() for part in value.split(joiner) if part.strip()}


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
        if kind == "multi" and not any(isinstance(v, (list, tuple)) or (isinstance(v, str) and delimiter in v)
                                       for v in values):
            _refuse_joined_labels(labelled, delimiter, source, where, explicit="multi")
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
                f"the model config's id2label has ids {listing(sorted(id2label))}, not 0..{len(id2label) - 1} — "
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
                    f"label {name!r} in {where} was never seen in training (known: {listing(self.names)}) — "
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
                f"label {clip(repr(value), 40)} in {where} is not a number — a score must be like 3.5"
            )
        return number


def column_label_space(values: list, column: str, class_names: list[str] | None, kind: str, delimiter: str,
                       source: str, where: Where | None = None) -> LabelSpace:  # fmt: skip
    """The label space of a training split's label column: a Hub ClassLabel's own names, a column called score as
    regression, else `LabelSpace.from_values`."""
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


def label_distribution(dataset, labels) -> dict[str, int]:
    """Rows per label name of a read dataset (multi-label: rows carrying each label); {} for regression."""
    if labels is None or labels.kind == "regression":
        return {}
    counts = Counter()
    for value in list(dataset["labels"]):
        if labels.kind == "single":
            counts[labels.names[value]] += 1
        else:
            counts.update(name for name, hot in zip(labels.names, value) if hot)
    return {name: counts[name] for name in labels.names}

__all__ = ["LabelKind", "MISSING_LABELS", "Where", "LabelSpace", "column_label_space", "check_missing_labels",
           "label_distribution"]
