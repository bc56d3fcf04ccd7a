"""Issue 31, "Trust, round two": runs and commands that used to end as a success (or a traceback) with a wrong
result now stop with one line. An exploding or NaN loss, comma-joined multi-labels, student.num_layers=0, diagnose
on runs without dev predictions or with a corrupt metrics.json, `bertkit runs` over a corrupt run, unreadable and
full-disk mlm corpora, 5,000 classes, and push to an invalid repo id."""

import errno
import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from bertkit import rundir
from bertkit.cli import app
from bertkit.errors import BertkitError
from helpers import write_csv

runner = CliRunner()
pytestmark = pytest.mark.usefixtures("one_thread")


def one_line(result, code: int, *fragments: str) -> str:
    """The command failed with `code` and one `error:` line, its last, holding every fragment, no traceback (a run
    says what it does on the console before: those lines come first)."""
    assert result.exit_code == code, (result.exit_code, result.output)
    assert "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert [line for line in lines if line.startswith("error")] == lines[-1:], result.output
    message = lines[-1]
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


def sentiment(path: Path, count: int = 32) -> str:
    words = {"positive": ["great", "lovely", "superb"], "negative": ["awful", "dull", "poor"]}
    rows = [[f"the film {i} was {words[label][i % 3]}", label]
            for i, label in ((i, "positive" if i % 2 else "negative") for i in range(count))]
    return write_csv(path, ["text", "label"], rows)


def classify_args(model: str, train: str, out: Path, *extra: str) -> list[str]:
    return ["run", "classify", f"model={model}", f"data.train={train}", f"output_dir={out}", "precision=fp32",
            "data.max_length=24", "train.per_device_train_batch_size=8", "train.save_strategy=no", *extra]


# ------------------------------------------------------------------------------------ 1. an exploding loss


