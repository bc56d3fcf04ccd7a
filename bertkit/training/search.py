"""Hyperparameter search (`search.trials=N`): `Trainer.hyperparameter_search` with Optuna (TPE, seeded by the run's
seed) over the ranges of `search.*` (bertkit/options.py SearchOptions: learning rate on a log scale, batch size,
epochs, warmup, llrd), trials below the median of the finished ones pruned at an evaluation (`search.pruning`). The
best trial's model (its best checkpoint) becomes `trainer.model` and its settings `trainer.args` / `trainer.llrd`,
so the recipe carries on as after one training; the trials table is printed and goes into metrics.json (`search`).

Trials train in `output_dir/trial-N` (Trainer's folder per trial), removed as each trial ends; a killed search may
leave one, which `overwrite=true` clears (bertkit/rundir.py RUN_FOLDERS). optuna is imported only here, when a
search runs."""

from __future__ import annotations

from pathlib import Path

import transformers
from rich.table import Table

from ..console import say, show
from ..errors import BertkitError
from .chosen import (SHORT_NAMES, Keeper, chosen_output, output_from_state, ranking_metric, remove_folder,
                     reset_early_stopping, score_of, settings_text)

STUDY_NAME = "bertkit"


def load_optuna():
    try:
        import optuna
    except ImportError:
        raise BertkitError("search.trials needs optuna, which is not installed — "
                           "pip install 'bertkit[search]'") from None
    return optuna


def trial_folder(trial) -> str:
    return f"trial-{trial.number}"


def hp_space_fn(trainer: transformers.Trainer, search):
    """Optuna's search space over `search.*`, as TrainingArguments fields Trainer sets on its args per trial;
    llrd is none (Trainer would skip it with a warning), so it goes to the trainer, whose create_optimizer reads it
    after this runs. Epochs are not searched under train.max_steps, which would override every trial's epochs."""
    fixed_steps = trainer.args.max_steps > 0

    def hp_space(trial) -> dict:
        params = {"learning_rate": trial.suggest_float("learning_rate", *search.learning_rate, log=True),
                  "per_device_train_batch_size": trial.suggest_categorical("per_device_train_batch_size",
                                                                           list(search.batch_sizes))}
        if not fixed_steps:
            params["num_train_epochs"] = trial.suggest_int("num_train_epochs", *search.epochs)
        params["warmup_steps"] = trial.suggest_float("warmup_steps", *search.warmup)
        trainer.llrd = trial.suggest_float("llrd", *search.llrd)
        return params

    return hp_space


class TrialWatch(transformers.TrainerCallback):
    """Per trial: the objective (the best dev score so far when the best checkpoint is kept at the end, so that it
    is the kept model's score; else the last), and at the trial's end its model offered to the `Keeper` (unless
    pruned) and its folder removed."""

    def __init__(self, trainer: transformers.Trainer, keeper: Keeper, key: str):
        self.trainer, self.keeper, self.key = trainer, keeper, key
        self.best_in_trial: float | None = None

    def objective(self, metrics: dict) -> float:
        value = score_of(metrics, self.key)
        if self.trainer.args.load_best_model_at_end and self.best_in_trial is not None:
            better = max if self.keeper.greater_is_better else min
            value = better(value, self.best_in_trial)
        self.best_in_trial = value
        return value

    def on_train_begin(self, args, state, control, **kwargs):
        self.best_in_trial = None
        reset_early_stopping(self.trainer)

    def on_train_end(self, args, state, control, **kwargs):
        trial = self.trainer._trial
        if trial is None or self.trainer.hp_search_backend is None:
            return
        # Trainer calls on_train_end before it raises TrialPruned too: a pruned trial is not kept
        if self.best_in_trial is not None and not trial.should_prune():
            self.keeper.offer(self.best_in_trial, trial.number, self.trainer, output_from_state(state))
        remove_folder(Path(args.output_dir) / trial_folder(trial))


