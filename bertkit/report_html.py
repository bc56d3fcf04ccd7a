"""The HTML a report page is built from: escaping, sections, tables, highlighted spans and the inline SVG figures
(line, bar, heat map, histogram, scatter). Pure strings: no file is read and nothing is fetched, so that a page is
self-contained by construction. bertkit/report.py lays out a run's page from these, and each task's `Report`
(bertkit/tasks/reporting.py) its own sections."""

from __future__ import annotations

import html
import math
import re

SHOWN_EXAMPLES = 12  # dev examples shown per group / list
PREDICTED_EXAMPLES = 200  # at most this many dev examples run through the model for ner / choice / mlm
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]


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
               marks: list[tuple[float, str]] = (), width: int = 520, height: int = 240, log_y: bool = False,
               x_label: str = "step") -> str:
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
    out.append(f'<text x="{width - right}" y="{height - 4}" text-anchor="end">{esc(x_label)}</text>')
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


def per_class_rows(metrics: dict, prefix: str = "") -> list[tuple[str, list[float]]]:
    names = [k[3:] for k in metrics if k.startswith("f1_") and k[3:] not in ("micro", "macro", "weighted")]
    return [(name, [metrics.get(f"precision_{name}"), metrics.get(f"recall_{name}"), metrics.get(f"f1_{name}")])
            for name in names]


def dev_metric_names(history: list[dict]) -> list[str]:
    """The dev scores in a Trainer's log history (`eval_accuracy` -> accuracy), sorted: every numeric eval_* key but
    the loss and the timings."""
    return sorted({key[5:] for entry in history for key in entry if key.startswith("eval_") and key != "eval_loss"
                   and isinstance(entry[key], (int, float)) and not key.endswith(("_runtime", "_per_second", "epoch"))})


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


__all__ = ["SHOWN_EXAMPLES", "PREDICTED_EXAMPLES", "COLORS", "esc", "fmt", "missing", "section", "table", "line_chart",
           "bar_chart", "heat_map", "histogram", "scatter", "per_class_rows", "dev_metric_names", "highlight"]
