"""What a command may write where, and how it writes: the one place that decides.

- `check_output_path(output, inputs=..., model_dirs=...)`: a file that predict / evaluate / export write is never one
  of the command's inputs, never a file of the model directory it reads nor of any bertkit run directory (a folder
  holding bertkit_run.json, bertkit_config.yaml or bertkit_fingerprint.json: what its record lists, the names a run
  writes, its checkpoints; a new file beside the model is fine), and never a folder. An export folder never goes
  inside a run directory. Paths are compared
  resolved (`./x`, absolute, symlinks, `..`) and, when both exist, as the same file (hard links).
- `check_run_inputs(output_dir, config)`: a run's output_dir is never the model, teacher or data file it reads (nor
  holds one where the run writes), with or without overwrite=true — the hint never suggests overwrite=true there.
- `atomic_output(path)`: the file is written under a temporary name in the same folder and renamed over `path` only
  when complete (os.replace), so a reader sees the old file or the new one; on any failure the temporary file goes,
  and a full disk is one line that names the file. A missing folder is created (and said, as `bertkit cp` does).
  `atomic_folder(path)` does the same for a folder (an ONNX export).
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from ..errors import BertkitError
from .disk import is_disk_full
from .files import FINGERPRINT_FILE, RECORD_FILE, RUN_CONFIG_FILE, RUN_FOLDERS, _read_json

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
    return str(base.with_name(f"{base.stem if inputs else base.name}.{kind}{suffix}"))


def check_output_path(output: str | Path, inputs: list = (), model_dirs: list = (), flag: str = "-o",
                      what: str = "predictions") -> Path:
    """Refuse, in one line that says what to do, an output that would replace one of the command's `inputs`,
    change the model it reads (`model_dirs`) or any bertkit run directory, or that is a folder. Returns the path
    to write: the symlink's target when `output` is a symlink, so that the link stays a link."""
    inputs, model_dirs = [str(p) for p in inputs if p], [str(p) for p in model_dirs if p]
    for given in inputs:
        if _same(output, given):
            raise BertkitError(f"{flag} {output} is the input file — {what} would replace it; choose another output "
                               f"(e.g. {flag} {_suggest(str(output), [given], [], what)})")
    target = _resolved(output)
    folder_output = what == "the export"  # a folder that may exist (empty): only the folders above it matter
    for model_dir in model_dirs:
        folder = _resolved(model_dir)
        if (target == folder or folder in target.parents) and (folder_output or _belongs_to_model(folder, target)):
            kind = "run" if run_directory_of(model_dir) == folder else "model"
            where, rename = ("inside", "") if folder_output else ("a file of", "a new name or ")
            raise BertkitError(f"{flag} {output} is {where} the {kind} directory {model_dir} that this command reads "
                               f"— writing it would change the {kind}; choose {rename}an output outside it (e.g. "
                               f"{flag} {_suggest(str(output), [], [model_dir], what)})")
    run_dir = run_directory_of(target.parent) or (run_directory_of(target) if target.is_dir() and not folder_output
                                                  else None)
    if run_dir is not None and (folder_output or _belongs_to_model(run_dir, target)):
        shown = next((m for m in model_dirs if _resolved(m) == run_dir), None) or _shown_like(output, run_dir)
        where = "inside" if folder_output else "a file of"
        raise BertkitError(f"{flag} {output} is {where} the run directory {shown} — writing it would change the "
                           f"run; choose {'' if folder_output else 'a new name or '}an output outside it (e.g. {flag} "
                           f"{_suggest(str(output), [], [shown], what)})")
    if target.is_dir() and not folder_output:
        raise BertkitError(f"{flag} {output} is a folder — give a file name (e.g. {flag} "
                           f"{Path(output) / ('metrics.json' if what == 'metrics' else 'predictions.jsonl')})")
    for folder in reversed([target.parent, *target.parent.parents]):
        if folder.exists() and not folder.is_dir():
            raise BertkitError(f"{flag} {output}: {folder} is a file, not a folder — choose another output")
    # a symlink is written through (its target replaced), as open("w") did: os.replace would replace the link
    return target if Path(output).expanduser().is_symlink() else Path(output).expanduser()


def _belongs_to_model(folder: Path, target: Path) -> bool:
    """Whether writing `target` inside the model or run directory `folder` would change what it is: the folder
    itself, a file its completion record lists, a name a run writes (config.json, metrics.json, weights, README.md,
    ...) or one that changes how it loads, anything in its checkpoints, or (a model bertkit did not write) any file
    already there. A new file of the user's beside the model (`-o RUN/dev_predictions.jsonl`) changes none of it: the
    record leaves such files out."""
    from .record import _loads_model

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
    from .lifecycle import _matches_output

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
        from ..console import say

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
def atomic_folder(path: str | Path, what: str = "the output") -> Iterator[Path]:
    """Build a folder under a temporary name beside `path`; renamed to `path` once the block ends without an error
    (over an empty folder of that name), removed on any failure: a retry finds nothing in its way."""
    path = Path(path)
    created = _make_parents(path.parent)
    temp = _temp_name(path)
    shutil.rmtree(temp, ignore_errors=True)
    temp.mkdir()
    try:
        yield temp
        if path.is_dir():
            path.rmdir()  # empty (the caller checked); os.replace onto it would do the same on POSIX only
        os.replace(temp, path)
    except BaseException as error:
        shutil.rmtree(temp, ignore_errors=True)
        _remove_created(created)
        if isinstance(error, OSError) or is_disk_full(error):  # torch / onnx say a full disk as RuntimeError too
            as_os_error = error if isinstance(error, OSError) else OSError(errno.ENOSPC, str(error))
            raise _failure(as_os_error, path, what, "the partial files were removed") from error
        raise


__all__ = ["check_output_path", "check_run_inputs", "check_output_dir_is_a_folder", "config_paths",
           "run_directory_of", "atomic_output", "atomic_folder", "write_text_atomic", "RUN_MARKERS"]
