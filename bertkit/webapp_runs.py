"""The runs `bertkit app` starts: each one the `bertkit run ...` command a person could type, launched as a process
of its own, detached from the page.

A run's process gets its own session (process group) and writes its console to RUN_DIR/console.log, a file, not a
pipe back to the app: nothing the app or a browser does (closing, reloading, the app itself stopping) can slow or stop
it (LlamaFactory's web UI read its children through pipes, and training froze when the page went away). Everything
the page shows is read back from the run directory (train.log's logged lines, bertkit's run record, the lock that says
which process holds the run), so a reload, a second browser or a restarted app sees the same. Stop signals that one
run's process group, found from the pid in the run's lock (never a pattern match over process names); the run is then
unfinished, and `resume=true` continues it from its last checkpoint.
"""

from __future__ import annotations

import datetime
import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

from . import rundir
from .errors import BertkitError

COMMAND_FILE = rundir.APP_COMMAND_FILE  # the command the app ran in this directory: what Resume runs again
CONSOLE_FILE = rundir.CONSOLE_FILE  # what the run's process printed (train.log has it too once the run has begun)
LOGGED = "logged "  # the prefix of the Trainer's logged dicts in train.log (training_display.TrainingDisplay.on_log)


def bertkit_command() -> list[str]:
    """The installed `bertkit` beside this Python (what a person types), or `python -m bertkit`."""
    script = Path(sys.executable).with_name("bertkit")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "bertkit"]


def shown(args: list[str]) -> str:
    """The command as a person would type it: `bertkit run classify model=... ...`, quoted for a POSIX shell."""
    return shlex.join(["bertkit", *args])


def launch(args: list[str], run_dir: Path, env: dict | None = None) -> subprocess.Popen:
    """Start `bertkit ARGS` detached: its own session, stdin closed, stdout and stderr appended to
    RUN_DIR/console.log (appended: a refused second launch must not wipe the lines of the run it was refused for)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / CONSOLE_FILE, "a", encoding="utf-8") as console:
        console.write(f"===== {_now()} {shown(args)}\n")
    console = open(run_dir / CONSOLE_FILE, "ab")  # noqa: SIM115 - the child owns it; closed here after the fork
    try:
        return subprocess.Popen([*bertkit_command(), *args], stdin=subprocess.DEVNULL, stdout=console,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "COLUMNS": "120", "BERTKIT_APP_CHILD": "1", **(env or {})})
    finally:
        console.close()


def remember(args: list[str], run_dir: Path) -> None:
    """Keep the command of a run that began in RUN_DIR/bertkit_app.json, for Resume (kept only once it began: a launch
    the CLI refused must not replace the command of the run already there)."""
    rundir.write_json_atomic(run_dir / COMMAND_FILE, {"args": args, "started": _now()})


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def saved_command(run_dir: Path) -> list[str] | None:
    """The arguments the app ran in `run_dir`, or None (a run started from a shell)."""
    try:
        args = json.loads((run_dir / COMMAND_FILE).read_text(encoding="utf-8")).get("args")
    except (OSError, ValueError, AttributeError):
        return None
    return [str(arg) for arg in args] if isinstance(args, list) else None


def resume_args(args: list[str]) -> list[str]:
    """The saved command with resume=true (and no overwrite=true: it would remove the checkpoint to resume)."""
    kept = [arg for arg in args if not arg.startswith(("resume=", "overwrite="))]
    return [*kept, "resume=true"]


def stop(run_dir: Path, starting: subprocess.Popen | None = None) -> int:
    """SIGTERM to the process group of the run that holds `run_dir` (the app's runs lead their own group; a run
    started from a shell gets the signal itself), or to `starting`, a process of the app's that has not taken the
    run's lock yet. Returns the pid; refused when neither is there."""
    pid = rundir.lock_holder(run_dir)
    if (not pid or pid < 0) and starting is not None and starting.poll() is None:
        pid = starting.pid
    if not pid or pid < 0:
        raise BertkitError(f"{run_dir} is not running — nothing to stop")
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGTERM)
        else:
            os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass  # it ended between the check and the signal: stopped all the same
    return pid


def history(run_dir: Path) -> list[dict]:
    """Every dict the Trainer logged, from train.log, as it grows (log_history.json exists only once the run ends):
    one entry per step, a resumed run's repeated steps replaced by the later ones."""
    steps: dict[int, dict] = {}
    try:
        with open(run_dir / rundir.LOG_FILE, encoding="utf-8", errors="replace") as log:
            for line in log:
                if not line.startswith(LOGGED):
                    continue
                try:
                    entry = json.loads(line[len(LOGGED):])
                except ValueError:
                    continue  # a line being written as we read
                if isinstance(entry, dict) and isinstance(entry.get("step"), int):
                    steps.setdefault(entry["step"], {}).update(entry)
    except OSError:
        return []
    return [steps[step] for step in sorted(steps)]


def console_tail(run_dir: Path, lines: int = 60) -> str:
    """The last lines the run printed (console.log), or of train.log for a run started from a shell."""
    for name in (CONSOLE_FILE, rundir.LOG_FILE):
        path = run_dir / name
        if path.is_file():
            with open(path, "rb") as handle:
                handle.seek(max(0, path.stat().st_size - 200 * lines))
                text = handle.read().decode("utf-8", "replace")
            return "\n".join(text.splitlines()[-lines:])
    return ""


__all__ = ["COMMAND_FILE", "CONSOLE_FILE", "bertkit_command", "shown", "launch", "remember", "saved_command",
           "resume_args", "stop", "history", "console_tail"]