def run_search(trainer: transformers.Trainer, cfg) -> transformers.trainer_utils.TrainOutput:
    """cfg.tune.search.trials trials through trainer.hyperparameter_search; the best trial's model, state and
    settings left on `trainer`; returns its TrainOutput, with the trials as `choice["search"]`."""
    optuna, search = load_optuna(), cfg.tune.search
    key, greater = ranking_metric(trainer.args)
    keeper = Keeper(greater)
    watch = TrialWatch(trainer, keeper, key)
    trainer.add_callback(watch)
    storage = optuna.storages.InMemoryStorage()  # so that the study, and every trial of it, can be read back
    pruner = (optuna.pruners.MedianPruner(n_startup_trials=1, n_warmup_steps=0) if search.pruning
              else optuna.pruners.NopPruner())
    say(f"search: {search.trials} trials over {settings_text(space_text(search, trainer.args.max_steps))}, "
        f"ranked by dev "
        f"{key.removeprefix('eval_')}{', pruning below the median' if search.pruning else ''}")
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # bertkit prints the trials table instead
    trainer.hyperparameter_search(
        hp_space=hp_space_fn(trainer, search), compute_objective=watch.objective, n_trials=search.trials,
        direction="maximize" if greater else "minimize", backend="optuna", hp_name=trial_folder,
        sampler=optuna.samplers.TPESampler(seed=cfg.run.seed), pruner=pruner, storage=storage,
        study_name=STUDY_NAME)
    trainer.remove_callback(watch)
    trials = trial_rows(optuna.load_study(study_name=STUDY_NAME, storage=storage), optuna)
    output = keeper.restore(trainer)
    best = next(trial for trial in trials if trial["number"] == keeper.label)
    apply_settings(trainer, best["params"])
    show_trials(trials, best["number"], key.removeprefix("eval_"))
    return chosen_output(output, {"search": {"metric": key.removeprefix("eval_"),
                                             "direction": "maximize" if greater else "minimize",
                                             "pruning": search.pruning, "trials": trials, "best": best}})


def space_text(search, max_steps: int) -> dict:
    epochs = (f"{search.epochs[0]}..{search.epochs[1]}" if max_steps <= 0
              else f"not searched (train.max_steps={max_steps})")
    return {"learning_rate": f"{search.learning_rate[0]:.3g}..{search.learning_rate[1]:.3g}",
            "per_device_train_batch_size": "/".join(map(str, search.batch_sizes)),
            "num_train_epochs": epochs,
            "warmup_steps": f"{search.warmup[0]:g}..{search.warmup[1]:g}",
            "llrd": f"{search.llrd[0]:g}..{search.llrd[1]:g}"}


def trial_rows(study, optuna) -> list[dict]:
    """Each trial: number, state (complete / pruned / failed), params, objective (a pruned trial's: its last
    report), evaluations reported."""
    states = {optuna.trial.TrialState.COMPLETE: "complete", optuna.trial.TrialState.PRUNED: "pruned"}
    rows = []
    for trial in study.trials:
        reports = trial.intermediate_values
        objective = trial.value if trial.value is not None else (reports[max(reports)] if reports else None)
        rows.append({"number": trial.number, "state": states.get(trial.state, trial.state.name.lower()),
                     "params": dict(trial.params), "objective": objective, "evaluations": len(reports)})
    return rows


def apply_settings(trainer: transformers.Trainer, params: dict) -> None:
    """The best trial's settings on the trainer (trainer.args as saved in training_args.bin, and llrd), typed as
    Trainer types them per trial."""
    for name, value in params.items():
        if name == "llrd":
            trainer.llrd = value
            continue
        old = getattr(trainer.args, name)
        setattr(trainer.args, name, type(old)(value) if old is not None else value)


def show_trials(trials: list[dict], best: int, metric: str) -> None:
    """The trials table: one row per trial, its settings and dev score, the kept one marked."""
    table = Table(box=None, pad_edge=False, padding=(0, 2, 0, 0), header_style="dim",
                  title=f"search: {len(trials)} trials, dev {metric}", title_justify="left")
    names = list(SHORT_NAMES)
    for column in ("trial", "state", *(SHORT_NAMES[name] for name in names), metric):
        table.add_column(column, justify="left" if column in ("trial", "state") else "right")
    for trial in trials:
        cells = [f"{value:.3g}" if isinstance(value, float) else str(value)
                 for value in (trial["params"].get(name, "") for name in names)]
        score = "" if trial["objective"] is None else f"{trial['objective']:.4f}"
        mark = " (kept)" if trial["number"] == best else ""
        table.add_row(f"#{trial['number']}{mark}", trial["state"], *cells, score)
    show(table, "summary")


__all__ = ["run_search", "load_optuna", "hp_space_fn", "TrialWatch", "trial_rows", "apply_settings", "show_trials",
           "trial_folder"]
