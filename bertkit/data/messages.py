"""Pieces of the one-line error messages the data readers raise."""

from __future__ import annotations

from typing import Any, Iterable


def clip(text: Any, width: int = 60) -> str:
    """Any text made safe for a one-line message: whitespace collapsed, cut at `width` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 3] + "..."


def listing(names: Iterable[Any], most: int = 20) -> str:
    """Names joined for a message, cut after `most` with the total count."""
    names = [str(name) for name in names]
    shown = ", ".join(names[:most])
    return shown if len(names) <= most else f"{shown}, ... ({len(names)} in all)"


__all__ = ["clip", "listing"]
