"""A recipe's config: YAML file + `key.sub=value` overrides -> its typed `@dataclass Config`, validated by pydantic.

    bertkit run classify -c classify/en_sentiment train.learning_rate=3.0e-5 llrd=0.9
      -> the YAML file becomes a dict (with the file and line of every key), each override is written into it
      -> the keys are checked (an unknown one gets the closest valid name), inline sections nested, partial
         sections filled from the recipe's defaults, and the `train:` mapping checked against the installed
         `transformers.TrainingArguments` (the recipe does not declare those keys; the Trainer does)
      -> pydantic validates the dict into the recipe's dataclass (types, Literals, ranges declared as
         `Annotated[int, Field(ge=1)]`) and runs its `__post_init__` (the checks across keys: bertkit/checks.py)
      -> the resolved config is written next to the checkpoints; `bertkit validate --keys` lists every key.

The glue around pydantic is what it does not do: YAML read with YAML 1.2 booleans (`eval_strategy: no` stays the
string 'no'), duplicate keys refused, `5e-5` (a string to PyYAML) accepted for an int too, a number for a string,
a boolean refused for a number, and every error turned into one `BertkitError` line that names the key and where
its value was set: `config key 'K': <pydantic's words>, got V — fix (from override K=V | from FILE, line N)`.

A field marked `metadata=INLINE` puts its dataclass's keys at its parent's level: how recipes compose the shared
options of bertkit/options.py while users keep writing `output_dir=...` and `llrd=0.9` (and the saved config
stays flat).
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
from types import MappingProxyType
from typing import Any, Callable, Literal, NamedTuple, Union

import pydantic
import yaml

from bertkit.errors import BertkitError, ConfigValueError
from bertkit.shipped import is_shipped, rebase_shipped_paths
from bertkit.training_arguments import training_fields

logger = logging.getLogger(__name__)

# `field(metadata=INLINE)`: the field's dataclass contributes its keys to the parent's level.
INLINE = MappingProxyType({"bertkit_inline": True})

# The top-level recipe field that is passed to `transformers.TrainingArguments` as keyword arguments.
TRAIN_KEY = "train"


class _Required:
    """Marks a field without a default in `describe_config` rows."""

    def __repr__(self) -> str:
        return "<required>"


REQUIRED = _Required()

# ---------------------------------------------------------------------------------------------------------------
# Reading YAML, with the file and line of every key


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 booleans: only true/false, so `eval_strategy: no` stays the string 'no'."""


_BOOL_TAG = "tag:yaml.org,2002:bool"
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != _BOOL_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(_BOOL_TAG, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))


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


def _suggest(word: Any, choices: list) -> str | None:
    match = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return match[0] if match else None


# ---------------------------------------------------------------------------------------------------------------
# The fields of a config dataclass as a user sees them: inline sections' keys at their parent's level


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    """Resolved annotations without `Annotated` constraints (recipes use `from __future__ import annotations`)."""
    try:
        return typing.get_type_hints(cls)
    except Exception as e:  # a recipe bug, not a user error: say which class
        raise TypeError(f"cannot resolve the annotations of {cls.__qualname__}: {e}") from e


def _is_dataclass_type(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


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
        if _is_inline(f) and not _is_dataclass_type(tp):
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


# ---------------------------------------------------------------------------------------------------------------
# Validation: pydantic, with the lax conversions it leaves out and errors that name the key and its source

# A number PyYAML leaves as a string: an exponent without a dot (`5e-5`, `1e3`) or without a sign (`5.0e5`).
_SCI_NUMBER = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)[eE][-+]?\d+$")


@functools.lru_cache(maxsize=None)
def _adapter(tp: Any) -> pydantic.TypeAdapter:
    return pydantic.TypeAdapter(tp)


