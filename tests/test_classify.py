"""The classify recipe end to end on a tiny model: each label kind through main(cfg) and through the CLI,
resume after an interruption, predict / evaluate agreement, and every shipped YAML validating."""

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from safetensors.torch import load_file
from typer.testing import CliRunner

from bertkit.cli import CONFIGS_DIR, app, load_recipe
from bertkit.config import load_config
from helpers import write_csv

runner = CliRunner()
POSITIVE = ["great", "wonderful", "lovely", "excellent", "superb", "fantastic", "delightful", "brilliant"]
NEGATIVE = ["terrible", "awful", "dreadful", "bad", "poor", "boring", "horrible", "dull"]


def sentiment_rows(count: int, seed: int) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(count):
        label = "positive" if i % 2 == 0 else "negative"
        words = rng.choice(POSITIVE if label == "positive" else NEGATIVE, size=2, replace=False)
        rows.append([f"the film number {i} was {words[0]} and {words[1]}", label])
    return rows


@pytest.fixture(scope="module")
def sentiment(tmp_path_factory):
    root = tmp_path_factory.mktemp("sentiment")
    return {"train": write_csv(root / "train.csv", ["text", "label"], sentiment_rows(48, 0)),
            "dev": write_csv(root / "dev.csv", ["text", "label"], sentiment_rows(16, 1))}


def run_recipe(overrides: list[str], recipe: str = "classify"):
    module = load_recipe(recipe)
    return module.main(load_config(module.Config, None, overrides))


def base_overrides(model_dir, train, dev, output_dir, *extra):
    return [f"model={model_dir}", f"data.train={train}", f"data.eval={dev}", f"output_dir={output_dir}",
            "precision=fp32", "data.max_length=32", "train.num_train_epochs=1", "train.per_device_train_batch_size=8",
            "train.learning_rate=1.0e-3", "train.logging_steps=2", *extra]


def test_single_label_run_writes_everything(tiny_model_dir, sentiment, tmp_path):
    out = tmp_path / "run"
    results = run_recipe(base_overrides(tiny_model_dir, sentiment["train"], sentiment["dev"], out, "llrd=0.8"))
    for name in ("model.safetensors", "config.json", "tokenizer.json", "metrics.json", "training_curve.png",
                 "bertkit_config.yaml", "README.md", "classification_report.txt", "confusion_matrix.json"):
        assert (out / name).exists(), name
    config = json.loads((out / "config.json").read_text())
    assert config["id2label"] == {"0": "negative", "1": "positive"} and config["model_type"] == "bert"
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["eval"]["accuracy"] == pytest.approx(results["eval"]["accuracy"])
    assert 0.0 <= metrics["eval"]["accuracy"] <= 1.0 and "f1_positive" in metrics["eval"]
    assert (out / "training_curve.png").read_bytes()[:4] == b"\x89PNG"
    # the saved model is plain BERT
    stock = transformers.AutoModelForSequenceClassification.from_pretrained(out)
    assert type(stock) is transformers.BertForSequenceClassification


def test_sentence_pair_uses_segments(tiny_model_dir, tmp_path):
    rows = [[f"a man plays guitar {i}", f"someone plays music {i}" if i % 2 else f"nobody is here {i}",
             "entailment" if i % 2 else "contradiction"] for i in range(24)]
    train = write_csv(tmp_path / "pairs.csv", ["premise", "hypothesis", "label"], rows)
    module = load_recipe("classify")
    cfg = load_config(module.Config, None, base_overrides(tiny_model_dir, train, train, tmp_path / "run"))
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model_dir)
    train_set, _, labels = module.load_data(cfg, tokenizer)
    first = train_set[0]
    assert set(first["token_type_ids"]) == {0, 1}  # real segments A and B, not one concatenated string
    assert first["input_ids"].count(tokenizer.sep_token_id) == 2
    assert labels.names == ["contradiction", "entailment"]
    results = run_recipe(base_overrides(tiny_model_dir, train, train, tmp_path / "run"))
    assert "accuracy" in results["eval"]


