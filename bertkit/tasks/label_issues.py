"""Finding wrong labels in training data (`bertkit audit`): the record of one likely error (`Issue`), the
cross-validation folds every row is judged out of, moving a fold model's probabilities to the file's label order,
cleanlab's confident learning per label kind (single-label, multi-label, token tags), and writing JSON records back
in their file's form. A task whose training rows can be audited builds its `Audit` on these (classify and ner:
bertkit/tasks/classify.py, bertkit/tasks/ner.py); bertkit/audit.py trains the folds and writes the files."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bertkit.datafiles import read_text
from bertkit.errors import BertkitError


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


__all__ = ["Issue", "check_fold_count", "kfold", "by_name", "location_number", "is_json_array",
           "write_json_records", "single_label_issues", "multi_label_issues", "token_issues"]
