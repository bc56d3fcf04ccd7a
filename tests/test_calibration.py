"""Probabilities a user can act on and data the loss can be fair to: temperature scaling fitted on dev (bertkit/
calibration.py) and applied by predict, abstention below a confidence, class weights exact under gradient
accumulation, data.max_length=auto, and the slice metrics of the final evaluation."""

import csv
import json

import datasets
import numpy as np
import pytest
import torch
import torch.nn.functional as F
import transformers
import yaml
from helpers import one_line_error, one_sgd_step, tiny_config_kwargs, write_csv
from typer.testing import CliRunner

import bertkit
from bertkit import calibration
from bertkit.cli import app, load_recipe
from bertkit.config import load_config
from bertkit.errors import BertkitError
from bertkit.labels import LabelSpace
from bertkit.losses import ClassWeightedLoss
from bertkit.tasks import classify

runner = CliRunner()


# ------------------------------------------------------------------------------------------------ calibration


def overconfident(rows=4000, classes=3, sharpen=4.0, seed=0):
    """Logits `sharpen` times too sure: labels drawn from softmax(true), the model reports softmax(sharpen * true)."""
    rng = np.random.default_rng(seed)
    true = rng.normal(0, 1.5, (rows, classes))
    probs = np.exp(true) / np.exp(true).sum(-1, keepdims=True)
    labels = np.array([rng.choice(classes, p=p) for p in probs])
    return (sharpen * true).astype(np.float32), labels


def test_temperature_undoes_overconfidence_and_lowers_ece():
    logits, labels = overconfident()
    to_probs = lambda scaled: classify.probabilities(scaled, "single")  # noqa: E731
    (temperature,) = calibration.fit_temperatures(logits, labels, "single", to_probs)
    assert temperature == pytest.approx(4.0, rel=0.1)
    before = calibration.expected_calibration_error(to_probs(logits), labels, "single")
    after = calibration.expected_calibration_error(to_probs(logits / temperature), labels, "single")
    assert before > 0.1 and after < 0.03


def test_multi_label_gets_one_temperature_per_label():
    rng = np.random.default_rng(1)
    true = rng.normal(0, 2, (3000, 2))
    labels = (rng.random(true.shape) < 1 / (1 + np.exp(-true))).astype(int)
    logits = (true * np.array([3.0, 0.5])).astype(np.float32)  # label 0 over-, label 1 under-confident
    temperatures = calibration.fit_temperatures(logits, labels, "multi",
                                                lambda scaled: classify.probabilities(scaled, "multi"))
    assert temperatures[0] == pytest.approx(3.0, rel=0.15) and temperatures[1] == pytest.approx(0.5, rel=0.15)


def test_a_swapped_dev_split_is_not_calibrated_but_warned_about(capsys):
    logits, labels = overconfident(classes=2)
    to_probs = lambda scaled: classify.probabilities(scaled, "single")  # noqa: E731
    swapped = 1 - labels  # the best temperature flattens everything: the edge of the range, not a calibration
    fitted = calibration.fit_temperatures(logits, swapped, "single", to_probs)
    assert calibration.at_range_edge(fitted) == [True]
    assert classify.checked_temperatures(fitted, LabelSpace("single", ["a", "b"])) is None
    captured = capsys.readouterr()
    assert "calibration skipped" in captured.out + captured.err
    fitted = calibration.fit_temperatures(logits, labels, "single", to_probs)
    assert classify.checked_temperatures(fitted, LabelSpace("single", ["a", "b"])) == fitted


def test_a_multi_label_label_dev_never_has_keeps_its_raw_probabilities():
    rng = np.random.default_rng(2)
    logits = np.minimum(rng.normal(-3, 1, (500, 2)), -0.5).astype(np.float32)  # every row sure it is not "y"
    labels = np.stack([rng.random(500) < 1 / (1 + np.exp(-logits[:, 0])), np.zeros(500)], 1).astype(int)
    fitted = calibration.fit_temperatures(logits, labels, "multi", lambda s: classify.probabilities(s, "multi"))
    assert calibration.at_range_edge(fitted) == [False, True]
    assert classify.checked_temperatures(fitted, LabelSpace("multi", ["x", "y"])) == [fitted[0], 1.0]


