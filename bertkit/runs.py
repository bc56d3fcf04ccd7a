"""`bertkit runs`: every run under a folder at a glance, and what differs between two runs.

Reads only what each run directory holds (bertkit/rundir): the completion record (finished), the lock (running),
the last line of train.log (failed), metrics.json (the selection metric, wall time) and bertkit_config.yaml (recipe,
model, data, and the keys two runs differ in), and the size of its files on disk. Nothing is hashed: the record's
file check is for readers that load a model (predict, push), not for a listing.
"""

from __future__ import annotations

import datetime
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from rich.markup import escape
from rich.table import Table

from . import rundir
from .errors import BertkitError
from .rundir import EDITABLE

# Metrics for which lower is better, when a run does not say (mlm has no selection metric: perplexity).
LOWER_IS_BETTER = ("loss", "perplexity")
MAX_DEPTH = 3  # runs/<group>/<run>: how deep `bertkit runs DIR` looks


@dataclass
class RunInfo:
    path: Path
    status: str
    recipe: str = ""
    model: str = ""
    data: str = ""
    metric: str = ""
    value: float | None = None
    greater_is_better: bool = True
    date: str = ""
    wall_time_s: float | None = None
    config: dict = field(default_factory=dict)
    detail: str = ""
    """The file a corrupt or mixed run is so because of."""
    size: int | None = None
    """Bytes of every file under the run directory (checkpoints and evaluations included)."""

    @property
    def status_text(self) -> str:
        return f"{self.status} ({self.detail})" if self.detail else self.status


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _read_yaml(path: Path) -> dict:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def run_status(run_dir: Path) -> str:
    """finished (completion record) | corrupt / mixed (a completion record, but a file it lists is unreadable or
    not the one the run wrote: `damage` says which) | running (another process holds the lock) | failed (train.log
    ends with the error that stopped it) | unfinished (interrupted, killed, or stopped before training)."""
    if (run_dir / rundir.RECORD_FILE).exists():
        return damage(run_dir)[0] or "finished"
    if rundir.lock_holder(run_dir):
        return "running"
    if _last_bertkit_line(run_dir / rundir.LOG_FILE).startswith("bertkit: run failed"):
        return "failed"
    return "unfinished"


