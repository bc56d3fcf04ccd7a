"""Fine-tune a BERT for named-entity recognition: CoNLL column files or JSONL (tokens + tags, or text + spans).

    bertkit run ner data.train=data/ner/en/train.conll data.eval=data/ner/en/dev.conll
    bertkit run ner -c ner/zh_chars model=/models/bert-base-chinese

Tags may be IOB2, IOB1 (converted to IOB2) or BIOES (data.scheme=auto tells IOB2 from BIOES); tags that break the
scheme stop the run with their count and first line, or are repaired with data.repair_tags=true. Labels sit on each
word's first sub-token; long sentences are cut into overlapping windows. The dev split is scored per entity
(seqeval precision / recall / F1, per type), every epoch, and picks the best checkpoint.
"""

from __future__ import annotations


import datasets
import transformers

from bertkit import BertkitForTokenClassification, checkpoints, families, inspection, tasks, training
from bertkit.console import say
from bertkit.errors import BertkitError
from bertkit.search import search_or_seeds
from bertkit.tasks import ner as task
# the recipe's keys: its Config imports no model stack, so that `bertkit validate` reads it alone
from bertkit.recipe_configs.ner_config import Config, check_stride


SELECTION = "f1"


def read_options(cfg: Config, scheme: str | None = None) -> task.ReadOptions:
    return task.ReadOptions(scheme=scheme or cfg.data.scheme, repair=cfg.data.repair_tags,
                            skip_bad=cfg.data.skip_bad_examples, split=cfg.data.split, format=cfg.data.format)


def load_data(cfg: Config, tokenizer):
    """Training and dev sentences (dev read with the training split's scheme) and the label names; data.max_length=auto
    becomes a number here."""
    if not cfg.data.train:
        raise BertkitError("no training data — set data.train=<file> (CoNLL columns or JSONL)")
    train = task.read_examples(cfg.data.train, read_options(cfg))
    dev_scheme = train.scheme if cfg.data.scheme == "auto" else cfg.data.scheme  # IOB1 dev files convert too
    dev = task.read_examples(cfg.data.eval, read_options(cfg, dev_scheme)) if cfg.data.eval else None
    for note in train.notes + (dev.notes if dev else []):
        say(note)
    labels = task.label_names(train.entity_types, train.scheme)
    if cfg.data.max_length == "auto":
        choose_max_length(cfg, tokenizer, train.sentences)
    say(f"{len(train.sentences)} train / {len(dev.sentences) if dev else 0} dev sentences; "
        f"{train.scheme} tags over {', '.join(sorted(train.entity_types)) or 'no entity types'}")
    return train, dev, labels


def choose_max_length(cfg: Config, tokenizer, sentences) -> None:
    """data.max_length=auto from the training sentences' sub-token counts (special tokens included), within the
    model's positions; a sentence over it is windowed, not cut, so the share is of sentences that take 2+ windows."""
    lengths = inspection.word_token_lengths(tokenizer, [s.words for s in sentences])
    limit = families.position_limit(checkpoints.task_config(checkpoints.resolve_model(cfg.model)))
    cfg.data.max_length, longer = inspection.auto_max_length(lengths, limit)
    say(f"data.max_length=auto: {cfg.data.max_length} tokens (the longest training sentence has {max(lengths)}; "
        f"{longer:.1%} of training sentences take more than one window)")
    check_stride(cfg.data.stride, cfg.data.max_length, f", chosen by data.max_length=auto: {cfg.data.max_length}")


def inference_settings(cfg: Config, scheme: str) -> task.Settings:
    """What predict / evaluate need of this run: the scheme the model predicts, how files are read and windowed."""
    return task.Settings(scheme=scheme, file_scheme=cfg.data.scheme, repair_tags=cfg.data.repair_tags,
                         skip_bad_examples=cfg.data.skip_bad_examples, split=cfg.data.split,
                         max_length=cfg.data.max_length, stride=cfg.data.stride, strict=cfg.strict)


