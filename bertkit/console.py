"""What a person sees while bertkit works, and what `train.log` keeps.

The console shows one live progress line per run (step, epoch, smoothed loss, learning rate, throughput, time), one
line per evaluation, one per checkpoint and a summary that ends with the commands to run next. Everything else -
every dict Trainer logs, transformers' warnings and info, the resolved config - goes to `train.log` in the run
directory, so the console can stay short without losing anything. Three modes, set by `bertkit run`:
normal, verbose (Trainer's own bars and dicts and transformers' raw messages, as without bertkit) and quiet (the
final summary and warnings only). Under torchrun only rank 0 prints.

The bar over the examples of a predict / evaluate is here too; the live line of a training run (a Trainer callback)
is bertkit/training_display.py. This module imports no transformers: the commands that load no model print through it.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime
import json
import logging
import math
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, ProgressColumn, TextColumn
from rich.table import Table
from rich.text import Text

LOG_FILE = "train.log"  # a run directory's log (bertkit/rundir.py: overwrite=true removes it)

MODES = ("normal", "verbose", "quiet")

console = Console(stderr=True)  # looked up at each use, by the progress bars too: a test may replace it
logger = logging.getLogger("bertkit")
_mode = {"name": "normal", "summaries": True}


def is_main_process() -> bool:
    """True in a single-process run and in rank 0 of a torchrun / accelerate launch: the one that writes and prints."""
    return int(os.environ.get("RANK", "0")) == 0


def mode() -> str:
    return _mode["name"]


def shows(kind: str = "info") -> bool:
    """Whether this process prints a line of `kind` (info | summary | warning) in the current mode."""
    if not is_main_process():
        return False
    if kind == "summary" and not _mode["summaries"]:
        return False
    return kind != "info" or mode() != "quiet"


def say(message: str) -> None:
    """A line of bertkit's own, on the console (not in quiet mode) and in train.log."""
    run_log.write(f"bertkit: {message}")
    if shows("info"):
        console.print(f"[bold]bertkit[/]: {escape(message)}", soft_wrap=not console.is_terminal)  # a file: whole


def show(renderable, kind: str = "info") -> None:
    """A rich renderable (a table) on the console, if lines of `kind` are shown."""
    if shows(kind):
        console.print(renderable)


def warn(message: str) -> None:
    """Something unexpected: shown in every mode, and kept in train.log."""
    run_log.write(f"bertkit: warning: {message}")
    if shows("warning"):
        console.print(f"[bold yellow]bertkit: warning[/]: {escape(message)}", soft_wrap=not console.is_terminal)


# ------------------------------------------------------------------------------------------------- train.log


class RunLog:
    """Lines of one run, held in memory until the run directory may be written (bertkit/rundir: nothing goes
    into output_dir before training starts), then appended to train.log as they come. Appended, not replaced: a
    run continued with resume=true adds to the log of the run it continues; overwrite=true removes the old log
    first (rundir.RUN_OUTPUTS)."""

    def __init__(self):
        self.lines: list[str] = []
        self.handle = None
        self.path: Path | None = None

    def start(self, header: str) -> None:
        self.close()
        self.lines = [f"===== {datetime.datetime.now().astimezone().isoformat(timespec='seconds')} {header}"]

    def open(self, run_dir: str | Path) -> None:
        if not is_main_process():
            return
        self.path = Path(run_dir) / LOG_FILE
        self.handle = self.path.open("a", encoding="utf-8")
        self.handle.write("".join(line + "\n" for line in self.lines))
        self.handle.flush()
        self.lines = []

    def write(self, line: str) -> None:
        if not is_main_process():  # rank 0 writes the log; the others would only hold lines in memory
            return
        if self.handle is not None:
            self.handle.write(line.rstrip("\n") + "\n")
            self.handle.flush()
        else:
            self.lines.append(line.rstrip("\n"))

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
        self.handle, self.lines = None, []


run_log = RunLog()
atexit.register(run_log.close)


# Library lines a person cannot act on, kept off the console (but in verbose mode). transformers' table of the weights
# a load used, missed or re-initialised goes to train.log, a record to look at when a model predicts oddly (bertkit
# says what matters of it in its own words: checkpoints.load_pretrained, describe_loading); Trainer's note that
# checkpoints saved within a second of each other are ordered by their step (what it should do anyway) goes nowhere.
# A classifier given a new head of another width (a rerank run from a classify run) makes transformers' config say
# `num_labels` disagrees with the old `id2label`: bertkit names the re-initialised head weights instead.
LOG_ONLY = (" LOAD REPORT", "which is incompatible to the `id2label` map")
NOWHERE = ("mtime may not be reliable on this filesystem",)
_ESCAPES = re.compile(r"\x1b\[[0-9;]*m")  # terminal colour codes, which a log file shows as noise


