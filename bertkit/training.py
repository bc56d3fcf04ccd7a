"""What every recipe does around `transformers.Trainer`: precision, TrainingArguments, the LLRD optimizer, resume,
and the files a run leaves behind (metrics.json, training curve, resolved config, model card, summary table)."""

from __future__ import annotations

import copy
import ctypes
import json
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch
import transformers
import yaml
from rich.table import Table

from . import rundir
from .config import config_to_dict, save_config
from .console import console, is_main_process, mode, next_steps, run_log, say, show, summary, use_display
from .errors import BertkitError
from .optim import ADAMW_OPTIMS, build_optimizer, lr_table, optim_name
from .precision import resolve_precision
from .rundir import CURVE_FILE, METRICS_FILE, RUN_CONFIG_FILE, read_run_config, write_json

logger = logging.getLogger("bertkit")



# ------------------------------------------------------------------------------------------------------ precision


# glibc's malloc hands a freed block above its mmap threshold (at most 32 MB by default) back to the OS, and the next
# allocation of that size page-faults every page in again. A BERT training step frees and re-allocates blocks that
# large every time: the word-embedding gradient alone is 47 MB for MiniLM, 94 MB for bert-base.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt parameters, from glibc's malloc.h
KEEP_FREED_BELOW_BYTES = 1 << 30


