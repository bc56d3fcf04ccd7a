"""The multiple-choice recipe: reading (unequal option counts are an error naming the line), encoding as segment
pairs, the collator's (B, N, T) shapes, LoRA with a trainable head, and end-to-end runs through main(cfg) and the
CLI with predict / evaluate agreeing with the run's own dev accuracy."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from safetensors.torch import load_file
from typer.testing import CliRunner

from bertkit import BertkitForMultipleChoice
from bertkit.tasks.choice import MultipleChoiceCollator, compute_metrics_fn, encode, read_examples
from bertkit.cli import app, load_recipe
from bertkit.config import load_config
from bertkit.errors import BertkitError
from bertkit.tokenization import chinese_bert_tokenizer

runner = CliRunner()
DATA = Path(__file__).resolve().parent.parent / "data" / "choice"


pytestmark = pytest.mark.usefixtures("one_thread")


def tiny_bert(path, vocab_size: int, tokenizer) -> str:
    """A tiny random BERT. initializer_range 0.2 (not 0.02) spreads the options' scores from the start: with
    near-ties, argmax would hang on float noise between differently padded batches."""
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=128, initializer_range=0.2)
    transformers.BertModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def en_model_dir(tmp_path_factory, minilm_dir):
    """A tiny random BERT with MiniLM's real uncased tokenizer."""
    return tiny_bert(tmp_path_factory.mktemp("tiny-en"), 30522, transformers.AutoTokenizer.from_pretrained(minilm_dir))


@pytest.fixture(scope="module")
def zh_model_dir(tmp_path_factory):
    """A tiny random BERT with the real bert-base-chinese vocabulary and tokenizer."""
    return tiny_bert(tmp_path_factory.mktemp("tiny-zh"), 21128, chinese_bert_tokenizer())


def write_jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return str(path)


def head(source: Path, target: Path, count: int) -> str:
    lines = source.read_text(encoding="utf-8").splitlines()[:count]
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(target)


def overrides(model_dir, train, dev, output_dir, *extra):
    return [f"model={model_dir}", f"data.train={train}", f"data.eval={dev}", f"output_dir={output_dir}",
            "precision=fp32", "data.max_length=48", "train.num_train_epochs=1", "train.per_device_train_batch_size=4",
            "train.learning_rate=1.0e-3", "train.logging_steps=2", *extra]


ROWS = [
    {"context": "Tom paid ten dollars for a book that cost seven.", "question": "How much change did he get?",
     "options": ["Three dollars.", "Seven dollars.", "Ten.", "None at all, he paid exactly."], "label": 0},
    {"context": "It rained.", "question": "What was the weather?", "options": ["Sunny.", "Rain.", "Snow.", "Fog."],
     "label": 1},
    {"context": "", "question": "Pick B.", "options": ["a", "b", "c", "d"], "label": 1},
]


# ---------------------------------------------------------------------------------------------------------------
# Reading and encoding


def test_reading_accepts_index_text_or_letter_labels(tmp_path):
    examples = read_examples(write_jsonl(tmp_path / "ok.jsonl", ROWS))
    assert [e.label for e in examples] == [0, 1, 1]
    assert examples[2].where.endswith("ok.jsonl line 3")
    as_text = [{**row, "label": row["options"][i]} for row, i in zip(ROWS, (0, 1, 1))]
    assert [e.label for e in read_examples(write_jsonl(tmp_path / "text.jsonl", as_text))] == [0, 1, 1]
    letters = [{**row, "label": "ABCD"[i]} for row, i in zip(ROWS, (0, 1, 1))]
    assert [e.label for e in read_examples(write_jsonl(tmp_path / "letters.jsonl", letters))] == [0, 1, 1]


def test_unequal_option_counts_are_an_error_naming_the_line(tmp_path):
    rows = ROWS[:2] + [{"context": "c", "question": "q", "options": ["x", "y", "z"], "label": 0}]
    path = write_jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(BertkitError) as error:
        read_examples(path)
    assert str(error.value).startswith(f"{path} line 3 has 3 options but {path} line 1 has 4")


@pytest.mark.parametrize("labels, message", [
    ([0, 4], "line 2: label 4 is out of range for 4 options"),
    (["A", "Hail."], "line 2: label 'Hail.' is neither an option index nor one of the options"),
    ([True], "line 1: label True is not an option index"),
])
def test_bad_labels_name_the_line(tmp_path, labels, message):
    path = write_jsonl(tmp_path / "bad.jsonl", [{**row, "label": label} for row, label in zip(ROWS, labels)])
    with pytest.raises(BertkitError, match=f"bad.jsonl {message}"):
        read_examples(path)


def test_missing_columns_are_named(tmp_path):
    path = write_jsonl(tmp_path / "x.jsonl", [{"context": "c", "answers": ["a", "b"], "label": 0}])
    with pytest.raises(BertkitError, match="needs a context and/or question column and an options list"):
        read_examples(path)


def test_encoding_pairs_context_with_question_and_option(minilm_dir, tmp_path):
    tokenizer = transformers.AutoTokenizer.from_pretrained(minilm_dir)
    examples = read_examples(write_jsonl(tmp_path / "ok.jsonl", ROWS))
    features = encode(tokenizer, examples, max_length=64)
    first = features[0]
    assert len(first["input_ids"]) == 4 and first["labels"] == 0
    text = tokenizer.decode(first["input_ids"][1])
    assert text == ("[CLS] tom paid ten dollars for a book that cost seven. [SEP] how much change did he get? "
                    "seven dollars. [SEP]")
    segments = first["token_type_ids"][1]
    assert segments == [0] * segments.index(1) + [1] * (len(segments) - segments.index(1))
    assert first["input_ids"][1][segments.index(1) - 1] == tokenizer.sep_token_id
    short = encode(tokenizer, examples, max_length=12)[0]  # cut from the longer segment (the context)
    assert all(len(ids) == 12 for ids in short["input_ids"])
    assert tokenizer.decode(short["input_ids"][0]).startswith("[CLS] tom paid")


