"""What an mlm run saves beside its model so that `bertkit evaluate` masks held-out text the way the run did:
written by recipes/mlm.py into config.json under tasks.SETTINGS_KEY, read back by load_predictor."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from bertkit.errors import BertkitError
from bertkit.rundir import METRICS_FILE, read_run_config
from bertkit.tasks import SETTINGS_KEY


@dataclass
class Settings:
    max_length: int = 128
    """Tokens per example, [CLS] and [SEP] included (the run's data.max_length)."""
    mode: Literal["line", "group"] = "group"
    """line: an example per paragraph (long ones windowed); group: all text concatenated, cut into blocks."""
    whole_word: Literal["auto", "none", "wordpiece", "chinese"] = "auto"
    """Whole-word masking the run used; auto (no run to say) = chinese for a mostly-CJK text, else wordpiece."""
    mlm_probability: float = 0.15
    """Share of tokens selected for prediction (the run's masking.probability)."""
    mask_replace_prob: float = 0.8
    """Of the selected tokens: share replaced by [MASK]."""
    random_replace_prob: float = 0.1
    """Of the selected tokens: share replaced by a random token (the rest stay unchanged)."""
    nsp: bool = False
    """The model also predicts the next sentence: examples are sentence pairs, NSP accuracy is reported."""
    seed: int = 1234
    """Seed of the fixed held-out masks (the run's eval_seed): the same seed masks the same positions."""

    def check(self) -> None:
        """Raise a one-line BertkitError naming the key when a saved value cannot work."""
        shortest = 5 if self.nsp else 3  # [CLS] A [SEP] B [SEP] / [CLS] token [SEP]
        if self.max_length < shortest:
            raise BertkitError(f"{SETTINGS_KEY}.max_length={self.max_length} must be at least {shortest}")
        for key in ("mlm_probability", "mask_replace_prob", "random_replace_prob"):
            if not 0.0 <= getattr(self, key) <= 1.0:
                raise BertkitError(f"{SETTINGS_KEY}.{key}={getattr(self, key)} must be in [0, 1]")
        if self.mask_replace_prob + self.random_replace_prob > 1.0 + 1e-9:
            raise BertkitError(f"{SETTINGS_KEY}.mask_replace_prob + random_replace_prob must be at most 1, got "
                               f"{self.mask_replace_prob} + {self.random_replace_prob}")


def legacy_settings(model_dir: str) -> dict:
    """The settings of a model saved by an earlier bertkit, from its run's bertkit_config.yaml (data, masking, nsp,
    eval_seed) and metrics.json (the whole-word mode that auto resolved to); {} for a model with no run."""
    run = read_run_config(model_dir)
    data, masking = run.get("data") or {}, run.get("masking") or {}
    saved = {"max_length": data.get("max_length"), "mode": data.get("mode"),
             "whole_word": _resolved_whole_word(model_dir, masking.get("whole_word")),
             "mlm_probability": masking.get("probability"), "mask_replace_prob": masking.get("mask_replace_prob"),
             "random_replace_prob": masking.get("random_replace_prob"), "nsp": run.get("nsp"),
             "seed": run.get("eval_seed")}
    return {key: value for key, value in saved.items() if value is not None}


def _resolved_whole_word(model_dir: str, configured: str | None) -> str | None:
    """masking.whole_word, or for auto the mode the run resolved it to (metrics.json's whole_word)."""
    if configured != "auto":
        return configured
    path = Path(model_dir) / METRICS_FILE
    return json.loads(path.read_text(encoding="utf-8")).get("whole_word", "auto") if path.exists() else "auto"


__all__ = ["Settings", "legacy_settings"]
