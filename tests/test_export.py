"""`bertkit export --format onnx [--quantize int8]`: every fine-tuned head runs in ONNX Runtime with dynamic batch and
sequence axes and matches PyTorch within 1e-4 on padded batches; a classify run's export holds what `bertkit predict`
needs and predicts as the run does; without onnxruntime the command says how to install it."""

import csv
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from helpers import assert_close_records, tiny_config_kwargs
from typer.testing import CliRunner

import bertkit
from bertkit import tasks
from bertkit.cli import app, load_recipe
from bertkit.config import load_config
from bertkit.errors import BertkitError

pytest.importorskip("onnxscript")
onnxruntime = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from bertkit.export import export_run, padded_inputs  # noqa: E402
from bertkit.onnx_model import EXPORT_FILE, INT8_FILE, ONNX_FILE, head_of  # noqa: E402

runner = CliRunner()
pytestmark = pytest.mark.usefixtures("one_thread")

HEADS = {  # name: (class, config overrides)
    "single": (bertkit.BertkitForSequenceClassification, {"problem_type": "single_label_classification"}),
    "multi": (bertkit.BertkitForSequenceClassification, {"problem_type": "multi_label_classification"}),
    "regression_mean": (bertkit.BertkitForSequenceClassification, {"num_labels": 1, "classifier_pooling": "mean"}),
    "token": (bertkit.BertkitForTokenClassification, {}),
    "qa": (bertkit.BertkitForQuestionAnswering, {"num_labels": 2}),
    "choice": (bertkit.BertkitForMultipleChoice, {}),
}


def saved_head(name: str, root: Path, tokenizer_dir: str) -> str:
    """A tiny fine-tuned-looking model directory of one head, with a real tokenizer beside it."""
    model_class, overrides = HEADS[name]
    torch.manual_seed(0)
    labels = {"id2label": {0: "O", 1: "B-PER", 2: "I-PER"}} if name == "token" else {}
    model = model_class(bertkit.BertkitConfig(**tiny_config_kwargs(vocab_size=30522, **labels, **overrides)))
    model.save_pretrained(root / name)
    transformers.AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(root / name)
    return str(root / name)


@pytest.mark.parametrize("name", list(HEADS))
def test_every_head_exports_with_dynamic_axes_and_matches_pytorch(name, tmp_path, minilm_dir):
    model_dir = saved_head(name, tmp_path, minilm_dir)
    summary = export_run(model_dir, str(tmp_path / "onnx"), evaluate=False)
    assert summary["parity_max_abs_diff"]["fp32"] < 1e-4
    graph = onnx.load(str(tmp_path / "onnx" / ONNX_FILE)).graph
    for node in graph.input:  # batch, sequence (and choices) symbolic, not the example's sizes
        assert all(dim.dim_param and not dim.dim_value for dim in node.type.tensor_type.shape.dim), node
    model = HEADS[name][0].from_pretrained(model_dir).eval()  # the default configuration: sdpa, unpadded
    assert model.config.unpad and model.config._attn_implementation == "sdpa"
    session = onnxruntime.InferenceSession(str(tmp_path / "onnx" / ONNX_FILE), providers=["CPUExecutionProvider"])
    head = head_of(model_dir)
    for batch, seq_len in ((5, 23), (1, 64), (3, 9)):  # shapes unlike the export's example (2 x 16)
        inputs = padded_inputs(model.config, head, batch, seq_len, seed=seq_len)
        assert batch == 1 or not inputs["attention_mask"].all()  # padded batches
        with torch.no_grad():
            expected = model(**inputs)  # unpadded in PyTorch: equal at the real tokens, zeros at padding
        got = session.run(list(head.outputs), {k: v.numpy() for k, v in inputs.items()})
        for output_name, array in zip(head.outputs, got):
            reference = getattr(expected, output_name)
            assert array.shape == tuple(reference.shape)
            real = real_positions(inputs["attention_mask"], reference)
            np.testing.assert_allclose(array[real], reference.numpy()[real], atol=1e-4, rtol=0)
    if name in SAMPLE_FILES:  # predict through ONNX Runtime gives what predict gives with PyTorch
        module = tasks.task_module(head.recipe)
        for model_path, target in ((model_dir, tmp_path / "torch.jsonl"), (tmp_path / "onnx", tmp_path / "onnx.jsonl")):
            module.predict_file(str(model_path), str(SHIPPED_DATA / SAMPLE_FILES[name]), str(target))
        assert_close_records(read_jsonl(tmp_path / "onnx.jsonl"), read_jsonl(tmp_path / "torch.jsonl"))


