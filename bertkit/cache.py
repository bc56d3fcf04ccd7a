"""bertkit's cache folder: what is made once and reused (ONNX exports of served runs, the installed
TrainingArguments' fields), never a user's file."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """$BERTKIT_CACHE, else $XDG_CACHE_HOME/bertkit, else ~/.cache/bertkit."""
    if os.environ.get("BERTKIT_CACHE"):
        return Path(os.environ["BERTKIT_CACHE"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bertkit"


__all__ = ["cache_root"]