class _RunLogHandler(logging.Handler):
    """transformers' and Python's warnings (and transformers' info: Trainer's run header) into train.log."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
            if any(line in message for line in NOWHERE):
                return
            run_log.write(f"{record.levelname.lower()} [{record.name}] {_ESCAPES.sub('', message)}")
        except Exception:  # noqa: BLE001 - logging must never stop a run
            self.handleError(record)


class _ConsoleWarningHandler(logging.Handler):
    """transformers' warnings on the console: the message as it is in verbose mode, else one `warning:` line."""

    def emit(self, record: logging.LogRecord) -> None:
        if not shows("warning"):
            return
        message = record.getMessage()
        if mode() == "verbose":
            console.file.write(message + "\n")
            return
        if any(line in message for line in LOG_ONLY + NOWHERE):
            return
        console.print(f"[yellow]warning[/] [dim]({record.name})[/]: {escape(message)}", soft_wrap=True,
                      highlight=False)


@contextlib.contextmanager
def quiet_mode() -> Iterator[None]:
    """bertkit's lines and bars off for a while, inside whatever session is open: the report's look at the dev
    predictions at the end of a run must not end the run's train.log, as a console_session of its own would."""
    saved = _mode["name"]
    _mode["name"] = "quiet"
    try:
        yield
    finally:
        _mode["name"] = saved


@contextlib.contextmanager
def summaries_hidden() -> Iterator[None]:
    """The end-of-run summary tables and next commands off for a while (progress, bertkit's lines and warnings
    stay; train.log still gets them): `bertkit audit` trains one model per fold, each deleted when it has predicted
    its held-out rows, whose table and `bertkit predict <fold model>` commands would only mislead."""
    saved = _mode["summaries"]
    _mode["summaries"] = False
    try:
        yield
    finally:
        _mode["summaries"] = saved


@contextlib.contextmanager
def console_session(chosen: str = "normal") -> Iterator[None]:
    """The console of one `bertkit run` (the CLI opens it): bertkit's display instead of the bars of transformers
    and datasets, transformers' log into train.log, its warnings as one line each. Restored on the way out, so
    that a test calling the CLI twice in one process starts clean."""
    if chosen not in MODES:
        raise ValueError(f"console mode must be one of {MODES}, got {chosen!r}")
    from transformers.utils import logging as tf_logging  # imported by a command that loads a model anyway

    saved = {"mode": mode(), "verbosity": tf_logging.get_verbosity(), "bars": tf_logging.is_progress_bar_enabled()}
    file_handler, console_handler = _RunLogHandler(logging.INFO), _ConsoleWarningHandler(logging.WARNING)
    _mode["name"] = chosen
    run_log.close()  # a run started in this process before (a test calling a recipe's main) keeps its log to itself
    tf_logging.disable_default_handler()
    tf_logging.set_verbosity_info()  # into train.log; the console handler shows warnings only
    for handler in (file_handler, console_handler):
        tf_logging.add_handler(handler)
        logging.getLogger("py.warnings").addHandler(handler)
    logging.captureWarnings(True)
    if chosen != "verbose":
        tf_logging.disable_progress_bar()
        _disable_datasets_bars()
    try:
        yield
    finally:
        run_log.close()  # the run's log ends with its command: a later command in this process writes elsewhere
        for handler in (file_handler, console_handler):
            tf_logging.remove_handler(handler)
            logging.getLogger("py.warnings").removeHandler(handler)
        logging.captureWarnings(False)
        tf_logging.enable_default_handler()
        tf_logging.set_verbosity(saved["verbosity"])
        if saved["bars"]:
            tf_logging.enable_progress_bar()
        _mode["name"] = saved["mode"]


def _disable_datasets_bars() -> None:
    with contextlib.suppress(ImportError):
        import datasets

        datasets.disable_progress_bars()


def log_failure(error: BaseException) -> None:
    """The last line of train.log when a run stops with an error (`bertkit runs` shows it as failed)."""
    if isinstance(error, SystemExit):
        return
    if isinstance(error, KeyboardInterrupt):
        run_log.write("bertkit: run interrupted")
        return
    first = (str(error).strip().splitlines() or [""])[0]
    run_log.write(f"bertkit: run failed: {type(error).__name__}: {first}")


# --------------------------------------------------------------------------------------------- quiet loading

