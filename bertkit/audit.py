"""`bertkit audit classify|ner`: which training rows have a label that is probably wrong, found with cleanlab.

    bertkit audit classify data.train=train.csv audit.folds=5      -> runs/classify/audit/label_issues.csv, ...
    bertkit audit ner -c ner/en data.train=train.conll audit.output=audit/

A model's confidence on a row it trained on says little about that row's label: it has learned the label, wrong or
not. So the audit splits the training rows into k folds (stratified by class for single-label data, sklearn's
StratifiedKFold; KFold for multi-label and NER, seeded by run.seed), trains one model per fold with the recipe's own
`main(cfg)` and settings on the other folds, and lets it predict the rows it never saw: every row gets out-of-fold
probabilities. cleanlab's confident learning then flags the rows whose given label those probabilities contradict
(`filter.find_label_issues`, ranked by self-confidence: the probability of the given label) and scores every label
(`rank.get_label_quality_scores`, 0 = surely wrong .. 1); multi-label and NER use cleanlab's
`multilabel_classification` and `token_classification` counterparts, NER flagging words and ranking sentences.

Written into the audit directory (default <output_dir>/audit; a non-empty one is refused unless overwrite=true, which
replaces only the audit's own files):
    label_issues.csv            line, text, given, suggested, score (ner: also the flagged words), worst first
    summary.json                rows audited, folds, flagged, counts by class pair ("positive → negative": 41), ...
    train_without_issues.<ext>  the training file without the flagged rows, in the input's own format
    train_relabelled.<ext>      the training file with the flagged labels replaced by the suggestions
    out_of_fold.npz             the out-of-fold probabilities cleanlab judged (`probabilities`: one row per training
                                row, ner: per word, `rows`: how many of them each row / sentence has, `labels`), to
                                rank or filter again without training
`line` is where the row starts in the training file as an editor shows it (a CSV header is line 1; a CoNLL sentence:
its first word's line); for Parquet files and Hub datasets, which have no lines, it is the row number (1 = first).
Each fold's model is deleted once it has predicted its held-out rows (audit.keep_models=true keeps them under
<audit>/folds/).
"""

from __future__ import annotations

import copy
import csv
import gc
import shlex
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np
from pydantic import Field

from . import tasks
from .config import build_config, config_to_dict, parse_override
from .console import say, summaries_hidden
from .datafiles import clip, listing
from .errors import BertkitError
from .rundir import check_output_path, config_paths, write_json
from .tasks.label_issues import Issue, location_number

RECIPES = tasks.AUDITED  # the tasks whose module has an Audit: the table says, without importing them
ISSUES_FILE, SUMMARY_FILE, FOLDS_DIR = "label_issues.csv", "summary.json", "folds"
PROBABILITIES_FILE = "out_of_fold.npz"
WITHOUT, RELABELLED = "train_without_issues", "train_relabelled"
# what overwrite=true removes (with WITHOUT.* and RELABELLED.*)
AUDIT_NAMES = (ISSUES_FILE, SUMMARY_FILE, FOLDS_DIR, PROBABILITIES_FILE)
SHOWN_ROWS, SHOWN_PAIRS = 8, 6  # on the console; label_issues.csv has every row
ARROW = "→"


# ------------------------------------------------------------------------------------------------ the audit.* keys


@dataclass
class AuditOptions:
    folds: Annotated[int, Field(ge=2)] = 5
    """Cross-validation folds: each row's label is judged by a model that never trained on it (k models train)."""
    output: str | None = None
    """The audit directory (default: <output_dir>/audit); a non-empty one is refused unless overwrite=true."""
    keep_models: bool = False
    """Keep each fold's model under <audit>/folds/ (by default each is deleted once it has predicted its rows)."""


