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
import dataclasses
import gc
import json
import shlex
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import datasets
import numpy as np
from pydantic import Field

from .config import build_config, config_to_dict, parse_override
from .console import say, summaries_hidden
from .datafiles import clip, column_values, json_lines, listing, read_table, read_text, row_location
from .errors import BertkitError
from .rundir import check_output_path, config_paths, write_json

RECIPES = ("classify", "ner")
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
        raise BertkitError(f"bertkit audit {recipe}: the audit looks for wrong labels in the training data of "
                           f"classify and ner — use `bertkit audit classify ...` or `bertkit audit ner ...`")


# ------------------------------------------------------------------------------------------------ shared pieces


@dataclass
class Issue:
    """One likely label error: a row (ner: a sentence) of the training file, its given and suggested labels."""

    row: int  # index among the training rows (sentences)
    where: str  # "line 7", or "row 7" (Parquet, Hub)
    text: str
    given: str
    suggested: str
    score: float  # cleanlab's label quality score: 0 (surely wrong) .. 1
    words: str = ""  # ner: the flagged word(s)
    pairs: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (given, suggested) per label changed


def check_fold_count(folds: int, count: int, unit: str, path: str) -> None:
    if count < 2:
        held = f"{count} {unit if count != 1 else unit[:-1]}"
        raise BertkitError(f"data.train {path} holds {held}: an audit judges each by a model trained on the others, "
                           "so it needs at least 2 (and a few dozen to mean much) — audit a larger file")
    if folds > count:
        raise BertkitError(f"audit.folds={folds} is more than the {count} {unit} of data.train {path} — set "
                           f"audit.folds={max(2, count)} or fewer")


def kfold(count: int, folds: int, seed: int, classes=None) -> list[tuple[np.ndarray, np.ndarray]]:
    """(training rows, held-out rows) of each fold: stratified by `classes` when given, else plain KFold."""
    from sklearn.model_selection import KFold, StratifiedKFold

    if classes is None:
        return list(KFold(folds, shuffle=True, random_state=seed).split(np.zeros(count)))
    return list(StratifiedKFold(folds, shuffle=True, random_state=seed).split(np.zeros(count), classes))


def by_name(probs: np.ndarray, names_from: list[str], names_to: list[str], normalise: bool) -> np.ndarray:
    """(N, C_from) -> (N, C_to): each column moved to its label's place. A label the fold's model never saw (no
    training row of that fold had it) gets probability 0; `normalise` makes each row sum to 1 again, as cleanlab
    checks for single-label and token probabilities."""
    out = np.zeros((len(probs), len(names_to)), dtype=np.float64)
    place = {name: i for i, name in enumerate(names_from)}
    for j, name in enumerate(names_to):
        if name in place:
            out[:, j] = probs[:, place[name]]
    return out / out.sum(1, keepdims=True).clip(min=1e-12) if normalise else out


def location_number(where: str) -> int:
    """7 from 'line 7', 'row 7' or 'train.conll line 7'."""
    return int(where.rsplit(" ", 1)[-1])


def is_json_array(path: str) -> bool:
    """A .json file holding one array (else JSON lines, which .json files may hold too)."""
    return path.lower().endswith(".json") and read_text(path).lstrip().startswith("[")


def write_json_records(records: list[dict], target: Path, array: bool) -> None:
    lines = [json.dumps(record, ensure_ascii=False) for record in records]
    text = "[\n" + ",\n".join(lines) + "\n]\n" if array else "".join(line + "\n" for line in lines)
    target.write_text(text, encoding="utf-8")


# ------------------------------------------------------------------------------------------------ cleanlab


def single_label_issues(given: np.ndarray, probs: np.ndarray) -> list[tuple[int, int, float]]:
    """(row, suggested class, label quality score) of each likely label error, worst first. cleanlab flags the rows
    (confident learning) and ranks them by self-confidence; the suggestion is the likeliest class other than the
    given one (the row is flagged because the given one is doubted)."""
    import cleanlab.filter
    import cleanlab.rank

    ranked = cleanlab.filter.find_label_issues(given, probs, return_indices_ranked_by="self_confidence")
    scores = cleanlab.rank.get_label_quality_scores(given, probs)
    others = probs.copy()
    others[np.arange(len(given)), given] = -1.0
    return [(int(row), int(others[row].argmax()), float(scores[row])) for row in ranked]


