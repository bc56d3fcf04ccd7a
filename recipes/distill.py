"""Distill a fine-tuned classifier into a smaller, faster student (soft targets + hard labels, optional hidden states).

    bertkit run classify -c classify/en_sentiment && bertkit run distill -c distill/en_sst2_style
    bertkit run distill teacher=runs/en_sentiment data.train=train.csv data.eval=dev.csv student.num_layers=3
    bertkit run distill teacher=runs/sst2 student.layers=[0,2,4] hidden_weight=1.0 data.unlabelled=more_text.txt

The teacher is a bertkit classify (or distill) run directory, or any stock BERT sequence classifier directory
(single-label). The student is, by default, the teacher with half its layers, evenly spaced (student.num_layers=k,
or student.layers=[...] by number); or another checkpoint that reads the teacher's token ids (student.model=...).
Loss (bertkit/distill.py): alpha * T^2 * KL(teacher/T || student/T) + (1 - alpha) * CE(labels), plus hidden_weight *
MSE between mapped hidden states (TinyBERT). data.unlabelled adds transfer text that only the soft targets see. The
student is a normal classify-style run directory: predict, evaluate, export and push work on it.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import datasets
import numpy as np
import torch
import transformers

from bertkit import BertkitForSequenceClassification, checkpoints, distill, families, tasks, training
from bertkit.console import capped, say
from bertkit.errors import BertkitError
from bertkit.labels import LabelSpace
from bertkit.search import search_or_seeds
from bertkit.tasks import classify
# the recipe's keys: its Config imports no model stack, so that `bertkit validate` reads it alone
from bertkit.recipe_configs.distill_config import Config


def inference_settings(cfg: Config) -> classify.Settings:
    """What predict / evaluate need of the student, saved in its config.json (texts are truncated: long_doc head)."""
    return classify.Settings(cfg.data.max_length, **asdict(cfg.data.columns))


def load_data(cfg: Config, tokenizer, labels: LabelSpace):
    """Training rows (labelled, then unlabelled transfer text with labels -100) and dev rows, encoded with the
    teacher's label map."""
    if not cfg.data.train:
        raise BertkitError("no training data — set data.train=<file> (labels spelled as the teacher's label map)")
    overrides = inference_settings(cfg).columns()
    train, columns, _ = classify.read_examples(cfg.data.train, overrides, labels, require_label=True)
    dev = classify.read_examples(cfg.data.eval, overrides, labels, require_label=True)[0] if cfg.data.eval else None
    encoded = [classify.encode(tokenizer, split, columns, cfg.data.max_length, name=name).remove_columns("doc_id")
               if split is not None else None for name, split in (("train", train), ("dev", dev))]
    unlabelled = 0
    if cfg.data.unlabelled:
        extra, extra_columns, _ = classify.read_examples(cfg.data.unlabelled, {**overrides, "label_column": None},
                                                         labels, require_label=False)
        rows = classify.encode(tokenizer, extra, extra_columns, cfg.data.max_length, name="unlabelled")
        rows = rows.remove_columns("doc_id").add_column("labels", [-100] * len(rows)).cast(encoded[0].features)
        encoded[0], unlabelled = datasets.concatenate_datasets([encoded[0], rows]), len(rows)
    say(f"{len(train)} labelled + {unlabelled} unlabelled train / {len(dev) if dev else 0} dev examples; "
        f"labels: {capped(labels.names)}")
    return encoded[0], encoded[1]


def load_teacher(cfg: Config):
    """The teacher, as predict loads a classify run: a full model, or a LoRA adapter (lora.merge=false) applied to its
    base model and merged (not checked as model= is: a teacher is fine-tuned, not to be fine-tuned)."""
    local = Path(cfg.teacher).expanduser()
    path = str(local) if local.is_dir() else checkpoints.resolve_model(cfg.teacher)
    teacher = checkpoints.load_finetuned(BertkitForSequenceClassification, path, "distill teacher")
    if not isinstance(teacher, torch.nn.Module):  # an ONNX export has no layers to take
        raise BertkitError(f"teacher {cfg.teacher} is an ONNX export — give the run directory it was exported from")
    labels = LabelSpace.from_model_config(teacher.config)
    if labels.kind != "single":
        raise BertkitError(f"teacher {cfg.teacher} is a {labels.kind} classifier — distill handles single-label "
                           "classification only")
    return path, teacher, labels