def split_overrides(overrides: list[str]) -> tuple[AuditOptions, list[str]]:
    """The audit.* overrides as AuditOptions (an unknown key or a bad value is one line naming it), and the others,
    which build the recipe's config exactly as `bertkit run` builds it."""
    chosen, rest = {}, []
    for text in overrides:
        key = text.partition("=")[0].strip()
        if key != "audit" and not key.startswith("audit."):
            rest.append(text)
            continue
        key, value = parse_override(text)
        if key == "audit":
            raise BertkitError(f"override '{text}': set the audit's keys one by one, e.g. audit.folds=5")
        chosen[key.removeprefix("audit.")] = value
    return build_config(AuditOptions, chosen, "the command line", prefix="audit"), rest


def check_recipe(recipe: str) -> None:
    if recipe not in RECIPES:
        names = " and ".join(RECIPES)
        uses = " or ".join(f"`bertkit audit {name} ...`" for name in RECIPES)
        raise BertkitError(f"bertkit audit {recipe}: the audit looks for wrong labels in the training data of "
                           f"{names} — use {uses}")


# ------------------------------------------------------------------------------------------------ the audit directory


def audit_directory(cfg, options: AuditOptions) -> Path:
    """Where the audit writes (audit.output, default <output_dir>/audit), checked before anything trains: a file, a
    folder holding the data it reads, or a non-empty folder without overwrite=true is refused."""
    out = Path(options.output or Path(cfg.run.output_dir) / "audit").expanduser()
    if out.exists() and not out.is_dir():
        raise BertkitError(f"audit.output {out} is a file, not a folder — choose another audit.output=...")
    # the model and data files it reads (with overwrite=true, model=<audit>/folds/fold-1/model would be deleted),
    # and the folders a run writes in: the rule every writing command follows
    check_output_path(out, inputs=[path for _, path in config_paths(config_to_dict(cfg))], flag="audit.output",
                      what="the audit")
    entries = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
    if entries and not cfg.run.overwrite:
        raise BertkitError(f"audit.output {out} already holds {listing(entries, 4)} — choose another "
                           f"audit.output=..., or set overwrite=true to replace the audit there")
    return out


def clear_old_audit(out: Path) -> None:
    """overwrite=true: the files an earlier audit wrote go; anything else in the folder is the user's and stays."""
    old = [out / name for name in AUDIT_NAMES] + list(out.glob(f"{WITHOUT}.*")) + list(out.glob(f"{RELABELLED}.*"))
    old = [path for path in old if path.exists()]
    for path in old:
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    if old:
        say(f"overwrite=true: replaced the audit in {out} ({len(old)} files and folders removed)")


def fold_config(cfg, train_file: Path, output_dir: Path):
    """The recipe's config for one fold: the same settings, the other folds as data.train, an output_dir of its
    own, never resumed, replaced or pushed. data.eval stays as set: a dev file the audit never judges, which picks
    the best checkpoint and tunes a multi-label threshold as in the real run. The held-out fold is never the dev
    split: choosing a checkpoint on it would leak its labels into the probabilities that judge them."""
    fold = copy.deepcopy(cfg)
    fold.data.train = str(train_file)
    fold.run.output_dir = str(output_dir)
    fold.run.resume, fold.run.overwrite, fold.run.push = False, False, None
    return fold


def out_of_fold(task, module, cfg, folds, work: Path, keep_models: bool) -> list:
    """Every row's prediction by the model of the fold that held it out: one recipe run per fold, on the other
    folds. Fold directories go as soon as their rows are predicted (the models are large) unless keep_models."""
    predictions: list = [None] * task.size
    batch_size = int(cfg.train.get("per_device_eval_batch_size", 64))
    try:
        for number, (train_rows, held_rows) in enumerate(folds, 1):
            fold_dir = work / f"fold-{number}"
            say(f"audit fold {number}/{len(folds)}: training on {len(train_rows)} {task.unit}, then predicting "
                f"the {len(held_rows)} held out")
            train_file = task.write(train_rows, fold_dir / f"train{task.suffix}")
            with summaries_hidden():  # the fold's summary would point at a model about to be deleted
                module.main(fold_config(cfg, train_file, fold_dir / "model"))
            for row, prediction in zip(held_rows, task.predict(fold_dir / "model", held_rows, batch_size)):
                predictions[row] = prediction
            if not keep_models:
                shutil.rmtree(fold_dir)
            gc.collect()
    finally:
        if not keep_models and work.is_dir():  # a failed fold leaves no half-written models behind
            shutil.rmtree(work)
    return predictions