SHIPPED_DATA = Path(__file__).resolve().parent.parent / "data"
SAMPLE_FILES = {"token": "ner/en/dev.conll", "qa": "qa/en/dev.json", "choice": "choice/en/dev.jsonl"}


def read_jsonl(path: Path) -> list:
    return [json.loads(line) for line in path.read_text().splitlines()]


def real_positions(mask: torch.Tensor, reference: torch.Tensor) -> np.ndarray:
    """Where outputs must agree: every position of per-sequence outputs, the real tokens of per-token ones (the
    unpadded PyTorch path gives zeros at padding, the padded graph values computed for the pad tokens)."""
    if reference.dim() >= 2 and reference.shape[:2] == mask.shape:
        return mask.bool().numpy()
    return np.ones(reference.shape[:1], dtype=bool)


def write_csv(path: Path, rows: list[list[str]]) -> str:
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([["text", "label"], *rows])
    return str(path)


def sentiment_rows(count: int, seed: int) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    good, bad = ["great", "wonderful", "lovely", "superb"], ["terrible", "awful", "dull", "boring"]
    return [[f"the film {i} was {rng.choice(good if i % 2 else bad)}", "positive" if i % 2 else "negative"]
            for i in range(count)]


@pytest.fixture(scope="module")
def classify_run(tmp_path_factory, tiny_model_dir):
    root = tmp_path_factory.mktemp("export-run")
    train = write_csv(root / "train.csv", sentiment_rows(48, 0))
    dev = write_csv(root / "dev.csv", sentiment_rows(16, 1))
    module = load_recipe("classify")
    overrides = [f"model={tiny_model_dir}", f"data.train={train}", f"data.eval={dev}", f"output_dir={root / 'run'}",
                 "precision=fp32", "data.max_length=32", "train.num_train_epochs=2", "train.learning_rate=1.0e-3",
                 "train.per_device_train_batch_size=8"]
    module.main(load_config(module.Config, None, overrides))
    return {"run": str(root / "run"), "dev": dev, "root": root}


def test_classify_export_predicts_like_the_run_and_prints_int8_next_to_fp32(classify_run):
    out = classify_run["root"] / "export"
    result = runner.invoke(app, ["export", classify_run["run"], "--format", "onnx", "--quantize", "int8", "-o",
                                 str(out)])
    assert result.exit_code == 0, result.output
    assert "fp32 / int8" in result.output and "accuracy" in result.output
    summary = json.loads((out / EXPORT_FILE).read_text())
    assert set(summary["files"]) == {"fp32", "int8"} and (out / INT8_FILE).is_file()
    assert set(summary["dev"]) == {"fp32", "int8"} and 0 <= summary["dev"]["int8"]["accuracy"] <= 1
    assert not list(out.glob("*.safetensors"))  # the graph alone carries the weights
    predictions = {}
    for name, model_dir, precision in (("torch", classify_run["run"], "fp32"), ("onnx", str(out), "fp32"),
                                       ("onnx_int8", str(out), "int8")):
        target = classify_run["root"] / f"{name}.jsonl"
        result = runner.invoke(app, ["predict", model_dir, classify_run["dev"], "-o", str(target),
                                     "--precision", precision])
        assert result.exit_code == 0, result.output
        predictions[name] = [json.loads(line) for line in target.read_text().splitlines()]
    for torch_row, onnx_row in zip(predictions["torch"], predictions["onnx"]):
        assert torch_row["label"] == onnx_row["label"]
        for label, prob in torch_row["probabilities"].items():
            assert abs(prob - onnx_row["probabilities"][label]) < 1e-4
    assert len(predictions["onnx_int8"]) == len(predictions["torch"])
    result = runner.invoke(app, ["evaluate", str(out), classify_run["dev"]])
    assert result.exit_code == 0 and "accuracy" in result.output


