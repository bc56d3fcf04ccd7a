"""What a QA run saves beside its model so that `bertkit predict` / `evaluate` cut windows and pick answers the way
training did: written by recipes/qa.py into config.json under tasks.SETTINGS_KEY, read back by load_predictor."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from ...errors import BertkitError
from .. import SETTINGS_KEY

LEGACY_KEYS = {"max_length": "qa_max_length", "doc_stride": "qa_doc_stride",
               "max_question_length": "qa_max_question_length", "n_best": "qa_n_best",
               "max_answer_length": "qa_max_answer_length", "language": "qa_language",
               "null_threshold": "qa_null_threshold"}  # Settings field -> config.json attribute of earlier bertkits


@dataclass
class Settings:
    max_length: int = 384
    """Tokens per window: [CLS] question [SEP] context [SEP]."""
    doc_stride: int = 128
    """Context tokens shared by neighbouring windows of a long context."""
    max_question_length: int = 64
    """Questions longer than this many tokens are cut."""
    n_best: int = 20
    """Start and end positions considered per window."""
    max_answer_length: int = 30
    """Longest answer in tokens."""
    language: Literal["en", "zh"] = "en"
    """Answer scoring: en = SQuAD word EM/F1, zh = character EM/F1."""
    null_threshold: float | None = None
    """SQuAD v2: answer "" when the null score beats the best span by more than this; None = always answer (v1)."""

    def check(self) -> None:
        """Raise a one-line BertkitError naming the key when a saved value cannot work."""
        for key in ("max_length", "max_question_length", "n_best", "max_answer_length"):
            if getattr(self, key) < 1:
                raise BertkitError(f"{SETTINGS_KEY}.{key}={getattr(self, key)} must be at least 1")
        if not 0 <= self.doc_stride < self.max_length - 3:
            raise BertkitError(f"{SETTINGS_KEY}.doc_stride={self.doc_stride} must be between 0 and "
                               f"{SETTINGS_KEY}.max_length={self.max_length} minus 4")
        if self.null_threshold is not None and not math.isfinite(self.null_threshold):
            raise BertkitError(f"{SETTINGS_KEY}.null_threshold={self.null_threshold} must be a finite number (or "
                               f"null for a v1 model)")


def legacy_settings(config) -> dict:
    """The settings of a model saved by an earlier bertkit, from the qa_* attributes of its config.json: the window
    length capped at the model's positions, the stride a quarter of it where none was saved."""
    saved = {key: getattr(config, old) for key, old in LEGACY_KEYS.items() if getattr(config, old, None) is not None}
    saved["max_length"] = min(int(saved.get("max_length", 384)), config.max_position_embeddings)
    saved.setdefault("doc_stride", saved["max_length"] // 4)
    return saved


__all__ = ["Settings", "legacy_settings", "LEGACY_KEYS"]