def test_multi_label_threshold_is_tuned_and_saved(tiny_model_dir, tmp_path):
    topics = ["billing", "shipping", "returns"]
    rows = [{"text": f"message {i} about {' and '.join(topics[j] for j in range(3) if (i >> j) & 1)}",
             "labels": [topics[j] for j in range(3) if (i >> j) & 1]} for i in range(1, 33)]
    path = tmp_path / "multi.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "run"
    results = run_recipe(base_overrides(tiny_model_dir, path, path, out))
    assert {"micro_f1", "macro_f1", "subset_accuracy"} <= set(results["eval"])
    config = json.loads((out / "config.json").read_text())
    assert config["problem_type"] == "multi_label_classification"
    assert config["multi_label_threshold"] == pytest.approx(results["threshold"])
    assert 0.0 < results["threshold"] < 1.0


def test_regression(tiny_model_dir, tmp_path):
    rows = [[f"sentence {i}", f"other {i}", f"{(i % 11) / 2:.1f}"] for i in range(24)]
    train = write_csv(tmp_path / "sts.csv", ["sentence1", "sentence2", "score"], rows)
    results = run_recipe(base_overrides(tiny_model_dir, train, train, tmp_path / "run", "pooling=mean"))
    assert {"pearson", "spearman", "mse"} <= set(results["eval"])
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["problem_type"] == "regression" and config["num_labels"] == 1 if "num_labels" in config else True


def test_cli_run_predict_evaluate_agree(tiny_model_dir, sentiment, tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", "classify", *base_overrides(tiny_model_dir, sentiment["train"],
                                                                     sentiment["dev"], out)])
    assert result.exit_code == 0, result.output
    predictions = tmp_path / "predictions.jsonl"
    result = runner.invoke(app, ["predict", str(out), sentiment["dev"], "-o", str(predictions)])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in predictions.read_text().splitlines()]
    with open(sentiment["dev"], newline="") as handle:
        dev_rows = list(csv.DictReader(handle))
    assert [r["text"] for r in records] == [row["text"] for row in dev_rows]  # input order kept
    assert all(set(r["probabilities"]) == {"negative", "positive"} for r in records)
    accuracy_from_predictions = np.mean([r["label"] == row["label"] for r, row in zip(records, dev_rows)])
    metrics_file = tmp_path / "eval.json"
    result = runner.invoke(app, ["evaluate", str(out), sentiment["dev"], "-o", str(metrics_file)])
    assert result.exit_code == 0, result.output
    assert json.loads(metrics_file.read_text())["accuracy"] == pytest.approx(accuracy_from_predictions)
    csv_out = tmp_path / "predictions.csv"
    assert runner.invoke(app, ["predict", str(out), sentiment["dev"], "-o", str(csv_out)]).exit_code == 0
    header = csv_out.read_text().splitlines()[0]
    assert header == "text,label,score,prob_negative,prob_positive"
    bf16_out = tmp_path / "predictions_bf16.jsonl"
    result = runner.invoke(app, ["predict", str(out), sentiment["dev"], "-o", str(bf16_out), "--precision", "bf16"])
    assert result.exit_code == 0, result.output
    bf16_records = [json.loads(line) for line in bf16_out.read_text().splitlines()]
    assert [r["probabilities"]["positive"] for r in bf16_records] == pytest.approx(
        [r["probabilities"]["positive"] for r in records], abs=0.02)  # autocast: close, not equal
    assert [r["probabilities"]["positive"] for r in bf16_records] != [r["probabilities"]["positive"] for r in records]
    result = runner.invoke(app, ["evaluate", str(out), sentiment["dev"], "--precision", "fp16"])
    if not torch.cuda.is_available():
        assert result.exit_code == 2 and "fp16 needs a CUDA GPU" in result.output


