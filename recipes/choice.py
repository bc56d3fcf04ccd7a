"""Fine-tune a BERT for multiple choice (SWAG / RACE / C3 style): a context, a question and N options.

    bertkit run choice data.train=data/choice/en/train.jsonl data.eval=data/choice/en/dev.jsonl
    bertkit run choice -c choice/zh model=/models/bert-base-chinese

Each option is scored as the pair (context, question + option) through BERT's pooler and one linear unit; a softmax
across the options gives the choice. Rows are {"context", "question", "options": [...], "label": index} and every
example needs the same number of options. With a dev split the run evaluates accuracy every epoch and keeps the
best checkpoint.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import datasets
import transformers

from bertkit import BertkitConfig, BertkitForMultipleChoice
from bertkit.checkpoints import DEFAULT_MODEL, load_tokenizer, resolve_model
from bertkit.checks import check_max_length, check_recipe
from bertkit.options import FineTuning, LoraOptions, RunOptions
from bertkit.tasks import settings_dict
from bertkit.tasks.choice import (MultipleChoiceCollator, Settings, accuracy, compute_metrics_fn, encode,
                                  read_examples)
from bertkit.errors import BertkitError
from bertkit.hub import push_finished_run
from bertkit.config import INLINE
from bertkit.console import load_pretrained, run_summary, say
from bertkit.training import (add_lora, finish_run, optimizer_with_llrd, run_trainer, selection_metric, start_run,
                              training_arguments)


@dataclass
class DataConfig:
    train: str | None = None
    """Training file (jsonl, json, parquet) of {"context", "question", "options": [...], "label": index} rows."""
    eval: str | None = None
    """Dev file: evaluated each epoch, picks the best checkpoint."""
    max_length: int = 128
    """Tokens per (context, question + option) pair, [CLS] and [SEP]s included; the longer segment is cut first."""


@dataclass
class Config:
    model: str = DEFAULT_MODEL
    """Model to fine-tune: a local directory, a Hub id, or all-MiniLM-L6-v2 (embedded)."""
    run: RunOptions = field(default_factory=lambda: RunOptions(output_dir="runs/choice"), metadata=INLINE)
    data: DataConfig = field(default_factory=DataConfig)
    tune: FineTuning = field(default_factory=FineTuning, metadata=INLINE)
    lora: LoraOptions = field(default_factory=LoraOptions)
    train: dict = field(default_factory=lambda: {
        "learning_rate": 5e-5, "num_train_epochs": 3, "per_device_train_batch_size": 8,
        "per_device_eval_batch_size": 32, "warmup_steps": 0.1, "weight_decay": 0.01,
    })
    """transformers.TrainingArguments, passed through (fp16/bf16 come from precision)."""

    def __post_init__(self):  # `bertkit validate` catches values that cannot work, before anything is loaded
        check_max_length(self.data.max_length)
        check_recipe(self, has_eval=self.data.eval is not None)


SELECTION = "accuracy"


def load_data(cfg: Config, tokenizer):
    """Training and dev examples, encoded as N (context, question + option) pairs each."""
    if not cfg.data.train:
        raise BertkitError("no training data — set data.train=<file> (jsonl of context / question / options / label)")
    train = read_examples(cfg.data.train)
    dev = read_examples(cfg.data.eval) if cfg.data.eval else None
    counts = {len(example.options) for example in train + (dev or [])}
    say(f"{len(train)} train / {len(dev) if dev else 0} dev examples, {' / '.join(map(str, sorted(counts)))} "
        "options each")
    return [datasets.Dataset.from_list(encode(tokenizer, split, cfg.data.max_length)) if split else None
            for split in (train, dev)]


def build_model(cfg: Config, model_path: str):
    config = BertkitConfig.from_pretrained(model_path)
    if cfg.data.max_length > config.max_position_embeddings:
        raise BertkitError(f"data.max_length={cfg.data.max_length} is more than the model's "
                           f"{config.max_position_embeddings} positions — set data.max_length<="
                           f"{config.max_position_embeddings}")
    config.bertkit_task_settings = settings_dict(Settings(max_length=cfg.data.max_length))  # for `bertkit predict`
    model = load_pretrained(BertkitForMultipleChoice, model_path, config=config)
    return add_lora(model, cfg.lora, task_type=None, modules_to_save=["classifier"]) if cfg.lora.enabled else model


def main(cfg: Config) -> dict:
    started = time.perf_counter()
    transformers.set_seed(cfg.run.seed)
    start_run(cfg, "choice")  # output_dir: held for this run; an old run there is refused unless overwrite=true
    model_path = resolve_model(cfg.model)
    tokenizer = load_tokenizer(model_path)
    train, dev = load_data(cfg, tokenizer)
    model = build_model(cfg, model_path)
    args = training_arguments(cfg.train, cfg.run.output_dir, cfg.run.precision, cfg.run.seed, dev is not None, SELECTION)
    selection = selection_metric(args, SELECTION)
    callbacks = []
    if cfg.tune.early_stopping_patience and dev is not None:
        callbacks.append(transformers.EarlyStoppingCallback(early_stopping_patience=cfg.tune.early_stopping_patience))
    trainer = transformers.Trainer(
        model=model, args=args, train_dataset=train, eval_dataset=dev, processing_class=tokenizer,
        data_collator=MultipleChoiceCollator(tokenizer), compute_metrics=compute_metrics_fn(), callbacks=callbacks,
        optimizers=(optimizer_with_llrd(model, args, cfg.tune.llrd, cfg.tune.head_lr), None))
    train_result = run_trainer(trainer, cfg)

    metrics = {}
    if dev is not None:
        output = trainer.predict(dev, metric_key_prefix="eval")
        metrics = {**accuracy(output.predictions, output.label_ids), "loss": output.metrics["eval_loss"]}
    if cfg.lora.enabled and cfg.lora.merge:
        trainer.model = trainer.model.merge_and_unload()
    results = {"eval": metrics, "train": {"loss": train_result.training_loss, **train_result.metrics},
               "selection_metric": selection, "wall_time_s": round(time.perf_counter() - started, 1)}
    output_dir = finish_run(trainer, cfg, "choice", results, selection)
    run_summary("choice: dev metrics", {**metrics, "wall time (s)": results["wall_time_s"]}, output_dir, "choice")
    if cfg.run.push:
        push_finished_run(output_dir, cfg.run.push)
    return results
