"""`bertkit audit`: out-of-fold predictions from one recipe run per fold, cleanlab's verdict, and the files written.

End to end on tiny random BERTs and toy data a tiny model learns in a few epochs (each class its own words): a
deliberately flipped label (classify) and a wrong tag (ner) are flagged, the cleaned files keep the input's format.
The cleanlab glue of multi-label data, the relabelled cells and the audit directory rules are checked on their own,
and every refusal is one line with exit code 2."""

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from bertkit import audit as au
from bertkit.tasks import classify, label_issues, ner
from bertkit.cli import app, load_recipe
from bertkit.config import load_config
from helpers import one_line_error, write_csv

runner = CliRunner()
pytestmark = pytest.mark.usefixtures("one_thread")

FRUIT = ["apple", "banana", "cherry", "grape", "lemon", "mango"]
VEHICLES = ["car", "truck", "train", "plane", "boat", "bike"]
FLIPPED = [5, 12]  # row indices whose label the classify test flips: lines 7 and 14 (the header is line 1)
PEOPLE, CITIES = ["anna", "bob", "carl", "dora"], ["oslo", "paris", "rome", "lima"]
# a few epochs at a high learning rate: enough for a 2-layer random BERT to learn words that decide the class
LEARN = ["precision=fp32", "data.max_length=16", "train.num_train_epochs=8", "train.per_device_train_batch_size=4",
         "train.learning_rate=5.0e-3", "train.warmup_steps=0", "train.save_strategy=no", "audit.folds=2"]


def toy_rows(count: int = 32, seed: int = 0) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(count):
        label = "fruit" if i % 2 == 0 else "vehicle"
        rows.append([" ".join(rng.choice(FRUIT if label == "fruit" else VEHICLES, size=3)), label])
    return rows


