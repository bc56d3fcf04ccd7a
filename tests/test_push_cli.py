"""Pushing from the command line and at the end of a training run, against the fake Hub on 127.0.0.1, through the
real huggingface_hub client; the pushed model loads in stock transformers with the same outputs."""

import json

import torch
import transformers
from huggingface_hub import snapshot_download
from test_hub import TOKEN, hub, make_hub, no_internet  # noqa: F401 - fixtures
from typer.testing import CliRunner

from bertkit.cli import app
from test_classify import base_overrides, sentiment  # noqa: F401 - fixture

runner = CliRunner()
REPO = "tester/cli-sentiment"


def trained_model(tiny_model_dir, sentiment, tmp_path, *extra):  # noqa: F811
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", "classify", *base_overrides(tiny_model_dir, sentiment["train"],
                                                                     sentiment["dev"], out), *extra])
    assert result.exit_code == 0, result.output
    return out


def test_push_command_uploads_a_model_that_loads_in_stock_transformers(hub, tiny_model_dir, sentiment, tmp_path):  # noqa: F811
    out = trained_model(tiny_model_dir, sentiment, tmp_path)
    result = runner.invoke(app, ["push", str(out), REPO, "--token", TOKEN, "--endpoint", hub.endpoint,
                                 "--commit-message", "first model"])
    assert result.exit_code == 0, result.output
    remote = hub.files(REPO)
    assert {"model.safetensors", "config.json", "tokenizer.json", "README.md", "training_curve.png",
            "bertkit_config.yaml", "metrics.json"} <= set(remote)
    assert not any(name.startswith("checkpoint-") or name.endswith((".bin", ".pt")) for name in remote)
    card = remote["README.md"].decode()
    assert "pipeline_tag: text-classification" in card and "model-index" in card

    local = snapshot_download(REPO, token=TOKEN, cache_dir=str(tmp_path / "cache"))
    stock = transformers.AutoModelForSequenceClassification.from_pretrained(local).eval()
    assert type(stock) is transformers.BertForSequenceClassification
    tokenizer = transformers.AutoTokenizer.from_pretrained(local)
    batch = tokenizer(["the film was great"], return_tensors="pt")
    original = transformers.AutoModelForSequenceClassification.from_pretrained(out).eval()
    with torch.no_grad():
        assert torch.allclose(stock(**batch).logits, original(**batch).logits, atol=1e-6)

    again = runner.invoke(app, ["push", str(out), REPO, "--token", TOKEN, "--endpoint", hub.endpoint])
    assert again.exit_code == 0 and "no changes" in again.output.lower()


def test_push_at_the_end_of_a_run(hub, tiny_model_dir, sentiment, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    trained_model(tiny_model_dir, sentiment, tmp_path, f"push={REPO}")
    remote = hub.files(REPO)
    assert json.loads(remote["config.json"])["id2label"] == {"0": "negative", "1": "positive"}


def test_push_with_a_bad_token_is_one_line(hub, tiny_model_dir, sentiment, tmp_path):  # noqa: F811
    out = trained_model(tiny_model_dir, sentiment, tmp_path)
    result = runner.invoke(app, ["push", str(out), REPO, "--token", "hf_wrong", "--endpoint", hub.endpoint])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "token" in result.output.lower()


def test_push_of_another_family_loads_as_that_family(hub, sentiment, tmp_path):  # noqa: F811
    """A ModernBERT run (transformers' class, byte-level BPE tokenizer) pushed and loaded back by stock transformers."""
    from families import tiny_checkpoint

    out = trained_model(str(tiny_checkpoint("modernbert", tmp_path / "modernbert")), sentiment, tmp_path)
    result = runner.invoke(app, ["push", str(out), "tester/modernbert", "--token", TOKEN, "--endpoint", hub.endpoint])
    assert result.exit_code == 0, result.output
    remote = hub.files("tester/modernbert")
    card = remote["README.md"].decode()
    assert "- modernbert" in card and "standard ModernBERT checkpoint" in card and "import bertkit" not in card
    local = snapshot_download("tester/modernbert", token=TOKEN, cache_dir=str(tmp_path / "cache"))
    stock = transformers.AutoModelForSequenceClassification.from_pretrained(local).eval()
    assert type(stock) is transformers.ModernBertForSequenceClassification
    batch = transformers.AutoTokenizer.from_pretrained(local)(["the film was great"], return_tensors="pt")
    original = transformers.AutoModelForSequenceClassification.from_pretrained(out).eval()
    with torch.no_grad():
        assert torch.allclose(stock(**batch).logits, original(**batch).logits, atol=1e-6)
