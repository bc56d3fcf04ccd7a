"""The rules of a recipe config: ranges pydantic checks (`Seed`, `MaxLength`), and the checks across keys that a
recipe's `Config.__post_init__` runs after pydantic has typed every value (bertkit/config.py), so that `bertkit
validate` and `bertkit run` refuse a value that cannot work before any model or data is loaded (nothing here loads
either: paths are only looked at):

    max_length: MaxLength = 128                             a field's range: [CLS], [SEP] and some text
    check_recipe(self, has_eval=self.data.eval is not None) early stopping, train:, search, seeds, paths

Every check raises `ConfigValueError` with one line that names the key, the rule and the fix; `load_config` adds
where the key was set (`(from override data.max_length=1)`). `bertkit validate` also builds the run's real
`TrainingArguments` (`check_training_arguments`); `bertkit run` builds it once, in the recipe.
"""

from __future__ import annotations

import dataclasses
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from .config import _show, check_value
from .errors import BertkitError, ConfigValueError
from .rundir import resume_path_problem
from .shipped import locate_model
from .training_arguments import trainer_kwargs, training_fields

MIN_MAX_LENGTH = 8  # [CLS], [SEP] and a few tokens of text
SEED_LIMIT = 2**32  # numpy's range, which transformers.set_seed seeds too

Seed = Annotated[int, Field(ge=0, lt=SEED_LIMIT)]
MaxLength = Annotated[int, Field(ge=MIN_MAX_LENGTH)]  # tokens per example, [CLS] and [SEP] included


def require(ok: bool, key: str, value: Any, rule: str, fix: str) -> None:
    """Unless `ok`: `config key 'K' must be RULE, got VALUE — FIX`."""
    if not ok:
        raise ConfigValueError(key, f"config key '{key}' must be {rule}, got {_show(_number(value))} — {fix}")


@contextmanager
def at_key(key: str):
    """A library check's BertkitError raised inside also says where `key` was set (`load_config` adds it)."""
    try:
        yield
    except ConfigValueError:
        raise
    except BertkitError as error:
        raise ConfigValueError(key, str(error)) from None


