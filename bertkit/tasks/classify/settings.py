"""The inference settings of a classify (or distill) run: what predict / evaluate need to read a file and cut its
texts the way training did. Saved in config.json under bertkit_task_settings; a run saved before that kept them in
its bertkit_config.yaml (data.* and long_doc), which `legacy_settings` reads."""

from __future__ import annotations

from dataclasses import dataclass, field

from bertkit.errors import BertkitError
from bertkit.rundir import read_run_config

from .long_docs import LongDocConfig

COLUMN_KEYS = ("text_column", "text_pair_column", "label_column")


@dataclass
class Settings:
    max_length: int | None = None
    """Tokens per row (per window), [CLS] and [SEP] included (None: the model's positions, at most 512)."""
    text_column: str | None = None
    """Column holding the text (None: auto-detected)."""
    text_pair_column: str | None = None
    """Column holding the second segment of a sentence pair (None: auto-detected)."""
    label_column: str | None = None
    """Column holding the label of a file to evaluate (None: auto-detected)."""
    long_doc: LongDocConfig = field(default_factory=LongDocConfig)
    """Texts longer than max_length: head / tail / head_tail truncation or chunk windows, as the run trained."""

    def columns(self) -> dict:
        """The column overrides bertkit.splits.load_split takes."""
        return {key: getattr(self, key) for key in COLUMN_KEYS}

    def check(self, kind: str | None = None) -> None:
        """Raise a one-line BertkitError naming the key when the settings cannot work (`kind`: the label kind)."""
        if self.max_length is not None and self.max_length < 3:
            raise BertkitError(f"max_length={self.max_length} must be at least 3 ([CLS], [SEP] and some text)")
        self.long_doc.check(self.max_length or 512, kind)


def legacy_settings(model_dir: str) -> dict:
    """The settings of a run saved before config.json held them: data.max_length, the data.*_column keys and
    long_doc of its bertkit_config.yaml ({} for a model that is not a bertkit run: the defaults)."""
    run = read_run_config(model_dir)
    data = run.get("data") or {}
    saved = {key: data[key] for key in ("max_length", *COLUMN_KEYS) if key in data}
    return {**saved, "long_doc": run["long_doc"]} if run.get("long_doc") else saved


__all__ = ["Settings", "legacy_settings"]
