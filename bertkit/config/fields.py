"""The fields of a config dataclass as a user sees them: defaults, resolved annotations, and inline sections.

An inline field (`field(default_factory=RunOptions, metadata=INLINE)`) holds a dataclass whose own fields are keys
at its parent's level: `output_dir=...`, not `run.output_dir=...`. Reading, validating, `describe_config` and
`config_to_dict` all go through `_key_fields`, so a recipe can compose shared options (bertkit/options.py) while
the keys users write, and the saved config, stay flat.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import typing
from pathlib import PurePath
from types import MappingProxyType
from typing import Any

# `field(metadata=INLINE)`: the field's dataclass contributes its keys to the parent's level.
INLINE = MappingProxyType({"bertkit_inline": True})


class _Required:
    """Marks a field without a default in `describe_config` rows."""

    def __repr__(self) -> str:
        return "<required>"


REQUIRED = _Required()


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    """Resolved annotations (recipes may use `from __future__ import annotations`, which makes them strings)."""
    try:
        return typing.get_type_hints(cls)
    except Exception as e:  # a recipe bug, not a user error: say which class
        raise TypeError(f"cannot resolve the annotations of {cls.__qualname__}: {e}") from e


def _init_fields(cls: type) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(cls) if f.init]


def _is_inline(f: dataclasses.Field) -> bool:
    return bool(f.metadata.get("bertkit_inline"))


def _default_of(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return REQUIRED


@functools.lru_cache(maxsize=None)
def _key_fields(cls: type) -> dict[str, dataclasses.Field]:
    """key -> field of the keys a mapping for `cls` holds: its init fields, with an inline field's own keys (and
    theirs, recursively) in its place. A key two fields would share is a recipe bug, refused here."""
    keys: dict[str, dataclasses.Field] = {}
    for f in _init_fields(cls):
        tp = _hints(cls)[f.name]
        if _is_inline(f) and not (isinstance(tp, type) and dataclasses.is_dataclass(tp)):
            raise TypeError(f"{cls.__qualname__}.{f.name}: an inline field needs a dataclass type, got {tp!r}")
        own = _key_fields(tp) if _is_inline(f) else {f.name: f}
        for key in own.keys() & keys.keys():
            raise TypeError(f"{cls.__qualname__}: key '{key}' is declared twice (inline field {f.name})")
        keys.update(own)
    return keys


def _plain(value: Any) -> Any:
    """Dataclasses, paths, enums and tuples -> the dicts, strings and lists that YAML writes (inline fields'
    keys at their parent's level)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        plain = {}
        for f in _init_fields(type(value)):
            item = _plain(getattr(value, f.name))
            if _is_inline(f):
                plain.update(item)
            else:
                plain[f.name] = item
        return plain
    if isinstance(value, enum.Enum):
        return _plain(value.value)
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    return value


__all__ = ["INLINE", "REQUIRED"]
