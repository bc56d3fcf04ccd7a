"""TrainingArguments without importing transformers: the fields of the installed version, and the keywords a run
passes to it.

A recipe's `train:` mapping is checked against the installed `transformers.TrainingArguments` (its keys, their types
and choices, their defaults in messages), and `bertkit validate` or a refused `bertkit run` must answer before
torch and transformers are imported (seconds on a small machine). So the fields are read from transformers once per
installed version and kept as JSON in bertkit's cache folder (`$BERTKIT_CACHE`, else `~/.cache/bertkit`):

    {"learning_rate": {"type": "float", "default": 5e-05}, "lr_scheduler_type": {"type": {"literal": [...]}, ...}}

Each type is the one pydantic checks (bertkit/config.py), written as JSON: a name (int, float, bool, str, None,
dict, any), {"literal": [...]} (an Enum or a field's `choices`), {"list": T} or {"union": [T, ...]}. A cache that
cannot be read or written is made again or skipped, never trusted half-written.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import types
import typing
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Literal, Union

from .cache import cache_root
from .errors import BertkitError


class Field(typing.NamedTuple):
    type: Any
    """The annotation pydantic checks (Enums and `choices` narrowed to their values)."""
    default: Any
    """The default, as JSON (an Enum's value; None where there is none)."""


@lru_cache(maxsize=None)
def training_fields() -> dict[str, Field]:
    """name -> Field of the installed TrainingArguments (every field its __init__ takes): checked against the
    version that will run, not against a list written down here that drifts (5.x dropped warmup_ratio)."""
    try:
        path = cache_root() / "training_arguments" / f"transformers-{version('transformers')}.json"
    except PackageNotFoundError:
        path = None
    schema = _read(path) if path is not None else None
    if schema is None:
        schema = _schema_from_transformers()
        if path is not None:
            _write(path, schema)
    return {name: Field(_from_json(entry["type"]), entry["default"]) for name, entry in schema.items()}


def _read(path: Path) -> dict | None:
    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return schema if isinstance(schema, dict) and schema else None


def _write(path: Path, schema: dict) -> None:
    """Atomically (a half-written file is never read as the schema); a cache that cannot be written is skipped."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(schema), encoding="utf-8")
        os.replace(temporary, path)
    except OSError:
        pass


def _schema_from_transformers() -> dict:
    from transformers import TrainingArguments  # seconds: once per installed version

    try:
        hints = typing.get_type_hints(TrainingArguments)
    except Exception:  # an annotation that does not resolve on this version: fall back to the raw ones
        hints = {}
    return {f.name: {"type": _to_json(_checked_type(hints.get(f.name, f.type), f)), "default": _plain(f.default)}
            for f in dataclasses.fields(TrainingArguments) if f.init}


def _checked_type(tp: Any, f: dataclasses.Field) -> Any:
    """`SchedulerType | str` and `choices` metadata narrowed to their values (a typo gets the closest one)."""
    if f.name == "fsdp":  # annotated `str | None`, but `fsdp=True` is its current form (the string is deprecated)
        return bool | str | None
    args = typing.get_args(tp) if typing.get_origin(tp) in (Union, types.UnionType) else (tp,)
    choices = list(f.metadata.get("choices", ())) or [
        member.value for arg in args if isinstance(arg, type) and issubclass(arg, enum.Enum) for member in arg]
    if choices:
        return Literal[tuple(choices)] | None if type(None) in args else Literal[tuple(choices)]
    return tp


_NAMES = {int: "int", float: "float", bool: "bool", str: "str", type(None): "None", dict: "dict"}


def _to_json(tp: Any) -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp in _NAMES:
        return _NAMES[tp]
    if origin is Literal:
        return {"literal": [_plain(arg) for arg in args]}
    if origin in (Union, types.UnionType):
        return {"union": [_to_json(arg) for arg in args]}
    if origin is list:
        return {"list": _to_json(args[0]) if args else "any"}
    if origin is dict:
        return "dict"
    return "any"  # a type pydantic cannot check: TrainingArguments itself will


def _from_json(spec: Any) -> Any:
    if spec == "float":  # TrainingArguments' step counts are floats (below 1: a share of the run): 5 stays 5
        return float | int
    if isinstance(spec, str):
        return {name: tp for tp, name in _NAMES.items()}.get(spec, Any)
    if "literal" in spec:
        return Literal[tuple(spec["literal"])]
    if "list" in spec:
        return list[_from_json(spec["list"])]
    return Union[tuple(_from_json(arg) for arg in spec["union"])]


def _plain(value: Any) -> Any:
    """A default or choice as JSON: an Enum by its value, MISSING as None, anything else JSON cannot hold by repr."""
    if isinstance(value, enum.Enum):
        value = value.value
    if value is dataclasses.MISSING:
        return None
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


def trainer_kwargs(train: dict, output_dir: str, seed: int, has_eval: bool, metric_for_best: str | None,
                   greater_is_better: bool = True) -> dict:
    """The TrainingArguments keywords of a run, precision aside: bertkit's defaults, the `train:` block over them,
    and with a dev split evaluation on the save schedule and best-model selection. Pure, so that `bertkit validate`
    (bertkit/checks.py) checks the very settings `training.training_arguments` passes on."""
    args = {"output_dir": output_dir, "seed": seed, "report_to": "none", "logging_strategy": "steps",
            "logging_steps": 10, "save_strategy": "epoch", "save_total_limit": 2,
            # a NaN step shows in the logged loss, where LossGuard (bertkit/training.py) stops the run; Trainer's
            # filter would log the mean of the finite steps instead, or 0.0 when every step of the window is NaN
            "logging_nan_inf_filter": False, **train}
    if has_eval:
        args.setdefault("eval_strategy", args["save_strategy"])
        args.setdefault("load_best_model_at_end", True)
        if metric_for_best and "metric_for_best_model" not in train:  # else TrainingArguments' default direction
            args["metric_for_best_model"] = metric_for_best  # (higher is better unless the name ends in loss)
            args.setdefault("greater_is_better", greater_is_better)
    return args


def arguments_refused(error: Exception) -> BertkitError:
    """TrainingArguments' own refusal, in one line naming the `train:` block (its first line says what is wrong)."""
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return BertkitError(f"config key 'train': TrainingArguments refuses these settings ({first}) — change the train.* "
                        "keys it names")


__all__ = ["Field", "training_fields", "trainer_kwargs", "arguments_refused"]
