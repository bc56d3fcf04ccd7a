"""The run directory: what a bertkit run leaves in its output_dir, and the checks before anything reads it or writes
into it. The contract, file by file:

- `.bertkit.lock` (the pid, and fcntl.flock held for the whole run): a second run into the same directory is refused
  while the first lives. The kernel drops a flock when its process dies, so a stale file never blocks. Only rank 0
  of a torchrun launch takes it (it is the one that writes).
- `bertkit_fingerprint.json`, written when training begins: the resolved config without the keys that only say how
  far or how often a continued run goes (CONTINUATION_KEYS), plus the content hash of every data file the config
  names: resume=true continues only a checkpoint of the same run.
- `checkpoint-*/` while it trains (a kill while saving leaves one partial: resume takes the newest complete one),
  then the model (weights, config.json, tokenizer files), `bertkit_config.yaml` (the resolved config, its header the
  command that reruns it), metrics.json, log_history.json, training_curve.png, README.md, and train.log. Once the
  final model is saved, the checkpoints go (`remove_checkpoints`, before the record; keep_checkpoints=true keeps
  them): a finished run is its model, not its optimizer states.
- `bertkit_run.json`, the completion record, removed before a run's files change and written last, atomically (temp
  file + os.replace): the recipe, start and finish times, the fingerprint, and every top-level file the run wrote
  with its size and sha256. So a run that did not finish never looks finished: no record beside a
  `bertkit_config.yaml` (or a fingerprint) = an unfinished run; a file that differs from the record, or a file that
  changes how the directory loads but is not in it = a mixed directory. Both are refused by every reader (predict,
  evaluate, push, model=<dir>). sha256, not size + mtime: a second run of the same architecture writes weights of
  the same size, and copies (cp, rsync, a Hub download) change mtimes; hashing reads the files once, as loading
  them does anyway (about 1 GB/s).

overwrite=true removes only what earlier runs wrote there (`old_run_files`); the user's files stay. A full disk while
saving is said in one line (where, what was kept).

What a command may write where, the one place that decides:
- `check_output_path(output, inputs=..., model_dirs=...)`: what predict / evaluate / report / export / audit / mine /
  cp write (a file, or an export's or audit's folder) is never one of the command's inputs; never a data file or
  model recorded by a run it reads (the paths of its bertkit_config.yaml, the content hashes of its fingerprint — a
  moved file, or a path relative to another folder — and the files `bertkit evaluate` measured on it); never a file
  of the model directory it reads nor of any bertkit run directory (a folder holding bertkit_run.json,
  bertkit_config.yaml or bertkit_fingerprint.json: what its record lists, the names a run writes, its checkpoints; a
  new file beside the model is fine); never a folder. --force does not change any of that. An existing file of
  another kind than the command writes (OUTPUT_KINDS: an earlier output is recognised by its content, so a labelled
  train.csv is not predictions.csv) is said and kept, and replaced only with --force (`replacing_allowed`); an
  earlier output of the same kind is replaced, as a rerun should. An export folder never goes inside a run
  directory, and replaces only an earlier export, with --force. Paths are compared resolved (`./x`, `~`, absolute,
  symlinks, `..`) and, when both exist, as the same file (hard links).
- `check_run_inputs(output_dir, config)`: a run's output_dir is never the model, teacher or data file it reads (nor
  holds one where the run writes), with or without overwrite=true — the hint never suggests overwrite=true there.
- `atomic_output(path)`: the file is written under a temporary name in the same folder and renamed over `path` only
  when complete (os.replace), so a reader sees the old file or the new one; on any failure the temporary file goes,
  and a full disk is one line that names the file. A missing folder is created (and said, as `bertkit cp` does).
  `atomic_folder(path)` does the same for a folder (an ONNX export).
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import copy
import datetime
import errno
import fnmatch
import hashlib
import json
import os
import shutil
import struct
from collections.abc import Callable, Iterator
from pathlib import Path

import yaml

from .config import save_config
from .console import LOG_FILE, say
from .errors import BertkitError

try:
    import fcntl
except ImportError:  # Windows: no flock; the lock file then only names the pid (no refusal of a second run)
    fcntl = None


# ------------------------------------------------------------- layout: the file names, JSON, the resolved config


RECORD_FILE = "bertkit_run.json"
FINGERPRINT_FILE = "bertkit_fingerprint.json"
LOCK_FILE = ".bertkit.lock"
RUN_CONFIG_FILE = "bertkit_config.yaml"
RECORD_FORMAT = 1
METRICS_FILE = "metrics.json"
CURVE_FILE = "training_curve.png"
CONFUSION_FIGURE, ENTITY_FIGURE = "confusion_matrix.png", "entity_f1.png"  # the task's dev figure, for the card
LOG_HISTORY_FILE = "log_history.json"  # every logged train loss and dev evaluation, by step (bertkit diagnose)
REPORT_FILE = "report.html"  # the run as one page (bertkit/report.py); `bertkit report RUN_DIR` rebuilds it

# Recorded, but a user may improve the model card before pushing, and `bertkit report` rebuilds the report.
EDITABLE = {"README.md", REPORT_FILE}
# The log is not part of what the run made: lines go on after the record (the summary, a push), and resume=true
# appends to it. It never changes how the directory loads, so leaving it out checks nothing less.
# `bertkit app` (bertkit/webapp_runs.py) keeps beside a run it started what the run's process printed and the command
# it ran (Resume runs it again): written by the page, before, during and after the run, about the run, not by it.
CONSOLE_FILE, APP_COMMAND_FILE = "console.log", "bertkit_app.json"
NOT_RECORDED = {RECORD_FILE, LOCK_FILE, LOG_FILE, CONSOLE_FILE, APP_COMMAND_FILE}
# Files that change what a directory loads as: one of these that the record does not list makes the directory mixed.
LOADING_PATTERNS = ("*.safetensors", "*.safetensors.index.json", "*.bin", "config.json", "tokenizer.json",
                    "tokenizer_config.json", "vocab.txt", "vocab.json", "merges.txt", "special_tokens_map.json",
                    "added_tokens.json", "adapter_config.json", "*.model")
# Config keys that say how far, how often or where a continued run goes: resume may change them.
CONTINUATION_KEYS = {"resume", "overwrite", "keep_checkpoints", "push", "output_dir", "train.num_train_epochs",
                     "train.max_steps",
                     "train.save_steps", "train.save_strategy", "train.save_total_limit", "train.logging_steps",
                     "train.logging_strategy", "train.dataloader_num_workers"}
# Names a bertkit run (or Trainer) writes at the top of its output_dir: what overwrite=true removes.
RUN_OUTPUTS = ("*.safetensors", "*.safetensors.index.json", "config.json", "generation_config.json", "tokenizer.json",
               "tokenizer_config.json", "vocab.txt", "special_tokens_map.json", "added_tokens.json",
               "training_args.bin", "pytorch_model.bin", "adapter_config.json", "metrics.json", CURVE_FILE,
               CONFUSION_FIGURE, ENTITY_FIGURE, "README.md", RUN_CONFIG_FILE, "classification_report.txt",
               "confusion_matrix.json", "*_results.json", "trainer_state.json", LOG_HISTORY_FILE, REPORT_FILE,
               FINGERPRINT_FILE, RECORD_FILE, LOG_FILE, "retriever.json", "*.tmp")

# Names of run outputs that a person may well have written themselves (notes, a picture): overwrite=true removes one
# only when the completion record lists it, or (no record: an unfinished run) when it is newer than the run's
# fingerprint, which a run writes when training begins (old_run_files below).
USER_NAMED = ("README.md", "*.png")

# Folders a run trains in beside its checkpoint-* ones: a search's trials and a seed band's seeds
# (bertkit/search.py), each removed when it ends; one left by a kill goes with overwrite=true.
# `evaluations/`: what `bertkit evaluate` measured on the finished run (one JSON per file; report.html shows them) —
# about that run's model, so it goes with it.
EVALUATIONS_DIR = "evaluations"
RUN_FOLDERS = ("trial-*", "seed-*", EVALUATIONS_DIR)


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


def write_json(path: Path, data, what: str = "the metrics") -> None:
    """JSON for people to read (metrics.json, an -o result): indented, non-ASCII kept, arrays as lists; written
    through a temporary file renamed when complete (`write_text_atomic` below), so a full disk leaves no half file."""
    write_text_atomic(path, json.dumps(data, indent=2, ensure_ascii=False, default=_jsonable) + "\n", what)


def _jsonable(value):
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


def read_run_config(output_dir: str) -> dict:
    """The resolved config a run saved beside its model ({} if there is none)."""
    path = Path(output_dir) / RUN_CONFIG_FILE
    return (yaml.safe_load(path.read_text(encoding="utf-8")) or {}) if path.exists() else {}


def save_run_config(cfg, output_dir: str, recipe: str) -> Path:
    """The resolved config beside the model, its header the command that reruns it (never with overwrite=true)."""
    if cfg.run.overwrite:  # rerunning the saved config must not replace this run without a word
        cfg = copy.copy(cfg)  # copies (no dataclasses.replace: it would run every __post_init__ check again)
        cfg.run = copy.copy(cfg.run)
        cfg.run.overwrite = False
    return save_config(cfg, Path(output_dir) / RUN_CONFIG_FILE,
                       command=f"bertkit run {recipe} -c {Path(output_dir) / RUN_CONFIG_FILE}")


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


# ------------------------------------------------------------------------------------------------------ the lock


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


# ---------------------------------------------------------------------- the model files and checkpoints of a run


WEIGHT_FILES = ("model.safetensors", "adapter_model.safetensors", "pytorch_model.bin", "model.safetensors.index.json")


def read_config_json(path: Path) -> dict:
    """config.json as a dict; BertkitError naming the file when it is not valid JSON or has no model_type."""
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        config = None
    except json.JSONDecodeError as error:
        raise BertkitError(f"{path} is not valid JSON (line {error.lineno} column {error.colno}: {error.msg}) — "
                           "restore it, or re-save the model with save_pretrained") from None
    if not isinstance(config, dict):
        raise BertkitError(f"{path} is not a JSON object of model settings — restore it, or re-save the model "
                           "with save_pretrained")
    if not config.get("model_type"):
        raise BertkitError(f'{path} has no model_type — add "model_type": "bert" (or the right type), or re-save '
                           "the model with save_pretrained")
    return config


def model_task(model_dir: str) -> str | None:
    """The architecture a saved checkpoint was fine-tuned for, e.g. 'BertForSequenceClassification'."""
    config_file = Path(model_dir) / "config.json"
    if not config_file.exists():
        return None
    architectures = read_config_json(config_file).get("architectures") or [None]
    return architectures[0]


def safetensors_problem(path: Path) -> str | None:
    """What is wrong with a .safetensors file without loading it (None if its header and size agree): empty,
    truncated (shorter than its header promises) or not a safetensors file."""
    size = path.stat().st_size
    if size == 0:
        return "is empty (0 bytes)"
    with open(path, "rb") as handle:
        head = handle.read(8)
        if len(head) < 8:
            return f"is truncated ({size} bytes, shorter than a safetensors header)"
        (header_size,) = struct.unpack("<Q", head)
        if 8 + header_size > size:
            return f"is truncated ({size:,} bytes, its header alone says {8 + header_size:,})"
        try:
            header = json.loads(handle.read(header_size))
            end = max((t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"), default=0)
        except (ValueError, TypeError, KeyError, IndexError):
            return "is not a safetensors file (its header is unreadable)"
    if 8 + header_size + end > size:
        return f"is truncated ({size:,} of the {8 + header_size + end:,} bytes its header promises)"
    return None


def check_weights(model_dir: Path) -> None:
    """Every *.safetensors file whole, and some weights there at all."""
    weights = sorted(model_dir.glob("*.safetensors"))
    for path in weights:
        problem = safetensors_problem(path)
        if problem:
            raise BertkitError(f"{path} {problem} — the save was interrupted or the copy is incomplete: rerun the "
                               "run (or resume=true), or copy / download the model again")
    if not weights and not list(model_dir.glob("*.bin")):
        raise BertkitError(f"{model_dir} has no model weights (model.safetensors) — point at the directory the run "
                           "saved its final model to, or save the model with save_pretrained")


def resume_path_problem(resume: str) -> str:
    """What a resume= path that is not a checkpoint folder is: a file (a checkpoint is a folder), or nothing."""
    if Path(resume).exists():
        return f"{resume} is a file, not a checkpoint folder (checkpoint-N/, which holds trainer_state.json)"
    return f"checkpoint {resume} does not exist"


def checkpoint_problem(checkpoint: Path, needs_optimizer: bool = True) -> str | None:
    """What a checkpoint lacks to be resumed from (None if complete): a kill while saving leaves it partial."""
    if _read_json(checkpoint / "trainer_state.json") is None:
        return "trainer_state.json is missing or unreadable"
    weights = [name for name in WEIGHT_FILES if (checkpoint / name).is_file()]
    if not weights:
        return "it has no model weights"
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


REMOVING = ".removing"  # suffix of a checkpoint being removed: no longer checkpoint-<step>, so resume passes it over


def folder_size(path: Path) -> int:
    """Bytes of the files under `path` (links not followed; files that vanish meanwhile count 0)."""
    total = 0
    for root, _, names in os.walk(path):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def remove_checkpoints(run_dir: str | Path, say: Callable[[str], None]) -> int:
    """A finished run's checkpoint-* folders, once its final model is saved and before its completion record is
    written (Run.saving): the best checkpoint was loaded at the end and saved as the model, so they are optimizer
    states nothing reads any more. Each is renamed to `checkpoint-<step>.removing` first, which resume passes over
    and overwrite=true clears, then removed, oldest first: a kill on the way leaves no record (an unfinished run) and
    never a half-removed folder that looks like a checkpoint. Leftovers of such a kill go too. A folder that cannot
    be removed is a warning (the run is finished all the same). Returns the bytes freed."""
    run_dir = Path(run_dir)
    leftovers = sorted(p for p in run_dir.glob(f"checkpoint-*{REMOVING}") if p.is_dir())
    freed, removed = 0, 0
    for checkpoint in [*leftovers, *reversed(checkpoints_newest_first(run_dir))]:
        size = folder_size(checkpoint)
        doomed = checkpoint if checkpoint.name.endswith(REMOVING) else checkpoint.with_name(checkpoint.name + REMOVING)
        try:
            if doomed != checkpoint:
                os.rename(checkpoint, doomed)
            shutil.rmtree(doomed)
        except OSError as error:
            say(f"warning: could not remove {checkpoint} ({error.strerror or error}) — the run is finished all the "
                f"same; remove the folder yourself")
            continue
        freed, removed = freed + size, removed + 1
    if removed:
        say(f"removed {removed} checkpoint{'s' if removed > 1 else ''} ({human_size(freed)}): a finished run keeps "
            f"its final model (keep_checkpoints=true keeps them, to resume with more epochs)")
    return freed


def human_size(size: int) -> str:
    """Bytes as a person reads them, in powers of 1000: 512 B, 9.4 MB, 92 MB, 1.3 GB."""
    value, unit = float(size), "B"
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if value < 999.5 or unit == "TB":
            break
        value /= 1000
    return f"{value:.0f} {unit}" if unit == "B" or value >= 9.95 else f"{value:.1f} {unit}"


# ------------------------------------------------------------ the completion record and the state of a directory


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


def hardware() -> dict:
    """Where the run trained, for the record (a report rebuilt later, elsewhere, still says): the CPU, its cores and
    torch's threads, and each GPU. Speed figures mean little without it."""
    import platform

    import torch

    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name")), cpu)
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() \
        else []
    return {"cpu": cpu, "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(), "gpus": gpus}


def write_record(run_dir: str | Path, recipe: str, started: str | None = None) -> Path:
    """The completion record: written last, atomically, listing every top-level file the run wrote (files of the
    user's from before training began stay out) with size and sha256."""
    run_dir = Path(run_dir)
    fingerprint = _read_json(run_dir / FINGERPRINT_FILE) or {}
    record = {"format": RECORD_FORMAT, "status": "finished", "recipe": recipe,
              "started": started or _RUNS.get(_key(run_dir), {}).get("started") or fingerprint.get("started"),
              "finished": _now(), "fingerprint": fingerprint.get("sha256"), "hardware": hardware(),
              "files": {name: file_digest(run_dir / name) for name in _written_by_run(run_dir, _top_files(run_dir))}}
    write_json_atomic(run_dir / RECORD_FILE, record)
    return run_dir / RECORD_FILE


# -------------------------------------------------------------------------- the fingerprint and the resume check


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


# ---------------------------------------------------- lifecycle: start, then begin (what overwrite=true removes)


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
    return (path.name in listed or path.name in (LOG_FILE, FINGERPRINT_FILE, REPORT_FILE) or path.name.endswith(".tmp")
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


def _refusal(run_dir: Path, state: str, detail: str) -> BertkitError:
    what = {"finished": "a finished run", "unfinished": f"an unfinished run ({detail})",
            "mixed": f"a mixed run directory ({detail})", "foreign": detail}[state]
    # resume=true only where it can work: from a complete checkpoint (a finished run keeps none unless
    # keep_checkpoints=true, a few-shot run never has one, a run killed early may have none yet)
    resumable = state in ("finished", "unfinished") and last_complete_checkpoint(run_dir) is not None
    resume = ", or resume=true to continue it" if resumable else ""
    return BertkitError(f"output_dir {run_dir} already holds {what} — choose another output_dir=..., or set "
                        f"overwrite=true to replace it{resume}")


def _nothing_to_resume(run_dir: Path) -> BertkitError:
    """resume=true of a finished run whose checkpoints went when it finished (keep_checkpoints=false)."""
    return BertkitError(f"resume=true: output_dir {run_dir} holds a finished run, which keeps no checkpoints to "
                        f"resume from — train on from its model in another folder (model={run_dir} output_dir=...), "
                        f"or retrain it with overwrite=true (keep_checkpoints=true keeps a run's checkpoints)")


def start(output_dir: str, recipe: str, config: dict, overwrite: bool, resume, say: Callable[[str], None]) -> None:
    """Before a run loads anything: take the directory; refuse to replace a run there without overwrite=true, and
    to resume from another run's checkpoints. Nothing is written yet: `begin` does that once training starts, so a
    run stopped by a typo in a data path leaves the directory as it was."""
    run_dir = Path(output_dir).expanduser()
    check_run_inputs(output_dir, config)  # before any hint of overwrite=true: it would destroy the input
    check_output_dir_is_a_folder(run_dir)
    acquire(run_dir)
    try:
        plan = _plan(run_dir, recipe, config, overwrite, resume, say)
    except BaseException:
        release(run_dir)
        raise
    _RUNS[_key(run_dir)]["plan"] = plan


def check_start(output_dir: str | Path, recipe: str, config: dict, overwrite: bool, resume,
                say: Callable[[str], None] = lambda line: None) -> dict:
    """What `start` refuses, without taking the directory (`bertkit run` asks before it imports the model stack, so
    that a run refused for its output_dir is refused at once): the inputs a replaced run would destroy, a resume
    from another run's checkpoints, a run there that overwrite=true must replace, files of the user's in the way.
    Returns start's plan."""
    run_dir = Path(output_dir).expanduser()
    check_run_inputs(str(output_dir), config)
    check_output_dir_is_a_folder(run_dir)
    return _plan(run_dir, recipe, config, overwrite, resume, say)


def _plan(run_dir: Path, recipe: str, config: dict, overwrite: bool, resume, say: Callable[[str], None]) -> dict:
    """The config's fingerprint, whether the run resumes, which kind of run it replaces; or the refusal."""
    current = fingerprint(config)
    resuming = resume not in (False, None, "", "false")
    replace = None
    if resuming:
        newest = resume is True or resume == "true"
        source = run_dir if newest else Path(str(resume)).expanduser().parent
        if newest and (run_dir / RECORD_FILE).exists() and not checkpoints_newest_first(run_dir):
            raise _nothing_to_resume(run_dir)
        check_resume_fingerprint(source, current, say)
    else:
        state, detail = run_state(run_dir)
        if state in ("finished", "unfinished", "mixed", "foreign"):
            if not overwrite:
                raise _refusal(run_dir, state, detail)
            replace = state
        in_the_way = users_files_in_the_way(run_dir, replacing=replace is not None)
        if in_the_way:
            raise _in_the_way(run_dir, in_the_way, overwrite)
    return {"recipe": recipe, "fingerprint": current, "resuming": resuming, "replace": replace}


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


# --------------------------------------------------------------------------------------------------- a full disk


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


# -------------------------------------------------------------------------------- what a command may write where


RUN_MARKERS = (RECORD_FILE, RUN_CONFIG_FILE, FINGERPRINT_FILE)  # a folder holding one is a bertkit run directory
# Config keys whose values are never inputs: where the run writes, how far it goes, and caches it fills.
NOT_INPUTS = ("output_dir", "resume", "overwrite", "push", "train", "run")
NOT_INPUT_NAMES = ("cache_dir",)


def _resolved(path: str | Path) -> Path:
    return Path(os.path.expanduser(str(path))).resolve()


def _same(a: str | Path, b: str | Path) -> bool:
    if _resolved(a) == _resolved(b):
        return True
    with contextlib.suppress(OSError):
        return os.path.samefile(a, b)
    return False


def run_directory_of(path: str | Path) -> Path | None:
    """The bertkit run directory `path` lies in (itself or a folder above it), or None."""
    for folder in (_resolved(path), *_resolved(path).parents):
        if folder.is_dir() and any((folder / marker).exists() for marker in RUN_MARKERS):
            return folder
    return None


def _option(flag: str) -> str:
    """How the user gives `flag` a value: `-o X`, or a config key's `audit.output=X`."""
    return f"{flag}=" if "." in flag and not flag.startswith("-") else f"{flag} "


def _suggest(output: str, inputs, model_dirs, what: str) -> str:
    """A sensible other name: beside the input for an input (data.predictions.jsonl), beside the run directory for
    a run directory (runs/classify.predictions.jsonl)."""
    suffix, kind = Path(output).suffix.lower(), "metrics" if what == "metrics" else "predictions"
    if what == "metrics":
        suffix = ".json"
    elif suffix not in (".csv", ".tsv", ".jsonl"):
        suffix = ".jsonl"
    base = Path(inputs[0]) if inputs else Path(model_dirs[0]) if model_dirs else Path(output)
    if what == "the export":  # a folder beside the run, as the default
        return str(base.with_name(f"{base.name}-onnx"))
    if what == "the comparison":
        return str(base.with_name(f"{base.stem if inputs else base.name}-compare.html"))
    if what == "the audit":
        return str(base.with_name(f"{base.stem if inputs else base.name}-audit"))
    if what == "the copy":  # the same name, beside the run directory
        return str(base.with_name(Path(output).name))
    if what == "the training file":  # what `bertkit mine` writes: FlagEmbedding JSONL, the only kind it writes
        return str(base.with_name(f"{base.stem if inputs else base.name}.mined.jsonl"))
    return str(base.with_name(f"{base.stem if inputs else base.name}.{kind}{suffix}"))


_FORCE = contextvars.ContextVar("bertkit_force_replace", default=False)


@contextlib.contextmanager
def replacing_allowed(force: bool) -> Iterator[None]:
    """A command's --force for every check_output_path under it: the CLI says it once around predict / evaluate,
    and each task's predict_file / evaluate_file (a new task's too) honours it without a parameter of its own."""
    token = _FORCE.set(bool(force))
    try:
        yield
    finally:
        _FORCE.reset(token)


def check_output_path(output: str | Path, inputs: list = (), model_dirs: list = (), flag: str = "-o",
                      what: str = "predictions", force: bool = False, suffixes: tuple[str, ...] = (),
                      wrong_suffix: str = "use a .jsonl name") -> Path:
    """Refuse, in one line that says what to do, an output that would replace one of the command's `inputs`, a data
    file or model recorded by a run it reads (`model_dirs`: its bertkit_config.yaml, the files `bertkit evaluate`
    measured on it), change the model it reads or any bertkit run directory, or that is a folder; these stay
    refused with `force`. An existing file of another kind than `what` (OUTPUT_KINDS) is replaced only with `force`.
    A name not ending in one of `suffixes` (when given) is refused after all that, with `wrong_suffix` as the advice.
    Returns the path to write: the symlink's target when `output` is a symlink, so that the link stays a link."""
    inputs, model_dirs = [str(p) for p in inputs if p], [str(p) for p in model_dirs if p]
    target = _resolved(output)
    # an export or an audit is a folder that may exist (empty): only the folders above it matter, and what it holds
    folder_output = what in FOLDER_OUTPUTS
    for given in inputs:
        if _same(output, given):
            kind = "folder" if _resolved(given).is_dir() else "file"
            raise BertkitError(f"{flag} {output} is the input {kind} — {what} would replace it; choose another output "
                               f"(e.g. {_option(flag)}{_suggest(str(output), [given], [], what)})")
        if folder_output and target in _resolved(given).parents:
            raise BertkitError(f"{flag} {output} holds {given}, which this command reads — {what} would write among "
                               f"it; choose another {flag} (e.g. {_option(flag)}"
                               f"{_suggest(str(output), [given], [], what)}), or move the file out first")
    _check_recorded_inputs(output, target, inputs, model_dirs, flag, what, folder_output)
    for model_dir in model_dirs:
        folder = _resolved(model_dir)
        if (target == folder or folder in target.parents) and (folder_output or _belongs_to_model(folder, target)):
            kind = "run" if run_directory_of(model_dir) == folder else "model"
            where, rename = ("inside", "") if folder_output else ("a file of", "a new name or ")
            raise BertkitError(f"{flag} {output} is {where} the {kind} directory {model_dir} that this command reads "
                               f"— writing it would change the {kind}; choose {rename}an output outside it (e.g. "
                               f"{_option(flag)}{_suggest(str(output), [], [model_dir], what)})")
    # an audit may go inside a run directory (its default is <output_dir>/audit), but not where the run writes
    anywhere_inside = what == "the export"
    run_dir = run_directory_of(target.parent) or (run_directory_of(target) if target.is_dir() and not anywhere_inside
                                                  else None)
    if run_dir is not None and (anywhere_inside or _belongs_to_model(run_dir, target)):
        shown = next((m for m in model_dirs if _resolved(m) == run_dir), None) or _shown_like(output, run_dir)
        where = "inside" if folder_output else "a file of"
        raise BertkitError(f"{flag} {output} is {where} the run directory {shown} — writing it would change the "
                           f"run; choose {'' if folder_output else 'a new name or '}an output outside it (e.g. "
                           f"{_option(flag)}{_suggest(str(output), [], [shown], what)})")
    if target.is_dir() and not folder_output:
        raise BertkitError(f"{flag} {output} is a folder — give a file name (e.g. {_option(flag)}"
                           f"{Path(output) / ('metrics.json' if what == 'metrics' else 'predictions.jsonl')})")
    for folder in reversed([target.parent, *target.parent.parents]):
        if folder.exists() and not folder.is_dir():
            raise BertkitError(f"{flag} {output}: {folder} is a file, not a folder — choose another output")
    _check_kind(output, target, flag, what, force or _FORCE.get())
    if suffixes and Path(output).suffix.lower() not in suffixes:  # after the rules above: -o INPUT is said as such
        raise BertkitError(f"output file {output}: {wrong_suffix}")
    # a symlink is written through (its target replaced), as open("w") did: os.replace would replace the link
    return target if Path(output).expanduser().is_symlink() else Path(output).expanduser()


# ----------------------------------------------------------------- what the runs a command reads were made from


def recorded_inputs(run_dir: str | Path) -> list[tuple[str, Path]]:
    """(what, path) of every existing file or folder a run (or its export) recorded as made from or measured on:
    the model, teacher and data files of its bertkit_config.yaml, and the files `bertkit evaluate` measured on it
    (evaluations/). Relative paths are read from here, as rerunning the config would read them."""
    run_dir = Path(run_dir).expanduser()
    try:
        found = [(f"{key}={path}", path) for key, path in config_paths(read_run_config(str(run_dir)))]
    except (OSError, ValueError, yaml.YAMLError):  # a damaged config: whoever loads the run says so
        found = []
    folder = run_dir / EVALUATIONS_DIR
    for record in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        evaluated = (_read_json(record) or {}).get("file")
        if isinstance(evaluated, str) and _exists(evaluated):
            found.append((f"a file evaluated on it ({evaluated})", Path(evaluated)))
    return found


def _recorded_digests(run_dir: str | Path) -> list[tuple[str, dict]]:
    """(key, {size, sha256}) of the data files a run's fingerprint hashed when it began: they identify a data file
    that was moved, or that the config names relative to another folder."""
    saved = _read_json(Path(run_dir).expanduser() / FINGERPRINT_FILE) or {}
    data = saved.get("data") if isinstance(saved.get("data"), dict) else {}
    return [(key, digest) for key, digest in data.items() if isinstance(digest, dict) and "sha256" in digest]


def _check_recorded_inputs(output, target: Path, inputs: list[str], model_dirs: list[str], flag: str,
                           what: str, folder_output: bool) -> None:
    """The data (and models) a run that the command reads was trained from or evaluated on are the user's labelled
    files: never replaced, whatever the spelling, and not with --force either."""
    for model_dir in model_dirs:
        for recorded, path in recorded_inputs(model_dir):
            source = _resolved(path)
            inside = source.is_dir() and (target == source or source in target.parents)
            if _same(output, path) or (inside and (folder_output or _belongs_to_model(source, target))):
                shown = "is" if _same(output, path) else "is inside"
                raise BertkitError(f"{flag} {output} {shown} {recorded} of the run {model_dir} — {what} would "
                                   f"replace what the run was made from, and --force cannot make that safe; choose "
                                   f"another output (e.g. {_option(flag)}"
                                   f"{_suggest(str(output), inputs, [model_dir], what)})")
        if target.is_file():
            for key, digest in _recorded_digests(model_dir):
                if target.stat().st_size == digest.get("size") and file_digest(target)["sha256"] == digest["sha256"]:
                    raise BertkitError(f"{flag} {output} holds the same content as {key} of the run {model_dir} (the "
                                       f"file it was trained on, by its sha256) — {what} would replace it, and "
                                       f"--force cannot make that safe; choose another output (e.g. {_option(flag)}"
                                       f"{_suggest(str(output), inputs, [model_dir], what)})")


# --------------------------------------------------------------------------- an existing file of another kind


FOLDER_OUTPUTS = ("the export", "the audit")  # the outputs that are folders; the rest are files
# What each writing command writes (check_output_path's `what`), in words. An existing file is an earlier output of
# the same kind — which a rerun replaces, as it should — when its content is recognisably that (a name says little:
# train.csv and predictions.csv are both CSV); any other file (labelled data, a page, notes) is replaced only with
# --force.
# A training file (`bertkit mine`) is never recognised: an earlier mined file and a hand-labelled one look alike.
OUTPUT_KINDS = {"predictions": "predictions", "metrics": "metrics as JSON", "the comparison": "an HTML page",
                "vectors": "vectors", "the training file": "a training file"}
# what predict's records hold (classify, ner's scored spans, mlm, qa, choice, rerank; embed's rankings and vectors)
PREDICTION_KEYS = {"score", "probabilities", "masks", "null_score", "abstained", "results", "embedding"}
PREDICTION_HEADERS = (["text", "label", "score"], ["query", "passage", "score", "logit"])  # classify's, rerank's CSV
SNIFFED_LINES = 20


def _head_lines(path: Path, count: int = SNIFFED_LINES) -> list[str] | None:
    """The first `count` non-blank lines of a text file (None if it is not UTF-8 text)."""
    try:
        with open(path, encoding="utf-8-sig") as handle:
            lines = []
            for line in handle:
                if line.strip():
                    lines.append(line.rstrip("\r\n"))
                if len(lines) >= count:
                    break
            return lines
    except (OSError, UnicodeDecodeError):
        return None


def _is_prediction_record(record) -> bool:
    if not isinstance(record, dict):
        return False
    entities = record.get("entities")
    return bool(PREDICTION_KEYS & record.keys()) or (
        isinstance(entities, list) and set(record) <= {"text", "entities"}
        and all(isinstance(e, dict) and "score" in e for e in entities))  # ner: scored spans, not gold ones


def _looks_like(path: Path, what: str) -> bool:
    """Whether the existing file `path` is an earlier output of the kind `what` (an empty file counts)."""
    if path.stat().st_size == 0:
        return True
    if what == "vectors" and path.suffix.lower() == ".npy":
        with open(path, "rb") as handle:
            return handle.read(6) == b"\x93NUMPY"
    lines = _head_lines(path)
    if not lines or what == "the training file":
        return False
    if what == "the comparison":  # report's pages are titled "bertkit ..."
        with contextlib.suppress(OSError, UnicodeDecodeError):
            return "<title>bertkit" in path.read_text(encoding="utf-8")[:4096]
        return False
    if what == "metrics":
        with contextlib.suppress(OSError, UnicodeDecodeError, ValueError):
            data = json.loads(path.read_text(encoding="utf-8"))
            return isinstance(data, dict) and bool({"file", "examples", "sentences"} & data.keys())  # evaluate -o
        return False
    if path.suffix.lower() in (".csv", ".tsv"):
        header = [cell.strip().strip('"') for cell in lines[0].split("\t" if path.suffix.lower() == ".tsv" else ",")]
        return any(header[:len(known)] == known for known in PREDICTION_HEADERS)  # labelled data has no score
    try:
        return all(_is_prediction_record(json.loads(line)) for line in lines)
    except ValueError:
        return False


def describe_file(path: Path) -> str:
    """An existing file in a few words, for a message: its first line when it is text, else its size."""
    lines = _head_lines(path, 1)
    size = path.stat().st_size
    if lines:
        first = lines[0] if len(lines[0]) <= 60 else lines[0][:57] + "..."
        return f"a {size:,}-byte file whose first line is {first!r}"
    return f"a {size:,}-byte file" if size else "an empty file"


def _check_kind(output, target: Path, flag: str, what: str, force: bool) -> None:
    """An existing file that is not an earlier output of this command's kind is said, not replaced — unless
    `force`, as `bertkit cp` does."""
    if what == "the export":
        _check_export_folder(output, target, flag, force)
    if what not in OUTPUT_KINDS or force or not target.is_file() or _looks_like(target, what):
        return
    writes = OUTPUT_KINDS[what]
    is_not = "" if what == "the training file" else f" and is not {writes}"  # a training file is never recognised
    raise BertkitError(f"{flag} {output} already exists{is_not} ({describe_file(target)}) — it would be "
                       f"replaced by {writes}; choose another name (e.g. {_option(flag)}"
                       f"{_suggest(str(output), [str(output)], [], what)}), or add --force to replace it")


def _belongs_to_model(folder: Path, target: Path) -> bool:
    """Whether writing `target` inside the model or run directory `folder` would change what it is: the folder
    itself, a file its completion record lists, a name a run writes (config.json, metrics.json, weights, README.md,
    ...) or one that changes how it loads, anything in its checkpoints, or (a model bertkit did not write) any file
    already there. A new file of the user's beside the model (`-o RUN/dev_predictions.jsonl`) changes none of it: the
    record leaves such files out."""
    if target == folder:
        return True
    top = target.relative_to(folder).parts[0]
    if target.parent != folder:
        return _run_writes(top)  # inside checkpoint-* / trial-* / seed-*; another subfolder is the user's
    record = _read_json(folder / RECORD_FILE) or {}
    recorded = record.get("files") if isinstance(record.get("files"), dict) else {}
    is_run = any((folder / marker).exists() for marker in RUN_MARKERS)
    return (top in recorded or _run_writes(top) or _loads_model(top) or top in RUN_MARKERS
            or (not is_run and target.exists()))


def _shown_like(output: str | Path, run_dir: Path) -> str:
    """`run_dir` as the user spelled it where `output` starts with it (runs/a/metrics.json -> runs/a)."""
    for folder in Path(output).parents:
        with contextlib.suppress(OSError):
            if folder.resolve() == run_dir:
                return str(folder)
    return str(run_dir)


def is_export(folder: Path) -> bool:
    """A folder `bertkit export` wrote (its completion record says so)."""
    return (_read_json(folder / RECORD_FILE) or {}).get("recipe") == "export"


def _check_export_folder(output, target: Path, flag: str, force: bool) -> None:
    """An export is a folder: never over a file, never into a folder of other things; an earlier export is
    replaced with `force` (whole, once the new one is complete: atomic_folder)."""
    if target.is_file():
        raise BertkitError(f"{flag} {output} already exists and is a file ({describe_file(target)}) — an export is a "
                           f"folder; choose another {flag}")
    if not target.is_dir() or not any(target.iterdir()) or (force and is_export(target)):
        return
    if is_export(target):
        raise BertkitError(f"{flag} {output} holds an earlier export — add --force to replace it, or choose another "
                           f"{flag}")
    raise BertkitError(f"{output} already exists and is not empty (and is not an export: --force does not replace "
                       f"it) — choose another {flag}/--output, or remove it")


# ------------------------------------------------------------------------------------------------ a run's inputs


def config_paths(config: dict, prefix: str = "") -> list[tuple[str, Path]]:
    """(key, path) for every value of a resolved config (nested dicts) that names an existing local file or folder:
    the model, a distill teacher, student.model, data files. Where the run writes (output_dir, resume, caches) and
    TrainingArguments are left out."""
    found = []
    for key, value in config.items():
        name = f"{prefix}{key}"
        if name in NOT_INPUTS or key in NOT_INPUT_NAMES:
            continue
        if isinstance(value, dict):
            found += config_paths(value, f"{name}.")
        elif isinstance(value, (list, tuple)):
            found += [(name, Path(v).expanduser()) for v in value if isinstance(v, str) and v and _exists(v)]
        elif isinstance(value, (str, os.PathLike)) and str(value) and _exists(str(value)):
            found.append((name, Path(str(value)).expanduser()))
    return found


def _exists(value: str) -> bool:
    try:
        return len(value) < 4096 and os.path.exists(os.path.expanduser(value))
    except (OSError, ValueError):
        return False


def _run_writes(name: str) -> bool:
    """A top-level name a run writes into its output_dir or removes there with overwrite=true."""
    return (name.startswith("checkpoint-") or any(fnmatch.fnmatch(name, p) for p in RUN_FOLDERS)
            or _matches_output(name))


def check_run_inputs(output_dir: str | Path, config: dict) -> None:
    """A run never trains into what it reads: output_dir is not the model / teacher / data file of the config, nor a
    folder holding one at a name the run writes or overwrite=true removes (model=OUT/checkpoint-6). Refused with or
    without overwrite=true, whose hint would destroy the input."""
    out = _resolved(output_dir)
    for key, path in config_paths(config):
        source = _resolved(path)
        kind = "the model" if source.is_dir() else "the data file"
        if _same(output_dir, path):
            plain = Path(os.path.normpath(os.path.expanduser(str(output_dir))))
            other = plain.with_name(f"{plain.name}-finetuned" if source.is_dir() else f"{plain.stem}-run")
            raise BertkitError(f"output_dir {output_dir} is {kind} this run reads ({key}={path}) — training would "
                               f"write over it, and overwrite=true cannot make that safe; choose another "
                               f"output_dir=... (e.g. output_dir={other})")
        if out in source.parents and _run_writes(source.relative_to(out).parts[0]):
            raise BertkitError(f"output_dir {output_dir} holds {kind} this run reads ({key}={path}), where the run "
                               f"writes its own files — choose another output_dir=..., or copy {path} elsewhere first")


def check_output_dir_is_a_folder(output_dir: str | Path) -> None:
    """output_dir (and every folder above it that exists) is a folder, not a file."""
    path = Path(output_dir).expanduser()
    for folder in (path, *path.parents):
        if folder.exists() and not folder.is_dir():
            where = f"output_dir {folder}" if folder == path else f"output_dir {output_dir}: {folder}"
            raise BertkitError(f"{where} is a file, not a folder — choose another output_dir=... (a run writes its "
                               "model and files into a folder)")


# ------------------------------------------------------------------------------------------------ writing


def _temp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def _make_parents(folder: Path) -> list[Path]:
    """Create `folder` (and missing folders above it), saying so; the folders created, outermost first."""
    created = [d for d in (folder, *folder.parents) if not d.exists()][::-1]
    if created:
        folder.mkdir(parents=True, exist_ok=True)
        say(f"created folder {folder}")
    return created


def _remove_created(created: list[Path]) -> None:
    for folder in reversed(created):
        with contextlib.suppress(OSError):
            folder.rmdir()


def _failure(error: OSError, path: Path, what: str, kept: str = "an earlier file of that name is kept as it was"
             ) -> BaseException:
    """A write that failed: a full disk said in one line naming the file (nothing was kept); another OSError gets
    the file's name if it had none."""
    if is_disk_full(error):
        free = ""
        with contextlib.suppress(OSError):
            free = f" ({shutil.disk_usage(path.parent).free / 2**20:,.0f} MB free)"
        return BertkitError(f"disk full while writing {what} to {path}{free}: nothing was written there ({kept}) — "
                            f"free space, or choose an output on another disk, then rerun")
    if error.filename is None and error.errno is not None:
        return OSError(error.errno, error.strerror or str(error), str(path))
    return error


@contextlib.contextmanager
def atomic_output(path: str | Path, what: str = "the output", mode: str = "w", **open_kwargs) -> Iterator:
    """Open `path` for writing under a temporary name in the same folder; renamed over `path` once the block ends
    without an error (flushed and fsync'ed first), removed on any failure. Yields the open file."""
    path = Path(path)
    created = _make_parents(path.parent)
    temp = _temp_name(path)
    if "b" not in mode:
        open_kwargs.setdefault("encoding", "utf-8")
    try:
        with open(temp, mode, **open_kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(OSError):
            shutil.copymode(path, temp)  # an existing file keeps its permissions
        os.replace(temp, path)
    except BaseException as error:
        with contextlib.suppress(OSError):
            temp.unlink()
        _remove_created(created)
        if isinstance(error, OSError):
            raise _failure(error, path, what) from error
        raise


def write_text_atomic(path: str | Path, text: str, what: str = "the output") -> None:
    with atomic_output(path, what) as handle:
        handle.write(text)


@contextlib.contextmanager
def atomic_folder(path: str | Path, what: str = "the output", replace: bool = False) -> Iterator[Path]:
    """Build a folder under a temporary name beside `path`; renamed to `path` once the block ends without an error
    (over an empty folder of that name; with `replace`, over a full one, which goes only then), removed on any
    failure: a retry finds nothing in its way, and a replaced folder stays as it was until the new one is whole."""
    path = Path(path)
    created = _make_parents(path.parent)
    temp = _temp_name(path)
    shutil.rmtree(temp, ignore_errors=True)
    temp.mkdir()
    old = path.with_name(f".{path.name}.{os.getpid()}.old")
    try:
        yield temp
        if path.is_dir() and replace and any(path.iterdir()):
            os.replace(path, old)  # the caller checked it is its own earlier output (an export)
        elif path.is_dir():
            path.rmdir()  # empty (the caller checked); os.replace onto it would do the same on POSIX only
        os.replace(temp, path)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException as error:
        shutil.rmtree(temp, ignore_errors=True)
        if old.is_dir() and not path.exists():  # the rename failed: the earlier folder goes back
            os.replace(old, path)
        _remove_created(created)
        if isinstance(error, OSError) or is_disk_full(error):  # torch / onnx say a full disk as RuntimeError too
            as_os_error = error if isinstance(error, OSError) else OSError(errno.ENOSPC, str(error))
            raise _failure(as_os_error, path, what, "the partial files were removed") from error
        raise


__all__ = [
    # layout
    "RECORD_FILE", "FINGERPRINT_FILE", "LOCK_FILE", "RUN_CONFIG_FILE", "LOG_FILE", "LOG_HISTORY_FILE", "METRICS_FILE",
    "REPORT_FILE",
    "CURVE_FILE", "CONFUSION_FIGURE", "ENTITY_FIGURE",
    "RECORD_FORMAT", "EDITABLE", "NOT_RECORDED", "CONSOLE_FILE", "APP_COMMAND_FILE", "LOADING_PATTERNS",
    "CONTINUATION_KEYS", "RUN_OUTPUTS",
    "USER_NAMED", "RUN_FOLDERS", "EVALUATIONS_DIR", "file_digest", "write_json_atomic", "write_json", "read_run_config",
    "save_run_config",
    # the lock
    "acquire", "release", "lock_holder",
    # model files and checkpoints
    "read_config_json", "model_task", "WEIGHT_FILES", "safetensors_problem", "check_weights", "checkpoint_problem",
    "resume_path_problem",
    "checkpoints_newest_first", "last_complete_checkpoint", "remove_checkpoints", "folder_size", "human_size",
    "REMOVING",
    # the completion record
    "file_stamps", "is_bertkit_run", "record_problem", "run_state", "check_finished", "remove_record", "write_record",
    # the fingerprint
    "fingerprint", "fingerprint_difference", "check_resume_fingerprint",
    # lifecycle
    "start", "check_start", "begin", "clear_old_run", "old_run_files", "users_files_in_the_way",
    # a full disk
    "is_disk_full", "disk_full_guard",
    # what a command may write where
    "check_output_path", "check_run_inputs", "check_output_dir_is_a_folder", "config_paths", "run_directory_of",
    "atomic_output", "atomic_folder", "write_text_atomic", "RUN_MARKERS", "recorded_inputs", "OUTPUT_KINDS",
    "describe_file", "is_export", "replacing_allowed",
]