# Checkpoint weights a fine-tune drops by design: the pretraining heads of each family (BERT's and ERNIE's cls.,
# RoBERTa's lm_head, DeBERTa's lm_predictions, ELECTRA's generator, DistilBERT's vocab_*, ALBERT's predictions and
# sop_classifier, ModernBERT's decoder) and a pooler the task head does not use (RoBERTa's classifiers have none).
EXPECTED_UNUSED = re.compile(r"^(?:cls|lm_head|lm_predictions|generator_\w+|vocab_\w+|predictions|sop_classifier|"
                             r"decoder)\.|(?:^|\.)pooler\.")


class _ToRunLog(logging.Filter):
    """Records holding `fragment` go to train.log only (after `prefix`, without terminal escape codes)."""

    def __init__(self, fragment: str, prefix: str = ""):
        super().__init__()
        self.fragment, self.prefix = fragment, prefix

    def filter(self, record: logging.LogRecord) -> bool:
        if self.fragment not in str(record.msg):
            return True
        run_log.write(self.prefix + _ESCAPES.sub("", record.getMessage()))
        return False


@contextlib.contextmanager
def library_line_to_run_log(logger: str, fragment: str, prefix: str = "") -> Iterator[None]:
    """A library's line that bertkit says better itself (or that a user cannot act on) into train.log instead of the
    console; verbose mode leaves it on the console."""
    if mode() == "verbose":
        yield
        return
    dropper = _ToRunLog(fragment, prefix)
    logging.getLogger(logger).addFilter(dropper)
    try:
        yield
    finally:
        logging.getLogger(logger).removeFilter(dropper)


def quiet_load_report() -> contextlib.AbstractContextManager[None]:
    """transformers' load report into train.log instead of the console, for a caller that reads the loading info
    (`output_loading_info=True`) and says what matters itself (checkpoints.load_pretrained)."""
    return library_line_to_run_log("transformers.modeling_utils", " LOAD REPORT", prefix="load report: ")


def describe_loading(info: dict, path: str) -> None:
    mismatched = {key for key, *_ in info.get("mismatched_keys", ())}
    new = sorted(set(info.get("missing_keys", ())) - mismatched)
    if new:
        say(f"new, randomly initialised: {', '.join(module_names(new))} (not in {path}; trained from scratch)")
    unused = sorted(k for k in info.get("unexpected_keys", ()) if not EXPECTED_UNUSED.search(k))
    if unused:
        warn(f"{len(unused)} weights of {path} are not used by this model: {_few(module_names(unused))} — "
             "check that model= names the checkpoint you meant")
    for key, checkpoint_shape, model_shape in sorted(info.get("mismatched_keys", ())):
        warn(f"{key} re-initialised: its shape in {path} is {tuple(checkpoint_shape)}, this model needs "
             f"{tuple(model_shape)}")


def module_names(keys) -> list[str]:
    """Parameter names grouped by the module that holds them: classifier.weight, classifier.bias -> classifier."""
    seen = {}
    for key in keys:
        seen.setdefault(key.rsplit(".", 1)[0] if "." in key else key, None)
    return list(seen)


def _few(names: list[str], limit: int = 4) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


SHOWN_NAMES = 20


def capped(names, limit: int = SHOWN_NAMES) -> str:
    """Names for one console line, never all of 5,000 labels: the first `limit`, then "... and N more"."""
    names = [str(name) for name in names]
    if len(names) <= limit:
        return ", ".join(names)
    return ", ".join(names[:limit]) + f" ... and {len(names) - limit:,} more"


PER_CLASS_PREFIXES = ("f1_", "precision_", "recall_", "number_")  # per label: in the -o JSON, not the result line


def result_line(source: str, metrics: dict) -> str:
    """`dev.csv: accuracy 0.8125 · macro_f1 0.8012 · ...`: the overall figures of an evaluation in one line."""
    shown = [f"{name} {fmt_metric(value)}" for name, value in metrics.items()
             if isinstance(value, (int, float)) and not isinstance(value, bool)
             and not str(name).startswith(PER_CLASS_PREFIXES)]
    return f"{source}: {' · '.join(shown)}"


# ------------------------------------------------------------------------------------------------ summaries


def summary(title: str, rows: dict, kind: str = "summary") -> None:
    """A title line and a borderless name / value table: nothing in it wraps into a broken table at any width
    (long values fold inside their cell). Kept in train.log too."""
    run_log.write(f"{title}: " + json.dumps({k: v for k, v in rows.items()}, default=str, ensure_ascii=False))
    if not shows(kind):
        return
    table = Table(box=None, show_header=False, pad_edge=False, padding=(0, 2, 0, 2))
    table.add_column("name", style="dim", no_wrap=True)
    table.add_column("value", justify="right", overflow="fold")
    for name, value in rows.items():
        shown = f"{value:.1f}" if str(name).endswith("(s)") and isinstance(value, float) else fmt_metric(value)
        table.add_row(escape(str(name)), escape(shown))
    console.print(f"[bold]{escape(title)}[/]", soft_wrap=True)
    console.print(table)