def multi_label_issues(given: list[list[int]], probs: np.ndarray,
                       thresholds: np.ndarray) -> list[tuple[int, list[int], float]]:
    """(row, suggested classes, label quality score) of each likely label error, worst first (cleanlab's
    multilabel_classification). The suggestion is the classes at or over the fold model's threshold; where that is
    the given set, the one class whose probability most contradicts its given value is flipped."""
    from cleanlab.multilabel_classification import filter as multi_filter
    from cleanlab.multilabel_classification import rank as multi_rank

    ranked = multi_filter.find_label_issues(given, probs, return_indices_ranked_by="self_confidence")
    scores = multi_rank.get_label_quality_scores(given, probs)
    found = []
    for row in ranked:
        suggested = {int(c) for c in np.flatnonzero(probs[row] >= thresholds[row])}
        if suggested == set(given[row]):
            hot = np.isin(np.arange(probs.shape[1]), given[row])
            suggested ^= {int(np.abs(hot - probs[row]).argmax())}
        found.append((int(row), sorted(suggested), float(scores[row])))
    return found


def token_issues(given: list[np.ndarray], probs: list[np.ndarray]) -> list[tuple[int, list[tuple[int, int]], float]]:
    """(sentence, [(word, suggested tag id)], sentence quality score) of each sentence with likely tag errors, worst
    first: cleanlab's token_classification flags the words, and scores a sentence by its worst word. A word's
    suggestion is its likeliest tag other than the given one."""
    from cleanlab.token_classification import filter as token_filter
    from cleanlab.token_classification import rank as token_rank

    flagged = token_filter.find_label_issues(given, probs, return_indices_ranked_by="self_confidence")
    sentence_scores, _ = token_rank.get_label_quality_scores(given, probs)
    words: dict[int, list[int]] = {}
    for sentence, word in flagged:
        words.setdefault(int(sentence), []).append(int(word))
    found = []
    for sentence in sorted(words, key=lambda s: sentence_scores[s]):
        suggestions = []
        for word in sorted(words[sentence]):
            others = probs[sentence][word].copy()
            others[given[sentence][word]] = -1.0
            suggestions.append((word, int(others.argmax())))
        found.append((sentence, suggestions, float(sentence_scores[sentence])))
    return found


# ------------------------------------------------------------------------------------------------ classify