def _loosen(box: list, loc: tuple, error: dict) -> bool:
    """Convert what pydantic's lax mode refuses but a YAML user means: `1e3` for an int, `2024` for a string.
    Writes the converted value at `loc` of the input; False when the error is not one of these."""
    value = error.get("input")
    if error["type"] == "int_parsing" and isinstance(value, str) and _SCI_NUMBER.match(value.strip()):
        value = float(value)
    elif error["type"] == "string_type" and isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    else:
        return False
    parent, key, node = None, None, box
    for part in loc:  # the parts that index the input (the others name a union's member)
        if (isinstance(node, dict) and part in node) or (isinstance(node, list) and isinstance(part, int)
                                                         and 0 <= part < len(node)):
            parent, key, node = node, part, node[part]
    if parent is None:
        return False
    parent[key] = value
    return True


def _checked(adapter: pydantic.TypeAdapter, value: Any, where: Callable[[tuple], tuple[str, Any]],
             sources: _Sources) -> Any:
    """`adapter.validate_python(value)`: a boolean refused where a number is declared (lax pydantic takes true
    for 1), the conversions of `_loosen`, and the first error as one line; `where(loc)` -> (key, its default)."""
    box = [value]
    for _ in range(64):
        try:
            if isinstance(value, bool):
                adapter.validate_python(value, strict=True)
            return adapter.validate_python(box[0])
        except pydantic.ValidationError as error:
            errors = error.errors()
            if not any([_loosen(box, (0, *e["loc"]), e) for e in errors]):
                raise _error(errors[0], *where(errors[0]["loc"]), sources) from None
    raise AssertionError("unreachable: each retry converts a value")


def check_value(value: Any, annotation: Any, key: str, default: Any = None, sources: _Sources | None = None) -> Any:
    """`value` validated as `annotation` (e.g. `Annotated[float, Field(gt=0)]`), or one BertkitError line that
    names `key` (and suggests `key=default`)."""
    return _checked(_adapter(annotation), value, lambda loc: (key, default), sources or _Sources())


def _error(error: dict, key: str, default: Any, sources: _Sources) -> BertkitError:
    """`config key 'K': <pydantic's words>, got V — fix (from SOURCE)`."""
    message, kind, value = error["msg"][0].lower() + error["msg"][1:], error["type"], error.get("input")
    got = "" if kind == "missing" else f", got {_show(value)}"
    if kind == "missing":
        fix = f"set it in the config file or add {key}=... to the command"
    elif isinstance(value, dict) and kind not in ("dict_type", "dataclass_type"):  # `model.name=x` for a str
        fix = f"'{key}' has no sub-keys: set it as {key}=..."
    elif kind == "list_type":
        fix = "write a list as [a, b]"
    elif kind in ("literal_error", "enum"):
        close = _suggest(value, re.findall(r"'([^']*)'", error["ctx"]["expected"]))
        fix = f"did you mean {close!r}?" if close else ""
    elif default not in (None, REQUIRED) and not isinstance(default, dict) and not _is_dataclass_type(type(default)):
        fix = f"e.g. {key}={_yaml_value(default)}"
    else:
        fix = ""
    return BertkitError(f"config key '{key}': {message}{got}{' — ' + fix if fix else ''}{sources.suffix(key)}")


def _yaml_value(value: Any) -> str:
    """A value as an override writes it: 5.0e-05, [query, value], true."""
    return yaml.safe_dump(_plain(value), default_flow_style=True, width=1000).removesuffix("...\n").strip()


def _key_at(cls: type, loc: tuple, prefix: str) -> tuple[str, Any]:
    """A pydantic error location in the nested data -> the key the user writes (inline sections' names left
    out) and that field's default."""
    key, tp, default = prefix, cls, None
    for part in loc:
        fields = {f.name: f for f in _init_fields(tp)} if _is_dataclass_type(tp) else {}
        if part in fields:
            key = key if _is_inline(fields[part]) else _join(key, part)
            tp, default = _hints(tp)[part], _default_of(fields[part])
            tp = next((arg for arg in typing.get_args(tp) if _is_dataclass_type(arg)), tp)  # `X | None`
        elif isinstance(part, int):  # an item of a list: the list's key names it, its default is the example
            tp = None
        elif tp is dict or typing.get_origin(tp) is dict:
            key, tp, default = _join(key, part), None, None
    return key, default


