"""The optimizer a recipe hands to Trainer: AdamW with layer-wise learning-rate decay (bertkit/optim.py), its
learning-rate table printed once; or none, when another `train.optim` is asked for."""

from __future__ import annotations

import transformers
from rich.table import Table

from ..console import run_log, say, show
from ..errors import BertkitError
from ..optim import ADAMW_OPTIMS, build_optimizer, lr_table, optim_name


def optimizer_with_llrd(model, args: transformers.TrainingArguments, decay: float, head_lr: float | None):
    """The LLRD AdamW, its learning-rate table printed; None (Trainer builds `train.optim` itself) when another
    optimizer is asked for and no layer-wise rates are."""
    check_optimizer(args, decay, head_lr)
    if optim_name(args) not in ADAMW_OPTIMS:
        say(f"optimizer: {optim_name(args)} (built by Trainer; no layer-wise learning rates)")
        return None
    optimizer = build_optimizer(model, args, decay, head_lr)
    show_learning_rates(lr_rows(lr_table(optimizer.param_groups)), decay, args.weight_decay)
    return optimizer


def check_optimizer(args: transformers.TrainingArguments, decay: float, head_lr: float | None) -> None:
    """Refuse layer-wise learning rates with an optimizer that is not bertkit's AdamW."""
    if optim_name(args) not in ADAMW_OPTIMS and (decay != 1.0 or head_lr is not None):
        raise BertkitError(f"train.optim={optim_name(args)} cannot take layer-wise learning rates (llrd, head_lr)"
                           f" — use train.optim=adamw_torch_fused or adamw_torch, or set llrd=1.0 and no head_lr")


def lr_rows(groups: list[tuple[str, int, float, float]]) -> dict[str, tuple[int, float]]:
    """Layer -> (parameters, learning rate): a group and its no-decay twin (biases, LayerNorm) are one layer."""
    rows: dict[str, tuple[int, float]] = {}
    for name, count, lr, _ in groups:
        layer = name.removesuffix(" (no decay)")
        rows[layer] = (rows.get(layer, (0, lr))[0] + count, lr)
    return rows


_shown_lr_tables: set[str] = set()  # a recipe that builds the optimizer twice (head warm-up) shows it once


def show_learning_rates(rows: dict[str, tuple[int, float]], decay: float, weight_decay: float) -> None:
    """One line when every layer has the same rate, else one table row per layer; train.log has it either way."""
    total = sum(count for count, _ in rows.values())
    rates = {lr for _, lr in rows.values()}
    decay_text = f"weight decay {weight_decay:g}, none on biases and LayerNorm"
    key = repr((sorted(rows.items()), decay, weight_decay))
    if key in _shown_lr_tables:
        return
    _shown_lr_tables.add(key)
    if len(rates) == 1:
        say(f"AdamW: learning rate {rates.pop():.3g} for all {total:,} parameters ({decay_text})")
        return
    say(f"AdamW, layer-wise learning-rate decay {decay:g} ({decay_text}):")
    run_log.write("\n".join(f"  {name:<12} {count:>12,} {lr:.3g}" for name, (count, lr) in rows.items()))
    table = Table(box=None, pad_edge=False, padding=(0, 2, 0, 2), header_style="dim")
    for column in ("layer", "parameters", "learning rate"):
        table.add_column(column, justify="left" if column == "layer" else "right")
    for name, (count, lr) in rows.items():
        table.add_row(name, f"{count:,}", f"{lr:.3g}")
    show(table)


__all__ = ["optimizer_with_llrd", "check_optimizer", "lr_rows", "show_learning_rates"]
