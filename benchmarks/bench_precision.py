"""Dev accuracy and speed of one fine-tuned SST-2 classifier at each inference precision, over seeds.

    python benchmarks/bench_precision.py --data SST2_DIR [--rows 2000] [--seeds 3] [--epochs 3] [--work DIR]

For each seed (42, 43, ...): `bertkit run classify` fine-tunes the embedded all-MiniLM-L6-v2 on the first --rows rows
of the folder's train.tsv (`sentence<TAB>label`, SST-2's files), then `bertkit evaluate RUN dev --precision P` scores
the same model on the folder's dev.tsv at fp32 (exact), bf16 (the model cast to bf16 once as it loads) and int8
(dynamic int8 linear layers); then `bertkit export RUN --quantize int8` and `bertkit evaluate EXPORT dev --precision
P` score ONNX Runtime's fp32 and int8 graphs, the runtimes `bertkit serve` (engine auto) may answer with. The table
gives mean ± sd over seeds of each row's dev accuracy, its difference from PyTorch fp32 on the same model, and the
wall time of evaluate (the whole command: start-up, loading, 872 dev rows).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
from pathlib import Path

from cli_runs import band, bertkit, read_tsv, write_csv  # benchmarks/cli_runs.py

from machine import cpu_model  # benchmarks/machine.py
from tables import markdown_table  # benchmarks/tables.py

MODEL = "all-MiniLM-L6-v2"
PRECISIONS = ("fp32", "bf16", "int8")  # PyTorch, `bertkit evaluate RUN --precision P`
ONNX_PRECISIONS = ("fp32", "int8")  # ONNX Runtime, `bertkit evaluate EXPORT --precision P`
ROWS = (*PRECISIONS, *(f"onnx-{p}" for p in ONNX_PRECISIONS))
LABELS = {"fp32": "PyTorch fp32", "bf16": "PyTorch bf16", "int8": "PyTorch int8 (dynamic)",
          "onnx-fp32": "ONNX Runtime fp32", "onnx-int8": "ONNX Runtime int8 (dynamic)"}


def one_seed(args, seed: int, train: Path, dev: Path) -> dict:
    run_dir = args.work / f"run-{seed}"
    if not (run_dir / "config.json").is_file():
        bertkit("run", "classify", f"model={MODEL}", f"data.train={train}", f"output_dir={run_dir}", f"seed={seed}",
                f"train.num_train_epochs={args.epochs}", "train.save_strategy=no", "data.max_length=64",
                "train.per_device_train_batch_size=32", "overwrite=true")
    result = {"seed": seed}
    for precision in PRECISIONS:
        out = args.work / f"dev-{seed}-{precision}.json"
        result[f"{precision}_s"] = round(bertkit("evaluate", str(run_dir), str(dev), "-o", str(out), "--precision",
                                                 precision), 1)
        result[precision] = json.loads(out.read_text())["accuracy"]
    export_dir = args.work / f"run-{seed}-onnx"
    if not (export_dir / "onnx_export.json").is_file():
        bertkit("export", str(run_dir), "-o", str(export_dir), "--quantize", "int8", "--force")
    for precision in ONNX_PRECISIONS:
        out = args.work / f"dev-{seed}-onnx-{precision}.json"
        result[f"onnx-{precision}_s"] = round(bertkit("evaluate", str(export_dir), str(dev), "-o", str(out),
                                                      "--precision", precision), 1)
        result[f"onnx-{precision}"] = json.loads(out.read_text())["accuracy"]
    print(json.dumps(result), flush=True)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path, help="a folder with train.tsv and dev.tsv (SST-2's)")
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epochs", type=float, default=3)
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_precision"))
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    train = write_csv(read_tsv(args.data / "train.tsv")[:args.rows], args.work / "train.csv")
    dev = write_csv(read_tsv(args.data / "dev.tsv"), args.work / "dev.csv")
    runs = [one_seed(args, 42 + i, train, dev) for i in range(args.seeds)]
    rows = [[LABELS[precision], band([r[precision] for r in runs]),
             "" if precision == "fp32" else band([100 * (r[precision] - r["fp32"]) for r in runs], 2),
             f"{statistics.median(r[f'{precision}_s'] for r in runs):.1f}"] for precision in ROWS]
    table = {"columns": ["runtime and precision (`bertkit evaluate --precision`)", "SST-2 dev accuracy",
                         "difference from fp32 (points)", "evaluate wall time (s, median)"], "rows": rows}
    setup = (f"{MODEL} fine-tuned by `bertkit run classify` on the first {args.rows:,} rows of {args.data.name}'s "
             f"train.tsv ({args.epochs:g} epochs, max_length 64, batch 32, precision auto), one model per seed, each "
             f"evaluated on the dev split ({len(read_tsv(args.data / 'dev.tsv'))} rows) at every precision in PyTorch, "
             "then "
             "exported (`bertkit export --quantize int8`) and evaluated in ONNX Runtime (fp32 and int8 graphs: what "
             "`bertkit serve` answers with when its engine picks ONNX Runtime); "
             f"{len(runs)} seeds, mean ± sd.")
    title = "Inference precision: SST-2 dev accuracy at fp32, bf16 and int8, in PyTorch and ONNX Runtime"
    result = {"id": "precision", "order": 8, "title": title,
              "command": [f"python benchmarks/bench_precision.py --data SST2_DIR --seeds {len(runs)}"],
              "script": "benchmarks/bench_precision.py", "machine": f"{cpu_model()}, {os.cpu_count()} cores",
              "date": datetime.date.today().isoformat(), "setup": setup, "tables": [table], "notes": [], "runs": runs}
    out = Path(__file__).parent / "results" / "precision.json"
    out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(f"\n{setup}\nresults in {out}\n" + "\n".join(markdown_table(table)))


if __name__ == "__main__":
    main()