class ClassifyAudit:
    """A classification training file as the audit sees it: texts and labels read as the recipe reads them, and the
    file as written (`raw`), whose rows the output files copy with only the label cell changed."""

    unit = "rows"
    columns_out = ["line", "text", "given", "suggested", "score"]

    def __init__(self, cfg):
        from .tasks import classify as task

        if not cfg.data.train:
            raise BertkitError("no training data — set data.train=<file> (csv, tsv, json, jsonl, parquet)")
        self.path = cfg.data.train
        dataset, self.columns, self.labels = task.read_examples(
            self.path, dataclasses.asdict(cfg.data.columns), None, require_label=True,
            label_kind=cfg.data.label_kind, delimiter=cfg.data.label_delimiter)
        self.check_labels()
        self.names = list(self.labels.names)
        self.raw = read_table(self.path)  # the same rows in the same order, as written (load_split drops none)
        self.texts = column_values(dataset, self.columns.text)
        self.pairs = column_values(dataset, self.columns.text_pair) if self.columns.text_pair else None
        self.given = column_values(dataset, "labels")  # class ids, or multi-hot rows
        self.raw_labels = column_values(self.raw, self.columns.label)
        self.raw_class = {}  # single-label: class id -> the label as the file writes it (1, "positive", an id)
        if self.labels.kind == "single":
            for value, raw in zip(self.given, self.raw_labels):
                self.raw_class.setdefault(value, raw)
        self.thresholds = np.full(len(self.texts), 0.5)  # multi-label: each row's fold model's threshold
        suffix = Path(self.path).suffix.lower()
        self.suffix = suffix if Path(self.path).is_file() and suffix in (".csv", ".tsv", ".json", ".jsonl",
                                                                          ".parquet") else ".parquet"
        self.json_array = self.suffix == ".json" and is_json_array(self.path)
        if self.pairs is not None:
            self.columns_out = ["line", "text", "text_pair", "given", "suggested", "score"]

    @property
    def size(self) -> int:
        return len(self.texts)

    def check_labels(self) -> None:
        column = f"column '{self.columns.label}' of data.train {self.path}"
        if self.labels.kind == "regression":
            raise BertkitError(f"{column} holds regression scores — the audit looks for rows in the wrong class: "
                               f"audit a column of classes (set data.label_kind=single if these numbers are classes)")
        if len(self.labels.names) < 2:
            raise BertkitError(f"{column} has one class ({self.labels.names[0]!r}) — the audit compares classes, "
                               f"so it needs at least two")

    def folds(self, folds: int, seed: int):
        check_fold_count(folds, self.size, self.unit, self.path)
        if self.labels.kind != "single":
            return kfold(self.size, folds, seed)
        counts = Counter(self.given)
        smallest, count = min(counts.items(), key=lambda item: (item[1], item[0]))
        if folds > count:
            fewer = f"set audit.folds={count} or fewer, or " if count >= 2 else ""
            raise BertkitError(f"audit.folds={folds} is more than the {count} row{'s' * (count > 1)} of class "
                               f"{self.labels.names[smallest]!r} in data.train {self.path}: stratified folds need a "
                               f"row of every class in each — {fewer}add rows of that class")
        return kfold(self.size, folds, seed, np.asarray(self.given))

    def write(self, rows, target: Path, relabel: dict | None = None) -> Path:
        """The training file's `rows` (in file order) at `target`, in the input's format; `relabel`: row -> the
        label cell to write instead."""
        records = self.raw.select([int(r) for r in rows]).to_list()
        for record, row in zip(records, rows):
            if relabel and int(row) in relabel:
                record[self.columns.label] = relabel[int(row)]
        target.parent.mkdir(parents=True, exist_ok=True)
        if self.suffix in (".csv", ".tsv"):
            with open(target, "w", encoding="utf-8", newline="") as handle:
                writer = csv.writer(handle, delimiter="\t" if self.suffix == ".tsv" else ",")
                writer.writerow(self.raw.column_names)
                writer.writerows([["" if r[c] is None else r[c] for c in self.raw.column_names] for r in records])
        elif self.suffix == ".parquet":  # also a Hub dataset: its features (ClassLabel names) travel along
            datasets.Dataset.from_list(records, features=self.raw.features).to_parquet(str(target))
        else:
            write_json_records(records, target, self.json_array)
        return target

    def predict(self, model_dir: Path, rows, batch_size: int) -> list[np.ndarray]:
        """Each held-out row's probabilities from the fold's model, columns in the training file's label order."""
        from .tasks import classify as task

        classifier = task.load_predictor(str(model_dir))
        texts = [self.texts[i] for i in rows]
        pairs = [self.pairs[i] for i in rows] if self.pairs is not None else None
        probs = task.predict_probabilities(classifier, texts, pairs, batch_size)
        self.thresholds[rows] = classifier.labels.threshold
        return list(by_name(probs, classifier.labels.names, self.labels.names, self.labels.kind == "single"))

    def issues(self, predictions: list[np.ndarray]) -> tuple[list[Issue], dict]:
        """The likely label errors, worst first, and row -> the relabelled label cell."""
        probs, names = np.stack(predictions), self.labels.names
        if self.labels.kind == "single":
            found = single_label_issues(np.asarray(self.given), probs)
            relabel = {row: self.raw_class[suggested] for row, suggested, _ in found}
            shown = [(row, names[self.given[row]], names[suggested], score) for row, suggested, score in found]
        else:
            given = [[int(c) for c in np.flatnonzero(np.asarray(hot) > 0.5)] for hot in self.given]
            found = multi_label_issues(given, probs, self.thresholds)
            relabel = {row: self.multi_cell(row, [names[c] for c in suggested]) for row, suggested, _ in found}
            shown = [(row, self.joined(given[row]), self.joined(suggested), score) for row, suggested, score in found]
        return [self.issue(row, given, suggested, score) for row, given, suggested, score in shown], relabel

    def agreement(self, predictions: list[np.ndarray]) -> tuple[float, float]:
        """(how often the fold models' out-of-fold prediction is the given label, the same for always answering the
        commonest one): per row for single-label, per (row, label) decision for multi-label."""
        probs = np.stack(predictions)
        if self.labels.kind == "single":
            given = np.asarray(self.given)
            return float((probs.argmax(1) == given).mean()), float(np.bincount(given).max() / len(given))
        hot = np.asarray(self.given) > 0.5
        chosen = probs >= self.thresholds[:, None]
        return float((chosen == hot).mean()), float(np.maximum(hot.mean(0), 1 - hot.mean(0)).mean())

    def issue(self, row: int, given: str, suggested: str, score: float) -> Issue:
        text = self.texts[row] if self.pairs is None else f"{self.texts[row]} ||| {self.pairs[row]}"
        return Issue(row, row_location(self.raw, row), text, given, suggested, score, pairs=[(given, suggested)])

    def issue_row(self, issue: Issue) -> list:
        texts = [self.texts[issue.row]] + ([self.pairs[issue.row]] if self.pairs is not None else [])
        return [location_number(issue.where), *texts, issue.given, issue.suggested, round(issue.score, 6)]

    def joined(self, ids: list[int]) -> str:
        """Multi-label class ids as one string for people: 'billing;returns', or '(none)'."""
        return self.labels.delimiter.join(self.labels.names[c] for c in ids) or "(none)"

    def multi_cell(self, row: int, names: list[str]):
        """Multi-label names as the file writes this row's labels: a list (of ClassLabel ids, for a Hub dataset's
        feature), or one string joined by data.label_delimiter."""
        if not isinstance(self.raw_labels[row], list):
            return self.labels.delimiter.join(names)
        inner = getattr(self.raw.features[self.columns.label], "feature", None)
        return [inner.str2int(name) for name in names] if isinstance(inner, datasets.ClassLabel) else names


