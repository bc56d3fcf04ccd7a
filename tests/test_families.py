"""Every encoder family (issue 26): each recipe runs on a tiny random checkpoint of each family with a tokenizer of
the family's real kind (tests/families.py: WordPiece, byte-level BPE, SentencePiece/Unigram); the run finishes,
predict and evaluate work on it, its directory loads in stock transformers (a subprocess that never imports bertkit)
with the outputs bertkit predicts, LLRD puts every parameter in exactly one group, and the summary, `bertkit runs`
and the model card say which implementation ran. Non-encoders are refused in one line, exit 2, through the
installed CLI. This file runs classify over every family; tests/test_families_tasks.py runs ner, qa, choice, mlm."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from typer.testing import CliRunner

from bertkit.cli import app
from bertkit.errors import BertkitError
from bertkit.families import FAMILIES as KNOWN, family_of
from families import FAMILIES, tiny_checkpoint
from helpers import one_line_error

runner = CliRunner()
DATA = Path(__file__).resolve().parent.parent / "data"
pytestmark = pytest.mark.usefixtures("one_thread")
TINY = ["precision=fp32", "train.max_steps=2", "train.per_device_train_batch_size=8", "train.logging_steps=1",
        "train.learning_rate=1.0e-3"]


def first_rows(source: Path, target: Path, rows: int) -> str:
    """The header and the first `rows` lines of a csv / jsonl file."""
    lines = source.read_text(encoding="utf-8").splitlines()
    target.write_text("\n".join(lines[: rows + (source.suffix == ".csv")]) + "\n", encoding="utf-8")
    return str(target)


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    root = tmp_path_factory.mktemp("pairs")
    return {split: first_rows(DATA / "en_pair" / f"{split}.csv", root / f"{split}.csv", rows)
            for split, rows in (("train", 32), ("dev", 12))}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """family -> a tiny random checkpoint directory, built on first use."""
    root, built = tmp_path_factory.mktemp("families"), {}

    def get(family: str) -> str:
        if family not in built:
            built[family] = str(tiny_checkpoint(family, root / family))
        return built[family]
    return get


@pytest.fixture(scope="module")
def classify_runs(tmp_path_factory, checkpoints, pairs):
    """family -> its classify run directory (sentence pairs, layer-wise decay), made on first use."""
    root, runs = tmp_path_factory.mktemp("classify-runs"), {}

    def get(family: str) -> Path:
        if family not in runs:
            out = root / family
            result = runner.invoke(app, ["run", "classify", f"model={checkpoints(family)}",
                                         f"data.train={pairs['train']}", f"data.eval={pairs['dev']}",
                                         f"output_dir={out}", "data.max_length=48", "llrd=0.8", *TINY])
            assert result.exit_code == 0, result.output
            runs[family] = (out, result.output)
        return runs[family]
    return get


# ------------------------------------------------------------------------------------------------ classify


@pytest.mark.parametrize("family", FAMILIES)
def test_classify_runs_predicts_and_evaluates(classify_runs, pairs, family, tmp_path):
    out, output = classify_runs(family)
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == family  # never a BERT built around another family's weights
    expected = "bertkit's own BERT" if family == "bert" else f"transformers' {KNOWN[family].name}"
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["implementation"] == expected and f"model: {expected}" in output
    assert expected in " ".join(output.split())  # the summary table's implementation row
    card = (out / "README.md").read_text()
    assert ("bertkit's own BERT implementation" if family == "bert" else f"standard {KNOWN[family].name} checkpoint"
            ) in card and config["architectures"][0] in card + ("BertForSequenceClassification" if family == "bert"
                                                                  else "")
    predictions = tmp_path / "predictions.jsonl"
    result = runner.invoke(app, ["predict", str(out), pairs["dev"], "-o", str(predictions)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in predictions.read_text().splitlines()]
    assert len(rows) == 12 and all(abs(sum(row["probabilities"].values()) - 1) < 1e-4 for row in rows)
    result = runner.invoke(app, ["evaluate", str(out), pairs["dev"]])
    assert result.exit_code == 0 and "accuracy" in result.output, result.output


STOCK_SCRIPT = r"""
import csv, json, sys
import torch, transformers
assert "bertkit" not in sys.modules
with open(sys.argv[2], encoding="utf-8") as handle:
    pairs = [(row["premise"], row["hypothesis"]) for row in csv.DictReader(handle)]
results = {}
for family, run_dir in json.loads(sys.argv[1]).items():
    tokenizer = transformers.AutoTokenizer.from_pretrained(run_dir)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(run_dir).eval()
    encoded = tokenizer([a for a, _ in pairs], [b for _, b in pairs], padding=True, truncation=True, max_length=48,
                        return_tensors="pt")
    with torch.no_grad():
        logits = model(**encoded).logits
    results[family] = {"class": type(model).__name__, "labels": model.config.id2label, "logits": logits.tolist()}