def read_rows(path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


# ------------------------------------------------------------------------------------------------ end to end


def test_a_flipped_label_is_flagged_first_and_both_cleaned_files_are_written(tiny_model_dir, tmp_path):
    clean = toy_rows()
    noisy = [list(row) for row in clean]
    for row in FLIPPED:
        noisy[row][1] = "vehicle" if noisy[row][1] == "fruit" else "fruit"
    train = write_csv(tmp_path / "train.csv", ["text", "label"], noisy)
    out = tmp_path / "run"
    result = runner.invoke(app, ["audit", "classify", f"model={tiny_model_dir}", f"data.train={train}",
                                 f"output_dir={out}", *LEARN])
    assert result.exit_code == 0, result.output
    audit_dir = out / "audit"
    with open(audit_dir / au.ISSUES_FILE, newline="") as handle:
        assert next(csv.reader(handle)) == ["line", "text", "given", "suggested", "score"]
    issues = read_rows(audit_dir / au.ISSUES_FILE)
    assert {int(r["line"]) for r in issues[:2]} == {row + 2 for row in FLIPPED}
    for issue in issues[:2]:  # the line is the file's: its text there, and the suggestion is the true label
        row = int(issue["line"]) - 2
        assert issue["text"] == noisy[row][0] and issue["given"] == noisy[row][1]
        assert issue["suggested"] == clean[row][1]
    scores = [float(r["score"]) for r in issues]
    assert scores == sorted(scores) and all(0 <= s <= 1 for s in scores)

    summary = json.loads((audit_dir / au.SUMMARY_FILE).read_text())
    assert summary["rows"] == 32 and summary["folds"] == 2 and summary["flagged"] == len(issues)
    # the fold models learned the words: they agree with the given labels well above the commonest label's share
    assert summary["judges"]["chance"] == 0.5 and summary["judges"]["accuracy"] >= 0.75
    assert not summary["judges"]["weak"] and "the fold models agree with the given label on" in result.output
    assert "warning" not in result.output
    assert summary["pairs"].get("fruit → vehicle", 0) >= 1 and summary["pairs"].get("vehicle → fruit", 0) >= 1
    flagged = {int(r["line"]) - 2 for r in issues}
    without = read_rows(audit_dir / "train_without_issues.csv")
    assert [[r["text"], r["label"]] for r in without] == [row for i, row in enumerate(noisy) if i not in flagged]
    relabelled = read_rows(audit_dir / "train_relabelled.csv")
    suggested = {int(r["line"]) - 2: r["suggested"] for r in issues}
    assert [[r["text"], r["label"]] for r in relabelled] == [[t, suggested.get(i, label)]
                                                            for i, (t, label) in enumerate(noisy)]
    assert not (audit_dir / au.FOLDS_DIR).exists()  # the fold models are deleted
    saved = np.load(audit_dir / au.PROBABILITIES_FILE)  # what cleanlab judged, kept to filter again
    assert saved["probabilities"].shape == (32, 2) and list(saved["rows"]) == [1] * 32
    assert list(saved["labels"]) == ["fruit", "vehicle"]
    assert np.allclose(saved["probabilities"].sum(1), 1, atol=1e-5)

    commands = [line.strip() for line in result.output.splitlines() if line.strip().startswith("bertkit run")]
    assert len(commands) == 2 and all("train.learning_rate=5.0e-3" in c and "audit." not in c for c in commands)
    assert f"data.train={audit_dir / 'train_without_issues.csv'}" in commands[0]
    assert f"data.train={audit_dir / 'train_relabelled.csv'}" in commands[1]

    from bertkit.report import audit_section, read_view

    page = audit_section(read_view(out))  # the run report's section, from audit/summary.json
    assert "Label audit" in page and "fruit → vehicle" in page and noisy[FLIPPED[0]][0] in page


def test_a_wrong_tag_is_flagged_and_the_relabelled_conll_keeps_its_columns(tiny_model_dir, tmp_path):
    rng = np.random.default_rng(0)
    sentences = [[(rng.choice(PEOPLE), "B-PER"), ("went", "O"), ("to", "O"), (rng.choice(CITIES), "B-LOC")]
                 for _ in range(24)]
    sentences[3][0] = (sentences[3][0][0], "O")  # a person left untagged; its first line is 3 * 5 + 1 = 16
    text = "".join("".join(f"{word} NN {tag}\n" for word, tag in s) + "\n" for s in sentences)
    train = tmp_path / "train.conll"
    train.write_text(text)
    out = tmp_path / "run"
    result = runner.invoke(app, ["audit", "ner", f"model={tiny_model_dir}", f"data.train={train}", f"output_dir={out}",
                                 "data.stride=4", *LEARN])
    assert result.exit_code == 0, result.output
    issues = read_rows(out / "audit" / au.ISSUES_FILE)
    assert list(issues[0]) == ["line", "text", "words", "given", "suggested", "score"]
    assert [(r["line"], r["words"], r["given"], r["suggested"]) for r in issues] == [
        ("16", sentences[3][0][0], "O", "B-PER")]
    summary = json.loads((out / "audit" / au.SUMMARY_FILE).read_text())
    assert summary["pairs"] == {"O → B-PER": 1} and summary["judges"]["accuracy"] > summary["judges"]["chance"]
    relabelled = (out / "audit" / "train_relabelled.conll").read_text().split("\n")
    original = text.split("\n")
    assert relabelled[15] == f"{sentences[3][0][0]} NN B-PER"  # the POS column kept, the tag changed
    assert [line for i, line in enumerate(relabelled) if i != 15] == [x for i, x in enumerate(original) if i != 15]
    without = (out / "audit" / "train_without_issues.conll").read_text()
    assert without == "".join("".join(f"{w} NN {t}\n" for w, t in s) + "\n" for i, s in enumerate(sentences)
                              if i != 3)


# ------------------------------------------------------------------------------------------------ pieces


def test_multi_label_issues_suggest_the_classes_over_the_threshold():
    given = [[0], [1], [0, 1], []] * 10
    probs = np.array([[0.9, 0.1], [0.1, 0.9], [0.9, 0.9], [0.1, 0.1]] * 10)
    given[5] = [0]  # probabilities say class 1 only
    given[6] = [0]  # probabilities say both
    found = label_issues.multi_label_issues(given, probs, np.full(40, 0.5))
    assert {row for row, _, _ in found} == {5, 6}
    assert {row: suggested for row, suggested, _ in found} == {5: [1], 6: [0, 1]}
    assert all(score < 0.5 for _, _, score in found)


def test_fold_models_barely_above_chance_are_a_warning():
    weak, strong = au.judges((0.55, 0.5)), au.judges((0.83, 0.52))
    assert weak["weak"] and not strong["weak"]
    assert "warning" in au.judges_line(weak, "rows") and "train the folds longer" in au.judges_line(weak, "rows")
    assert "warning" not in au.judges_line(strong, "rows")
    assert "given tag on 83.0% of held-out words" in au.judges_line(strong, "sentences")


def test_probabilities_move_to_their_label_and_a_class_the_fold_never_saw_gets_zero():
    probs = np.array([[0.2, 0.8], [0.6, 0.4]])
    moved = label_issues.by_name(probs, ["b", "a"], ["a", "b", "c"], normalise=True)
    assert np.allclose(moved, [[0.8, 0.2, 0.0], [0.4, 0.6, 0.0]])


def test_a_relabelled_cell_is_written_the_way_the_file_writes_labels(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps({"text": f"row {i}", "label": i % 2, "id": i}) + "\n" for i in range(6)))
    module = load_recipe("classify")
    task = classify.Audit(load_config(module.Config, None, [f"data.train={path}"]))
    target = task.write([0, 1, 2], tmp_path / "out.jsonl", {1: task.raw_class[0]})
    assert [json.loads(line) for line in target.read_text().splitlines()] == [
        {"text": "row 0", "label": 0, "id": 0}, {"text": "row 1", "label": 0, "id": 1},
        {"text": "row 2", "label": 0, "id": 2}]  # an int stays an int; the other columns stay


