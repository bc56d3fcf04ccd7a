"""`report.html`: a run directory as one page to look at, instead of six files and a terminal.

    bertkit report RUN_DIR              rebuild RUN_DIR/report.html (older runs, or after changing the run)
    bertkit report A B [C ...] -o F     one page comparing the runs: curves overlaid, metrics, differing predictions

The page opens with the answer (the selection metric on dev, against chance and the best evaluation), then the
training curves (loss, every dev metric, the learning rate; the best checkpoint marked), the task's own view of the
dev split (its module's `Report`, bertkit/tasks/reporting.py; classify: per-class bars, the confusion matrix, the
confidently wrong examples, the multi-label threshold curve or the regression scatter; ner: per-type F1 and
sentences with gold and predicted spans; qa: questions with the context and both answers marked, EM/F1 by answer
length; choice: the options with gold and chosen marked; mlm: perplexity before and after, fill-mask examples),
`bertkit diagnose`'s symptoms, the settings that differ from the recipe's defaults, the model and the versions.
A file that is missing drops its section to one line; it never fails the report.

Self-contained by construction: the figures are inline SVG written here (no script, no font, no image is fetched),
the CSS is inline, and every text that comes from the user's data or config goes through html.escape. The page is
UTF-8 with a font list that has CJK fallbacks, and a viewport meta so that it reads at phone width.

Live: `ReportCallback(output_dir)` rewrites report.html (atomically) at each evaluation from the Trainer's log
history, so a browser tab refreshed during training shows the run so far. The dev examples need the final model, so
they appear when the run ends (`write_report`)."""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import math
import platform
from dataclasses import dataclass, field
from pathlib import Path

import transformers

from . import rundir, tasks
from .errors import BertkitError
from .report_html import (SHOWN_EXAMPLES, bar_chart, dev_metric_names, esc, fmt, histogram, line_chart, missing,
                          section, table)
from .tasks import reporting
from .tasks.reporting import read_json as _json

logger = logging.getLogger("bertkit")

