"""What a task shows of a run: its part of report.html (`Report`) and, for a model another library loads, its part of
the model card (`Card`); the checks before a model runs on a run's dev file.

Each task module with a view of its own defines `class Report(reporting.Report)`; bertkit/report.py asks the run's
task for it (`tasks.task_part(recipe, "Report")`, the base when a task has none) and knows nothing of any task:

    Report.default_metric                the selection metric when the run's config names none
    Report.shows_data                    whether the page has a data section (labels per split, token lengths)
    Report().examples(view)              the dev examples with the final model's predictions (and the data view);
                                         {"why": ...} when there are none. "keys" and "predicted" are what
                                         `bertkit report A B` compares between runs
    Report().sections(view, examples, diagnosis)   the task's HTML under "The task on dev"
    Report().chance(view, examples)      (chance level, what it is) of the selection metric, or None
    Report().answer_lines(view)          more lines under the answer (HTML)

`view` is report.py's RunView: the run directory's files as read (path, recipe, history, metrics, config, eval,
dev_file, live).

A task whose model loads in a library other than transformers (sentence-transformers' embedding models and
cross-encoders) defines `class Card(reporting.Card)`; bertkit/model_card.py asks for it
(`tasks.task_part(tasks.sentence_transformers_kind(model_dir), "Card")`) and writes the transformers card otherwise:

    Card(model_dir, run_metrics)         the model folder and its metrics.json
    .tag, .tags, .library                the Hub's pipeline tag, the card's extra tags, the library that loads it
    .intended_use                        what the model does, for "Intended use"
    .note()                              how it loads (after "trained with bertkit")
    .results()                           the Results section's lines ([]: the card's own metrics table)
    .metrics()                           the model-index metrics (None: the card's own)
    .usage(repo, lang)                   the "How to use" snippet, in the library that loads it
"""

from __future__ import annotations

import json
from pathlib import Path

from bertkit.report_html import missing


def read_json(path: Path, default):
    """`path`'s JSON when it reads as the same type as `default`, else `default`: a report never fails on a file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return default
    return data if isinstance(data, type(default)) else default


def cannot_run_on_dev(view) -> str | None:
    """Why the final model cannot be run on the run's dev file, or None when it can."""
    dev = view.dev_file
    if not dev:
        return "the run had no dev split (data.eval was not set)"
    if not Path(dev).is_file():
        return f"its dev file {dev} is not there any more"
    if not (view.path / "config.json").is_file():
        return "no model in the run directory"
    return None


def train_file(view) -> str | None:
    """The run's training file (data.train of its config), for the data view."""
    data = view.config.get("data")
    return data.get("train") if isinstance(data, dict) else None


def language_of(view) -> str:
    return str(view.metrics.get("language") or view.config.get("language") or "en")


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def markdown_cell(text) -> str:
    """A Markdown table cell: a pipe or newline in a label would break the table."""
    return str(text).replace("|", "\\|").replace("\n", " ")


class Card:
    """A task's part of the model card, for a model that another library loads (see the module docstring)."""

    tag = ""
    tags: list[str] = []
    library = "transformers"
    intended_use = ""

    def __init__(self, model_dir: Path, run_metrics: dict):
        self.model_dir, self.run_metrics = Path(model_dir), run_metrics

    def note(self) -> str:
        return ""

    def results(self) -> list[str]:
        return []

    def metrics(self) -> dict | None:
        return None

    def usage(self, repo: str, lang: str) -> str:
        return ""


class Report:
    """The default of a task's report part: no dev view, no chance level, nothing more under the answer."""

    default_metric = ""
    shows_data = False

    def examples(self, view) -> dict:
        return {"why": cannot_run_on_dev(view) or f"no dev view for a '{view.recipe}' run"}

    def sections(self, view, examples: dict, diagnosis) -> str:
        return missing(f"no task view for a '{view.recipe}' run")

    def chance(self, view, examples: dict) -> tuple[float, str] | None:
        return None

    def answer_lines(self, view) -> list[str]:
        return []


__all__ = ["Report", "Card", "markdown_table", "markdown_cell", "read_json", "cannot_run_on_dev", "train_file",
           "language_of"]
