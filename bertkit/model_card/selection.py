"""How the model of a run was chosen, for its card: after a hyperparameter search (metrics.json `search`) the trials
table and the best trial's settings in place of the config's, after a seed band (`seeds`) each seed's dev score,
the mean ± sd of every dev metric, and the kept seed (bertkit/search.py writes the entries)."""

from __future__ import annotations

from typing import Any

# The card's hyperparameter rows (model_card.hyperparameters) that a search's trial parameters replace.
_CARD_ROWS = {"learning_rate": "learning_rate", "per_device_train_batch_size": "per_device_train_batch_size",
              "num_train_epochs": "num_train_epochs", "warmup_steps": "warmup_steps",
              "llrd": "llrd (layer-wise LR decay)"}
_COLUMNS = {"learning_rate": "lr", "per_device_train_batch_size": "batch", "num_train_epochs": "epochs",
            "warmup_steps": "warmup", "llrd": "llrd"}


def _number(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else "" if value is None else str(value)


def _markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def chosen_hyperparameters(rows: list[tuple[str, str]], metrics: dict) -> list[tuple[str, str]]:
    """The card's hyperparameter rows as the kept model was trained: a search's best settings, a band's kept seed."""
    replaced = {}
    if isinstance(metrics.get("search"), dict):
        replaced = {_CARD_ROWS[name]: _number(value) for name, value in metrics["search"]["best"]["params"].items()
                    if name in _CARD_ROWS}
    elif isinstance(metrics.get("seeds"), dict):
        replaced = {"seed": str(metrics["seeds"]["best_seed"])}
    names = {name for name, _ in rows}
    return [(name, replaced.get(name, value)) for name, value in rows] + \
        [(name, value) for name, value in replaced.items() if name not in names]


def _search_section(search: dict) -> list[str]:
    best = search["best"]
    pruned = sum(trial["state"] == "pruned" for trial in search["trials"])
    pruning = ", median pruning" if search["pruning"] else ""
    text = (f"A hyperparameter search of {len(search['trials'])} trials (Optuna{pruning}; {pruned} pruned) ranked "
            f"by dev {search['metric']} ({search['direction']}); this model is trial #{best['number']}, at "
            f"{search['metric']} {_number(best['objective'])}.")
    rows = [[f"#{trial['number']}" + (" (this model)" if trial["number"] == best["number"] else ""), trial["state"],
             *(_number(trial["params"].get(name)) for name in _COLUMNS), _number(trial["objective"])]
            for trial in search["trials"]]
    return [text, _markdown_table(["trial", "state", *_COLUMNS.values(), search["metric"]], rows)]


def _seeds_section(band: dict) -> list[str]:
    count = len(band["runs"])
    text = (f"Trained with {count} seeds ({', '.join(str(run['seed']) for run in band['runs'])}); this model is seed "
            f"{band['best_seed']}, the best dev {band['metric']}. Across the seeds (mean ± sample sd):")
    rows = [[name, f"{_number(mean)} ± {_number(band['sd'][name])}"] for name, mean in band["mean"].items()]
    return [text, _markdown_table(["metric", f"mean ± sd ({count} seeds)"], rows)]


def selection_section(metrics: dict) -> list[str]:
    """The card's "How this model was chosen" section ([] after one training)."""
    if isinstance(metrics.get("search"), dict):
        return ["## How this model was chosen", *_search_section(metrics["search"])]
    if isinstance(metrics.get("seeds"), dict):
        return ["## How this model was chosen", *_seeds_section(metrics["seeds"])]
    return []


__all__ = ["selection_section", "chosen_hyperparameters"]