def test_a_run_saves_its_inference_settings_in_the_model_config(tiny_model_dir, sentiment, tmp_path):
    from bertkit import tasks
    from bertkit.tasks.classify import LongDocConfig, Settings, load_predictor

    out = tmp_path / "run"
    run_recipe(base_overrides(tiny_model_dir, sentiment["train"], sentiment["dev"], out, "data.text_column=text",
                              "long_doc.strategy=tail", "train.save_strategy=no", "train.eval_strategy=no",
                              "train.load_best_model_at_end=false"))
    saved = json.loads((out / "config.json").read_text())[tasks.SETTINGS_KEY]
    temperature = saved["temperature"]  # fitted on dev (calibrate=true by default): tests/test_calibration.py
    assert len(temperature) == 1 and temperature[0] > 0
    assert saved == tasks.settings_dict(Settings(32, "text", None, None, LongDocConfig("tail"), temperature))
    classifier = load_predictor(str(out))
    assert classifier.max_length == 32 and classifier.long_doc == LongDocConfig("tail")


def test_model_settings_come_from_config_json_alone(tmp_path):
    """The one settings store is config.json's bertkit_task_settings; a model that saved none gets the defaults."""
    from bertkit import BertkitConfig, tasks
    from bertkit.tasks.classify import Settings, read_model_settings

    (tmp_path / "bertkit_config.yaml").write_text("data:\n  max_length: 40\n  text_column: body\n  train: t.csv\n")
    saved = BertkitConfig(**{tasks.SETTINGS_KEY: tasks.settings_dict(Settings(64))})
    assert read_model_settings(str(tmp_path), saved) == Settings(64)
    assert read_model_settings(str(tmp_path), BertkitConfig()) == Settings()  # the recipe config is not read
    assert read_model_settings(str(tmp_path / "elsewhere"), BertkitConfig()) == Settings()  # a stock model


@pytest.mark.gpu
def test_predict_runs_on_the_gpu(tiny_model_dir, sentiment, tmp_path):
    from bertkit.tasks.classify import load_predictor

    out = tmp_path / "run"
    run_recipe(base_overrides(tiny_model_dir, sentiment["train"], sentiment["dev"], out))
    assert load_predictor(str(out)).model.device.type == "cuda"
    predictions = tmp_path / "predictions.jsonl"
    result = runner.invoke(app, ["predict", str(out), sentiment["dev"], "-o", str(predictions), "--precision", "auto"])
    assert result.exit_code == 0, result.output
    assert len(predictions.read_text().splitlines()) == 16


def _final_weights(out: Path) -> dict:
    return load_file(out / "model.safetensors")


def test_interrupted_run_resumes_to_the_same_weights(tiny_model_dir, sentiment, tmp_path, monkeypatch):
    extra = ["train.num_train_epochs=2", "train.save_strategy=steps", "train.save_steps=3", "train.eval_strategy=no",
             "train.load_best_model_at_end=false"]
    straight = tmp_path / "straight"
    run_recipe(base_overrides(tiny_model_dir, sentiment["train"], sentiment["dev"], straight, *extra))

    interrupted = tmp_path / "interrupted"
    original_save = transformers.Trainer._save_checkpoint

    def save_then_crash(self, *args, **kwargs):
        original_save(self, *args, **kwargs)
        if self.state.global_step == 6:
            raise KeyboardInterrupt("simulated interruption")

    monkeypatch.setattr(transformers.Trainer, "_save_checkpoint", save_then_crash)
    with pytest.raises(KeyboardInterrupt):
        run_recipe(base_overrides(tiny_model_dir, sentiment["train"], sentiment["dev"], interrupted, *extra))
    monkeypatch.setattr(transformers.Trainer, "_save_checkpoint", original_save)
    assert (interrupted / "checkpoint-6").is_dir() and not (interrupted / "model.safetensors").exists()
    results = run_recipe(base_overrides(tiny_model_dir, sentiment["train"], sentiment["dev"], interrupted, *extra,
                                        "resume=true"))
    expected, actual = _final_weights(straight), _final_weights(interrupted)
    assert expected.keys() == actual.keys()
    for name in expected:
        assert torch.allclose(expected[name], actual[name], atol=1e-6), name
    straight_metrics = json.loads((straight / "metrics.json").read_text())["eval"]
    assert results["eval"]["accuracy"] == pytest.approx(straight_metrics["accuracy"])