def test_ece_coverage_and_confidence_on_hand_made_rows():
    probs = np.array([[0.95, 0.05], [0.9, 0.1], [0.6, 0.4], [0.2, 0.8]])
    labels = np.array([0, 1, 0, 1])
    # each confidence falls in its own one-fifteenth bin: the ECE is the mean gap
    expected = (abs(0.95 - 1) + abs(0.9 - 0) + abs(0.6 - 1) + abs(0.8 - 1)) / 4
    assert calibration.expected_calibration_error(probs, labels, "single") == pytest.approx(expected, abs=1e-4)
    table = calibration.coverage_table(probs, labels, "single")
    assert table["0.5"] == {"kept": 1.0, "accuracy": 0.75}
    assert table["0.7"] == {"kept": 0.75, "accuracy": pytest.approx(0.6667, abs=1e-4)}
    assert table["0.9"] == {"kept": 0.5, "accuracy": 0.5}
    multi = np.array([[0.9, 0.2], [0.6, 0.99]])
    np.testing.assert_allclose(calibration.confidence(multi, "multi"), [0.8, 0.6])


def test_abstention_marks_unsure_rows_and_leaves_the_rest():
    labels = LabelSpace("single", ["neg", "pos"])
    sure = classify.describe_prediction(np.array([0.1, 0.9]), labels, 0.5, min_confidence=0.8)
    unsure = classify.describe_prediction(np.array([0.4, 0.6]), labels, 0.5, min_confidence=0.8)
    plain = classify.describe_prediction(np.array([0.4, 0.6]), labels, 0.5)
    assert sure["label"] == "pos" and sure["abstained"] is False
    assert unsure["label"] is None and unsure["abstained"] is True and unsure["score"] == 0.6
    assert plain["label"] == "pos" and "abstained" not in plain  # unchanged output without a cut
    multi = LabelSpace("multi", ["a", "b"])
    record = classify.describe_prediction(np.array([0.9, 0.55]), multi, 0.5, min_confidence=0.7)
    assert record["labels"] is None and record["abstained"] is True


# ------------------------------------------------------------------------------------------------ class weights


def test_auto_class_weights_are_balanced_and_a_mapping_names_labels():
    single = LabelSpace("single", ["neg", "pos"])
    weights = classify.class_weights("auto", np.array([90, 10]), 100, single)
    assert weights == {"neg": pytest.approx(100 / 180, abs=1e-4), "pos": 5.0}
    assert sum(w * n for w, n in zip(weights.values(), (90, 10))) == pytest.approx(100, rel=1e-3)  # mean row: 1
    multi = LabelSpace("multi", ["a", "b"])
    assert classify.class_weights("auto", np.array([20, 50]), 100, multi) == {"a": 4.0, "b": 1.0}
    assert classify.class_weights({"pos": 3.0}, None, 100, single) == {"neg": 1.0, "pos": 3.0}
    with pytest.raises(BertkitError, match="class_weights.positive: no such label"):
        classify.class_weights({"positive": 3.0}, None, 100, single)
    with pytest.raises(BertkitError, match="regression"):
        classify.class_weights("auto", None, 100, LabelSpace("regression", []))


