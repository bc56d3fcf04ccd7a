"""bertkit.config: YAML + key=value overrides -> typed recipe config, errors that name the key and its source."""

from __future__ import annotations

import logging
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest
import yaml

from bertkit.config import (
    INLINE,
    REQUIRED,
    config_header_command,
    config_to_dict,
    describe_config,
    load_config,
    save_config,
    validate_train_args,
)
from bertkit.errors import BertkitError
from bertkit.options import FineTuning, LoraOptions, RunOptions


@dataclass
class DataConfig:
    train: str | None = None
    """Training file (csv / jsonl)."""
    max_length: int = 128
    """Tokens per example;
    longer ones are truncated."""
    labels: list[str] = field(default_factory=list)
    """Label names, in id order."""


@dataclass
class ExampleConfig:
    model: str = "bert-base-uncased"
    """Hub id or local directory of the checkpoint."""
    llrd: float = 1.0
    """Layer-wise learning-rate decay factor."""
    pooling: Literal["cls", "mean"] = "cls"
    """How the sentence vector is made."""
    epochs: int = 3
    seed: int | None = None
    """Seed for data shuffling; null = the Trainer's."""
    freeze_embeddings: bool = False
    output_dir: Path = Path("runs/example")
    data: DataConfig = field(default_factory=lambda: DataConfig(max_length=256))
    train: dict = field(default_factory=lambda: {"learning_rate": 5.0e-5, "num_train_epochs": 3.0})
    """TrainingArguments keyword arguments."""


@dataclass
class NeedsModel:
    model: str
    """Required: no default."""
    lr: float = 1.0


