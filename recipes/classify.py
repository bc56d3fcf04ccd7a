"""Fine-tune a BERT for sentence or sentence-pair classification: single-label, multi-label or regression.

    bertkit run classify data.train=data/en_sentiment/train.csv data.eval=data/en_sentiment/dev.csv
    bertkit run classify -c classify/zh_sentiment train.learning_rate=3.0e-5 llrd=0.9
    bertkit run classify -c classify/long_docs long_doc.aggregate=max

Columns and the label kind are detected from the files (override with data.text_column=..., data.label_kind=...).
The label map comes from the training split and is saved in the model config; with a dev split the run evaluates
every epoch, keeps the best checkpoint, and (multi-label) tunes the decision threshold on it. Texts longer than
data.max_length follow long_doc (bertkit/tasks/long_documents.py): truncation (head, tail, head_tail) or
overlapping windows (chunk) whose predictions are aggregated per document, so dev metrics always count documents,
never windows; long_doc.aggregate=attention trains a document model instead (bertkit/modeling_document.py): one row
per document holding its windows (at most long_doc.max_windows, 16 when null), pooled by learned attention. What
predict / evaluate need (max_length, columns, long_doc) is saved in the model's config.json.

With a dev split the final model's probabilities are calibrated (calibrate=true: one temperature fitted on dev,
bertkit/calibration.py; metrics.json's `calibration` gives the ECE before and after and the coverage table, `slices`
the dev metrics by length and by head / tail label); predict applies the temperature and, below abstain_below (or
`predict --min-confidence`), abstains. class_weights=auto weighs the loss by inverse label frequency (Trainer's
compute_loss_func, exact under gradient accumulation); data.max_length=auto picks the length from the training texts.
"""

from __future__ import annotations

from dataclasses import asdict

import transformers

from bertkit import (BertkitForSequenceClassification, calibration, checkpoints, families, inspection, losses,
                     tasks, training)
from bertkit.console import capped, say
from bertkit.errors import BertkitError
from bertkit.labels import LabelSpace, label_distribution
from bertkit.modeling_document import BertkitForDocumentClassification
from bertkit.search import search_or_seeds
from bertkit.tasks import classify as task
# the recipe's keys: its Config imports no model stack, so that `bertkit validate` reads it alone
from bertkit.recipe_configs.classify_config import Config


PER_CLASS_PREFIXES = ("f1_", "precision_", "recall_")  # left out of the summary table; metrics.json has them


def inference_settings(cfg: Config, temperature: list[float] | None = None) -> task.Settings:
    """What predict / evaluate need of this run, saved in the model's config.json."""
    return task.Settings(cfg.data.max_length, **asdict(cfg.data.columns), long_doc=cfg.long_doc,
                         temperature=temperature, abstain_below=cfg.abstain_below)


def load_data(cfg: Config, tokenizer):
    """Training and dev splits as model rows (one per window under long_doc.strategy=chunk, else one per example)
    with labels encoded by the training split's label space, and a `doc_id` column: the example each row came from."""
    if not cfg.data.train:
        raise BertkitError("no training data — set data.train=<file> (csv, tsv, json, jsonl, parquet)")
    overrides = inference_settings(cfg).columns()
    train, columns, labels = task.read_examples(cfg.data.train, overrides, None, require_label=True,
                                                label_kind=cfg.data.label_kind, delimiter=cfg.data.label_delimiter)
    dev = task.read_examples(cfg.data.eval, overrides, labels, require_label=True)[0] if cfg.data.eval else None
    if cfg.data.max_length == "auto":
        choose_max_length(cfg, tokenizer, train, columns)
    if labels.kind == "regression" and cfg.abstain_below is not None:
        raise BertkitError("abstain_below: a regression model has no confidence to abstain on — remove it")
    cfg.long_doc.check(cfg.data.max_length, labels.kind)
    splits = [task.encode(tokenizer, split, columns, cfg.data.max_length, cfg.long_doc, name)
              if split is not None else None for name, split in (("train", train), ("dev", dev))]
    say(f"{len(train)} train / {len(dev) if dev else 0} dev examples; text={columns.text}"
        f"{', pair=' + columns.text_pair if columns.text_pair else ''}; {labels.kind} labels: "
        f"{capped(labels.names) if labels.names else 'regression'}")
    hint = inspection.few_labels_hint(label_distribution(train, labels), cfg.data.train, cfg.data.eval)
    if hint and not columns.text_pair:  # the few-shot recipe reads single texts
        say(hint)
    if cfg.long_doc.strategy == "chunk":
        say_windows(cfg, *splits)
    return splits[0], splits[1], labels


