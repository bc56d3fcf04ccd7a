"""Layer-wise learning-rate decay (LLRD): the AdamW a recipe hands to Trainer, its parameter groups built from the
model's encoder layers, and its learning-rate table printed once; or no optimizer, when another `train.optim` is
asked for (Trainer builds that one itself, with no layer-wise rates).

The top encoder layer trains at the base learning rate; each layer below it at `decay` times the one above; the
embeddings at base * decay ** num_layers. The pooler trains with the top layer; the freshly initialised task head
can have its own rate (`head_lr`). Biases and LayerNorm weights get no weight decay (as in BERT's original AdamW).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import transformers
from rich.table import Table
from torch import nn

from .console import run_log, say, show
from .errors import BertkitError
from .families import FAMILIES, layer_of
from .families import num_layers as family_layers

# A LoRA-wrapped model's parameters are named base_model.model.<the model's own name>.
_PEFT_PREFIX = "base_model.model."


@dataclass(frozen=True)
class GroupKey:
    name: str  # "embeddings", "layer 0", ..., "pooler" (or "final norm"), "head"
    depth: int  # embeddings 0, layer i -> i + 1, pooler num_layers + 1, head num_layers + 2 (sorting only)
    decay: bool  # whether weight decay applies


def _depth_and_name(parameter_name: str, num_layers: int, base_prefix: str) -> tuple[int, str]:
    """Where a parameter sits, for any family: an encoder layer (bert.encoder.layer.N, model.layers.N,
    distilbert.transformer.layer.N, ...), the rest of the base model (its embeddings, DeBERTa's relative position
    embeddings, ELECTRA's and ALBERT's embedding projections at the bottom; a pooler or final norm at the top), or
    the task head (everything outside the base model)."""
    name = parameter_name.removeprefix(_PEFT_PREFIX)
    index = layer_of(name)
    if index is not None:
        return index + 1, f"layer {index}"
    if base_prefix and not name.startswith(f"{base_prefix}."):
        return num_layers + 2, "head"
    if "pooler." in name:
        return num_layers + 1, "pooler"
    if "final_norm." in name:  # ModernBERT's norm after the last layer
        return num_layers + 1, "final norm"
    return 0, "embeddings"


def _norm_parameters(model: nn.Module) -> set[str]:
    """Names of the parameters of normalisation modules (LayerNorm, RMSNorm, ...), which get no weight decay."""
    return {f"{module_name}.{name}" if module_name else name
            for module_name, module in model.named_modules()
            if isinstance(module, nn.LayerNorm) or type(module).__name__.endswith(("LayerNorm", "RMSNorm"))
            for name, _ in module.named_parameters(recurse=False)}


def _group_lr(depth: int, num_layers: int, base_lr: float, decay: float, head_lr: float | None) -> float:
    if depth == num_layers + 2:  # the task head
        return head_lr if head_lr is not None else base_lr
    return base_lr * decay ** max(num_layers - depth, 0)  # top layer (depth L) and pooler: base_lr


def llrd_param_groups(model: nn.Module, base_lr: float, decay: float = 1.0, head_lr: float | None = None,
                      weight_decay: float = 0.0, num_layers: int | None = None) -> list[dict]:
    """AdamW parameter groups with per-layer learning rates. Only trainable parameters are included (so LoRA works).
    Each group carries `name` and `lr`; groups are ordered bottom (embeddings) to top (head)."""
    if not 0.0 < decay <= 1.0:
        raise ValueError(f"llrd decay must be in (0, 1], got {decay}")
    num_layers = num_layers if num_layers is not None else family_layers(model.config)
    base_prefix = getattr(model, "base_model_prefix", "bert")
    if hasattr(model, "get_base_model"):  # a peft model: the wrapped model's prefix
        base_prefix = model.get_base_model().base_model_prefix
    if getattr(model, "base_model", None) is model:  # a bare encoder: every parameter belongs to it
        base_prefix = ""
    no_decay = _norm_parameters(model)
    groups: dict[GroupKey, list[nn.Parameter]] = {}
    for name, parameter in model.named_parameters():
        if not parameter.requires_grad:
            continue
        depth, group_name = _depth_and_name(name, num_layers, base_prefix)
        key = GroupKey(group_name, depth, decay=not (name.endswith("bias") or name in no_decay))
        groups.setdefault(key, []).append(parameter)
    return [
        {"params": params, "name": key.name + ("" if key.decay else " (no decay)"),
         "lr": _group_lr(key.depth, num_layers, base_lr, decay, head_lr),
         "weight_decay": weight_decay if key.decay else 0.0}
        for key, params in sorted(groups.items(), key=lambda item: (item[0].depth, not item[0].decay))
    ]


# TrainingArguments.optim values an LLRD AdamW can honour -> whether torch's fused kernel runs the step (one pass
# over all parameters instead of about a dozen tensor ops per parameter; transformers' default).
ADAMW_OPTIMS = {"adamw_torch": False, "adamw_torch_fused": True}


def optim_name(train_args) -> str:
    return str(getattr(train_args.optim, "value", train_args.optim))


def build_optimizer(model: nn.Module, train_args, decay: float = 1.0, head_lr: float | None = None):
    """AdamW over LLRD groups, with the betas / eps / weight decay of the `TrainingArguments`, fused as
    `train_args.optim` asks (adamw_torch_fused or adamw_torch)."""
    if optim_name(train_args) not in ADAMW_OPTIMS:
        raise ValueError(f"layer-wise learning rates build AdamW, not {optim_name(train_args)}")
    groups = llrd_param_groups(model, train_args.learning_rate, decay, head_lr, train_args.weight_decay)
    return torch.optim.AdamW(groups, lr=train_args.learning_rate, betas=(train_args.adam_beta1, train_args.adam_beta2),
                             eps=train_args.adam_epsilon, fused=ADAMW_OPTIMS[optim_name(train_args)] or None)


def lr_table(groups: list[dict]) -> list[tuple[str, int, float, float]]:
    """(group name, parameter count, learning rate, weight decay) per group, for the table printed at start."""
    return [(g["name"], sum(p.numel() for p in g["params"]), g["lr"], g["weight_decay"]) for g in groups]


def optimizer_with_llrd(model, args: transformers.TrainingArguments, decay: float, head_lr: float | None):
    """The LLRD AdamW, its learning-rate table printed; None (Trainer builds `train.optim` itself) when another
    optimizer is asked for and no layer-wise rates are."""
    check_optimizer(args, decay, head_lr)
    if optim_name(args) not in ADAMW_OPTIMS:
        say(f"optimizer: {optim_name(args)} (built by Trainer; no layer-wise learning rates)")
        return None
    optimizer = build_optimizer(model, args, decay, head_lr)
    family = FAMILIES.get(getattr(getattr(model, "config", None), "model_type", None))
    if family is not None and family.shared_layers and decay != 1.0:
        say(f"{family.name} shares one layer's weights across its {model.config.num_hidden_layers} layers: layer-wise "
            "decay sees that one shared layer (base rate) over the embeddings (base x decay)")
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


__all__ = ["ADAMW_OPTIMS", "optim_name", "llrd_param_groups", "build_optimizer", "lr_table",
           "optimizer_with_llrd", "check_optimizer", "lr_rows", "show_learning_rates"]