def write(tmp_path: Path, text: str, name: str = "run.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def error_of(*args) -> str:
    with pytest.raises(BertkitError) as info:
        load_config(*args)
    message = str(info.value)
    assert "\n" not in message, "user-facing errors are one line"
    return message


# --- loading and precedence -----------------------------------------------------------------------------------


def test_defaults_only():
    cfg = load_config(ExampleConfig, None, [])
    assert cfg == ExampleConfig()
    assert cfg.data.max_length == 256, "a partial section keeps the outer default, not the class default"


def test_yaml_then_overrides_precedence(tmp_path):
    path = write(
        tmp_path,
        """
        model: prajjwal1/bert-tiny
        llrd: 0.8
        data:
          train: train.csv
        train:
          num_train_epochs: 5
        """,
    )
    cfg = load_config(ExampleConfig, path, ["llrd=0.9", "train.learning_rate=3.0e-5", "data.max_length=64"])
    assert cfg.model == "prajjwal1/bert-tiny"  # YAML over default
    assert cfg.llrd == 0.9  # override over YAML
    assert cfg.data == DataConfig(train="train.csv", max_length=64)
    assert cfg.train == {"learning_rate": 3.0e-5, "num_train_epochs": 5.0}  # the recipe's train defaults are kept
    assert cfg.pooling == "cls" and cfg.epochs == 3  # untouched defaults


def test_later_override_wins():
    assert load_config(ExampleConfig, None, ["llrd=0.5", "llrd=0.7"]).llrd == 0.7


@pytest.mark.parametrize("text", ["5e-5", "5E-5", "5.0e-5", "5.0e5", "-1e-3", "1e3"])
def test_scientific_notation_becomes_float(tmp_path, text):
    expected = float(text)
    from_cli = load_config(ExampleConfig, None, [f"llrd={text}", f"train.learning_rate={text}"])
    from_yaml = load_config(ExampleConfig, write(tmp_path, f"llrd: {text}\ntrain:\n  learning_rate: {text}\n"), [])
    for cfg in (from_cli, from_yaml):
        assert type(cfg.llrd) is float and cfg.llrd == expected
        assert type(cfg.train["learning_rate"]) is float and cfg.train["learning_rate"] == expected


def test_5e_minus_5_is_exactly_5e_minus_05(tmp_path):
    cfg = load_config(ExampleConfig, write(tmp_path, "train:\n  learning_rate: 5e-5\n"), ["llrd=5e-5"])
    assert cfg.train["learning_rate"] == 5e-05 and cfg.llrd == 5e-05


def test_scientific_notation_to_int_and_left_alone_for_str():
    cfg = load_config(ExampleConfig, None, ["epochs=1e3", "model=5e-5", "train.max_steps=2e3"])
    assert cfg.epochs == 1000 and type(cfg.epochs) is int
    assert cfg.train["max_steps"] == 2000 and type(cfg.train["max_steps"]) is int
    assert cfg.model == "5e-5"


def test_int_where_float_expected_is_converted():
    cfg = load_config(ExampleConfig, None, ["llrd=1"])
    assert type(cfg.llrd) is float and cfg.llrd == 1.0


def test_nested_keys_from_both_sources(tmp_path):
    path = write(tmp_path, "data:\n  train: a.csv\n  labels: [neg, pos]\n")
    cfg = load_config(ExampleConfig, path, ["data.max_length=32"])
    assert cfg.data == DataConfig(train="a.csv", max_length=32, labels=["neg", "pos"])
    cfg = load_config(ExampleConfig, None, ["data.train=b.csv"])  # no data: in any file
    assert cfg.data.train == "b.csv" and cfg.data.max_length == 256


def test_list_null_bool_path_overrides():
    cfg = load_config(
        ExampleConfig,
        None,
        ["data.labels=[neg,pos]", "seed=null", "data.train=null", "freeze_embeddings=true", "output_dir=out/x"],
    )
    assert cfg.data.labels == ["neg", "pos"]
    assert cfg.seed is None and cfg.data.train is None
    assert cfg.freeze_embeddings is True
    assert cfg.output_dir == Path("out/x")
    assert load_config(ExampleConfig, None, ["seed=7"]).seed == 7
    assert load_config(ExampleConfig, None, ["freeze_embeddings=yes"]).freeze_embeddings is True


def test_yes_no_stay_strings_in_yaml(tmp_path):
    """YAML 1.1 would turn `no` into False; TrainingArguments needs the string."""
    cfg = load_config(ExampleConfig, write(tmp_path, "train:\n  eval_strategy: no\n  save_strategy: steps\n"), [])
    assert cfg.train["eval_strategy"] == "no"
    assert load_config(ExampleConfig, None, ["train.eval_strategy=no"]).train["eval_strategy"] == "no"


def test_empty_yaml_file_means_defaults(tmp_path):
    assert load_config(ExampleConfig, write(tmp_path, "# only a comment\n"), []) == ExampleConfig()


# --- errors that name the key ---------------------------------------------------------------------------------


def test_wrong_type_from_override_names_key_and_override():
    message = error_of(ExampleConfig, None, ["llrd=abc"])
    assert message == ("config key 'llrd': input should be a valid number, unable to parse string as a number, got "
                       "'abc' — e.g. llrd=1.0 (from override llrd=abc)")


def test_wrong_type_in_train_block_names_key():
    message = error_of(ExampleConfig, None, ["train.learning_rate=abc"])
    assert message.startswith("config key 'train.learning_rate': input should be a valid number, unable to parse "
                              "string as a number, got 'abc'")
    assert "override train.learning_rate=abc" in message


def test_wrong_type_from_yaml_names_file_and_line(tmp_path):
    path = write(tmp_path, "model: m\ndata:\n  max_length: long\n")
    message = error_of(ExampleConfig, path, [])
    assert "config key 'data.max_length'" in message and "a valid integer" in message and "'long'" in message
    assert f"{path}, line 3" in message


@pytest.mark.parametrize(
    "override, key",
    [
        ("epochs=true", "epochs"),  # a bool is not an int
        ("epochs=2.5", "epochs"),
        ("llrd=false", "llrd"),
        ("model=[a,b]", "model"),
        ("data=5", "data"),
        ("data.labels=neg", "data.labels"),
        ("train=[1]", "train"),
        ("freeze_embeddings=maybe", "freeze_embeddings"),
        ("llrd=null", "llrd"),
    ],
)
def test_wrong_types_name_the_key(override, key):
    message = error_of(ExampleConfig, None, [override])
    assert message.startswith(f"config key '{key}': input should be ")
    assert f"(from override {override})" in message


def test_list_error_says_how_to_write_a_list():
    assert "[a, b]" in error_of(ExampleConfig, None, ["data.labels=neg"])


def test_literal_violation_lists_choices_and_suggests():
    message = error_of(ExampleConfig, None, ["pooling=max"])
    assert message.startswith("config key 'pooling': input should be 'cls' or 'mean', got 'max'")
    assert "did you mean 'mean'?" in error_of(ExampleConfig, None, ["pooling=maen"])


def test_unknown_key_suggests_closest():
    message = error_of(ExampleConfig, None, ["data.trian=x.csv"])
    assert message == "unknown config key 'data.trian' — did you mean 'data.train'? (from override data.trian=x.csv)"


def test_unknown_key_in_yaml_names_file_and_line(tmp_path):
    message = error_of(ExampleConfig, write(tmp_path, "model: m\nmodle: n\n"), [])
    assert "unknown config key 'modle'" in message and "did you mean 'model'?" in message
    assert "line 2" in message


def test_unknown_key_without_close_match_lists_valid_keys():
    message = error_of(ExampleConfig, None, ["data.zzzzzz=1"])
    assert "unknown config key 'data.zzzzzz'" in message and "train, max_length, labels" in message


def test_training_argument_at_top_level_points_under_train():
    message = error_of(ExampleConfig, None, ["weight_decay=0.01"])
    assert "unknown config key 'weight_decay'" in message and "'train.weight_decay'" in message


def test_missing_required_key():
    message = error_of(NeedsModel, None, ["lr=0.1"])
    assert "config key 'model': field required" in message and "model=" in message
    assert load_config(NeedsModel, None, ["model=m"]) == NeedsModel(model="m")


def test_bad_overrides():
    assert "not key=value" in error_of(ExampleConfig, None, ["llrd"])
    message = error_of(ExampleConfig, None, ["model.name=x"])
    assert message.startswith("config key 'model': input should be a valid string") and "has no sub-keys" in message


def test_override_below_a_scalar_from_yaml(tmp_path):
    message = error_of(ExampleConfig, write(tmp_path, "model: m\n"), ["model.name=x"])
    assert "config key 'model' is 'm', not a mapping" in message and "model.name=x" in message


@pytest.mark.parametrize(
    "text, line, words",
    [
        ("model: m\ndata: [1, 2\n", None, "invalid YAML"),
        ("model: m\n  llrd: 0.5\n", 2, "invalid YAML"),
        ("- a\n- b\n", 1, "must be a mapping"),
        ("just a string\n", 1, "must be a mapping"),
        ("model: m\nllrd: 0.5\nmodel: n\n", 3, "written twice"),
    ],
)
def test_broken_yaml_names_file_and_line(tmp_path, text, line, words):
    path = write(tmp_path, text)
    message = error_of(ExampleConfig, path, [])
    assert f"config file '{path}'" in message and words in message
    if line is not None:
        assert f"line {line}" in message


def test_missing_file():
    assert "not found" in error_of(ExampleConfig, "no/such/file.yaml", [])


# --- the train: block -----------------------------------------------------------------------------------------


def test_train_unknown_key_suggests_training_argument():
    message = error_of(ExampleConfig, None, ["train.learnig_rate=1e-4"])
    assert message.startswith("unknown config key 'train.learnig_rate' — did you mean 'train.learning_rate'?")


def test_train_warmup_ratio_and_group_by_length_are_translated(tmp_path, caplog):
    path = write(tmp_path, "train:\n  warmup_ratio: 0.1\n  group_by_length: true\n  learning_rate: 5e-5\n")
    with caplog.at_level(logging.WARNING, logger="bertkit.config"):
        cfg = load_config(ExampleConfig, path, [])
    assert cfg.train == {
        "learning_rate": 5e-05,
        "num_train_epochs": 3.0,
        "warmup_steps": 0.1,
        "train_sampling_strategy": "group_by_length",
    }
    assert "warmup_ratio" in caplog.text and "group_by_length" in caplog.text


def test_translated_train_block_is_accepted_by_training_arguments(tmp_path):
    from transformers import TrainingArguments

    train = validate_train_args(
        {"warmup_ratio": 0.06, "group_by_length": True, "learning_rate": "5e-5", "evaluation_strategy": "no"}
    )
    args = TrainingArguments(output_dir=str(tmp_path), **train)
    assert args.warmup_steps == 0.06 and args.learning_rate == 5e-05
    assert args.train_sampling_strategy == "group_by_length"


def test_train_translation_errors():
    with pytest.raises(BertkitError, match=r"'train.warmup_ratio' must be in \[0, 1\)"):
        validate_train_args({"warmup_ratio": 1.5})
    with pytest.raises(BertkitError, match="both set"):
        validate_train_args({"warmup_ratio": 0.1, "warmup_steps": 100})
    with pytest.raises(BertkitError, match="both set"):
        validate_train_args({"group_by_length": True, "train_sampling_strategy": "random"})
    assert validate_train_args({"group_by_length": False}) == {}


def test_train_choices_are_checked():
    message = error_of(ExampleConfig, None, ["train.lr_scheduler_type=cosin"])
    assert message.startswith("config key 'train.lr_scheduler_type': input should be 'linear', 'cosine'")
    assert "did you mean 'cosine'?" in message
    assert "did you mean 'steps'?" in error_of(ExampleConfig, None, ["train.eval_strategy=step"])
    assert "'train.log_level'" in error_of(ExampleConfig, None, ["train.log_level=loud"])


def test_train_values_coerced_to_field_types():
    train = validate_train_args({"num_train_epochs": 2, "bf16": "yes", "report_to": ["none"], "max_steps": 10,
                                 "logging_steps": 5, "warmup_steps": 0.1, "learning_rate": "5e-5"})
    assert train == {"num_train_epochs": 2, "bf16": True, "report_to": ["none"], "max_steps": 10,
                     "logging_steps": 5, "warmup_steps": 0.1, "learning_rate": 5e-5}
    # TrainingArguments' float fields keep a whole number whole: the saved and printed config says what was typed
    # (logging_steps: 5, not 5.0); a share stays a float
    assert [type(train[key]) for key in ("num_train_epochs", "logging_steps", "warmup_steps", "learning_rate")] == \
        [int, int, float, float]
    assert "  logging_steps: 5\n" in yaml.safe_dump({"train": train}, sort_keys=False)
    with pytest.raises(BertkitError, match="config key 'train.gradient_accumulation_steps'"):
        validate_train_args({"gradient_accumulation_steps": True})


# --- save / load / describe / header --------------------------------------------------------------------------


def test_save_load_round_trip(tmp_path):
    cfg = load_config(
        ExampleConfig,
        None,
        [
            "data.labels=[负面,正面]",
            "data.train=5e-5",  # a string that looks like a number must stay a string
            "llrd=5e-5",
            "output_dir=runs/x",
            "seed=null",
            "train.eval_strategy=no",
            "train.warmup_ratio=0.1",
        ],
    )
    path = save_config(cfg, tmp_path / "out" / "config.yaml", command="bertkit run classify -c config.yaml")
    assert load_config(ExampleConfig, path, []) == cfg
    assert config_header_command(path) == "bertkit run classify -c config.yaml"
    plain = config_to_dict(cfg)
    assert plain["output_dir"] == "runs/x" and plain["data"]["labels"] == ["负面", "正面"]
    assert "负面" in path.read_text(encoding="utf-8")


def test_describe_config_reads_field_docstrings():
    rows = {row.key: row for row in describe_config(ExampleConfig)}
    assert list(rows)[:3] == ["model", "llrd", "pooling"]
    assert rows["model"].help == "Hub id or local directory of the checkpoint."
    assert rows["data.max_length"].help == "Tokens per example; longer ones are truncated."
    assert rows["data.max_length"].default == 256  # the outer default's value, not the class default
    assert rows["data.train"].type == "str | None"
    assert rows["pooling"].type == "Literal['cls', 'mean']"
    assert rows["data.labels"].type == "list[str]"
    assert rows["epochs"].help == "" and rows["epochs"].default == 3
    assert rows["train"].default == {"learning_rate": 5e-05, "num_train_epochs": 3.0}
    assert "data" not in rows  # nested sections are listed by their keys
    key, type_, default, help_ = describe_config(NeedsModel)[0]
    assert (key, type_, default, help_) == ("model", "str", REQUIRED, "Required: no default.")


def test_config_header_command(tmp_path):
    path = write(
        tmp_path,
        """
        # Sentiment on the English sample data.
        #
        # bertkit run classify -c recipes/configs/classify/en.yaml \\
        #     train.learning_rate=3.0e-5
        model: m
        # bertkit run other
        """,
    )
    assert config_header_command(path) == (
        "bertkit run classify -c recipes/configs/classify/en.yaml train.learning_rate=3.0e-5"
    )
    assert config_header_command(write(tmp_path, "model: m\n# bertkit run late\n", "b.yaml")) is None
    with pytest.raises(BertkitError):
        config_header_command(tmp_path / "missing.yaml")


# --- inline sections: shared options whose keys sit at the recipe's top level ----------------------------------


@dataclass
class InlineConfig:
    model: str = "m"
    """The checkpoint."""
    run: RunOptions = field(default_factory=lambda: RunOptions(output_dir="runs/toy"), metadata=INLINE)
    tune: FineTuning = field(default_factory=FineTuning, metadata=INLINE)
    lora: LoraOptions = field(default_factory=LoraOptions)
    data: DataConfig = field(default_factory=DataConfig)
    train: dict = field(default_factory=lambda: {"learning_rate": 5.0e-5})
    """TrainingArguments keyword arguments."""


def test_inline_keys_are_read_at_the_top_level(tmp_path):
    path = write(tmp_path, "seed: 7\nllrd: 0.8\nlora:\n  r: 4\n")
    cfg = load_config(InlineConfig, path, ["llrd=0.9", "output_dir=out/x", "lora.alpha=8", "data.train=a.csv"])
    assert cfg.run == RunOptions(output_dir="out/x", seed=7)
    assert cfg.tune == FineTuning(llrd=0.9)
    assert (cfg.lora.r, cfg.lora.alpha, cfg.data.train) == (4, 8, "a.csv")
    assert load_config(InlineConfig, None, []) == InlineConfig()
    assert InlineConfig().run.output_dir == "runs/toy", "the recipe's own default, not a shared one"


def test_inline_key_typo_suggests_the_top_level_key():
    assert error_of(InlineConfig, None, ["lrd=0.9"]) == (
        "unknown config key 'lrd' — did you mean 'llrd'? (from override lrd=0.9)"
    )
    assert "did you mean 'output_dir'?" in error_of(InlineConfig, None, ["ouput_dir=x"])
    assert "unknown config key 'run'" in error_of(InlineConfig, None, ["run.output_dir=x"])
    assert "did you mean 'lora.alpha'?" in error_of(InlineConfig, None, ["lora.alpah=8"])


def test_inline_errors_name_the_top_level_key_and_its_source(tmp_path):
    assert error_of(InlineConfig, None, ["llrd=abc"]) == (
        "config key 'llrd': input should be a valid number, unable to parse string as a number, got 'abc' — e.g. "
        "llrd=1.0 (from override llrd=abc)"
    )
    message = error_of(InlineConfig, write(tmp_path, "model: m\nseed: -1\n"), [])
    assert message.startswith("config key 'seed': input should be greater than or equal to 0") and "line 2" in message
    assert "(from override head_lr=0)" in error_of(InlineConfig, None, ["head_lr=0"])
    assert "config key 'early_stopping_patience': input should be greater than or equal to 1" in error_of(
        InlineConfig, None, ["early_stopping_patience=0"])
    assert "(from override lora.r=0)" in error_of(InlineConfig, None, ["lora.r=0"])


def test_inline_keys_are_described_and_saved_in_place(tmp_path):
    rows = {row.key: row for row in describe_config(InlineConfig)}
    assert list(rows)[:11] == ["model", "output_dir", "seed", "resume", "overwrite", "keep_checkpoints", "push",
                               "precision", "llrd", "head_lr", "early_stopping_patience"]
    assert "run" not in rows and "tune" not in rows and not any(key.startswith(("run.", "tune.")) for key in rows)
    assert rows["output_dir"].default == "runs/toy" and rows["llrd"].type == "float"
    assert rows["seed"].help.startswith("Seed for initialisation") and rows["lora.r"].help == "LoRA rank."
    cfg = load_config(InlineConfig, None, ["llrd=0.9", "output_dir=out/y", "lora.r=2"])
    plain = config_to_dict(cfg)
    assert list(plain)[:3] == ["model", "output_dir", "seed"] and plain["llrd"] == 0.9
    assert "run" not in plain and "tune" not in plain and plain["lora"]["r"] == 2
    assert load_config(InlineConfig, save_config(cfg, tmp_path / "saved.yaml"), []) == cfg


def test_train_output_dir_and_seed_point_at_the_top_level_keys():
    assert "set the top-level output_dir=... instead" in error_of(InlineConfig, None, ["train.output_dir=x"])
    assert "set the top-level seed=... instead" in error_of(InlineConfig, None, ["train.seed=3"])


def test_an_inline_key_declared_twice_is_a_recipe_bug():
    @dataclass
    class Twice:
        output_dir: str = "x"
        run: RunOptions = field(default_factory=lambda: RunOptions(output_dir="y"), metadata=INLINE)

    with pytest.raises(TypeError, match="'output_dir' is declared twice"):
        load_config(Twice, None, [])