def test_collator_pads_across_all_options(minilm_dir, tmp_path):
    tokenizer = transformers.AutoTokenizer.from_pretrained(minilm_dir)
    features = encode(tokenizer, read_examples(write_jsonl(tmp_path / "ok.jsonl", ROWS)), 64)
    longest = max(len(ids) for feature in features[:2] for ids in feature["input_ids"])
    batch = MultipleChoiceCollator(tokenizer)(features[:2])
    assert batch["input_ids"].shape == (2, 4, longest) and batch["input_ids"].dtype == torch.long
    assert batch["attention_mask"].shape == batch["token_type_ids"].shape == (2, 4, longest)
    assert batch["labels"].tolist() == [0, 1]
    lengths = [[len(ids) for ids in feature["input_ids"]] for feature in features[:2]]
    assert batch["attention_mask"].sum(-1).tolist() == lengths
    assert batch["input_ids"][1, 0, : lengths[1][0]].tolist() == features[1]["input_ids"][0]
    three = [{**features[0], **{k: v[:3] for k, v in features[0].items() if k != "labels"}}, features[1]]
    with pytest.raises(BertkitError, match=r"a batch mixes examples with \[3, 4\] options"):
        MultipleChoiceCollator(tokenizer)(three)


def test_compute_metrics_gives_accuracy():
    logits, labels = np.array([[0.1, 0.9], [2.0, 1.0], [0.0, 1.0]]), np.array([1, 1, 1])
    compute_metrics = compute_metrics_fn()
    assert compute_metrics(transformers.EvalPrediction(logits, labels)) == {"accuracy": pytest.approx(2 / 3)}


# ---------------------------------------------------------------------------------------------------------------
# End to end


def test_cli_run_then_predict_and_evaluate_agree(en_model_dir, tmp_path):
    train = head(DATA / "en" / "train.jsonl", tmp_path / "train.jsonl", 40)
    dev = head(DATA / "en" / "dev.jsonl", tmp_path / "dev.jsonl", 16)
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", "choice", *overrides(en_model_dir, train, dev, out, "llrd=0.8",
                                                             "train.gradient_accumulation_steps=2",
                                                             "early_stopping_patience=1")])
    assert result.exit_code == 0, result.output
    for name in ("model.safetensors", "config.json", "tokenizer.json", "metrics.json", "training_curve.png",
                 "bertkit_config.yaml", "README.md"):
        assert (out / name).exists(), name
    assert json.loads((out / "config.json").read_text())["architectures"] == ["BertForMultipleChoice"]
    assert "multiple-choice" in (out / "README.md").read_text()
    run_accuracy = json.loads((out / "metrics.json").read_text())["eval"]["accuracy"]

    predictions = tmp_path / "predictions.jsonl"
    result = runner.invoke(app, ["predict", str(out), dev, "-o", str(predictions)])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in predictions.read_text().splitlines()]
    rows = [json.loads(line) for line in Path(dev).read_text().splitlines()]
    assert [r["question"] for r in records] == [row["question"] for row in rows]  # input order kept
    for record, row in zip(records, rows):
        assert record["option"] == row["options"][record["choice"]] and len(record["probabilities"]) == 4
        assert sum(record["probabilities"]) == pytest.approx(1.0, abs=1e-4)
        assert record["choice"] == int(np.argmax(record["probabilities"]))
    from_predictions = np.mean([r["choice"] == row["label"] for r, row in zip(records, rows)])

    metrics_file = tmp_path / "eval.json"
    result = runner.invoke(app, ["evaluate", str(out), dev, "-o", str(metrics_file)])
    assert result.exit_code == 0, result.output
    assert json.loads(metrics_file.read_text())["accuracy"] == pytest.approx(from_predictions)
    assert run_accuracy == pytest.approx(from_predictions)

    stock = transformers.AutoModelForMultipleChoice.from_pretrained(out)
    assert type(stock) is transformers.BertForMultipleChoice


def test_chinese_run_with_lora_trains_the_head_and_saves_a_merged_model(zh_model_dir, tmp_path):
    module = load_recipe("choice")
    train = head(DATA / "zh" / "train.jsonl", tmp_path / "train.jsonl", 24)
    dev = head(DATA / "zh" / "dev.jsonl", tmp_path / "dev.jsonl", 8)
    out = tmp_path / "run"
    cfg = load_config(module.Config, None, overrides(zh_model_dir, train, dev, out, "lora.enabled=true", "lora.r=4"))
    model = module.build_model(cfg, zh_model_dir)
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    assert any("classifier" in name and "modules_to_save" in name for name in trainable)
    assert any("lora_A" in name for name in trainable)
    assert not any("word_embeddings" in name for name in trainable)

    tokenizer = chinese_bert_tokenizer()
    assert tokenizer.tokenize("男：我想存钱。") == ["男", "：", "我", "想", "存", "钱", "。"]
    initial = []  # the head as main() initialises it (same seed): twice the same, so a change means training
    for _ in range(2):
        transformers.set_seed(cfg.run.seed)
        initial.append(BertkitForMultipleChoice.from_pretrained(zh_model_dir).classifier.weight.detach().clone())
    assert torch.equal(initial[0], initial[1])
    results = module.main(cfg)
    assert 0.0 <= results["eval"]["accuracy"] <= 1.0
    weights = load_file(out / "model.safetensors")
    assert not any("lora" in name or "modules_to_save" in name for name in weights)
    assert not torch.allclose(weights["classifier.weight"], initial[0])  # the head trained and was saved
