"""Which checkpoint bertkit loads into which class (issue 31): a checkpoint whose weights lack encoder layers its
config promises, a LoRA adapter folder, a tokenizer larger than the embeddings, pickled
weights and an uncached Hub id offline are each refused in one line (exit 2) before anything is trained; and
`output_hidden_states=[i, j]` returns what transformers' BertModel returns."""

import json
from pathlib import Path

import pytest
import torch
import transformers
from typer.testing import CliRunner
from helpers import one_line_error, random_batch, tiny_config_kwargs

import bertkit
from bertkit.cli import app

runner = CliRunner()
DATA = Path(__file__).resolve().parent.parent / "data"
TRAIN, DEV = str(DATA / "en_sentiment/train.csv"), str(DATA / "en_sentiment/dev.csv")
TINY = ["precision=fp32", "data.max_length=32", "train.max_steps=2", "train.per_device_train_batch_size=4"]


def nothing_written(out: Path) -> bool:
    """Refused before training: output_dir (held by the run from its start) got no weights, checkpoint or record."""
    return not out.exists() or not any(out.glob("*.safetensors")) and not any(out.glob("checkpoint-*")) \
        and not (out / "bertkit_run.json").exists()


def classify(model, out, *extra):
    return runner.invoke(app, ["run", "classify", f"model={model}", f"data.train={TRAIN}", f"data.eval={DEV}",
                               f"output_dir={out}", *TINY, *extra])


# Other encoder families (RoBERTa, DistilBERT, ModernBERT, DeBERTa, ...) are fine-tuned through transformers' own
# classes, and non-encoders are refused: tests/test_families.py (issue 26 replaced issue 31's refusal of every
# other architecture).


def save_with_tokenizer(model, path: Path, tokenizer_dir: str) -> str:
    model.save_pretrained(path)
    transformers.AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(path)
    return str(path)


# ------------------------------------------------------------------------------------ encoder weights missing


def test_a_config_promising_more_layers_than_the_weights_hold_stops_the_run(tiny_model_dir, tmp_path):
    model_dir = tmp_path / "four-layers"
    transformers.BertModel.from_pretrained(tiny_model_dir).save_pretrained(model_dir)
    transformers.AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(model_dir)
    config = json.loads((model_dir / "config.json").read_text())
    (model_dir / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 4}))
    message = one_line_error(classify(model_dir, tmp_path / "run"), 2, str(model_dir),
                             "missing encoder weights", "bert.encoder.layer.2.*", "bert.encoder.layer.3.*",
                             "config.json says 4 layers")
    assert "bert.encoder.layer.1" not in message
    assert not (tmp_path / "run").exists()


def test_missing_embeddings_stop_the_run_after_loading(tiny_model_dir, tmp_path):
    """The load report's missing keys are checked too: an encoder without its word embeddings is not a checkpoint to
    fine-tune (a new head, or a pooler the checkpoint never had, is)."""
    from safetensors.torch import load_file, save_file

    model_dir = tmp_path / "no-embeddings"
    transformers.BertModel.from_pretrained(tiny_model_dir).save_pretrained(model_dir)
    transformers.AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(model_dir)
    weights = load_file(model_dir / "model.safetensors")
    save_file({k: v for k, v in weights.items() if "word_embeddings" not in k}, model_dir / "model.safetensors",
              metadata={"format": "pt"})
    one_line_error(classify(model_dir, tmp_path / "run"), 2, "missing encoder weights",
                   "bert.embeddings.word_embeddings.*")


def test_a_checkpoint_without_a_pooler_still_fine_tunes(tiny_model_dir, tmp_path):
    """A BertForMaskedLM save has no pooler: the classifier's pooler starts new (said in one line), as before."""
    model_dir = tmp_path / "mlm-only"
    transformers.BertForMaskedLM.from_pretrained(tiny_model_dir).save_pretrained(model_dir)
    transformers.AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(model_dir)
    result = classify(model_dir, tmp_path / "run")
    assert result.exit_code == 0, result.output
    assert "bert.pooler.dense" in result.output and "classifier" in result.output


# ---------------------------------------------------------------------------------------------- a LoRA adapter


def test_a_lora_adapter_folder_as_model_says_how_to_use_it(tiny_model_dir, tmp_path):
    adapter = tmp_path / "adapter-run"
    result = classify(tiny_model_dir, adapter, "lora.enabled=true", "lora.r=4", "lora.merge=false")
    assert result.exit_code == 0, result.output
    assert (adapter / "adapter_config.json").is_file()
    one_line_error(classify(adapter, tmp_path / "run"), 2, str(adapter), "LoRA adapter",
                   f"model={tiny_model_dir}", "lora.enabled=true")
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------------------------------ tokenizer too large


def test_a_tokenizer_larger_than_the_embeddings_is_refused_at_load(tiny_model_dir, tmp_path):
    model_dir = tmp_path / "small-vocab"
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=1000, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=128)
    save_with_tokenizer(transformers.BertModel(config), model_dir, tiny_model_dir)
    one_line_error(classify(model_dir, tmp_path / "run"), 2, str(model_dir), "30522", "1000", "vocab_size")
    assert nothing_written(tmp_path / "run")