print(json.dumps({"results": results, "bertkit": "bertkit" in sys.modules}))
"""


def stock_outputs(script: str, *args: str) -> dict:
    """Run `script` in a fresh interpreter that never imports bertkit; its last stdout line as JSON."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env,
                          cwd="/", timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def stock(classify_runs, pairs):
    """Every family's classify run loaded by stock transformers in one subprocess (one interpreter start)."""
    outputs = stock_outputs(STOCK_SCRIPT, json.dumps({f: str(classify_runs(f)[0]) for f in FAMILIES}), pairs["dev"])
    assert not outputs["bertkit"]
    return outputs["results"]


@pytest.mark.parametrize("family", FAMILIES)
def test_stock_transformers_loads_the_run_with_the_same_outputs(classify_runs, stock, pairs, family, tmp_path):
    out, _ = classify_runs(family)
    assert stock[family]["class"] == json.loads((out / "config.json").read_text())["architectures"][0].replace(
        "Bertkit", "Bert")
    predictions = tmp_path / "p.jsonl"
    assert runner.invoke(app, ["predict", str(out), pairs["dev"], "-o", str(predictions)]).exit_code == 0
    ours = [json.loads(line)["probabilities"] for line in predictions.read_text().splitlines()]
    names = [stock[family]["labels"][str(i)] for i in range(len(stock[family]["labels"]))]
    ours = np.array([[row[name] for name in names] for row in ours])
    # The contract: stock transformers gives the raw logits, bertkit's probabilities are softmax(logits / T) with the
    # temperature the run fitted on dev and saved in its task settings (calibrate=true is the default).
    # (None: the tiny random model's dev fit reached the edge of the range and calibration was skipped.)
    (temperature,) = json.loads((out / "config.json").read_text())["bertkit_task_settings"]["temperature"] or [1.0]
    stock_logits = torch.tensor(stock[family]["logits"])
    np.testing.assert_allclose(ours, (stock_logits / temperature).softmax(-1).numpy(), atol=1e-4)


# ----------------------------------------------------------------------------------------------------- LLRD


@pytest.mark.parametrize("family", FAMILIES)
def test_llrd_puts_every_parameter_in_exactly_one_group(checkpoints, family):
    from bertkit import BertkitForSequenceClassification
    from bertkit.checkpoints import load_pretrained, task_config
    from bertkit.families import num_layers
    from bertkit.llrd import llrd_param_groups

    path = checkpoints(family)
    model = load_pretrained(BertkitForSequenceClassification, path, config=task_config(path, num_labels=3))
    groups = llrd_param_groups(model, 1.0e-3, decay=0.5, head_lr=5.0e-3)
    grouped = [id(p) for group in groups for p in group["params"]]
    assert len(grouped) == len(set(grouped)) == len(list(model.parameters()))
    names = {group["name"].removesuffix(" (no decay)") for group in groups}
    layers = num_layers(model.config)
    assert {"embeddings", "head", *(f"layer {i}" for i in range(layers))} <= names
    rates = {group["name"].removesuffix(" (no decay)"): group["lr"] for group in groups}
    assert rates[f"layer {layers - 1}"] == pytest.approx(1.0e-3) and rates["head"] == pytest.approx(5.0e-3)
    assert rates["embeddings"] == pytest.approx(1.0e-3 * 0.5 ** layers)
    # no weight decay on biases and normalisation weights, whatever the family calls them
    norms = {id(p) for m in model.modules() if "Norm" in type(m).__name__ for p in m.parameters(recurse=False)}
    for group in groups:
        if group["weight_decay"] > 0:
            assert not any(id(p) in norms or p.dim() == 1 and p.numel() < 2 for p in group["params"])


def test_albert_says_what_layer_wise_decay_means_with_one_shared_layer(classify_runs):
    _, output = classify_runs("albert")
    assert "shares one layer's weights" in " ".join(output.split())


# -------------------------------------------------------------------------------------- family-specific traps


def test_deberta_refuses_fp16(checkpoints):
    """fp16 needs a GPU; the check itself runs wherever Run.training starts (precision=fp16 or auto's choice)."""
    from bertkit.families import check_fp16

    config = transformers.AutoConfig.from_pretrained(checkpoints("deberta-v2"))
    with pytest.raises(BertkitError, match=r"DeBERTa-v2/v3 overflows in fp16 .* precision=bf16"):
        check_fp16(config, fp16=True)
    check_fp16(config, fp16=False)
    check_fp16(transformers.AutoConfig.from_pretrained(checkpoints("roberta")), fp16=True)


