"""Every head and option bertkit saves either loads in stock transformers (a process that never imports bertkit)
and gives bertkit's outputs, or fails there loudly, saying why. Never a silent difference.

The cases are built and saved here, then one subprocess loads them all with the stock Auto classes (each import
of transformers costs seconds). Per-token heads are compared at the real tokens only: bertkit runs unpadded by
default (`config.unpad`) and returns zeros at padding positions, where stock BERT returns values computed for the
pad tokens; nobody reads those (losses and metrics ignore them). The `unpad=False` case compares every position."""

import json
import subprocess
import sys
import textwrap

import pytest
import torch
import transformers
from helpers import random_batch, tiny_config_kwargs

import bertkit
from bertkit.checkpoints import load_finetuned
from bertkit.cli import load_recipe
from bertkit.errors import BertkitError
from bertkit.model_card import render_model_card
from bertkit.options import LoraOptions
from bertkit.tasks.mlm.vocabulary import NewToken, extend_vocabulary
from bertkit.training import add_lora

pytestmark = pytest.mark.usefixtures("one_thread")

# name of each output compared -> whether it is per token (compared at real tokens only)
SEQUENCE = {"logits": False}
PER_TOKEN = {"logits": True}
QA = {"start_logits": True, "end_logits": True}
PRETRAINING = {"prediction_logits": True, "seq_relationship_logits": False}

# case -> (bertkit class, batch kind for random_batch, stock Auto class, outputs compared, config overrides)
CASES = {
    # classifier_dropout is a stock field too; like all dropout it acts in training only
    "sequence_single_label": ("BertkitForSequenceClassification", "sequence", "AutoModelForSequenceClassification",
                              SEQUENCE, {"problem_type": "single_label_classification", "classifier_dropout": 0.3}),
    # the saved threshold is post-processing of the logits (sigmoid > threshold), done by bertkit predict; stock
    # keeps it as an unused config attribute, so equal logits are all there is to compare
    "sequence_multi_label": ("BertkitForSequenceClassification", "sequence", "AutoModelForSequenceClassification",
                             SEQUENCE, {"problem_type": "multi_label_classification", "multi_label_threshold": 0.3}),
    "sequence_regression": ("BertkitForSequenceClassification", "sequence", "AutoModelForSequenceClassification",
                            SEQUENCE, {"problem_type": "regression", "num_labels": 1}),
    "sequence_mean_pooling": ("BertkitForSequenceClassification", "sequence", "AutoModelForSequenceClassification",
                              SEQUENCE, {"classifier_pooling": "mean"}),
    "token": ("BertkitForTokenClassification", "token", "AutoModelForTokenClassification", PER_TOKEN, {}),
    "token_padded_path": ("BertkitForTokenClassification", "token", "AutoModelForTokenClassification",
                          {"logits": False}, {"unpad": False}),
    "qa": ("BertkitForQuestionAnswering", "qa", "AutoModelForQuestionAnswering", QA, {"num_labels": 2}),
    "choice": ("BertkitForMultipleChoice", "choice", "AutoModelForMultipleChoice", SEQUENCE, {}),
    "mlm": ("BertkitForMaskedLM", "mlm", "AutoModelForMaskedLM", PER_TOKEN, {}),
    "mlm_untied": ("BertkitForMaskedLM", "mlm", "AutoModelForMaskedLM", PER_TOKEN, {"tie_word_embeddings": False}),
    "pretraining": ("BertkitForPreTraining", "pretraining", "AutoModelForPreTraining", PRETRAINING, {}),
}
# Checkpoints stock BERT cannot express: stock loading must raise, and the message must name the reason.
LOUD_FAILURES = {"sequence_mean_pooling": "bertkit"}
# LoRA case -> (bertkit class, batch kind, peft task type, modules_to_save, stock Auto class, outputs compared), as
# the recipes call add_lora; "lora_merged" is merged (lora.merge=true), the others save the adapter alone
LORA_CASES = {
    "lora_merged": ("BertkitForSequenceClassification", "sequence", "SEQ_CLS", None,
                    "AutoModelForSequenceClassification", SEQUENCE),
    "lora_unmerged": ("BertkitForSequenceClassification", "sequence", "SEQ_CLS", None,
                      "AutoModelForSequenceClassification", SEQUENCE),
    "lora_unmerged_token": ("BertkitForTokenClassification", "token", "TOKEN_CLS", None,
                            "AutoModelForTokenClassification", PER_TOKEN),
    "lora_unmerged_choice": ("BertkitForMultipleChoice", "choice", None, ["classifier"],
                             "AutoModelForMultipleChoice", SEQUENCE),
}
# peft's one-call loader of an adapter: it rebuilds the base from the base's own config, not the task config
AUTO_PEFT = {"lora_unmerged_auto_peft": ("lora_unmerged", "AutoPeftModelForSequenceClassification")}
ALL_CASES = [*CASES, *LORA_CASES, *AUTO_PEFT, "vocab_extension"]