def keep_freed_memory() -> bool:
    """Have glibc keep freed blocks under 1 GB in the heap for reuse, as tcmalloc, jemalloc or torch's CUDA caching
    allocator do, instead of returning them to the OS. On MiniLM training steps (2 CPU cores) this made steps 6-9 %
    faster; the process then holds on to its peak memory until it exits. For processes bertkit owns (the CLI). True
    if applied; False off Linux or without glibc."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, KEEP_FREED_BELOW_BYTES)
                    and libc.mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))
    except (OSError, AttributeError):  # another C library
        return False


# ---------------------------------------------------------------------------------------------- LoRA


@dataclass
class LoraOptions:
    enabled: bool = False
    """Train LoRA adapters (peft) instead of all weights."""
    r: int = 8
    """LoRA rank."""
    alpha: int = 16
    """LoRA scaling numerator (scale = alpha / r)."""
    dropout: float = 0.1
    """Dropout on the LoRA branch."""
    target_modules: list[str] = field(default_factory=lambda: ["query", "value"])
    """Linear layers that get adapters."""
    merge: bool = True
    """Save the merged model (loads anywhere); false saves the adapter alone."""


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


# ---------------------------------------------------------------------------------------------- Trainer wiring


def training_arguments(train: dict, output_dir: str, precision: str, seed: int, has_eval: bool,
                       metric_for_best: str | None, greater_is_better: bool = True) -> transformers.TrainingArguments:
    """TrainingArguments from the config's `train:` block, plus what the recipe decides: precision, seed,
    evaluation and checkpoint each epoch with best-model selection when there is a dev split."""
    flags, message = resolve_precision(precision)
    say(message)
    args = {**trainer_kwargs(train, output_dir, seed, has_eval, metric_for_best, greater_is_better), **flags}
    args.setdefault("disable_tqdm", mode() != "verbose")  # bertkit's display instead (console.use_display)
    if has_eval and args.get("dataloader_drop_last"):
        say("warning: train.dataloader_drop_last=true drops the dev set's last incomplete batch too (Trainer "
            "has one setting for both): dev metrics leave out up to per_device_eval_batch_size - 1 examples "
            "per process")
    return transformers.TrainingArguments(**args)


def trainer_kwargs(train: dict, output_dir: str, seed: int, has_eval: bool, metric_for_best: str | None,
                   greater_is_better: bool = True) -> dict:
    """The TrainingArguments keywords of a run, precision aside: bertkit's defaults, the `train:` block over them,
    and with a dev split evaluation on the save schedule and best-model selection. Pure, so that `bertkit validate`
    (bertkit/checks.py) checks the very settings `training_arguments` passes on."""
    args = {"output_dir": output_dir, "seed": seed, "report_to": "none", "logging_strategy": "steps",
            "logging_steps": 10, "save_strategy": "epoch", "save_total_limit": 2, **train}
    if has_eval:
        args.setdefault("eval_strategy", args["save_strategy"])
        args.setdefault("load_best_model_at_end", True)
        if metric_for_best:
            args.setdefault("metric_for_best_model", metric_for_best)
            args.setdefault("greater_is_better", greater_is_better)
    return args


def selection_metric(args: transformers.TrainingArguments, default: str | None) -> str | None:
    """The dev metric that picks the best checkpoint: the recipe's `default` unless train.metric_for_best_model
    overrides it (without Trainer's eval_ prefix)."""
    return args.metric_for_best_model.removeprefix("eval_") if args.metric_for_best_model else default


def optimizer_with_llrd(model, args: transformers.TrainingArguments, decay: float, head_lr: float | None):
    """The LLRD AdamW, its learning-rate table printed; None (Trainer builds `train.optim` itself) when another
    optimizer is asked for and no layer-wise rates are."""
    if optim_name(args) not in ADAMW_OPTIMS:
        if decay != 1.0 or head_lr is not None:
            raise BertkitError(f"train.optim={optim_name(args)} cannot take layer-wise learning rates (llrd, head_lr)"
                               f" — use train.optim=adamw_torch_fused or adamw_torch, or set llrd=1.0 and no head_lr")
        say(f"optimizer: {optim_name(args)} (built by Trainer; no layer-wise learning rates)")
        return None
    optimizer = build_optimizer(model, args, decay, head_lr)
    show_learning_rates(lr_rows(lr_table(optimizer.param_groups)), decay, args.weight_decay)
    return optimizer


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


def start_run(cfg, recipe: str) -> None:
    """First thing a recipe's main does, before loading anything (bertkit/rundir.py): hold output_dir for this run,
    refuse to replace a run there unless overwrite=true, refuse resume=true from another run's checkpoints.
    `run_trainer` then clears the replaced run and writes the fingerprint. Rank 0 only: it is the one that writes."""
    config = config_to_dict(cfg)
    run_log.start(f"bertkit run {recipe}, output_dir {cfg.output_dir}")  # written to train.log once training starts
    run_log.write("resolved config:\n" + yaml.safe_dump(config, sort_keys=False, allow_unicode=True).rstrip())
    if not is_main_process():
        return
    rundir.start(cfg.output_dir, recipe, config, overwrite=getattr(cfg, "overwrite", False),
                 resume=cfg.resume, say=say)


def resume_checkpoint(resume, output_dir: str) -> str | bool | None:
    """`resume=true` -> the newest complete checkpoint in output_dir (error if none; a partial one, left by a kill
    while saving, is passed over with a line saying so); a path -> that checkpoint, if complete."""
    if resume in (False, None, "", "false"):
        return None
    if resume is True or resume == "true":
        checkpoints = rundir.checkpoints_newest_first(Path(output_dir)) if Path(output_dir).is_dir() else []
        if not checkpoints:
            raise BertkitError(f"resume=true but {output_dir} has no checkpoint-* directory — run without resume "
                               "first, or give resume=<checkpoint path>")
        for checkpoint in checkpoints:
            problem = rundir.checkpoint_problem(checkpoint)
            if problem is None:
                return str(checkpoint)
            say(f"{checkpoint.name} is incomplete ({problem}: interrupted while saving?) — passing over it")
        raise BertkitError(f"resume=true but no checkpoint in {output_dir} is complete (newest: {checkpoints[0].name}"
                           f", {rundir.checkpoint_problem(checkpoints[0])}) — rerun with overwrite=true")
    if not Path(resume).is_dir():
        raise BertkitError(f"resume checkpoint {resume} does not exist — give a checkpoint-* directory or resume=true")
    problem = rundir.checkpoint_problem(Path(resume))
    if problem:
        raise BertkitError(f"resume checkpoint {resume} is incomplete ({problem}) — give an earlier checkpoint-* "
                           "directory, or resume=true for the newest complete one")
    return str(resume)


def run_trainer(trainer: transformers.Trainer, cfg):
    """trainer.train(), resuming as cfg.resume says; a full disk while saving a checkpoint is one line saying
    where and which checkpoint was kept."""
    checkpoint = resume_checkpoint(cfg.resume, cfg.output_dir)
    if checkpoint:
        say(f"resuming from {checkpoint}")
    if is_main_process():
        rundir.begin(cfg.output_dir, say)  # the old run overwrite=true replaces goes now, not before a typo is found
        run_log.open(cfg.output_dir)  # the lines held since start_run, then everything as it comes
    use_display(trainer)
    with rundir.disk_full_guard(cfg.output_dir, "a checkpoint"):
        return trainer.train(resume_from_checkpoint=checkpoint)


# ---------------------------------------------------------------------------------------------- run outputs


def save_run_config(cfg, output_dir: str, recipe: str) -> Path:
    if getattr(cfg, "overwrite", False):  # rerunning the saved config must not replace this run without a word
        cfg = copy.copy(cfg)
        cfg.overwrite = False
    return save_config(cfg, Path(output_dir) / RUN_CONFIG_FILE,
                       command=f"bertkit run {recipe} -c {Path(output_dir) / RUN_CONFIG_FILE}")


def plot_training_curve(log_history: list[dict], path: Path, metric: str | None) -> Path | None:
    """Training loss (and eval loss / the eval metric) against step, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = [(e["step"], e["loss"]) for e in log_history if "loss" in e and "step" in e]
    evals = [e for e in log_history if "eval_loss" in e]
    if not train and not evals:
        return None
    figure, loss_axis = plt.subplots(figsize=(7, 4))
    if train:
        loss_axis.plot(*zip(*train), label="train loss", color="tab:blue")
    if evals:
        loss_axis.plot([e["step"] for e in evals], [e["eval_loss"] for e in evals], "o-", label="dev loss",
                       color="tab:orange")
    loss_axis.set_xlabel("step")
    loss_axis.set_ylabel("loss")
    key = f"eval_{metric}" if metric else None
    if key and any(key in e for e in evals):
        metric_axis = loss_axis.twinx()
        metric_axis.plot([e["step"] for e in evals if key in e], [e[key] for e in evals if key in e], "s--",
                         color="tab:green", label=f"dev {metric}")
        metric_axis.set_ylabel(f"dev {metric}")
        metric_axis.legend(loc="upper right")
    loss_axis.legend(loc="upper left")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def summary_table(title: str, rows: dict) -> None:
    """A titled name / value table (console.summary: fits any terminal width), shown in every mode."""
    summary(title, rows)


def run_summary(title: str, rows: dict, output_dir: str | Path, recipe: str) -> None:
    """The end of a run: its summary table, where the model and the log are, and the commands to run next (which
    say where the model is: a "saved to" row would only repeat it)."""
    summary(title, {name: value for name, value in rows.items() if name != "saved to"})
    next_steps(output_dir, recipe)


def finish_run(trainer: transformers.Trainer, cfg, recipe: str, metrics: dict, metric: str | None,
               extra_files: dict | None = None) -> Path:
    """Save model + tokenizer, metrics.json, `extra_files` (name -> text, JSON data, or a function that writes the
    path it is given), the curve, the resolved config and the model card; then, last, the completion record
    (bertkit/rundir.py) that makes the directory a finished run, and let go of the directory."""
    output_dir = Path(trainer.args.output_dir)
    main = trainer.is_world_process_zero()
    if main:
        rundir.remove_record(output_dir)  # from here until the record, a kill leaves the directory visibly unfinished
    with rundir.disk_full_guard(output_dir, "the final model"):
        trainer.save_model(str(output_dir))  # collective under DDP / FSDP / DeepSpeed: every process calls it
        if not main:
            return output_dir
        if hasattr(trainer.model, "peft_config"):  # an adapter alone (lora.merge=false): its task config beside it
            model = trainer.model.get_base_model()
            model.config.architectures = [type(model).__name__]
            model.config.save_pretrained(output_dir)
        write_json(output_dir / METRICS_FILE, metrics)
        for name, content in (extra_files or {}).items():
            target = output_dir / name
            if callable(content):
                content(target)
                continue
            target.write_text(content if isinstance(content, str) else
                              json.dumps(content, indent=2, ensure_ascii=False), encoding="utf-8")
        plot_training_curve(trainer.state.log_history, output_dir / CURVE_FILE, metric)
        save_run_config(cfg, str(output_dir), recipe)
        _write_model_card(output_dir)
        rundir.write_record(output_dir, recipe)
    rundir.release(output_dir)
    return output_dir


def _write_model_card(output_dir: Path) -> None:
    from .model_card import render_model_card

    try:
        (output_dir / "README.md").write_text(render_model_card(output_dir), encoding="utf-8")
    except BertkitError as error:  # the model is saved; a card problem must not lose the run
        logger.warning("model card not written: %s", error)


__all__ = [
    "is_main_process", "say", "keep_freed_memory", "LoraOptions", "add_lora", "resolve_precision",
    "training_arguments", "trainer_kwargs", "selection_metric", "optimizer_with_llrd", "resume_checkpoint",
    "write_json", "save_run_config", "read_run_config", "plot_training_curve", "summary_table", "run_summary",
    "finish_run", "lr_rows", "show_learning_rates", "console",
    "config_to_dict", "start_run", "run_trainer",
    "RUN_CONFIG_FILE", "METRICS_FILE", "CURVE_FILE",
]