def _number(value: Any) -> Any:
    """4.0 -> 4 for messages and suggestions (TrainingArguments types most counts as floats)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


# ---------------------------------------------------------------------------------------------- recipe knobs


def _check_range(values: list, key: str, low: float, high: float, rule: str, example: str) -> None:
    """A [min, max] search range: two numbers, min <= max, both inside [low, high] (`rule` says it in words)."""
    require(len(values) == 2, key, values, "two numbers [min, max]", f"e.g. {key}={example}")
    require(values[0] <= values[1], key, values, "[min, max] with min <= max", f"e.g. {key}={example}")
    require(low <= values[0] and values[1] <= high, key, values, rule, f"e.g. {key}={example}")


def check_search(search) -> None:
    """search.* (bertkit/options.py SearchOptions): each [min, max] range the trials draw from (the trial count
    and batch sizes are ranges pydantic checks)."""
    _check_range(search.learning_rate, "search.learning_rate", 1e-12, 1.0, "above 0 and at most 1",
                 "[2.0e-5,5.0e-5]")
    _check_range(search.epochs, "search.epochs", 1, float("inf"), "whole epochs, at least 1", "[2,4]")
    _check_range(search.warmup, "search.warmup", 0.0, 0.999, "shares of the training steps in [0, 1)", "[0.0,0.1]")
    _check_range(search.llrd, "search.llrd", 1e-12, 1.0, "above 0 and at most 1 (1.0 = no decay)", "[0.8,1.0]")


def check_seed_band(seeds: list[int] | None, searching: bool) -> None:
    """seeds=[...]: two or more distinct seeds (each a `Seed`), and not together with a search (each trial would
    need its own band: trials x seeds runs)."""
    if seeds is None:
        return
    require(len(seeds) >= 2, "seeds", seeds, "two or more seeds (a band; one run takes seed=N)",
            "e.g. seeds=[42,43,44], or seeds=null and seed=42")
    require(len(set(seeds)) == len(seeds), "seeds", seeds, "distinct seeds (a repeated one reruns the same run)",
            "e.g. seeds=[42,43,44]")
    if searching:
        raise ConfigValueError("seeds", "config key 'seeds' cannot go with search.trials (a band per trial is not "
                                        "supported) — search first, then rerun its best settings with seeds=[...] "
                                        "and search.trials=0")


def check_probability(value: float, key: str, fix: str) -> None:
    require(0 < value < 1, key, value, "above 0 and below 1", fix)


# ---------------------------------------------------------------------------------------------- paths


def check_model(name: str, key: str = "model") -> None:
    """A local-looking model path that does not exist, or a directory bertkit cannot fine-tune (another
    architecture, missing weights: checkpoints.check_pretrained). A Hub id is not fetched here; only a folder needs
    transformers to be checked."""
    try:
        if locate_model(name) == "folder":
            from .checkpoints import resolve_model

            resolve_model(name, fetch=False)
    except BertkitError as error:
        raise ConfigValueError(key, f"config key '{key}': {error}") from None


def check_data_file(path: str | None, key: str, hub: bool = True) -> None:
    """A data file that does not exist; with `hub`, a name that looks like a Hub dataset passes (it loads later)."""
    if path is None or os.path.isfile(path):
        return
    if os.path.isdir(path):
        raise ConfigValueError(key, f"config key '{key}': {path} is a folder — point {key} at one data file in it")
    from .datafiles import looks_like_hub_name

    if hub and looks_like_hub_name(str(path)):
        return
    hint = ", or give a Hub dataset name like user/name" if hub else ""
    raise ConfigValueError(key, f"config key '{key}': no such file {path} — check the path{hint}")


def check_resume(resume: bool | str) -> None:
    if isinstance(resume, str) and resume not in ("", "true", "false") and not Path(resume).is_dir():
        raise ConfigValueError("resume", f"config key 'resume': {resume_path_problem(resume)} — give a "
                                         f"checkpoint-* directory, or resume=true for the last one in output_dir")


# ---------------------------------------------------------------------------------------------- train: numbers

def check_precision_keys(train: dict) -> None:
    """train.fp16 / train.bf16 beside the recipe's precision: the run would mix both (or TrainingArguments refuses)."""
    for name in ("fp16", "bf16"):
        if name in train:
            raise ConfigValueError(f"train.{name}", f"config key 'train.{name}' is not accepted: the top-level "
                                                    f"precision decides it (and sets what the device needs) — set "
                                                    f"precision={name} instead")


# Ranges of the TrainingArguments numbers a run cannot work with (None = unset, not checked).
_TRAIN_LIMITS = {
    "learning_rate": Field(gt=0), "weight_decay": Field(ge=0), "warmup_steps": Field(ge=0),
    "gradient_accumulation_steps": Field(ge=1), "per_device_train_batch_size": Field(ge=1),
    "per_device_eval_batch_size": Field(ge=1), "max_grad_norm": Field(ge=0), "logging_steps": Field(gt=0),
    "save_steps": Field(gt=0), "eval_steps": Field(gt=0), "save_total_limit": Field(ge=1),
    "dataloader_num_workers": Field(ge=0),
}


def check_train_numbers(train: dict) -> None:
    """Each train: number in its range (checked by pydantic), and train.max_steps with train.num_train_epochs."""
    for name, limit in _TRAIN_LIMITS.items():
        value = train.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            default = training_fields()[name].default
            with at_key(f"train.{name}"):
                check_value(_number(value), Annotated[float, limit], f"train.{name}", default)
    max_steps = train.get("max_steps", -1)
    require(max_steps == -1 or max_steps > 0, "train.max_steps", max_steps,
            "above 0, or -1 to train for train.num_train_epochs", "e.g. train.max_steps=1000")
    epochs = train.get("num_train_epochs", 3)
    if max_steps == -1:
        require(epochs > 0, "train.num_train_epochs", epochs, "above 0 (or set train.max_steps)",
                "e.g. train.num_train_epochs=3")


# ---------------------------------------------------------------------------------------------- train: combinations


