"""The inference settings a NER run saves with its model (config.json, under tasks.SETTINGS_KEY): how predict and
evaluate window, read and score files the way the training run did."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bertkit.errors import ConfigValueError
from bertkit.rundir import read_run_config
from bertkit.tasks import SETTINGS_KEY

from .read import ReadOptions
from .tags import SCHEMES

MIN_MAX_LENGTH = 8  # [CLS], [SEP] and a few tokens of text, as the recipe requires


@dataclass
class Settings:
    scheme: Literal["IOB2", "BIOES"] = "IOB2"
    """Tag scheme the model predicts (IOB1 training files became IOB2); evaluate scores under it."""
    file_scheme: Literal["auto", "IOB2", "IOB1", "BIOES"] = "auto"
    """Scheme of the training files (the recipe's data.scheme); evaluate reads labelled files in it (auto: scheme)."""
    repair_tags: bool = False
    """Evaluate repairs tags that break the scheme instead of stopping, as the training run did."""
    skip_bad_examples: bool = False
    """Evaluate skips (and counts) bad examples instead of stopping, as the training run did."""
    split: Literal["bert", "chars"] = "bert"
    """How raw text becomes words: bert (whitespace, punctuation, each CJK character) or chars (every character)."""
    max_length: int | None = None
    """Tokens per window, [CLS] and [SEP] included (None: the model's positions, at most 512)."""
    stride: int = 32
    """Tokens that consecutive windows share."""
    strict: bool = False
    """Score entities in seqeval's strict mode under the scheme (default: conlleval's lenient reading)."""

    def __post_init__(self):
        self.check()

    def check(self) -> None:
        """Refuse a window that cannot work, naming the key (one line)."""
        if self.max_length is not None and self.max_length < MIN_MAX_LENGTH:
            raise ConfigValueError(f"{SETTINGS_KEY}.max_length", f"{SETTINGS_KEY}.max_length must be at least "
                                   f"{MIN_MAX_LENGTH} ([CLS], [SEP] and some text), got {self.max_length}")
        room = self.max_length - 2 if self.max_length is not None else None
        if self.stride < 0 or (room is not None and self.stride >= room):
            raise ConfigValueError(f"{SETTINGS_KEY}.stride", f"{SETTINGS_KEY}.stride must be 0 or more and below the "
                                   f"{room} tokens of a window (max_length - 2), got {self.stride}")

    def read_options(self) -> ReadOptions:
        """How evaluate reads a labelled file: with the training run's scheme, repair, skip and split options."""
        file_scheme = self.file_scheme if self.file_scheme in SCHEMES else self.scheme  # IOB1 files convert
        return ReadOptions(scheme=file_scheme, repair=self.repair_tags, skip_bad=self.skip_bad_examples,
                           split=self.split)


def legacy_settings(model_dir: str, model_config) -> dict:
    """The settings of a model saved before SETTINGS_KEY existed: the scheme from config.json's `ner_scheme`, the
    rest from the run's saved recipe config (bertkit_config.yaml), with the defaults predict used then."""
    run = read_run_config(model_dir)
    data = run.get("data", {})
    return {"scheme": getattr(model_config, "ner_scheme", None) or "IOB2",
            "file_scheme": data.get("scheme") if data.get("scheme") in SCHEMES else "auto",
            "repair_tags": bool(data.get("repair_tags", False)),
            "skip_bad_examples": bool(data.get("skip_bad_examples", False)), "split": data.get("split", "bert"),
            "max_length": data.get("max_length") or None, "stride": int(data.get("stride", 32)),
            "strict": bool(run.get("strict", False))}


__all__ = ["Settings", "legacy_settings"]
