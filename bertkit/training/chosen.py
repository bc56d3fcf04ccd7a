"""The run kept out of several trainings on one Trainer (a search's trials, a seed band's seeds): which dev metric
ranks them, the best one's weights, TrainerState and TrainOutput held while the others train (`Keeper`), and how it
was chosen, as metrics.json's `search` / `seeds` entry (`ChosenOutput.choice`) and as summary-table rows
(`choice_rows`)."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import transformers
from transformers.trainer_utils import TrainOutput

from ..errors import BertkitError

# What Trainer's evaluate returns beside the metrics: timing, which says nothing about the model.
NOT_METRICS = ("runtime", "samples_per_second", "steps_per_second", "epoch")


class ChosenOutput(TrainOutput):
    """The chosen trial's / seed's TrainOutput; `choice` is the metrics.json entry saying how it was chosen
    (`results` in trainer.py merges it in)."""


def ranking_metric(args: transformers.TrainingArguments) -> tuple[str, bool]:
    """The dev metric that ranks trials and seeds, as evaluate() names it, and whether higher is better: the one that
    picks the best checkpoint (train.metric_for_best_model, else the recipe's), eval_loss when there is none."""
    name = args.metric_for_best_model
    if not name:
        return "eval_loss", False
    return (name if name.startswith("eval_") else f"eval_{name}"), bool(args.greater_is_better)


def dev_metrics(metrics: dict) -> dict:
    """evaluate()'s numbers without the eval_ prefix and the timing."""
    return {key.removeprefix("eval_"): value for key, value in metrics.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool)
            and key.removeprefix("eval_") not in NOT_METRICS}


def score_of(metrics: dict, key: str) -> float:
    if key not in metrics:
        raise BertkitError(f"the dev evaluation has no {key} to rank runs by (it has {', '.join(sorted(metrics))}) "
                           f"— set train.metric_for_best_model to one of those")
    return float(metrics[key])


class Keeper:
    """The best of several trainings so far: its weights (copied to the CPU, the next training replaces the
    model), TrainerState (log history for the curve and `bertkit diagnose`), TrainOutput, label and score."""

    def __init__(self, greater_is_better: bool):
        self.greater_is_better = greater_is_better
        self.score: float | None = None
        self.label = None
        self._weights = self._state = self._output = None

    def beats(self, score: float) -> bool:
        if self.score is None:
            return True
        return score > self.score if self.greater_is_better else score < self.score

    def offer(self, score: float, label, trainer: transformers.Trainer, output: TrainOutput) -> None:
        """Keep this training (trainer.model as it is now: its best checkpoint, when load_best_model_at_end)
        if it beats the one kept."""
        if not self.beats(score):
            return
        self.score, self.label, self._output = score, label, output
        self._weights = {name: tensor.detach().to("cpu", copy=True)
                         for name, tensor in trainer.model.state_dict().items()}
        self._state = copy.deepcopy(trainer.state)

    def restore(self, trainer: transformers.Trainer) -> TrainOutput:
        """trainer.model becomes a fresh model_init() model carrying the kept weights, trainer.state the kept
        training's; returns its TrainOutput."""
        if self._weights is None:
            raise BertkitError("no trial finished (every one was pruned or failed) — run more search.trials, or "
                               "set search.pruning=false")
        model = trainer.call_model_init()
        model.load_state_dict(self._weights)
        trainer.model = trainer.model_wrapped = model.to(trainer.args.device)
        trainer.state = self._state
        return self._output


def output_from_state(state: transformers.TrainerState) -> TrainOutput:
    """A training's TrainOutput from its last log entry (Trainer logs the train metrics just before on_train_end;
    a search's trials return none we can reach)."""
    last = next((entry for entry in reversed(state.log_history) if "train_loss" in entry), {})
    return TrainOutput(state.global_step, last.get("train_loss", float("nan")),
                       {key: value for key, value in last.items() if key != "step"})


def chosen_output(output: TrainOutput, choice: dict) -> ChosenOutput:
    chosen = ChosenOutput(*output)
    chosen.choice = choice
    return chosen


def reset_early_stopping(trainer: transformers.Trainer) -> None:
    """A new training on the same Trainer starts with no evaluations without gain: EarlyStoppingCallback keeps its
    count across train() calls, so the next trial / seed would stop early on the last one's count."""
    for callback in trainer.callback_handler.callbacks:
        if isinstance(callback, transformers.EarlyStoppingCallback):
            callback.early_stopping_patience_counter = 0


def remove_folder(path: Path) -> None:
    """A trial's / seed's checkpoints, once it is over: only the kept model (in memory) matters."""
    shutil.rmtree(path, ignore_errors=True)


def _band(mean: float, sd: float, count: int) -> str:
    return f"{mean:.3f} ± {sd:.3f} ({count} seeds)"


def choice_rows(rows: dict, choice: dict) -> dict:
    """The summary table's rows for a search (its best trial and settings) or a seed band (each dev metric as
    mean ± sd, and the kept seed), before the wall time."""
    added = {}
    if "seeds" in choice:
        band = choice["seeds"]
        count = len(band["runs"])
        rows = {name: _band(band["mean"][name], band["sd"][name], count) if name in band["mean"] else value
                for name, value in rows.items()}
        added = {"kept seed": f"{band['best_seed']} (best {band['metric']})"}
    elif "search" in choice:
        search = choice["search"]
        pruned = sum(trial["state"] == "pruned" for trial in search["trials"])
        best = search["best"]
        added = {"best trial": f"#{best['number']} of {len(search['trials'])} ({pruned} pruned), "
                               f"{search['metric']} {best['objective']:.4f}",
                 "best settings": settings_text(best["params"])}
    timing = {name: value for name, value in rows.items() if name == "wall time (s)"}
    return {**{name: value for name, value in rows.items() if name not in timing}, **added, **timing}


SHORT_NAMES = {"learning_rate": "lr", "per_device_train_batch_size": "batch", "num_train_epochs": "epochs",
               "warmup_steps": "warmup", "llrd": "llrd"}


def settings_text(params: dict) -> str:
    return ", ".join(f"{SHORT_NAMES.get(name, name)} {value:.3g}" if isinstance(value, float) else
                     f"{SHORT_NAMES.get(name, name)} {value}" for name, value in params.items())


__all__ = ["ChosenOutput", "Keeper", "ranking_metric", "dev_metrics", "score_of", "output_from_state",
           "chosen_output", "reset_early_stopping", "remove_folder", "choice_rows", "settings_text", "SHORT_NAMES",
           "NOT_METRICS"]
