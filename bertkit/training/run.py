"""A run from start to finish around `transformers.Trainer`: hold the run directory, resume, train, then save what a
run leaves behind (model, metrics.json, curve, resolved config, model card) and, last, its completion record."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import transformers
import yaml

from .. import rundir
from ..config import config_to_dict
from ..console import is_main_process, run_log, say, use_display
from ..errors import BertkitError
from ..model_card import render_model_card
from ..rundir import CURVE_FILE, LOG_HISTORY_FILE, METRICS_FILE, save_run_config, write_json
from .plots import plot_training_curve

logger = logging.getLogger("bertkit")


def start_run(cfg, recipe: str) -> None:
    """First thing a recipe's main does, before loading anything (bertkit/rundir): hold output_dir for this run,
    refuse to replace a run there unless overwrite=true, refuse resume=true from another run's checkpoints.
    `run_trainer` then clears the replaced run and writes the fingerprint. Rank 0 only: it is the one that writes."""
    config = config_to_dict(cfg)
    run_log.start(f"bertkit run {recipe}, output_dir {cfg.run.output_dir}")  # into train.log once training starts
    run_log.write("resolved config:\n" + yaml.safe_dump(config, sort_keys=False, allow_unicode=True).rstrip())
    if not is_main_process():
        return
    rundir.start(cfg.run.output_dir, recipe, config, overwrite=cfg.run.overwrite,
                 resume=cfg.run.resume, say=say)


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
    """trainer.train(), resuming as cfg.run.resume says; or a hyperparameter search (search.trials, search.py) or
    a seed band (seeds, seeds.py), which leave the chosen model on `trainer`. A full disk while saving a checkpoint
    is one line saying where and which checkpoint was kept."""
    repeated = repeated_training(trainer, cfg)
    checkpoint = resume_checkpoint(cfg.run.resume, cfg.run.output_dir)
    if checkpoint:
        say(f"resuming from {checkpoint}")
    if is_main_process():
        # the old run that overwrite=true replaces goes now, not before a typo is found
        rundir.begin(cfg.run.output_dir, say)
        run_log.open(cfg.run.output_dir)  # the lines held since start_run, then everything as it comes
    use_display(trainer)
    with rundir.disk_full_guard(cfg.run.output_dir, "a checkpoint"):
        if repeated is not None:
            return repeated()
        return trainer.train(resume_from_checkpoint=checkpoint)


def repeated_training(trainer: transformers.Trainer, cfg):
    """The search or seed band cfg asks for, as a function to call; None for one training. Refused (before the old
    run is cleared) for a recipe whose trainer cannot rebuild its model."""
    tune = getattr(cfg, "tune", None)
    key = ("search.trials" if tune is not None and tune.search.trials else
           "seeds" if tune is not None and tune.seeds else None)
    if key is None:
        return None
    if trainer.model_init is None:
        raise BertkitError(f"{key} is not available for this recipe (its trainer cannot rebuild the model for every "
                           f"run) — remove {key}; ner, qa, choice, classify and distill support it")
    if key == "search.trials":
        from .search import load_optuna, run_search

        load_optuna()  # a missing optuna is said now, before the old run is cleared
        return lambda: run_search(trainer, cfg)
    from .seeds import run_seeds

    return lambda: run_seeds(trainer, tune.seeds)


def finish_run(trainer: transformers.Trainer, cfg, recipe: str, metrics: dict, metric: str | None,
               extra_files: dict | None = None) -> Path:
    """Save model + tokenizer, metrics.json, `extra_files` (name -> text, JSON data, or a function that writes the
    path it is given), the curve, the resolved config and the model card; then, last, the completion record
    (bertkit/rundir) that makes the directory a finished run, and let go of the directory."""
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
        write_json(output_dir / LOG_HISTORY_FILE, trainer.state.log_history)  # read by `bertkit diagnose`
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
    try:
        (output_dir / "README.md").write_text(render_model_card(output_dir), encoding="utf-8")
    except BertkitError as error:  # the model is saved; a card problem must not lose the run
        logger.warning("model card not written: %s", error)


__all__ = ["start_run", "resume_checkpoint", "run_trainer", "finish_run"]
