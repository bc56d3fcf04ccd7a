"""What every recipe does around `transformers.Trainer`: TrainingArguments, LoRA, the LLRD optimizer, resume, and
the files a run leaves behind (metrics.json, training curve, resolved config, model card, completion record)."""

from __future__ import annotations

from ..config import config_to_dict
from ..console import console, is_main_process, run_summary, say
from ..precision import resolve_precision
from ..rundir import CURVE_FILE, METRICS_FILE, RUN_CONFIG_FILE, read_run_config, write_json
from .arguments import selection_metric, trainer_kwargs, training_arguments
from .lora import LoraOptions, add_lora, check_lora_targets
from .optimizer import lr_rows, optimizer_with_llrd, show_learning_rates
from .plots import plot_training_curve
from .run import finish_run, resume_checkpoint, run_trainer, save_run_config, start_run

__all__ = [
    "LoraOptions", "add_lora", "check_lora_targets", "training_arguments", "trainer_kwargs", "selection_metric",
    "optimizer_with_llrd", "lr_rows", "show_learning_rates", "start_run", "resume_checkpoint", "run_trainer",
    "save_run_config", "finish_run", "plot_training_curve",
    # moved: importable from here until every caller imports them from their new homes
    "say", "is_main_process", "console", "run_summary", "resolve_precision", "config_to_dict", "read_run_config",
    "write_json", "RUN_CONFIG_FILE", "METRICS_FILE", "CURVE_FILE",
]