def _strategy(args: dict, name: str, default: str) -> str:
    value = args.get(name, default)
    return str(getattr(value, "value", value))


def check_evaluation(args: dict, has_eval: bool) -> None:
    """Trainer evaluates on a schedule that needs a dev split; without one it stops at its start."""
    strategy = _strategy(args, "eval_strategy", "no")
    if not has_eval and strategy != "no":
        raise ConfigValueError("train.eval_strategy", f"config key 'train.eval_strategy' is {strategy}, but there is "
                                                      "no dev split to evaluate — set data.eval=<file>, or "
                                                      "train.eval_strategy=no")
    if not has_eval and args.get("load_best_model_at_end"):
        raise ConfigValueError("train.load_best_model_at_end", "config key 'train.load_best_model_at_end' needs a "
                               "dev split to pick the best checkpoint — set data.eval=<file>, or "
                               "train.load_best_model_at_end=false")


def check_early_stopping(patience: int | None, args: dict, has_eval: bool) -> None:
    """EarlyStoppingCallback watches the dev metric of the best-model selection: without either it does nothing
    (the recipes used to leave it out silently) or stops the run at its first step."""
    key = "early_stopping_patience"
    if patience is None:
        return
    if not has_eval:
        raise ConfigValueError(key, f"config key '{key}' needs a dev split to watch, and data.eval is not set — set "
                                    f"data.eval=<file>, or remove {key}")
    if _strategy(args, "eval_strategy", "no") == "no":
        raise ConfigValueError(key, f"config key '{key}' needs evaluations, but train.eval_strategy is no — set "
                                    f"train.eval_strategy like train.save_strategy, or remove {key}")
    if not args.get("load_best_model_at_end"):
        raise ConfigValueError(key, f"config key '{key}' needs train.load_best_model_at_end=true (it watches the "
                                    f"best-model metric) — leave train.load_best_model_at_end out, or remove {key}")


def check_best_model(args: dict, train: dict) -> None:
    """load_best_model_at_end (on by default with a dev split) needs every saved checkpoint to be evaluated:
    equal save and eval strategies, and save_steps a multiple of eval_steps."""
    if not args.get("load_best_model_at_end"):
        return
    save, evaluate = _strategy(args, "save_strategy", "steps"), _strategy(args, "eval_strategy", "no")
    why = ("train.load_best_model_at_end=true" if "load_best_model_at_end" in train else
           "a run with data.eval keeps the best checkpoint (train.load_best_model_at_end=true), which")
    if save == "best":
        return
    if save != evaluate:
        key = "train.eval_strategy" if "eval_strategy" in train else "train.save_strategy"
        raise ConfigValueError(key, f"config key '{key}': train.save_strategy={save} and train.eval_strategy="
                                    f"{evaluate} differ, but {why} needs them equal — set train.eval_strategy={save}, "
                                    f"or train.load_best_model_at_end=false")
    save_steps, eval_steps = args.get("save_steps", 500), args.get("eval_steps") or args.get("logging_steps", 500)
    if save == "steps" and save_steps >= 1 and eval_steps >= 1 and save_steps % eval_steps:
        unset = "" if train.get("eval_steps") else " (unset, so train.logging_steps)"
        raise ConfigValueError("train.save_steps", f"config key 'train.save_steps': {_number(save_steps)} is not a "
                               f"multiple of train.eval_steps={_number(eval_steps)}{unset}, but {why} needs every "
                               f"saved checkpoint evaluated — set train.eval_steps={_number(save_steps)}, or "
                               "train.load_best_model_at_end=false")


# train: keys that set up a distributed launcher (its package, e.g. deepspeed, is needed where the run starts, not
# where the config is checked): left out of the TrainingArguments that `bertkit validate` builds.
_LAUNCHER_KEYS = ("deepspeed", "fsdp", "fsdp_config")