def build_model(cfg: Config, model_path: str, labels: list[str], scheme: str):
    config = checkpoints.task_config(model_path, num_labels=len(labels), id2label=dict(enumerate(labels)),
                                      label2id={name: i for i, name in enumerate(labels)})
    config.bertkit_task_settings = tasks.settings_dict(inference_settings(cfg, scheme))  # predict / evaluate
    training.check_positions(cfg.data.max_length, config)
    model = checkpoints.load_pretrained(BertkitForTokenClassification, model_path, config=config,
                                        ignore_mismatched_sizes=True)
    if cfg.lora.enabled:
        model = training.add_lora(model, cfg.lora, task_type="TOKEN_CLS")
    return model


def encode_splits(cfg: Config, tokenizer, train, dev, labels: list[str]) -> tuple[dict, dict]:
    """Each split's sentences as overlapping windows with aligned labels, and those windows as datasets."""
    label2id = {name: i for i, name in enumerate(labels)}
    windows = {name: task.encode(tokenizer, split.sentences, cfg.data.max_length, cfg.data.stride, label2id,
                                 cfg.data.label_all_tokens)
               for name, split in (("train", train), ("dev", dev)) if split is not None}
    return windows, {name: datasets.Dataset.from_list(split.features) for name, split in windows.items()}


def final_evaluation(trainer, dev_set, dev_windows, dev, id2label: dict[int, str], cfg: Config, scheme: str):
    """The final (best) model on dev: entity scores, and seqeval's per-type table as entity_report.txt."""
    logits = trainer.predict(dev_set, metric_key_prefix="eval").predictions
    predicted, gold = task.predicted_tags(logits, dev_windows, id2label), [s.tags for s in dev.sentences]
    return (task.score_tags(predicted, gold, cfg.strict, scheme),
            {"entity_report.txt": task.entity_report(predicted, gold, cfg.strict, scheme)})


def summary_rows(metrics: dict, run: dict) -> dict:
    """The closing table: overall entity scores (per-type figures stay in metrics.json) and the wall time."""
    return {**{k: v for k, v in metrics.items() if not k.startswith(("precision_", "recall_", "number_"))},
            "wall time (s)": run["wall_time_s"]}


def main(cfg: Config) -> dict:
    run = training.start_run(cfg, "ner")  # seed; hold output_dir (an old run there is refused unless overwrite=true)
    model_path = checkpoints.resolve_model(cfg.model)
    tokenizer = checkpoints.load_tokenizer(model_path, words=True)
    train, dev, labels = load_data(cfg, tokenizer)
    id2label = dict(enumerate(labels))
    windows, sets = encode_splits(cfg, tokenizer, train, dev, labels)
    model, model_init = training.model_or_builder(cfg, lambda: build_model(cfg, model_path, labels, train.scheme))

    args = training.training_arguments(cfg.train, cfg.run.output_dir, cfg.run.precision, cfg.run.seed, dev is not None,
                                       SELECTION)
    trainer = training.FineTuningTrainer(
        model=model, model_init=model_init, args=args, train_dataset=sets["train"], eval_dataset=sets.get("dev"),
        processing_class=tokenizer, data_collator=transformers.DataCollatorForTokenClassification(tokenizer),
        compute_metrics=(task.compute_metrics_fn(windows["dev"], dev.sentences, id2label, cfg.strict, train.scheme)
                         if dev is not None else None),
        callbacks=training.early_stopping(cfg, dev is not None), llrd=cfg.tune.llrd, head_lr=cfg.tune.head_lr)
    with run.training(trainer) as checkpoint:  # the replaced run cleared now; a full disk is one line
        if training.several_trainings(cfg):  # search.trials or seeds: the chosen run's model is left on the trainer
            train_result = search_or_seeds(trainer, cfg)
        else:
            train_result = trainer.train(resume_from_checkpoint=checkpoint)

    metrics, files = (final_evaluation(trainer, sets["dev"], windows["dev"], dev, id2label, cfg, train.scheme)
                      if dev is not None else ({}, {}))
    training.merge_lora(trainer, cfg.lora)
    selection = training.selection_metric(args, SELECTION)
    results = run.results(metrics, train_result, scheme=train.scheme, selection_metric=selection)
    with run.saving(trainer):  # the completion record removed first, written last (rank 0)
        trainer.save_model(str(run.output_dir))  # every process: collective under DDP / FSDP / DeepSpeed
        run.save_files(trainer, results, selection, files)  # metrics.json, curve, resolved config, model card
    training.report(cfg, "ner", f"ner: {train.scheme} tags, dev entity scores", summary_rows(metrics, results),
                    run.output_dir)
    return results