def test_entities_are_rebuilt_from_the_tags_in_character_offsets():
    from bertkit.tasks.ner import Sentence, split_words

    text = "Anna Berg lives in Oslo"
    offsets = split_words(text)
    sentence = Sentence([text[a:b] for a, b in offsets], ["B-PER", "I-PER", "O", "O", "B-LOC"], "x line 1", text,
                        offsets)
    record = {"text": text, "spans": [[0, 9, "PER"], [19, 23, "LOC"]]}
    ner.set_tags(record, sentence, ["B-PER", "I-PER", "O", "O", "B-ORG"])
    assert record == {"text": text, "spans": [{"start": 0, "end": 9, "type": "PER"},
                                              {"start": 19, "end": 23, "type": "ORG"}]}


def test_overwrite_replaces_only_the_audits_own_files(tmp_path):
    for name in ("label_issues.csv", "summary.json", "train_without_issues.csv", "train_relabelled.csv", "notes.txt",
                 "out_of_fold.npz"):
        (tmp_path / name).write_text("x")
    (tmp_path / "folds" / "fold-1").mkdir(parents=True)
    au.clear_old_audit(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


# ------------------------------------------------------------------------------------------------ refusals


def labelled(tmp_path, labels, name="train.csv", column="label") -> str:
    return write_csv(tmp_path / name, ["text", column], [[f"text number {i}", label] for i, label in enumerate(labels)])


@pytest.mark.parametrize("case, fragments", [
    ("one class", ["only one label ('positive')", "at least two"]),
    ("folds over the smallest class", ["audit.folds=3 is more than the 2 rows of class 'negative'",
                                       "audit.folds=2 or fewer"]),
    ("folds under 2", ["audit.folds", "greater than or equal to 2"]),
    ("regression", ["column 'score'", "regression scores", "data.label_kind=single"]),
    ("unknown audit key", ["unknown config key 'audit.fold'", "did you mean 'audit.folds'?"]),
    ("another recipe", ["bertkit audit qa", "classify and ner"]),
    ("an audit already there", ["already holds label_issues.csv", "overwrite=true"]),
    ("ner folds over the sentences", ["audit.folds=3 is more than the 2 sentences"]),
])
def test_bad_input_is_one_line_with_exit_code_2(tmp_path, case, fragments):
    out = tmp_path / "run"
    recipe, extra = "classify", []
    if case == "one class":
        train = labelled(tmp_path, ["positive"] * 6)
    elif case == "folds over the smallest class":
        train, extra = labelled(tmp_path, ["positive"] * 8 + ["negative"] * 2), ["audit.folds=3"]
    elif case == "folds under 2":
        train, extra = labelled(tmp_path, ["positive", "negative"] * 4), ["audit.folds=1"]
    elif case == "regression":
        train = labelled(tmp_path, [0.5, 1.5, 2.25, 3.0], column="score")
    elif case == "unknown audit key":
        train, extra = labelled(tmp_path, ["positive", "negative"] * 4), ["audit.fold=2"]
    elif case == "another recipe":
        recipe, train = "qa", "train.json"
    elif case == "an audit already there":
        train = labelled(tmp_path, ["positive", "negative"] * 4)
        (out / "audit").mkdir(parents=True)
        (out / "audit" / "label_issues.csv").write_text("line\n")
    else:
        recipe, train, extra = "ner", str(tmp_path / "train.conll"), ["audit.folds=3"]
        Path(train).write_text("Anna B-PER\nsang O\n\nin O\nOslo B-LOC\n")
    result = runner.invoke(app, ["audit", recipe, f"data.train={train}", f"output_dir={out}", *extra])
    one_line_error(result, 2, *fragments)
    if case == "an audit already there":
        assert (out / "audit" / "label_issues.csv").read_text() == "line\n"  # nothing replaced