def _nest(cls: type, data: dict, prefix: str, sources: _Sources) -> dict:
    """The keys a user writes for `cls` -> the mapping pydantic validates: unknown keys refused, each inline
    field's keys moved under its name, partial sections filled from their defaults, `train:` checked against
    TrainingArguments, and a boolean for a number refused."""
    keys, hints, nested = _key_fields(cls), _hints(cls), {}
    for name in data:
        if name not in keys:
            raise _unknown_key(prefix, name, list(keys), sources)
    for f in _init_fields(cls):
        tp, key = hints[f.name], _join(prefix, f.name)
        if _is_inline(f):
            own = {k: data[k] for k in _key_fields(tp) if k in data}
            if own:
                nested[f.name] = _nest(tp, _with_default(own, f), prefix, sources)
        elif not prefix and f.name == TRAIN_KEY and (tp is dict or typing.get_origin(tp) is dict):
            value = _with_default(data.get(f.name, {}), f)
            if f.name in data or _default_of(f) is not REQUIRED:
                nested[f.name] = _validate_train(value, key, sources) if isinstance(value, dict) else value
        elif f.name in data:
            value = _with_default(data[f.name], f)
            dataclass_type = next((t for t in (tp, *typing.get_args(tp)) if _is_dataclass_type(t)), None)
            if dataclass_type is not None and isinstance(value, dict):
                value = _nest(dataclass_type, value, key, sources)
            elif isinstance(value, bool):
                _checked(_adapter(tp), value, lambda loc, key=key, f=f: (key, _default_of(f)), sources)
            nested[f.name] = value
    return nested


def _unknown_key(prefix: str, name: Any, valid: list[str], sources: _Sources) -> BertkitError:
    key = _join(prefix, name)
    close = _suggest(name, valid)
    if close:
        hint = f"did you mean '{_join(prefix, close)}'?"
    elif not prefix and TRAIN_KEY in valid and str(name) in training_fields():
        hint = f"did you mean '{TRAIN_KEY}.{name}'? (TrainingArguments settings go under {TRAIN_KEY}:)"
    else:
        hint = f"valid keys{' under ' + repr(prefix) if prefix else ''}: {', '.join(valid)}"
    return BertkitError(f"unknown config key '{key}' — {hint}{sources.suffix(key)}")


def _build(cls: type, data: Any, prefix: str, sources: _Sources) -> Any:
    """A mapping -> an instance of the dataclass `cls`, validated by pydantic, its `__post_init__` run; a
    `ConfigValueError` from there (bertkit/checks.py) gets the source of its key appended."""
    if isinstance(data, cls):
        return data
    nested = _nest(cls, data, prefix, sources) if isinstance(data, dict) else data
    try:
        return _checked(_adapter(cls), nested, lambda loc: _key_at(cls, loc, prefix), sources)
    except ConfigValueError as error:
        raise BertkitError(f"{error}{sources.suffix(error.key)}") from None


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


# ---------------------------------------------------------------------------------------------------------------
# The `train:` mapping -> keyword arguments for `transformers.TrainingArguments`

@functools.lru_cache(maxsize=None)
def _train_adapter(name: str) -> pydantic.TypeAdapter:
    """A TrainingArguments field's type as pydantic checks it (bertkit/training_arguments.py narrows Enums and
    `choices` to their values)."""
    try:
        return pydantic.TypeAdapter(training_fields()[name].type,
                                    config=pydantic.ConfigDict(arbitrary_types_allowed=True))
    except (pydantic.PydanticUserError, NameError, TypeError):  # a type pydantic cannot check: TrainingArguments will
        return pydantic.TypeAdapter(Any)


