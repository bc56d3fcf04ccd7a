"""Several trainings on one Trainer, the best kept: a hyperparameter search (`search.trials=N`) or a seed band
(`seeds=[42,43,44]`). Either way the chosen run's model (its best checkpoint) becomes `trainer.model`, so the recipe
carries on as after one training, and how it was chosen goes into metrics.json (`search` / `seeds`) and the summary
table.

What both share: which dev metric ranks the runs, the best one's weights, TrainerState and TrainOutput held while the
others train (`Keeper`), and how it was chosen, as metrics.json's entry (`ChosenOutput.choice`) and as summary-table
rows (`choice_rows`).

The search: `Trainer.hyperparameter_search` with Optuna (TPE, seeded by the run's seed) over the ranges of `search.*`
(bertkit/options.py SearchOptions: learning rate on a log scale, batch size, epochs, warmup, llrd), trials below the
median of the finished ones pruned at an evaluation (`search.pruning`; the pruner numbers a trial's reports by
evaluation, not by global step: trials differ in batch size, so the same step is a different point of training in
each). The best trial's settings go to
`trainer.args` / `trainer.llrd`; the trials table is printed. Trials train in `output_dir/trial-N` (Trainer's folder
per trial), removed as each trial ends (kept with keep_checkpoints=true). optuna is imported only here, when a
search runs.

The seed band: the same training once per seed (a fresh model from the recipe's model_init, its new head and the data
order drawn from that seed), each seed's dev metrics, their mean and sample standard deviation, and the best seed's
model kept (with `trainer.args.seed` its seed). Each seed trains in `output_dir/seed-S`, removed when it ends (kept
with keep_checkpoints=true).

A killed search or band may leave a trial-N / seed-S folder, which `overwrite=true` clears (bertkit/rundir.py
RUN_FOLDERS)."""

from __future__ import annotations

import copy
import shutil
import statistics
from pathlib import Path

import transformers
from rich.table import Table
from transformers.trainer_utils import TrainOutput

from .console import say, show
from .errors import BertkitError

# What Trainer's evaluate returns beside the metrics: timing, which says nothing about the model.
NOT_METRICS = ("runtime", "samples_per_second", "steps_per_second", "epoch")


class ChosenOutput(TrainOutput):
    """The chosen trial's / seed's TrainOutput; `choice` is the metrics.json entry saying how it was chosen
    (`Run.results` in bertkit/training.py merges it in)."""


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


def search_or_seeds(trainer: transformers.Trainer, cfg) -> TrainOutput:
    """What a recipe calls instead of trainer.train() when cfg asks for several trainings: the search
    (search.trials) or the seed band (seeds); the chosen run's model is left on `trainer`."""
    if cfg.tune.search.trials:
        return run_search(trainer, cfg)
    return run_seeds(trainer, cfg.tune.seeds, keep=cfg.run.keep_checkpoints)


def by_evaluation(trial) -> list[float]:
    """A trial's reports in the order they came, one per evaluation (Trainer reports each at its global step)."""
    return [value for _, value in sorted(trial.intermediate_values.items())]


def evaluation_median_pruner(optuna, n_startup_trials: int = 1):
    """Optuna's median rule over evaluations rather than steps: a trial is pruned when its best report so far is
    worse than the median of the finished trials' reports at the same evaluation. Trials differ in batch size, so a
    global step is a different point of training in each; the k-th evaluation is the same share of an epoch."""
    import numpy as np

    class EvaluationMedianPruner(optuna.pruners.BasePruner):
        def prune(self, study, trial) -> bool:
            reports = by_evaluation(trial)
            finished = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
            if not reports or len(finished) < n_startup_trials:
                return False
            maximize = study.direction == optuna.study.StudyDirection.MAXIMIZE
            best = (np.nanmax if maximize else np.nanmin)(reports) if not np.all(np.isnan(reports)) else float("nan")
            if np.isnan(best):
                return True
            same_point = [values[len(reports) - 1] for values in map(by_evaluation, finished)
                          if len(values) >= len(reports)]
            if not same_point or np.all(np.isnan(same_point)):
                return False
            median = float(np.nanmedian(same_point))
            return best < median if maximize else best > median

    return EvaluationMedianPruner()


def hp_space_fn(trainer: transformers.Trainer, search, watch: "TrialWatch | None" = None):
    """Optuna's search space over `search.*`, as TrainingArguments fields Trainer sets on its args per trial;
    llrd is none (Trainer would skip it with a warning), so it goes to the trainer, whose create_optimizer reads it
    after this runs. Epochs are not searched under train.max_steps, which would override every trial's epochs."""
    fixed_steps = trainer.args.max_steps > 0

    def hp_space(trial) -> dict:
        if watch is not None:
            watch.trial = trial  # the trial now training (Trainer calls hp_space as it starts one)
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

    def __init__(self, trainer: transformers.Trainer, keeper: Keeper, key: str, keep: bool = False):
        self.trainer, self.keeper, self.key = trainer, keeper, key
        self.keep = keep  # keep_checkpoints=true: the trial's folder stays
        self.best_in_trial: float | None = None
        self.trial = None  # set by hp_space_fn's hp_space

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
        trial = self.trial
        if trial is None or self.trainer.hp_search_backend is None:
            return
        # Trainer calls on_train_end before it raises TrialPruned too: a pruned trial is not kept
        if self.best_in_trial is not None and not trial.should_prune():
            self.keeper.offer(self.best_in_trial, trial.number, self.trainer, output_from_state(state))
        if not self.keep:
            remove_folder(Path(args.output_dir) / trial_folder(trial))