def choose_max_length(cfg: Config, tokenizer, train, columns) -> None:
    """data.max_length=auto becomes a number here, from the training texts, and is saved as such (the resolved
    config and the model's settings record the value, not "auto")."""
    pairs = list(train[columns.text_pair]) if columns.text_pair else None
    lengths = inspection.token_lengths(tokenizer, list(train[columns.text]), pairs)
    limit = families.position_limit(checkpoints.task_config(checkpoints.resolve_model(cfg.model)))
    cfg.data.max_length, truncated = inspection.auto_max_length(lengths, limit)
    say(f"data.max_length=auto: {cfg.data.max_length} tokens (the longest training text has {max(lengths)}; "
        f"truncates {truncated:.1%} of training rows)")


def say_windows(cfg: Config, train, dev) -> None:
    """One line on the windows (attention: on the documents, which are the rows, and their window cap)."""
    shape = f"of {cfg.data.max_length} tokens, stride {cfg.long_doc.stride}"
    if not task.uses_attention(cfg.long_doc):
        say(f"long_doc chunk: {len(train)} train windows{f' / {len(dev)} dev windows' if dev else ''} {shape}, "
            f"{cfg.long_doc.aggregate} per document")
        return
    limit = cfg.long_doc.window_limit()
    default = f" (long_doc.max_windows is null: the attention default {limit}; set it to change)" \
        if cfg.long_doc.max_windows is None else ""
    say(f"long_doc attention: {len(train)} train{f' / {len(dev)} dev' if dev else ''} documents, each at most "
        f"{limit} evenly spaced windows{default} {shape}; a batch of per_device_train_batch_size documents runs up "
        f"to {limit}x as many windows through the encoder")


def model_class(cfg: Config):
    """The document model (learned attention over each document's windows) or the sequence classifier."""
    return BertkitForDocumentClassification if task.uses_attention(cfg.long_doc) else BertkitForSequenceClassification


def check_model(cfg: Config, model_path: str) -> None:
    """Before any data is read: the settings this model's family can honour (pooling=mean and the document model
    are bertkit's BERT only), and data.max_length within its positions."""
    config = checkpoints.task_config(model_path, classifier_pooling=cfg.pooling)
    families.model_class(config, model_class(cfg))
    if cfg.data.max_length != "auto":
        training.check_positions(cfg.data.max_length, config)


def build_model(cfg: Config, model_path: str, labels: LabelSpace):
    """The classifier to fine-tune: the label map and pooling in its config, LoRA adapters when lora.enabled."""
    config = checkpoints.task_config(model_path, classifier_pooling=cfg.pooling, **labels.config_kwargs())
    attention = task.uses_attention(cfg.long_doc)
    model = checkpoints.load_pretrained(model_class(cfg), model_path, config=config, ignore_mismatched_sizes=True)
    if not cfg.lora.enabled:
        return model
    return training.add_lora(model, cfg.lora, task_type="SEQ_CLS",
                             modules_to_save=["window_attention"] if attention else None)


def dev_memory(cfg: Config) -> task.DevPredictions | None:
    """The dev predictions of each evaluation by step, for the final evaluation to reuse; none when a search or a
    seed band trains several times on one Trainer (their steps would mix)."""
    return None if training.several_trainings(cfg) else task.DevPredictions()


def prepare_final_model(trainer, cfg: Config, labels: LabelSpace, final: task.FinalEvaluation | None) -> None:
    """Before it is saved: LoRA merged (lora.merge), and what dev decided (the multi-label threshold, the
    temperature) with the inference settings recorded in the model config, where predict / evaluate read them."""
    training.merge_lora(trainer, cfg.lora)
    final_model = trainer.model.base_model.model if cfg.lora.enabled and not cfg.lora.merge else trainer.model
    if labels.kind == "multi":
        labels.threshold = final_model.config.multi_label_threshold = final.threshold if final else None
    settings = inference_settings(cfg, final.temperature if final else None)
    setattr(final_model.config, tasks.SETTINGS_KEY, tasks.settings_dict(settings))


def weighted_loss(cfg: Config, train, labels: LabelSpace) -> losses.ClassWeightedLoss | None:
    """Trainer's compute_loss_func for class_weights (none without); the weights by label name replace `auto` in
    the resolved config, so the run records what it trained with."""
    weights = task.class_weights(cfg.class_weights, task.label_counts(train, labels), len(train), labels)
    if weights is None:
        return None
    cfg.class_weights = weights
    say(f"class weights: {capped([f'{name} {w:g}' for name, w in weights.items()])}")
    return losses.ClassWeightedLoss(list(weights.values()), multi_label=labels.kind == "multi")


