"""`bertkit diagnose`: each detector on hand-written log histories, then real tiny runs built to show each symptom
(a learning rate of 1e-9, swapped dev labels, many epochs on a few noisy rows, batch 1 with a high learning rate)
and a healthy run that gets a clean bill."""

import json
import random

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from bertkit import diagnose as dx
from bertkit.cli import app
from test_classify import run_recipe, sentiment_rows, write_csv

runner = CliRunner()


def history(losses, evals, metric="macro_f1", steps_per_eval=None):
    """A Trainer log history: a train loss per step (from 1), evaluations (value, dev loss) spread evenly."""
    entries = [{"step": step, "epoch": step / 10, "loss": loss} for step, loss in enumerate(losses, 1)]
    every = steps_per_eval or max(1, len(losses) // max(1, len(evals)))
    for number, (value, loss) in enumerate(evals, 1):
        entries.append({"step": number * every, "epoch": number * 1.0, f"eval_{metric}": value, "eval_loss": loss})
    return sorted(entries, key=lambda entry: entry["step"])


FALLING = [0.7 - 0.06 * i for i in range(12)]
FLAT = [0.69, 0.70, 0.69, 0.70, 0.69, 0.71, 0.69, 0.70, 0.70, 0.69, 0.70, 0.69]


# ------------------------------------------------------------------------------------------ detectors, by hand

def test_loss_not_falling_names_a_tiny_learning_rate_and_suggests_a_usual_one():
    symptom = dx.loss_not_falling(dx.train_losses(history(FLAT, [])), 1e-9)
    assert symptom.name == "training loss not falling"
    assert "step 1" in symptom.evidence[0] and "step 12" in symptom.evidence[0] and "1e-09" in symptom.evidence[1]
    assert symptom.commands == ["train.learning_rate=3.0e-5"] and "too small" in symptom.advice
    assert "labels" in dx.loss_not_falling(dx.train_losses(history(FLAT, [])), 3e-5).advice
    assert dx.loss_not_falling(dx.train_losses(history(FALLING, [])), 1e-9) is None
    assert dx.loss_not_falling([(1, 0.7), (2, 0.7)], 1e-9) is None  # too few points to say


def test_overfitting_when_dev_peaks_then_falls_while_train_loss_falls():
    losses = dx.train_losses(history(FALLING, []))
    dev = [(3, 0.70), (6, 0.80), (9, 0.74), (12, 0.71)]
    dev_loss = [(3, 0.6), (6, 0.5), (9, 0.7), (12, 0.9)]
    symptom = dx.overfitting(losses, dev_loss, dev, "macro_f1")
    assert "overfitting" in symptom.name
    assert any("best 0.8000 at step 6" in line for line in symptom.evidence)
    assert any("lowest 0.5000 at step 6, 0.9000 at the end" in line for line in symptom.evidence)
    assert dx.overfitting_commands(2.0, 0.01) == ["train.num_train_epochs=2",
                                                          "train.weight_decay=0.1 early_stopping_patience=2"]


def test_no_overfitting_when_dev_improves_or_sits_at_its_ceiling():
    losses = dx.train_losses(history(FALLING, []))
    assert dx.overfitting(losses, [(3, 0.6), (6, 0.5)], [(3, 0.7), (6, 0.9)], "macro_f1") is None
    assert dx.overfitting(losses, [(3, 0.6), (6, 0.4)], [(3, 1.0), (6, 1.0)], "macro_f1") is None
    stuck = dx.overfitting(losses, [(3, 0.7), (6, 0.8)], [(3, 0.33), (6, 0.33)], "macro_f1")
    assert stuck is not None  # train loss falls, dev neither moves nor gets less wrong
    assert dx.overfitting(dx.train_losses(history(FLAT, [])), [], [(3, 0.8), (6, 0.5)], "macro_f1") is None
    by_loss = dx.overfitting(losses, [(3, 0.6), (6, 0.5), (9, 0.8)], [], "loss")  # a run without a dev metric
    assert by_loss is not None and by_loss.evidence[1] == "dev loss lowest 0.5000 at step 6, 0.8000 at the end"


def test_jumping_metric_needs_two_reversals():
    zigzag = [(4, 0.33), (8, 0.56), (12, 0.33), (16, 1.0), (20, 0.33), (24, 1.0)]
    symptom = dx.jumping_metric(zigzag, "accuracy")
    assert symptom.name == "dev metric jumping around" and "0.560 (step 8)" in symptom.evidence[0]
    assert symptom.evidence[1] == "4 reversals of 0.05 or more; largest move 0.670"
    assert dx.jumping_metric([(1, 0.5), (2, 0.6), (3, 0.7), (4, 0.8)], "accuracy") is None
    assert dx.jumping_metric([(1, 0.5), (2, 0.51), (3, 0.5), (4, 0.51)], "accuracy") is None  # noise, not swings
    assert dx.jumping_commands(1, 5e-4) == ["train.per_device_train_batch_size=16", "train.learning_rate=3.0e-5"]


def test_everything_low_and_the_inspect_command():
    assert dx.everything_low(0.41, "macro_f1").evidence == ["final dev macro_f1 0.4100 (under 0.6)"]
    assert dx.everything_low(0.9, "macro_f1") is None and dx.everything_low(None, "macro_f1") is None
    assert dx.everything_low(3.2, "loss") is None
    config = {"model": "m", "data": {"train": "t.csv", "eval": "d.csv", "max_length": 64}}
    assert dx.inspect_command(config) == "bertkit inspect t.csv --dev d.csv --model m --max-length 64"


def test_a_long_series_of_evaluations_is_shown_as_ten_evenly_spaced_points():
    points = [(4 * (i + 1), i / 100) for i in range(30)]
    text = dx._series(points)
    assert text.count("(step") == 10 and text.startswith("0.000 (step 4), ")
    assert "0.290 (step 120) (10 of 30 evaluations shown)" in text
    assert dx._series(points[:10]).count("(step") == 10 and "shown" not in dx._series(points[:10])


def test_chance_warning_below_near_and_above_chance():
    balanced = [0, 1] * 10
    swapped = dx.chance_warning(0.05, balanced, 2)
    assert swapped.name == "dev accuracy far below chance" and "swapped" in swapped.advice
    assert "swapped" not in dx.chance_warning(0.05, [0, 1, 2] * 5, 3).advice
    assert dx.chance_warning(0.52, balanced, 2).name == "dev accuracy near chance"
    between = dx.chance_warning(0.425, balanced, 2)  # under chance, not far under (a barely trained model, swapped dev)
    assert between.name == "dev accuracy below chance" and "swapped" not in between.advice
    # the same accuracy from a model whose training loss never fell: its random head, not the data
    assert dx.chance_warning(0.383, balanced, 2, learned=False).name == "dev accuracy near chance"
    assert dx.chance_warning(0.9, balanced, 2) is None
    assert dx.chance_warning(0.8, [0] * 8 + [1] * 2, 2).name == "dev accuracy near chance"  # the majority's share


def test_only_far_below_chance_puts_the_low_score_on_the_data():
    gold = [0, 1] * 20

    def names_after(correct: int) -> list[str]:
        probs = np.array([[0.9, 0.1] if (label == 0) == (i < correct) else [0.1, 0.9] for i, label in
                          enumerate(gold)])  # the first `correct` rows right, the rest wrong
        diagnosis = dx.Diagnosis("run", [dx.everything_low(0.3, "macro_f1")])
        dx.suspect_data(diagnosis, (["text"] * len(gold), gold, probs, ["negative", "positive"]))
        return [symptom.name for symptom in diagnosis.symptoms]

    assert names_after(17) == ["dev accuracy below chance", "everything low"]  # 0.425: the model may be at fault
    assert names_after(2) == ["dev accuracy far below chance"]  # 0.05: the data explains the low score


def test_confident_errors_are_grouped_by_gold_and_predicted():
    probs = np.array([[0.9, 0.1], [0.8, 0.2], [0.6, 0.4], [0.1, 0.9], [0.95, 0.05]])
    groups = dx.confident_errors(["a", "b", "c", "d", "e"], [1, 1, 1, 0, 0], probs, ["neg", "pos"])
    assert groups == [("pos", "neg", 2, ["a", "b"]), ("neg", "pos", 1, ["d"])]  # c: not confident; e: right


def test_log_history_from_the_run_file_else_the_newest_checkpoint(tmp_path):
    assert dx.read_log_history(tmp_path) == []
    for step in (6, 12):
        (tmp_path / f"checkpoint-{step}").mkdir()
        (tmp_path / f"checkpoint-{step}" / "trainer_state.json").write_text(
            json.dumps({"log_history": [{"step": step, "loss": 0.5}]}))
    assert dx.read_log_history(tmp_path) == [{"step": 12, "loss": 0.5}]
    (tmp_path / dx.LOG_HISTORY_FILE).write_text(json.dumps([{"step": 13, "loss": 0.4}]))
    assert dx.read_log_history(tmp_path) == [{"step": 13, "loss": 0.4}]


def fake_run(path, log, eval_metrics, train=None):
    path.mkdir()
    (path / "metrics.json").write_text(json.dumps({"eval": eval_metrics, "selection_metric": "macro_f1"}))
    (path / "bertkit_config.yaml").write_text(yaml.safe_dump({"model": "m", "data": {"train": "t.csv"},
                                                              "train": train or {"learning_rate": 1e-9}}))
    (path / dx.LOG_HISTORY_FILE).write_text(json.dumps(log))
    return str(path)


def test_a_run_directory_without_dev_predictions(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the training file the fake runs name is there (one that is gone: test_errors_round3)
    (tmp_path / "t.csv").write_text("text,label\n")
    sick = fake_run(tmp_path / "sick", history(FLAT, [(0.33, 0.7), (0.33, 0.7)]), {"macro_f1": 0.33})
    report = dx.diagnose(sick, predict=False)
    assert [s.name for s in report.symptoms] == ["training loss not falling", "everything low"]
    assert report.symptoms[0].commands == [f"bertkit run classify -c {sick}/bertkit_config.yaml overwrite=true "
                                           "train.learning_rate=3.0e-5"]
    assert report.symptoms[1].commands[0].startswith("bertkit inspect t.csv")
    healthy = fake_run(tmp_path / "healthy", history(FALLING, [(0.8, 0.5), (0.9, 0.4)]), {"macro_f1": 0.9})
    assert dx.report_lines(dx.diagnose(healthy, predict=False))[1].startswith("no symptom found")
    one_error = dx.Diagnosis(healthy, [], errors=[("positive", "negative", 1, ["a text"])])
    assert "1 example, by gold" in "\n".join(dx.report_lines(one_error))
    result = runner.invoke(app, ["diagnose", str(tmp_path / "nothing")])
    assert result.exit_code == 2 and "no finished bertkit run" in result.output


# ------------------------------------------------------------------------------------- real runs, built to fail

@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("diagnose-data")
    swap = {"positive": "negative", "negative": "positive"}
    rng = random.Random(0)
    return {"train": write_csv(root / "train.csv", ["text", "label"], sentiment_rows(48, 0)),
            "dev": write_csv(root / "dev.csv", ["text", "label"], sentiment_rows(16, 1)),
            "swapped": write_csv(root / "swapped.csv", ["text", "label"],
                                 [[text, swap[label]] for text, label in sentiment_rows(16, 1)]),
            "noisy": write_csv(root / "noisy.csv", ["text", "label"],  # labels that have nothing to do with the text
                               [[text, rng.choice(["positive", "negative"])] for text, _ in sentiment_rows(16, 2)])}


def overrides(model, train, dev, out, *extra):
    """Every epoch evaluated, no checkpoints (the run's log_history.json is what diagnose reads)."""
    return [f"model={model}", f"data.train={train}", f"data.eval={dev}", f"output_dir={out}", "precision=fp32",
            "data.max_length=24", "train.per_device_train_batch_size=8", "train.logging_steps=1",
            "train.save_strategy=no", "train.eval_strategy=epoch", "train.load_best_model_at_end=false",
            "train.learning_rate=1.0e-4", *extra]


def names(run_dir):
    return [symptom.name for symptom in dx.diagnose(str(run_dir)).symptoms]


pytestmark = pytest.mark.usefixtures("one_thread")


def test_a_learning_rate_of_1e_9_does_not_move_the_loss(tiny_model_dir, data, tmp_path):
    run_recipe(overrides(tiny_model_dir, data["train"], data["dev"], tmp_path, "train.learning_rate=1.0e-9",
                         "train.num_train_epochs=1"))
    assert (tmp_path / dx.LOG_HISTORY_FILE).is_file()
    report = dx.diagnose(str(tmp_path))
    assert report.symptoms[0].name == "dev accuracy near chance"
    not_falling = next(s for s in report.symptoms if s.name == "training loss not falling")
    assert not_falling.commands[0].endswith("overwrite=true train.learning_rate=3.0e-5")


def test_swapped_dev_labels_show_as_far_below_chance_with_the_swap_in_the_errors(minilm_dir, data, tmp_path):
    run_recipe(overrides(minilm_dir, data["train"], data["swapped"], tmp_path, "train.num_train_epochs=3"))
    report = dx.diagnose(str(tmp_path))
    assert report.symptoms[0].name == "dev accuracy far below chance" and "swapped" in report.symptoms[0].advice
    assert "everything low" not in [s.name for s in report.symptoms]  # the data explains it: no domain advice
    for symptom in report.symptoms:
        if "overfitting" in symptom.name:  # not "train fewer epochs": the labels disagree
            assert "dev labels" in symptom.advice and not symptom.commands
    groups = {(gold, predicted): count for gold, predicted, count, _ in report.errors}
    assert set(groups) <= {("negative", "positive"), ("positive", "negative")} and sum(groups.values()) >= 8


def test_many_epochs_on_few_noisy_rows_overfit(minilm_dir, data, tmp_path):
    run_recipe(overrides(minilm_dir, data["noisy"], data["dev"], tmp_path, "train.num_train_epochs=10"))
    report = dx.diagnose(str(tmp_path))
    overfit = next(s for s in report.symptoms if "overfitting" in s.name)
    assert any(command.split("overwrite=true ")[1].startswith("train.num_train_epochs=")
               for command in overfit.commands)


def test_batch_1_with_a_high_learning_rate_makes_dev_jump_through_the_cli(minilm_dir, data, tmp_path):
    run_recipe(overrides(minilm_dir, data["train"], data["dev"], tmp_path, "train.learning_rate=5.0e-4",
                         "train.num_train_epochs=1", "train.per_device_train_batch_size=1", "train.logging_steps=4",
                         "train.eval_strategy=steps", "train.eval_steps=4"))
    result = runner.invoke(app, ["diagnose", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "dev metric jumping around" in result.output
    assert "train.per_device_train_batch_size=16" in result.output


def test_a_healthy_run_gets_a_clean_bill(minilm_dir, data, tmp_path):
    run_recipe(overrides(minilm_dir, data["train"], data["dev"], tmp_path, "train.num_train_epochs=3"))
    report = dx.diagnose(str(tmp_path))
    assert report.symptoms == [] and report.errors == []
    assert dx.report_lines(report)[1].startswith("no symptom found")