def _rename_train_key(train: dict, old: str, new: str, value: Any, key: str, sources: _Sources, why: str) -> dict:
    """Replace `old` by `new: value` in place of order (the saved config reads in the user's order)."""
    if new in train and train[new] != value:
        raise BertkitError(
            f"config keys '{key}.{old}' and '{key}.{new}' are both set — keep only '{key}.{new}' ({why})"
            f"{sources.suffix(key + '.' + old)}"
        )
    logger.warning("config: %s.%s=%r is written as %s.%s=%r (%s)", key, old, train[old], key, new, value, why)
    return {(new if k == old else k): (value if k == old else v) for k, v in train.items() if k != new}


def _translate_train(train: dict, key: str, sources: _Sources) -> dict:
    """Keys of older transformers versions that users (and tutorials) still write, turned into their 5.x form."""
    fields = training_fields()
    if "warmup_ratio" in train and "warmup_ratio" not in fields:
        ratio = check_value(train["warmup_ratio"], float, f"{key}.warmup_ratio", sources=sources)
        if not 0 <= ratio < 1:
            raise BertkitError(
                f"config key '{key}.warmup_ratio' must be in [0, 1), got {_show(ratio)} — for a number of steps "
                f"write {key}.warmup_steps{sources.suffix(key + '.warmup_ratio')}"
            )
        why = "transformers 5 has no warmup_ratio: a warmup_steps below 1 is a ratio of the training steps"
        train = _rename_train_key(train, "warmup_ratio", "warmup_steps", ratio, key, sources, why)
    if "group_by_length" in train and "group_by_length" not in fields:
        grouped = check_value(train["group_by_length"], bool, f"{key}.group_by_length", sources=sources)
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
    fields, checked = training_fields(), {}
    for name, value in train.items():
        name_key = _join(key, name)
        if name not in fields:
            close = _suggest(name, list(fields))
            hint = f"did you mean '{_join(key, close)}'?" if close else "see transformers.TrainingArguments"
            raise BertkitError(
                f"unknown config key '{name_key}' — {hint} ({key} keys are TrainingArguments fields)"
                f"{sources.suffix(name_key)}"
            )
        default = fields[name].default
        checked[name] = _checked(_train_adapter(name), value, lambda loc: (name_key, default), sources)
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
# A config described and written out


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


def _type_str(tp: Any) -> str:
    """An annotation written the way a user reads it: 'float | None', "Literal['cls', 'mean']", 'list[str]'."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is type(None):
        return "None"
    if origin in (Union, types.UnionType):
        return " | ".join(_type_str(arg) for arg in args)
    if origin is Literal:
        return "Literal[" + ", ".join(repr(arg) for arg in args) + "]"
    if origin is not None and args:
        inner = ", ".join("..." if arg is Ellipsis else _type_str(arg) for arg in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    return tp.__name__ if isinstance(tp, type) else str(tp).replace("typing.", "")


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
            section = prefix if _is_inline(f) else key  # an inline one's keys are the parent's
            rows += _describe(tp, section, default if isinstance(default, tp) else None)
        else:
            rows.append(ConfigField(key, _type_str(tp), default, docs.get(f.name, "")))
    return rows


def describe_config(config_cls: type) -> list[ConfigField]:
    """Every settable key of a recipe config, nested sections flattened to dotted keys: (key, type, default,
    help) rows for `bertkit validate` and `--help` listings. A field without default has `REQUIRED`."""
    if not _is_dataclass_type(config_cls):
        raise TypeError(f"describe_config needs a dataclass type, got {config_cls!r}")
    return _describe(config_cls, "", None)


def config_schema(config_cls: type) -> dict:
    """The JSON schema pydantic derives from a config dataclass (`bertkit validate --schema`): types, choices
    and ranges of every field (inline sections appear under their field name, as code reads them)."""
    return _adapter(config_cls).json_schema()


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
    "INLINE", "REQUIRED", "TRAIN_KEY", "ConfigField", "build_config", "check_value", "config_header_command",
    "config_schema",
    "config_to_dict", "describe_config", "load_config", "parse_override", "save_config", "validate_train_args",
]
