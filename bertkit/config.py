"""YAML file + `key.sub=value` overrides -> a recipe's typed `@dataclass Config`, with errors that name the key.

    bertkit run classify -c classify/en_sentiment train.learning_rate=3.0e-5 llrd=0.9
      -> the YAML file becomes a dict, each override is written into it (the command line wins),
      -> the dict is checked against the dataclass annotations and turned into the recipe's config,
      -> the `train:` mapping is checked against `transformers.TrainingArguments` (the recipe does not declare
         those keys; the Trainer does) and passed on as `TrainingArguments(**cfg.train)`.

Every mistake a user can make here raises `BertkitError` with one line that names the key and where its value
came from (`(from override train.learning_rate=abc)` or `(from recipes/configs/x.yaml, line 7)`).

Two YAML traps are handled on purpose:
- PyYAML reads `5e-5` (no dot) as a *string*. Where the target type is a float or an int, such strings are
  converted; everywhere else the value is left as YAML read it.
- YAML 1.1 reads `no`, `yes`, `on`, `off` as booleans, so `eval_strategy: no` would arrive as `False`. Configs
  are read with YAML 1.2's rule instead: only `true` / `false` are booleans; a bool field still accepts the words.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import enum
import functools
import inspect
import logging
import os
import re
import textwrap
import types
import typing
from pathlib import Path, PurePath
from typing import Any, Literal, NamedTuple, Union

import yaml

from bertkit.errors import BertkitError, ConfigValueError
from bertkit.shipped import is_shipped, rebase_shipped_paths

logger = logging.getLogger(__name__)

# The top-level recipe field that is passed to `transformers.TrainingArguments` as keyword arguments.
TRAIN_KEY = "train"

_NoneType = type(None)

# ---------------------------------------------------------------------------------------------------------------
# Reading YAML


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 booleans: only true/false, so `eval_strategy: no` stays the string 'no'."""


_BOOL_TAG = "tag:yaml.org,2002:bool"
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != _BOOL_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(_BOOL_TAG, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))

# Words a bool field accepts as strings (they are no longer booleans to the loader, see above).
_BOOL_WORDS = {"yes": True, "on": True, "y": True, "no": False, "off": False, "n": False}

# A number PyYAML leaves as a string: an exponent without a dot (`5e-5`, `1e3`) or without a sign (`5.0e5`).
_SCI_NUMBER = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)[eE][-+]?\d+$")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _read_yaml(path: str | os.PathLike) -> tuple[dict, dict[str, str]]:
    """Read a config file: (data, sources) where sources maps each dotted key to 'file, line N'."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BertkitError(
            f"config file '{path}' not found — check the path (`bertkit ls` lists the shipped configs)"
        ) from None
    except (OSError, UnicodeDecodeError) as e:
        raise BertkitError(f"config file '{path}' cannot be read ({_one_line(e)}) — pass a UTF-8 YAML file") from None
    try:
        node = yaml.compose(text, Loader=_Loader)
        data = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as e:
        raise BertkitError(_yaml_error_message(path, e)) from None
    if data is None:  # an empty file, or only comments: defaults + overrides
        return {}, {}
    if not isinstance(data, dict):
        raise BertkitError(
            f"config file '{path}' line {node.start_mark.line + 1}: the top level must be a mapping of `key: value`, "
            f"got {_kind(data)} — write one key per line"
        )
    sources: dict[str, str] = {}
    _record_key_lines(node, path, "", sources)
    return data, sources


def _yaml_error_message(path, error: yaml.YAMLError) -> str:
    mark = getattr(error, "problem_mark", None)
    where = f" line {mark.line + 1}" if mark is not None else ""
    problem = getattr(error, "problem", None) or str(error)
    return f"config file '{path}'{where}: invalid YAML ({_one_line(problem)}) — fix the syntax there"


def _record_key_lines(node: yaml.Node, path, prefix: str, sources: dict[str, str]) -> None:
    """Walk the composed YAML tree: remember where each key was written, and refuse a key written twice
    (PyYAML would silently keep the last one, and the user would wonder why their first value is ignored)."""
    if not isinstance(node, yaml.MappingNode):
        return
    seen: set[str] = set()
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = _join(prefix, key_node.value)
        line = key_node.start_mark.line + 1
        if key in seen:
            raise BertkitError(f"config file '{path}' line {line}: key '{key}' is written twice — keep one of them")
        seen.add(key)
        sources[key] = f"{path}, line {line}"
        _record_key_lines(value_node, path, key, sources)


# ---------------------------------------------------------------------------------------------------------------
# Command-line overrides


_OVERRIDE_KEY = re.compile(r"^[A-Za-z_][\w-]*(?:\.[\w-]+)*$")


def parse_override(text: str) -> tuple[str, Any]:
    """`'train.learning_rate=3e-5'` -> `('train.learning_rate', '3e-5')`: the value read with YAML rules
    (`null`, `[a,b]`, `true`, numbers); the type is fixed later, when the target field is known."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not _OVERRIDE_KEY.match(key):
        raise BertkitError(f"override '{text}' is not key=value — write it like train.learning_rate=3.0e-5")
    try:
        value = yaml.load(raw, Loader=_Loader)
    except yaml.YAMLError:
        value = raw  # not YAML (e.g. `name=@x`): keep the text; the type check says whether a string is fine
    return key, value