def test_an_exploding_loss_stops_the_run_with_no_completion_record(tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(app, classify_args(tiny_model_dir, sentiment(tmp_path / "train.csv"), out,
                                              "train.learning_rate=1.0e3", "train.max_steps=3",
                                              "train.logging_steps=1", "train.warmup_steps=0"))
    message = one_line(result, 2, "step", "learning rate", "1.0e2", "10x lower")
    assert "loss" in message
    assert not (out / rundir.RECORD_FILE).exists() and not (out / "metrics.json").exists()
    assert rundir.run_state(out)[0] != "finished"


def test_the_loss_guard_rule_fires_on_nan_and_sustained_explosions_only():
    from bertkit.training import LossWatch

    def first_alarm(losses, lr=5e-5, fp16=False):
        watch = LossWatch(lr, fp16)
        for step, loss in enumerate(losses, 1):
            problem = watch.check(step, loss)
            if problem:
                return step, problem
        return None, watch.at_end()

    # normal noisy runs: batch-1 spikes, a loss that starts low and wobbles, an mlm loss of 10
    rng = np.random.default_rng(0)
    noisy = list(np.clip(0.7 - 0.005 * np.arange(200) + rng.normal(0, 0.4, 200), 0.01, None))
    noisy[50], noisy[120] = 6.5, 9.0  # single confident mistakes at batch size 1
    assert first_alarm(noisy) == (None, None)
    assert first_alarm([0.05, 0.3, 0.02, 4.0, 0.1, 0.08]) == (None, None)
    assert first_alarm([10.4, 9.8, 12.0, 8.5, 7.9, 7.0]) == (None, None)
    # a NaN or inf at once; the fp16 hint only with fp16
    step, problem = first_alarm([0.69, 0.71, float("nan"), 0.7], lr=2e-5, fp16=True)
    assert step == 3 and "nan" in problem and "fp16" in problem
    assert first_alarm([0.69, float("inf")])[0] == 2
    # 0.69 -> 271: two logged losses over max(10 x first, first + 10), or the last one
    step, problem = first_alarm([0.69, 40.0, 271.0, 300.0], lr=1e3)
    assert step == 3 and "271" in problem and "learning rate 1000" in problem and "1.0e2" in problem
    assert "fp16" not in problem
    assert first_alarm([0.69, 0.6, 50.0])[1] is not None  # the run ends exploded
    assert first_alarm([0.69, 50.0, 0.6, 0.5]) == (None, None)  # one spike that recovers


# ------------------------------------------------------------------------------ 2. comma-joined multi-labels


def combination_rows(count: int = 60) -> list[list[str]]:
    """Support tickets with one to three of six topics, joined by commas as a spreadsheet writes them."""
    topics = ["billing", "returns", "shipping", "refunds", "login", "account"]
    rng = np.random.default_rng(0)
    rows = []
    for i in range(count):
        picked = sorted(rng.choice(topics, size=int(rng.integers(1, 4)), replace=False))
        rows.append([f"message {i} about {' and '.join(picked)}", ",".join(picked)])
    return rows


def test_comma_joined_labels_are_refused_with_the_keys_that_say_multi_label(tiny_model_dir, tmp_path):
    train = write_csv(tmp_path / "tickets.csv", ["text", "label"], combination_rows())
    result = runner.invoke(app, classify_args(tiny_model_dir, train, tmp_path / "run", "train.max_steps=1"))
    one_line(result, 2, "tickets.csv", "','", "data.label_kind=multi", "data.label_delimiter=','",
             "data.label_kind=single")
    assert not (tmp_path / "run" / "model.safetensors").exists()


def test_label_kind_single_keeps_combinations_and_multi_splits_them():
    from bertkit.labels import LabelSpace

    values = [label for _, label in combination_rows()]
    with pytest.raises(BertkitError, match="data.label_delimiter=','"):
        LabelSpace.from_values(values)
    assert LabelSpace.from_values(values, "single").kind == "single"
    assert len(LabelSpace.from_values(values, "multi", ",").names) == 6
    # class names that hold a comma but are no combinations stay classes
    cities = ["Paris, France", "Lyon, France", "Austin, Texas", "Dallas, Texas", "Rome"] * 4
    assert LabelSpace.from_values(cities).kind == "single"


# --------------------------------------------------------------------------------- 3. student.num_layers=0


@pytest.mark.parametrize("value", ["0", "-1"])
def test_student_num_layers_out_of_range_is_refused(tmp_path, value):
    train = sentiment(tmp_path / "train.csv")
    result = runner.invoke(app, ["run", "distill", f"teacher={tmp_path}", f"data.train={train}",
                                 f"student.num_layers={value}", f"output_dir={tmp_path / 'run'}"])
    one_line(result, 2, "student.num_layers", value)


# ------------------------------------------------------------------------------------- 4-5. diagnose


def fake_run(path: Path, recipe: str = "classify", dev: str | None = None, metrics: str | None = None) -> str:
    path.mkdir()
    losses = [{"step": step, "epoch": step / 12, "loss": 0.7 - 0.05 * step} for step in range(1, 13)]
    (path / rundir.LOG_HISTORY_FILE).write_text(json.dumps(losses))
    data = {"train": "t.csv", **({"eval": dev} if dev else {})}
    (path / rundir.RUN_CONFIG_FILE).write_text(yaml.safe_dump({"model": "m", "data": data,
                                                                "train": {"learning_rate": 5e-5}}))
    eval_metrics = {"perplexity": 12.0} if recipe == "mlm" else {}
    (path / rundir.METRICS_FILE).write_text(metrics if metrics is not None else json.dumps(
        {"eval": eval_metrics, "selection_metric": None if recipe == "mlm" else "macro_f1"}))
    rundir.write_record(path, recipe, started="2026-11-30T10:00:00+00:00")
    return str(path)


@pytest.mark.parametrize("recipe, dev, why", [("mlm", None, "mlm"), ("classify", None, "no dev split")])
def test_diagnose_says_what_it_did_not_check(tmp_path, recipe, dev, why):
    run = fake_run(tmp_path / "run", recipe, dev)
    result = runner.invoke(app, ["diagnose", run])
    assert result.exit_code == 0, result.output
    assert "dev predictions look healthy" not in result.output
    assert "not checked" in result.output and why in result.output


def test_diagnose_of_a_corrupt_metrics_json_is_one_line(tmp_path):
    run = fake_run(tmp_path / "run", metrics='{"eval": {"accuracy": 0.8')
    one_line(runner.invoke(app, ["diagnose", run]), 2, "metrics.json")


# ----------------------------------------------------------------------------------------- 6. bertkit runs


def test_runs_shows_a_run_with_a_corrupt_metrics_json_as_corrupt(tmp_path):
    fake_run(tmp_path / "good")
    bad = Path(fake_run(tmp_path / "bad"))
    text = (bad / rundir.METRICS_FILE).read_text()
    (bad / rundir.METRICS_FILE).write_text(text[:-3] + "}}x")  # same size, not JSON
    result = runner.invoke(app, ["runs", str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    bad_line = next(line for line in result.output.splitlines() if line.startswith("bad"))
    good_line = next(line for line in result.output.splitlines() if line.startswith("good"))
    assert "corrupt" in bad_line and "metrics.json" in bad_line and "finished" not in bad_line
    assert "finished" in good_line


# ------------------------------------------------------------------------------------- 7. the mlm corpus


@pytest.fixture
def binary_corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_bytes(b"a first line of text\nsecond line\n" + bytes(range(128, 256)) * 8 + b"\nmore\n")
    return path


def mlm_args(model, corpus, out, *extra):
    return ["run", "mlm", f"model={model}", f"data.train={corpus}", f"output_dir={out}", "precision=fp32",
            "data.max_length=32", "train.max_steps=2", *extra]


def test_a_binary_corpus_is_named_not_utf8_with_its_offset(tiny_model_dir, binary_corpus, tmp_path):
    result = runner.invoke(app, mlm_args(tiny_model_dir, binary_corpus, tmp_path / "run"))
    message = one_line(result, 2, str(binary_corpus), "not UTF-8", "byte offset 33", "line 3")
    assert "disk" not in message


def test_a_binary_corpus_streamed_is_the_same_one_line(tiny_model_dir, binary_corpus, tmp_path):
    result = runner.invoke(app, mlm_args(tiny_model_dir, binary_corpus, tmp_path / "run", "data.streaming=true"))
    one_line(result, 2, str(binary_corpus), "not UTF-8", "line 3")


def test_a_full_disk_under_the_datasets_cache_is_not_blamed_on_the_corpus(tmp_path, monkeypatch):
    import datasets.arrow_writer

    from bertkit.tasks.mlm.corpus import read_lines

    corpus = tmp_path / "fine.txt"
    corpus.write_text("plain text\n" * 50, encoding="utf-8")

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(datasets.arrow_writer.ArrowWriter, "write_table", full)
    monkeypatch.setattr(datasets.arrow_writer.ArrowWriter, "write_examples_on_file", full)
    monkeypatch.setattr(datasets.arrow_writer.ArrowWriter, "write_batch", full)
    cache = tmp_path / "cache"
    with pytest.raises(BertkitError) as caught:
        read_lines(str(corpus), cache_dir=str(cache))
    message = str(caught.value)
    assert "disk" in message and str(cache) in message and "HF_DATASETS_CACHE" in message
    assert "could not be read" not in message and "UTF-8" not in message


# --------------------------------------------------------------------------------------- 8. many classes


def many_classes(classes: int, rows: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    gold = rng.integers(0, classes, rows)
    predicted = np.where(rng.random(rows) < 0.5, gold, rng.integers(0, classes, rows))
    return gold, predicted, [f"class_{i:05d}" for i in range(classes)]


def test_5000_classes_keep_every_per_class_output_bounded(tmp_path):
    from bertkit.labels import LabelSpace
    from bertkit.metrics import classification_report_text, confusion_matrix_table
    from bertkit.model_card import render_model_card
    from bertkit.tasks.classify import score

    gold, predicted, names = many_classes(5000, 10_000)
    table = confusion_matrix_table(gold, predicted, names)
    size = len(json.dumps(table))
    assert size < 200_000, size
    assert table["format"] == "sparse" and table["classes"] == 5000
    top = table["confusions"]
    assert top and all({"true", "predicted", "count"} <= set(entry) for entry in top)
    assert [entry["count"] for entry in top] == sorted((entry["count"] for entry in top), reverse=True)
    assert sum(entry["count"] for entry in top) + table["other_confusions"] == int((gold != predicted).sum())
    assert table["correct"] == int((gold == predicted).sum())

    probs = np.zeros((len(gold), 5000), dtype=np.float32)
    probs[np.arange(len(gold)), predicted] = 1.0
    metrics = score(probs, gold, LabelSpace("single", names))
    per_class = [key for key in metrics if key.startswith(("f1_", "precision_", "recall_"))]
    assert 0 < len(per_class) <= 3 * 20, len(per_class)
    assert 0 <= metrics["macro_f1"] <= 1

    report = classification_report_text(gold, predicted, names)
    assert "classification_report" not in report  # the report file itself holds every class
    assert "class_04999" in report

    run = tmp_path / "run"
    run.mkdir()
    config = {"architectures": ["BertForSequenceClassification"], "model_type": "bert",
              "id2label": {str(i): name for i, name in enumerate(names)}, "problem_type": "single_label_classification"}
    (run / "config.json").write_text(json.dumps(config))
    (run / "metrics.json").write_text(json.dumps({"eval": {**metrics}, "selection_metric": "macro_f1"}))
    card = render_model_card(run)
    assert len(card) < 20_000, len(card)
    assert "4,980 more" in card and "classification_report.txt" in card


def test_a_dense_confusion_matrix_stays_dense_up_to_100_classes():
    from bertkit.metrics import confusion_matrix_table

    gold, predicted, names = many_classes(100, 1000)
    table = confusion_matrix_table(gold, predicted, names)
    assert table["labels"] == names and len(table["matrix"]) == 100


def test_a_300_class_run_prints_a_bounded_label_line(tiny_model_dir, tmp_path):
    rows = [[f"text number {i} of class {i % 300}", f"class_{i % 300:03d}"] for i in range(600)]
    train = write_csv(tmp_path / "many.csv", ["text", "label"], rows)
    out = tmp_path / "run"
    result = runner.invoke(app, classify_args(tiny_model_dir, train, out, f"data.eval={train}", "train.max_steps=2",
                                              "train.per_device_eval_batch_size=128", "data.max_length=16"))
    assert result.exit_code == 0, result.output
    label_line = next(line for line in result.output.splitlines() if "single labels:" in line)
    assert len(label_line) < 400 and "and 280 more" in label_line
    assert (out / "confusion_matrix.json").stat().st_size < 100_000
    assert (out / "README.md").stat().st_size < 20_000
    confusion = json.loads((out / "confusion_matrix.json").read_text())
    assert confusion["format"] == "sparse"
    status = runner.invoke(app, ["runs", str(tmp_path)], env={"COLUMNS": "200"})
    assert "finished" in status.output
    assert runner.invoke(app, ["diagnose", str(out), "--no-predict"]).exit_code == 0
    inspected = runner.invoke(app, ["inspect", train, "--model", tiny_model_dir], env={"COLUMNS": "200"})
    assert inspected.exit_code == 0, inspected.output
    label_rows = [line for line in inspected.output.splitlines() if line.strip().startswith("label ")]
    assert len(label_rows) == 21 and "and 280 more labels" in inspected.output  # label kind + 20 labels


# ----------------------------------------------------------------------------------------------- 9. push


@pytest.mark.parametrize("repo_id", ["../x", "user/a b", "a/b/c"])
def test_push_to_an_invalid_repo_id_is_one_line_before_any_request(tmp_path, repo_id):
    result = runner.invoke(app, ["push", str(tmp_path), repo_id, "--token", "hf_test",
                                 "--endpoint", "http://127.0.0.1:9"])
    one_line(result, 2, repr(repo_id), "namespace/name")


def test_hub_imports_no_http_client_that_is_not_declared():
    import ast

    root = Path(__file__).resolve().parent.parent
    tree = ast.parse((root / "bertkit" / "hub.py").read_text(encoding="utf-8"))
    imported = {alias.name.split(".")[0] for node in tree.body if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in tree.body if isinstance(node, ast.ImportFrom) and node.module}
    assert not imported & {"httpx", "httpx2"}, imported

    from bertkit.hub import explain

    import huggingface_hub.utils._http as hub_http  # the client's own HTTP library, whichever it is

    library = __import__(type(hub_http.get_session()).__module__.split(".")[0])
    message = explain(library.ConnectError("refused"), endpoint="http://127.0.0.1:9", repo_id="u/m", revision=None,
                      source=None)
    assert message and "cannot reach the Hub" in message
