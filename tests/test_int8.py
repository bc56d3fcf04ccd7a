"""predict / evaluate --precision int8: the linear layers quantized dynamically (int8 weights, activations per call)
on CPU as the model loads, probabilities close to fp32's; unknown precisions still refused by name."""

import json

import numpy as np
import pytest
import torch
import transformers
from typer.testing import CliRunner

import bertkit
from bertkit.cli import app
from bertkit.inference import inference_precision
from bertkit.tasks.classify import load_predictor, predict_probabilities

runner = CliRunner()
pytestmark = pytest.mark.usefixtures("one_thread")
TEXTS = ["the film was wonderful and the cast superb", "dull", "an awful, boring two hours that never ends at all",
         "lovely", "I would not watch it again, even for free, though the music was fine"]


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory, minilm_dir):
    """A tiny classifier (hidden 64, 2 layers) with the real MiniLM tokenizer and a label map."""
    path = tmp_path_factory.mktemp("int8")
    torch.manual_seed(0)
    config = bertkit.BertkitConfig(vocab_size=30522, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                   intermediate_size=128, max_position_embeddings=128, num_labels=2,
                                   id2label={0: "negative", 1: "positive"}, label2id={"negative": 0, "positive": 1})
    model = bertkit.BertkitForSequenceClassification(config)
    with torch.no_grad():  # a head that separates: probabilities far from uniform, so differences show
        model.classifier.weight.mul_(40)
    model.save_pretrained(path)
    transformers.AutoTokenizer.from_pretrained(minilm_dir).save_pretrained(path)
    return str(path)


def test_int8_quantizes_the_linear_layers_and_stays_close(classifier_dir):
    with inference_precision("fp32"):
        fp32 = load_predictor(classifier_dir)
    with inference_precision("int8"):
        int8 = load_predictor(classifier_dir)
    query = int8.model.bert.encoder.layer[0].attention.self.query
    assert isinstance(query, torch.ao.nn.quantized.dynamic.Linear) and int8.model.device.type == "cpu"
    assert type(fp32.model.bert.encoder.layer[0].attention.self.query) is torch.nn.Linear
    expected = predict_probabilities(fp32, TEXTS, None)
    got = predict_probabilities(int8, TEXTS, None)
    assert not np.array_equal(expected, got)  # quantized arithmetic, not the fp32 model again
    assert np.abs(expected - got).max() < 0.05 and (expected.argmax(1) == got.argmax(1)).all()


def test_predict_and_evaluate_take_precision_int8(classifier_dir, tmp_path):
    data = tmp_path / "dev.csv"
    data.write_text("text,label\n" + "".join(f'"{t}",{"positive" if i % 2 else "negative"}\n'
                                             for i, t in enumerate(TEXTS)))
    out = tmp_path / "p.jsonl"
    result = runner.invoke(app, ["predict", classifier_dir, str(data), "-o", str(out), "--precision", "int8"])
    assert result.exit_code == 0, result.output
    assert len([json.loads(line) for line in out.read_text().splitlines()]) == len(TEXTS)
    result = runner.invoke(app, ["evaluate", classifier_dir, str(data), "--precision", "int8"])
    assert result.exit_code == 0 and "accuracy" in result.output, result.output
    result = runner.invoke(app, ["evaluate", classifier_dir, str(data), "--precision", "int4"])
    assert result.exit_code == 2 and "int4" in result.output and "int8" in result.output
