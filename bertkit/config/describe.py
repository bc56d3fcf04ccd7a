"""A config described and written out: `describe_config` (every key with its type, default and help, for
`bertkit validate --keys`), `config_to_dict` / `save_config` (the resolved config next to the checkpoints) and
`config_header_command` (the command in a config file's leading comment)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import os
import textwrap
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from bertkit.errors import BertkitError

from .fields import _default_of, _hints, _init_fields, _is_inline, _plain
from .reading import _join, _one_line
from .types import _is_dataclass_type, _type_str


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


__all__ = ["ConfigField", "config_header_command", "config_to_dict", "describe_config", "save_config"]
