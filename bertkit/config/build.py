"""A mapping (YAML file + overrides, or a saved file's settings) -> an instance of a config dataclass.

Every key is checked (an unknown one gets the closest valid name), every value coerced to its field's type
(bertkit/config/types.py), a partial section keeps the recipe's other defaults, the top-level `train:` mapping is
checked against TrainingArguments (bertkit/config/train.py), and a `ConfigValueError` from a `__post_init__` check
(bertkit/checks.py) gets the source of its key appended.
"""

from __future__ import annotations

import dataclasses
import os
import typing
from typing import Any

from bertkit.errors import BertkitError, ConfigValueError
from bertkit.shipped import is_shipped, rebase_shipped_paths

from .fields import REQUIRED, _default_of, _hints, _init_fields, _is_inline, _key_fields, _plain
from .reading import _apply_override, _join, _read_yaml, _Sources
from .train import TRAIN_KEY, _train_fields, _validate_train
from .types import _coerce, _is_dataclass_type, _suggest, _type_error


def _is_dict_type(tp: Any) -> bool:
    return tp is dict or typing.get_origin(tp) is dict


def _deep_merge(base: dict, update: dict) -> dict:
    merged = dict(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _with_default(value: Any, f: dataclasses.Field) -> Any:
    """A partial mapping fills in the field's default: `data.train=x.csv` keeps the recipe's other data
    settings, and `train: {learning_rate: ...}` keeps the recipe's other TrainingArguments."""
    if not isinstance(value, dict):
        return value
    default = _default_of(f)
    if isinstance(default, dict) or (dataclasses.is_dataclass(default) and not isinstance(default, type)):
        return _deep_merge(_plain(default), value)
    return value


def _build(cls: type, data: Any, prefix: str, sources: _Sources) -> Any:
    """A mapping -> an instance of the dataclass `cls`, every field checked; `prefix` is the dotted key of `data`."""
    if isinstance(data, cls):
        return data
    if not isinstance(data, dict):
        raise _type_error(prefix, cls, data, sources)
    keys = _key_fields(cls)
    for name in data:
        if name not in keys:
            raise _unknown_key(prefix, name, list(keys), sources)
    return _instance(cls, data, prefix, sources)


def _instance(cls: type, data: dict, prefix: str, sources: _Sources) -> Any:
    """`cls(**fields)` from a mapping of known keys; an inline field is built from its own keys of the same
    mapping, at the same prefix (so its errors name `llrd`, not `tune.llrd`)."""
    hints, kwargs = _hints(cls), {}
    for f in _init_fields(cls):
        name, tp, key = f.name, hints[f.name], _join(prefix, f.name)
        is_train = not prefix and name == TRAIN_KEY and _is_dict_type(tp)
        if _is_inline(f):
            own = {k: data[k] for k in _key_fields(tp) if k in data}
            kwargs[name] = _instance(tp, _with_default(own, f), prefix, sources)
        elif name in data or (is_train and _default_of(f) is not REQUIRED):
            value = _coerce(_with_default(data.get(name, {}), f), tp, key, sources)
            kwargs[name] = _validate_train(value, key, sources) if is_train else value
        elif _default_of(f) is REQUIRED:
            raise BertkitError(
                f"config key '{key}' is required — set it in the config file or add {key}=... to the command"
            )
    try:
        return cls(**kwargs)  # a recipe's __post_init__ checks the values (bertkit/checks.py)
    except ConfigValueError as error:
        raise BertkitError(f"{error}{sources.suffix(error.key)}") from None


def _unknown_key(prefix: str, name: Any, valid: list[str], sources: _Sources) -> BertkitError:
    key = _join(prefix, name)
    close = _suggest(name, valid)
    if close:
        hint = f"did you mean '{_join(prefix, close)}'?"
    elif not prefix and TRAIN_KEY in valid and str(name) in _train_fields():
        hint = f"did you mean '{TRAIN_KEY}.{name}'? (TrainingArguments settings go under {TRAIN_KEY}:)"
    else:
        hint = f"valid keys{' under ' + repr(prefix) if prefix else ''}: {', '.join(valid)}"
    return BertkitError(f"unknown config key '{key}' — {hint}{sources.suffix(key)}")


def load_config(config_cls: type, path: str | os.PathLike | None, overrides: typing.Sequence[str] = ()) -> Any:
    """Recipe defaults <- YAML file at `path` (optional) <- `key.sub=value` overrides, checked and typed.

    Returns an instance of the dataclass `config_cls`. Raises `BertkitError` (one line naming the key and where
    its value came from) on an unknown key, a wrong type, a missing required key or a broken YAML file."""
    if not _is_dataclass_type(config_cls):
        raise TypeError(f"load_config needs a dataclass type, got {config_cls!r}")
    data, by_key = _read_yaml(path) if path is not None else ({}, {})
    if path is not None and is_shipped(path):  # its sample-data paths name files shipped with bertkit
        data = rebase_shipped_paths(data)
    for text in overrides:
        _apply_override(data, by_key, text)
    return _build(config_cls, data, "", _Sources(by_key))


def build_config(config_cls: type, data: dict, source: str, prefix: str = "") -> Any:
    """A dataclass instance from a plain mapping read from `source` (a file name), checked and typed as a recipe
    config is; errors name `prefix.key` and the source."""
    return _build(config_cls, data, prefix, _Sources({prefix or "": source} if prefix else
                                                      {str(name): source for name in data}))


__all__ = ["load_config", "build_config"]
