"""The fine-tuning Trainer every recipe builds, from its run options and fine-tuning knobs (bertkit/options.py)."""

from __future__ import annotations

from pathlib import Path

import transformers

from ..console import run_summary
from ..hub import push_finished_run
from .arguments import selection_metric, training_arguments
from .optimizer import optimizer_with_llrd


def fine_tuning_trainer(cfg, model, tokenizer, train, dev, selection: str | None, compute_metrics=None,
                        data_collator=None, trainer_class=transformers.Trainer,
                        **trainer_options) -> tuple[transformers.Trainer, str | None]:
    """A Trainer over `train` (and `dev`, evaluated each epoch), from `cfg.train` and `cfg.run`: AdamW with layer-wise
    learning-rate decay (`cfg.tune.llrd`, `cfg.tune.head_lr`), early stopping after `cfg.tune.early_stopping_patience`
    evaluations without gain. `selection` is the task's metric for the best checkpoint; returned with the trainer is
    the one in force (train.metric_for_best_model may name another)."""
    args = training_arguments(cfg.train, cfg.run.output_dir, cfg.run.precision, cfg.run.seed, dev is not None,
                              selection)
    callbacks = list(trainer_options.pop("callbacks", []))
    if cfg.tune.early_stopping_patience and dev is not None:
        callbacks.append(transformers.EarlyStoppingCallback(early_stopping_patience=cfg.tune.early_stopping_patience))
    trainer = trainer_class(
        model=model, args=args, train_dataset=train, eval_dataset=dev, processing_class=tokenizer,
        data_collator=data_collator or transformers.DataCollatorWithPadding(tokenizer),
        compute_metrics=compute_metrics, callbacks=callbacks,
        optimizers=(optimizer_with_llrd(model, args, cfg.tune.llrd, cfg.tune.head_lr), None), **trainer_options)
    return trainer, selection_metric(args, selection)


def report(cfg, recipe: str, title: str, rows: dict, output_dir: Path) -> None:
    """The end of every run: the summary table with the next commands, then the push (cfg.run.push) of the finished
    run directory."""
    run_summary(title, {**rows, "saved to": str(output_dir)}, output_dir, recipe)
    if cfg.run.push:
        push_finished_run(output_dir, cfg.run.push)


__all__ = ["fine_tuning_trainer", "report"]
