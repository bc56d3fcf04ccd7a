"""The completion record (`bertkit_run.json`), written last, atomically: the recipe, start and finish times, the
run's fingerprint, and every top-level file with its size and sha256; and the state of a directory read from it."""

from __future__ import annotations

import contextlib
import fnmatch
from pathlib import Path

from ..errors import BertkitError
from .checkpoints import check_weights
from .files import (EDITABLE, FINGERPRINT_FILE, LOADING_PATTERNS, LOCK_FILE, NOT_RECORDED, RECORD_FILE, RECORD_FORMAT,
                    RUN_CONFIG_FILE, _now, _read_json, file_digest, write_json_atomic)
from .lock import _RUNS, _key, lock_holder


def _loads_model(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in LOADING_PATTERNS)


def _top_files(run_dir: Path) -> list[str]:
    return sorted(p.name for p in run_dir.iterdir() if p.is_file() and p.name not in NOT_RECORDED
                  and not p.name.endswith(".tmp"))


def file_stamps(run_dir: Path) -> dict[str, int]:
    """Top-level files and their modification times (ns): taken when training begins, the files that were the
    user's (an evaluation saved beside the model, notes), which the completion record leaves out unless the run
    rewrote them, so that changing them later does not make the run look mixed."""
    return {name: (run_dir / name).stat().st_mtime_ns for name in _top_files(run_dir)}


def _written_by_run(run_dir: Path, names: list[str]) -> list[str]:
    before = _RUNS.get(_key(run_dir), {}).get("users_files", {})
    return [name for name in names if before.get(name) != (run_dir / name).stat().st_mtime_ns]


def is_bertkit_run(run_dir: Path) -> bool:
    return any((Path(run_dir) / name).exists() for name in (RECORD_FILE, RUN_CONFIG_FILE, FINGERPRINT_FILE))


def record_problem(run_dir: Path, must_be_recorded: list[str] = ()) -> str | None:
    """Why `run_dir`'s completion record does not match its files (None when it does)."""
    record = _read_json(run_dir / RECORD_FILE)
    if record is None or not isinstance(record.get("files"), dict):
        return f"{RECORD_FILE} is unreadable"
    files = record["files"]
    for name, expected in files.items():
        path = run_dir / name
        if name in EDITABLE:
            continue
        if not path.is_file():
            return f"{name} is missing"
        size = path.stat().st_size
        if size != expected.get("size"):
            return f"{name} is {size:,} bytes, the run wrote {expected.get('size'):,}"
        if file_digest(path)["sha256"] != expected.get("sha256"):
            return f"{name} is not the file the run wrote (its sha256 differs)"
    for name in [*_top_files(run_dir), *must_be_recorded]:
        if name not in files and name not in EDITABLE and (_loads_model(name) or name in must_be_recorded):
            return f"{name} is not part of the run"
    return None


def run_state(run_dir: str | Path) -> tuple[str, str]:
    """(state, detail): 'empty' (missing or nothing there), 'finished', 'mixed' (detail says which file),
    'unfinished' (a bertkit run without its completion record), 'foreign' (a model or checkpoints bertkit did not
    write) or 'other' (files, but no model)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return "empty", ""
    entries = [p for p in run_dir.iterdir() if p.name not in (LOCK_FILE, FINGERPRINT_FILE)]
    if not entries:  # at most a run that stopped before it trained (a typo in a data path): nothing to keep
        return "empty", ""
    if (run_dir / RECORD_FILE).exists():
        problem = record_problem(run_dir)
        return ("mixed", problem) if problem else ("finished", "")
    checkpoints = [p for p in entries if p.is_dir() and p.name.startswith("checkpoint-")]
    if is_bertkit_run(run_dir):
        return "unfinished", f"no {RECORD_FILE}"
    if checkpoints or any(_loads_model(p.name) for p in entries if p.is_file()):
        return "foreign", "a model or checkpoints that bertkit did not write"
    return "other", ""


def check_finished(model_dir: str | Path, use: str, must_be_recorded: list[str] = ()) -> None:
    """Refuse an unfinished or mixed bertkit run directory for `use` (predict, push, model=...). A directory without
    bertkit's files (a stock or downloaded model) passes."""
    model_dir = Path(model_dir)
    if not is_bertkit_run(model_dir):
        return
    if not (model_dir / RECORD_FILE).exists():
        holder = lock_holder(model_dir)
        why = (f"a run (pid {holder}) is still writing it" if holder else
               f"{RUN_CONFIG_FILE if (model_dir / RUN_CONFIG_FILE).exists() else FINGERPRINT_FILE} but no "
               f"{RECORD_FILE}: the run was interrupted")
        raise BertkitError(f"{model_dir} is an unfinished bertkit run ({why}) — {use} needs a finished one: let it "
                           f"finish, continue it with resume=true output_dir={model_dir}, or rerun it")
    problem = record_problem(model_dir, must_be_recorded)
    if problem:
        check_weights(model_dir)  # a weights file cut short since: say that, not just "differs"
        raise BertkitError(f"{model_dir} mixes files of different runs ({problem}; see {RECORD_FILE}) — {use} "
                           f"refuses it: rerun into a fresh output_dir (or with overwrite=true)")


def remove_record(run_dir: str | Path) -> None:
    """Mark the directory unfinished before its files change: a kill from here on leaves it visibly so."""
    with contextlib.suppress(FileNotFoundError):
        (Path(run_dir) / RECORD_FILE).unlink()


def write_record(run_dir: str | Path, recipe: str, started: str | None = None) -> Path:
    """The completion record: written last, atomically, listing every top-level file the run wrote (files of the
    user's from before training began stay out) with size and sha256."""
    run_dir = Path(run_dir)
    fingerprint = _read_json(run_dir / FINGERPRINT_FILE) or {}
    record = {"format": RECORD_FORMAT, "status": "finished", "recipe": recipe,
              "started": started or _RUNS.get(_key(run_dir), {}).get("started") or fingerprint.get("started"),
              "finished": _now(), "fingerprint": fingerprint.get("sha256"),
              "files": {name: file_digest(run_dir / name) for name in _written_by_run(run_dir, _top_files(run_dir))}}
    write_json_atomic(run_dir / RECORD_FILE, record)
    return run_dir / RECORD_FILE


__all__ = ["file_stamps", "is_bertkit_run", "record_problem", "run_state", "check_finished", "remove_record",
           "write_record"]
