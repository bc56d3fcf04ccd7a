"""Few-shot classification (SetFit): a classifier from a few labelled texts per class.

    bertkit run fewshot -c fewshot/en_sentiment
    bertkit run fewshot data.train=few.csv data.eval=dev.csv
    bertkit run fewshot data.train=few.jsonl data.label_kind=multi   # several labels per text: one-vs-rest heads

The same files, columns and label kinds as classify (single-label and multi-label; a sentence pair is refused: join
the two texts), but a different method, the `setfit` package's (Tunstall et al. 2022): the sentence-embedding body
(all-MiniLM-L6-v2 by default: it is one) is fine-tuned contrastively on pairs drawn from the labelled texts, then a
logistic-regression head is fitted on its vectors. With 8-64 texts per class it beats fine-tuning a fresh
classification head by a wide margin (docs/benchmarks.md#fewshot); with thousands, use classify.

With a dev split the trained model is measured there, a temperature is fitted so that its probabilities match how
often it is right (calibrate=true), and a multi-label threshold is tuned. The saved directory is SetFit's own folder
(`SetFitModel.from_pretrained(path)` loads it without bertkit); predict, evaluate, serve, report and push take it as
they take a classify run.
"""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import numpy as np
import torch
import transformers
from setfit import SetFitModel, Trainer, TrainingArguments

from bertkit import checkpoints, rundir, tasks, training
from bertkit.console import capped, is_main_process, run_log, say
from bertkit.errors import BertkitError
from bertkit.search import seed_band, show_band
from bertkit.tasks import fewshot as task
from bertkit.tasks.classify import label_counts
from bertkit.tasks.embed import use_bertkit_backbone
# the recipe's keys: its Config imports no model stack, so that `bertkit validate` reads it alone
from bertkit.recipe_configs.fewshot_config import Config


def inference_settings(cfg: Config, labels=None, final: task.DevEvaluation | None = None) -> task.Settings:
    """What predict / evaluate / serve need besides the SetFit folder, saved in config.json."""
    return task.Settings(label_kind=labels.kind if labels else "single",
                         threshold=(final.threshold if final and final.threshold else task.DEFAULT_THRESHOLD),
                         text_column=cfg.data.columns.text_column, label_column=cfg.data.columns.label_column,
                         temperature=final.temperature if final else None, abstain_below=cfg.abstain_below)


def load_data(cfg: Config):
    """Training and dev splits read as classify reads them, labels encoded by the training split's label space."""
    if not cfg.data.train:
        raise BertkitError("no training data — set data.train=<file> (a text and a label column; csv, jsonl, ...)")
    overrides = inference_settings(cfg).columns()
    train, columns, labels = task.read_examples(cfg.data.train, overrides, None, require_label=True,
                                                label_kind=cfg.data.label_kind, delimiter=cfg.data.label_delimiter)
    if labels.kind == "regression":
        raise BertkitError(f"{cfg.data.train}: the labels are numbers (regression), which the few-shot method does "
                           "not fit — use `bertkit run classify`, or give class names (label_kind=single)")
    task.check_few_shot_labels(train, labels)
    dev = task.read_examples(cfg.data.eval, overrides, labels, require_label=True)[0] if cfg.data.eval else None
    counts = label_counts(train, labels)
    say(f"{len(train)} train / {len(dev) if dev else 0} dev texts; text={columns.text}; {labels.kind} labels, "
        f"rows per label: {capped([f'{name} {count}' for name, count in zip(labels.names, counts)])}")
    return train, dev, columns, labels


def build_model(cfg: Config, model_path: str, labels) -> SetFitModel:
    """The sentence-embedding body (a plain BERT gets mean pooling, as SetFit does) with a fresh logistic-regression
    head per label kind (one-vs-rest for multi-label); where the body is BERT, bertkit's own runs inside it, as in
    the embed recipe."""
    strategy = "one-vs-rest" if labels.kind == "multi" else None
    model = SetFitModel.from_pretrained(model_path, labels=list(labels.names), multi_target_strategy=strategy,
                                        local_files_only=True)
    use_bertkit_backbone(model.model_body, model_path)  # bertkit's BERT (unpadded) trains it; saved stock all the same
    if cfg.data.max_length:
        model.model_body.max_seq_length = cfg.data.max_length
    cfg.data.max_length = int(model.model_body.max_seq_length)  # the resolved config records what trained
    return model


def training_arguments(cfg: Config, seed: int) -> TrainingArguments:
    """setfit's arguments: the contrastive phase's batch, epochs, pairs and learning rate; nothing saved midway
    (the run saves its model once, when it is finished)."""
    return TrainingArguments(output_dir=str(cfg.run.output_dir), batch_size=cfg.batch_size, num_epochs=cfg.epochs,
                             num_iterations=cfg.num_iterations, body_learning_rate=cfg.learning_rate,
                             seed=seed, report_to="none", save_strategy="no", eval_strategy="no",
                             show_progress_bar=False, logging_steps=10)


