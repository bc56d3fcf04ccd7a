"""The fingerprint (`bertkit_fingerprint.json`, written at the start): the resolved config without the keys that only
say how far or how often a continued run goes, plus the content hash of every data file the config names, so that
resume=true continues only a checkpoint of the same run."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from ..errors import BertkitError
from .files import CONTINUATION_KEYS, FINGERPRINT_FILE, RUN_CONFIG_FILE, _read_json, file_digest


def _flatten(data: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def fingerprint(config: dict) -> dict:
    """What makes a run this run: its config without CONTINUATION_KEYS, with each data file the config names
    replaced by the sha256 of its content (moving a file is fine; changing it is not)."""
    flat = {k: v for k, v in _flatten(config).items() if k not in CONTINUATION_KEYS}
    data = {}
    for key, value in flat.items():
        if isinstance(value, str) and key.startswith("data.") and Path(value).expanduser().is_file():
            data[key] = file_digest(Path(value).expanduser())
            flat[key] = f"file sha256:{data[key]['sha256']}"
    text = json.dumps(flat, sort_keys=True, default=str)
    return {"sha256": hashlib.sha256(text.encode()).hexdigest(), "config": flat, "data": data}


def _show(value) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else value
    return text if len(text) <= 60 else text[:57] + "..."


def fingerprint_difference(saved: dict, current: dict) -> str | None:
    """The first key whose value differs, in words (None if the fingerprints match)."""
    if saved.get("sha256") == current["sha256"]:
        return None
    old, new = saved.get("config", {}), current["config"]
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            if key in current["data"] or key in saved.get("data", {}):
                return f"the content of {key} changed"
            return f"{key} was {_show(old.get(key, '(unset)'))}, now {_show(new.get(key, '(unset)'))}"
    return "the config differs"


def check_resume_fingerprint(checkpoint_run_dir: Path, current: dict, say: Callable[[str], None]) -> None:
    saved = _read_json(checkpoint_run_dir / FINGERPRINT_FILE)
    if saved is None:
        say(f"warning: {checkpoint_run_dir} has no {FINGERPRINT_FILE} (written by an older bertkit): resume cannot "
            "check that its checkpoints come from this config and data")
        return
    difference = fingerprint_difference(saved, current)
    if difference:
        raise BertkitError(f"resume: the checkpoints in {checkpoint_run_dir} come from another run ({difference}) — "
                           f"resume with the config and data of that run (see its {RUN_CONFIG_FILE} / "
                           f"{FINGERPRINT_FILE}), or start fresh in another output_dir=... (or overwrite=true)")


__all__ = ["fingerprint", "fingerprint_difference", "check_resume_fingerprint"]