def _perturb(model, trainable_only=False):
    """Move weights off their init (zero biases, identity LayerNorms, LoRA's zero B) so a dropped one shows; with
    `trainable_only`, only those training would change (an adapter saves no frozen base weight)."""
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.requires_grad or not trainable_only:
                parameter.add_(torch.randn_like(parameter) * 0.05)
    return model


def _outputs(model, batch, names) -> dict:
    with torch.no_grad():
        out = model(**batch)
    return {name: out[name] for name in names}


def _save_case(root, name, model, batch, names, **stock_spec) -> tuple:
    """Save the batch and what the stock side should do with the model saved in root / name (auto: the class that
    loads it; peft_base: the base of an adapter; texts: encode these with the saved tokenizer instead of using the
    batch); return bertkit's outputs, the batch's attention mask and which outputs are per token."""
    torch.save(batch, root / name / "batch.pt")
    _write_spec(root, name, path=str(root / name), outputs=list(names), **stock_spec)
    return _outputs(model.eval(), batch, names), batch["attention_mask"], names


def _write_spec(root, name, **spec):
    (root / name).mkdir(exist_ok=True)
    (root / name / "stock_spec.json").write_text(json.dumps({"batch": f"{spec['path']}/batch.pt", **spec}))


def _save_plain_cases(root) -> dict:
    expected = {}
    for name, (class_name, kind, auto, names, overrides) in CASES.items():
        torch.manual_seed(0)
        config = bertkit.BertkitConfig(**tiny_config_kwargs(**overrides))
        model = _perturb(getattr(bertkit, class_name)(config)).eval()
        model.save_pretrained(root / name)
        batch = random_batch(kind, seed=5, num_labels=config.num_labels, with_labels=False)
        expected[name] = _save_case(root, name, model, batch, names, auto=auto)
    return expected


def _save_lora_cases(root) -> dict:
    """LoRA on a model fine-tuned from a saved base, as the recipes and training.finish_run do it."""
    torch.manual_seed(0)
    base_dir = root / "lora_base"
    _perturb(bertkit.BertkitModel(bertkit.BertkitConfig(**tiny_config_kwargs()))).save_pretrained(base_dir)
    expected = {}
    for name, (class_name, kind, task_type, modules_to_save, auto, names) in LORA_CASES.items():
        torch.manual_seed(1)
        model = getattr(bertkit, class_name).from_pretrained(base_dir)
        model = add_lora(model, LoraOptions(enabled=True), task_type=task_type, modules_to_save=modules_to_save)
        model = _perturb(model, trainable_only=True)
        batch = random_batch(kind, seed=5, with_labels=False)
        if name == "lora_merged":  # lora.merge=true: the merged model is saved like any other
            model = model.merge_and_unload().eval()
            model.save_pretrained(root / name)
            expected[name] = _save_case(root, name, model, batch, names, auto=auto)
            continue
        model.eval().save_pretrained(root / name)  # lora.merge=false: the adapter, and the task config beside it
        task_model = model.get_base_model()
        task_model.config.architectures = [type(task_model).__name__]
        task_model.config.save_pretrained(root / name)
        expected[name] = _save_case(root, name, model, batch, names, auto=auto, peft_base=str(base_dir))
    for name, (adapter_case, auto) in AUTO_PEFT.items():  # the same adapter and batch, loaded the other way
        expected[name] = expected[adapter_case]
        _write_spec(root, name, path=str(root / adapter_case), outputs=list(LORA_CASES[adapter_case][5]), auto=auto)
    return expected


