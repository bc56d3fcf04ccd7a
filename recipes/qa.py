"""Fine-tune a BERT for extractive question answering (SQuAD v1.1 / v2.0, CMRC-style Chinese).

    bertkit run qa data.train=data/qa/en/train.json data.eval=data/qa/en/dev.json
    bertkit run qa -c qa/zh_cmrc train.num_train_epochs=3

Long contexts are cut into overlapping windows (data.doc_stride); each window learns the answer's token span, or
[CLS] when it does not hold the whole answer. Every epoch the dev windows are mapped back to their questions and
scored by SQuAD EM/F1 over questions (not windows). With unanswerable questions (v2) the null-answer threshold is
tuned on dev to maximise F1 and saved in metrics.json and, with the window / answer settings `bertkit predict`
needs, in config.json (`bertkit_task_settings`, the QA task's Settings).
"""

from __future__ import annotations

import json

import datasets
import transformers

from bertkit import BertkitForQuestionAnswering, checkpoints, training
from bertkit.console import say, warn
from bertkit.errors import BertkitError
from bertkit.search import search_or_seeds
from bertkit.tasks import qa as task
from bertkit.tasks import settings_dict
# the recipe's keys: its Config imports no model stack, so that `bertkit validate` reads it alone
from bertkit.recipe_configs.qa_config import Config


SELECTION_METRIC = "f1"


def read_split(path: str, name: str, strict: bool):
    examples, reading = task.read_examples(path)
    if strict:
        reading.refuse_repairs()
    for line in reading.lines():  # answer_start fixes and skips, each with the first place it happened
        warn(f"{name}: {line}")
    return examples, reading


def load_data(cfg: Config, tokenizer):
    """Examples and windows of both splits, the scoring language and whether "no answer" is predicted."""
    if not cfg.data.train:
        raise BertkitError("no training data — set data.train=<file> (SQuAD-style .json or .jsonl)")
    task.check_window_settings(cfg.data.max_length, cfg.data.doc_stride, cfg.data.max_question_length)
    train_examples, train_report = read_split(cfg.data.train, "train", cfg.data.strict)
    dev_examples, dev_report = read_split(cfg.data.eval, "dev", cfg.data.strict) if cfg.data.eval else (None, None)
    reading = {"train": train_report.counts(), **({"dev": dev_report.counts()} if dev_report else {})}
    language = cfg.language if cfg.language != "auto" else task.detect_language([e.context for e in train_examples])
    allow_no_answer = cfg.allow_no_answer if cfg.allow_no_answer is not None else train_report.unanswerable > 0
    window = dict(max_length=cfg.data.max_length, doc_stride=cfg.data.doc_stride,
                  max_question_length=cfg.data.max_question_length)
    train_windows = task.encode(tokenizer, train_examples, **window)
    dev_windows = task.encode(tokenizer, dev_examples, **window) if dev_examples else None
    say(f"{len(train_examples)} train questions -> {len(train_windows)} windows "
        f"({train_report.unanswerable} unanswerable); "
        f"{len(dev_examples) if dev_examples else 0} dev questions -> "
        f"{len(dev_windows) if dev_windows else 0} windows; language {language}; "
        f"no-answer {'on' if allow_no_answer else 'off'}")
    if train_windows.truncated_questions:
        warn(f"{train_windows.truncated_questions} training questions cut to "
             f"data.max_question_length={cfg.data.max_question_length} tokens")
    return train_examples, train_windows, dev_examples, dev_windows, language, allow_no_answer, reading


def dropped_rows(reading: dict) -> dict:
    """Summary rows for questions whose answers were not in their context (none when nothing was dropped)."""
    return {f"{split} questions skipped": counts["skipped_questions"]
            for split, counts in reading.items() if counts["skipped_questions"]}


def task_settings(cfg: Config, language: str, null_threshold: float | None = None) -> task.Settings:
    """What `bertkit predict` needs to cut windows and pick answers the way training did (saved in config.json)."""
    return task.Settings(max_length=cfg.data.max_length, doc_stride=cfg.data.doc_stride,
                         max_question_length=cfg.data.max_question_length, n_best=cfg.n_best,
                         max_answer_length=cfg.max_answer_length, language=language, null_threshold=null_threshold)


def build_model(cfg: Config, model_path: str, language: str):
    config = checkpoints.task_config(model_path, num_labels=2)
    config.bertkit_task_settings = settings_dict(task_settings(cfg, language))
    training.check_positions(cfg.data.max_length, config)
    model = checkpoints.load_pretrained(BertkitForQuestionAnswering, model_path, config=config,
                                        ignore_mismatched_sizes=True)
    if cfg.lora.enabled:
        model = training.add_lora(model, cfg.lora, task_type="QUESTION_ANS")
    return model


