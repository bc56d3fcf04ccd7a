"""Values -> the types a config dataclass declares, converted where it is safe, with errors that name the key.

`_coerce(value, annotation, key, sources)` checks one value: scalars (`5e-5` strings become floats, `yes` a bool
for a bool field), unions, Literals, enums, paths, lists, tuples, dicts and nested config dataclasses (built by
bertkit/config/build.py). A mismatch raises `BertkitError`: `config key 'K': expected X, got Y (from SOURCE)`.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import re
import types
import typing
from pathlib import PurePath
from typing import Any, Literal, Union

from bertkit.errors import BertkitError

from .reading import _join, _show, _Sources

_NoneType = type(None)

# Words a bool field accepts as strings (not booleans to the loader: reading.py).
_BOOL_WORDS = {"yes": True, "on": True, "y": True, "no": False, "off": False, "n": False}

# A number PyYAML leaves as a string: an exponent without a dot (`5e-5`, `1e3`) or without a sign (`5.0e5`).
_SCI_NUMBER = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)[eE][-+]?\d+$")


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (Union, types.UnionType)


def _is_dataclass_type(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _expected(tp: Any) -> str:
    """'a float', 'one of 'cls', 'mean'', 'a float or null', ... for `expected X, got Y`."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if _is_union(tp):
        return " or ".join(_expected(arg) for arg in args)
    if origin is Literal:
        return "one of " + ", ".join(_show(arg) for arg in args)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return "one of " + ", ".join(_show(member.value) for member in tp)
    if _is_dataclass_type(tp):
        return f"a mapping of {tp.__name__} keys"
    simple = {
        bool: "a boolean (true/false)",
        int: "an int",
        float: "a float",
        str: "a string",
        _NoneType: "null",
        dict: "a mapping",
        list: "a list",
        tuple: "a list",
    }
    if tp in simple:
        return simple[tp]
    if origin in (list, tuple) and args:
        return f"a list of {_type_str(args[0])}"
    if origin is dict:
        return "a mapping"
    if isinstance(tp, type) and issubclass(tp, PurePath):
        return "a path"
    return f"a {_type_str(tp)}"


