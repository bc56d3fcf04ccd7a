"""`report.html`: a run directory as one page to look at, instead of six files and a terminal.

    bertkit report RUN_DIR              rebuild RUN_DIR/report.html (older runs, or after changing the run)
    bertkit report A B [C ...] -o F     one page comparing the runs: curves overlaid, metrics, differing predictions

The page opens with the answer (the selection metric on dev, against chance and the best evaluation), then the
training curves (loss, every dev metric, the learning rate; the best checkpoint marked), the task's own view of the
dev split (classify: per-class bars, the confusion matrix, the confidently wrong examples, the multi-label threshold
curve or the regression scatter; ner: per-type F1 and sentences with gold and predicted spans; qa: questions with the
context and both answers marked, EM/F1 by answer length; choice: the options with gold and chosen marked; mlm:
perplexity before and after, fill-mask examples), `bertkit diagnose`'s symptoms, the settings that differ from the
recipe's defaults, the model and the versions. A file that is missing drops its section to one line; it never fails
the report.

Self-contained by construction: the figures are inline SVG written here (no script, no font, no image is fetched),
the CSS is inline, and every text that comes from the user's data or config goes through html.escape. The page is
UTF-8 with a font list that has CJK fallbacks, and a viewport meta so that it reads at phone width.

Live: `ReportCallback(output_dir)` rewrites report.html (atomically) at each evaluation from the Trainer's log
history, so a browser tab refreshed during training shows the run so far. The dev examples need the final model, so
they appear when the run ends (`write_report`)."""

from __future__ import annotations

import datetime
import hashlib
import html
import json
import logging
import math
import platform
import re
from dataclasses import dataclass, field
from pathlib import Path

import transformers

from . import rundir
from .errors import BertkitError

logger = logging.getLogger("bertkit")

REPORT_FILE = rundir.REPORT_FILE
COMPARE_FILE = "report-compare.html"
SHOWN_EXAMPLES = 12  # dev examples shown per group / list
PREDICTED_EXAMPLES = 200  # at most this many dev examples run through the model for ner / choice / mlm
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]

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


def esc(value) -> str:
    return html.escape(str(value), quote=True)


def fmt(value) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return esc(value)
    if isinstance(value, int):
        return f"{value:,}"
    return "nan" if math.isnan(value) else f"{value:.4g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.2e}"


def missing(text: str) -> str:
    return f'<p class="missing">{esc(text)}</p>'


def section(title: str, body: str, level: int = 2) -> str:
    anchor = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
    return f'<section id="{anchor}"><h{level}>{esc(title)}</h{level}>\n{body}</section>\n'


def table(header: list[str], rows: list[list]) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{fmt(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


# ------------------------------------------------------------------------------------------------ the figures


def _ticks(low: float, high: float, count: int = 4) -> list[float]:
    if high <= low:
        return [low]
    raw = (high - low) / count
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 2.5, 5, 10) if raw <= m * step)
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(int((high - first) / step + 1e-9) + 1)]


