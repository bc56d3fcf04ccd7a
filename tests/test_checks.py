"""Every value is checked where it is set: `bertkit validate` refuses, with one line naming the key and where it was
set (exit code 2), what used to be accepted and then silently trained wrong or crashed deep in a library — before
any model or data is loaded. Labels are never guessed silently (bertkit/labels.py)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from bertkit.cli import app
from bertkit.labels import LabelSpace
from bertkit.splits import load_split
from bertkit.errors import BertkitError

runner = CliRunner()
ROOT = Path(__file__).resolve().parent.parent
SCRIPT = Path(sys.executable).parent / "bertkit"


@pytest.fixture()
def dev(tmp_path):
    """An existing file to name as data.eval (validate only looks whether it is there)."""
    path = tmp_path / "dev.csv"
    path.write_text("text,label\na,pos\nb,neg\n", encoding="utf-8")
    return str(path)


def validate(recipe, *overrides):
    return runner.invoke(app, ["validate", recipe, *overrides])


def the_error(result) -> str:
    """The one `error:` line of a refused command (exit code 2, no traceback)."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output, result.output
    lines = [line for line in result.output.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


# (recipe, overrides, words the one-line message must hold). "{dev}" is an existing dev file.
BAD = [
    # train: numbers
    ("classify", ["train.num_train_epochs=0"], ["train.num_train_epochs", "above 0", "override"]),
    ("ner", ["train.num_train_epochs=-1"], ["train.num_train_epochs", "got -1"]),
    ("classify", ["train.max_steps=-5"], ["train.max_steps", "-1 to train for train.num_train_epochs"]),
    ("qa", ["train.max_steps=0"], ["train.max_steps", "got 0"]),
    ("classify", ["train.learning_rate=0"], ["train.learning_rate", "greater than 0"]),
    ("choice", ["train.learning_rate=-1.0e-5"], ["train.learning_rate"]),
    ("classify", ["train.weight_decay=-0.1"], ["train.weight_decay", "greater than or equal to 0"]),
    ("mlm", ["train.warmup_steps=-1"], ["train.warmup_steps", "greater than or equal to 0"]),
    ("classify", ["train.gradient_accumulation_steps=0"],
     ["train.gradient_accumulation_steps", "greater than or equal to 1"]),
    ("ner", ["train.per_device_train_batch_size=0"],
     ["train.per_device_train_batch_size", "greater than or equal to 1"]),
    ("qa", ["train.per_device_eval_batch_size=-2"],
     ["train.per_device_eval_batch_size", "greater than or equal to 1"]),
    ("classify", ["train.logging_steps=0"], ["train.logging_steps"]),
    # data.max_length in every recipe that has it
    ("classify", ["data.max_length=0"],
     ["data.max_length", "greater than or equal to 8", "got 0", "override data.max_length=0"]),
    ("classify", ["data.max_length=1"], ["data.max_length", "greater than or equal to 8"]),
    ("ner", ["data.max_length=-5"], ["data.max_length", "got -5"]),
    ("qa", ["data.max_length=1"], ["data.max_length", "greater than or equal to 8"]),
    ("choice", ["data.max_length=5"], ["data.max_length", "greater than or equal to 8"]),
    ("mlm", ["data.max_length=2"], ["data.max_length", "greater than or equal to 8"]),
    ("ner", ["data.stride=200"], ["data.stride", "126 tokens of a window"]),
    ("qa", ["n_best=0"], ["n_best", "greater than or equal to 1"]),
    ("qa", ["data.doc_stride=400"], ["data.doc_stride", "(from override data.doc_stride=400)"]),
    ("mlm", ["model=scratch:huge"], ["scratch:tiny", "(from override model=scratch:huge)"]),
    # recipe knobs
    ("classify", ["head_lr=0"], ["head_lr", "greater than 0"]),
    ("mlm", ["head_lr=-1.0e-3"], ["head_lr"]),
    ("classify", ["llrd=0"], ["llrd", "greater than 0"]),
    ("ner", ["llrd=1.5"], ["llrd", "got 1.5"]),
    ("classify", ["seed=-1"], ["'seed'", "greater than or equal to 0"]),
    ("mlm", ["eval_seed=-3"], ["eval_seed"]),
    ("classify", ["lora.r=0"], ["lora.r", "greater than or equal to 1"]),
    ("qa", ["lora.alpha=0"], ["lora.alpha", "greater than 0"]),
    ("choice", ["lora.dropout=1"], ["lora.dropout", "less than 1"]),
    ("ner", ["lora.dropout=-0.1"], ["lora.dropout"]),
    ("classify", ["lora.target_modules=[]"], ["lora.target_modules", "at least 1 item"]),
    ("mlm", ["masking.probability=0"], ["masking.probability", "above 0 and below 1"]),
    ("mlm", ["masking.probability=1.5"], ["masking.probability"]),
    ("mlm", ["masking.mask_replace_prob=0.9", "masking.random_replace_prob=0.2"], ["masking.random_replace_prob"]),
    ("mlm", ["data.eval_fraction=0"], ["data.eval_fraction"]),
    # early stopping
    ("classify", ["early_stopping_patience=0"], ["early_stopping_patience", "greater than or equal to 1"]),
    ("classify", ["early_stopping_patience=2"], ["early_stopping_patience", "data.eval is not set"]),
    ("ner", ["early_stopping_patience=3"], ["early_stopping_patience", "data.eval"]),
    ("choice", ["data.eval={dev}", "early_stopping_patience=2", "train.eval_strategy=no"],
     ["early_stopping_patience", "train.eval_strategy is no"]),
    ("classify", ["data.eval={dev}", "early_stopping_patience=2", "train.load_best_model_at_end=false"],
     ["early_stopping_patience", "train.load_best_model_at_end=true"]),
    # Trainer combinations
    ("classify", ["data.eval={dev}", "train.save_strategy=steps", "train.save_steps=4"],
     ["train.save_steps", "not a multiple of train.eval_steps=10", "train.eval_steps=4"]),
    ("ner", ["data.eval={dev}", "train.save_strategy=steps", "train.eval_strategy=epoch"],
     ["train.eval_strategy", "differ", "train.eval_strategy=steps"]),
    ("classify", ["train.eval_strategy=steps"], ["train.eval_strategy", "no dev split", "data.eval"]),
    ("qa", ["train.load_best_model_at_end=true"], ["train.load_best_model_at_end", "dev split"]),
    ("classify", ["train.lr_scheduler_type=reduce_lr_on_plateau"], ["'train'", "reduce_lr_on_plateau"]),
    # paths
    ("classify", ["data.train=/nonexistent/train.csv"], ["data.train", "no such file /nonexistent/train.csv"]),
    ("classify", ["data.eval=missing/dev.csv"], ["data.eval", "no such file"]),
    ("ner", ["data.train=missing.conll"], ["data.train", "no such file"]),
    ("qa", ["data.eval=/nonexistent/dev.json"], ["data.eval", "no such file"]),
    ("choice", ["data.train=/nonexistent/train.jsonl"], ["data.train"]),
    ("mlm", ["data.train=/nonexistent/corpus.txt"], ["data.train"]),
    ("classify", ["model=./models/missing"], ["'model'", "does not exist"]),
    ("mlm", ["model=/nonexistent/bert"], ["'model'", "does not exist"]),
    ("classify", ["resume=/nonexistent/checkpoint-3"], ["'resume'", "does not exist"]),
    # keys that belong elsewhere
    ("classify", ["train.hub_token=hf_abcdefsecret"], ["train.hub_token", "HF_TOKEN", "hf auth login"]),
    ("classify", ["train.output_dir=x", "resume=true"], ["train.output_dir", "top-level output_dir"]),
    ("mlm", ["train.seed=3"], ["train.seed", "top-level seed"]),
    ("ner", ["train.resume_from_checkpoint=x"], ["train.resume_from_checkpoint", "resume="]),
    ("classify", ["train.fp16=true"], ["train.fp16", "precision=fp16"]),
    ("qa", ["train.bf16=true", "precision=fp32"], ["train.bf16", "precision=bf16"]),
]


@pytest.mark.parametrize("recipe, overrides, words", BAD, ids=[f"{r}:{' '.join(o)}" for r, o, _ in BAD])
def test_validate_refuses_in_one_line(recipe, overrides, words, dev):
    line = the_error(validate(recipe, *(o.replace("{dev}", dev) for o in overrides)))
    for word in words:
        assert word in line, line


def test_the_token_is_never_echoed():
    line = the_error(validate("classify", "train.hub_token=hf_abcdefsecret"))
    assert "hf_abcdefsecret" not in line


def test_where_a_key_was_set_in_a_yaml_file(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("data:\n  max_length: 1\ntrain:\n  learning_rate: 5.0e-5\n  num_train_epochs: 0\n")
    line = the_error(validate("classify", "-c", str(path)))
    assert "data.max_length" in line and f"{path}, line 2" in line
    line = the_error(validate("classify", "-c", str(path), "data.max_length=64"))
    assert "train.num_train_epochs" in line and f"{path}, line 5" in line


GOOD = [
    ("classify", ["train.num_train_epochs=0", "train.max_steps=10"]),
    ("classify", ["data.eval={dev}", "train.save_strategy=steps", "train.save_steps=20", "train.eval_steps=10"]),
    ("classify", ["data.eval={dev}", "early_stopping_patience=2"]),
    ("classify", ["data.eval={dev}", "train.save_strategy=steps", "train.save_steps=3", "train.eval_strategy=no",
                  "train.load_best_model_at_end=false"]),
    ("classify", ["model=bert-base-uncased"]),  # a Hub id: not checked offline
    ("classify", ["data.train=someone/reviews"]),  # a Hub dataset name
    ("mlm", ["model=scratch:tiny", "early_stopping_patience=2"]),  # mlm always evaluates its held-out slice
    ("ner", ["data.max_length=12", "data.stride=4"]),
]


@pytest.mark.parametrize("recipe, overrides", GOOD, ids=[f"{r}:{' '.join(o)}" for r, o in GOOD])
def test_validate_accepts_what_works(recipe, overrides, dev):
    result = validate(recipe, *(o.replace("{dev}", dev) for o in overrides))
    assert result.exit_code == 0, result.output
    assert f"ok: {recipe} config is valid" in result.output


def test_checking_the_trainer_settings_leaves_the_device_alone():
    """The TrainingArguments check must not start accelerate's process state: a CPU one made at config time would
    be reused by the run's own TrainingArguments (a GPU run would train on the CPU)."""
    code = ("from accelerate.state import PartialState; from bertkit.cli import load_recipe_config; "
            "load_recipe_config('classify', None, ['train.save_strategy=steps']); "
            "print('state', bool(PartialState._shared_state))")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert "state False" in result.stdout


# ---------------------------------------------------------------------------------------------------------------
# Through the installed console script


def run_script(*args):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)


@pytest.mark.skipif(not SCRIPT.exists(), reason="bertkit is not installed in this environment")
@pytest.mark.parametrize("overrides, words", [
    (["train.num_train_epochs=0", "data.max_length=1"], ["data.max_length", "greater than or equal to 8"]),
    (["data.train=data/en_sentiment/train.csv", "data.eval=data/en_sentiment/dev.csv", "train.save_strategy=steps",
      "train.save_steps=4"], ["train.save_steps", "train.eval_steps"]),
    (["train.hub_token=hf_abcdefsecret"], ["train.hub_token", "HF_TOKEN"]),
])
def test_console_script_refuses_with_exit_2(overrides, words):
    result = run_script("validate", "classify", *overrides)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and result.stderr.strip().count("\n") == 0
    for word in words:
        assert word in result.stderr, result.stderr
    assert "hf_abcdefsecret" not in result.stderr


# ---------------------------------------------------------------------------------------------------------------
# LoRA target modules: only the built model knows its layers


def test_unknown_lora_target_module_names_the_linear_layers(tiny_model_dir):
    import bertkit
    from bertkit.options import LoraOptions
    from bertkit.training import add_lora

    model = bertkit.BertkitForSequenceClassification.from_pretrained(tiny_model_dir, num_labels=2)
    with pytest.raises(BertkitError) as info:
        add_lora(model, LoraOptions(enabled=True, target_modules=["query", "qeury"]), task_type="SEQ_CLS")
    message = str(info.value)
    assert "\n" not in message and "lora.target_modules" in message and "'qeury'" in message
    assert "query" in message and "value" in message and "dense" in message
    assert isinstance(model.bert.encoder.layer[0].attention.self.query, torch.nn.Linear)  # untouched


def test_unknown_lora_target_module_through_run(tiny_model_dir, tmp_path):
    train = tmp_path / "train.csv"
    train.write_text("text,label\n" + "".join(f"row {i},{'pos' if i % 2 else 'neg'}\n" for i in range(8)))
    result = runner.invoke(app, ["run", "classify", f"model={tiny_model_dir}", f"data.train={train}",
                                 f"output_dir={tmp_path / 'out'}", "precision=fp32", "train.max_steps=1",
                                 "train.save_strategy=no", "lora.enabled=true", "lora.target_modules=[qkv]"])
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert "lora.target_modules" in lines[0] and "'qkv'" in lines[0] and "query" in lines[0]


# ---------------------------------------------------------------------------------------------------------------
# Labels are never guessed silently


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def error_of(function, *args, **kwargs) -> str:
    with pytest.raises(BertkitError) as info:
        function(*args, **kwargs)
    assert "\n" not in str(info.value)
    return str(info.value)


def test_one_word_in_a_score_column_is_refused_not_forty_classes(tmp_path):
    rows = "".join(f"t{i},{i % 5}.{i % 7}\n" for i in range(40))
    path = write(tmp_path, "s.csv", "text,score\n" + rows + "tx,abc\n")
    message = error_of(load_split, path)
    assert "column 'score'" in message and "line 42 ('abc')" in message and "data.label_kind=" in message


def test_one_fraction_among_class_ids_is_refused_not_regression(tmp_path):
    rows = "".join(f"t{i},{i % 2}\n" for i in range(20))
    path = write(tmp_path, "h.csv", "text,label\n" + rows + "tx,0.5\n")
    message = error_of(load_split, path)
    assert "line 22 (0.5)" in message and "data.label_kind=regression" in message
    assert load_split(path, label_kind="regression")[2].kind == "regression"  # the user decides, openly
    assert load_split(path, label_kind="single")[2].names == ["0", "0.5", "1"]


def test_a_stray_number_among_class_names_is_refused(tmp_path):
    path = write(tmp_path, "m.csv", "text,label\na,positive\nb,negative\nc,1\nd,positive\n")
    assert "line 4 ('1')" in error_of(load_split, path)
    assert load_split(path, label_kind="single")[2].names == ["1", "negative", "positive"]


@pytest.mark.parametrize("spelling", ["NaN", "None", "", "null", "NA", " nan "])
def test_missing_value_spellings_are_missing_labels_not_classes(tmp_path, spelling):
    path = write(tmp_path, "n.csv", f"text,label\na,positive\nb,negative\nc,{spelling}\nd,positive\n")
    message = error_of(load_split, path)
    assert message.startswith(f"{path} line 4: the label is empty") and "NaN, None, null, NA" in message


def test_every_missing_label_line_is_named(tmp_path):
    path = write(tmp_path, "n.csv", "text,label\na,1\nb,0\nc,NaN\nd,\ne,None\nf,1\n")
    message = error_of(load_split, path)
    assert "line 4: the label is empty" in message and "line 5" in message and "line 6" in message
    assert "3 rows in all" in message


def test_null_in_json_lines_is_a_missing_label(tmp_path):
    path = write(tmp_path, "n.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": null}\n'
                                      '{"text": "c", "label": 0}\n')
    message = error_of(load_split, path)
    assert message.startswith(f"{path} line 2: the label is empty") and "NaN, None, null, NA count" in message