def _save_vocab_extension(root, minilm_dir) -> dict:
    """recipes/mlm.py's vocabulary extension: new tokens in the tokenizer, resized embeddings, tied decoder and bias."""
    torch.manual_seed(0)
    tokenizer = transformers.AutoTokenizer.from_pretrained(minilm_dir)
    config = bertkit.BertkitConfig(**tiny_config_kwargs(vocab_size=len(tokenizer), max_position_embeddings=64))
    model = _perturb(bertkit.BertkitForMaskedLM(config))
    vocab = tokenizer.get_vocab()
    new = [NewToken(word, 10, tuple(tokenizer.tokenize(word)), tuple(tokenizer(word, add_special_tokens=False)
                                                                       ["input_ids"]))
           for word in ("bertkitology", "zzyzxian")]
    assert all(word not in vocab for word in ("bertkitology", "zzyzxian"))
    new_ids = extend_vocabulary(model, tokenizer, new)
    with torch.no_grad():  # the new rows as training would leave them, not just their initial means
        model.get_input_embeddings().weight[new_ids] += 0.1
        model.cls.predictions.bias[new_ids] += 0.1
    texts = ["bertkitology is a zzyzxian word", "zzyzxian"]
    batch = dict(tokenizer(texts, padding=True, return_tensors="pt"))
    assert all((batch["input_ids"] == i).any() for i in new_ids)
    name = "vocab_extension"
    model.save_pretrained(root / name)
    tokenizer.save_pretrained(root / name)  # the stock side encodes the texts with it: the new words must get the ids
    return {name: _save_case(root, name, model, batch, PER_TOKEN, auto="AutoModelForMaskedLM", texts=texts)}


STOCK_LOADER = textwrap.dedent("""
    import json, sys, peft, torch, transformers
    root, names = sys.argv[1], sys.argv[2:]
    for name in names:
        spec = json.loads(open(f"{root}/{name}/stock_spec.json").read())
        path, missing = spec["path"], []
        try:
            if spec["auto"].startswith("AutoPeft"):  # peft's one call: base from adapter_config.json, then adapter
                model = getattr(peft, spec["auto"]).from_pretrained(path)
            elif "peft_base" in spec:  # base + the task config saved beside the adapter, then the adapter
                config = transformers.AutoConfig.from_pretrained(path)
                model = getattr(transformers, spec["auto"]).from_pretrained(spec["peft_base"], config=config)
                model = peft.PeftModel.from_pretrained(model, path)
            else:
                model, info = getattr(transformers, spec["auto"]).from_pretrained(path, output_loading_info=True)
                missing = info["missing_keys"]
        except Exception as error:
            torch.save({"error": f"{type(error).__name__}: {error}"}, f"{root}/{name}/stock.pt")
            continue
        if "texts" in spec:
            tokenizer = transformers.AutoTokenizer.from_pretrained(path)
            batch = dict(tokenizer(spec["texts"], padding=True, return_tensors="pt"))
        else:
            batch = torch.load(spec["batch"])
        with torch.no_grad():
            out = model.eval()(**batch)
        torch.save({"class": type(model).__name__, "missing": sorted(missing),
                    "outputs": {k: out[k] for k in spec["outputs"]}}, f"{root}/{name}/stock.pt")
    assert "bertkit" not in sys.modules
""")


@pytest.fixture(scope="module")
def saved(tmp_path_factory, minilm_dir):
    """bertkit's outputs for each case, and what stock transformers gave (or raised) in a bertkit-free process."""
    root = tmp_path_factory.mktemp("stock-roundtrip")
    expected = {**_save_plain_cases(root), **_save_lora_cases(root), **_save_vocab_extension(root, minilm_dir)}
    run = subprocess.run([sys.executable, "-c", STOCK_LOADER, str(root), *expected], capture_output=True, text=True,
                         cwd=root)
    assert run.returncode == 0, run.stderr[-3000:]
    return root, expected, {name: torch.load(root / name / "stock.pt") for name in expected}