def build_student(cfg: Config, teacher, labels: LabelSpace):
    """The student and the teacher layers it was taken from (None for another checkpoint)."""
    if cfg.student.model:
        path = checkpoints.resolve_model(cfg.student.model)
        config = checkpoints.task_config(path, classifier_pooling=getattr(teacher.config, "classifier_pooling", "cls"),
                                         **labels.config_kwargs())
        student, picked = checkpoints.load_pretrained(BertkitForSequenceClassification, path, config=config,
                                                      ignore_mismatched_sizes=True), None
    else:
        if not families.is_bertkit(teacher):
            raise BertkitError(f"a student taken from the teacher's layers is built for BERT teachers, and "
                               f"{cfg.teacher} is a {families.family_of(teacher.config).name} classifier — give "
                               "student.model=<a smaller checkpoint with the teacher's tokenizer>")
        count = teacher.config.num_hidden_layers
        wanted = max(1, count // 2) if cfg.student.num_layers is None else cfg.student.num_layers
        picked = distill.pick_layers(count, wanted, cfg.student.layers)
        student = distill.student_from_teacher(teacher, picked)
    distill.check_student(student, teacher, cfg.hidden_weight)
    student.config.distilled_from, student.config.distilled_layers = str(cfg.teacher), picked
    setattr(student.config, tasks.SETTINGS_KEY, tasks.settings_dict(inference_settings(cfg)))
    say(f"student: {student.config.num_hidden_layers} of the teacher's {teacher.config.num_hidden_layers} layers"
        f"{f' {picked}' if picked is not None else f' ({cfg.student.model})'}; T={cfg.temperature}, "
        f"alpha={cfg.alpha}, hidden_weight={cfg.hidden_weight}")
    return student, picked


def dev_scores(trainer, model, dev, labels: LabelSpace) -> dict:
    """Dev metrics of `model` (the student, or the teacher) with the trainer's settings."""
    output = transformers.Trainer(model=model, args=trainer.args, eval_dataset=dev,
                                  data_collator=trainer.data_collator).predict(dev)
    return classify.score(classify.probabilities(output.predictions, labels.kind), np.asarray(output.label_ids), labels)


def comparison(trainer, teacher, dev, labels: LabelSpace) -> dict:
    """The results entries that set the student beside its teacher: both models' dev metrics and parameters."""
    return {"teacher_eval": dev_scores(trainer, teacher, dev, labels) if dev is not None else {},
            "parameters": {name: sum(p.numel() for p in model.parameters())
                           for name, model in (("student", trainer.model), ("teacher", teacher))}}


def summary_rows(results: dict, student, teacher) -> dict:
    """The end-of-run table: each dev metric, layers and parameters as student / teacher."""
    metrics, teacher_metrics, sizes = results["eval"], results["teacher_eval"], results["parameters"]
    return {**{k: f"{v:.4f} / {teacher_metrics[k]:.4f}" for k, v in metrics.items()
               if isinstance(v, float) and not k.startswith(("f1_", "precision_", "recall_"))},
            "layers": f"{student.config.num_hidden_layers} / {teacher.config.num_hidden_layers}",
            "parameters": f"{sizes['student']:,} / {sizes['teacher']:,}", "wall time (s)": results["wall_time_s"]}


def main(cfg: Config) -> dict:
    run = training.start_run(cfg, "distill")  # seed; hold output_dir (an old run is refused unless overwrite=true)
    teacher_path, teacher, labels = load_teacher(cfg)
    tokenizer = checkpoints.load_tokenizer(teacher_path)
    train, dev = load_data(cfg, tokenizer, labels)
    student, picked = build_student(cfg, teacher, labels)
    model, model_init = training.model_or_builder(cfg, lambda: build_student(cfg, teacher, labels)[0], model=student)

    args = training.training_arguments(cfg.train, cfg.run.output_dir, cfg.run.precision, cfg.run.seed, dev is not None,
                                       classify.SELECTION_METRIC["single"])
    trainer = distill.DistillationTrainer(
        model=model, model_init=model_init, args=args, train_dataset=train, eval_dataset=dev,
        processing_class=tokenizer, data_collator=transformers.DataCollatorWithPadding(tokenizer),
        compute_metrics=classify.compute_metrics_fn(labels), callbacks=training.early_stopping(cfg, dev is not None),
        llrd=cfg.tune.llrd, head_lr=cfg.tune.head_lr,
        teacher=teacher, options=distill.DistillOptions(cfg.temperature, cfg.alpha, cfg.hidden_weight),
        layer_pairs=distill.layer_map(student.config.num_hidden_layers, teacher.config.num_hidden_layers, picked))
    with run.training(trainer) as checkpoint:  # the replaced run cleared now; a full disk is one line
        if training.several_trainings(cfg):  # search.trials or seeds: a fresh student each, the best one kept
            train_result = search_or_seeds(trainer, cfg)
        else:
            train_result = trainer.train(resume_from_checkpoint=checkpoint)

    metrics = dev_scores(trainer, trainer.model, dev, labels) if dev is not None else {}
    selection = training.selection_metric(args, classify.SELECTION_METRIC["single"])
    results = run.results(metrics, train_result, **comparison(trainer, teacher, dev, labels),
                          selection_metric=selection, teacher=str(cfg.teacher), student_layers=picked,
                          rows={"train": len(train), "dev": len(dev) if dev is not None else 0})
    with run.saving(trainer):  # the completion record removed first, written last (rank 0)
        trainer.save_model(str(run.output_dir))  # every process: collective under DDP / FSDP / DeepSpeed
        run.save_files(trainer, results, selection)  # metrics.json, curve, resolved config, model card
    training.report(cfg, "distill", "distill: dev metrics, student / teacher", summary_rows(results, student, teacher),
                    run.output_dir)
    return results
