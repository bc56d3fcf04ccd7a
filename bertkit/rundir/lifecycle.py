"""A run's hold on its directory from start to training: take it, refuse to replace or resume the wrong run, then
clear what overwrite=true replaces and write the fingerprint once training begins."""

from __future__ import annotations

import fnmatch
import shutil
from collections.abc import Callable
from pathlib import Path

from ..errors import BertkitError
from .files import (FINGERPRINT_FILE, LOADING_PATTERNS, LOCK_FILE, LOG_FILE, RECORD_FILE, RUN_FOLDERS, RUN_OUTPUTS,
                    USER_NAMED, _read_json, write_json_atomic)
from .fingerprint import check_resume_fingerprint, fingerprint
from .lock import _RUNS, _key, acquire, release
from .outputs import check_output_dir_is_a_folder, check_run_inputs
from .record import file_stamps, remove_record, run_state


def _matches_output(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in RUN_OUTPUTS)


def _user_named(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in USER_NAMED)


def old_run_files(run_dir: Path) -> tuple[list[Path], list[Path]]:
    """(files, folders) that earlier bertkit runs wrote in `run_dir`: what overwrite=true removes.

    - folders: checkpoint-*, and the trial-* / seed-* folders a killed search or seed band leaves;
    - with a completion record (a finished or mixed run): the files it lists, the files no record lists (train.log,
      the fingerprint, temporary files), and model files it does not list (another run's, which made it mixed);
    - without one (an unfinished or foreign run): files with the names a run (or Trainer) writes (RUN_OUTPUTS:
      weights, config.json, tokenizer files, trainer_state.json, metrics.json, train.log, ...), but a name a person
      may well have written (USER_NAMED: README.md, *.png) only when it is newer than the run's fingerprint, which
      the run wrote when its training began: a README.md or picture that was there before is the user's.
    Everything else (notes, data, an evaluation saved beside the model, results.png) is the user's, and stays."""
    record = _read_json(run_dir / RECORD_FILE)
    listed = set(record["files"]) if record and isinstance(record.get("files"), dict) else set()
    began = None
    if record is None and (run_dir / FINGERPRINT_FILE).is_file():
        began = (run_dir / FINGERPRINT_FILE).stat().st_mtime_ns
    files, folders = [], []
    for path in sorted(run_dir.iterdir()) if run_dir.is_dir() else []:
        if path.name in (LOCK_FILE, RECORD_FILE):
            continue
        if path.is_dir() and (path.name.startswith("checkpoint-") or
                              any(fnmatch.fnmatch(path.name, pattern) for pattern in RUN_FOLDERS)):
            folders.append(path)
        elif path.is_file() and (_recorded_run_wrote(path, listed) if record is not None else
                                 _unrecorded_run_wrote(path, began)):
            files.append(path)
    return files, folders


def _recorded_run_wrote(path: Path, listed: set[str]) -> bool:
    return (path.name in listed or path.name in (LOG_FILE, FINGERPRINT_FILE) or path.name.endswith(".tmp")
            or any(fnmatch.fnmatch(path.name, pattern) for pattern in LOADING_PATTERNS))


def _unrecorded_run_wrote(path: Path, began: int | None) -> bool:
    return _matches_output(path.name) and (not _user_named(path.name) or
                                           (began is not None and path.stat().st_mtime_ns >= began))


def clear_old_run(run_dir: Path) -> tuple[int, int]:
    """Remove what earlier runs wrote (`old_run_files`); files of the user's stay. Returns (files, checkpoints)
    removed."""
    files, folders = old_run_files(run_dir)
    for folder in folders:
        shutil.rmtree(folder)
    for path in files:
        path.unlink()
    remove_record(run_dir)  # last: until the old files are gone, the directory must not look like a fresh run
    return len(files), len(folders)


def users_files_in_the_way(run_dir: Path, replacing: bool) -> list[str]:
    """Files in `run_dir` that no bertkit run wrote but that have a name this run writes (README.md,
    training_curve.png, metrics.json, ...): the run would replace them. With `replacing` (overwrite=true over a
    run) what the earlier run wrote is not in the way."""
    if not run_dir.is_dir():
        return []
    removed = set(old_run_files(run_dir)[0]) if replacing else set()
    return [p.name for p in sorted(run_dir.iterdir()) if p.is_file() and p not in removed
            and p.name not in (LOCK_FILE, RECORD_FILE, FINGERPRINT_FILE) and _matches_output(p.name)
            and not any(fnmatch.fnmatch(p.name, pattern) for pattern in NEVER_WRITTEN_OVER)]


# RUN_OUTPUTS patterns whose files a run never writes over: Trainer.save_metrics (*_results.json), which bertkit does
# not call, and temporary files, whose names hold the writer's pid.
NEVER_WRITTEN_OVER = ("*_results.json", "*.tmp")


def _in_the_way(run_dir: Path, names: list[str], overwrite: bool) -> BertkitError:
    shown = " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
    them = "them" if len(names) > 1 else "it"
    kept = " (overwrite=true removes only what an earlier bertkit run wrote)" if overwrite else ""
    return BertkitError(f"output_dir {run_dir} holds {shown}, which no bertkit run wrote and this run would "
                        f"replace{kept} — move {them} out of {run_dir}, or choose another output_dir=...")


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
    check_run_inputs(output_dir, config)  # before any hint of overwrite=true: it would destroy the input
    check_output_dir_is_a_folder(run_dir)
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
            in_the_way = users_files_in_the_way(run_dir, replacing=replace is not None)
            if in_the_way:
                raise _in_the_way(run_dir, in_the_way, overwrite)
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


__all__ = ["start", "begin", "clear_old_run", "old_run_files", "users_files_in_the_way"]
