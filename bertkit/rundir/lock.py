"""The lock (`.bertkit.lock`: the pid, and fcntl.flock held for the whole run): a second run into the same directory
is refused while the first lives. The kernel drops a flock when its process dies, so a stale file never blocks."""

from __future__ import annotations

import atexit
import contextlib
import os
from pathlib import Path

from ..errors import BertkitError
from .files import LOCK_FILE, _now

try:
    import fcntl
except ImportError:  # Windows: no flock; the lock file then only names the pid (no refusal of a second run)
    fcntl = None

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


__all__ = ["acquire", "release", "lock_holder"]