def test_every_case_is_covered(saved):
    assert sorted(saved[1]) == sorted(ALL_CASES)


@pytest.mark.parametrize("name", [n for n in ALL_CASES if n not in LOUD_FAILURES])
def test_stock_transformers_gives_bertkits_outputs(saved, name):
    _, expected, stock = saved
    assert "error" not in stock[name], f"{name}: stock loading failed: {stock[name].get('error')}"
    assert not stock[name]["missing"], f"{name}: stock initialised {stock[name]['missing']} at random"
    outputs, attention_mask, per_token = expected[name]
    for output, tensor in outputs.items():
        actual = stock[name]["outputs"][output]
        assert actual.shape == tensor.shape, f"{name}: {output}"
        # per-token outputs at real tokens only: unpadded bertkit leaves zeros at padding, stock computes pad tokens
        real = attention_mask.bool() if per_token[output] else torch.ones(tensor.shape[:1], dtype=torch.bool)
        difference = (actual - tensor)[real].abs().max().item()
        assert difference <= 1e-5, f"{name}: {output} differs by {difference}"


@pytest.mark.parametrize("name", list(LOUD_FAILURES))
def test_stock_transformers_refuses_what_it_cannot_express(saved, name):
    _, _, stock = saved
    assert "error" in stock[name], f"{name}: stock transformers loaded a model it computes differently"
    assert "ValueError" in stock[name]["error"] and LOUD_FAILURES[name] in stock[name]["error"], stock[name]["error"]


def test_mean_pooling_checkpoints_still_load_in_bertkit(saved, minilm_dir):
    root, expected, _ = saved
    transformers.AutoTokenizer.from_pretrained(minilm_dir).save_pretrained(root / "sequence_mean_pooling")  # predict's
    batch = torch.load(root / "sequence_mean_pooling" / "batch.pt")
    reference = expected["sequence_mean_pooling"][0]["logits"]
    for load in (bertkit.BertkitForSequenceClassification.from_pretrained,
                 transformers.AutoModelForSequenceClassification.from_pretrained,
                 lambda path: load_finetuned(bertkit.BertkitForSequenceClassification, path, "classify")):
        model = load(root / "sequence_mean_pooling").eval()
        assert type(model) is bertkit.BertkitForSequenceClassification and model.config.classifier_pooling == "mean"
        assert torch.allclose(_outputs(model, batch, ["logits"])["logits"], reference, atol=1e-6)
    assert type(transformers.AutoConfig.from_pretrained(root / "sequence_mean_pooling")) is bertkit.BertkitConfig


def test_model_card_says_mean_pooling_needs_bertkit(saved):
    root = saved[0]
    card = render_model_card(root / "sequence_mean_pooling")
    assert "mean pooling" in card and "import bertkit" in card
    assert "loads with plain `transformers`" not in card
    assert "import bertkit" not in render_model_card(root / "sequence_single_label")


def test_classify_refuses_an_unmerged_mean_pooling_adapter():
    # peft's AutoPeftModelForSequenceClassification rebuilds the base from the base's config ([CLS] pooler) and
    # ignores the task config beside the adapter: such an adapter would load in stock peft and predict otherwise
    Config = load_recipe("classify").Config
    with pytest.raises(BertkitError, match="pooling=mean with lora.merge=false"):
        Config(pooling="mean", lora=LoraOptions(enabled=True, merge=False))
    Config(pooling="mean", lora=LoraOptions(enabled=True, merge=True))
    Config(pooling="cls", lora=LoraOptions(enabled=True, merge=False))


def test_a_decoder_bert_is_refused_not_computed_bidirectionally(tmp_path):
    # stock BERT with is_decoder=True attends causally; bertkit is an encoder and would silently attend both ways
    transformers.BertConfig(**tiny_config_kwargs(), is_decoder=True).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="decoder"):
        bertkit.BertkitConfig.from_pretrained(tmp_path)
