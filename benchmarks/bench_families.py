"""bertkit's classify recipe against a plain transformers Trainer, one row per encoder family, in one run.

Each family gets a tiny-wide random checkpoint (hidden 256, 4 layers; tests/families.py builds it offline, with a
tokenizer of the family's real kind trained on the sample data). Both sides fine-tune it on data/en_sentiment
(400 train / 120 dev) for one epoch with the same hyperparameters, fp32, evaluating once at the end: the plain side is
the transformers docs' script (AutoModelForSequenceClassification, datasets' map, DataCollatorWithPadding, Trainer);
the bertkit side is `bertkit run classify` (llrd off). Both run as fresh subprocesses, interleaved (plain, bertkit,
plain, bertkit, ... per family and repeat) so machine noise hits them alike. "train s" is the Trainer's
train_runtime (min / median / max over the repeats); x is the plain median over bertkit's: for families that run on
transformers' own class the recipe must add no overhead (x at least 1.0 within the spread); BERT runs on bertkit's
own model, so its x shows the unpadded path too. Random weights: the accuracies are not a quality measure.

    python benchmarks/bench_families.py [--repeats 3] [--rows 160] [--families roberta,modernbert] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the offline family checkpoints the tests use

from families import FAMILIES, tiny_checkpoint  # noqa: E402
from machine import cpu_model  # noqa: E402

DATA = ROOT / "data" / "en_sentiment"
BIN = Path(sys.executable).parent
TRAIN_ARGS = {"learning_rate": 1e-4, "num_train_epochs": 1, "per_device_train_batch_size": 16,
              "per_device_eval_batch_size": 64, "warmup_steps": 0.1, "weight_decay": 0.01, "logging_steps": 10,
              "seed": 42}
MAX_LENGTH = 128

PLAIN = r"""
import json, sys
import numpy as np, transformers
from datasets import load_dataset
model_dir, out, result, train_args = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
raw = load_dataset("csv", data_files={"train": sys.argv[5], "dev": sys.argv[6]})
names = sorted(set(raw["train"]["label"]))
label2id = {name: i for i, name in enumerate(names)}
def preprocess(batch):
    encoded = tokenizer(batch["text"], truncation=True, max_length=int(sys.argv[7]))
    encoded["labels"] = [label2id[name] for name in batch["label"]]
    return encoded
data = raw.map(preprocess, batched=True, remove_columns=["text", "label"])
model = transformers.AutoModelForSequenceClassification.from_pretrained(
    model_dir, num_labels=len(names), id2label=dict(enumerate(names)), label2id=label2id)
args = transformers.TrainingArguments(output_dir=out, report_to="none", save_strategy="no", eval_strategy="no",
                                      use_cpu=True, **train_args)
collator = transformers.DataCollatorWithPadding(tokenizer)
trainer = transformers.Trainer(model=model, args=args, train_dataset=data["train"], eval_dataset=data["dev"],
                               processing_class=tokenizer, data_collator=collator,
                               compute_metrics=lambda p: {"accuracy": float((p[0].argmax(-1) == p[1]).mean())})
train_result = trainer.train()
metrics = trainer.evaluate()
json.dump({"accuracy": metrics["eval_accuracy"], "train_runtime": train_result.metrics["train_runtime"]},
          open(result, "w"))
"""


def yaml_scalar(value) -> str:
    return f"{value:.6e}" if isinstance(value, float) and "e" in repr(value) else repr(value)


def first_rows(work: Path, rows: int) -> Path:
    """The header and the first `rows` training rows (the sample alternates labels, so both stay balanced)."""
    lines = (DATA / "train.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    path = work / "train.csv"
    path.write_text("".join(lines[: rows + 1]), encoding="utf-8")
    return path


def run_once(side: str, model_dir: Path, train_file: Path, work: Path, run_id: int, threads: int) -> dict:
    out, result = work / f"run{run_id}", work / f"result{run_id}.json"
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
           "TOKENIZERS_PARALLELISM": "false", "HF_DATASETS_CACHE": str(work / f"datasets{run_id}")}
    if side == "plain":
        cmd = [sys.executable, "-c", PLAIN, str(model_dir), str(out), str(result), json.dumps(TRAIN_ARGS),
               str(train_file), str(DATA / "dev.csv"), str(MAX_LENGTH)]
    else:
        train = {k: v for k, v in TRAIN_ARGS.items() if k != "seed"}
        cmd = [str(BIN / "bertkit"), "run", "classify", f"model={model_dir}", f"output_dir={out}",
               f"data.train={train_file}", f"data.eval={DATA / 'dev.csv'}", f"data.max_length={MAX_LENGTH}",
               "llrd=1.0", "precision=fp32", f"seed={TRAIN_ARGS['seed']}", "train.eval_strategy=no",
               "train.save_strategy=no"] + [f"train.{k}={yaml_scalar(v)}" for k, v in train.items()]
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{side} on {model_dir.name} failed (exit {done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")
    if side == "plain":
        data = json.loads(result.read_text())
    else:
        metrics = json.loads((out / "metrics.json").read_text())
        data = {"accuracy": metrics["eval"].get("accuracy", float("nan")),
                "train_runtime": metrics["train"]["train_runtime"]}
    return {"wall": wall, "train": data["train_runtime"], "accuracy": data["accuracy"]}


def spread(values: list[float]) -> str:
    return f"{min(values):.1f} / {statistics.median(values):.1f} / {max(values):.1f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--rows", type=int, default=160, help="training rows (the sample has 400)")
    parser.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()
    families = args.families.split(",")
    import torch

    machine = f"{cpu_model()}, {args.threads} threads, torch {torch.__version__}"
    print(f"{machine}; {args.rows} training rows, {args.repeats} repeats, interleaved")
    runs: dict[tuple[str, str], list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        models = {family: tiny_checkpoint(family, work / "models" / family, wide=True) for family in families}
        train_file, run_id = first_rows(work, args.rows), 0
        for _ in range(args.repeats):
            for family in families:
                for side in ("plain", "bertkit"):
                    run_id += 1
                    runs.setdefault((family, side), []).append(run_once(side, models[family], train_file, work,
                                                                        run_id, args.threads))
    print(f"\n{'family':<12}{'plain train s':>22}{'bertkit train s':>22}{'x':>6}{'wall x':>8}")
    rows = []
    for family in families:
        plain, ours = runs[family, "plain"], runs[family, "bertkit"]
        medians = {side: statistics.median(r["train"] for r in runs[family, side]) for side in ("plain", "bertkit")}
        walls = {side: statistics.median(r["wall"] for r in runs[family, side]) for side in ("plain", "bertkit")}
        x, wall_x = medians["plain"] / medians["bertkit"], walls["plain"] / walls["bertkit"]
        print(f"{family:<12}{spread([r['train'] for r in plain]):>22}{spread([r['train'] for r in ours]):>22}"
              f"{x:>6.2f}{wall_x:>8.2f}")
        rows.append({"family": family, "plain_train_s": [r["train"] for r in plain],
                     "bertkit_train_s": [r["train"] for r in ours], "x": round(x, 2), "wall_x": round(wall_x, 2)})
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