# What a finished run is used for next: a fine-tune for a masked LM (the recipes below, whose model is a starting
# point), predict / evaluate for every other recipe's (a new task's too); a model that ranks a corpus (the table of
# tasks' CORPUS_RANKERS, which the caller asks) predicts a ranking of the user's passages.
STARTING_POINT_RECIPES = {"mlm"}


def next_commands(output_dir: str | Path, recipe: str, ranks_a_corpus: bool = False) -> list[str]:
    import shlex

    where = shlex.quote(str(output_dir))
    if recipe in STARTING_POINT_RECIPES:
        used = [f"bertkit run classify model={where} data.train=TRAIN_FILE data.eval=DEV_FILE"]
    elif ranks_a_corpus:
        used = [f"bertkit predict {where} QUERIES_FILE --corpus PASSAGES_FILE --top-k 10 -o ranked.jsonl",
                f"bertkit evaluate {where} LABELLED_FILE"]
    else:
        used = [f"bertkit predict {where} FILE -o predictions.jsonl", f"bertkit evaluate {where} LABELLED_FILE"]
    return [*used, f"bertkit push {where} USER/NAME"]


def next_steps(output_dir: str | Path, recipe: str, ranks_a_corpus: bool = False) -> None:
    """The end of a run: where everything is, and the commands that follow from it (one line each, never
    wrapped by bertkit, so that each can be copied whole)."""
    commands = next_commands(output_dir, recipe, ranks_a_corpus)
    for line in (f"model: {output_dir}", f"log: {Path(output_dir) / LOG_FILE}", *commands):
        run_log.write(line)
    if not shows("summary"):
        return
    console.print(f"[dim]model[/]  {escape(str(output_dir))}", soft_wrap=True, highlight=False)
    console.print(f"[dim]log[/]    {escape(str(Path(output_dir) / LOG_FILE))}", soft_wrap=True, highlight=False)
    console.print("[bold]next[/]", highlight=False)
    for command in commands:
        console.print(f"  {escape(command)}", soft_wrap=True, highlight=False)


def run_summary(title: str, rows: dict, output_dir: str | Path, recipe: str, ranks_a_corpus: bool = False) -> None:
    """The end of a run: its summary table, where the model and the log are, and the commands to run next (which
    say where the model is: a "saved to" row would only repeat it)."""
    summary(title, {name: value for name, value in rows.items() if name != "saved to"})
    next_steps(output_dir, recipe, ranks_a_corpus)


# ----------------------------------------------------------------------------------------------- formatting


def fmt_metric(value) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4f}"
    return str(value)


def fmt_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


# ------------------------------------------------------------------------------------------------- progress

class _TimeColumn(ProgressColumn):
    """elapsed<remaining in one short column (m:ss, or h:mm:ss past an hour): the line fits 80 columns."""

    def render(self, task) -> Text:
        remaining = task.time_remaining
        left = fmt_duration(remaining) if remaining is not None else "-:--"
        return Text(f"{fmt_duration(task.elapsed or 0)}<{left}", style="progress.elapsed")


class ExamplesProgress:
    """One transient bar over the examples of a predict / evaluate (not its batches: a batch holds a varying number
    of windows). `advance(n)` takes fractions, so that windows can count as their share of the examples. Drawn only
    on a terminal: piped output gets the result line alone."""

    def __init__(self, description: str, total: int):
        self.progress = Progress(TextColumn(description), BarColumn(bar_width=None),
                                 TextColumn("{task.completed:,.0f}/{task.total:,} examples"),
                                 TextColumn("{task.fields[speed]}"), _TimeColumn(), console=console,
                                 transient=True, expand=True,
                                 disable=not (console.is_terminal and shows("info")))
        self.total = total
        self.task = self.progress.add_task(description, total=total, speed="")
        self.started = time.perf_counter()

    def __enter__(self):
        self.progress.start()
        return self

    def advance(self, examples: float) -> None:
        self.progress.advance(self.task, examples)
        done = self.progress.tasks[0].completed
        self.progress.update(self.task, speed=f"{done / max(time.perf_counter() - self.started, 1e-9):,.0f}/s")

    def __exit__(self, *exc):
        self.progress.stop()


__all__ = ["result_line", "console", "say", "show", "warn", "mode", "shows", "is_main_process",
    "console_session", "quiet_mode", "summaries_hidden", "run_log", "RunLog", "LOG_FILE", "log_failure",
    "quiet_load_report", "library_line_to_run_log", "describe_loading",
    "module_names", "capped", "fmt_metric", "fmt_duration", "summary", "run_summary", "next_steps",
    "next_commands", "ExamplesProgress"]
