"""A seed band (`seeds=[42,43,44]`): the same training once per seed (a fresh model from the recipe's model_init,
its new head and the data order drawn from that seed), each seed's dev metrics, their mean and sample standard
deviation, and the best seed's model kept as `trainer.model` (with `trainer.args.seed` its seed), so the recipe
carries on as after one training; the band goes into metrics.json (`seeds`).

Each seed trains in `output_dir/seed-S`, removed when it ends; a killed band may leave one, which `overwrite=true`
clears (bertkit/rundir.py RUN_FOLDERS)."""

from __future__ import annotations

import statistics
from pathlib import Path

import transformers
from rich.table import Table

from ..console import say, show
from .chosen import Keeper, chosen_output, dev_metrics, ranking_metric, remove_folder, reset_early_stopping, score_of


def seed_folder(seed: int) -> str:
    return f"seed-{seed}"


def run_seeds(trainer: transformers.Trainer, seeds: list[int]) -> transformers.trainer_utils.TrainOutput:
    """One training per seed on `trainer`; the best seed's model and state left on it; returns its TrainOutput,
    with the band as `choice["seeds"]`."""
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


__all__ = ["run_seeds", "seed_band", "show_band", "seed_folder"]