def _apply_override(data: dict, sources: dict[str, str], text: str) -> None:
    """Write one override into the nested dict, creating the mappings on its way (`data.train=x.csv` with no
    `data:` in the file), and make it the source of that key."""
    key, value = parse_override(text)
    parts = key.split(".")
    node = data
    for depth, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict):
            parent = ".".join(parts[: depth + 1])
            raise BertkitError(
                f"override '{text}': config key '{parent}' is {_show(child)}, not a mapping, so it has no key "
                f"'{parts[depth + 1]}' — set '{parent}' itself"
            )
        node = child
    node[parts[-1]] = value
    for stale in [k for k in sources if k == key or k.startswith(key + ".")]:
        del sources[stale]
    sources[key] = f"override {text}"


# ---------------------------------------------------------------------------------------------------------------
# Where a value came from, for the error messages


@dataclasses.dataclass
class _Sources:
    by_key: dict[str, str] = dataclasses.field(default_factory=dict)

    def suffix(self, key: str) -> str:
        """' (from ...)' for a key: its own source, else its nearest parent's, else its first child's."""
        parts = key.split(".")
        for end in range(len(parts), 0, -1):
            source = self.by_key.get(".".join(parts[:end]))
            if source:
                return f" (from {source})"
        for other, source in self.by_key.items():
            if other.startswith(key + "."):
                return f" (from {source})"
        return ""


def _join(prefix: str, name: Any) -> str:
    return f"{prefix}.{name}" if prefix else str(name)


# ---------------------------------------------------------------------------------------------------------------
# Describing types and values in messages


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return _show(value)