def final_evaluation(trainer, dev, dev_windows, dev_examples, cfg: Config, language: str, allow_no_answer: bool):
    """The final (best) model on dev: answers per question, the null threshold tuned once more, and the answers
    as dev_predictions.jsonl."""
    output = trainer.predict(dev, metric_key_prefix="eval")
    predictions = task.postprocess(*output.predictions[:2], dev_windows, dev_examples, cfg.n_best,
                                   cfg.max_answer_length)
    metrics, threshold = task.tune_and_score(predictions, dev_examples, language, allow_no_answer)
    records = "".join(json.dumps(task.prediction_record(e, p, threshold), ensure_ascii=False) + "\n"
                      for e, p in zip(dev_examples, predictions))
    return metrics, threshold, {"dev_predictions.jsonl": records}


def save_settings(trainer, cfg: Config, language: str, allow_no_answer: bool, threshold: float | None):
    """The final Settings (with the tuned threshold) into the saved model's config; the threshold in force."""
    final_model = trainer.model.base_model.model if cfg.lora.enabled and not cfg.lora.merge else trainer.model
    if allow_no_answer:  # without a dev set, 0.0: answer "" whenever the null score beats the best span
        threshold = threshold if threshold is not None else 0.0
    final_model.config.bertkit_task_settings = settings_dict(task_settings(cfg, language, threshold))
    return threshold


def main(cfg: Config) -> dict:
    run = training.start_run(cfg, "qa")  # seed; hold output_dir (an old run there is refused unless overwrite=true)
    model_path = checkpoints.resolve_model(cfg.model)
    tokenizer = checkpoints.load_tokenizer(model_path)
    train_examples, train_windows, dev_examples, dev_windows, language, allow_no_answer, reading = load_data(
        cfg, tokenizer)
    train = datasets.Dataset.from_dict(train_windows.inputs)
    dev = datasets.Dataset.from_dict(dev_windows.inputs) if dev_windows else None
    model, model_init = training.model_or_builder(cfg, lambda: build_model(cfg, model_path, language))

    args = training.training_arguments(cfg.train, cfg.run.output_dir, cfg.run.precision, cfg.run.seed, dev is not None,
                                       SELECTION_METRIC)
    trainer = training.FineTuningTrainer(
        model=model, model_init=model_init, args=args, train_dataset=train, eval_dataset=dev,
        processing_class=tokenizer, data_collator=transformers.DataCollatorWithPadding(tokenizer),
        compute_metrics=(task.compute_metrics_fn(dev_windows, dev_examples, language, allow_no_answer, cfg.n_best,
                                                 cfg.max_answer_length) if dev is not None else None),
        callbacks=training.early_stopping(cfg, dev is not None), llrd=cfg.tune.llrd, head_lr=cfg.tune.head_lr)
    with run.training(trainer) as checkpoint:  # the replaced run cleared now; a full disk is one line
        if training.several_trainings(cfg):  # search.trials or seeds: the chosen run's model is left on the trainer
            train_result = search_or_seeds(trainer, cfg)
        else:
            train_result = trainer.train(resume_from_checkpoint=checkpoint)

    metrics, threshold, files = (final_evaluation(trainer, dev, dev_windows, dev_examples, cfg, language,
                                                  allow_no_answer) if dev is not None else ({}, None, {}))
    training.merge_lora(trainer, cfg.lora)
    threshold = save_settings(trainer, cfg, language, allow_no_answer, threshold)
    selection = training.selection_metric(args, SELECTION_METRIC)
    results = run.results(metrics, train_result, null_threshold=threshold, language=language,
                          windows={"train": len(train_windows), "dev": len(dev_windows) if dev_windows else 0},
                          questions=reading, selection_metric=selection)
    cfg.language = language  # the resolved config names the language it scored with (and the card's language tag)
    with run.saving(trainer):  # the completion record removed first, written last (rank 0)
        trainer.save_model(str(run.output_dir))  # every process: collective under DDP / FSDP / DeepSpeed
        run.save_files(trainer, results, selection, files)  # metrics.json, curve, resolved config, model card
    training.report(cfg, "qa", f"qa ({language}, {'v2 with no-answer' if allow_no_answer else 'v1'}): dev metrics",
                    {**metrics, **dropped_rows(reading), "wall time (s)": results["wall_time_s"]}, run.output_dir)
    return results
