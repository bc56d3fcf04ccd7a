"""A hyperparameter search on real data against the default settings, judged on data the search never saw.

    python benchmarks/bench_search.py --data SST2_DIR [--rows 2000] [--trials 8]
        [--seeds 42 43 44] [--work /tmp/bench_search]

SST-2's train.tsv gives the training rows (the first --rows) and, from the rows after them, a search dev split of
--search-dev rows: the search ranks its trials there, and so does every run's best-checkpoint choice. SST-2's
dev.tsv is kept out of all of that as the test split. Steps, all through the CLI:
  1. defaults   `bertkit run classify` with bertkit's defaults, once per seed; each run evaluated on the test split
  2. search     `bertkit run classify search.trials=N` (default ranges); its trials table is printed
  3. searched   the best trial's settings, once per seed; each evaluated on the test split
The table gives test accuracy / macro-F1 mean ± sd over the seeds for 1 and 3, and the wall times.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path

from cli_runs import band, bertkit, read_tsv, write_csv  # benchmarks/cli_runs.py

from machine import cpu_model  # benchmarks/machine.py

SETTING_KEYS = {"learning_rate": "train.learning_rate", "per_device_train_batch_size":
                "train.per_device_train_batch_size", "num_train_epochs": "train.num_train_epochs",
                "warmup_steps": "train.warmup_steps", "llrd": "llrd"}


def test_scores(run_dir: Path, test: Path) -> dict:
    bertkit("evaluate", str(run_dir), str(test), "-o", str(run_dir / "test_metrics.json"))
    metrics = json.loads((run_dir / "test_metrics.json").read_text())
    return {"accuracy": metrics["accuracy"], "macro_f1": metrics["macro_f1"]}


def seed_runs(name: str, settings: list[str], common: list[str], seeds: list[int], test: Path, work: Path) -> list:
    runs = []
    for seed in seeds:
        run_dir = work / f"{name}-{seed}"
        elapsed = bertkit("run", "classify", f"output_dir={run_dir}", f"seed={seed}", *common, *settings)
        runs.append({"seed": seed, "time": elapsed, **test_scores(run_dir, test)})
        print(json.dumps({"variant": name, **runs[-1]}), flush=True)
    return runs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--search-dev", type=int, default=500)
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--seeds", type=int, nargs="+", default=[42, 43, 44])
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_search"))
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    rows = read_tsv(args.data / "train.tsv")
    train = write_csv(rows[:args.rows], args.work / "train.csv")
    search_dev = write_csv(rows[args.rows:args.rows + args.search_dev], args.work / "search_dev.csv")
    test = write_csv(read_tsv(args.data / "dev.tsv"), args.work / "test.csv")
    common = [f"data.train={train}", f"data.eval={search_dev}", "data.max_length=64", "precision=fp32",
              "overwrite=true"]

    defaults = seed_runs("defaults", [], common, args.seeds, test, args.work)
    search_time = bertkit("run", "classify", f"output_dir={args.work / 'search'}", f"seed={args.seeds[0]}",
                                  f"search.trials={args.trials}", *common)
    found = json.loads((args.work / "search" / "metrics.json").read_text())["search"]
    for trial in found["trials"]:
        print(json.dumps(trial), flush=True)
    best = found["best"]
    settings = [f"{SETTING_KEYS[name]}={value}" for name, value in best["params"].items()]
    searched = seed_runs("searched", settings, common, args.seeds, test, args.work)

    print(f"\n{cpu_model()}, {os.cpu_count()} cores; MiniLM, SST-2: {args.rows} training rows, search dev "
          f"{args.search_dev} rows (train.tsv after them), test = dev.tsv; max_length 64; {len(args.seeds)} seeds")
    print(f"search: {args.trials} trials in {search_time:.0f} s; best trial #{best['number']}: "
          f"{' '.join(settings)}")
    print("| settings | test accuracy | test macro-F1 | wall time per run (s) |\n|---|---|---|---|")
    for name, runs in (("bertkit defaults", defaults), ("best of the search", searched)):
        print(f"| {name} | {band([r['accuracy'] for r in runs])} | {band([r['macro_f1'] for r in runs])} | "
              f"{statistics.mean(r['time'] for r in runs):.0f} |")


if __name__ == "__main__":
    main()
