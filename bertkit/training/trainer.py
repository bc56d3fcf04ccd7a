"""What every recipe's main does around the fine-tuning Trainer, from its run options and fine-tuning knobs
(bertkit/options.py): start the run, check the model against data.max_length, build the Trainer, merge LoRA, gather
the results, report."""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch
import transformers

from ..console import run_summary
from ..errors import BertkitError
from ..hub import push_finished_run
from ..rundir import METRICS_FILE
from .chosen import choice_rows
from .guards import LossGuard
from .arguments import selection_metric, training_arguments
from .optimizer import check_optimizer, optimizer_with_llrd
from .run import start_run


def begin(cfg, recipe: str) -> float:
    """The first line of every main: seed, hold output_dir (start_run: an old run there is refused unless
    overwrite=true); returns the start time `results` measures the wall time from."""
    started = time.perf_counter()
    transformers.set_seed(cfg.run.seed)
    start_run(cfg, recipe)
    return started


def check_positions(max_length: int, config) -> None:
    """Refuse a data.max_length longer than the model's position table, before its weights are loaded."""
    if max_length > config.max_position_embeddings:
        raise BertkitError(f"data.max_length={max_length} is more than the model's "
                           f"{config.max_position_embeddings} positions — set data.max_length<="
                           f"{config.max_position_embeddings}")


class FineTuningTrainer(transformers.Trainer):
    """transformers.Trainer whose optimizer is bertkit's AdamW with layer-wise learning-rate decay, built when
    training starts rather than handed in: a Trainer with `model_init` (a search's trials rebuild the model) cannot
    take `optimizers=`, and each new model needs its own parameter groups."""

    def __init__(self, *args, llrd: float = 1.0, head_lr: float | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        check_optimizer(self.args, llrd, head_lr)  # now, not when training starts and an old run is gone
        self.llrd, self.head_lr = llrd, head_lr
        self.add_callback(LossGuard(self))  # a NaN / exploding loss stops the run: no completion record (guards.py)

    def create_optimizer(self, model=None):
        if self.optimizer is None:
            self.optimizer = optimizer_with_llrd(self.model if model is None else model, self.args, self.llrd,
                                                 self.head_lr)
        return self.optimizer if self.optimizer is not None else super().create_optimizer(model)

    def _report_to_hp_search(self, trial, step, metrics):
        # A search's trials differ in batch size, so the same global step is a different point of training in each:
        # number the reports by evaluation, so that the pruner compares trials after the same share of training.
        evaluations = sum(1 for entry in self.state.log_history if "eval_runtime" in entry)
        return super()._report_to_hp_search(trial, evaluations, metrics)


def several_trainings(cfg) -> bool:
    """Whether cfg asks for a search (search.trials) or a seed band (seeds): several trainings on one Trainer, so
    a callback that remembers things by step would mix them up."""
    tune = getattr(cfg, "tune", None)
    return tune is not None and bool(tune.search.trials or tune.seeds)


def _model_and_init(cfg, model, model_init=None) -> tuple:
    """(model, model_init) for Trainer, from a model or a function building one (or both): a search or seed band
    hands Trainer the function (it rebuilds the model for each trial / seed, seeded first); one training, the
    model."""
    builder = model_init or (None if isinstance(model, torch.nn.Module) else model)
    if builder is not None and several_trainings(cfg):
        return None, builder
    if isinstance(model, torch.nn.Module):
        return model, None
    transformers.set_seed(cfg.run.seed)  # as Trainer seeds before a model_init: the new head drawn from the seed
    return model(), None


def fine_tuning_trainer(cfg, model, tokenizer, train, dev, selection: str | None, compute_metrics=None,
                        data_collator=None, trainer_class=FineTuningTrainer, model_init=None,
                        **trainer_options) -> tuple[transformers.Trainer, str | None]:
    """A Trainer of `model` (the model, or a function of no arguments building a fresh one: what search.trials and
    seeds need; or the model and such a function as `model_init`, for a recipe that uses the model it built) over
    `train` (and `dev`, evaluated each epoch), from `cfg.train` and `cfg.run`: AdamW with layer-wise learning-rate
    decay (`cfg.tune.llrd`, `cfg.tune.head_lr`), early stopping after `cfg.tune.early_stopping_patience`
    evaluations without gain. `selection` is the task's metric for the best checkpoint; returned with the trainer is
    the one in force (train.metric_for_best_model may name another)."""
    args = training_arguments(cfg.train, cfg.run.output_dir, cfg.run.precision, cfg.run.seed, dev is not None,
                              selection)
    callbacks = list(trainer_options.pop("callbacks", []))
    if cfg.tune.early_stopping_patience and dev is not None:
        callbacks.append(transformers.EarlyStoppingCallback(early_stopping_patience=cfg.tune.early_stopping_patience))
    model, model_init = _model_and_init(cfg, model, model_init)
    trainer = trainer_class(
        model=model, model_init=model_init, args=args, train_dataset=train, eval_dataset=dev,
        processing_class=tokenizer, data_collator=data_collator or transformers.DataCollatorWithPadding(tokenizer),
        compute_metrics=compute_metrics, callbacks=callbacks, llrd=cfg.tune.llrd, head_lr=cfg.tune.head_lr,
        **trainer_options)
    return trainer, selection_metric(args, selection)


def merge_lora(trainer: transformers.Trainer, lora) -> None:
    """Before the final model is saved: LoRA adapters merged into the weights when lora.merge says so."""
    if lora.enabled and lora.merge:
        trainer.model = trainer.model.merge_and_unload()


def results(metrics: dict, train_result, started: float, **entries) -> dict:
    """A run's results (metrics.json, and what main returns): dev metrics, training loss and metrics, the recipe's
    own `entries`, how a search or seed band chose the model (`search` / `seeds`, run_trainer), and the wall time
    since `started` (begin)."""
    return {"eval": metrics, "train": {"loss": train_result.training_loss, **train_result.metrics}, **entries,
            **getattr(train_result, "choice", {}), "wall_time_s": round(time.perf_counter() - started, 1)}


def report(cfg, recipe: str, title: str, rows: dict, output_dir: Path) -> None:
    """The end of every run: the summary table with the next commands, then the push (cfg.run.push) of the finished
    run directory. After a search or seed band (metrics.json's `search` / `seeds`), the rows say how the model was
    chosen: the best trial and its settings, or each dev metric as mean ± sd over the seeds."""
    rows = choice_rows(rows, _read_choice(Path(output_dir) / METRICS_FILE))
    run_summary(title, {**rows, "saved to": str(output_dir)}, output_dir, recipe)
    if cfg.run.push:
        push_finished_run(output_dir, cfg.run.push)


def _read_choice(path: Path) -> dict:
    """metrics.json's `search` / `seeds` entry ({} for one training, or where rank 0 wrote none)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {key: data[key] for key in ("search", "seeds") if isinstance(data, dict) and key in data}


__all__ = ["begin", "check_positions", "FineTuningTrainer", "several_trainings", "fine_tuning_trainer", "merge_lora",
           "results", "report"]
