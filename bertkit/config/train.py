"""The `train:` mapping of a recipe config -> keyword arguments for `transformers.TrainingArguments`.

The recipe does not declare these keys; the installed TrainingArguments does, so they are checked against it: an
unknown key gets the closest field name, values are converted to the field's type, keys of older transformers
versions are translated (each with a logged warning), and the keys bertkit owns elsewhere (`train.output_dir`,
`train.seed`, `train.resume_from_checkpoint`, `train.hub_token`) are refused with the top-level key to set instead.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import typing
from typing import Any

from bertkit.errors import BertkitError

from .reading import _join, _kind, _show, _Sources
from .types import _coerce, _coerce_choice, _suggest

logger = logging.getLogger(__name__)

# The top-level recipe field that is passed to `transformers.TrainingArguments` as keyword arguments.
TRAIN_KEY = "train"


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


__all__ = ["TRAIN_KEY", "validate_train_args"]