def test_labels_are_stripped_and_case_variants_refused(tmp_path):
    path = write(tmp_path, "w.csv", "text,label\na,positive \nb,negative\nc, positive\n")
    ds, _, space = load_split(path)
    assert space.names == ["negative", "positive"] and ds["labels"][:] == [1, 0, 1]
    path = write(tmp_path, "c.csv", "text,label\na,positive\nb,negative\nc, Positive\n")
    message = error_of(load_split, path)
    assert "'positive' (line 2) and 'Positive' (line 4)" in message and "differ only in case" in message


def test_from_values_refuses_ambiguous_kinds_without_lines():
    assert "value 3 (0.5)" in error_of(LabelSpace.from_values, [0, 1, 0.5, 1, 0])
    assert LabelSpace.from_values([0.5, 3.2, 4.0]).kind == "regression"  # mostly fractions: a score
    assert LabelSpace.from_values(["NaN", "a", "b", None, "n/a"]).names == ["a", "b"]


def test_inspect_takes_the_label_kind_that_settles_an_ambiguous_column(tmp_path):
    from bertkit.inspection import inspect_data

    path = write(tmp_path, "h.csv", "text,label\n" + "".join(f"t{i},{i % 2}\n" for i in range(20)) + "tx,0.5\n")
    assert "data.label_kind=regression" in error_of(inspect_data, path)
    assert inspect_data(path, label_kind="regression")["label_kind"] == "regression"


def test_multi_label_rows_may_be_empty_but_not_null(tmp_path):
    path = write(tmp_path, "m.jsonl", '{"text": "a", "labels": ["x", "y"]}\n{"text": "b", "labels": []}\n')
    assert load_split(path)[0]["labels"][:] == [[1.0, 1.0], [0.0, 0.0]]
    path = write(tmp_path, "n.jsonl", '{"text": "a", "labels": ["x", "y"]}\n{"text": "b", "labels": null}\n')
    assert error_of(load_split, path).startswith(f"{path} line 2: the label is empty")
    path = write(tmp_path, "n.csv", "text,labels\na,x;y\nb,\nc,NaN\n")
    message = error_of(load_split, path)
    assert message.startswith(f"{path} line 4: the label is empty") and "[] is a row no label applies to" in message


def test_an_empty_label_delimiter_is_refused():
    line = the_error(validate("classify", "data.label_delimiter=''"))
    assert "data.label_delimiter" in line and "at least 1 character" in line