class LossLines(transformers.TrainerCallback):
    """The contrastive phase's loss as bertkit lines (train.log keeps them), in place of transformers' progress bar
    and printed dicts; setfit calls it with its own arguments, so it reads only the step and the logs."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "embedding_loss" in logs:
            say(f"step {state.global_step}/{state.max_steps}  loss {float(logs['embedding_loss']):.4f}")
            # train.log's logged dicts, as every Trainer recipe writes them: what `bertkit app` draws while it runs
            run_log.write("logged " + json.dumps({"step": state.global_step, "loss": logs["embedding_loss"], **logs},
                                                 default=str))


def quiet(trainer: Trainer) -> None:
    """Of what setfit and transformers print while training, only bertkit's lines stay: no progress bar, printed
    dict or pin_memory warning (on a machine without an accelerator to pin for)."""
    st_trainer = trainer.st_trainer
    st_trainer.remove_callback(transformers.trainer_callback.ProgressCallback)
    st_trainer.remove_callback(transformers.trainer_callback.PrinterCallback)
    st_trainer.add_callback(LossLines())
    st_trainer.args.dataloader_pin_memory = st_trainer.args.dataloader_pin_memory and torch.cuda.is_available()


def save_settings(output_dir, labels, settings: task.Settings) -> None:
    """bertkit's settings and the label names in the body's config.json: stock libraries ignore the first, and the
    second names the classes there too (the card's label table reads it)."""
    path = output_dir / "config.json"
    config = rundir.read_config_json(path)
    config.update(id2label=dict(enumerate(labels.names)), label2id={n: i for i, n in enumerate(labels.names)},
                  **{tasks.SETTINGS_KEY: tasks.settings_dict(settings)})
    rundir.write_json(path, config)


def train_once(cfg: Config, model: SetFitModel, train, columns, seed: int) -> Trainer:
    """One SetFit training of a fresh model: the contrastive pairs, then the head on the tuned vectors."""
    trainer = Trainer(model=model, args=training_arguments(cfg, seed), train_dataset=task.encode(train, columns))
    quiet(trainer)
    with rundir.disk_full_guard(cfg.run.output_dir, "the training"):
        trainer.train()
    return trainer


def dev_evaluation(cfg: Config, model: SetFitModel, dev, columns, labels) -> task.DevEvaluation | None:
    if dev is None:
        return None
    raw = np.asarray(model.predict_proba(list(dev[columns.text]), as_numpy=True, show_progress_bar=False))
    return task.dev_evaluation(raw, np.asarray(dev["labels"]), labels, cfg.calibrate)


def main(cfg: Config) -> dict:
    run = training.start_run(cfg, "fewshot")  # seed; hold output_dir (an old run is refused unless overwrite=true)
    model_path = checkpoints.resolve_model(cfg.model)
    train, dev, columns, labels = load_data(cfg)
    logging.getLogger("setfit").setLevel(logging.ERROR)  # "no model_head.pkl: a random head": it is a fresh one
    selection = task.SELECTION_METRIC[labels.kind]
    if is_main_process():
        rundir.begin(cfg.run.output_dir, say)  # the replaced run cleared now
        run_log.open(cfg.run.output_dir)
    if cfg.seeds:
        say(f"seed band: {len(cfg.seeds)} trainings (seeds {', '.join(map(str, cfg.seeds))}), the best dev "
            f"{selection} kept")
    kept, band_runs = None, []
    for seed in cfg.seeds or [cfg.run.seed]:
        model = build_model(cfg, model_path, labels)
        if kept is None:
            say(f"model: SetFit ({training.implementation_of(model.model_body[0].auto_model)} body, "
                "logistic-regression head)")
        trainer = train_once(cfg, model, train, columns, seed)
        final = dev_evaluation(cfg, model, dev, columns, labels)
        if cfg.seeds:
            band_runs.append({"seed": seed, "eval": {k: v for k, v in final.metrics.items()
                                                     if isinstance(v, (int, float))}})
        if kept is None or (cfg.seeds and final.metrics[selection] > kept[3].metrics[selection]):
            kept = (seed, model, trainer, final)
    seed, model, trainer, final = kept
    band = {"seeds": seed_band(band_runs, selection, seed)} if cfg.seeds else {}
    if band:
        show_band(band["seeds"])

    history = trainer.st_trainer.state.log_history
    for entry in history:  # the contrastive loss under the name the curve, the report and diagnose read
        if "embedding_loss" in entry:
            entry.setdefault("loss", entry["embedding_loss"])
    ended = next((entry for entry in reversed(history) if "train_loss" in entry), {})
    train_result = SimpleNamespace(training_loss=ended.get("train_loss"),
                                   metrics={k: v for k, v in ended.items() if k.startswith("train_")})
    results = run.results(final.metrics if final else {}, train_result, selection_metric=selection,
                          threshold=final.threshold if final else None, method="setfit",
                          rows={"train": len(train), "dev": len(dev) if dev is not None else 0},
                          **({"calibration": final.calibration} if final and final.calibration else {}), **band)
    with run.saving(trainer.st_trainer):  # the completion record removed first, written last
        model.save_pretrained(str(run.output_dir))  # SetFit's folder: body, model_head.pkl, config_setfit.json
        save_settings(run.output_dir, labels, inference_settings(cfg, labels, final))
        run.save_files(trainer.st_trainer, results, selection, final.files if final else {})
    rows = {k: v for k, v in results["eval"].items() if not k.startswith(("precision_", "recall_", "f1_"))}
    training.report(cfg, "fewshot", f"fewshot: {labels.kind} labels, dev metrics",
                    {**rows, "wall time (s)": results["wall_time_s"]}, run.output_dir)
    return results