def _type_str(tp: Any) -> str:
    """An annotation written the way a user reads it: 'float | None', "Literal['cls', 'mean']", 'list[str]'."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is _NoneType:
        return "None"
    if _is_union(tp):
        return " | ".join(_type_str(arg) for arg in args)
    if origin is Literal:
        return "Literal[" + ", ".join(repr(arg) for arg in args) + "]"
    if origin is not None and args:
        inner = ", ".join("..." if arg is Ellipsis else _type_str(arg) for arg in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    if isinstance(tp, type):
        return tp.__name__
    return str(tp).replace("typing.", "")


def _type_error(key: str, tp: Any, value: Any, sources: _Sources, hint: str = "") -> BertkitError:
    origin = typing.get_origin(tp)
    if not hint and (tp in (list, tuple) or origin in (list, tuple)) and not isinstance(value, (list, tuple)):
        hint = " — write a list as [a, b]"
    elif not hint and isinstance(value, dict) and "mapping" not in _expected(tp):  # `model.name=x` for a str
        hint = f" — '{key}' has no sub-keys: set it as {key}=..."
    return BertkitError(f"config key '{key}': expected {_expected(tp)}, got {_show(value)}{hint}{sources.suffix(key)}")


def _suggest(word: str, choices: list[str]) -> str | None:
    match = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return match[0] if match else None


# ---------------------------------------------------------------------------------------------------------------
# Checking and converting values against annotations


def _as_float(value: Any) -> float | None:
    """int -> float, and the `5e-5` strings PyYAML does not read as numbers; None when it is not a number."""
    if isinstance(value, bool):
        return None  # True is an int to Python, not a number to a user
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and _SCI_NUMBER.match(value.strip()):
        return float(value)
    return None


def _coerce(value: Any, tp: Any, key: str, sources: _Sources) -> Any:
    """Check `value` against the annotation `tp`, converting where it is safe; raise a BertkitError naming `key`."""
    if tp is Any or tp is object:
        return value
    origin = typing.get_origin(tp)
    if _is_union(tp):
        return _coerce_union(value, tp, key, sources)
    if origin is Literal:
        return _coerce_literal(value, tp, key, sources)
    if value is None and tp is not _NoneType:
        raise _type_error(key, tp, value, sources)
    if tp in (bool, int, float, str, _NoneType):
        return _coerce_scalar(value, tp, key, sources)
    if isinstance(tp, type) and issubclass(tp, PurePath):
        if isinstance(value, (str, PurePath)):
            return tp(value)
        raise _type_error(key, tp, value, sources)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _coerce_enum(value, tp, key, sources)
    if _is_dataclass_type(tp):
        from .build import _build  # imported here: build.py coerces each field with this module

        return _build(tp, value, key, sources)
    if tp in (list, tuple, dict) or origin in (list, tuple, dict):
        return _coerce_container(value, tp, key, sources)
    if isinstance(tp, type):
        if isinstance(value, tp):
            return value
        raise _type_error(key, tp, value, sources)
    return value  # a typing construct this module does not know: leave it alone rather than guess


def _coerce_scalar(value: Any, tp: type, key: str, sources: _Sources) -> Any:
    if tp is _NoneType:
        if value is None:
            return None
    elif tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _BOOL_WORDS:
            return _BOOL_WORDS[value.strip().lower()]
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        number = _as_float(value)  # `1e3`, or 100.0: a whole number is an int, 2.5 is not
        if number is not None and number.is_integer():
            return int(number)
    elif tp is float:
        number = _as_float(value)
        if number is not None:
            return number
    elif tp is str:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)  # `run_name: 2024` means the text 2024
    raise _type_error(key, tp, value, sources)


def _coerce_union(value: Any, tp: Any, key: str, sources: _Sources) -> Any:
    args = typing.get_args(tp)
    if value is None:
        if _NoneType in args:
            return None
        raise _type_error(key, tp, value, sources)
    options = [arg for arg in args if arg is not _NoneType]
    if len(options) == 1:  # `X | None`: X's own error message is the more precise one
        return _coerce(value, options[0], key, sources)
    enums = [arg for arg in options if isinstance(arg, type) and issubclass(arg, enum.Enum)]
    if enums and isinstance(value, str):  # `SchedulerType | str`: transformers converts the str to the enum later
        return _coerce_choice(value, [m.value for e in enums for m in e], key, sources)
    dataclass_options = [arg for arg in options if _is_dataclass_type(arg)]
    if isinstance(value, dict) and len(dataclass_options) == 1:
        from .build import _build  # imported here: build.py coerces each field with this module

        return _build(dataclass_options[0], value, key, sources)
    for arg in options:  # first the option the value already is (`int | str` keeps 3 an int) ...
        if isinstance(arg, type) and type(value) is arg:
            return value
    for arg in options:  # ... then the first option it converts to
        try:
            return _coerce(value, arg, key, sources)
        except BertkitError:
            continue
    raise _type_error(key, tp, value, sources)


def _coerce_choice(value: Any, choices: list, key: str, sources: _Sources) -> Any:
    """`value` must be one of `choices` (same type too: Literal[1] does not accept true)."""
    if any(value == choice and type(value) is type(choice) for choice in choices):
        return value
    close = _suggest(value, [c for c in choices if isinstance(c, str)]) if isinstance(value, str) else None
    hint = f" — did you mean {close!r}?" if close else ""
    expected = "one of " + ", ".join(_show(choice) for choice in choices)
    raise BertkitError(f"config key '{key}': expected {expected}, got {_show(value)}{hint}{sources.suffix(key)}")


def _coerce_literal(value: Any, tp: Any, key: str, sources: _Sources) -> Any:
    return _coerce_choice(value, list(typing.get_args(tp)), key, sources)


def _coerce_enum(value: Any, tp: type[enum.Enum], key: str, sources: _Sources) -> enum.Enum:
    if isinstance(value, tp):
        return value
    by_value = {member.value: member for member in tp}
    by_name = {member.name: member for member in tp}
    if value in by_value:
        return by_value[value]
    if value in by_name:
        return by_name[value]
    return _coerce_choice(value, list(by_value), key, sources)  # raises: value is not a choice


def _coerce_container(value: Any, tp: Any, key: str, sources: _Sources) -> Any:
    origin, args = typing.get_origin(tp) or tp, typing.get_args(tp)
    if origin is dict:
        if not isinstance(value, dict):
            raise _type_error(key, tp, value, sources)
        key_type, value_type = args if len(args) == 2 else (Any, Any)
        return {
            _coerce(k, key_type, _join(key, k), sources): _coerce(v, value_type, _join(key, k), sources)
            for k, v in value.items()
        }
    if not isinstance(value, (list, tuple)):
        raise _type_error(key, tp, value, sources)
    if origin is tuple and args and args[-1] is not Ellipsis:  # tuple[int, str]: a fixed length
        if len(value) != len(args):
            raise _type_error(key, tp, value, sources, hint=f" — write {len(args)} items")
        item_types = list(args)
    else:
        item_types = [args[0] if args else Any] * len(value)
    items = [_coerce(v, t, f"{key}[{i}]", sources) for i, (v, t) in enumerate(zip(value, item_types))]
    return tuple(items) if origin is tuple else items


__all__: list[str] = []
