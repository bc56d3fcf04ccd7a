"""Task-adaptive pretraining (Gururangan et al. 2020) against fine-tuning alone, on real data, through the CLI.

For each seed: (a) `bertkit run classify` from the embedded MiniLM; (b) `bertkit run mlm` on the same training
split's text (no labels), then the same `bertkit run classify` from its output. Same rows, budget and seed for both
fine-tunings; the table prints dev accuracy / macro-F1 mean ± sd over the seeds and the wall times.

    python benchmarks/bench_tapt.py --data SST2_DIR [--rows 2000] [--seeds 42 43 44]
        [--mlm-epochs 3] [--work /tmp/bench_tapt]

--data is a folder with SST-2's train.tsv / dev.tsv (`sentence<TAB>label`, no header).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
from pathlib import Path

from cli_runs import band, bertkit  # benchmarks/cli_runs.py

CLASSIFY = ["precision=fp32", "data.max_length=64", "train.learning_rate=5.0e-5", "train.num_train_epochs=1",
            "train.per_device_train_batch_size=32", "train.warmup_steps=0.1", "train.logging_steps=20"]


def sst2_csv(source: Path, target: Path, rows: int | None) -> Path:
    """An SST-2 tsv as a csv with a header (text,label), its first `rows` rows."""
    with open(source, encoding="utf-8") as handle:
        records = [line.rstrip("\n").rsplit("\t", 1) for line in handle if line.strip()]
    with open(target, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        writer.writerows(records[:rows])
    return target


def dev_scores(run_dir: Path) -> dict:
    metrics = json.loads((run_dir / "metrics.json").read_text())["eval"]
    return {"accuracy": metrics["accuracy"], "macro_f1": metrics["macro_f1"]}


def one_seed(seed: int, train: Path, dev: Path, work: Path, mlm_epochs: int) -> dict:
    data = [f"data.train={train}", f"data.eval={dev}", f"seed={seed}", *CLASSIFY, "overwrite=true"]
    plain_time = bertkit("run", "classify", f"output_dir={work / f'plain-{seed}'}", *data)
    mlm_dir = work / f"mlm-{seed}"
    mlm_time = bertkit("run", "mlm", f"data.train={train}", "data.text_column=text", "data.mode=line",
                       "data.max_length=64", "data.eval_fraction=0.05", f"seed={seed}", "precision=fp32",
                       "head_lr=1.0e-3", "train.learning_rate=1.0e-4", f"train.num_train_epochs={mlm_epochs}",
                       "train.per_device_train_batch_size=32", "train.logging_steps=50", "masking.whole_word=wordpiece",
                       f"output_dir={mlm_dir}", "overwrite=true")
    tapt_time = bertkit("run", "classify", f"model={mlm_dir}", f"output_dir={work / f'tapt-{seed}'}", *data)
    return {"plain": dev_scores(work / f"plain-{seed}"), "tapt": dev_scores(work / f"tapt-{seed}"),
            "perplexity": json.loads((mlm_dir / "metrics.json").read_text())["eval"],
            "time": {"plain": plain_time, "mlm": mlm_time, "tapt": tapt_time}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[42, 43, 44])
    parser.add_argument("--mlm-epochs", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_tapt"))
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    train = sst2_csv(args.data / "train.tsv", args.work / "train.csv", args.rows)
    dev = sst2_csv(args.data / "dev.tsv", args.work / "dev.csv", None)
    runs = []
    for seed in args.seeds:
        runs.append(one_seed(seed, train, dev, args.work, args.mlm_epochs))
        print(json.dumps({"seed": seed, **runs[-1]}), flush=True)
    print(f"\n{args.rows} training rows, {len(args.seeds)} seeds, MiniLM, classify 1 epoch at max_length 64; "
          f"TAPT = mlm {args.mlm_epochs} epochs on the same rows' text first")
    print("| | dev accuracy | dev macro-F1 | wall time (s) |\n|---|---|---|---|")
    for name in ("plain", "tapt"):
        times = [run["time"][name] + (run["time"]["mlm"] if name == "tapt" else 0) for run in runs]
        print(f"| {'fine-tuning alone' if name == 'plain' else 'TAPT + fine-tuning'} | "
              f"{band([run[name]['accuracy'] for run in runs])} | {band([run[name]['macro_f1'] for run in runs])} | "
              f"{statistics.mean(times):.0f} |")


if __name__ == "__main__":
    main()
