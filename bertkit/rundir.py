"""A run directory you can trust: what a bertkit run leaves in its output_dir, and the checks before anything reads
it or writes into it.

- The completion record (`bertkit_run.json`) is written last, atomically (temp file + os.replace): the recipe, start
  and finish times, the run's fingerprint, and every top-level file with its size and sha256. No record beside a
  `bertkit_config.yaml` (or a fingerprint) = an unfinished run; a file that differs from the record, or a file that
  changes how the directory loads but is not in it = a mixed directory. Both are refused by every reader (predict,
  evaluate, push, model=<dir>). sha256, not size + mtime: a second run of the same architecture writes weights of
  the same size, and copies (cp, rsync, a Hub download) change mtimes; hashing reads the files once, as loading
  them does anyway (about 1 GB/s).
- The fingerprint (`bertkit_fingerprint.json`, written at the start) is the resolved config without the keys that
  only say how far or how often a continued run goes, plus the content hash of every data file the config names:
  resume=true continues only a checkpoint of the same run.
- The lock (`.bertkit.lock`: the pid, and fcntl.flock held for the whole run): a second run into the same directory
  is refused while the first lives. The kernel drops a flock when its process dies, so a stale file never blocks.
  Only rank 0 of a torchrun launch takes it (it is the one that writes).
"""

from __future__ import annotations

import atexit
import contextlib
import datetime
import errno
import fnmatch
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from .errors import BertkitError

try:
    import fcntl
except ImportError:  # Windows: no flock; the lock file then only names the pid (no refusal of a second run)
    fcntl = None

RECORD_FILE = "bertkit_run.json"
FINGERPRINT_FILE = "bertkit_fingerprint.json"
LOCK_FILE = ".bertkit.lock"
RUN_CONFIG_FILE = "bertkit_config.yaml"
LOG_FILE = "train.log"  # bertkit/console.py
RECORD_FORMAT = 1

EDITABLE = {"README.md"}  # recorded, but a user may improve the model card before pushing
# The log is not part of what the run made: lines go on after the record (the summary, a push), and resume=true
# appends to it. It never changes how the directory loads, so leaving it out checks nothing less.
NOT_RECORDED = {RECORD_FILE, LOCK_FILE, LOG_FILE}
# Files that change what a directory loads as: one of these that the record does not list makes the directory mixed.
LOADING_PATTERNS = ("*.safetensors", "*.safetensors.index.json", "*.bin", "config.json", "tokenizer.json",
                    "tokenizer_config.json", "vocab.txt", "vocab.json", "merges.txt", "special_tokens_map.json",
                    "added_tokens.json", "adapter_config.json", "*.model")
# Config keys that say how far, how often or where a continued run goes: resume may change them.
CONTINUATION_KEYS = {"resume", "overwrite", "push", "output_dir", "train.num_train_epochs", "train.max_steps",
                     "train.save_steps", "train.save_strategy", "train.save_total_limit", "train.logging_steps",
                     "train.logging_strategy", "train.dataloader_num_workers"}
# Names a bertkit run (or Trainer) writes at the top of its output_dir: what overwrite=true removes.
RUN_OUTPUTS = ("*.safetensors", "*.safetensors.index.json", "config.json", "generation_config.json", "tokenizer.json",
               "tokenizer_config.json", "vocab.txt", "special_tokens_map.json", "added_tokens.json",
               "training_args.bin", "pytorch_model.bin", "adapter_config.json", "metrics.json", "*.png", "README.md",
               RUN_CONFIG_FILE, "classification_report.txt", "confusion_matrix.json", "*_results.json",
               "trainer_state.json", FINGERPRINT_FILE, RECORD_FILE, LOG_FILE, "*.tmp")


# ----------------------------------------------------------------------------------------------------- hashing


def file_digest(path: Path) -> dict:
    with open(path, "rb") as handle:
        digest = hashlib.file_digest(handle, "sha256").hexdigest()
    return {"size": path.stat().st_size, "sha256": digest}