def row_counts(train, dev, dev_docs) -> dict:
    """Rows (windows under long_doc chunk) of each split, and the dev documents they came from."""
    return {"train": len(train), "dev": len(dev) if dev is not None else 0,
            "dev_documents": len(task.first_windows(dev_docs)) if dev is not None else 0}


def summary_rows(results: dict) -> dict:
    """The end-of-run table: dev metrics but the per-class ones (metrics.json has them), calibration, the slices,
    and the wall time."""
    rows = {k: v for k, v in results["eval"].items() if not k.startswith(PER_CLASS_PREFIXES)}
    if results.get("calibration"):
        calibrated = results["calibration"]
        rows["ECE raw -> calibrated"] = f"{calibrated['ece_before']:.3f} -> {calibrated['ece']:.3f}"
        rows["coverage at confidence"] = calibration.coverage_line(calibrated["coverage"])
    for group, entries in results.get("slices", {}).get("length", {}).items():
        rows[group] = ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{v} {k}" for k, v in entries.items())
    for name in ("head_labels", "tail_labels"):
        if name in results.get("slices", {}):
            entry = results["slices"][name]
            rows[f"{name.replace('_', ' ')} ({entry['labels']})"] = f"macro_f1 {entry['macro_f1']:.3f}"
    return {**rows, "wall time (s)": results["wall_time_s"]}


def main(cfg: Config) -> dict:
    run = training.start_run(cfg, "classify")  # seed; hold output_dir (an old run is refused unless overwrite=true)
    model_path = checkpoints.resolve_model(cfg.model)
    check_model(cfg, model_path)
    tokenizer = checkpoints.load_tokenizer(model_path)
    train, dev, labels = load_data(cfg, tokenizer)
    (train, _), (dev, dev_docs) = task.pop_doc_ids(train), task.pop_doc_ids(dev)
    memory = dev_memory(cfg)
    # a search or seed band rebuilds the model for every training
    model, model_init = training.model_or_builder(cfg, lambda: build_model(cfg, model_path, labels))

    args = training.training_arguments(cfg.train, cfg.run.output_dir, cfg.run.precision, cfg.run.seed, dev is not None,
                                       task.SELECTION_METRIC[labels.kind])
    trainer = training.FineTuningTrainer(
        model=model, model_init=model_init, args=args, train_dataset=train, eval_dataset=dev,
        processing_class=tokenizer, compute_loss_func=weighted_loss(cfg, train, labels),
        data_collator=(task.DocumentCollator(tokenizer) if task.uses_attention(cfg.long_doc)
                       else transformers.DataCollatorWithPadding(tokenizer)),
        compute_metrics=task.compute_metrics_fn(labels, doc_ids=dev_docs, how=cfg.long_doc.aggregate, memory=memory),
        callbacks=([memory] if memory is not None else []) + training.early_stopping(cfg, dev is not None),
        llrd=cfg.tune.llrd, head_lr=cfg.tune.head_lr)
    with run.training(trainer) as checkpoint:  # the replaced run cleared now; a full disk is one line
        if training.several_trainings(cfg):  # search.trials or seeds: the chosen run's model is left on the trainer
            train_result = search_or_seeds(trainer, cfg)
        else:
            train_result = trainer.train(resume_from_checkpoint=checkpoint)

    final = (task.final_evaluation(trainer, dev, dev_docs, labels, cfg.long_doc.aggregate, memory, cfg.calibrate,
                                   task.label_counts(train, labels)) if dev is not None else None)
    prepare_final_model(trainer, cfg, labels, final)
    selection = training.selection_metric(args, task.SELECTION_METRIC[labels.kind])
    results = run.results(final.metrics if final else {}, train_result, threshold=final.threshold if final else None,
                          selection_metric=selection, rows=row_counts(train, dev, dev_docs),
                          **({"calibration": final.calibration, "slices": final.slices} if final else {}))
    with run.saving(trainer):  # the completion record removed first, written last (rank 0)
        trainer.save_model(str(run.output_dir))  # every process: collective under DDP / FSDP / DeepSpeed
        run.save_files(trainer, results, selection, final.files if final else {})  # metrics.json, curve, config, card
    training.report(cfg, "classify", f"classify: {labels.kind} labels, dev metrics", summary_rows(results),
                    run.output_dir)
    return results