def check_training_arguments(cfg) -> None:
    """`bertkit validate`: the run's real TrainingArguments (bertkit's defaults, `train:`, evaluation with a dev
    split, the precision), so that what TrainingArguments itself refuses is said before a run. Only validate
    builds it here: it starts accelerate's process state, which the run's own TrainingArguments would reuse."""
    import transformers

    from .precision import resolve_precision
    from .training_arguments import arguments_refused

    has_eval = cfg.data.eval is not None or hasattr(cfg.data, "eval_fraction")  # mlm holds out a share
    train = {k: v for k, v in cfg.train.items() if k not in _LAUNCHER_KEYS}
    flags, _ = resolve_precision(cfg.run.precision)
    try:
        transformers.TrainingArguments(**trainer_kwargs(train, cfg.run.output_dir, cfg.run.seed, has_eval, None),
                                       **flags)
    except (ValueError, TypeError) as error:
        raise arguments_refused(error) from None


def sets_trainer_arguments(cfg) -> bool:
    """Whether the config's `train:` block or its precision differ from the recipe's defaults: only then does
    `bertkit validate` build the real TrainingArguments (seconds of importing torch and transformers). The defaults
    of every recipe and shipped config are built by the test suite."""
    fields = {f.name: f for f in dataclasses.fields(cfg)}
    if "train" not in fields:  # a recipe whose trainer takes no TrainingArguments (fewshot: setfit's own)
        return False
    train, run = fields["train"].default_factory(), fields["run"].default_factory()
    return cfg.train != train or cfg.run.precision != run.precision


def check_trainer_settings(cfg, has_eval: bool) -> None:
    """The TrainingArguments keywords the recipe will pass (bertkit's defaults, `train:`, evaluation with a dev
    split): the combinations bertkit's own callbacks and best-model selection need."""
    args = trainer_kwargs(cfg.train, cfg.run.output_dir, cfg.run.seed, has_eval, None)
    check_evaluation(args, has_eval)
    check_early_stopping(cfg.tune.early_stopping_patience, args, has_eval)
    check_best_model(args, cfg.train)


# ---------------------------------------------------------------------------------------------- a whole recipe


def check_repeated_training(tune, resume, has_eval: bool) -> None:
    """A search or seed band picks its model on the dev split, and starts every trial / seed afresh (no resume)."""
    key = "search.trials" if tune.search.trials else "seeds" if tune.seeds else None
    if key is None:
        return
    if not has_eval:
        raise ConfigValueError(key, f"config key '{key}' needs a dev split to compare runs on, and data.eval is not "
                                    f"set — set data.eval=<file>, or remove {key}")
    if resume not in (False, None, "", "false"):
        raise ConfigValueError(key, f"config key '{key}' cannot resume (every trial / seed starts from the pretrained "
                                    f"model) — rerun with overwrite=true instead of resume, or remove {key}")


def check_recipe(cfg, has_eval: bool, hub_data: bool = True, model: bool = True) -> None:
    """The checks every recipe shares beyond its options' own (bertkit/options.py): `train:` step counts and
    combinations, the distributed engines' settings (bertkit/distributed.py), early stopping against them, a search
    or seed band against the dev split, and the paths (model unless `model=False`, data files, which may be Hub
    datasets when `hub_data`)."""
    check_repeated_training(cfg.tune, cfg.run.resume, has_eval)
    check_precision_keys(cfg.train)
    check_train_numbers(cfg.train)
    if any(cfg.train.get(key) for key in ("fsdp", "fsdp_config", "deepspeed")):
        from .distributed import check_distributed_config  # torch and transformers: only for a config that shards

        check_distributed_config(cfg.train, cfg.run.precision)
    check_trainer_settings(cfg, has_eval)
    if model:
        check_model(cfg.model)
    check_data_file(cfg.data.train, "data.train", hub_data)
    check_data_file(cfg.data.eval, "data.eval", hub_data)


__all__ = [
    "MIN_MAX_LENGTH", "Seed", "MaxLength", "require", "at_key", "check_search", "check_seed_band",
    "check_repeated_training", "check_probability", "check_model", "check_data_file", "check_resume",
    "check_precision_keys", "check_train_numbers", "check_evaluation", "check_early_stopping",
    "check_best_model", "sets_trainer_arguments", "check_trainer_settings", "check_training_arguments",
    "check_recipe",
]
