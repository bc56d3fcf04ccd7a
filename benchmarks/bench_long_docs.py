"""Long documents on real data, through the CLI: truncation against windows, and the three ways of turning a
document's windows into one prediction.

    head        [CLS] first tokens [SEP]                    long_doc.strategy=head (the default)
    head_tail   first head_tokens + the end                 long_doc.strategy=head_tail long_doc.head_tokens=L/4
    chunk-mean  windows trained as examples, mean prob.     long_doc.strategy=chunk long_doc.aggregate=mean
    chunk-max   the chunk-mean run's model, per-label max   (evaluated with aggregate=max; no second training)
    chunk-attn  windows encoded together, learned attention long_doc.strategy=chunk long_doc.aggregate=attention
                pooling, one loss per document

For each max_length and seed every variant trains from the embedded MiniLM on the same rows with the same budget
(epochs, learning rate); batch sizes count rows (windows for chunk-mean, documents for chunk-attn, see --attn-batch).
The table prints dev accuracy / macro-F1 mean ± sd over the seeds and the mean wall time of the run.

    python benchmarks/bench_long_docs.py --data BBC_DIR [--rows 300] [--dev-rows N]
        [--lengths 128 256] [--seeds 42 43 44] [--epochs 1] [--lr 5e-5] [--batch 16] [--attn-batch 4] [--max-windows N]
        [--work /tmp/bench_long_docs] [--log RESULTS.jsonl]

--data is a folder with train.csv / val.csv (`text,category`). Every finished run appends one JSON line to --log
(default WORK/results.jsonl) with the settings it ran under; a rerun with the same settings skips the runs already
there, so a stopped benchmark continues where it stopped, and processes running other seeds or lengths at the
same time can share one log (run each with OMP_NUM_THREADS=1 on a small machine).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import time
from pathlib import Path

from cli_runs import band, bertkit  # benchmarks/cli_runs.py

from machine import cpu_model  # benchmarks/machine.py

VARIANTS = ["head", "head_tail", "chunk-mean", "chunk-max", "chunk-attn"]


def subset_csv(source: Path, target: Path, rows: int | None) -> Path:
    """The first `rows` rows of a text,category csv as text,label."""
    with open(source, encoding="utf-8", newline="") as handle:
        records = [(row["text"], row["category"]) for row in csv.DictReader(handle)]
    with open(target, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        writer.writerows(records[:rows])
    return target


def variant_options(variant: str, max_length: int, args) -> list[str]:
    if variant == "head":
        return ["long_doc.strategy=head"]
    if variant == "head_tail":
        return ["long_doc.strategy=head_tail", f"long_doc.head_tokens={max_length // 4}"]
    windows = [f"long_doc.max_windows={args.max_windows}"] if args.max_windows else []
    if variant == "chunk-mean":
        return ["long_doc.strategy=chunk", "long_doc.aggregate=mean", *windows]
    return ["long_doc.strategy=chunk", "long_doc.aggregate=attention", *windows,
            f"train.per_device_train_batch_size={args.attn_batch}"]


def scores(metrics: dict) -> dict:
    return {"accuracy": metrics["accuracy"], "macro_f1": metrics["macro_f1"]}


def max_aggregated(run_dir: Path, dev: Path) -> tuple[dict, float]:
    """The chunk-mean model's dev scores with its windows aggregated by per-label max instead (in this process:
    a run directory's saved settings are part of its completion record, so they are not edited)."""
    import dataclasses

    import numpy as np

    from bertkit.tasks.classify import load_predictor, predict_probabilities, read_examples, score

    started = time.perf_counter()
    classifier = load_predictor(str(run_dir))
    classifier.long_doc = dataclasses.replace(classifier.long_doc, aggregate="max")
    dataset, columns, _ = read_examples(str(dev), classifier.column_overrides, classifier.labels, require_label=True)
    probs = predict_probabilities(classifier, list(dataset[columns.text]), None)
    metrics = score(np.asarray(probs), list(dataset["labels"]), classifier.labels, classifier.labels.threshold)
    return scores(metrics), time.perf_counter() - started


def settings(args) -> dict:
    """What makes two runs comparable: a logged run is reused only under the same settings."""
    return {key: getattr(args, key) for key in ("rows", "dev_rows", "epochs", "lr", "batch", "attn_batch",
                                                 "max_windows")}


