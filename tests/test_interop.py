"""Checkpoints go both ways: stock BERT loads into bertkit with only new heads missing, and what bertkit saves
loads in a Python process that never imports bertkit, giving the same outputs."""

import json
import subprocess
import sys
import textwrap

import pytest
import torch
import transformers
from helpers import HEAD_PAIRS, output_tensors, random_batch, tiny_config_kwargs

import bertkit

STOCK_AUTO = {
    "base": "AutoModel",
    "pretraining": "AutoModelForPreTraining",
    "mlm": "AutoModelForMaskedLM",
    "sequence": "AutoModelForSequenceClassification",
    "token": "AutoModelForTokenClassification",
    "qa": "AutoModelForQuestionAnswering",
    "choice": "AutoModelForMultipleChoice",
}
NEW_HEAD_KEYS = {
    "base": set(),
    "pretraining": {"cls.predictions.transform.dense.weight", "cls.predictions.transform.dense.bias",
                    "cls.predictions.transform.LayerNorm.weight", "cls.predictions.transform.LayerNorm.bias",
                    "cls.predictions.bias", "cls.predictions.decoder.bias",
                    "cls.seq_relationship.weight", "cls.seq_relationship.bias"},
    "mlm": {"cls.predictions.transform.dense.weight", "cls.predictions.transform.dense.bias",
            "cls.predictions.transform.LayerNorm.weight", "cls.predictions.transform.LayerNorm.bias",
            "cls.predictions.bias", "cls.predictions.decoder.bias"},
    "sequence": {"classifier.weight", "classifier.bias"},
    "token": {"classifier.weight", "classifier.bias"},
    "qa": {"qa_outputs.weight", "qa_outputs.bias"},
    "choice": {"classifier.weight", "classifier.bias"},
}


@pytest.mark.parametrize("head", list(HEAD_PAIRS))
def test_stock_checkpoint_loads_with_only_new_heads_missing(head, minilm_dir):
    model, info = HEAD_PAIRS[head][1].from_pretrained(minilm_dir, output_loading_info=True)
    _, stock_info = HEAD_PAIRS[head][0].from_pretrained(minilm_dir, output_loading_info=True)
    assert set(info["missing_keys"]) == set(stock_info["missing_keys"]) == NEW_HEAD_KEYS[head]
    # heads without a pooler leave the checkpoint's pooler unused, exactly as transformers reports it
    assert set(info["unexpected_keys"]) == set(stock_info["unexpected_keys"]) <= {"pooler.dense.weight",
                                                                                  "pooler.dense.bias"}
    assert not info["mismatched_keys"]
    assert model.config.model_type == "bertkit"
    if head in ("mlm", "pretraining"):  # the decoder is tied to the word embeddings, not a fresh matrix
        decoder, embeddings = model.cls.predictions.decoder, model.bert.embeddings.word_embeddings
        assert decoder.weight.data_ptr() == embeddings.weight.data_ptr()


def test_saved_config_is_stock_bert(tmp_path):
    model = bertkit.BertkitForSequenceClassification(bertkit.BertkitConfig(**tiny_config_kwargs()))
    model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["model_type"] == "bert"
    assert saved["architectures"] == ["BertForSequenceClassification"]
    assert type(transformers.AutoConfig.from_pretrained(tmp_path)) is transformers.BertConfig
    reloaded = bertkit.BertkitForSequenceClassification.from_pretrained(tmp_path)
    assert reloaded.config.model_type == "bertkit" and type(reloaded.config) is bertkit.BertkitConfig


def _save_every_head(tmp_path) -> dict:
    """Save a trained-looking bertkit model per head; return the outputs bertkit gives for a fixed batch."""
    expected = {}
    for head, (_, bertkit_class) in HEAD_PAIRS.items():
        torch.manual_seed(0)
        num_labels = 2 if head == "qa" else 3
        model = bertkit_class(bertkit.BertkitConfig(**tiny_config_kwargs(num_labels=num_labels))).eval()
        with torch.no_grad():  # move the heads off their zero/identity init so a dropped head would show
            for parameter in model.parameters():
                parameter.add_(torch.randn_like(parameter) * 0.02)
        model.save_pretrained(tmp_path / head)
        batch = random_batch(head, seed=5, num_labels=num_labels)
        torch.save(batch, tmp_path / head / "batch.pt")
        with torch.no_grad():
            # the padded path: stock transformers also computes values at padding positions, compared here too
            expected[head] = output_tensors(model(**batch, unpad=False))
            reloaded = bertkit_class.from_pretrained(tmp_path / head).eval()
            _assert_close(expected[head], output_tensors(reloaded(**batch, unpad=False)),
                          f"bertkit round trip of {head}")
    return expected


STOCK_LOADER = textwrap.dedent("""
    import sys, torch, transformers
    root, heads = sys.argv[1], sys.argv[2:]
    for head_and_auto in heads:
        head, auto = head_and_auto.split(":")
        model = getattr(transformers, auto).from_pretrained(f"{root}/{head}").eval()
        batch = torch.load(f"{root}/{head}/batch.pt")
        with torch.no_grad():
            out = {k: v for k, v in model(**batch).items() if torch.is_tensor(v)}
        torch.save({"class": type(model).__name__, "outputs": out}, f"{root}/{head}/stock.pt")
    assert "bertkit" not in sys.modules
""")


def test_every_saved_head_loads_in_stock_transformers(tmp_path):
    expected = _save_every_head(tmp_path)
    args = [f"{head}:{auto}" for head, auto in STOCK_AUTO.items()]
    run = subprocess.run([sys.executable, "-c", STOCK_LOADER, str(tmp_path), *args], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    for head in HEAD_PAIRS:
        stock = torch.load(tmp_path / head / "stock.pt")
        assert stock["class"] == HEAD_PAIRS[head][0].__name__
        _assert_close(expected[head], stock["outputs"], f"stock load of {head}")


def _assert_close(expected: dict, actual: dict, what: str):
    assert expected.keys() == actual.keys(), what
    for name, tensor in expected.items():
        assert (tensor - actual[name]).abs().max().item() <= 1e-5, f"{what}: {name}"


def test_auto_classes_build_bertkit_models():
    config = bertkit.BertkitConfig(**tiny_config_kwargs())
    for auto_name, (_, bertkit_class) in zip(STOCK_AUTO.values(), HEAD_PAIRS.values()):
        model = getattr(transformers, auto_name).from_config(config)
        assert type(model) is bertkit_class
    assert type(transformers.AutoConfig.for_model("bertkit")) is bertkit.BertkitConfig


def test_pipeline_accepts_a_bertkit_model(minilm_dir):
    tokenizer = transformers.AutoTokenizer.from_pretrained(minilm_dir)
    model = bertkit.BertkitForSequenceClassification.from_pretrained(
        minilm_dir, id2label={0: "negative", 1: "positive"}, label2id={"negative": 0, "positive": 1})
    classify = transformers.pipeline("text-classification", model=model, tokenizer=tokenizer)
    result = classify(["I loved it.", "I hated it."])
    assert [r["label"] in ("negative", "positive") for r in result] == [True, True]
    with torch.no_grad():
        logits = model(**tokenizer("I loved it.", return_tensors="pt")).logits
    assert result[0]["score"] == pytest.approx(logits.softmax(-1).max().item(), abs=1e-5)