# ------------------------------------------------------------------------------------------------ ner


class NerAudit:
    """A NER training file as the audit sees it: sentences read as the recipe reads them, and the file's own lines
    (CoNLL) or objects (JSONL), which the output files copy with only the tags of flagged sentences changed."""

    unit = "sentences"
    columns_out = ["line", "text", "words", "given", "suggested", "score"]

    def __init__(self, cfg):
        from .tasks import ner as task

        if not cfg.data.train:
            raise BertkitError("no training data — set data.train=<file> (CoNLL columns or JSONL)")
        self.path = str(cfg.data.train)
        options = task.ReadOptions(scheme=cfg.data.scheme, repair=cfg.data.repair_tags,
                                   skip_bad=cfg.data.skip_bad_examples, split=cfg.data.split, format=cfg.data.format)
        data = task.read_examples(self.path, options)
        if not data.entity_types:
            raise BertkitError(f"data.train {self.path} has no entity tags (every word is O) — the audit compares "
                               f"tags, so it needs entities")
        self.sentences, self.scheme = data.sentences, data.scheme
        self.names = task.label_names(data.entity_types, data.scheme)
        self.ids = {name: i for i, name in enumerate(self.names)}
        # tags written back in the scheme the file declares (an IOB1 file stays IOB1); auto read them as data.scheme
        self.file_scheme = cfg.data.scheme if cfg.data.scheme in task.SCHEMES else data.scheme
        self.suffix = Path(self.path).suffix
        self.conll = cfg.data.format == "conll" or (cfg.data.format == "auto"
                                                      and self.suffix.lower() not in (".json", ".jsonl"))
        self.json_array = not self.conll and is_json_array(self.path)
        if self.conll:
            self.lines = [line.rstrip("\r") for line in read_text(self.path).split("\n")]  # as ner_files reads
        else:
            self.objects = dict(self.json_objects())

    @property
    def size(self) -> int:
        return len(self.sentences)

    def json_objects(self):
        """(line number, object) of the file, numbered as the NER reader numbers its sentences."""
        if self.json_array:
            table = read_table(self.path)
            yield from ((location_number(row_location(table, i)), row) for i, row in enumerate(table))
        else:
            yield from json_lines(self.path, read_text(self.path))

    def folds(self, folds: int, seed: int):
        check_fold_count(folds, self.size, self.unit, self.path)
        return kfold(self.size, folds, seed)

    def write(self, rows, target: Path, relabel: dict | None = None) -> Path:
        """The sentences `rows` (in file order) at `target`, in the input's format; `relabel`: sentence -> its new
        tags (written in the file's scheme)."""
        relabel = relabel or {}
        target.parent.mkdir(parents=True, exist_ok=True)
        if self.conll:
            out = []
            for row in rows:
                sentence, tags = self.sentences[row], relabel.get(int(row))
                for i, number in enumerate(sentence.word_lines):
                    out.append(self.lines[number - 1] if tags is None else with_last_column(self.lines[number - 1],
                                                                                            tags[i]))
                out.append("")
            target.write_text("\n".join(out) + "\n", encoding="utf-8")
            return target
        records = []
        for row in rows:
            record = copy.deepcopy(self.objects[location_number(self.sentences[row].where)])
            if int(row) in relabel:
                set_tags(record, self.sentences[row], relabel[int(row)])
            records.append(record)
        write_json_records(records, target, self.json_array)
        return target

    def predict(self, model_dir: Path, rows, batch_size: int) -> list[np.ndarray]:
        """Each held-out sentence's (words, tags) probabilities from the fold's model, in the training labels' order."""
        from .tasks import ner as task

        tagger = task.load_predictor(str(model_dir))
        probs = task.predict_word_probabilities(tagger, [self.sentences[i] for i in rows], batch_size)
        fold_names = [tagger.id2label[i] for i in range(len(tagger.id2label))]
        return [by_name(p, fold_names, self.names, normalise=True) for p in probs]

    def agreement(self, predictions: list[np.ndarray]) -> tuple[float, float]:
        """(how often the fold models' out-of-fold tag is the given one, the share of the commonest tag), per word."""
        given = np.concatenate([[self.ids[tag] for tag in s.tags] for s in self.sentences]).astype(int)
        predicted = np.concatenate([p.argmax(-1) for p in predictions])
        return float((predicted == given).mean()), float(np.bincount(given).max() / len(given))

    def issues(self, predictions: list[np.ndarray]) -> tuple[list[Issue], dict]:
        """The sentences with likely tag errors, worst first, and sentence -> its relabelled tags."""
        from .tasks.ner import repair_tags

        given = [np.array([self.ids[tag] for tag in s.tags]) for s in self.sentences]
        issues, relabel = [], {}
        for row, suggestions, score in token_issues(given, predictions):
            sentence = self.sentences[row]
            tags = list(sentence.tags)
            for word, suggested in suggestions:
                tags[word] = self.names[suggested]
            # a lone I- becomes B-, so that the relabelled file reads without data.repair_tags; the pairs show the
            # tags as read (IOB1 files as IOB2), the file gets them in its own scheme
            relabel[row] = repair_tags(tags, self.file_scheme)
            shown = repair_tags(tags, self.scheme)
            pairs = [(sentence.tags[w], shown[w]) for w, _ in suggestions]
            where = " ".join(sentence.where.rsplit(" ", 2)[-2:])  # "line 12" of "train.conll line 12"
            issues.append(Issue(row, where, " ".join(sentence.words), " | ".join(g for g, _ in pairs),
                                " | ".join(s for _, s in pairs), score,
                                words=" | ".join(sentence.words[w] for w, _ in suggestions), pairs=pairs))
        return issues, relabel

    def issue_row(self, issue: Issue) -> list:
        return [location_number(issue.where), issue.text, issue.words, issue.given, issue.suggested,
                round(issue.score, 6)]