def test_export_refuses_a_non_empty_folder_and_unknown_options(classify_run, tmp_path):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "file.txt").write_text("x")
    for args, words in ((["-o", str(tmp_path / "taken")], "not empty"), (["--format", "tflite"], "only export format"),
                        (["--quantize", "int4"], "only quantization")):
        result = runner.invoke(app, ["export", classify_run["run"], *args])
        assert result.exit_code == 2 and words in result.output, result.output


def test_export_without_onnxruntime_says_how_to_install(classify_run, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime now raises ImportError
    result = runner.invoke(app, ["export", classify_run["run"], "-o", str(tmp_path / "out")])
    assert result.exit_code == 2
    message = result.output.strip()
    assert len(message.splitlines()) == 1 and 'pip install "bertkit[onnx]"' in message, message


def graph_ops(path: Path) -> set[str]:
    return {node.op_type for node in onnx.load(str(path)).graph.node}


def weight_zero_point_shapes(path: Path) -> list[tuple[int, list[int]]]:
    """(output columns, shape of the weight's zero point) of every MatMulInteger: a zero point (and scale) per column
    has one value per column, a scale for the whole matrix none."""
    graph = onnx.load(str(path)).graph
    initializers = {tensor.name: list(tensor.dims) for tensor in graph.initializer}
    return [(initializers[node.input[1]][-1], initializers[node.input[3]])
            for node in graph.node if node.op_type == "MatMulInteger"]


def assert_per_column(path: Path) -> None:
    """Weights quantized with a scale per output column (SST-2 dev: -0.57 points from fp32, -0.88 per matrix)."""
    shapes = weight_zero_point_shapes(path)
    assert shapes and all(zero_point == [columns] for columns, zero_point in shapes), shapes


def test_int8_quantizes_the_fused_graph_when_it_matches_pytorch(tmp_path, minilm_dir):
    """LayerNorm and GELU are fused before quantization (quantized first, ONNX Runtime no longer fuses them and the
    int8 graph runs slower); the fused graph itself is not left in the export."""
    model_dir = saved_head("single", tmp_path, minilm_dir)
    summary = export_run(model_dir, str(tmp_path / "onnx"), quantize="int8", evaluate=False)
    assert summary["int8_graph"].startswith("fused"), summary
    ops = graph_ops(tmp_path / "onnx" / INT8_FILE)
    assert {"SkipLayerNormalization", "MatMulInteger"} <= ops, ops
    assert_per_column(tmp_path / "onnx" / INT8_FILE)
    assert "SkipLayerNormalization" not in graph_ops(tmp_path / "onnx" / ONNX_FILE)  # fp32 stays plain ONNX
    assert summary["parity_max_abs_diff"]["int8"] < 0.05
    assert sorted(p.name for p in (tmp_path / "onnx").glob("*.onnx")) == sorted([INT8_FILE, ONNX_FILE])


def test_int8_falls_back_to_the_unfused_graph_when_the_fused_one_differs(tmp_path, minilm_dir, monkeypatch):
    import bertkit.export as export

    checked = export.check_parity

    def fused_differs(model, head, path, *args):
        if path.name == "fused.onnx":
            raise BertkitError("the ONNX export differs from the PyTorch model by 1.00e+00")
        return checked(model, head, path, *args)

    monkeypatch.setattr(export, "check_parity", fused_differs)
    model_dir = saved_head("single", tmp_path, minilm_dir)
    summary = export_run(model_dir, str(tmp_path / "onnx"), quantize="int8", evaluate=False)
    assert summary["int8_graph"].startswith("unfused") and "differs from the PyTorch model" in summary["int8_graph"]
    ops = graph_ops(tmp_path / "onnx" / INT8_FILE)
    assert "MatMulInteger" in ops and "SkipLayerNormalization" not in ops, ops
    assert_per_column(tmp_path / "onnx" / INT8_FILE)
    assert summary["parity_max_abs_diff"]["int8"] < 0.05
    assert sorted(p.name for p in (tmp_path / "onnx").glob("*.onnx")) == sorted([INT8_FILE, ONNX_FILE])