def write_json_atomic(path: Path, data) -> None:
    """Write JSON so that a reader sees the old file or the new one, never half of one."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temp, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


# ----------------------------------------------------------------------------------------------------- state


def _loads_model(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in LOADING_PATTERNS)


def _top_files(run_dir: Path) -> list[str]:
    return sorted(p.name for p in run_dir.iterdir() if p.is_file() and p.name not in NOT_RECORDED
                  and not p.name.endswith(".tmp"))


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
        from .checkpoints import check_weights

        check_weights(model_dir)  # a weights file cut short since: say that, not just "differs"
        raise BertkitError(f"{model_dir} mixes files of different runs ({problem}; see {RECORD_FILE}) — {use} "
                           f"refuses it: rerun into a fresh output_dir (or with overwrite=true)")


# ----------------------------------------------------------------------------------------------------- record


def remove_record(run_dir: str | Path) -> None:
    """Mark the directory unfinished before its files change: a kill from here on leaves it visibly so."""
    with contextlib.suppress(FileNotFoundError):
        (Path(run_dir) / RECORD_FILE).unlink()


def write_record(run_dir: str | Path, recipe: str, started: str | None = None) -> Path:
    """The completion record: written last, atomically, listing every top-level file with size and sha256."""
    run_dir = Path(run_dir)
    fingerprint = _read_json(run_dir / FINGERPRINT_FILE) or {}
    record = {"format": RECORD_FORMAT, "status": "finished", "recipe": recipe,
              "started": started or _RUNS.get(_key(run_dir), {}).get("started") or fingerprint.get("started"),
              "finished": _now(), "fingerprint": fingerprint.get("sha256"),
              "files": {name: file_digest(run_dir / name) for name in _top_files(run_dir)}}
    write_json_atomic(run_dir / RECORD_FILE, record)
    return run_dir / RECORD_FILE


# ----------------------------------------------------------------------------------------------------- lock

_RUNS: dict[str, dict] = {}  # runs this process holds: resolved dir -> {"fd", "started", "created", "plan"}


def _key(run_dir: Path) -> str:
    return str(Path(run_dir).resolve())


def lock_holder(run_dir: str | Path) -> int | None:
    """The pid of another live process that holds the directory's lock, or None."""
    path = Path(run_dir) / LOCK_FILE
    if fcntl is None or not path.exists() or _key(Path(run_dir)) in _RUNS:
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return _lock_pid(path) or -1
    finally:
        os.close(fd)
    return None


def _lock_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


@atexit.register
def _release_all() -> None:
    """A run that raised (bad data, disk full) lets go of its directory when the process ends normally; a killed
    one leaves its lock file, which blocks nothing (the kernel dropped the flock)."""
    for key in list(_RUNS):
        release(key)


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def acquire(run_dir: str | Path) -> None:
    """Hold the directory for this process until `release` (or the process ends)."""
    run_dir = Path(run_dir)
    release(run_dir)  # an earlier run in this process that raised: the lock is ours
    created = [d for d in (run_dir, *run_dir.parents) if not d.exists()]  # to remove again if the run never began
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / LOCK_FILE
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            pid = _lock_pid(path)
            raise BertkitError(f"output_dir {run_dir} is in use by another bertkit run (pid {pid or 'unknown'}) — "
                               f"wait for it to finish, or choose another output_dir=...") from None
        if _same_file(fd, path):
            break
        os.close(fd)  # the holder removed the file as we opened it: lock the file that is there now
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    _RUNS[_key(run_dir)] = {"fd": fd, "started": _now(), "created": created}


def release(run_dir: str | Path) -> None:
    """Let go of the directory: the lock file goes (a killed run's stays, and blocks nothing), and a directory this
    run created and left empty (it stopped before training) goes too."""
    run_dir = Path(run_dir)
    held = _RUNS.pop(_key(run_dir), None)
    if held is None:
        return
    if _same_file(held["fd"], run_dir / LOCK_FILE):
        with contextlib.suppress(OSError):
            (run_dir / LOCK_FILE).unlink()  # before unlocking: a waiting run then locks a fresh file
    with contextlib.suppress(OSError, AttributeError):
        fcntl.flock(held["fd"], fcntl.LOCK_UN)
    os.close(held["fd"])
    if not held.get("began"):  # stopped before training: leave no trace
        with contextlib.suppress(OSError):
            for directory in held["created"]:
                directory.rmdir()


# ----------------------------------------------------------------------------------------------------- fingerprint


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