def run_search(trainer: transformers.Trainer, cfg) -> transformers.trainer_utils.TrainOutput:
    """cfg.tune.search.trials trials through trainer.hyperparameter_search; the best trial's model, state and
    settings left on `trainer`; returns its TrainOutput, with the trials as `choice["search"]`."""
    optuna, search = load_optuna(), cfg.tune.search
    key, greater = ranking_metric(trainer.args)
    keeper = Keeper(greater)
    watch = TrialWatch(trainer, keeper, key, keep=cfg.run.keep_checkpoints)
    trainer.add_callback(watch)
    storage = optuna.storages.InMemoryStorage()  # so that the study, and every trial of it, can be read back
    pruner = evaluation_median_pruner(optuna) if search.pruning else optuna.pruners.NopPruner()
    say(f"search: {search.trials} trials over {settings_text(space_text(search, trainer.args.max_steps))}, "
        f"ranked by dev "
        f"{key.removeprefix('eval_')}{', pruning below the median' if search.pruning else ''}")
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # bertkit prints the trials table instead
    trainer.hyperparameter_search(
        hp_space=hp_space_fn(trainer, search, watch), compute_objective=watch.objective, n_trials=search.trials,
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


def seed_folder(seed: int) -> str:
    return f"seed-{seed}"


def run_seeds(trainer: transformers.Trainer, seeds: list[int], keep: bool = False
              ) -> transformers.trainer_utils.TrainOutput:
    """One training per seed on `trainer`; the best seed's model and state left on it; returns its TrainOutput,
    with the band as `choice["seeds"]`. Each seed's folder is removed when it ends, unless `keep`
    (keep_checkpoints=true)."""
    key, greater = ranking_metric(trainer.args)
    keeper = Keeper(greater)
    root, runs = trainer.args.output_dir, []
    say(f"seed band: {len(seeds)} trainings (seeds {', '.join(map(str, seeds))}), the best dev "
        f"{key.removeprefix('eval_')} kept")
    try:
        for seed in seeds:
            trainer.args.seed = seed  # Trainer seeds everything with it before calling model_init
            trainer.args.output_dir = str(Path(root) / seed_folder(seed))
            reset_early_stopping(trainer)
            output = trainer.train()
            logged = len(trainer.state.log_history)
            metrics = trainer.evaluate()  # the model train() ended with: its best checkpoint
            del trainer.state.log_history[logged:]  # the curve and `bertkit diagnose` show the training's own
            runs.append({"seed": seed, "eval": dev_metrics(metrics)})
            keeper.offer(score_of(metrics, key), seed, trainer, output)
            if not keep:
                remove_folder(Path(trainer.args.output_dir))
    finally:
        trainer.args.output_dir = root
    output = keeper.restore(trainer)
    trainer.args.seed = keeper.label
    band = seed_band(runs, key.removeprefix("eval_"), keeper.label)
    show_band(band)
    return chosen_output(output, {"seeds": band})


def seed_band(runs: list[dict], metric: str, best_seed: int) -> dict:
    """metrics.json's `seeds` entry: each seed's dev metrics, the mean and sample standard deviation (n - 1) of
    every metric all seeds have, and the kept seed."""
    shared = [name for name in runs[0]["eval"] if all(name in run["eval"] for run in runs)]
    values = {name: [float(run["eval"][name]) for run in runs] for name in shared}
    return {"metric": metric, "runs": runs, "mean": {name: statistics.fmean(v) for name, v in values.items()},
            "sd": {name: statistics.stdev(v) for name, v in values.items()}, "best_seed": best_seed}


def show_band(band: dict) -> None:
    """Each seed's ranking metric and the band, the kept seed marked."""
    metric = band["metric"]
    table = Table(box=None, pad_edge=False, padding=(0, 2, 0, 0), header_style="dim",
                  title=f"seed band: dev {metric}", title_justify="left")
    table.add_column("seed")
    table.add_column(metric, justify="right")
    for run in band["runs"]:
        mark = " (kept)" if run["seed"] == band["best_seed"] else ""
        table.add_row(f"{run['seed']}{mark}", f"{run['eval'][metric]:.4f}")
    table.add_row("mean ± sd", f"{band['mean'][metric]:.4f} ± {band['sd'][metric]:.4f}")
    show(table, "summary")


__all__ = ["ChosenOutput", "Keeper", "ranking_metric", "dev_metrics", "score_of", "output_from_state",
           "chosen_output", "reset_early_stopping", "remove_folder", "choice_rows", "settings_text", "SHORT_NAMES",
           "NOT_METRICS", "search_or_seeds", "by_evaluation", "evaluation_median_pruner",
           "run_search", "load_optuna", "hp_space_fn", "TrialWatch", "trial_rows", "apply_settings",
           "show_trials", "trial_folder", "run_seeds", "seed_band", "show_band", "seed_folder"]