# ------------------------------------------------------------------------------------------------ results


def write_issues(task, issues: list[Issue], target: Path) -> None:
    with open(target, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(task.columns_out)
        writer.writerows(task.issue_row(issue) for issue in issues)


def pair_counts(issues: list[Issue]) -> dict[str, int]:
    """'given → suggested': how many labels would change so (ner: words), most first."""
    counts = Counter(f"{given} {ARROW} {suggested}" for issue in issues for given, suggested in issue.pairs)
    return dict(counts.most_common())


def retrain_commands(recipe: str, config: str | None, overrides: list[str], output_dir: str,
                     files: dict[str, Path]) -> list[str]:
    """`bertkit run` on each cleaned file, repeating the user's other overrides, into an output_dir of its own.
    overwrite= is left out: here it replaced the audit, and must not silently replace a run."""
    kept = [text for text in overrides if text.partition("=")[0].strip() not in ("data.train", "output_dir",
                                                                                  "overwrite")]
    base = ["bertkit", "run", recipe, *(["-c", config] if config else []), *kept]
    return [shlex.join([*base, f"data.train={files[name]}", f"output_dir={output_dir}-{name.replace('_', '-')}"])
            for name in ("without_issues", "relabelled")]


WEAK_JUDGES = 0.25  # fold models that close less than this share of the gap from chance to perfect: a warning


def judges(agreement: tuple[float, float]) -> dict:
    """How good the fold models were at the given labels: flags from models barely above chance are guesses."""
    accuracy, chance = agreement
    lift = (accuracy - chance) / max(1 - chance, 1e-9)
    return {"accuracy": round(accuracy, 4), "chance": round(chance, 4), "weak": bool(lift < WEAK_JUDGES)}


def summarize(recipe: str, task, issues: list[Issue], folds: int, files: dict[str, Path], commands: list[str],
              seed: int, agreement: tuple[float, float]) -> dict:
    unit = issues[0].where.split()[0] if issues else "line"
    return {
        "recipe": recipe, "train_file": str(task.path), "rows": task.size, "unit": task.unit, "folds": folds,
        "seed": seed, "flagged": len(issues), "flagged_share": round(len(issues) / max(task.size, 1), 4),
        "judges": judges(agreement),
        "pairs": pair_counts(issues),
        "line": ("the line each row starts on in the training file (header = line 1)" if unit == "line" else
                 "the row number in the training file (1 = first row)"),
        "top": [{"line": location_number(i.where), "text": clip(i.text, 120), "given": i.given,
                 "suggested": i.suggested, "score": round(i.score, 6), **({"words": i.words} if i.words else {})}
                for i in issues[:20]],
        "files": {name: str(path) for name, path in files.items()}, "retrain": commands,
    }


def audit(recipe: str, module, cfg, options: AuditOptions, overrides: list[str], config: str | None = None) -> dict:
    """The whole audit (see the module docstring): checks first, then one training per fold, cleanlab, the files.
    Returns what summary.json holds."""
    out = audit_directory(cfg, options)
    task = tasks.task_part(recipe, "Audit")(cfg)  # the task's view of its training file (label_issues.py)
    folds = task.folds(options.folds, cfg.run.seed)
    clear_old_audit(out)  # only now: a typo or a bad fold count leaves an earlier audit as it was
    out.mkdir(parents=True, exist_ok=True)
    predictions = out_of_fold(task, module, cfg, folds, out / FOLDS_DIR, options.keep_models)
    blocks = [np.atleast_2d(p) for p in predictions]
    np.savez_compressed(out / PROBABILITIES_FILE, probabilities=np.concatenate(blocks),
                        rows=np.array([len(b) for b in blocks]), labels=np.array(task.names))
    issues, relabel = task.issues(predictions)
    flagged = {issue.row for issue in issues}
    check_not_all_flagged(task, len(flagged), task.agreement(predictions), out)
    files = {"label_issues": out / ISSUES_FILE,
             "without_issues": task.write([r for r in range(task.size) if r not in flagged],
                                          out / f"{WITHOUT}{task.suffix}"),
             "relabelled": task.write(range(task.size), out / f"{RELABELLED}{task.suffix}", relabel)}
    write_issues(task, issues, files["label_issues"])
    commands = retrain_commands(recipe, config, overrides, cfg.run.output_dir, files)
    summary = summarize(recipe, task, issues, options.folds, files, commands, cfg.run.seed, task.agreement(predictions))
    write_json(out / SUMMARY_FILE, summary, "the audit summary")
    return summary


def check_not_all_flagged(task, flagged: int, agreement: tuple[float, float], out: Path) -> None:
    """Every row flagged: the fold models learned nothing to judge by, and the cleaned file would be empty (with a
    retrain command on it). Said, and the audit stops before writing the cleaned files."""
    if flagged < task.size:
        return
    judged = judges(agreement)
    what = "tag" if task.unit == "sentences" else "label"
    raise BertkitError(f"every one of the {task.size} {task.unit} of {task.path} was flagged: the fold models learned "
                       f"nothing to judge by (they agree with the given {what}s on {judged['accuracy']:.1%}; always "
                       f"the commonest: {judged['chance']:.1%}), so no cleaned file was written — train the folds "
                       "longer (train.num_train_epochs=...) or with a larger learning rate, then audit again "
                       f"(overwrite=true replaces {out})")


def judges_line(judged: dict, unit: str) -> str:
    """One line on the fold models' agreement with the given labels; a warning when they are too weak to judge."""
    what = "tag" if unit == "sentences" else "label"
    line = (f"the fold models agree with the given {what} on {judged['accuracy']:.1%} of held-out "
            f"{'words' if unit == 'sentences' else unit} (always the commonest {what}: {judged['chance']:.1%})")
    if judged["weak"]:
        line += (" — warning: that is barely above chance, so the flags below are close to guesses; train the folds "
                 "longer (train.num_train_epochs=...) or with a larger learning rate before acting on them")
    return line


def report_lines(summary: dict) -> list[str]:
    """The audit on the console: the flagged share, the commonest class pairs, the worst rows, the files and the two
    commands that retrain on the cleaned files."""
    lines = [f"audited {summary['rows']} {summary['unit']} of {summary['train_file']} in {summary['folds']} folds: "
             f"{summary['flagged']} flagged as likely label errors ({summary['flagged_share']:.1%})"]
    lines.append(judges_line(summary["judges"], summary["unit"]))
    for pair, count in list(summary["pairs"].items())[:SHOWN_PAIRS]:
        lines.append(f"  {count:>6}  {pair}")
    if summary["top"]:
        lines.append("worst first (line: given → suggested, label quality score):")
    for row in summary["top"][:SHOWN_ROWS]:
        words = f" [{clip(row['words'], 30)}]" if row.get("words") else ""
        lines.append(f"  {row['line']:>6}: {row['given']} {ARROW} {row['suggested']}  {row['score']:.3f}  "
                     f"{clip(row['text'], 60)}{words}")
    files, kept = summary["files"], summary["rows"] - summary["flagged"]
    lines.append(f"wrote {files['label_issues']}, {Path(files['label_issues']).with_name(SUMMARY_FILE)}")
    lines.append(f"      {files['without_issues']} ({kept} {summary['unit']}), {files['relabelled']} "
                 f"({summary['rows']} {summary['unit']}, {summary['flagged']} relabelled)")
    lines.append("retrain on the cleaned data (without the flagged rows / with the suggested labels):")
    return lines + [f"  {command}" for command in summary["retrain"]]


__all__ = ["AuditOptions", "split_overrides", "check_recipe", "audit", "report_lines", "fold_config", "out_of_fold",
           "audit_directory", "clear_old_audit", "retrain_commands", "pair_counts", "summarize", "judges",
           "judges_line", "RECIPES", "ISSUES_FILE", "SUMMARY_FILE", "PROBABILITIES_FILE", "WITHOUT", "RELABELLED"]
