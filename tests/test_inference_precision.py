"""The precision predict / evaluate / serve run at. int8: the linear layers quantized dynamically (int8 weights,
activations per call) on CPU as the model loads, probabilities close to fp32's. bf16: the model cast to bf16 once as
it loads, every task's answers close to fp32's. Unknown precisions still refused by name."""

import json

import numpy as np
import pytest
import torch
import transformers
from typer.testing import CliRunner

import bertkit
from bertkit.cli import app
from bertkit.inference import inference_precision
from bertkit.serve import load_endpoint
from bertkit.tasks.classify import load_predictor, predict_probabilities
from helpers import tiny_task_models

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
    # a scale per output row of the weight: SST-2 dev -0.57 points from fp32 against -1.38 with one per matrix
    assert query.weight().qscheme() in (torch.per_channel_affine, torch.per_channel_symmetric)
    assert query.weight().q_per_channel_scales().shape == (query.out_features,)
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


def test_bf16_casts_the_model_once_and_stays_close(classifier_dir):
    with inference_precision("fp32"):
        fp32 = load_predictor(classifier_dir)
    with inference_precision("bf16"):
        bf16 = load_predictor(classifier_dir)
        got = predict_probabilities(bf16, TEXTS, None)
    assert {p.dtype for p in bf16.model.parameters()} == {torch.bfloat16}  # cast as it loaded, not per call
    assert {p.dtype for p in fp32.model.parameters()} == {torch.float32}
    expected = predict_probabilities(fp32, TEXTS, None)
    assert got.dtype == expected.dtype and not np.array_equal(expected, got)
    assert np.abs(expected - got).max() < 0.05 and (expected.argmax(1) == got.argmax(1)).all()


TASK_INPUTS = {
    "classify": [["the cat sat", "a cat was sitting"], ["a fine film", "a dull film"]],
    "ner": ["Angela Merkel visited Paris", "nothing here"],
    "qa": [{"question": "Where is the cat?", "context": "The cat sleeps on the mat in the kitchen."}],
    "choice": [{"context": "He was hungry.", "question": "So he", "options": ["ate", "slept", "ran"]}],
    "mlm": ["the cat sat on the [MASK].", "a [MASK] day"],
}


@pytest.fixture(scope="module")
def task_models(tmp_path_factory, minilm_dir):
    return tiny_task_models(tmp_path_factory.mktemp("precision-models"), minilm_dir)


@pytest.mark.parametrize("task", sorted(TASK_INPUTS))
def test_every_task_runs_at_the_precision_asked(task_models, task):
    """Each task's model is cast (bf16) or quantized (int8) as it loads, mlm's too; each task's post-processing reads
    bf16 outputs (numpy has no bf16) and its answers keep their shape; classify's and choice's probabilities stay
    close to fp32's."""
    answers = {}
    for precision in ("fp32", "bf16", "int8"):
        with inference_precision(precision):
            endpoint = load_endpoint(task_models[task])
            model = endpoint.predictor.model
            if precision == "int8":
                assert any(isinstance(m, torch.ao.nn.quantized.dynamic.Linear) for m in model.modules())
            else:
                assert {p.dtype for p in model.parameters()} == {{"fp32": torch.float32, "bf16": torch.bfloat16}[
                    precision]}
            answers[precision] = endpoint.predict(endpoint.parse(TASK_INPUTS[task]))
    fp32 = answers["fp32"]
    for answer in (answers["bf16"], answers["int8"]):
        assert [set(record) for record in answer] == [set(record) for record in fp32]
        assert len(answer) == len(TASK_INPUTS[task])
    if task in ("classify", "choice"):
        for ours, theirs in zip(answers["bf16"], fp32):
            pairs = [(ours["probabilities"][k], theirs["probabilities"][k]) for k in theirs["probabilities"]] \
                if isinstance(theirs["probabilities"], dict) else zip(ours["probabilities"], theirs["probabilities"])
            assert max(abs(a - b) for a, b in pairs) < 0.02, (ours, theirs)