def test_a_bertkit_only_setting_is_refused_for_another_family(checkpoints, pairs, tmp_path):
    common = [f"data.train={pairs['train']}", f"output_dir={tmp_path / 'run'}", *TINY]
    result = runner.invoke(app, ["run", "classify", f"model={checkpoints('roberta')}", "pooling=mean", *common])
    one_line_error(result, 2, "pooling=mean", "RoBERTa", "pooling=cls")
    assert not any((tmp_path / "run").glob("*.safetensors")) and not (tmp_path / "run" / "train.log").exists()
    result = runner.invoke(app, ["run", "classify", f"model={checkpoints('modernbert')}", "long_doc.strategy=chunk",
                                 "long_doc.aggregate=attention", *common])
    one_line_error(result, 2, "long_doc.aggregate=attention", "ModernBERT")


def test_modernbert_takes_pooling_mean_as_its_own_setting(checkpoints):
    from bertkit.checkpoints import task_config

    assert task_config(checkpoints("modernbert"), classifier_pooling="mean").classifier_pooling == "mean"
    assert task_config(checkpoints("modernbert"), classifier_pooling="cls").classifier_pooling == "cls"


@pytest.mark.parametrize("family", ["deberta-v2", "distilbert", "modernbert"])
def test_lora_wraps_each_family_s_own_attention_projections(checkpoints, pairs, family, tmp_path):
    """lora.target_modules left at [query, value] means the same projections under the family's names; an adapter
    saved alone (lora.merge=false) predicts through peft on the family's class."""
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", "classify", f"model={checkpoints(family)}", f"data.train={pairs['train']}",
                                 f"data.eval={pairs['dev']}", f"output_dir={out}", "lora.enabled=true",
                                 "lora.merge=false", "data.max_length=48", *TINY])
    assert result.exit_code == 0, result.output
    targets = ", ".join(KNOWN[family].lora_targets)
    assert f"LoRA r=8 on {targets}" in result.output
    assert json.loads((out / "adapter_config.json").read_text())["target_modules"]
    result = runner.invoke(app, ["predict", str(out), pairs["dev"], "-o", str(tmp_path / "p.jsonl")])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("family", ["distilbert", "deberta-v2", "modernbert"])
def test_export_runs_every_family_s_graph(classify_runs, pairs, family, tmp_path):
    """ONNX export of transformers' classes: no token_type_ids input where the model has none (DistilBERT,
    ModernBERT), parity checked against PyTorch, and predict runs the export; the int8 graph is quantized from the
    BERT-fused graph only where that still matches PyTorch (the fusions that do not fit a family are not applied)."""
    pytest.importorskip("onnxruntime")
    out, _ = classify_runs(family)
    result = runner.invoke(app, ["export", str(out), "-o", str(tmp_path / "onnx"), "--quantize", "int8"])
    assert result.exit_code == 0, result.output
    exported = json.loads((tmp_path / "onnx" / "onnx_export.json").read_text())
    assert exported["parity_max_abs_diff"]["fp32"] < 1e-4
    assert exported["int8_graph"].startswith(("fused", "unfused")) and exported["parity_max_abs_diff"]["int8"] < 0.1
    assert ("token_type_ids" in exported["inputs"]) == (family == "deberta-v2")
    for precision in ("fp32", "int8"):
        result = runner.invoke(app, ["predict", str(tmp_path / "onnx"), pairs["dev"], "-o",
                                     str(tmp_path / f"p-{precision}.jsonl"), "--precision", precision])
        assert result.exit_code == 0, result.output


def test_distill_into_a_student_of_the_family(classify_runs, checkpoints, pairs, tmp_path):
    """A RoBERTa teacher distilled into a RoBERTa student given by student.model=; a student taken from the
    teacher's layers is BERT's only, refused in one line."""
    teacher, _ = classify_runs("roberta")
    common = [f"teacher={teacher}", f"data.train={pairs['train']}", "data.max_length=48", *TINY]
    result = runner.invoke(app, ["run", "distill", f"student.model={checkpoints('roberta')}",
                                 f"data.eval={pairs['dev']}", f"output_dir={tmp_path / 'student'}", *common])
    assert result.exit_code == 0, result.output
    config = json.loads((tmp_path / "student" / "config.json").read_text())
    assert config["model_type"] == "roberta" and config["architectures"] == ["RobertaForSequenceClassification"]
    result = runner.invoke(app, ["run", "distill", f"output_dir={tmp_path / 'layers'}", *common])
    assert result.exit_code == 2 and "student.model=" in result.output.strip().splitlines()[-1], result.output


