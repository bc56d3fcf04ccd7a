"""A run's hold on its directory from start to training: take it, refuse to replace or resume the wrong run, then
clear what overwrite=true replaces and write the fingerprint once training begins."""

from __future__ import annotations

import fnmatch
import shutil
from collections.abc import Callable
from pathlib import Path

from ..errors import BertkitError
from .files import FINGERPRINT_FILE, LOCK_FILE, RECORD_FILE, RUN_FOLDERS, RUN_OUTPUTS, _read_json, write_json_atomic
from .fingerprint import check_resume_fingerprint, fingerprint
from .lock import _RUNS, _key, acquire, release
from .record import file_stamps, remove_record, run_state


def _matches_output(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in RUN_OUTPUTS)


def clear_old_run(run_dir: Path) -> tuple[int, int]:
    """Remove an old run's files (what its record lists, and what runs write) and its checkpoints; files of the
    user's that no run writes stay. Returns (files, checkpoints) removed."""
    record = _read_json(run_dir / RECORD_FILE) or {}
    listed = set(record.get("files", {}) if isinstance(record.get("files"), dict) else ())
    files = checkpoints = 0
    for path in sorted(run_dir.iterdir()):
        if path.name == LOCK_FILE:
            continue
        if path.is_dir() and (path.name.startswith("checkpoint-") or
                              any(fnmatch.fnmatch(path.name, pattern) for pattern in RUN_FOLDERS)):
            shutil.rmtree(path)
            checkpoints += 1
        elif path.is_file() and path.name != RECORD_FILE and (path.name in listed or _matches_output(path.name)):
            path.unlink()
            files += 1
    remove_record(run_dir)  # last: until the old files are gone, the directory must not look like a fresh run
    return files, checkpoints


def _refusal(run_dir: Path, state: str, detail: str, recipe: str) -> BertkitError:
    what = {"finished": "a finished run", "unfinished": f"an unfinished run ({detail})",
            "mixed": f"a mixed run directory ({detail})", "foreign": detail}[state]
    resume = ", or resume=true to continue it" if state in ("finished", "unfinished") else ""
    return BertkitError(f"output_dir {run_dir} already holds {what} — choose another output_dir=..., or set "
                        f"overwrite=true to replace it{resume}")


def start(output_dir: str, recipe: str, config: dict, overwrite: bool, resume, say: Callable[[str], None]) -> None:
    """Before a run loads anything: take the directory; refuse to replace a run there without overwrite=true, and
    to resume from another run's checkpoints. Nothing is written yet: `begin` does that once training starts, so a
    run stopped by a typo in a data path leaves the directory as it was."""
    run_dir = Path(output_dir).expanduser()
    acquire(run_dir)
    try:
        current = fingerprint(config)
        resuming = resume not in (False, None, "", "false")
        replace = None
        if resuming:
            source = run_dir if resume is True or resume == "true" else Path(str(resume)).expanduser().parent
            check_resume_fingerprint(source, current, say)
        else:
            state, detail = run_state(run_dir)
            if state in ("finished", "unfinished", "mixed", "foreign"):
                if not overwrite:
                    raise _refusal(run_dir, state, detail, recipe)
                replace = state
    except BaseException:
        release(run_dir)
        raise
    _RUNS[_key(run_dir)]["plan"] = {"recipe": recipe, "fingerprint": current, "resuming": resuming,
                                    "replace": replace}


def begin(output_dir: str, say: Callable[[str], None]) -> None:
    """Training starts: clear the run that overwrite=true replaces (saying so), mark the directory unfinished
    (no completion record) and write this run's fingerprint beside its checkpoints."""
    run_dir = Path(output_dir).expanduser()
    held = _RUNS.get(_key(run_dir))
    if held is None or held.get("plan") is None:
        return
    plan = held.pop("plan")
    held["began"] = True
    if plan["replace"]:
        files, checkpoints = clear_old_run(run_dir)
        say(f"overwrite=true: replaced the {plan['replace']} run in {run_dir} ({files} files and {checkpoints} "
            f"checkpoints removed)")
    remove_record(run_dir)
    # what is left now is the user's (but a resumed run's own fingerprint): the completion record will not claim it
    held["users_files"] = {name: stamp for name, stamp in file_stamps(run_dir).items() if name != FINGERPRINT_FILE}
    saved = _read_json(run_dir / FINGERPRINT_FILE)
    if not plan["resuming"] or saved is None or saved.get("sha256") != plan["fingerprint"]["sha256"]:
        write_json_atomic(run_dir / FINGERPRINT_FILE,
                          {"recipe": plan["recipe"], "started": held["started"], **plan["fingerprint"]})


__all__ = ["start", "begin", "clear_old_run"]
