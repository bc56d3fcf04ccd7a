"""Fine-tune a BERT for multiple choice (SWAG / RACE / C3 style): a context, a question and N options.

    bertkit run choice data.train=data/choice/en/train.jsonl data.eval=data/choice/en/dev.jsonl
    bertkit run choice -c choice/zh model=/models/bert-base-chinese

Each option is scored as the pair (context, question + option) through BERT's pooler and one linear unit; a softmax
across the options gives the choice. Rows are {"context", "question", "options": [...], "label": index} and every
example needs the same number of options. With a dev split the run evaluates accuracy every epoch and keeps the
best checkpoint.
"""

from __future__ import annotations


import datasets

from bertkit import BertkitForMultipleChoice, checkpoints, training
from bertkit.console import say
from bertkit.errors import BertkitError
from bertkit.search import search_or_seeds
from bertkit.tasks import choice as task
from bertkit.tasks.choice import compute_metrics_fn  # a name of its own: tests/test_search.py swaps it
from bertkit.tasks import settings_dict
# the recipe's keys: its Config imports no model stack, so that `bertkit validate` reads it alone
from bertkit.recipe_configs.choice_config import Config


SELECTION = "accuracy"


def load_data(cfg: Config, tokenizer):
    """Training and dev examples, encoded as N (context, question + option) pairs each."""
    if not cfg.data.train:
        raise BertkitError("no training data — set data.train=<file> (jsonl of context / question / options / label)")
    train = task.read_examples(cfg.data.train)
    dev = task.read_examples(cfg.data.eval) if cfg.data.eval else None
    counts = {len(example.options) for example in train + (dev or [])}
    say(f"{len(train)} train / {len(dev) if dev else 0} dev examples, {' / '.join(map(str, sorted(counts)))} "
        "options each")
    return [datasets.Dataset.from_list(task.encode(tokenizer, split, cfg.data.max_length)) if split else None
            for split in (train, dev)]


def build_model(cfg: Config, model_path: str):
    """The multiple-choice model to fine-tune, max_length saved in its config; LoRA adapters when lora.enabled."""
    config = checkpoints.task_config(model_path)
    training.check_positions(cfg.data.max_length, config)
    config.bertkit_task_settings = settings_dict(task.Settings(max_length=cfg.data.max_length))  # for `bertkit predict`
    model = checkpoints.load_pretrained(BertkitForMultipleChoice, model_path, config=config)
    if not cfg.lora.enabled:
        return model
    return training.add_lora(model, cfg.lora, task_type=None, modules_to_save=["classifier"])


def evaluate_dev(trainer, dev) -> dict:
    """Accuracy and loss of the final model on the dev split."""
    output = trainer.predict(dev, metric_key_prefix="eval")
    return {**task.accuracy(output.predictions, output.label_ids), "loss": output.metrics["eval_loss"]}


def main(cfg: Config) -> dict:
    run = training.start_run(cfg, "choice")  # seed; hold output_dir (an old run there is refused unless overwrite=true)
    model_path = checkpoints.resolve_model(cfg.model)
    tokenizer = checkpoints.load_tokenizer(model_path)
    train, dev = load_data(cfg, tokenizer)
    model, model_init = training.model_or_builder(cfg, lambda: build_model(cfg, model_path))  # search / seeds: rebuilt

    args = training.training_arguments(cfg.train, cfg.run.output_dir, cfg.run.precision, cfg.run.seed, dev is not None,
                                       SELECTION)
    trainer = training.FineTuningTrainer(
        model=model, model_init=model_init, args=args, train_dataset=train, eval_dataset=dev,
        processing_class=tokenizer, data_collator=task.MultipleChoiceCollator(tokenizer),
        compute_metrics=compute_metrics_fn(), callbacks=training.early_stopping(cfg, dev is not None),
        llrd=cfg.tune.llrd, head_lr=cfg.tune.head_lr)
    with run.training(trainer) as checkpoint:  # the replaced run cleared now; a full disk is one line
        if training.several_trainings(cfg):  # search.trials or seeds: the chosen run's model is left on the trainer
            train_result = search_or_seeds(trainer, cfg)
        else:
            train_result = trainer.train(resume_from_checkpoint=checkpoint)

    metrics = evaluate_dev(trainer, dev) if dev is not None else {}
    training.merge_lora(trainer, cfg.lora)
    selection = training.selection_metric(args, SELECTION)
    results = run.results(metrics, train_result, selection_metric=selection)
    with run.saving(trainer):  # the completion record removed first, written last (rank 0)
        trainer.save_model(str(run.output_dir))  # every process: collective under DDP / FSDP / DeepSpeed
        run.save_files(trainer, results, selection)  # metrics.json, curve, resolved config, model card
    training.report(cfg, "choice", "choice: dev metrics", {**metrics, "wall time (s)": results["wall_time_s"]},
                    run.output_dir)
    return results