def damage(run_dir: Path) -> tuple[str, str]:
    """("corrupt" | "mixed", the file) for a run with a completion record whose files do not bear it out, else
    ("", ""). Cheap, for a listing: the record must parse, metrics.json must be JSON, and every file the record
    lists must be there at the size it was written (predict / push hash them; a listing does not)."""
    try:
        record = json.loads((run_dir / rundir.RECORD_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "corrupt", rundir.RECORD_FILE
    files = record.get("files") if isinstance(record, dict) else None
    if not isinstance(files, dict):
        return "corrupt", rundir.RECORD_FILE
    metrics = run_dir / rundir.METRICS_FILE
    if metrics.exists():
        try:
            if not isinstance(json.loads(metrics.read_text(encoding="utf-8")), dict):
                return "corrupt", rundir.METRICS_FILE
        except (OSError, ValueError):
            return "corrupt", rundir.METRICS_FILE
    for name, stamp in files.items():
        path = run_dir / name
        if name in EDITABLE:
            continue
        if not path.is_file():
            return "mixed", f"{name} missing"
        if isinstance(stamp, dict) and stamp.get("size") not in (None, path.stat().st_size):
            return "mixed", name
    return "", ""


def _last_bertkit_line(log: Path) -> str:
    try:
        with log.open("rb") as handle:
            handle.seek(max(0, log.stat().st_size - 8192))
            tail = handle.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    return next((line for line in reversed(tail) if line.startswith("bertkit: run ")), "")


def selection(metrics: dict, config: dict) -> tuple[str, float | None, bool]:
    """(name, value, greater is better) of the metric that picked the run's model."""
    evaluation = metrics.get("eval") if isinstance(metrics.get("eval"), dict) else {}
    name = metrics.get("selection_metric") or ("perplexity" if "perplexity" in evaluation else "")
    value = evaluation.get(name)
    train = config.get("train") if isinstance(config.get("train"), dict) else {}
    greater = train.get("greater_is_better", not any(word in name for word in LOWER_IS_BETTER))
    return name, (float(value) if isinstance(value, (int, float)) else None), bool(greater)


def _short_path(value) -> str:
    """The last two parts of a path (en_sentiment/train.csv), a Hub id as it is."""
    if not value:
        return ""
    parts = Path(str(value)).parts
    return "/".join(parts[-2:]) if len(parts) > 2 else str(value)


def read_run(run_dir: str | Path) -> RunInfo:
    run_dir = Path(run_dir)
    config = _read_yaml(run_dir / rundir.RUN_CONFIG_FILE)
    record = _read_json(run_dir / rundir.RECORD_FILE)
    fingerprint = _read_json(run_dir / rundir.FINGERPRINT_FILE)
    metrics = _read_json(run_dir / "metrics.json") if record else {}
    if not config:  # a run that never finished: its fingerprint keeps the (flattened) config
        config = _unflatten(fingerprint.get("config", {}))
    data = config.get("data") if isinstance(config.get("data"), dict) else {}
    name, value, greater = selection(metrics, config)
    student = config.get("student") if isinstance(config.get("student"), dict) else {}
    status = run_status(run_dir)
    return RunInfo(
        path=run_dir, status=status, detail=damage(run_dir)[1] if status in ("corrupt", "mixed") else "",
        recipe=record.get("recipe") or fingerprint.get("recipe", ""),
        model=_short_path(config.get("model") or student.get("model") or config.get("teacher"))
        + _family(run_dir, metrics),
        data=_short_path(data.get("train")), metric=name, value=value, greater_is_better=greater,
        date=_date(record.get("finished") or record.get("started") or fingerprint.get("started")),
        wall_time_s=metrics.get("wall_time_s"), config=config, size=rundir.folder_size(run_dir))


def _family(run_dir: Path, metrics: dict) -> str:
    """' (RoBERTa)' for a run of another family than BERT, from the implementation metrics.json records."""
    implementation = metrics.get("implementation") or ""
    match = re.fullmatch(r"transformers' (.+)", implementation)
    return f" ({match.group(1)})" if match else ""


def _unflatten(flat: dict) -> dict:
    nested: dict = {}
    for key, value in flat.items():
        *parents, last = key.split(".")
        node = nested
        for parent in parents:
            node = node.setdefault(parent, {})
        node[last] = value
    return nested


def _date(stamp) -> str:
    try:
        return datetime.datetime.fromisoformat(str(stamp)).astimezone().strftime("%m-%d %H:%M")
    except ValueError:
        return ""


def find_runs(folder: str | Path) -> list[Path]:
    """bertkit run directories under `folder` (itself included), at most MAX_DEPTH levels down; checkpoints are
    parts of runs, not runs."""
    folder = Path(folder)
    if not folder.is_dir():
        raise BertkitError(f"{folder} is not a folder — give the folder your runs are in (default runs/)")
    found, level = [], [folder]
    for _ in range(MAX_DEPTH + 1):
        found += [d for d in level if rundir.is_bertkit_run(d)]
        level = [child for d in level if not rundir.is_bertkit_run(d)
                 for child in sorted(d.iterdir()) if child.is_dir() and not child.name.startswith((".", "checkpoint-"))]
    return found


def sort_runs(runs: list[RunInfo], by: str) -> list[RunInfo]:
    """by date (newest first), metric (best first: each run's own direction; runs without one last), or name."""
    if by == "metric":
        return sorted(runs, key=lambda r: (r.value is None, -(r.value or 0) if r.greater_is_better else r.value or 0))
    if by == "name":
        return sorted(runs, key=lambda r: str(r.path))
    if by == "date":
        return sorted(runs, key=lambda r: r.date, reverse=True)
    raise BertkitError(f"--sort must be date, metric or name, got {by!r}")


STATUS_STYLE = {"finished": "green", "running": "cyan", "failed": "red", "unfinished": "yellow", "corrupt": "red",
                "mixed": "red"}


def _metric_text(run: RunInfo) -> str:
    if run.value is None or math.isnan(run.value):
        return "-"
    return f"{run.metric} {run.value:.4f}"


def _wall(run: RunInfo) -> str:
    from .console import fmt_duration

    return fmt_duration(run.wall_time_s) if isinstance(run.wall_time_s, (int, float)) else "-"


def _size(run: RunInfo) -> str:
    return rundir.human_size(run.size) if run.size is not None else "-"


WIDE = 120  # from this many columns model and data get columns of their own; below, a dim line under the run


def runs_table(runs: list[RunInfo], folder: Path, width: int) -> Table:
    """One row per run. Only the run, model and data columns may fold: the figures never break at 80 columns."""
    wide = width >= WIDE
    table = Table(box=None, pad_edge=False, padding=(0, 2, 0, 0), header_style="bold")
    table.add_column("run" if wide else "run [dim](model, data)[/]", overflow="fold")
    if wide:
        table.add_column("model", overflow="fold")
        table.add_column("data", overflow="fold")
    for name, justify in (("recipe", "left"), ("metric", "right"), ("status", "left"), ("size", "right"),
                          ("date", "left"), ("time", "right")):
        table.add_column(name, justify=justify, no_wrap=True)
    for run in runs:
        name = escape(str(run.path.relative_to(folder)) if run.path != folder else run.path.name)
        where = [escape(run.model), escape(run.data)]
        cells = [name, *where] if wide else ["\n".join([name, *(f"[dim]  {w}[/]" for w in where if w)])]
        status = f"[{STATUS_STYLE.get(run.status, '')}]{escape(run.status_text)}[/]"
        table.add_row(*cells, run.recipe, _metric_text(run), status, _size(run), run.date, _wall(run))
    return table


# ------------------------------------------------------------------------------------------------- two runs

# Keys that say where a run went or how it was launched, not what it was: left out of a comparison.
NOT_COMPARED = {"output_dir", "overwrite", "push", "resume", "keep_checkpoints"}


def config_differences(a: RunInfo, b: RunInfo) -> list[tuple[str, str, str]]:
    """(key, value in a, value in b) for every config key whose values differ, keys in config order."""
    flat_a, flat_b = flatten(a.config), flatten(b.config)
    keys = list(dict.fromkeys([*flat_a, *flat_b]))
    return [(key, _show(flat_a.get(key, "(unset)")), _show(flat_b.get(key, "(unset)"))) for key in keys
            if key not in NOT_COMPARED and flat_a.get(key) != flat_b.get(key)]


def flatten(config: dict, prefix: str = "") -> dict:
    """{"train": {"learning_rate": 3e-5}} -> {"train.learning_rate": 3e-5}: the keys as overrides spell them."""
    flat = {}
    for key, value in config.items():
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _show(value) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def comparison_table(a: RunInfo, b: RunInfo) -> Table:
    """The metric and status of each run, then the config keys that differ between them."""
    table = Table(box=None, pad_edge=False, padding=(0, 2, 0, 0), header_style="bold")
    table.add_column("", style="dim", no_wrap=True)
    table.add_column(escape(str(a.path)), overflow="fold")
    table.add_column(escape(str(b.path)), overflow="fold")
    table.add_row("status", escape(a.status_text), escape(b.status_text))
    table.add_row(a.metric or b.metric or "metric", _metric_text(a).split()[-1], _metric_text(b).split()[-1])
    table.add_row("wall time", _wall(a), _wall(b))
    table.add_row("size", _size(a), _size(b))
    differences = config_differences(a, b)
    for key, left, right in differences:
        table.add_row(escape(key), escape(left), escape(right))
    if not differences:
        table.add_row("config", "(same)", "(same)")
    return table


def not_a_run(path: Path) -> str:
    """What a path given as a run directory is instead."""
    if not path.exists():
        return f"{path} does not exist"
    if not path.is_dir():
        return f"{path} is a file, not a run directory"
    if find_runs(path):
        return f"{path} is a folder of runs, not one run"
    return f"{path} is not a bertkit run (no {rundir.RUN_CONFIG_FILE} or {rundir.RECORD_FILE} in it)"


def show_runs(paths: list[str], sort: str = "date") -> None:
    """What `bertkit runs` prints (to stdout): one folder -> its runs in a table; two run directories -> the
    comparison of the two."""
    from rich.console import Console

    out = Console()
    if len(paths) == 2:
        for path in paths:  # the one of the two that is not a run, said as what it is
            if not rundir.is_bertkit_run(Path(path)):
                raise BertkitError(f"{not_a_run(Path(path))} — bertkit runs A B compares two run directories (each "
                                   "a run's output_dir); bertkit runs FOLDER lists the runs in a folder")
        out.print(comparison_table(read_run(paths[0]), read_run(paths[1])))
        return
    if len(paths) != 1:
        raise BertkitError(f"{len(paths)} paths given — give one folder of runs (default runs/), or two run "
                           "directories to compare")
    folder = Path(paths[0])
    runs = sort_runs([read_run(path) for path in find_runs(folder)], sort)
    if not runs:
        out.print(f"no bertkit runs under {escape(str(folder))}")
        return
    out.print(runs_table(runs, folder, out.width))


__all__ = ["show_runs", "flatten", "RunInfo", "read_run", "run_status", "find_runs", "sort_runs", "runs_table",
           "config_differences", "comparison_table", "selection"]