def with_last_column(line: str, tag: str) -> str:
    """A CoNLL token line with its last column (the tag) replaced, the other columns and separators kept."""
    stripped = line.rstrip()
    return stripped[: len(stripped) - len(stripped.split()[-1])] + tag


def set_tags(record: dict, sentence, tags: list[str]) -> None:
    """New tags into a JSONL object: its tag list (tokens + tags), or its entity spans rebuilt from the tags in
    character offsets (text + entities), under the key the reader took them from."""
    from .tasks.ner import tags_to_spans

    if any(record.get(key) is not None for key in ("tokens", "words")):
        key = next((k for k in ("tags", "ner_tags", "labels") if record.get(k) is not None), "tags")
        record[key] = tags
        return
    key = next((k for k in ("entities", "spans", "label") if record.get(k) is not None), "entities")
    record[key] = [{"start": sentence.offsets[start][0], "end": sentence.offsets[end - 1][1], "type": kind}
                   for start, end, kind in tags_to_spans(tags)]


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
    task = ClassifyAudit(cfg) if recipe == "classify" else NerAudit(cfg)
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


__all__ = ["AuditOptions", "split_overrides", "check_recipe", "audit", "report_lines", "Issue", "ClassifyAudit",
           "NerAudit", "single_label_issues", "multi_label_issues", "token_issues", "kfold", "by_name",
           "fold_config", "out_of_fold", "audit_directory", "clear_old_audit", "retrain_commands", "pair_counts",
           "summarize", "judges", "judges_line", "RECIPES", "ISSUES_FILE", "SUMMARY_FILE", "PROBABILITIES_FILE",
           "WITHOUT", "RELABELLED"]
