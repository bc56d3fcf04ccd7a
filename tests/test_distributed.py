"""Two processes under torchrun (gloo, CPU) give the run one process gives with the same global batch: the same
final weights and metrics, outputs written once, and dev examples counted once."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from test_classify import sentiment, write_csv  # noqa: F401 - fixture

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "OMP_NUM_THREADS": "1",
       "TOKENIZERS_PARALLELISM": "false"}


@pytest.fixture(scope="module")
def no_dropout_model_dir(tmp_path_factory, tiny_model_dir):
    """The tiny model without dropout: dropout masks differ between one process and two by design."""
    import transformers

    path = tmp_path_factory.mktemp("tiny-no-dropout")
    model = transformers.BertModel.from_pretrained(tiny_model_dir, hidden_dropout_prob=0.0,
                                                   attention_probs_dropout_prob=0.0)
    model.save_pretrained(path)
    transformers.AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(path)
    return str(path)


def launch(processes: int, args: list[str]) -> subprocess.CompletedProcess:
    if processes == 1:
        command = [sys.executable, "-m", "bertkit", *args]
    else:
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(processes),
                   "--master_port", "29533", "-m", "bertkit", *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=600)


def common(model_dir, out, *extra):
    return [f"model={model_dir}", f"output_dir={out}", "precision=fp32", "data.max_length=32", "seed=3",
            "train.num_train_epochs=2", "train.learning_rate=1.0e-3", "train.warmup_steps=0",
            "train.dataloader_drop_last=false", *extra]


def assert_same_weights(a: Path, b: Path, atol=1e-5):
    first, second = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    assert first.keys() == second.keys()
    for name in first:
        assert torch.allclose(first[name], second[name], atol=atol), name


@pytest.mark.slow
def test_classify_two_processes_match_one(no_dropout_model_dir, sentiment, tmp_path):  # noqa: F811
    data = [f"data.train={sentiment['train']}", f"data.eval={sentiment['dev']}"]
    single = launch(1, ["run", "classify", *common(no_dropout_model_dir, tmp_path / "one", *data,
                                                  "train.per_device_train_batch_size=8")])
    assert single.returncode == 0, single.stderr[-3000:]
    double = launch(2, ["run", "classify", *common(no_dropout_model_dir, tmp_path / "two", *data,
                                                  "train.per_device_train_batch_size=4")])
    assert double.returncode == 0, double.stderr[-3000:]
    assert_same_weights(tmp_path / "one", tmp_path / "two")
    one = json.loads((tmp_path / "one" / "metrics.json").read_text())["eval"]
    two = json.loads((tmp_path / "two" / "metrics.json").read_text())["eval"]
    assert one["accuracy"] == pytest.approx(two["accuracy"])
    # written once: one summary table, one model card
    assert double.stderr.count("dev metrics") == 1, double.stderr[-2000:]