def test_lora_option_saves_a_merged_plain_model(tiny_model_dir, sentiment, tmp_path):
    out = tmp_path / "run"
    run_recipe(base_overrides(tiny_model_dir, sentiment["train"], sentiment["dev"], out, "lora.enabled=true",
                              "lora.r=4"))
    weights = _final_weights(out)
    assert not any("lora" in name for name in weights)
    assert "classifier.weight" in weights
    assert type(transformers.AutoModelForSequenceClassification.from_pretrained(out)).__name__ == \
        "BertForSequenceClassification"


def test_lora_adapter_saved_without_merging_predicts_like_peft(tiny_model_dir, sentiment, tmp_path):
    """lora.merge=false saves the adapter with the task config (labels) beside it; predict loads the base model
    it names, applies the adapter and gives the probabilities peft's own loading gives."""
    from peft import PeftModel

    import bertkit

    out = tmp_path / "run"
    run_recipe(base_overrides(tiny_model_dir, sentiment["train"], sentiment["dev"], out, "lora.enabled=true",
                              "lora.r=4", "lora.merge=false", "calibrate=false"))  # peft gives the raw softmax
    assert (out / "adapter_config.json").is_file() and not (out / "model.safetensors").exists()
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["BertForSequenceClassification"]
    assert sorted(config["id2label"].values()) == ["negative", "positive"]
    predictions = tmp_path / "predictions.jsonl"
    result = runner.invoke(app, ["predict", str(out), sentiment["dev"], "-o", str(predictions)])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in predictions.read_text().splitlines()]

    base = bertkit.BertkitForSequenceClassification.from_pretrained(
        tiny_model_dir, config=bertkit.BertkitConfig.from_pretrained(out))
    model = PeftModel.from_pretrained(base, out).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    texts = [record["text"] for record in records]
    with torch.no_grad():
        probs = model(**tokenizer(texts, truncation=True, max_length=32, padding=True,
                                  return_tensors="pt")).logits.softmax(-1)
    positive = config["label2id"]["positive"]
    assert [r["probabilities"]["positive"] for r in records] == pytest.approx(probs[:, positive].tolist(), abs=1e-4)


@pytest.mark.parametrize("path", sorted(CONFIGS_DIR.glob("*/*.yaml")), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_shipped_config_validates(path):
    result = runner.invoke(app, ["validate", path.parent.name, "-c", str(path)])
    assert result.exit_code == 0, result.output
    assert "ok:" in result.output


def test_cli_help_and_listing():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0 and "predict" in result.output
    for command in ("run", "ls", "cp", "validate", "predict", "evaluate", "inspect", "push"):
        help_text = runner.invoke(app, [command, "--help"])
        assert help_text.exit_code == 0, command
    listing = runner.invoke(app, ["ls"])
    assert "classify" in listing.output and "classify/en_sentiment" in listing.output


def test_cp_copies_a_config(tmp_path):
    result = runner.invoke(app, ["cp", "classify/en_sentiment", str(tmp_path)])
    assert result.exit_code == 0, result.output
    copied = (tmp_path / "en_sentiment.yaml").read_text()
    original = (CONFIGS_DIR / "classify" / "en_sentiment.yaml").read_text()
    assert copied.count("\n") == original.count("\n") and "learning_rate: 1.0e-4" in copied
