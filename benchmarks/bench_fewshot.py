"""Few labels on SST-2: `bertkit run fewshot` (SetFit) against `bertkit run classify` on the same few examples, and
against a plain `setfit` script with the same model and settings.

    python benchmarks/bench_fewshot.py SST2_DIR --per-class 8 16 32 64 --draws 5
    python benchmarks/bench_fewshot.py SST2_DIR --report          # the table from WORK/results.json
    python benchmarks/bench_fewshot.py SST2_DIR --report --write  # ... into benchmarks/results/fewshot.json

SST2_DIR holds SST-2's train.tsv and dev.tsv (sentence<TAB>label, no header). Each draw samples N sentences per class
from train.tsv (seed = the draw); every method trains on those same rows with no dev split (nothing to select or
calibrate on: few labels means no dev set either) and is scored on the same 600 held-out dev.tsv sentences. classify
runs with its defaults (what a user who does not know about few-shot gets); fewshot with its defaults; the plain
script is the setfit README's: SetFitModel.from_pretrained(model) + Trainer(TrainingArguments(batch_size=16,
num_epochs=1)). Results accumulate in WORK/results.json (a cell already measured is not rerun), so the benchmark
runs in parts.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cli_runs import ENV, band, bertkit, read_tsv, write_csv  # noqa: E402
from machine import cpu_model  # noqa: E402

TEST_ROWS = 600
METHODS = ("classify", "fewshot", "plain_setfit")


def draw(train: list[list[str]], per_class: int, seed: int) -> list[list[str]]:
    rng = random.Random(seed)
    rows = []
    for label in sorted({label for _, label in train}):
        pool = [row for row in train if row[1] == label]
        rows += rng.sample(pool, per_class)
    rng.shuffle(rows)
    return rows


def accuracy_of(metrics_file: Path) -> float:
    return float(json.loads(metrics_file.read_text(encoding="utf-8"))["accuracy"])


def run_bertkit(method: str, train_file: Path, test_file: Path, out: Path, seed: int) -> tuple[float, float]:
    """(test accuracy, training wall seconds) of `bertkit run METHOD` on the draw."""
    seconds = bertkit("run", method, f"data.train={train_file}", f"output_dir={out}", f"seed={seed}",
                      "overwrite=true", "--quiet")
    bertkit("evaluate", str(out), str(test_file), "-o", str(out.parent / f"{out.name}_test.json"))
    return accuracy_of(out.parent / f"{out.name}_test.json"), seconds


def run_plain_setfit(train_rows: list[list[str]], test_rows: list[list[str]], seed: int) -> tuple[float, float]:
    """The setfit README's script, in this process (the model is the embedded all-MiniLM-L6-v2)."""
    import os

    os.environ.update(ENV)
    from datasets import Dataset
    from setfit import SetFitModel, Trainer, TrainingArguments

    from bertkit.checkpoints import DEFAULT_MODEL, resolve_model

    started = time.perf_counter()
    model = SetFitModel.from_pretrained(resolve_model(DEFAULT_MODEL))
    data = Dataset.from_dict({"text": [t for t, _ in train_rows], "label": [int(y) for _, y in train_rows]})
    args = TrainingArguments(batch_size=16, num_epochs=1, seed=seed, report_to="none", save_strategy="no",
                             output_dir="/tmp/bench_fewshot_plain")
    Trainer(model=model, args=args, train_dataset=data).train()
    seconds = time.perf_counter() - started
    predicted = model.predict([t for t, _ in test_rows], as_numpy=True)
    return sum(int(p) == int(y) for p, (_, y) in zip(predicted, test_rows)) / len(test_rows), seconds


def measure(sst2: Path, work: Path, sizes: list[int], draws: int, methods: list[str]) -> None:
    results_file = work / "results.json"
    results = json.loads(results_file.read_text()) if results_file.is_file() else {}
    train = read_tsv(sst2 / "train.tsv")
    test_rows = read_tsv(sst2 / "dev.tsv")[:TEST_ROWS]
    test_file = write_csv(test_rows, work / "test.csv")
    for per_class in sizes:
        for seed in range(draws):
            rows = draw(train, per_class, seed)
            train_file = write_csv(rows, work / f"train_{per_class}_{seed}.csv")
            for method in methods:
                key = f"{method}/{per_class}/{seed}"
                if key in results:
                    continue
                if method == "plain_setfit":
                    accuracy, seconds = run_plain_setfit(rows, test_rows, seed)
                else:
                    out = work / f"{method}_{per_class}_{seed}"
                    accuracy, seconds = run_bertkit(method, train_file, test_file, out, seed)
                results[key] = {"accuracy": accuracy, "seconds": round(seconds, 1)}
                print(f"{key}: accuracy {accuracy:.4f}, {seconds:.0f} s", flush=True)
                results_file.write_text(json.dumps(results, indent=1))


def table_rows(results: dict) -> list[list[str]]:
    """One row per size: each method's test accuracy (mean ± sd over its draws) and median wall time, and fewshot's
    lead over classify in points."""
    rows = []
    for per_class in sorted({int(key.split("/")[1]) for key in results}):
        found = {method: [v for k, v in results.items() if k.startswith(f"{method}/{per_class}/")]
                 for method in METHODS}
        draws = min(len(v) for v in found.values())
        row = [str(per_class), str(draws)]
        for method in METHODS:
            values = found[method]
            row += [band([v["accuracy"] for v in values], 3) if values else "-",
                    f"{statistics.median(v['seconds'] for v in values):.0f}" if values else "-"]
        if found["classify"] and found["fewshot"]:
            lead = statistics.mean(v["accuracy"] for v in found["fewshot"]) - statistics.mean(
                v["accuracy"] for v in found["classify"])
            row.append(f"{100 * lead:+.1f}")
        else:
            row.append("-")
        rows.append(row)
    return rows


COLUMNS = ["per class", "draws", "classify", "s", "fewshot", "s", "plain setfit", "s", "fewshot - classify (points)"]


def report(work: Path, write: bool = False) -> None:
    results = json.loads((work / "results.json").read_text())
    rows = table_rows(results)
    print(f"CPU: {cpu_model()}; test: {TEST_ROWS} SST-2 dev sentences; accuracy mean ± sd over draws, training wall "
          "time (s, median; fewshot and classify: the whole `bertkit run`, imports included)")
    for row in [COLUMNS, *rows]:
        print(" | ".join(row))
    if write:
        target = Path(__file__).resolve().parent / "results" / "fewshot.json"
        saved = json.loads(target.read_text(encoding="utf-8"))  # the prose lives in the file; the numbers here
        saved["tables"][0]["rows"] = rows
        saved["machine"] = f"{cpu_model()}, 2 cores; " + saved["machine"].split("; ", 1)[-1]
        target.write_text(json.dumps(saved, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {target}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sst2", type=Path)
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_fewshot"))
    parser.add_argument("--per-class", type=int, nargs="+", default=[8, 16, 32, 64])
    parser.add_argument("--draws", type=int, default=5)
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--report", action="store_true")
    parser.add_argument("--write", action="store_true", help="with --report: the table into results/fewshot.json")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    if not args.report:
        measure(args.sst2, args.work, args.per_class, args.draws, args.methods)
    report(args.work, args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