def logged_runs(args) -> dict:
    """{(max_length, seed, variant): result} of the runs in --log made under these settings."""
    if not args.log.exists():
        return {}
    lines = [json.loads(line) for line in args.log.read_text().splitlines() if line.strip()]
    return {(line["max_length"], line["seed"], line["variant"]): line["result"] for line in lines
            if line["settings"] == settings(args)}


def record(args, max_length: int, seed: int, variant: str, result: dict) -> None:
    line = {"max_length": max_length, "seed": seed, "variant": variant, "settings": settings(args), "result": result}
    with open(args.log, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(line) + "\n")
    print(json.dumps(line), flush=True)


def one_cell(max_length: int, seed: int, train: Path, dev: Path, args) -> dict:
    """Every variant at one max_length and seed: {variant: {accuracy, macro_f1, time}}, reusing logged runs."""
    done = logged_runs(args)
    common = [f"data.train={train}", f"data.eval={dev}", f"data.max_length={max_length}", f"seed={seed}",
              "precision=fp32", f"train.num_train_epochs={args.epochs}", f"train.learning_rate={args.lr}",
              f"train.per_device_train_batch_size={args.batch}", "train.logging_steps=10", "overwrite=true"]
    cell = {}
    for variant in ("head", "head_tail", "chunk-mean", "chunk-attn"):
        run_dir = args.work / f"{variant}-{max_length}-{seed}"
        if (max_length, seed, variant) not in done:
            elapsed = bertkit("run", "classify", f"output_dir={run_dir}", *common,
                              *variant_options(variant, max_length, args))
            result = {**scores(json.loads((run_dir / "metrics.json").read_text())["eval"]), "time": elapsed}
            record(args, max_length, seed, variant, result)
            done[max_length, seed, variant] = result
        cell[variant] = done[max_length, seed, variant]
        if variant == "chunk-mean" and (max_length, seed, "chunk-max") not in done:
            result, evaluated = max_aggregated(run_dir, dev)
            result = {**result, "time": cell[variant]["time"], "eval_time": evaluated}
            record(args, max_length, seed, "chunk-max", result)
            done[max_length, seed, "chunk-max"] = result
    cell["chunk-max"] = done[max_length, seed, "chunk-max"]
    return cell


def print_table(results: dict, args) -> None:
    print(f"\n{cpu_model()}, {os.cpu_count()} cores; MiniLM, {args.rows} training / {args.dev_rows or 'all'} dev "
          f"documents, {args.epochs} epoch(s), lr {args.lr:g}, batch {args.batch} rows (chunk-attn: {args.attn_batch} "
          f"documents), "
          f"{len(args.seeds)} seeds; chunk windows: stride 64, at most {args.max_windows or 'all (attention: 16)'} "
          f"per document; chunk-max reuses the chunk-mean model")
    print("| max_length | variant | dev accuracy | dev macro-F1 | wall time (s) |\n|---|---|---|---|---|")
    for max_length, cells in results.items():
        for variant in VARIANTS:
            runs = [cell[variant] for cell in cells]
            print(f"| {max_length} | {variant} | {band([r['accuracy'] for r in runs])} | "
                  f"{band([r['macro_f1'] for r in runs])} | {statistics.mean(r['time'] for r in runs):.0f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--dev-rows", type=int, default=None, help="the first N documents of val.csv (default: all)")
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 256])
    parser.add_argument("--seeds", type=int, nargs="+", default=[42, 43, 44])
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--batch", type=int, default=16, help="rows per batch: documents, or windows for chunk-mean")
    parser.add_argument("--attn-batch", type=int, default=4, help="documents per batch for chunk-attn")
    parser.add_argument("--max-windows", type=int, default=None, help="long_doc.max_windows of the chunk variants")
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_long_docs"))
    parser.add_argument("--log", type=Path, default=None, help="results log (default WORK/results.jsonl)")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    args.log = args.log or args.work / "results.jsonl"
    train = subset_csv(args.data / "train.csv", args.work / "train.csv", args.rows)
    dev = subset_csv(args.data / "val.csv", args.work / "val.csv", args.dev_rows)
    results = {length: [] for length in args.lengths}
    for seed in args.seeds:  # seeds outermost: a stopped run still has whole seeds for every cell
        for length in args.lengths:
            results[length].append(one_cell(length, seed, train, dev, args))
    print_table(results, args)


if __name__ == "__main__":
    main()
