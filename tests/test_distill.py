"""Distillation: the student's layers come from the teacher as asked, the loss is the documented formula, one
optimizer step is the same at batch 8 x 1 and 2 x 4, and `bertkit run distill` leaves a run directory that predict /
evaluate / export read (from a bertkit classify run, or from a stock transformers classifier)."""

import json

import datasets
import pytest
import torch
import torch.nn.functional as F
import transformers
from helpers import one_sgd_step, tiny_config_kwargs
from typer.testing import CliRunner

import bertkit
from bertkit.cli import app, load_recipe
from bertkit.config import load_config
from bertkit.distill import (DistillationTrainer, DistillOptions, hard_label_loss, layer_map, pick_layers,
                             soft_target_loss, student_from_teacher)
from bertkit.errors import BertkitError

runner = CliRunner()
pytestmark = pytest.mark.usefixtures("one_thread")


def tiny_classifier(layers=4, seed=0, dropout=0.1):
    torch.manual_seed(seed)
    config = bertkit.BertkitConfig(**tiny_config_kwargs(num_hidden_layers=layers, num_labels=3,
                                                        hidden_dropout_prob=dropout,
                                                        attention_probs_dropout_prob=dropout))
    return bertkit.BertkitForSequenceClassification(config).eval()


def test_pick_layers_evenly_spaced_or_as_given():
    assert pick_layers(6, 3) == [0, 2, 4]
    assert pick_layers(12, 6) == [0, 2, 4, 6, 8, 10]
    assert pick_layers(12, 4) == [0, 3, 6, 9]
    assert pick_layers(6, layers=[1, 3, 5]) == [1, 3, 5]
    for bad in ({"num_layers": 7}, {"num_layers": 0}, {"layers": [2, 1]}, {"layers": [0, 6]}, {"layers": []}):
        with pytest.raises(BertkitError):
            pick_layers(6, **bad)


def test_student_keeps_the_teachers_layers_and_the_rest():
    teacher = tiny_classifier(layers=4)
    student = student_from_teacher(teacher, [1, 3])
    assert student.config.num_hidden_layers == 2 and teacher.config.num_hidden_layers == 4
    for new, old in enumerate([1, 3]):
        assert torch.equal(student.bert.encoder.layer[new].output.dense.weight,
                           teacher.bert.encoder.layer[old].output.dense.weight)
    assert torch.equal(student.classifier.weight, teacher.classifier.weight)
    assert torch.equal(student.bert.embeddings.word_embeddings.weight, teacher.bert.embeddings.word_embeddings.weight)
    whole = student_from_teacher(teacher, [0, 1, 2, 3]).eval()  # every layer: the same function
    ids = torch.randint(1, 99, (2, 7))
    torch.testing.assert_close(whole(ids).logits, teacher(ids).logits, rtol=0, atol=0)
    assert layer_map(2, 4, [1, 3]) == [(0, 0), (1, 2), (2, 4)]
    assert layer_map(2, 4) == [(0, 0), (1, 2), (2, 4)] and layer_map(3, 6) == [(0, 0), (1, 2), (2, 4), (3, 6)]


def test_losses_are_the_documented_formulas():
    student, teacher = torch.randn(5, 3), torch.randn(5, 3)
    temperature = 2.5
    expected = (F.softmax(teacher / temperature, -1) * (F.log_softmax(teacher / temperature, -1)
                                                        - F.log_softmax(student / temperature, -1))).sum(-1).mean()
    torch.testing.assert_close(soft_target_loss(student, teacher, temperature), expected * temperature**2)
    assert float(soft_target_loss(teacher, teacher, temperature)) == pytest.approx(0, abs=1e-6)
    labels = torch.tensor([0, 2, -100, 1, -100])  # unlabelled rows add nothing, but count as rows
    labelled = F.cross_entropy(student[[0, 1, 3]], labels[[0, 1, 3]], reduction="sum")
    torch.testing.assert_close(hard_label_loss(student, labels), labelled / 5)


def one_step_update(batch_size: int, accumulation: int, tmp_path, hidden_weight: float) -> dict:
    """Parameter change of the student after one SGD step of DistillationTrainer on the same 8 rows."""
    teacher, student = tiny_classifier(layers=4, seed=1, dropout=0.0), None
    student = student_from_teacher(tiny_classifier(layers=4, seed=2, dropout=0.0), [0, 2])
    generator = torch.Generator().manual_seed(3)
    lengths = [3, 9, 5, 12, 7, 4, 10, 6]
    rows = {"input_ids": [torch.randint(1, 99, (n,), generator=generator).tolist() for n in lengths],
            "labels": [0, 1, -100, 2, 1, -100, 0, 2]}
    args, tokenizer = one_sgd_step(tmp_path, batch_size, accumulation)
    before = {name: p.detach().clone() for name, p in student.named_parameters()}
    trainer = DistillationTrainer(model=student, args=args, train_dataset=datasets.Dataset.from_dict(rows),
                                  data_collator=transformers.DataCollatorWithPadding(tokenizer), teacher=teacher,
                                  options=DistillOptions(temperature=2.0, alpha=0.6, hidden_weight=hidden_weight),
                                  layer_pairs=layer_map(2, 4, [0, 2]))
    trainer.train()
    return {name: p.detach() - before[name] for name, p in student.named_parameters()}


