"""Reading a config: YAML (with the file and line of every key) and `key.sub=value` overrides written into it.

Two YAML traps are handled on purpose:
- PyYAML reads `5e-5` (no dot) as a *string*. Where the target type is a float or an int, such strings are
  converted (bertkit/config/types.py); everywhere else the value is left as YAML read it.
- YAML 1.1 reads `no`, `yes`, `on`, `off` as booleans, so `eval_strategy: no` would arrive as `False`. Configs
  are read with YAML 1.2's rule instead: only `true` / `false` are booleans; a bool field still accepts the words.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Any

import yaml

from bertkit.errors import BertkitError

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
# Describing values in messages


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


__all__ = ["parse_override"]