REPORT_FILE = rundir.REPORT_FILE
COMPARE_FILE = "report-compare.html"

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,"Noto Sans","Noto Sans CJK SC",
"PingFang SC","Hiragino Sans GB","Microsoft YaHei","Source Han Sans SC","WenQuanYi Micro Hei",sans-serif;
margin:0 auto;max-width:960px;padding:12px;line-height:1.45;color:#222;background:#fff}
h1{font-size:1.35em;margin:.4em 0}h2{font-size:1.15em;border-bottom:1px solid #ddd;margin-top:1.6em}
h3{font-size:1em;margin-bottom:.3em}
.answer{font-size:1.1em;background:#f3f7fb;border-left:4px solid #1f77b4;padding:8px 12px}
.note{color:#666}.missing{color:#888;font-style:italic}
.warning{background:#fff4e5;border-left:4px solid #e8590c;padding:8px 12px}
svg{max-width:100%;height:auto;display:block;margin:6px 0}
table{border-collapse:collapse;margin:6px 0;font-size:.92em;display:block;overflow-x:auto;max-width:100%}
td,th{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top}
.ex{border:1px solid #e3e3e3;border-radius:4px;padding:6px 9px;margin:6px 0;overflow-wrap:anywhere}
mark.gold{background:#c8f0c8;padding:0 2px}mark.pred{background:#ffd9a8;padding:0 2px}
mark.both{background:#bfe0ff;padding:0 2px}.tag{font-size:.75em;color:#555;vertical-align:super}
ul.opts{margin:.2em 0;padding-left:1.2em}code,pre{font-size:.88em;overflow-wrap:anywhere;white-space:pre-wrap}
"""


# ------------------------------------------------------------------------------------------------ reading a run


@dataclass
class RunView:
    """What a report knows of one run directory: its files as read, nothing derived yet."""

    path: Path
    recipe: str
    history: list[dict]
    metrics: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)
    model_config: dict = field(default_factory=dict)
    record: dict = field(default_factory=dict)
    metric: str = ""
    greater: bool = True
    live: dict | None = None  # while training: {"step", "max_steps", "best_checkpoint"}

    @property
    def eval(self) -> dict:
        return self.metrics.get("eval") if isinstance(self.metrics.get("eval"), dict) else {}

    @property
    def dev_file(self) -> str | None:
        data = self.config.get("data") if isinstance(self.config.get("data"), dict) else {}
        return data.get("eval")


def read_view(run_dir: str | Path, history: list[dict] | None = None, live: dict | None = None) -> RunView:
    """The run directory's files (those there are): log history (or `history`, live), metrics, config, record."""
    from .diagnose import read_log_history
    from .runs import _unflatten, selection

    path = Path(run_dir)
    record = _json(path / rundir.RECORD_FILE, {})
    fingerprint = _json(path / rundir.FINGERPRINT_FILE, {})
    try:
        config = rundir.read_run_config(str(path)) if (path / rundir.RUN_CONFIG_FILE).is_file() else {}
    except Exception:  # noqa: BLE001 - a damaged config drops the settings section, not the report
        config = {}
    if not isinstance(config, dict) or not config:
        config = _unflatten(fingerprint.get("config", {}))
    if history is None:
        try:
            history = read_log_history(path)
        except BertkitError:
            history = []
    metrics = _json(path / rundir.METRICS_FILE, {})
    view = RunView(path, record.get("recipe") or fingerprint.get("recipe") or "", history, metrics, config,
                   _json(path / "config.json", {}), record, live=live)
    view.metric, _, view.greater = selection(metrics, config)
    if live and live.get("metric"):
        view.metric, view.greater = live["metric"], live["greater"]
    if not view.metric:
        view.metric = task_report(view.recipe).default_metric
    return view


def task_report(recipe: str) -> reporting.Report:
    """The run's task's part of the page (bertkit/tasks/reporting.py); the base part for a recipe that is no task
    (distill) or a task with no view of its own."""
    return (tasks.task_part(recipe, "Report") or reporting.Report)()


def eval_points(history: list[dict], key: str) -> list[tuple[float, float]]:
    return [(e["step"], float(e[key])) for e in history if isinstance(e.get(key), (int, float)) and "step" in e]


def best_evaluation(view: RunView) -> tuple[int, float] | None:
    """(step, value) of the best dev evaluation of the selection metric."""
    points = eval_points(view.history, f"eval_{view.metric}")
    if not points:
        return None
    step, value = (max if view.greater else min)(points, key=lambda point: point[1])
    return int(step), value


# ------------------------------------------------------------------------------------------------ the answer


def answer_section(view: RunView, examples: dict) -> str:
    metric, value = view.metric, view.eval.get(view.metric)
    if view.live:
        latest = eval_points(view.history, f"eval_{metric}")
        value = latest[-1][1] if latest else None
    if not isinstance(value, (int, float)):
        body = missing("no dev metric yet" if view.live else "no dev metric: the run had no dev split (data.eval)")
        return section("The answer", body)
    where = (f"at step {view.live['step']:,} of {view.live['max_steps']:,} (training; this page is rewritten at "
             "each evaluation)") if view.live else "on dev, the final model"
    lines = [f"<strong>dev {esc(metric)} = {fmt(value)}</strong> {where}"]
    part = task_report(view.recipe)
    chance = part.chance(view, examples)  # the majority class's share, a random option: the task says
    if chance:
        level, what = chance
        lift = value - level
        lines.append(f"chance ({esc(what)}) is {fmt(level)}: the model is {fmt(abs(lift))} "
                     f"{'above' if lift >= 0 else 'below'} it")
    best = best_evaluation(view)
    if best:
        step, top = best
        epoch = next((e.get("epoch") for e in view.history if e.get("step") == step and f"eval_{metric}" in e), None)
        at = f"step {step:,}" + (f" (epoch {epoch:.3g})" if isinstance(epoch, (int, float)) else "")
        same = math.isclose(top, value, rel_tol=1e-6, abs_tol=1e-9)
        lines.append(f"best evaluation: {fmt(top)} at {at}" + (" — the model kept is that one" if same and not
                                                               view.live else ""))
    lines += part.answer_lines(view)
    return section("The answer", '<p class="answer">' + "<br>".join(lines) + "</p>" + warnings_of(view))


def warnings_of(view: RunView) -> str:
    """What the run warned of in metrics.json (`warnings`: e.g. a reranker worse than its first stage), each in a
    box under the answer: a page that shows the number must show what is wrong with it."""
    found = view.metrics.get("warnings")
    found = [str(w) for w in found] if isinstance(found, list) else []
    return "".join(f'<p class="warning"><strong>warning:</strong> {esc(text)}</p>' for text in found)


# ------------------------------------------------------------------------------------------------ the curves


def curves_section(view: RunView) -> str:
    history = view.history
    if not history:
        return section("Training curves", missing(f"no log history ({rundir.LOG_HISTORY_FILE} or a checkpoint's "
                                                  "trainer_state.json)"))
    best = best_evaluation(view)
    marks = [(best[0], "best")] if best else []
    train = [(e["step"], float(e["loss"])) for e in history if isinstance(e.get("loss"), (int, float))]
    parts = [line_chart([("train loss", train), ("dev loss", eval_points(history, "eval_loss"))], "loss", "loss",
                        marks)]
    names = sorted(dev_metric_names(history), key=lambda name: (name != view.metric, name))
    shown = [n for n in names if not n.startswith(("f1_", "precision_", "recall_", "number_"))] or names
    evaluations = [e for e in history if any(k.startswith("eval_") for k in e)]
    if len(evaluations) < 2:  # one point per metric: a table says it better than a chart each
        rows = [[f"dev {name}", *[e.get(f"eval_{name}", "-") for e in evaluations]] for name in shown]
        parts.append(table(["", *[f"step {e.get('step', '?')}" for e in evaluations]], rows) if rows else
                     missing("no dev evaluation yet"))
    charted = shown[:8] if len(evaluations) >= 2 else []
    # a metric that never moved is one line, not a flat chart (a model that predicts one class gives several)
    flat = [name for name in charted if len({v for _, v in eval_points(history, f"eval_{name}")}) == 1]
    moving = [name for name in charted if name not in flat]
    # scores between 0 and 1 share one chart (accuracy, F1s, precision, recall, MCC move together); the
    # selection metric leads, and each metric of another scale (perplexity, mse) gets its own
    shared = [name for name in moving if all(-1 <= v <= 1 for _, v in eval_points(history, f"eval_{name}"))]
    if shared:
        parts.append(line_chart([(f"dev {name}", eval_points(history, f"eval_{name}")) for name in shared],
                                "dev scores", f"{view.metric} (selection metric) and the other scores"
                                if view.metric in shared else "dev scores", marks, height=260))
    for name in [name for name in moving if name not in shared]:
        parts.append(line_chart([(f"dev {name}", eval_points(history, f"eval_{name}"))], f"dev {name}",
                                name + (" (selection metric)" if name == view.metric else ""), marks,
                                height=200, log_y=name == "perplexity"))
    if flat:
        parts.append("<p>the same at every evaluation: " + ", ".join(
            f"dev {esc(name)} {fmt(eval_points(history, f'eval_{name}')[0][1])}" for name in flat) + "</p>")
    if len(evaluations) >= 2 and len(names) > len(charted):
        parts.append(f'<p class="note">{len(names) - len(charted)} more dev metrics (per class / per type, '
                     f"...) are in {rundir.METRICS_FILE}</p>")
    rates = [(e["step"], float(e["learning_rate"])) for e in history if isinstance(e.get("learning_rate"),
                                                                                 (int, float))]
    parts.append(line_chart([("learning rate", rates)], "learning rate", "learning rate", height=180)
                 if rates else missing("no learning rate logged"))
    return section("Training curves", "\n".join(parts))


# ------------------------------------------------------------------------------------------------ per task


def task_section(view: RunView, examples: dict, diagnosis) -> str:
    body = task_report(view.recipe).sections(view, examples, diagnosis)
    if view.live:
        body = missing("the dev examples need the final model: they appear when the run ends") + body
    return section(f"The task on dev ({view.recipe or 'unknown task'})", body)


# ------------------------------------------------------------------------------------------------ the data


def data_section(view: RunView, examples: dict) -> str:
    """What `bertkit inspect` finds, for the run's own files: labels in train and dev, token lengths with
    max_length and the share it cuts, duplicates and train/dev overlap (classify; ner: tags and sentence lengths).
    A task whose dev view shows its inputs (qa, choice, mlm) has none."""
    data = examples.get("data")
    if not task_report(view.recipe).shows_data:
        return ""
    if not data:
        why = "the data is read when the run ends" if view.live else \
            examples.get("data_why") or examples.get("why") or f"no data view for a '{view.recipe}' run"
        return section("The data", missing(why))
    parts = []
    train, dev = data["labels"].get("train", {}), data["labels"].get("dev", {})
    if train:
        total_train, total_dev = sum(train.values()) or 1, sum(dev.values()) or 1
        names = sorted(train, key=lambda name: -train[name])[:20]
        rows = [(name, [train[name] / total_train, dev.get(name, 0) / total_dev]) for name in names]
        parts.append(bar_chart(rows, ["train", "dev"], f"{data['label_unit']} per label (share of the split)"))
        parts.append(table([data["label_unit"], *[n for n in names]],
                           [["train", *[train[n] for n in names]], ["dev", *[dev.get(n, 0) for n in names]]]))
    lengths, max_length = data["lengths"], data["max_length"]
    if lengths:
        over = sum(length > max_length for length in lengths) / len(lengths)
        parts.append(histogram(lengths, f"training {data['length_unit']}: tokens each", max_length,
                               f"max_length {max_length}"))
        parts.append(f"<p>max_length {max_length}: {over:.1%} {esc(data['over'])}</p>")
    quality = data.get("quality")
    if quality:
        splits = [(name, quality[name]) for name in ("train", "dev") if quality.get(name)]
        parts.append(table(["split", "rows", "empty texts", "duplicate texts", "texts with conflicting labels"],
                           [[name, q["rows"], q["empty_texts"], q["duplicate_texts"], q.get("conflicting_labels", "-")]
                            for name, q in splits]))
        overlap = quality.get("train_dev_overlap", 0)
        parts.append(f"<p>{overlap} dev row(s) have a text that is also in train"
                     + (" (a leak that inflates dev scores): " + ", ".join(f"<code>{esc(t)}</code>" for t in
                                                                          quality.get("overlap_examples", []))
                        if overlap else "") + "</p>")
    return section("The data", "\n".join(parts))


# ------------------------------------------------------------------------------------------------ dev examples


def dev_examples(view: RunView) -> dict:
    """The task's dev examples with the final model's predictions (running the model as `bertkit diagnose` does);
    {"why": ...} when there are none to show."""
    if view.live:
        return {"why": "training"}
    from .console import quiet_mode

    with quiet_mode():
        return task_report(view.recipe).examples(view)


# ------------------------------------------------------------------------------------------------ diagnosis


def run_diagnosis(view: RunView, examples: dict):
    """diagnose()'s symptoms; for a single-label classify run, with the dev predictions already made here."""
    from .diagnose import Diagnosis, curve_symptoms, diagnose, suspect_data

    if view.live:
        train = view.config.get("train") if isinstance(view.config.get("train"), dict) else {}
        return Diagnosis(str(view.path), curve_symptoms(view.history, view.metric or "loss", train))
    diagnosis = diagnose(str(view.path), predict=False)
    if examples.get("kind") == "single":
        diagnosis.not_checked = [n for n in diagnosis.not_checked if "--no-predict" not in n]
        suspect_data(diagnosis, (examples["texts"], examples["gold"], examples["probs"], examples["names"]))
    return diagnosis


def diagnosis_section(view: RunView, diagnosis, error: str | None) -> str:
    if diagnosis is None:
        return section("Diagnosis", missing(f"diagnose could not run: {error}"))
    parts = []
    if view.live:
        parts.append('<p class="note">from the training curve so far; the full diagnosis comes at the end</p>')
    if not diagnosis.symptoms:
        looked = " and ".join(diagnosis.checked) or "the training curve"
        parts.append(f"<p>no symptom found in {esc(looked)}</p>")
    for symptom in diagnosis.symptoms:
        evidence = "".join(f"<li>{esc(line)}</li>" for line in symptom.evidence)
        commands = "".join(f"<li><code>{esc(c)}</code></li>" for c in symptom.commands)
        parts.append(f"<h3>{esc(symptom.name)}</h3><ul>{evidence}</ul><p>likely: {esc(symptom.advice)}</p>"
                     + (f"<p>try:</p><ul>{commands}</ul>" if commands else ""))
    parts += [f'<p class="note">not checked: {esc(what)}</p>' for what in diagnosis.not_checked]
    parts += [f'<p class="note">note: {esc(note)}</p>' for note in diagnosis.notes]
    return section("Diagnosis", "".join(parts))


def audit_section(view: RunView) -> str:
    """`bertkit audit`'s summary when the run directory holds one (audit/summary.json, where the audit writes by
    default): how many rows it flagged, the commonest class pairs and the worst rows; nothing when there is none."""
    summary = _json(view.path / "audit" / "summary.json", {})
    if not summary:
        return ""
    pairs = summary.get("pairs") if isinstance(summary.get("pairs"), dict) else {}
    top = [row for row in summary.get("top", []) if isinstance(row, dict)][:SHOWN_EXAMPLES]
    head = (f"<p>{fmt(summary.get('flagged', '?'))} of {fmt(summary.get('rows', '?'))} training "
            f"{esc(summary.get('unit', 'rows'))} of {esc(summary.get('train_file', '?'))} flagged as likely label "
            f"errors ({fmt(summary.get('folds', '?'))} folds); every one in <code>audit/label_issues.csv</code></p>")
    if isinstance(summary.get("judges"), dict):
        from .audit import judges_line

        head += f"<p>{esc(judges_line(summary['judges'], summary.get('unit', 'rows')))}</p>"
    return section("Label audit", head + table(["given → suggested", "count"], list(pairs.items())[:10])
                   + table(["line", "given", "suggested", "score", "text"],
                           [[r.get("line"), r.get("given"), r.get("suggested"), r.get("score"), r.get("text")]
                            for r in top]))


# ------------------------------------------------------------------------------------------------ evaluations


def evaluation_record_path(run_dir: Path, input_file: str) -> Path:
    """RUN/evaluations/<file name>-<8 hex digits of its absolute path>.json: two files of one name (x/dev.csv and
    y/dev.csv) never share a record, and the same file evaluated again (from any folder) finds its own."""
    where = _evaluated_file(input_file)
    key = hashlib.sha256(where.encode("utf-8")).hexdigest()[:8]
    return run_dir / rundir.EVALUATIONS_DIR / f"{Path(where).name}-{key}.json"


def _evaluated_file(input_file: str) -> str:
    """The file as one string whatever the spelling (absolute, symlinks resolved); a name that is no local file (a
    Hub dataset) as given."""
    path = Path(input_file).expanduser()
    return str(path.resolve()) if path.exists() else str(input_file)


def record_evaluation(model_dir: str | Path, input_file: str, metrics: dict) -> Path | None:
    """`bertkit evaluate` on a finished run: its metrics saved in RUN/evaluations/ (evaluation_record_path) and
    report.html rebuilt with them as a section of their own. The same file evaluated again replaces its earlier
    record, and says so; another file never does. Any other model directory (an export, a stock checkpoint) is left
    as it is; a run that cannot be written is one warning."""
    from .console import say

    run_dir = Path(model_dir)
    if not (run_dir / rundir.RECORD_FILE).is_file() or not (run_dir / rundir.RUN_CONFIG_FILE).is_file():
        return None
    path, where = evaluation_record_path(run_dir, input_file), _evaluated_file(input_file)
    # records of this same file: this name, or (written before records were keyed by path) <file name>.json
    earlier = [(old, _json(old, {})) for old in sorted(path.parent.glob("*.json")) if old.is_file()]
    earlier = [(old, entry) for old, entry in earlier if old == path or entry.get("file") == where]
    try:
        path.parent.mkdir(exist_ok=True)
        rundir.write_json_atomic(path, {"file": where, "given": str(input_file), "evaluated":
                                        datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                                        "metrics": metrics})
        for old, _ in earlier:
            if old != path:
                old.unlink()
    except OSError as error:
        from .console import warn

        warn(f"the evaluation is not added to {run_dir / REPORT_FILE} ({_one_line(error)})")
        return None
    if earlier:
        when = earlier[0][1].get("evaluated") or "earlier"
        say(f"replaced the earlier evaluation of {input_file} in {run_dir / rundir.EVALUATIONS_DIR} (from {when})")
    return write_report_quietly(run_dir)


def evaluations_section(view: RunView) -> str:
    """What `bertkit evaluate` measured on other files (a test split), one row per file; nothing when none. A file
    is shown as the user gave it, or by its full path where two given names are alike (x/dev.csv, y/dev.csv run
    from different folders)."""
    folder = view.path / rundir.EVALUATIONS_DIR
    saved = [_json(path, {}) for path in sorted(folder.glob("*.json"))] if folder.is_dir() else []
    saved = [entry for entry in saved if isinstance(entry.get("metrics"), dict)]
    if not saved:
        return ""
    keys = [key for key in ("accuracy", "macro_f1", "micro_f1", "f1", "precision", "recall", "exact_match", "mse",
                            "pearson", "perplexity", "ece") if any(key in entry["metrics"] for entry in saved)]
    given = [str(entry.get("given") or entry.get("file", "?")) for entry in saved]
    shown = [name if given.count(name) == 1 else str(entry.get("file", name)) for name, entry in zip(given, saved)]
    rows = [[name, entry.get("evaluated", ""), *[entry["metrics"].get(key, "-") for key in keys]]
            for name, entry in zip(shown, saved)]
    dev = [["dev (the run's own)", "", *[view.eval.get(key, "-") for key in keys]]] if view.eval else []
    return section("Evaluations on other files", "<p>from <code>bertkit evaluate</code>, beside the dev metrics</p>"
                   + table(["file", "evaluated", *keys], dev + rows))


# ------------------------------------------------------------------------------------------------ settings


def recipe_defaults(recipe: str) -> dict | None:
    """The recipe's Config defaults as a dict, as `bertkit validate RECIPE` resolves them (None when the recipe
    cannot be loaded). The recipe module is loaded the way the CLI loads it (bertkit_recipes.NAME), once."""
    import importlib.util
    import sys

    from .config import config_to_dict, load_config
    from .shipped import recipe_path

    name = f"bertkit_recipes.{recipe}"
    try:
        module = sys.modules.get(name)
        if module is None:
            spec = importlib.util.spec_from_file_location(name, recipe_path(recipe))
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        return config_to_dict(load_config(module.Config, None, []))
    except Exception:  # noqa: BLE001 - a recipe of another version: the section says so
        return None


def settings_section(view: RunView) -> str:
    from .runs import RunInfo, config_differences

    if not view.config:
        return section("Settings that differ from the defaults", missing(f"no {rundir.RUN_CONFIG_FILE}"))
    defaults = recipe_defaults(view.recipe) if view.recipe else None
    if defaults is None:
        return section("Settings that differ from the defaults",
                       missing(f"the '{view.recipe}' recipe's defaults could not be read") +
                       f"<pre>{esc(json.dumps(view.config, indent=1, default=str, ensure_ascii=False))}</pre>")
    rows = config_differences(RunInfo(Path("defaults"), "", config=defaults), RunInfo(view.path, "",
                                                                                     config=view.config))
    body = table(["key", f"{view.recipe} default", "this run"], [list(r) for r in rows]) if rows else \
        "<p>none: the run used the recipe's defaults</p>"
    return section("Settings that differ from the defaults", body)


def model_section(view: RunView) -> str:
    mc = view.model_config
    rows = [["model", view.config.get("model", "")],
            ["architecture", ", ".join(mc.get("architectures") or []) or "-"],
            ["model_type", mc.get("model_type", "-")],
            ["size", " · ".join(f"{k} {mc[k]}" for k in ("num_hidden_layers", "hidden_size", "num_attention_heads",
                                                          "vocab_size") if k in mc) or "-"],
            ["trained with transformers", mc.get("transformers_version", "-")]]
    train = view.metrics.get("train") if isinstance(view.metrics.get("train"), dict) else {}
    if isinstance(view.metrics.get("wall_time_s"), (int, float)):
        rows.append(["wall time", f"{view.metrics['wall_time_s']:,.1f} s"])
    for key, label in (("train_samples_per_second", "training examples / s"), ("train_steps_per_second",
                                                                              "steps / s"), ("epoch", "epochs")):
        if isinstance(train.get(key), (int, float)):
            rows.append([label, train[key]])
    for key in ("started", "finished"):
        if view.record.get(key):
            rows.append([key, view.record[key]])
    machine = view.record.get("hardware") if isinstance(view.record.get("hardware"), dict) else {}
    if machine:
        gpus = "".join(f" · GPU {gpu}" for gpu in machine.get("gpus") or [])
        rows.append(["trained on", f"{machine.get('cpu', '?')}, {machine.get('cores', '?')} cores, torch threads "
                     f"{machine.get('torch_threads', '?')}{gpus}"])
    import torch

    from . import __version__

    rows += [["report written with", f"bertkit {__version__} · transformers {transformers.__version__} · torch "
              f"{torch.__version__} · Python {platform.python_version()}"],
             ["report written at", datetime.datetime.now().astimezone().isoformat(timespec="seconds")]]
    return section("Model, versions, time", table(["", ""], rows))


# ------------------------------------------------------------------------------------------------ the page


def page(title: str, body: str, live: bool = False) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{CSS}</style></head>\n<body>\n<h1>{esc(title)}</h1>\n"
            + ('<p class="note">live: rewritten at each evaluation — refresh to see the run so far</p>'
               if live else "")
            + body + "\n</body></html>\n")


def render(view: RunView) -> str:
    """The report page of one run."""
    try:
        examples = dev_examples(view)
    except Exception as error:  # noqa: BLE001 - a model that cannot be run loses its examples, not the report
        examples = {"why": f"the model could not be run on dev ({_one_line(error)})"}
    diagnosis, error = None, None
    try:
        diagnosis = run_diagnosis(view, examples)
    except Exception as err:  # noqa: BLE001
        error = _one_line(err)
    sections = [answer_section(view, examples), curves_section(view), data_section(view, examples),
                task_section(view, examples, diagnosis),
                evaluations_section(view), diagnosis_section(view, diagnosis, error), audit_section(view),
                settings_section(view),
                model_section(view)]
    title = f"bertkit {view.recipe or 'run'}: {view.path.name}"
    return page(title, "".join(sections), live=bool(view.live))


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def write_report(run_dir: str | Path) -> Path:
    """Write RUN_DIR/report.html (atomically) from what the run directory holds; returns its path."""
    run_dir = Path(run_dir)
    path = run_dir / REPORT_FILE
    rundir.write_text_atomic(path, render(read_view(run_dir)), "the report")
    return path


def write_report_quietly(run_dir: str | Path) -> Path | None:
    """write_report for the end of a run: a report that cannot be written is one warning line, never a failed run.
    Call it after the completion record (the dev predictions load the finished model)."""
    try:
        return write_report(run_dir)
    except Exception as error:  # noqa: BLE001 - the model is saved; the report is a view of it
        from .console import warn

        warn(f"report.html not written ({_one_line(error)}); rebuild it with `bertkit report {run_dir}`")
        return None


def write_live_report(output_dir: str | Path, log_history: list[dict], live: dict) -> Path:
    """report.html of a run still training, from the Trainer's log history (no model is run)."""
    path = Path(output_dir) / REPORT_FILE
    rundir.write_text_atomic(path, render(read_view(output_dir, list(log_history), live)), "the report")
    return path


class ReportCallback(transformers.TrainerCallback):
    """Rewrites OUTPUT_DIR/report.html at each evaluation (rank 0 only, atomically). A report that cannot be
    written is one warning line; it never stops the run."""

    def __init__(self, output_dir: str | Path):
        self.output_dir = Path(output_dir)
        self.warned = False

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if not state.is_world_process_zero:
            return
        metric = (args.metric_for_best_model or "").removeprefix("eval_") or None
        live = {"step": state.global_step, "max_steps": state.max_steps, "metric": metric,
                "greater": bool(args.greater_is_better) if args.greater_is_better is not None else True}
        try:
            write_live_report(self.output_dir, state.log_history, live)
        except Exception as error:  # noqa: BLE001 - the report is a view of the run, never a reason to stop it
            if not self.warned:
                from .console import warn

                warn(f"report.html not written ({_one_line(error)}); training goes on")
                self.warned = True


# ------------------------------------------------------------------------------------------------ comparing runs


def check_reportable(run_dir: str | Path, use: str = "report") -> Path:
    """A finished run directory, or a one-line BertkitError."""
    path = Path(run_dir)
    if not path.is_dir() or not rundir.is_bertkit_run(path):
        raise BertkitError(f"{run_dir} is not a bertkit run directory (no {rundir.RECORD_FILE} or "
                           f"{rundir.RUN_CONFIG_FILE}) — give the output_dir of a finished `bertkit run`")
    rundir.check_finished(path, use)
    return path


def compare(run_dirs: list[str | Path]) -> str:
    """The comparison page: the selection metric and every dev metric side by side, the curves overlaid, the
    config keys that differ, and the dev examples whose prediction differs between the runs."""
    from .runs import RunInfo, config_differences

    views = [read_view(d) for d in run_dirs]
    names = _short_names([v.path for v in views])
    metric = next((v.metric for v in views if v.metric), "")
    keys = list(dict.fromkeys(k for v in views for k, val in v.eval.items() if isinstance(val, (int, float))))
    keys = [k for k in keys if not k.startswith(("f1_", "precision_", "recall_", "number_"))][:30]
    rows = [["recipe", *[v.recipe for v in views]], ["model", *[v.config.get("model", "") for v in views]]]
    rows += [[f"dev {k}" + (" (selection)" if k == metric else ""), *[v.eval.get(k, "-") for v in views]]
             for k in keys]
    rows.append(["wall time (s)", *[v.metrics.get("wall_time_s", "-") for v in views]])
    parts = [section("Metrics", table(["", *names], rows))]
    curves = [line_chart([(n, [(e["step"], float(e["loss"])) for e in v.history
                               if isinstance(e.get("loss"), (int, float))]) for n, v in zip(names, views)],
                         "training loss", "train loss")]
    if metric:
        curves.append(line_chart([(n, eval_points(v.history, f"eval_{metric}")) for n, v in zip(names, views)],
                                 f"dev {metric}", f"dev {metric}"))
    parts.append(section("Curves overlaid", "".join(curves)))
    differences = []
    for name, view in zip(names[1:], views[1:]):
        for key, left, right in config_differences(RunInfo(views[0].path, "", config=views[0].config),
                                                   RunInfo(view.path, "", config=view.config)):
            differences.append([f"{names[0]} vs {name}", key, left, right])
    parts.append(section("Settings that differ", table(["runs", "key", "first", "other"], differences)
                         if differences else "<p>none: the runs share every setting compared</p>"))
    parts.append(section("Dev examples predicted differently", differing_examples(views, names)))
    return page(f"bertkit: {len(views)} runs compared", "".join(parts))


def _short_names(paths: list[Path]) -> list[str]:
    names = [p.name for p in paths]
    return names if len(set(names)) == len(names) else [str(p) for p in paths]


def differing_examples(views: list[RunView], names: list[str]) -> str:
    if len({v.recipe for v in views}) != 1 or len({v.dev_file for v in views}) != 1:
        return missing("the runs are of different tasks or dev files: their predictions are not comparable")
    predictions = []
    for view in views:
        try:
            examples = dev_examples(view)
        except Exception as error:  # noqa: BLE001
            examples = {"why": _one_line(error)}
        if not examples.get("keys"):
            return missing(f"{view.path.name} has no dev predictions ({examples.get('why', 'none')})")
        predictions.append(dict(zip(examples["keys"], examples["predicted"])))
    shared = [k for k in predictions[0] if all(k in p for p in predictions[1:])]
    differ = [k for k in shared if len({json.dumps(p[k], default=str, ensure_ascii=False) for p in predictions}) > 1]
    if not differ:
        return f"<p>the runs predict the same on all {len(shared)} dev examples compared</p>"
    rows = [[key[:300], *[_shown(p[key]) for p in predictions]] for key in differ[:50]]
    return (f"<p>{len(differ)} of {len(shared)} dev examples predicted differently"
            f"{' (the first 50 shown)' if len(differ) > 50 else ''}</p>" + table(["example", *names], rows))


def _shown(value) -> str:
    if isinstance(value, (list, tuple)):
        return "; ".join(" ".join(str(v) for v in item) if isinstance(item, (list, tuple)) else str(item)
                         for item in value) or "(none)"
    return str(value)


def write_comparison(run_dirs: list[str], output: str | Path = COMPARE_FILE, force: bool = False) -> Path:
    """The comparison page of `run_dirs` at `output`: never a file of any run directory nor a file the runs were
    made from; an existing file that is not a bertkit page only with `force` (rundir.check_output_path)."""
    target = rundir.check_output_path(output, model_dirs=list(run_dirs), what="the comparison", force=force)
    rundir.write_text_atomic(target, compare(run_dirs), "the comparison")
    return Path(output)


__all__ = ["write_report", "write_report_quietly", "write_live_report", "ReportCallback", "write_comparison",
           "record_evaluation", "evaluation_record_path",
           "compare", "render", "read_view", "RunView", "check_reportable",
           "REPORT_FILE", "COMPARE_FILE", "dev_examples"]