def test_weighted_loss_is_the_formula():
    logits = torch.tensor([[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    labels = torch.tensor([0, 1, -100])
    loss = ClassWeightedLoss([1.0, 4.0], multi_label=False)({"logits": logits}, labels)
    ce = F.cross_entropy(logits[:2], labels[:2], reduction="none")
    torch.testing.assert_close(loss, (ce[0] + 4 * ce[1]) / 2)
    multi = ClassWeightedLoss([3.0, 1.0], multi_label=True)
    targets = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    expected = F.binary_cross_entropy_with_logits(logits, targets, pos_weight=torch.tensor([3.0, 1.0]),
                                                  reduction="sum") / 6
    torch.testing.assert_close(multi({"logits": logits}, targets), expected)


def one_step_update(batch_size: int, accumulation: int, tmp_path, multi: bool) -> dict:
    """Parameter change of a tiny classifier after one SGD step under the class-weighted loss on the same 8 rows."""
    torch.manual_seed(0)
    config = bertkit.BertkitConfig(**tiny_config_kwargs(num_labels=3, hidden_dropout_prob=0.0,
                                                        attention_probs_dropout_prob=0.0))
    model = bertkit.BertkitForSequenceClassification(config)
    generator = torch.Generator().manual_seed(3)
    lengths = [3, 9, 5, 12, 7, 4, 10, 6]
    labels = ([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0]] * 2 if multi
              else [0, 1, 2, 2, 1, 0, 0, 2])
    rows = {"input_ids": [torch.randint(1, 99, (n,), generator=generator).tolist() for n in lengths],
            "labels": labels}
    args, tokenizer = one_sgd_step(tmp_path, batch_size, accumulation)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    trainer = transformers.Trainer(model=model, args=args, train_dataset=datasets.Dataset.from_dict(rows),
                                   data_collator=transformers.DataCollatorWithPadding(tokenizer),
                                   compute_loss_func=ClassWeightedLoss([0.5, 2.0, 3.0], multi_label=multi))
    trainer.train()
    return {name: p.detach() - before[name] for name, p in model.named_parameters()}


@pytest.mark.parametrize("multi", [False, True])
def test_class_weighted_gradient_accumulation_is_exact(tmp_path, multi):
    whole = one_step_update(8, 1, tmp_path, multi)
    accumulated = one_step_update(2, 4, tmp_path, multi)
    assert max(float(d.abs().max()) for d in whole.values()) > 1e-4  # the step did something
    for name in whole:
        torch.testing.assert_close(accumulated[name], whole[name], rtol=1e-4, atol=1e-6, msg=name)


# ------------------------------------------------------------------------------------------------ end to end


POSITIVE = ["great", "wonderful", "lovely", "excellent", "superb", "fantastic"]
NEGATIVE = ["terrible", "awful", "dreadful", "bad", "poor", "boring"]


def imbalanced_rows(count: int, seed: int, long_every: int = 0) -> list[list[str]]:
    """One positive in four; every `long_every`-th text is long (for the length slices and max_length=auto)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(count):
        label = "positive" if i % 4 == 0 else "negative"
        words = rng.choice(POSITIVE if label == "positive" else NEGATIVE, size=2, replace=False)
        filler = " and then some more words" * 6 if long_every and i % long_every == 0 else ""
        rows.append([f"the film number {i} was {words[0]}{filler} and {words[1]}", label])
    return rows


@pytest.fixture(scope="module")
def imbalanced(tmp_path_factory):
    root = tmp_path_factory.mktemp("imbalanced")
    return {"train": write_csv(root / "train.csv", ["text", "label"], imbalanced_rows(48, 0, long_every=5)),
            "dev": write_csv(root / "dev.csv", ["text", "label"], imbalanced_rows(24, 1, long_every=5))}


def run_classify(overrides: list[str]):
    module = load_recipe("classify")
    return module.main(load_config(module.Config, None, overrides))


@pytest.fixture(scope="module")
def calibrated_run(tiny_model_dir, imbalanced, tmp_path_factory):
    out = tmp_path_factory.mktemp("calibrated") / "run"
    results = run_classify([f"model={tiny_model_dir}", f"data.train={imbalanced['train']}",
                            f"data.eval={imbalanced['dev']}", f"output_dir={out}", "precision=fp32",
                            "data.max_length=auto", "class_weights=auto", "abstain_below=0.6",
                            "train.num_train_epochs=2", "train.per_device_train_batch_size=8",
                            "train.learning_rate=1.0e-3", "train.logging_steps=2"])
    return out, results


def test_a_run_records_what_it_decided(calibrated_run):
    out, results = calibrated_run
    resolved = yaml.safe_load((out / "bertkit_config.yaml").read_text())
    chosen = resolved["data"]["max_length"]
    assert chosen % 8 == 0 and 16 <= chosen <= 64  # auto became a number
    assert resolved["class_weights"] == {"negative": pytest.approx(48 / 72, abs=1e-3), "positive": 2.0}
    settings = json.loads((out / "config.json").read_text())["bertkit_task_settings"]
    assert settings["max_length"] == resolved["data"]["max_length"]
    assert len(settings["temperature"]) == 1 and settings["temperature"][0] > 0 and settings["abstain_below"] == 0.6
    metrics = json.loads((out / "metrics.json").read_text())
    calibrated = metrics["calibration"]
    assert calibrated["temperature"] == settings["temperature"][0]
    assert {"ece_before", "ece"} <= set(calibrated) and set(calibrated["coverage"]) == {"0.5", "0.7", "0.9"}
    assert calibrated["ece"] <= calibrated["ece_before"] + 1e-6  # the fit minimises NLL; ECE follows on 24 rows
    assert "temperature fitted on the dev split" in (out / "README.md").read_text()  # the card says so
    lengths = metrics["slices"]["length"]
    assert len(lengths) >= 2 and sum(entry["documents"] for entry in lengths.values()) == 24
    assert metrics["slices"]["head_labels"]["labels"] == 1 and metrics["slices"]["tail_labels"]["labels"] == 1


def test_predict_applies_the_temperature_and_abstains(calibrated_run, imbalanced, tmp_path):
    out, _ = calibrated_run
    temperature = json.loads((out / "config.json").read_text())["bertkit_task_settings"]["temperature"][0]
    predictions = tmp_path / "predictions.jsonl"
    result = runner.invoke(app, ["predict", str(out), imbalanced["dev"], "-o", str(predictions)])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in predictions.read_text().splitlines()]
    model = transformers.AutoModelForSequenceClassification.from_pretrained(out).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    text = records[0]["text"]
    with torch.no_grad():
        logits = model(**tokenizer(text, truncation=True, max_length=64, return_tensors="pt")).logits[0]
    expected = (logits / temperature).softmax(-1)
    assert records[0]["probabilities"]["positive"] == pytest.approx(float(expected[1]), abs=1e-4)
    for record in records:  # the saved abstain_below=0.6
        assert record["abstained"] == (record["score"] < 0.6)
        assert (record["label"] is None) == record["abstained"]
    csv_out = tmp_path / "all_abstain.csv"
    result = runner.invoke(app, ["predict", str(out), imbalanced["dev"], "-o", str(csv_out), "--min-confidence",
                                 "0.999999"])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(csv_out.open()))
    assert rows and all(row["abstained"] == "true" and row["label"] == "" for row in rows)


def test_serve_and_the_onnx_export_apply_the_temperature_and_the_abstention(calibrated_run, imbalanced, tmp_path):
    """The calibrated run's saved temperature and abstain_below travel: the server and `bertkit predict` on the ONNX
    export give the probabilities `bertkit predict` gives on the run (which the test above checks against
    softmax(logits / T)), and abstain on the same rows."""
    out, _ = calibrated_run
    predictions = tmp_path / "torch.jsonl"
    assert runner.invoke(app, ["predict", str(out), imbalanced["dev"], "-o", str(predictions)]).exit_code == 0
    expected = [json.loads(line) for line in predictions.read_text().splitlines()]
    assert any(r["abstained"] for r in expected) or all(r["score"] >= 0.6 for r in expected)

    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from bertkit.serve import Limits, create_app

    with TestClient(create_app(str(out), "fp32", Limits())) as client:
        served = client.post("/predict", json={"inputs": [[r["text"]] for r in expected]}).json()
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    export = tmp_path / "export"
    result = runner.invoke(app, ["export", str(out), "-o", str(export)])
    assert result.exit_code == 0, result.output
    exported = tmp_path / "onnx.jsonl"
    assert runner.invoke(app, ["predict", str(export), imbalanced["dev"], "-o", str(exported)]).exit_code == 0
    for rows in (served, [json.loads(line) for line in exported.read_text().splitlines()]):
        assert len(rows) == len(expected)
        for mine, theirs in zip(rows, expected):
            assert mine["abstained"] == theirs["abstained"] and mine["label"] == theirs["label"]
            for name, p in theirs["probabilities"].items():
                assert mine["probabilities"][name] == pytest.approx(p, abs=1e-4)


def test_evaluate_reports_calibration_on_the_file(calibrated_run, imbalanced, tmp_path):
    out, _ = calibrated_run
    result = runner.invoke(app, ["evaluate", str(out), imbalanced["dev"], "-o", str(tmp_path / "m.json")])
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "m.json").read_text())
    assert 0 <= metrics["ece"] <= 1 and set(metrics["coverage"]) == {"0.5", "0.7", "0.9"}


@pytest.mark.parametrize("value", ["0", "1", "1.5", "-0.2"])
def test_min_confidence_outside_zero_one_is_refused(calibrated_run, imbalanced, tmp_path, value):
    out, _ = calibrated_run
    result = runner.invoke(app, ["predict", str(out), imbalanced["dev"], "-o", str(tmp_path / "p.jsonl"),
                                 "--min-confidence", value])
    one_line_error(result, 2, "--min-confidence", "between 0 and 1")
    assert not (tmp_path / "p.jsonl").exists()


def test_abstain_and_weights_refused_for_regression(tiny_model_dir, tmp_path):
    rows = [[f"text number {i}", str(i / 10)] for i in range(16)]
    train = write_csv(tmp_path / "scores.csv", ["text", "score"], rows)
    base = [f"model={tiny_model_dir}", f"data.train={train}", "precision=fp32", "train.num_train_epochs=1",
            "data.max_length=16"]
    for extra, fragment in (("abstain_below=0.7", "abstain_below"), ("class_weights=auto", "class_weights")):
        result = runner.invoke(app, ["run", "classify", *base, f"output_dir={tmp_path / extra}", extra])
        assert result.exit_code == 2 and "Traceback" not in result.output, result.output
        last = result.output.strip().splitlines()[-1]  # after the line on the data read
        assert last.startswith("error: ") and fragment in last and "regression" in last, last


def test_bad_class_weights_and_max_length_values_name_the_key(tiny_model_dir, imbalanced, tmp_path):
    base = [f"model={tiny_model_dir}", f"data.train={imbalanced['train']}", "precision=fp32"]
    for extra, fragment in (("class_weights=heavy", "class_weights"), ("data.max_length=longest", "data.max_length"),
                            ("class_weights.positive=-1", "class_weights"), ("abstain_below=1", "abstain_below")):
        result = runner.invoke(app, ["validate", "classify", *base, f"output_dir={tmp_path / 'x'}", extra])
        one_line_error(result, 2, fragment)


def test_inspect_suggests_class_weights_and_shows_auto_max_length(imbalanced, tmp_path):
    rows = [[f"text {i}", "rare" if i % 10 == 0 else "common"] for i in range(60)]
    path = write_csv(tmp_path / "skewed.csv", ["text", "label"], rows)
    result = runner.invoke(app, ["inspect", path])
    assert result.exit_code == 0, result.output
    assert "class_weights=auto" in result.output and "data.max_length=auto" in result.output
    balanced = runner.invoke(app, ["inspect", imbalanced["train"]])  # 3:1 is not strong imbalance
    assert balanced.exit_code == 0 and "class_weights=auto" not in balanced.output


def test_auto_max_length_is_a_multiple_of_eight_within_the_limit():
    from bertkit.inspection import auto_max_length

    value, truncated = auto_max_length(np.array([10] * 100 + [300]), 512)  # the 99th percentile is 10
    assert value == 16 and truncated == pytest.approx(1 / 101)
    assert auto_max_length(np.array([20] * 50 + [41] * 50), 512) == (48, 0.0)
    assert auto_max_length(np.array([600] * 10), 512) == (512, 1.0)
    assert auto_max_length(np.array([3] * 10), 512)[0] == 8