@pytest.mark.parametrize("hidden_weight", [0.0, 1.0])
def test_gradient_accumulation_is_exact(tmp_path, hidden_weight):
    whole = one_step_update(8, 1, tmp_path, hidden_weight)
    accumulated = one_step_update(2, 4, tmp_path, hidden_weight)
    assert max(float(d.abs().max()) for d in whole.values()) > 1e-4  # the step did something
    for name in whole:
        torch.testing.assert_close(accumulated[name], whole[name], rtol=1e-4, atol=1e-6, msg=name)


POSITIVE, NEGATIVE = ["great", "wonderful", "lovely", "superb"], ["terrible", "awful", "dull", "boring"]


def write_sentiment(path, count, seed):
    import random

    rng = random.Random(seed)
    lines = ["text,label"] + [f"the film {i} was {rng.choice(POSITIVE if i % 2 else NEGATIVE)},"
                              f"{'positive' if i % 2 else 'negative'}" for i in range(count)]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def run(recipe, overrides):
    module = load_recipe(recipe)
    return module.main(load_config(module.Config, None, overrides))


COMMON = ["precision=fp32", "data.max_length=32", "train.num_train_epochs=1", "train.learning_rate=1.0e-3",
          "train.per_device_train_batch_size=8"]


def test_distill_run_from_a_classify_run_is_a_normal_run_directory(tmp_path, tiny_model_dir):
    train, dev = write_sentiment(tmp_path / "train.csv", 48, 0), write_sentiment(tmp_path / "dev.csv", 16, 1)
    (tmp_path / "more.txt").write_text("".join(f"another film {i} that was {w}\n"
                                               for i, w in enumerate(POSITIVE + NEGATIVE)))
    run("classify", [f"model={tiny_model_dir}", f"data.train={train}", f"data.eval={dev}",
                     f"output_dir={tmp_path / 'teacher'}", *COMMON])
    results = run("distill", [f"teacher={tmp_path / 'teacher'}", f"data.train={train}", f"data.eval={dev}",
                              f"data.unlabelled={tmp_path / 'more.txt'}", f"output_dir={tmp_path / 'student'}",
                              "student.num_layers=1", "hidden_weight=1.0", *COMMON])
    assert results["rows"]["train"] == 48 + 8 and results["student_layers"] == [0]
    assert set(results["eval"]) >= {"accuracy", "macro_f1"} and "accuracy" in results["teacher_eval"]
    config = json.loads((tmp_path / "student" / "config.json").read_text())
    assert config["num_hidden_layers"] == 1 and config["id2label"] == {"0": "negative", "1": "positive"}
    assert (tmp_path / "student" / "bertkit_run.json").is_file()
    result = runner.invoke(app, ["predict", str(tmp_path / "student"), dev, "-o", str(tmp_path / "p.jsonl")])
    assert result.exit_code == 0, result.output
    assert len((tmp_path / "p.jsonl").read_text().splitlines()) == 16
    result = runner.invoke(app, ["evaluate", str(tmp_path / "student"), dev])
    assert result.exit_code == 0 and "accuracy" in result.output, result.output


def test_distill_from_a_stock_transformers_classifier(tmp_path, tiny_model_dir):
    torch.manual_seed(0)
    config = transformers.BertConfig.from_pretrained(tiny_model_dir, num_labels=2,
                                                     id2label={0: "negative", 1: "positive"},
                                                     label2id={"negative": 0, "positive": 1})
    transformers.BertForSequenceClassification(config).save_pretrained(tmp_path / "stock")
    transformers.AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(tmp_path / "stock")
    train = write_sentiment(tmp_path / "train.csv", 16, 0)
    results = run("distill", [f"teacher={tmp_path / 'stock'}", f"data.train={train}",
                              f"output_dir={tmp_path / 'student'}", "student.layers=[1]", "alpha=1.0", *COMMON])
    assert results["student_layers"] == [1]
    student = bertkit.BertkitForSequenceClassification.from_pretrained(tmp_path / "student")
    assert student.config.num_hidden_layers == 1


def test_distill_refuses_what_it_cannot_do(tmp_path, tiny_model_dir):
    result = runner.invoke(app, ["validate", "distill", "alpha=1.5", "teacher=x"])
    assert result.exit_code == 2 and "alpha" in result.output
    result = runner.invoke(app, ["validate", "distill"])
    assert result.exit_code == 2 and "teacher" in result.output
    torch.manual_seed(0)
    config = transformers.BertConfig.from_pretrained(tiny_model_dir, num_labels=3,
                                                     problem_type="multi_label_classification")
    transformers.BertForSequenceClassification(config).save_pretrained(tmp_path / "multi")
    transformers.AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(tmp_path / "multi")
    train = write_sentiment(tmp_path / "train.csv", 16, 0)
    with pytest.raises(BertkitError, match="single-label"):
        run("distill", [f"teacher={tmp_path / 'multi'}", f"data.train={train}", f"output_dir={tmp_path / 's'}",
                        *COMMON])
