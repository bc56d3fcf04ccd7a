"""LoRA adapters (peft) on a model about to be fine-tuned, with the target layers checked first."""

from __future__ import annotations

import torch

from ..console import say
from ..errors import BertkitError
from ..options import LoraOptions


def add_lora(model, options: LoraOptions, task_type: str | None, modules_to_save: list[str] | None = None):
    """Wrap the model with LoRA adapters (peft). The task head stays fully trainable: peft's task types know their
    head; without one (peft has no multiple-choice type), name it in `modules_to_save` (trained in full, saved with
    the adapter)."""
    from peft import LoraConfig, get_peft_model

    check_lora_targets(model, options.target_modules)
    lora = LoraConfig(task_type=task_type, r=options.r, lora_alpha=options.alpha, lora_dropout=options.dropout,
                      target_modules=list(options.target_modules), modules_to_save=modules_to_save)
    model = get_peft_model(model, lora)
    trainable, total = model.get_nb_trainable_parameters()
    also = f" (+ {', '.join(modules_to_save)})" if modules_to_save else ""
    say(f"LoRA r={options.r} on {', '.join(options.target_modules)}{also}: {trainable:,} of {total:,} parameters train")
    return model


def check_lora_targets(model, targets: list[str]) -> None:
    """Each of lora.target_modules must name layers peft can wrap (it matches the end of a module's dotted name):
    one line listing the linear layers there are, instead of peft's error."""
    wrappable = [name for name, module in model.named_modules()
                 if isinstance(module, (torch.nn.Linear, torch.nn.Embedding))]
    for target in targets:
        if not any(name == target or name.endswith("." + target) for name in wrappable):
            linear = sorted({name.rsplit(".", 1)[-1] for name, module in model.named_modules()
                             if isinstance(module, torch.nn.Linear)})
            raise BertkitError(f"config key 'lora.target_modules': {target!r} names no linear layer of this model — "
                               f"use some of {', '.join(linear)} (e.g. lora.target_modules=[query,value])")


__all__ = ["LoraOptions", "add_lora", "check_lora_targets"]