# ----------------------------------------------------------------------------------------------------- start


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
        if path.is_dir() and path.name.startswith("checkpoint-"):
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
    saved = _read_json(run_dir / FINGERPRINT_FILE)
    if not plan["resuming"] or saved is None or saved.get("sha256") != plan["fingerprint"]["sha256"]:
        write_json_atomic(run_dir / FINGERPRINT_FILE,
                          {"recipe": plan["recipe"], "started": held["started"], **plan["fingerprint"]})


# ----------------------------------------------------------------------------------------------------- checkpoints

WEIGHT_FILES = ("model.safetensors", "adapter_model.safetensors", "pytorch_model.bin", "model.safetensors.index.json")


def checkpoint_problem(checkpoint: Path, needs_optimizer: bool = True) -> str | None:
    """What a checkpoint lacks to be resumed from (None if complete): a kill while saving leaves it partial."""
    if _read_json(checkpoint / "trainer_state.json") is None:
        return "trainer_state.json is missing or unreadable"
    weights = [name for name in WEIGHT_FILES if (checkpoint / name).is_file()]
    if not weights:
        return "it has no model weights"
    from .checkpoints import safetensors_problem

    for name in weights:
        if name.endswith(".safetensors"):
            problem = safetensors_problem(checkpoint / name)
            if problem:
                return f"{name} {problem}"
    if needs_optimizer and not (checkpoint / "optimizer.pt").is_file():
        return "optimizer.pt is missing"
    return None


def checkpoints_newest_first(run_dir: Path) -> list[Path]:
    found = [p for p in Path(run_dir).glob("checkpoint-*") if p.is_dir() and p.name.split("-")[-1].isdigit()]
    return sorted(found, key=lambda p: int(p.name.split("-")[-1]), reverse=True)


def last_complete_checkpoint(run_dir: Path) -> Path | None:
    for checkpoint in checkpoints_newest_first(run_dir):
        if checkpoint_problem(checkpoint) is None:
            return checkpoint
    return None


# ----------------------------------------------------------------------------------------------------- disk full

_DISK_FULL_TEXT = ("no space left", "os error 28", "storagefull", "basic_ios::clear", "iostream error",
                   "file write failed", "disk quota")


def is_disk_full(error: BaseException) -> bool:
    """ENOSPC, or what torch.save (`basic_ios::clear: iostream error`, `file write failed`) and safetensors
    (`IoError(Os { code: 28 ... })`) say instead when the disk fills under them."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if isinstance(error, (RuntimeError, OSError)) or type(error).__name__ == "SafetensorError":
            if any(text in str(error).lower() for text in _DISK_FULL_TEXT):
                return True
        error = error.__cause__ or error.__context__
    return False


@contextlib.contextmanager
def disk_full_guard(run_dir: str | Path, saving: str) -> Iterator[None]:
    """A full disk while `saving` becomes one line: where, and what was kept."""
    try:
        yield
    except Exception as error:
        if not is_disk_full(error):
            raise
        run_dir = Path(run_dir)
        kept = last_complete_checkpoint(run_dir)
        free = ""
        with contextlib.suppress(OSError):
            free = f", {shutil.disk_usage(run_dir).free / 2**20:,.0f} MB free"
        kept_text = (f"kept {kept} (the last complete checkpoint)" if kept else "no complete checkpoint was kept")
        raise BertkitError(f"disk full while saving {saving} to {run_dir}{free}: the run is not finished; "
                           f"{kept_text} — free space (or choose an output_dir on another disk), then rerun with "
                           f"{'resume=true' if kept else 'overwrite=true'}") from None


__all__ = [
    "RECORD_FILE", "FINGERPRINT_FILE", "LOCK_FILE", "RUN_CONFIG_FILE", "CONTINUATION_KEYS", "run_state",
    "check_finished", "record_problem", "write_record", "remove_record", "acquire", "release", "lock_holder",
    "fingerprint", "fingerprint_difference", "start", "begin", "clear_old_run", "checkpoint_problem",
    "last_complete_checkpoint", "checkpoints_newest_first", "is_disk_full", "disk_full_guard", "file_digest",
    "write_json_atomic", "is_bertkit_run",
]