# ------------------------------------------------------------------------------------------------ pickled weights


def test_pickled_weights_are_refused_with_how_to_convert(tiny_model_dir, tmp_path):
    model_dir = tmp_path / "pickled"
    model = transformers.BertModel.from_pretrained(tiny_model_dir)
    model_dir.mkdir()
    model.config.save_pretrained(model_dir)
    torch.save(model.state_dict(), model_dir / "pytorch_model.bin")
    transformers.AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(model_dir)
    message = one_line_error(classify(model_dir, tmp_path / "run"), 2, str(model_dir), "pytorch_model.bin",
                             "pickle", "safetensors", "use_safetensors=False", "save_pretrained")
    assert "weights_only=False" not in message
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------------------------------- a Hub id offline


def test_an_uncached_hub_id_offline_says_how_to_fetch_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    name = "bertkit-tests/no-such-model"
    message = one_line_error(classify(name, tmp_path / "run"), 2, name, f"hf download {name}", "HF_HUB_OFFLINE")
    assert "save the tokenizer" not in message


# ------------------------------------------------------------------------------- output_hidden_states=[i, j]


@pytest.fixture(scope="module")
def pair():
    torch.manual_seed(0)
    stock = transformers.BertModel(transformers.BertConfig(**tiny_config_kwargs(num_hidden_layers=3))).eval()
    ours = bertkit.BertkitModel(bertkit.BertkitConfig(**tiny_config_kwargs(num_hidden_layers=3))).eval()
    ours.load_state_dict(stock.state_dict())
    return stock, ours


@pytest.mark.parametrize("selection", [[0, 2], [1], 2, [-1], [0, -2, 7], [7], (3, 0), True, False, 0, []])
@pytest.mark.parametrize("unpad", [False, True])
def test_output_hidden_states_selects_layers_as_transformers_does(pair, selection, unpad):
    stock, ours = pair
    batch = random_batch("base", with_labels=False)
    with torch.no_grad():
        expected = stock(**batch, output_hidden_states=selection).hidden_states
        got = ours(**batch, output_hidden_states=selection, unpad=unpad).hidden_states
    if expected is None:
        assert got is None
        return
    assert got is not None and len(got) == len(expected)
    for index, (want, have) in enumerate(zip(expected, got)):
        assert (want is None) == (have is None), (index, selection)
        if want is not None:
            mask = batch["attention_mask"].bool()  # padded positions of an unpadded run are zeros, not computed
            torch.testing.assert_close(have[mask], want[mask], atol=1e-5, rtol=1e-4)


def test_output_hidden_states_selection_reaches_the_heads():
    head = bertkit.BertkitForSequenceClassification(bertkit.BertkitConfig(**tiny_config_kwargs(num_hidden_layers=3)))
    batch = random_batch("base", with_labels=False)
    with torch.no_grad():
        states = head(**batch, output_hidden_states=[0, 2]).hidden_states
    assert [state is None for state in states] == [False, True, False, True]


# ------------------------------------------------------------------------- the real MiniLM still loads everywhere


@pytest.mark.parametrize("head", ["BertkitForSequenceClassification", "BertkitForTokenClassification",
                                  "BertkitForQuestionAnswering", "BertkitForMultipleChoice"])
def test_minilm_loads_for_every_fine_tuning_head(minilm_dir, head):
    """MiniLM has a pooler and no MLM head: every recipe's head loads it, only its new head starting fresh."""
    from bertkit.checkpoints import resolve_model
    from bertkit.checkpoints import load_pretrained

    path = resolve_model("all-MiniLM-L6-v2")
    assert path == minilm_dir
    model = load_pretrained(getattr(bertkit, head), path, num_labels=2)
    assert model.config.num_hidden_layers == 6


def test_minilm_loads_for_mlm_with_a_new_head(minilm_dir):
    from bertkit.tasks.mlm import load_mlm_model

    _, report = load_mlm_model(minilm_dir)
    assert report["mlm_head"] == "new" and report["pooler"] == "kept"


def test_models_are_loaded_without_hub_kernels(tiny_model_dir, tmp_path):
    """transformers 5.25 loads every model with use_kernels=True: on a GPU, the first model.eval() swaps layers for
    kernels fetched from the Hub (offline: "Version 1 of 'kernels-community/activation' is not available", seen on
    an H200). bertkit loads without them, for training, predicting and masked LM alike."""
    import transformers

    from bertkit import BertkitForSequenceClassification
    from bertkit.checkpoints import _from_pretrained, load_pretrained
    from bertkit.tasks.mlm import load_mlm_model

    stock = transformers.AutoModelForSequenceClassification.from_pretrained(tiny_model_dir, num_labels=2)
    print("transformers' own default here:", stock.use_kernels)
    model = load_pretrained(BertkitForSequenceClassification, tiny_model_dir, num_labels=2)
    assert model.use_kernels is False
    model.save_pretrained(tmp_path / "saved")
    assert _from_pretrained(BertkitForSequenceClassification, str(tmp_path / "saved")).use_kernels is False
    assert load_mlm_model(tiny_model_dir)[0].use_kernels is False
