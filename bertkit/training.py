"""The builders a recipe's main calls around `transformers.Trainer`, which the recipe builds and trains itself:

    run = start_run(cfg, "classify")                       # seed, hold output_dir (overwrite / resume rules)
    args = training_arguments(cfg.train, ...)              # a real transformers.TrainingArguments
    trainer = FineTuningTrainer(model=..., args=args, ..., llrd=cfg.tune.llrd)   # a public Trainer subclass
    with run.training(trainer) as checkpoint:              # the replaced run cleared; a full disk said in one line
        train_result = trainer.train(resume_from_checkpoint=checkpoint)
    with run.saving(trainer):                              # the completion record removed first, written last
        trainer.save_model(run.output_dir)
        run.save_files(trainer, results, metric)           # metrics.json, curve, resolved config, model card
    report(cfg, "classify", title, rows, run.output_dir)   # the summary, then the push

Also here: the model's positions against data.max_length, LoRA, the model or its builder for Trainer (a search or
seed band, bertkit/search.py, rebuilds it per run), early stopping, and the loss guard that stops a diverged run."""

from __future__ import annotations

import contextlib

import json
import logging
import math
import time
from contextlib import contextmanager
from pathlib import Path

import torch
import transformers
import yaml

from . import rundir
from .checkpoints import pickled_state_refused
from .config import config_to_dict
from .console import is_main_process, mode, run_log, run_summary, say
from .distributed import check_launch, deepspeed_line, engine_arguments, sharding, sharding_line
from .errors import BertkitError
from .families import check_fp16, family_of, position_limit
from .hub import push_finished_run
from .llrd import check_optimizer, optimizer_with_llrd
from .model_card import render_model_card
from .precision import resolve_precision
from .report import REPORT_FILE, ReportCallback, write_report_quietly
from .rundir import (CONFUSION_FIGURE, CURVE_FILE, ENTITY_FIGURE, LOG_HISTORY_FILE, METRICS_FILE, save_run_config,
                     write_json)
from .search import choice_rows, load_optuna
from .tasks import CORPUS_RANKERS
from .training_arguments import arguments_refused, trainer_kwargs
from .training_display import use_display

logger = logging.getLogger("bertkit")


def check_positions(max_length: int, config) -> None:
    """Refuse a data.max_length longer than the model's position table (512 for BERT, 8,192 for ModernBERT),
    before its weights are loaded."""
    limit = position_limit(config)
    if max_length > limit:
        raise BertkitError(f"data.max_length={max_length} is more than the model's {limit} positions — set "
                           f"data.max_length<={limit}")