def test_a_seed_band_on_another_family(checkpoints, pairs, tmp_path):
    result = runner.invoke(app, ["run", "classify", f"model={checkpoints('xlm-roberta')}",
                                 f"data.train={pairs['train']}", f"data.eval={pairs['dev']}",
                                 f"output_dir={tmp_path / 'run'}", "seeds=[1,2]", "data.max_length=48", *TINY])
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert len(metrics["seeds"]["runs"]) == 2 and metrics["implementation"] == "transformers' XLM-RoBERTa"


def test_max_length_follows_the_model_positions(checkpoints, pairs, tmp_path):
    """RoBERTa's position table starts after the padding index: 130 entries hold 128 positions."""
    result = runner.invoke(app, ["run", "classify", f"model={checkpoints('roberta')}", f"data.train={pairs['train']}",
                                 f"output_dir={tmp_path / 'run'}", "data.max_length=130", *TINY])
    one_line_error(result, 2, "data.max_length=130", "128 positions")


# ------------------------------------------------------------------------------------------------ refusals

NOT_ENCODERS = {
    "gpt2": (lambda: transformers.GPT2Config(n_embd=32, n_layer=1, n_head=4), "decoder-only"),
    "t5": (lambda: transformers.T5Config(d_model=32, d_ff=64, num_layers=1, num_heads=4, d_kv=8), "encoder-decoder"),
    "vit": (lambda: transformers.ViTConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                                           intermediate_size=64), "not a text encoder"),
}


@pytest.fixture(scope="module")
def not_encoders(tmp_path_factory, checkpoints):
    """A config.json (and weights, and a tokenizer) of a decoder, an encoder-decoder, a vision model, and one of an
    unknown model_type."""
    root, dirs = tmp_path_factory.mktemp("not-encoders"), {}
    tokenizer = transformers.AutoTokenizer.from_pretrained(checkpoints("bert"))
    for name, (make, _) in NOT_ENCODERS.items():
        config = make()
        transformers.AutoModel.from_config(config).save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
        dirs[name] = root / name
    unknown = root / "unknown"
    unknown.mkdir()
    (unknown / "config.json").write_text(json.dumps({"model_type": "my-encoder", "hidden_size": 32}))
    tokenizer.save_pretrained(unknown)
    dirs["unknown"] = unknown
    return dirs


def installed_bertkit() -> str:
    return str(Path(sys.executable).with_name("bertkit"))


@pytest.mark.parametrize("kind", [*NOT_ENCODERS, "unknown"])
def test_non_encoders_are_refused_in_one_line_through_the_installed_cli(not_encoders, pairs, kind, tmp_path):
    out = tmp_path / "run"
    done = subprocess.run([installed_bertkit(), "run", "classify", f"model={not_encoders[kind]}",
                           f"data.train={pairs['train']}", f"output_dir={out}", "train.max_steps=1"],
                          capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=300)
    lines = [line for line in (done.stdout + done.stderr).strip().splitlines() if line.strip()]
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in done.stderr, lines
    model_type = "my-encoder" if kind == "unknown" else kind
    what = "transformers does not know" if kind == "unknown" else NOT_ENCODERS[kind][1]
    assert f"model_type '{model_type}'" in lines[0] and what in lines[0] and "ModernBERT" in lines[0], lines[0]
    assert not (out / "model.safetensors").exists()


def test_family_of_is_the_one_decision():
    assert family_of({"model_type": "bert"}).implementation == "bertkit"
    assert family_of({"model_type": "bertkit"}).implementation == "bertkit"
    for model_type in ("roberta", "xlm-roberta", "deberta-v2", "electra", "distilbert", "albert", "ernie",
                       "modernbert"):
        assert family_of({"model_type": model_type}).implementation == "transformers"
    for model_type, why in (("llama", "decoder-only"), ("bart", "encoder-decoder"), ("mpnet", "not been tested"),
                            (None, "no model_type")):
        with pytest.raises(BertkitError, match=why):
            family_of({"model_type": model_type}, "DIR")


def test_runs_lists_the_family(classify_runs):
    out, _ = classify_runs("roberta")
    result = runner.invoke(app, ["runs", str(out.parent)], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and "(RoBERTa)" in result.output, result.output


def test_the_model_card_of_another_family_names_its_auto_class(classify_runs):
    out, _ = classify_runs("modernbert")
    card = (out / "README.md").read_text()
    assert "AutoModelForSequenceClassification" in card and "import bertkit" not in card
    assert "- modernbert" in card  # a Hub tag for the family
    torch.manual_seed(0)  # (keeps the seed of later tests in this worker independent of this one)