def _tick(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 1e4 else f"{value:.2g}"


def line_chart(series: list[tuple[str, list[tuple[float, float]]]], title: str, y_label: str = "",
               marks: list[tuple[float, str]] = (), width: int = 520, height: int = 240, log_y: bool = False) -> str:
    """An SVG line chart: each series (name, [(x, y)]) in its own colour with its points, a legend, and vertical
    marks (x, label) such as the best checkpoint."""
    series = [(name, [(x, y) for x, y in pts if y is not None and math.isfinite(y) and (y > 0 or not log_y)])
              for name, pts in series]
    series = [(name, pts) for name, pts in series if pts]
    if not series:
        return missing(f"{title}: nothing logged")
    tf = (lambda v: math.log10(v)) if log_y else (lambda v: v)
    xs = [x for _, pts in series for x, _ in pts] + [x for x, _ in marks]
    ys = [tf(y) for _, pts in series for _, y in pts]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    if y1 == y0:
        y0, y1 = y0 - abs(y0) * 0.1 - 0.05, y1 + abs(y1) * 0.1 + 0.05
    pad = (y1 - y0) * 0.06
    y0, y1 = y0 - pad, y1 + pad
    left, right, top, bottom = 60, 12, 36 + 16 * ((len(series) - 1) // 3), 36
    px = lambda x: left + (x - x0) / (x1 - x0) * (width - left - right)  # noqa: E731
    py = lambda y: top + (y1 - tf(y)) / (y1 - y0) * (height - top - bottom)  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="{esc(title)}" font-size="13">', f'<title>{esc(title)}</title>',
           f'<rect x="{left}" y="{top}" width="{width - left - right}" height="{height - top - bottom}" '
           'fill="none" stroke="#ccc"/>']
    for value in _ticks(y0, y1):
        y = top + (y1 - value) / (y1 - y0) * (height - top - bottom)
        shown = _tick(10 ** value) if log_y else _tick(value)
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>'
                   f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end">{shown}</text>')
    for value in _ticks(x0, x1, 5):
        x = px(value)
        out.append(f'<text x="{x:.1f}" y="{height - bottom + 16}" text-anchor="middle">{_tick(value)}</text>')
    out.append(f'<text x="{width - right}" y="{height - 4}" text-anchor="end">step</text>')
    if y_label:
        out.append(f'<text x="4" y="{top - 6}">{esc(y_label)}{" (log)" if log_y else ""}</text>')
    for x, label in marks:
        side = "end" if px(x) > width - 80 else "start"
        out.append(f'<line x1="{px(x):.1f}" x2="{px(x):.1f}" y1="{top}" y2="{height - bottom}" stroke="#2ca02c" '
                   f'stroke-dasharray="4 3"/><text x="{px(x) + (-3 if side == "end" else 3):.1f}" y="{top + 13}" '
                   f'fill="#2ca02c" text-anchor="{side}">{esc(label)}</text>')
    for i, (name, pts) in enumerate(series):
        color = COLORS[i % len(COLORS)]
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="1.8"/>')
        if len(pts) <= 60:
            out += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.6" fill="{color}"/>' for x, y in pts]
        lx, ly = left + (i % 3) * 150, 14 + 16 * (i // 3)
        out.append(f'<rect x="{lx}" y="{ly - 8}" width="10" height="10" fill="{color}"/>'
                   f'<text x="{lx + 14}" y="{ly + 1}">{esc(name[:30])}</text>')
    out.append("</svg>")
    return "\n".join(out)


def bar_chart(rows: list[tuple[str, list[float]]], names: list[str], title: str, width: int = 520) -> str:
    """Horizontal grouped bars of 0-1 scores: one group per row (a class), one bar per name (precision, ...)."""
    if not rows:
        return missing(f"{title}: no scores")
    bar, gap, left = 15, 10, 120
    height = 34 + len(rows) * (bar * len(names) + gap)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="{esc(title)}" font-size="13">', f"<title>{esc(title)}</title>"]
    for i, name in enumerate(names):
        out.append(f'<rect x="{left + i * 100}" y="5" width="11" height="11" fill="{COLORS[i]}"/>'
                   f'<text x="{left + i * 100 + 15}" y="15">{esc(name)}</text>')
    span = width - left - 50
    y = 28
    for label, values in rows:
        out.append(f'<text x="{left - 6}" y="{y + bar * len(names) / 2 + 4}" text-anchor="end">{esc(label[:16])}'
                   "</text>")
        for i, value in enumerate(values):
            v = 0.0 if value is None or not math.isfinite(value) else max(0.0, min(1.0, value))
            out.append(f'<rect x="{left}" y="{y}" width="{v * span:.1f}" height="{bar - 1}" fill="{COLORS[i]}"/>'
                       f'<text x="{left + v * span + 3:.1f}" y="{y + bar - 3}">{fmt(value)}</text>')
            y += bar
        y += gap
    out.append("</svg>")
    return "\n".join(out)


def heat_map(labels: list[str], matrix: list[list[int]], title: str = "confusion matrix") -> str:
    """The confusion matrix as coloured cells with their counts: rows gold, columns predicted."""
    n = len(labels)
    cell = max(22, min(60, 480 // max(n, 1)))
    left, top = 120, 110
    size = (left + n * cell + 10, top + n * cell + 10)
    peak = max((max(row) for row in matrix if row), default=1) or 1
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {size[0]} {size[1]}" role="img" '
           f'aria-label="{esc(title)}" font-size="13">', f"<title>{esc(title)}</title>",
           f'<text x="{left}" y="14">predicted →</text><text x="4" y="{top - 6}">gold ↓</text>']
    for j, label in enumerate(labels):
        x = left + j * cell + cell / 2
        out.append(f'<text transform="translate({x:.1f},{top - 6}) rotate(-45)">{esc(label[:16])}</text>')
    for i, row in enumerate(matrix):
        out.append(f'<text x="{left - 4}" y="{top + i * cell + cell / 2 + 4:.1f}" text-anchor="end">'
                   f"{esc(labels[i][:16])}</text>")
        for j, count in enumerate(row):
            share = count / peak
            color = f"rgb({int(255 - 200 * share)},{int(255 - 140 * share)},{int(255 - 60 * share)})"
            ink = "#fff" if share > 0.6 else "#222"
            out.append(f'<rect x="{left + j * cell}" y="{top + i * cell}" width="{cell - 1}" height="{cell - 1}" '
                       f'fill="{color}" stroke="{"#2ca02c" if i == j else "none"}"/><text x="'
                       f'{left + j * cell + cell / 2:.1f}" y="{top + i * cell + cell / 2 + 4:.1f}" '
                       f'text-anchor="middle" fill="{ink}">{count}</text>')
    out.append("</svg>")
    return "\n".join(out)


def histogram(values: list[int], title: str, marker: int | None = None, marker_label: str = "", bins: int = 30,
              width: int = 520, height: int = 220) -> str:
    """Vertical bars counting `values` (token lengths) in equal-width bins from 0, and a dashed line at `marker`
    (max_length) with its label."""
    if not values:
        return missing(f"{title}: no values")
    top_value = max(max(values), marker or 0) + 1
    size = max(1, math.ceil(top_value / bins))
    counts = [0] * math.ceil(top_value / size)
    for value in values:
        counts[min(value // size, len(counts) - 1)] += 1
    left, right, top, bottom = 60, 12, 30, 36
    span_x, span_y = width - left - right, height - top - bottom
    peak = max(counts) or 1
    px = lambda v: left + v / (len(counts) * size) * span_x  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="{esc(title)}" font-size="13">', f"<title>{esc(title)}</title>",
           f'<text x="4" y="16">{esc(title)}</text>',
           f'<rect x="{left}" y="{top}" width="{span_x}" height="{span_y}" fill="none" stroke="#ccc"/>']
    for value in _ticks(0, peak):
        y = top + span_y - value / peak * span_y
        out.append(f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end">{_tick(value)}</text>')
    for i, count in enumerate(counts):
        h = count / peak * span_y
        out.append(f'<rect x="{px(i * size):.1f}" y="{top + span_y - h:.1f}" width="{max(px(size) - left - 1, 1):.1f}"'
                   f' height="{h:.1f}" fill="{COLORS[0]}"/>')
    for value in _ticks(0, len(counts) * size, 5):
        out.append(f'<text x="{px(value):.1f}" y="{height - bottom + 16}" text-anchor="middle">{_tick(value)}</text>')
    out.append(f'<text x="{width - right}" y="{height - 4}" text-anchor="end">tokens</text>')
    if marker is not None:
        side = "end" if px(marker) > width - 120 else "start"
        out.append(f'<line x1="{px(marker):.1f}" x2="{px(marker):.1f}" y1="{top}" y2="{top + span_y}" '
                   f'stroke="#d62728" stroke-dasharray="4 3"/><text x="{px(marker) + (-3 if side == "end" else 3):.1f}"'
                   f' y="{top + 14}" fill="#d62728" text-anchor="{side}">{esc(marker_label)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def scatter(points: list[tuple[float, float]], title: str, x_label: str, y_label: str, size: int = 360) -> str:
    """Gold (x) against predicted (y), with the diagonal y = x."""
    if not points:
        return missing(f"{title}: no points")
    values = [v for point in points for v in point]
    low, high = min(values), max(values)
    if high == low:
        low, high = low - 1, high + 1
    m = 40
    p = lambda v: m + (v - low) / (high - low) * (size - 2 * m)  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {size} {size}" role="img" '
           f'aria-label="{esc(title)}" font-size="11">', f"<title>{esc(title)}</title>",
           f'<rect x="{m}" y="{m}" width="{size - 2 * m}" height="{size - 2 * m}" fill="none" stroke="#ccc"/>',
           f'<line x1="{m}" y1="{size - m}" x2="{size - m}" y2="{m}" stroke="#aaa" stroke-dasharray="4 3"/>',
           f'<text x="{size / 2}" y="{size - 8}" text-anchor="middle">{esc(x_label)}</text>',
           f'<text x="6" y="{m - 10}">{esc(y_label)}</text>',
           f'<text x="{m}" y="{size - m + 14}">{_tick(low)}</text>'
           f'<text x="{size - m}" y="{size - m + 14}" text-anchor="end">{_tick(high)}</text>']
    out += [f'<circle cx="{p(x):.1f}" cy="{size - p(y):.1f}" r="3" fill="#1f77b4" fill-opacity="0.6"/>'
            for x, y in points[:2000]]
    out.append("</svg>")
    return "\n".join(out)


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


def _json(path: Path, default):
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return default
    return data if isinstance(data, type(default)) else default


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
        view.metric = "perplexity" if view.recipe == "mlm" else ""
    return view


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


def chance_of(view: RunView, examples: dict) -> tuple[float, str] | None:
    """(chance level, what it is) for the selection metric, where the task has one: a classifier that always
    answers the majority class (accuracy: its share; macro F1: its F1 over the number of classes), or picking a
    multiple-choice option at random."""
    if view.recipe == "classify" and view.metric in ("accuracy", "macro_f1"):
        rows = _json(view.path / "confusion_matrix.json", {}).get("matrix")
        if not rows:
            return None
        totals = [sum(row) for row in rows]
        share = max(totals) / max(sum(totals), 1)
        if view.metric == "accuracy":
            return share, "always answering the majority class"
        return 2 * share / (1 + share) / len(rows), "macro F1 of always answering the majority class"
    if view.recipe == "choice" and examples.get("choice"):
        options = [len(e["options"]) for e in examples["choice"]]
        return sum(1 / n for n in options) / len(options), "picking an option at random"
    return None


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
    chance = chance_of(view, examples)
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
    if view.recipe == "mlm" and perplexity_before(view) is not None:
        lines.append(f"held-out perplexity before training {fmt(perplexity_before(view))}")
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
    names = sorted({k[5:] for e in history for k in e if k.startswith("eval_") and k != "eval_loss"
                    and isinstance(e[k], (int, float)) and not k.endswith(("_runtime", "_per_second", "epoch"))},
                   key=lambda name: (name != view.metric, name))
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


def per_class_rows(metrics: dict, prefix: str = "") -> list[tuple[str, list[float]]]:
    names = [k[3:] for k in metrics if k.startswith("f1_") and k[3:] not in ("micro", "macro", "weighted")]
    return [(name, [metrics.get(f"precision_{name}"), metrics.get(f"recall_{name}"), metrics.get(f"f1_{name}")])
            for name in names]


def highlight(text: str, spans: list[tuple[int, int, str, str]]) -> str:
    """`text` with character spans (start, end, css class, label) marked; overlapping spans: the first wins."""
    out, at = [], 0
    for start, end, kind, label in sorted(spans):
        if start < at or end <= start:
            continue
        out.append(esc(text[at:start]))
        out.append(f'<mark class="{kind}">{esc(text[start:end])}<span class="tag">{esc(label)}</span></mark>')
        at = end
    out.append(esc(text[at:]))
    return "".join(out)


def classify_sections(view: RunView, examples: dict, diagnosis) -> str:
    kind = examples.get("kind") or ("single" if (view.path / "confusion_matrix.json").is_file() else None)
    parts = []
    rows = per_class_rows(view.eval)
    if kind in (None, "single") or rows:
        parts.append(section("Per-class precision, recall and F1",
                             bar_chart(rows, ["precision", "recall", "F1"], "per-class scores") if rows else
                             missing("no per-class scores in metrics.json"), 3))
    if kind in (None, "single"):
        matrix = _json(view.path / "confusion_matrix.json", {})
        if matrix.get("matrix"):
            body = heat_map(matrix["labels"], matrix["matrix"])
        elif matrix.get("format") == "sparse":
            body = table(["gold", "predicted", "count"], [[c["true"], c["predicted"], c["count"]]
                                                           for c in matrix.get("confusions", [])])
        else:
            body = missing("no confusion_matrix.json")
        parts.append(section("Confusion matrix", body, 3))
        parts.append(section("Confidently wrong on dev", confident_errors_html(diagnosis, examples), 3))
    if kind == "multi":
        parts.append(section("Multi-label threshold", threshold_html(view, examples), 3))
    if kind == "regression":
        points = examples.get("scatter") or []
        parts.append(section("Gold against predicted", scatter(points, "regression", "gold", "predicted") if points
                             else missing("no dev predictions (the dev file is not there, or the run had none)"), 3))
    return "".join(parts)


def confident_errors_html(diagnosis, examples: dict) -> str:
    from .diagnose import CONFIDENT

    if diagnosis is None or not examples.get("texts"):
        return missing(examples.get("why") or "no dev predictions (the dev file is not there, or the run is training)")
    parts = [f"<p>wrong at probability {CONFIDENT} or more, grouped gold → predicted</p>" if diagnosis.errors else
             f"<p>none: no wrong dev prediction at probability {CONFIDENT} or more</p>"]
    for gold, predicted, count, texts in diagnosis.errors[:SHOWN_EXAMPLES]:
        items = "".join(f'<div class="ex">{esc(text)}</div>' for text in texts)
        parts.append(f"<h4>{esc(gold)} → {esc(predicted)}: {count}</h4>{items}")
    names, probs = examples["names"], examples["probs"]
    wrong = sorted(((float(row.max()), text, names[label], names[int(row.argmax())])
                    for text, label, row in zip(examples["texts"], examples["gold"], probs)
                    if int(row.argmax()) != label), key=lambda item: -item[0])
    if wrong:
        rows = [[text, gold, predicted, round(p, 3)] for p, text, gold, predicted in wrong[:SHOWN_EXAMPLES]]
        parts.append(f"<h4>every wrong dev prediction, the most confident first ({len(wrong)} of "
                     f"{len(probs)})</h4>" + table(["text", "gold", "predicted", "probability"], rows))
    return "".join(parts)


def threshold_html(view: RunView, examples: dict) -> str:
    threshold = view.metrics.get("threshold")
    curve = examples.get("threshold_curve") or []
    text = f"<p>decision threshold in force: {fmt(threshold)} (tuned on dev)</p>" if threshold is not None else ""
    if not curve:
        return text + missing("no threshold curve (no dev predictions)")
    marks = [(threshold, "tuned")] if isinstance(threshold, (int, float)) else []
    chart = line_chart([("micro F1", curve)], "micro F1 by threshold", "micro F1", marks, height=200)
    return text + chart.replace(">step<", ">threshold<")


def ner_sections(view: RunView, examples: dict) -> str:
    types = per_class_rows(view.eval)
    parts = [section("F1 per entity type", bar_chart(types, ["precision", "recall", "F1"], "per-type scores")
                     if types else missing("no per-type scores in metrics.json"), 3)]
    sentences = examples.get("ner")
    if not sentences:
        parts.append(section("Dev sentences", missing(examples.get("why") or "no dev predictions"), 3))
        return "".join(parts)
    wrong = [s for s in sentences if s["gold"] != s["predicted"]]
    shown = (wrong + [s for s in sentences if s["gold"] == s["predicted"]])[:SHOWN_EXAMPLES]
    items = []
    for s in shown:
        gold = highlight(s["text"], [(a, b, "gold", t) for a, b, t in s["gold"]])
        pred = highlight(s["text"], [(a, b, "pred", t) for a, b, t in s["predicted"]])
        verdict = "differs" if s["gold"] != s["predicted"] else "same"
        items.append(f'<div class="ex"><div>gold: {gold}</div><div>predicted ({verdict}): {pred}</div></div>')
    intro = (f"<p>{len(wrong)} of {len(sentences)} dev sentences predicted differently from gold; the first "
             f'{len(shown)} shown, those that differ first. <mark class="gold">gold</mark> '
             '<mark class="pred">predicted</mark></p>')
    parts.append(section("Dev sentences", intro + "".join(items), 3))
    return "".join(parts)


def qa_sections(view: RunView, examples: dict) -> str:
    questions = examples.get("qa")
    if not questions:
        why = examples.get("why") or "no dev_predictions.jsonl"
        return section("Dev questions", missing(why), 3) + section("EM and F1 by answer length", missing(why), 3)
    wrong = [q for q in questions if q["f1"] < 1]
    shown = (wrong + [q for q in questions if q["f1"] >= 1])[:SHOWN_EXAMPLES]
    items = []
    for q in shown:
        spans = [(a, a + len(t), "gold", "gold") for t, a in q["gold"] if isinstance(a, int)]
        if q["start"] is not None:
            overlap = any(s == (q["start"], q["end"]) for s in ((a, b) for a, b, _, _ in spans))
            spans = [s for s in spans if (s[0], s[1]) != (q["start"], q["end"])]
            spans.append((q["start"], q["end"], "both" if overlap else "pred", "both" if overlap else "predicted"))
        golds = " | ".join(t for t, _ in q["gold"]) or "(no answer)"
        items.append(f'<div class="ex"><strong>{esc(q["question"])}</strong><br>{highlight(q["context"], spans)}'
                     f'<br><span class="note">gold: {esc(golds)} · predicted: {esc(q["answer"] or "(no answer)")} · '
                     f'EM {q["em"]:.0f} · F1 {q["f1"]:.2f}</span></div>')
    intro = (f"<p>{len(wrong)} of {len(questions)} dev questions not answered exactly; the first {len(shown)} shown. "
             '<mark class="gold">gold</mark> <mark class="pred">predicted</mark> <mark class="both">both</mark></p>')
    buckets: dict[str, list] = {}
    for q in questions:
        words = min((len(t.split()) if view_language(view) == "en" else len(t) for t, _ in q["gold"]), default=0)
        name = "no answer" if not q["gold"] else "1-2" if words <= 2 else "3-5" if words <= 5 else "6+"
        buckets.setdefault(name, []).append(q)
    unit = "words" if view_language(view) == "en" else "characters"
    rows = [[f"{name} {unit}" if name != "no answer" else name, len(qs), 100 * sum(q["em"] for q in qs) / len(qs),
             100 * sum(q["f1"] for q in qs) / len(qs)] for name, qs in sorted(buckets.items())]
    return (section("Dev questions", intro + "".join(items), 3)
            + section("EM and F1 by answer length", table(["gold answer length", "questions", "EM", "F1"], rows), 3))


def view_language(view: RunView) -> str:
    return str(view.metrics.get("language") or view.config.get("language") or "en")


def choice_sections(view: RunView, examples: dict) -> str:
    items = examples.get("choice")
    if not items:
        return section("Dev questions and options", missing(examples.get("why") or "no dev predictions"), 3)
    wrong = [e for e in items if e["chosen"] != e["label"]]
    out = []
    for e in (wrong + [e for e in items if e["chosen"] == e["label"]])[:SHOWN_EXAMPLES]:
        options = "".join(
            f"<li>{'✅ ' if i == e['label'] else ''}{'👉 ' if i == e['chosen'] else ''}{esc(option)} "
            f'<span class="note">({e["probs"][i]:.2f})</span></li>' for i, option in enumerate(e["options"]))
        out.append(f'<div class="ex">{esc(e["context"])}<br><strong>{esc(e["question"])}</strong>'
                   f'<ul class="opts">{options}</ul></div>')
    intro = (f"<p>{len(wrong)} of {len(items)} dev questions answered wrongly; ✅ gold, 👉 chosen (probability)"
             "</p>")
    return section("Dev questions and options", intro + "".join(out), 3)


def perplexity_before(view: RunView) -> float | None:
    """The held-out perplexity of the model before training (the mlm recipe's metrics.json: eval.perplexity_before,
    and before.perplexity)."""
    before = view.eval.get("perplexity_before", (view.metrics.get("before") or {}).get("perplexity"))
    return before if isinstance(before, (int, float)) else None


def mlm_sections(view: RunView, examples: dict) -> str:
    before, after = perplexity_before(view), view.eval.get("perplexity")
    if isinstance(after, (int, float)):
        rows = [["before training", before], ["after training", after]] if before is not None else \
            [["after training", after]]
        body = table(["held-out perplexity", "value"], rows)
    else:
        body = missing("no perplexity in metrics.json")
    fills = examples.get("mlm")
    if fills:
        items = "".join(f'<div class="ex">{esc(f["masked"])}<br><span class="note">hidden: {esc(f["word"])} · '
                        f'model: {esc(", ".join(f"{t} ({p:.2f})" for t, p in f["top"]))}</span></div>'
                        for f in fills[:SHOWN_EXAMPLES])
    else:
        items = missing(examples.get("why") or "no fill-mask examples")
    return section("Perplexity", body, 3) + section("Fill-mask examples", items, 3)


def embed_sections(view: RunView) -> str:
    """The embed recipe's dev metrics of the model before training (metrics.json base_eval) beside the fine-tuned
    one's: ranking (NDCG@10, MRR@10, Recall@k) or Spearman for scored pairs."""
    base = view.metrics.get("base_eval") if isinstance(view.metrics.get("base_eval"), dict) else {}
    rows = [[name, base.get(name, "-"), value] for name, value in view.eval.items()]
    body = table(["dev metric", "base model", "fine-tuned"], rows) if rows else missing("no dev metrics in "
                                                                                          "metrics.json")
    return section("Base model and fine-tuned", body, 3)


def task_section(view: RunView, examples: dict, diagnosis) -> str:
    build = {"classify": lambda: classify_sections(view, examples, diagnosis),
             "ner": lambda: ner_sections(view, examples), "qa": lambda: qa_sections(view, examples),
             "choice": lambda: choice_sections(view, examples), "mlm": lambda: mlm_sections(view, examples),
             "embed": lambda: embed_sections(view)}
    body = build[view.recipe]() if view.recipe in build else missing(f"no task view for a '{view.recipe}' run")
    if view.live:
        body = missing("the dev examples need the final model: they appear when the run ends") + body
    return section(f"The task on dev ({view.recipe or 'unknown task'})", body)


# ------------------------------------------------------------------------------------------------ the data


def data_section(view: RunView, examples: dict) -> str:
    """What `bertkit inspect` finds, for the run's own files: labels in train and dev, token lengths with
    max_length and the share it cuts, duplicates and train/dev overlap (classify; ner: tags and sentence lengths)."""
    data = examples.get("data")
    if view.recipe not in ("classify", "ner"):  # qa / choice / mlm: their dev view shows the inputs
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


def classify_data(classifier, train_path: str | None, dev_set, columns) -> dict:
    """The data view of a classify run: its training file read as the run read it (labels, lengths, quality)."""
    from .inspection import label_distribution, token_lengths
    from .splits import duplicate_and_overlap_report
    from .tasks.classify import read_examples

    if not train_path or not Path(train_path).is_file():
        return {"data_why": f"its training file {train_path} is not there any more" if train_path else
                "the training data was not a local file"}
    train, train_columns, _ = read_examples(train_path, classifier.column_overrides, classifier.labels)
    texts = list(train[train_columns.text])
    pairs = list(train[train_columns.text_pair]) if train_columns.text_pair else None
    return {"data": {
        "labels": {"train": label_distribution(train, classifier.labels),
                   "dev": label_distribution(dev_set, classifier.labels)},
        "label_unit": "rows", "length_unit": "texts",
        "over": "of training texts over one window (chunked)" if classifier.long_doc.strategy == "chunk" else
        f"of training texts truncated ({classifier.long_doc.strategy})",
        "lengths": [int(n) for n in token_lengths(classifier.tokenizer, texts, pairs)],
        "max_length": classifier.max_length,
        "quality": duplicate_and_overlap_report(train, dev_set, columns)}}


def ner_data(tagger, train_path: str | None, dev_sentences) -> dict:
    """The data view of an ner run: entities per type in train and dev, sub-tokens per training sentence."""
    from collections import Counter

    from .inspection import word_token_lengths
    from .tasks.ner import read_examples, tags_to_spans

    if not train_path or not Path(train_path).is_file():
        return {"data_why": f"its training file {train_path} is not there any more" if train_path else
                "the training data was not a local file"}
    sentences = read_examples(train_path, tagger.settings.read_options()).sentences

    def entities(split) -> dict:
        return dict(Counter(kind for s in split for _, _, kind in tags_to_spans(s.tags)))

    lengths = word_token_lengths(tagger.tokenizer, [s.words for s in sentences])
    return {"data": {"labels": {"train": entities(sentences), "dev": entities(dev_sentences)},
                     "label_unit": "entities", "length_unit": "sentences",
                     "over": "of training sentences take 2+ windows", "lengths": [int(n) for n in lengths],
                     "max_length": tagger.settings.max_length}}


# ------------------------------------------------------------------------------------------------ dev examples


def dev_examples(view: RunView) -> dict:
    """The task's dev examples with the final model's predictions (running the model as `bertkit diagnose` does);
    {"why": ...} when there are none to show."""
    if view.live:
        return {"why": "training"}
    if view.recipe == "qa":
        return qa_examples(view)
    dev = view.dev_file
    if not dev:
        return {"why": "the run had no dev split (data.eval was not set)"}
    if not Path(dev).is_file():
        return {"why": f"its dev file {dev} is not there any more"}
    if not (view.path / "config.json").is_file():
        return {"why": "no model in the run directory"}
    from .console import quiet_mode

    reader = {"classify": classify_examples, "ner": ner_examples, "choice": choice_examples, "mlm": mlm_examples}
    if view.recipe not in reader:
        return {"why": f"no dev view for a '{view.recipe}' run"}
    train = (view.config.get("data") or {}).get("train") if isinstance(view.config.get("data"), dict) else None
    with quiet_mode():
        if view.recipe in ("classify", "ner"):
            return reader[view.recipe](str(view.path), dev, train)
        return reader[view.recipe](str(view.path), dev)


def classify_examples(run_dir: str, dev: str, train: str | None = None) -> dict:
    import numpy as np

    from .tasks.classify import load_predictor, predict_probabilities, read_examples

    classifier = load_predictor(run_dir)
    dataset, columns, _ = read_examples(dev, classifier.column_overrides, classifier.labels)
    texts = list(dataset[columns.text])
    pairs = list(dataset[columns.text_pair]) if columns.text_pair else None
    probs = predict_probabilities(classifier, texts, pairs)
    kind, gold = classifier.labels.kind, dataset["labels"]
    out = {"kind": kind, "texts": texts, "names": list(classifier.labels.names or [])}
    if kind == "single":
        out.update(gold=[int(g) for g in gold], probs=probs)
    elif kind == "regression":
        out["scatter"] = [(float(g), float(p)) for g, p in zip(gold, np.asarray(probs).reshape(-1))]
        out["predicted"] = [round(float(p), 4) for p in np.asarray(probs).reshape(-1)]
    else:
        refs = np.asarray(gold).astype(int)
        curve = []
        for threshold in np.round(np.arange(0.05, 0.951, 0.05), 2):
            chosen = probs >= threshold
            tp = float((chosen & (refs == 1)).sum())
            fp, fn = float((chosen & (refs == 0)).sum()), float((~chosen & (refs == 1)).sum())
            curve.append((float(threshold), 2 * tp / (2 * tp + fp + fn) if tp else 0.0))
        out["threshold_curve"] = curve
        threshold = classifier.labels.threshold or 0.5
        out["predicted"] = [tuple(n for n, p in zip(out["names"], row) if p >= threshold) for row in probs]
    if kind == "single":
        out["predicted"] = [out["names"][int(i)] for i in probs.argmax(axis=1)]
    out["keys"] = [f"{t} | {p}" if pairs else t for t, p in zip(texts, pairs or texts)]
    return {**out, **classify_data(classifier, train, dataset, columns)}


def ner_examples(run_dir: str, dev: str, train: str | None = None) -> dict:
    from .tasks.ner import decode, load_predictor, predict_word_probabilities, read_examples, tags_to_spans

    tagger = load_predictor(run_dir)
    every = read_examples(dev, tagger.settings.read_options()).sentences
    sentences = every[:PREDICTED_EXAMPLES]
    probs = predict_word_probabilities(tagger, sentences)

    def chars(sentence, tags):  # word spans (end inclusive or not: tags_to_spans says) -> character spans
        spans = []
        for start, end, kind in tags_to_spans(tags):
            last = min(end, len(sentence.offsets)) - 1
            spans.append((sentence.offsets[start][0], sentence.offsets[last][1], kind))
        return spans

    rows = []
    for sentence, word_probs in zip(sentences, probs):
        predicted = decode(word_probs, tagger.id2label)[0]
        rows.append({"text": sentence.text, "gold": chars(sentence, sentence.tags),
                     "predicted": chars(sentence, predicted)})
    return {"ner": rows, "keys": [r["text"] for r in rows], "predicted": [r["predicted"] for r in rows],
            **ner_data(tagger, train, every)}


def qa_examples(view: RunView) -> dict:
    from .metrics import answer_scorer
    from .tasks.qa import read_examples

    predictions = view.path / "dev_predictions.jsonl"
    if not predictions.is_file():
        return {"why": "no dev_predictions.jsonl (the run had no dev split)"}
    records = {}
    for line in predictions.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "id" in record:
            records[str(record["id"])] = record
    dev = view.dev_file
    if not dev or not Path(dev).is_file():
        return {"why": f"its dev file {dev} is not there any more: the contexts cannot be shown"}
    score = answer_scorer("zh" if view_language(view) == "zh" else "en")
    rows = []
    for example in read_examples(dev)[0]:
        record = records.get(str(example.id))
        if record is None:
            continue
        gold = [(a.get("text", ""), a.get("answer_start")) for a in example.answers]
        em, f1 = score(record.get("answer") or "", [t for t, _ in gold])
        start = record.get("start") if isinstance(record.get("start"), int) else None
        rows.append({"question": example.question, "context": example.context, "gold": gold,
                     "answer": record.get("answer") or "", "start": start,
                     "end": record.get("end") if start is not None else None, "em": em, "f1": f1})
    return {"qa": rows, "keys": [r["question"] + " | " + r["context"][:80] for r in rows],
            "predicted": [r["answer"] for r in rows]}


def choice_examples(run_dir: str, dev: str) -> dict:
    from .tasks.choice import load_predictor, predict_probabilities, read_examples

    chooser = load_predictor(run_dir)
    examples = read_examples(dev)[:PREDICTED_EXAMPLES]
    probs = predict_probabilities(chooser, examples)
    rows = [{"context": e.context, "question": e.question, "options": e.options, "label": e.label,
             "chosen": int(p.argmax()), "probs": [float(v) for v in p]} for e, p in zip(examples, probs)]
    return {"choice": rows, "keys": [r["context"][:80] + " | " + r["question"] for r in rows],
            "predicted": [r["options"][r["chosen"]] for r in rows]}


def mlm_examples(run_dir: str, dev: str) -> dict:
    """A few held-out lines with one word (the longest) hidden, and the model's top tokens for it."""
    from .tasks.mlm import load_predictor

    predictor = load_predictor(run_dir)
    mask = predictor.tokenizer.mask_token
    lines = [line.strip() for line in Path(dev).read_text(encoding="utf-8").splitlines() if line.strip()]
    chosen = []
    for line in lines[:SHOWN_EXAMPLES]:
        words = line.split()
        if len(words) >= 3:
            word = max(words[: 40], key=len)
            chosen.append((line.replace(word, mask, 1), word))
        elif len(line) >= 4:  # Chinese: no spaces, hide one character in the middle
            middle = min(len(line) // 2, 60)
            chosen.append((line[:middle] + mask + line[middle + 1:], line[middle]))
    if not chosen:
        return {"why": "no held-out line long enough to mask"}
    tops = predictor.top_tokens([text[:400] for text, _ in chosen])
    rows = [{"masked": text[:400], "word": word, "top": [(t["token"], t["score"]) for t in top[0]] if top else []}
            for (text, word), top in zip(chosen, tops)]
    return {"mlm": rows, "keys": [r["masked"] for r in rows], "predicted": [r["top"][0][0] if r["top"] else ""
                                                                             for r in rows]}


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
           "compare", "render", "read_view", "RunView", "check_reportable", "line_chart", "bar_chart", "heat_map",
           "scatter", "REPORT_FILE", "COMPARE_FILE", "dev_examples"]