class FineTuningTrainer(transformers.Trainer):
    """transformers.Trainer whose optimizer is bertkit's AdamW with layer-wise learning-rate decay, built when
    training starts rather than handed in: a Trainer with `model_init` (a search's trials rebuild the model) cannot
    take `optimizers=`, and each new model needs its own parameter groups."""

    def __init__(self, *args, llrd: float = 1.0, head_lr: float | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        check_optimizer(self.args, llrd, head_lr)  # now, not when training starts and an old run is gone
        self.llrd, self.head_lr = llrd, head_lr
        self.add_callback(LossGuard(self))  # a NaN / exploding loss stops the run: no completion record (LossGuard)
        self.add_callback(ShardingCheck())  # train.fsdp: the sharding said once, or the run refused (distributed)

    def create_optimizer(self, model=None):
        if self.optimizer is None:
            self.optimizer = optimizer_with_llrd(self.model if model is None else model, self.args, self.llrd,
                                                 self.head_lr)
        return self.optimizer if self.optimizer is not None else super().create_optimizer(model)



def several_trainings(cfg) -> bool:
    """Whether cfg asks for a search (search.trials) or a seed band (seeds): several trainings on one Trainer, so
    a callback that remembers things by step would mix them up."""
    tune = getattr(cfg, "tune", None)
    return tune is not None and bool(tune.search.trials or tune.seeds)


def model_or_builder(cfg, build, model=None) -> tuple:
    """Trainer's (model, model_init) from `build`, a function of no arguments building a fresh model: for a search or
    seed band the builder (Trainer rebuilds the model for each trial / seed, seeded first); for one training the
    model, `model` if the recipe already built it, else build() seeded as Trainer seeds before a model_init (the
    new head drawn from the seed)."""
    if several_trainings(cfg):
        return None, build
    if model is not None:
        return model, None
    transformers.set_seed(cfg.run.seed)
    return build(), None


def early_stopping(cfg, has_eval: bool) -> list[transformers.TrainerCallback]:
    """Trainer's callbacks for `cfg.tune.early_stopping_patience` evaluations without gain: none without a dev split."""
    patience = cfg.tune.early_stopping_patience
    return [transformers.EarlyStoppingCallback(early_stopping_patience=patience)] if patience and has_eval else []


def merge_lora(trainer: transformers.Trainer, lora) -> None:
    """Before the final model is saved: LoRA adapters merged into the weights when lora.merge says so."""
    if lora.enabled and lora.merge:
        trainer.model = trainer.model.merge_and_unload()


def report(cfg, recipe: str, title: str, rows: dict, output_dir: Path) -> None:
    """The end of every run: the summary table with the next commands, then the push (cfg.run.push) of the finished
    run directory. After a search or seed band (metrics.json's `search` / `seeds`), the rows say how the model was
    chosen: the best trial and its settings, or each dev metric as mean ± sd over the seeds."""
    recorded = _read_choice(Path(output_dir) / METRICS_FILE)
    rows = choice_rows(rows, recorded)
    model = {"implementation": recorded["implementation"]} if recorded.get("implementation") else {}
    run_summary(title, {**rows, **model, "saved to": str(output_dir)}, output_dir, recipe,
                ranks_a_corpus=recipe in CORPUS_RANKERS)
    if cfg.run.push:
        push_finished_run(output_dir, cfg.run.push)


def _read_choice(path: Path) -> dict:
    """metrics.json's `search` / `seeds` entry and the implementation that trained ({} where rank 0 wrote none)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {key: data[key] for key in ("search", "seeds", "implementation") if isinstance(data, dict) and key in data}


def training_arguments(train: dict, output_dir: str, precision: str, seed: int, has_eval: bool,
                       metric_for_best: str | None, greater_is_better: bool = True) -> transformers.TrainingArguments:
    """TrainingArguments from the config's `train:` block, plus what the recipe decides: precision, seed,
    evaluation and checkpoint each epoch with best-model selection when there is a dev split."""
    flags, message = resolve_precision(precision)
    say(message)
    check_launch(train)  # fsdp / deepspeed: runs here, or one line saying why not (bertkit/distributed.py)
    args = {**trainer_kwargs(train, output_dir, seed, has_eval, metric_for_best, greater_is_better), **flags,
            **engine_arguments(train)}
    args.setdefault("disable_tqdm", mode() != "verbose")  # bertkit's display instead (console.use_display)
    if has_eval and args.get("dataloader_drop_last"):
        say("warning: train.dataloader_drop_last=true drops the dev set's last incomplete batch too (Trainer "
            "has one setting for both): dev metrics leave out up to per_device_eval_batch_size - 1 examples "
            "per process")
    try:
        return transformers.TrainingArguments(**args)
    except (ValueError, TypeError) as error:  # a combination it refuses (e.g. a plateau schedule without evaluation)
        raise arguments_refused(error) from None


def selection_metric(args: transformers.TrainingArguments, default: str | None) -> str | None:
    """The dev metric that picks the best checkpoint: the recipe's `default` unless train.metric_for_best_model
    overrides it (without Trainer's eval_ prefix)."""
    return args.metric_for_best_model.removeprefix("eval_") if args.metric_for_best_model else default


def add_lora(model, options, task_type: str | None, modules_to_save: list[str] | None = None):
    """Wrap the model with LoRA adapters (peft), as `options` (the recipe's bertkit.options.LoraOptions) say. The
    task head stays fully trainable: peft's task types know their head; without one (peft has no multiple-choice
    type), name it in `modules_to_save` (trained in full, saved with the adapter)."""
    from peft import LoraConfig, get_peft_model

    targets = list(options.target_modules)
    if targets == ["query", "value"]:  # the default: the same projections under the family's own names
        targets = list(family_of(model.config).lora_targets)
    check_lora_targets(model, targets)
    lora = LoraConfig(task_type=task_type, r=options.r, lora_alpha=options.alpha, lora_dropout=options.dropout,
                      target_modules=targets, modules_to_save=modules_to_save)
    model = get_peft_model(model, lora)
    trainable, total = model.get_nb_trainable_parameters()
    also = f" (+ {', '.join(modules_to_save)})" if modules_to_save else ""
    say(f"LoRA r={options.r} on {', '.join(targets)}{also}: {trainable:,} of {total:,} parameters train")
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


# ------------------------------------------------------------------------------------------------ loss guard
# A run whose training loss turns NaN / inf or explodes stops with one line, instead of training on and saving a
# broken model as a success: no completion record is written (Run.saving never runs), the exit code is 2 (the
# learning rate, or the precision, is a setting to change), and the line names the step, the loss and the likely
# cause.
#
# The rule (LossWatch), over the losses Trainer logs (each the mean over logging_steps steps):
# - a NaN or inf loss stops the run at once (bertkit turns off Trainer's logging_nan_inf_filter, which would
#   otherwise log a run of NaN steps as the mean of the finite ones, or as 0.0);
# - an explosion is a logged loss above max(10 x the first logged loss, the first + 10) twice in a row, or at the
#   last log of the run. One spike that comes back down is a noisy batch, not a diverged model: a batch-1 run's
#   confident mistake can log 6-9 once; a diverged one stays up (0.69 -> 40 -> 271 at learning rate 1e3).

EXPLODES_BY = 10.0  # a loss this many times the first logged one (and at least FLOOR above it) has exploded
FLOOR = 10.0
SUSTAINED = 2  # logged losses in a row over the line


def _rate(value: float) -> str:
    """A learning rate as YAML reads it back as a float: 1.0e2, 3.0e-5."""
    mantissa, exponent = f"{value:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def _loss(value: float) -> str:
    return f"{value:.4g}" if math.isfinite(value) else str(value)


class LossWatch:
    """The rule, apart from Trainer: `check(step, loss)` for each logged loss and `at_end()` when training ends
    return the one-line problem, or None."""

    def __init__(self, learning_rate: float, fp16: bool = False):
        self.learning_rate, self.fp16 = float(learning_rate), fp16
        self.first: tuple[int, float] | None = None
        self.over: list[tuple[int, float]] = []
        self.last: tuple[int, float] | None = None

    def limit(self) -> float | None:
        if self.first is None:
            return None
        first = self.first[1]
        return max(EXPLODES_BY * first, first + FLOOR)

    def check(self, step: int, loss: float) -> str | None:
        loss = float(loss)
        if not math.isfinite(loss):
            return self._problem(step, loss, "the training loss is " + _loss(loss) + " (the weights diverged)")
        if self.first is None:
            self.first = (step, loss)
        self.last = (step, loss)
        if loss > self.limit():
            self.over.append((step, loss))
            if len(self.over) >= SUSTAINED:
                return self._exploded(step, loss)
        else:
            self.over = []
        return None

    def at_end(self) -> str | None:
        """A run that ends with its last logged loss over the line has diverged, however briefly it was there."""
        if self.over and self.last is not None and self.over[-1] == self.last:
            return self._exploded(*self.last)
        return None

    def _exploded(self, step: int, loss: float) -> str:
        first_step, first = self.first
        return self._problem(step, loss, f"the training loss exploded to {_loss(loss)} (from {_loss(first)} at step "
                                         f"{first_step}; more than {EXPLODES_BY:g}x)")

    def _problem(self, step: int, loss: float, what: str) -> str:
        lower = _rate(self.learning_rate / 10)
        cause = (f"the learning rate {self.learning_rate:g} is likely too high: try train.learning_rate={lower} "
                 "(10x lower)")
        if self.fp16:
            cause += "; or an fp16 overflow: try precision=bf16 or precision=fp32"
        return f"training stopped at step {step}: {what} — {cause}"


class LossGuard(transformers.TrainerCallback):
    """LossWatch on a Trainer: raises BertkitError (so Run.saving and its completion record never run) at the
    logged loss that breaks the rule, or at the end of training. In a hyperparameter search the trial stops instead,
    with a line, and the search goes on with the next trial (a high learning rate is what some trials try)."""

    def __init__(self, trainer: transformers.Trainer):
        self.trainer = trainer
        self.watch: LossWatch | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.watch = LossWatch(args.learning_rate, bool(args.fp16))

    def on_log(self, args, state, control, logs=None, **kwargs):
        logs = logs or {}
        if self.watch is None:
            self.on_train_begin(args, state, control)
        problem = None
        if "loss" in logs:
            problem = self.watch.check(state.global_step, logs["loss"])
        elif isinstance(logs.get("train_loss"), float) and not math.isfinite(logs["train_loss"]):
            problem = self.watch.check(state.global_step, logs["train_loss"])
        self._stop(problem, control)

    def on_train_end(self, args, state, control, **kwargs):
        if self.watch is not None:
            self._stop(self.watch.at_end(), control)

    def _stop(self, problem: str | None, control) -> None:
        if problem is None:
            return
        if getattr(self.trainer, "hp_search_backend", None) is not None:  # set only while a search's trial trains
            say(f"search trial stopped: {problem}")
            control.should_training_stop = True
            return
        for callback in self.trainer.callback_handler.callbacks:  # a live progress bar would swallow the line
            stop = getattr(callback, "stop_display", None)
            if callable(stop):
                stop()
        raise BertkitError(problem)




class ShardingCheck(transformers.TrainerCallback):
    """At the start of training under train.fsdp: the sharding said (rank 0 prints; train.log has it), and the run
    refused if the model's parameters were not sharded (an engine that fell back to DDP). Under train.deepspeed:
    the ZeRO stage, the accelerator and rank 0's parameter bytes."""

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if args.deepspeed and model is not None:
            say(deepspeed_line(model, args))
        if not args.fsdp or model is None:
            return
        found = sharding(model)
        if not found["units"]:
            raise BertkitError("train.fsdp is set but the model was not sharded (no FSDP unit: the engine fell back "
                               "to DDP) — run on CUDA GPUs under torchrun, or drop train.fsdp")
        say(sharding_line(model, args.process_index, args.world_size))


def start_run(cfg, recipe: str) -> "Run":
    """First thing a recipe's main does, before loading anything (bertkit/rundir): seed, hold output_dir for this
    run, refuse to replace a run there unless overwrite=true, refuse resume=true from another run's checkpoints.
    `Run.training` then clears the replaced run and writes the fingerprint. Rank 0 only: it is the one that writes."""
    run = Run(cfg, recipe)
    transformers.set_seed(cfg.run.seed)
    config = config_to_dict(cfg)
    run_log.start(f"bertkit run {recipe}, output_dir {cfg.run.output_dir}")  # into train.log once training starts
    run_log.write("resolved config:\n" + yaml.safe_dump(config, sort_keys=False, allow_unicode=True).rstrip())
    if is_main_process():
        rundir.start(cfg.run.output_dir, recipe, config, overwrite=cfg.run.overwrite,
                     resume=cfg.run.resume, say=say)
    return run


class Run:
    """The run directory of one run, held since `start_run`: around training (`training`), around the final save
    (`saving`, `save_files`), and the results metrics.json records (`results`, with the wall time since the start)."""

    def __init__(self, cfg, recipe: str):
        self.cfg, self.recipe = cfg, recipe
        self.output_dir = Path(cfg.run.output_dir)
        self.started = time.perf_counter()
        self.implementation: str | None = None  # set when training starts (implementation_of)

    @contextmanager
    def training(self, trainer: transformers.Trainer):
        """Around trainer.train() (or a search / seed band, bertkit/search.py): yields the checkpoint to resume from
        (cfg.run.resume; None for a fresh start). A search or seed band the trainer cannot do is refused first; then
        the old run that overwrite=true replaces goes (not before a typo is found) and train.log opens. A full disk
        while saving a checkpoint is one line saying where and which checkpoint was kept."""
        repeated_training(trainer, self.cfg)
        check_fp16(_unwrapped(trainer.model).config, trainer.args.fp16)
        checkpoint = resume_checkpoint(self.cfg.run.resume, self.cfg.run.output_dir)
        if checkpoint:
            say(f"resuming from {checkpoint}")
        if is_main_process():
            rundir.begin(self.cfg.run.output_dir, say)
            run_log.open(self.cfg.run.output_dir)  # the lines held since start_run, then everything as it comes
            say(f"live report: {self.output_dir / REPORT_FILE} (rewritten at each evaluation)")
        self.implementation = implementation_of(trainer.model)
        say(f"model: {self.implementation} ({model_class_of(trainer.model)})")
        trainer.add_callback(ReportCallback(self.output_dir))
        use_display(trainer)
        with rundir.disk_full_guard(self.cfg.run.output_dir, "a checkpoint"), pickled_state_refused(checkpoint):
            yield checkpoint

    def results(self, metrics: dict, train_result, **entries) -> dict:
        """A run's results (metrics.json, and what main returns): dev metrics, training loss and metrics, the
        recipe's own `entries`, how a search or seed band chose the model (`search` / `seeds`), and the wall time."""
        return {"eval": metrics, "train": {"loss": train_result.training_loss, **train_result.metrics},
                "implementation": self.implementation, **entries,
                **getattr(train_result, "choice", {}), "wall_time_s": round(time.perf_counter() - self.started, 1)}

    @contextmanager
    def saving(self, trainer: transformers.Trainer):
        """Around the final save (trainer.save_model and save_files): the completion record goes first (from here
        until it is written again, a kill leaves the directory visibly unfinished) and is written last, by rank 0,
        after the checkpoint-* folders are removed (unless keep_checkpoints=true); a full disk is one line; then the
        directory is let go."""
        main = trainer.is_world_process_zero()
        if main:
            rundir.remove_record(self.output_dir)
        with rundir.disk_full_guard(self.output_dir, "the final model"):
            yield
            if main:
                if not self.cfg.run.keep_checkpoints:  # the final model is saved: the checkpoints are leftovers
                    rundir.remove_checkpoints(self.output_dir, say)
                rundir.write_record(self.output_dir, self.recipe)
        if main:
            # after the record (the dev examples come from the finished model, which only a finished run lends);
            # the card again, to link the report
            if write_report_quietly(self.output_dir):
                _write_model_card(self.output_dir)
            rundir.release(self.output_dir)

    def save_files(self, trainer: transformers.Trainer, results: dict, metric: str | None,
                   extra_files: dict | None = None) -> None:
        """Rank 0, after trainer.save_model: metrics.json, the log history, `extra_files` (name -> text, JSON data,
        or a function that writes the path it is given), the curve, the resolved config and the model card."""
        if not trainer.is_world_process_zero():
            return
        output_dir = self.output_dir
        if hasattr(trainer.model, "peft_config"):  # an adapter alone (lora.merge=false): its task config beside it
            model = trainer.model.get_base_model()
            model.config.architectures = [type(model).__name__]
            model.config.save_pretrained(output_dir)
        write_json(output_dir / METRICS_FILE, results)
        write_json(output_dir / LOG_HISTORY_FILE, trainer.state.log_history)  # read by `bertkit diagnose`
        for name, content in (extra_files or {}).items():
            target = output_dir / name
            if callable(content):
                content(target)
                continue
            target.write_text(content if isinstance(content, str) else
                              json.dumps(content, indent=2, ensure_ascii=False), encoding="utf-8")
        plot_training_curve(trainer.state.log_history, output_dir / CURVE_FILE, metric)
        plot_task_figure(output_dir, results)
        save_run_config(self.cfg, str(output_dir), self.recipe)
        _write_model_card(output_dir)


def implementation_of(model) -> str:
    """Which implementation trains: "bertkit's own BERT", or "transformers' RoBERTa" for another family (the
    summary, `bertkit runs`, metrics.json)."""
    family = family_of(_unwrapped(model).config)
    return "bertkit's own BERT" if family.implementation == "bertkit" else f"transformers' {family.name}"


def model_class_of(model) -> str:
    return type(_unwrapped(model)).__name__


def _unwrapped(model):
    return model.get_base_model() if hasattr(model, "get_base_model") else model


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
        raise BertkitError(f"resume: {rundir.resume_path_problem(str(resume))} — give a checkpoint-* directory or "
                           "resume=true")
    problem = rundir.checkpoint_problem(Path(resume))
    if problem:
        raise BertkitError(f"resume checkpoint {resume} is incomplete ({problem}) — give an earlier checkpoint-* "
                           "directory, or resume=true for the newest complete one")
    return str(resume)


def repeated_training(trainer: transformers.Trainer, cfg) -> str | None:
    """The key of the search or seed band cfg asks for (`search.trials` / `seeds`; the recipe runs it through
    bertkit/search.py search_or_seeds), None for one training. Refused (Run.training: before the old run is cleared)
    for a trainer that cannot rebuild its model, and a search without optuna."""
    tune = getattr(cfg, "tune", None)
    key = ("search.trials" if tune is not None and tune.search.trials else
           "seeds" if tune is not None and tune.seeds else None)
    if key is None:
        return None
    if trainer.model_init is None:
        raise BertkitError(f"{key} is not available for this recipe (its trainer cannot rebuild the model for every "
                           f"run) — remove {key}; ner, qa, choice, classify, distill and embed support it")
    if key == "search.trials":
        load_optuna()  # a missing optuna is said now, before the old run is cleared
    return key


def _write_model_card(output_dir: Path) -> None:
    try:
        (output_dir / "README.md").write_text(render_model_card(output_dir), encoding="utf-8")
    except BertkitError as error:  # the model is saved; a card problem must not lose the run
        logger.warning("model card not written: %s", error)


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


def plot_task_figure(output_dir: Path, results: dict) -> Path | None:
    """The task's main dev figure as a PNG for the model card (the Hub shows images, not report.html): the confusion
    matrix of a single-label classifier (up to 30 classes), or F1 per entity type of a tagger."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matrix = {}
    with contextlib.suppress(OSError, ValueError):
        matrix = json.loads((output_dir / "confusion_matrix.json").read_text(encoding="utf-8"))
    per_type = {k[3:]: v for k, v in (results.get("eval") or {}).items()
                if k.startswith("f1_") and isinstance(v, (int, float))} if results.get("scheme") else {}
    if isinstance(matrix, dict) and matrix.get("matrix") and len(matrix["labels"]) <= 30:
        labels, counts = matrix["labels"], matrix["matrix"]
        figure, axis = plt.subplots(figsize=(2.5 + 0.45 * len(labels), 2 + 0.45 * len(labels)))
        axis.imshow(counts, cmap="Blues")
        for i, row in enumerate(counts):
            for j, count in enumerate(row):
                axis.text(j, i, str(count), ha="center", va="center",
                          color="white" if count > 0.6 * max(map(max, counts)) else "black")
        axis.set_xticks(range(len(labels)), [str(x)[:16] for x in labels], rotation=45, ha="right")
        axis.set_yticks(range(len(labels)), [str(x)[:16] for x in labels])
        axis.set_xlabel("predicted")
        axis.set_ylabel("gold")
        axis.set_title("confusion matrix on dev")
        path = output_dir / CONFUSION_FIGURE
    elif per_type:
        figure, axis = plt.subplots(figsize=(6, 1 + 0.4 * len(per_type)))
        names = sorted(per_type)
        axis.barh(names, [per_type[n] for n in names], color="tab:blue")
        axis.set_xlim(0, 1)
        axis.set_xlabel("dev F1")
        axis.set_title("F1 per entity type on dev")
        path = output_dir / ENTITY_FIGURE
    else:
        return None
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


__all__ = [
    "plot_task_figure", "CONFUSION_FIGURE", "ENTITY_FIGURE",
    "check_positions", "FineTuningTrainer", "several_trainings", "model_or_builder", "early_stopping", "merge_lora",
    "report", "training_arguments", "trainer_kwargs", "selection_metric", "add_lora", "check_lora_targets",
    "LossWatch", "LossGuard", "EXPLODES_BY", "FLOOR", "start_run", "Run", "resume_checkpoint", "repeated_training",
    "plot_training_curve", "arguments_refused",
]