def _show(value: Any) -> str:
    """A value as the user wrote it in YAML, cut short so the message stays on one line."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = _one_line(repr(value))
    return text if len(text) <= 60 else text[:57] + "..."


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


# ---------------------------------------------------------------------------------------------------------------
# Building the dataclass


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


def _default_of(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return REQUIRED


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
    if dataclasses.is_dataclass(default) and not isinstance(default, type):
        return _deep_merge(config_to_dict(default), value)
    if isinstance(default, dict):
        return _deep_merge(_plain(default), value)
    return value


def _build(cls: type, data: Any, prefix: str, sources: _Sources) -> Any:
    """A mapping -> an instance of the dataclass `cls`, every field checked; `prefix` is the dotted key of `data`."""
    if isinstance(data, cls):
        return data
    if not isinstance(data, dict):
        raise _type_error(prefix, cls, data, sources)
    hints, fields = _hints(cls), {f.name: f for f in _init_fields(cls)}
    for name in data:
        if name not in fields:
            raise _unknown_key(prefix, name, list(fields), sources)
    kwargs = {}
    for name, f in fields.items():
        key = _join(prefix, name)
        is_train = not prefix and name == TRAIN_KEY and _is_dict_type(hints[name])
        if name in data or (is_train and _default_of(f) is not REQUIRED):
            value = _coerce(_with_default(data.get(name, {}), f), hints[name], key, sources)
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


# ---------------------------------------------------------------------------------------------------------------
# The `train:` mapping -> transformers.TrainingArguments


@functools.lru_cache(maxsize=None)
def _train_fields() -> dict[str, tuple[Any, dataclasses.Field]]:
    """name -> (annotation, field) of the installed TrainingArguments: checked against the version that will
    run, not against a list written down here that drifts (5.x dropped warmup_ratio and group_by_length)."""
    from transformers import TrainingArguments  # imported late: transformers takes seconds to import

    try:
        hints = typing.get_type_hints(TrainingArguments)
    except Exception:  # an annotation that does not resolve on this version: fall back to the raw ones
        hints = {}
    return {f.name: (hints.get(f.name, f.type), f) for f in dataclasses.fields(TrainingArguments) if f.init}


def _rename_train_key(train: dict, old: str, new: str, value: Any, key: str, sources: _Sources, why: str) -> dict:
    """Replace `old` by `new: value` in place of order (the saved config reads in the user's order)."""
    if new in train and train[new] != value:
        raise BertkitError(
            f"config keys '{key}.{old}' and '{key}.{new}' are both set — keep only '{key}.{new}' ({why})"
            f"{sources.suffix(key + '.' + old)}"
        )
    logger.warning("config: %s.%s=%r is written as %s.%s=%r (%s)", key, old, train[old], key, new, value, why)
    renamed = {}
    for k, v in train.items():
        if k == old:
            renamed[new] = value
        elif k != new:
            renamed[k] = v
    return renamed


def _translate_train(train: dict, key: str, sources: _Sources) -> dict:
    """Keys of older transformers versions that users (and tutorials) still write, turned into their 5.x form."""
    fields = _train_fields()
    if "warmup_ratio" in train and "warmup_ratio" not in fields:
        ratio = _coerce(train["warmup_ratio"], float, f"{key}.warmup_ratio", sources)
        if not 0 <= ratio < 1:
            raise BertkitError(
                f"config key '{key}.warmup_ratio' must be in [0, 1), got {_show(ratio)} — for a number of steps "
                f"write {key}.warmup_steps{sources.suffix(key + '.warmup_ratio')}"
            )
        why = "transformers 5 has no warmup_ratio: a warmup_steps below 1 is a ratio of the training steps"
        train = _rename_train_key(train, "warmup_ratio", "warmup_steps", ratio, key, sources, why)
    if "group_by_length" in train and "group_by_length" not in fields:
        grouped = _coerce(train["group_by_length"], bool, f"{key}.group_by_length", sources)
        why = "transformers 5 has no group_by_length: train_sampling_strategy chooses the sampler"
        if grouped:
            strategy = "group_by_length"
            train = _rename_train_key(train, "group_by_length", "train_sampling_strategy", strategy, key, sources, why)
        else:
            logger.warning("config: %s.group_by_length=false dropped (%s)", key, why)
            train = {k: v for k, v in train.items() if k != "group_by_length"}
    if "evaluation_strategy" in train and "evaluation_strategy" not in fields:
        why = "renamed to eval_strategy in transformers 4.46"
        value = train["evaluation_strategy"]
        train = _rename_train_key(train, "evaluation_strategy", "eval_strategy", value, key, sources, why)
    return train


# `train:` keys that bertkit owns elsewhere: TrainingArguments would take them, and the run would go wrong quietly.
_REFUSED_TRAIN_KEYS = {
    "output_dir": "it duplicates the top-level output_dir, which resume, the saved config and push read — set the "
                  "top-level output_dir=... instead",
    "seed": "it duplicates the top-level seed, which the recipe passes on — set the top-level seed=... instead",
    "resume_from_checkpoint": "the Trainer ignores it — set the top-level resume=true or resume=<checkpoint path>",
    "hub_token": "a token in a config is written in plain text to bertkit_config.yaml and training_args.bin — set "
                 "the HF_TOKEN environment variable or run `hf auth login` instead",
}


def _refuse_train_keys(train: dict, key: str, sources: _Sources) -> None:
    for name in _REFUSED_TRAIN_KEYS.keys() & train.keys():
        if name == "hub_token" and train[name] is None:
            continue  # `hub_token: null` (a saved run config) holds no secret
        source = sources.suffix(_join(key, name))
        if name == "hub_token" and "override" in source:  # never echo the token itself
            source = " (from the command line)"
        raise BertkitError(f"config key '{key}.{name}' is not accepted: {_REFUSED_TRAIN_KEYS[name]}{source}")


def _validate_train(train: dict, key: str, sources: _Sources) -> dict:
    _refuse_train_keys(train, key, sources)
    train = _translate_train(dict(train), key, sources)
    fields = _train_fields()
    checked = {}
    for name, value in train.items():
        name_key = _join(key, name)
        if name not in fields:
            close = _suggest(name, list(fields))
            hint = f"did you mean '{_join(key, close)}'?" if close else "see transformers.TrainingArguments"
            raise BertkitError(
                f"unknown config key '{name_key}' — {hint} ({key} keys are TrainingArguments fields)"
                f"{sources.suffix(name_key)}"
            )
        tp, f = fields[name]
        value = _coerce(value, tp, name_key, sources)
        if isinstance(value, str) and "choices" in f.metadata:  # log_level, train_sampling_strategy, ...
            value = _coerce_choice(value, list(f.metadata["choices"]), name_key, sources)
        checked[name] = value
    return checked


def validate_train_args(train: dict) -> dict:
    """Check a `train:` mapping against the installed `transformers.TrainingArguments` and return a copy fit for
    `TrainingArguments(**train)`: unknown keys raise (with the closest valid name), values are converted to the
    field's type (`'5e-5'` -> 5e-05), and pre-5.x keys are translated (`warmup_ratio` -> `warmup_steps`,
    `group_by_length: true` -> `train_sampling_strategy: group_by_length`), each with a logged warning."""
    if not isinstance(train, dict):
        raise BertkitError(f"config key '{TRAIN_KEY}': expected a mapping of TrainingArguments, got {_kind(train)}")
    return _validate_train(train, TRAIN_KEY, _Sources())


# ---------------------------------------------------------------------------------------------------------------
# Public entry points


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


def _plain(value: Any) -> Any:
    """Dataclasses, paths, enums and tuples -> the dicts, strings and lists that YAML writes."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in _init_fields(type(value))}
    if isinstance(value, enum.Enum):
        return _plain(value.value)
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    return value


def config_to_dict(cfg: Any) -> dict:
    """A config instance as plain nested dicts (only the fields `__init__` takes, so it loads back)."""
    if not dataclasses.is_dataclass(cfg) or isinstance(cfg, type):
        raise TypeError(f"config_to_dict needs a dataclass instance, got {cfg!r}")
    return _plain(cfg)


def save_config(cfg: Any, path: str | os.PathLike, command: str | None = None) -> Path:
    """Write the resolved config as YAML (so `load_config(type(cfg), path, [])` gives back `cfg`); `command`,
    e.g. 'bertkit run classify -c <path>', becomes the header line that `config_header_command` reads."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = f"# {command}\n" if command else ""
    header += "# The resolved config of a bertkit run: every value the run used.\n"
    body = yaml.safe_dump(config_to_dict(cfg), sort_keys=False, allow_unicode=True, default_flow_style=False)
    path.write_text(header + body, encoding="utf-8")
    return path


class ConfigField(NamedTuple):
    """One row of `describe_config`: a dotted key, its type as written, its default (or REQUIRED), its help."""

    key: str
    type: str
    default: Any
    help: str


def _field_docs(cls: type) -> dict[str, str]:
    """The string literal written right under each annotated field (litgpt style), read from the class source.
    Falls back to `field(metadata={"help": ...})`; a class without source (defined in a REPL) gets no help."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):  # a subclass's docstring wins over its base's
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for stmt, after in zip(body, body[1:]):
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[stmt.target.id] = _one_line(inspect.cleandoc(after.value.value))
    for f in dataclasses.fields(cls):
        if f.name not in docs and "help" in f.metadata:
            docs[f.name] = _one_line(f.metadata["help"])
    return docs


def _describe(cls: type, prefix: str, instance: Any) -> list[ConfigField]:
    docs, hints, rows = _field_docs(cls), _hints(cls), []
    for f in _init_fields(cls):
        key, tp = _join(prefix, f.name), hints[f.name]
        default = getattr(instance, f.name) if instance is not None else _default_of(f)
        if _is_dataclass_type(tp):  # a nested section: list its own keys, with the defaults the outer one sets
            rows += _describe(tp, key, default if isinstance(default, tp) else None)
        else:
            rows.append(ConfigField(key, _type_str(tp), default, docs.get(f.name, "")))
    return rows


def describe_config(config_cls: type) -> list[ConfigField]:
    """Every settable key of a recipe config, nested sections flattened to dotted keys: (key, type, default,
    help) rows for `bertkit validate` and `--help` listings. A field without default has `REQUIRED`."""
    if not _is_dataclass_type(config_cls):
        raise TypeError(f"describe_config needs a dataclass type, got {config_cls!r}")
    return _describe(config_cls, "", None)


def config_header_command(path: str | os.PathLike) -> str | None:
    """The command in a config file's leading comment block (`# bertkit run classify -c ...`), lines ending in a
    backslash joined; None when the header has no such line."""
    try:
        lines = Path(path).read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as e:
        raise BertkitError(f"config file '{path}' cannot be read ({_one_line(e)}) — check the path") from None
    parts: list[str] = []
    for line in lines:
        text = line.strip()
        if not text.startswith("#"):
            if text or parts:  # the header ends at the first YAML line (or after the command)
                break
            continue
        body = text.lstrip("#").strip()
        if not parts and not body.startswith("bertkit run"):
            continue
        parts.append(body.removesuffix("\\").rstrip())
        if not body.endswith("\\"):
            break
    return " ".join(parts) if parts else None


__all__ = [
    "REQUIRED",
    "build_config",
    "TRAIN_KEY",
    "ConfigField",
    "config_header_command",
    "config_to_dict",
    "describe_config",
    "load_config",
    "parse_override",
    "save_config",
    "validate_train_args",
]
