"""What every recipe does around `transformers.Trainer`: TrainingArguments, LoRA, the LLRD optimizer, resume, and
the files a run leaves behind (metrics.json, training curve, resolved config, model card, completion record).

    arguments.py   training_arguments, trainer_kwargs, selection_metric
    lora.py        add_lora, check_lora_targets (LoraOptions: bertkit/options.py)
    optimizer.py   optimizer_with_llrd and its learning-rate table
    run.py         start_run, resume_checkpoint, run_trainer (one training, a search or a seed band), finish_run
    search.py      search.trials: Trainer.hyperparameter_search with Optuna, the best trial's model kept
    seeds.py       seeds=[...]: one training per seed, mean ± sd of the dev metrics, the best seed's model kept
    chosen.py      what both share: the ranking metric, the kept run (Keeper), summary rows
    trainer.py     what every main does: begin, check_positions, fine_tuning_trainer, merge_lora, results,
                   report; FineTuningTrainer (the LLRD AdamW built when training starts)
    plots.py       the training curve
"""

from __future__ import annotations

from .arguments import selection_metric, trainer_kwargs, training_arguments
from .lora import add_lora, check_lora_targets
from .optimizer import lr_rows, optimizer_with_llrd, show_learning_rates
from .plots import plot_training_curve
from .run import finish_run, resume_checkpoint, run_trainer, start_run
from .trainer import (FineTuningTrainer, begin, check_positions, fine_tuning_trainer, merge_lora, report, results,
                      several_trainings)

__all__ = [
    "add_lora", "check_lora_targets", "training_arguments", "trainer_kwargs", "selection_metric",
    "optimizer_with_llrd", "lr_rows", "show_learning_rates", "start_run", "resume_checkpoint", "run_trainer",
    "finish_run", "plot_training_curve", "begin", "check_positions", "FineTuningTrainer", "fine_tuning_trainer",
    "merge_lora", "results", "report", "several_trainings",
]
