"""TrainingArguments of a run: bertkit's defaults, the config's `train:` block over them, the precision resolved
against the hardware, and the dev metric that selects the best checkpoint."""

from __future__ import annotations

import transformers

from ..console import mode, say
from ..precision import resolve_precision


def training_arguments(train: dict, output_dir: str, precision: str, seed: int, has_eval: bool,
                       metric_for_best: str | None, greater_is_better: bool = True) -> transformers.TrainingArguments:
    """TrainingArguments from the config's `train:` block, plus what the recipe decides: precision, seed,
    evaluation and checkpoint each epoch with best-model selection when there is a dev split."""
    flags, message = resolve_precision(precision)
    say(message)
    args = {**trainer_kwargs(train, output_dir, seed, has_eval, metric_for_best, greater_is_better), **flags}
    args.setdefault("disable_tqdm", mode() != "verbose")  # bertkit's display instead (console.use_display)
    if has_eval and args.get("dataloader_drop_last"):
        say("warning: train.dataloader_drop_last=true drops the dev set's last incomplete batch too (Trainer "
            "has one setting for both): dev metrics leave out up to per_device_eval_batch_size - 1 examples "
            "per process")
    return transformers.TrainingArguments(**args)


def trainer_kwargs(train: dict, output_dir: str, seed: int, has_eval: bool, metric_for_best: str | None,
                   greater_is_better: bool = True) -> dict:
    """The TrainingArguments keywords of a run, precision aside: bertkit's defaults, the `train:` block over them,
    and with a dev split evaluation on the save schedule and best-model selection. Pure, so that `bertkit validate`
    (bertkit/checks.py) checks the very settings `training_arguments` passes on."""
    args = {"output_dir": output_dir, "seed": seed, "report_to": "none", "logging_strategy": "steps",
            "logging_steps": 10, "save_strategy": "epoch", "save_total_limit": 2,
            # a NaN step shows in the logged loss, where LossGuard (guards.py) stops the run; Trainer's filter would
            # log the mean of the finite steps instead, or 0.0 when every step of the window is NaN
            "logging_nan_inf_filter": False, **train}
    if has_eval:
        args.setdefault("eval_strategy", args["save_strategy"])
        args.setdefault("load_best_model_at_end", True)
        if metric_for_best and "metric_for_best_model" not in train:  # else TrainingArguments' default direction
            args["metric_for_best_model"] = metric_for_best  # (higher is better unless the name ends in loss)
            args.setdefault("greater_is_better", greater_is_better)
    return args


def selection_metric(args: transformers.TrainingArguments, default: str | None) -> str | None:
    """The dev metric that picks the best checkpoint: the recipe's `default` unless train.metric_for_best_model
    overrides it (without Trainer's eval_ prefix)."""
    return args.metric_for_best_model.removeprefix("eval_") if args.metric_for_best_model else default


__all__ = ["training_arguments", "trainer_kwargs", "selection_metric"]
