"""Batch prediction of a file, as a user runs it: `bertkit predict MODEL_DIR INPUT.csv -o OUT.jsonl` against the
loops a user would write instead, same MiniLM 2-label classifier (bench_http.build_models: the classifier directory
and its `bertkit export --quantize int8` folder), in texts/s.

Variants: `bertkit` (predict's default --precision), `bertkit-auto`, `bertkit-int8`, `bertkit-fp32` (that
--precision), each the installed `bertkit` command (BERTKIT_CACHE under --workdir, HF_HUB_OFFLINE=1); `onnx-int8`
(ONNX Runtime on the export's int8 graph: AutoTokenizer, batches of 64 in file order, padding, truncation at 128,
session.run, softmax, argmax) and `pipeline` (`transformers.pipeline("text-classification")` called on the list
with batch_size 64, truncation at 128), each in a process of its own (this script with --child) so that nothing of
this process's torch competes with them.

Every variant is timed as a whole command (process start and model load included) on the first --rows sentences of
SST-2's train.tsv, and again on the first 10: "whole" is rows / seconds of the big run, "steady" is the per-text
rate of the difference (rows - 10) / (big - small seconds), which leaves the startup out. The children also report
their own loop alone (after loading), "loop". Variants are interleaved (A, B, C, ..., A, B, C) --repeats times; each
cell prints min / median / max, and the ratios to onnx-int8 and to pipeline are taken per repeat, against the run
of the same repeat. "agree" is the fraction of texts whose label equals bertkit-fp32's.

The SST-2 file is read where it is; the CSV the runs take (a `text` column), the models and the outputs go in
--workdir.

    python benchmarks/bench_predict.py --sst2 ../shared/data/real/en_sst2/train.tsv [--rows 10000] [--repeats 3]
        [--variants bertkit,bertkit-int8,...] [--workdir /tmp/bench_predict] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

BIN = Path(sys.executable).parent
VARIANTS = ("bertkit", "bertkit-auto", "bertkit-int8", "bertkit-fp32", "onnx-int8", "pipeline")
CHILDREN = ("onnx-int8", "pipeline")
SMALL = 10  # rows of the small file: its run is (almost) all startup
BATCH, MAX_LENGTH = 64, 128


# ------------------------------------------------------------------------------------------- the loops a user writes


def child(kind: str, model: str, input_csv: str, out: str) -> None:
    """Run one of the user's loops on the CSV's texts; write the labels and the load / loop seconds to `out`."""
    began = time.perf_counter()
    with open(input_csv, newline="", encoding="utf-8") as handle:
        texts = [row["text"] for row in csv.DictReader(handle)]
    if kind == "pipeline":
        import transformers

        pipe = transformers.pipeline("text-classification", model=model, device="cpu")
        loaded = time.perf_counter()
        labels = [r["label"] for r in pipe(texts, batch_size=BATCH, truncation=True, max_length=MAX_LENGTH)]
    else:
        import numpy as np
        import onnxruntime
        import transformers

        export = json.loads((Path(model) / "onnx_export.json").read_text())
        session = onnxruntime.InferenceSession(str(Path(model) / export["files"]["int8"]),
                                               providers=["CPUExecutionProvider"])
        tokenizer = transformers.AutoTokenizer.from_pretrained(model)
        id2label = json.loads((Path(model) / "config.json").read_text())["id2label"]
        names = {i.name for i in session.get_inputs()}
        loaded = time.perf_counter()
        labels = []
        for start in range(0, len(texts), BATCH):
            encoded = tokenizer(texts[start:start + BATCH], truncation=True, max_length=MAX_LENGTH, padding=True,
                                return_tensors="np")
            logits = session.run(None, {k: v.astype(np.int64) for k, v in encoded.items() if k in names})[0]
            probs = np.exp(logits - logits.max(-1, keepdims=True))
            probs /= probs.sum(-1, keepdims=True)
            labels += [id2label[str(int(i))] for i in probs.argmax(-1)]
    done = time.perf_counter()
    Path(out).write_text(json.dumps({"labels": labels, "load_s": loaded - began, "loop_s": done - loaded}))


# ------------------------------------------------------------------------------------------------------------- runs


def run(variant: str, model_dir: str, export_dir: str, input_csv: Path, out_dir: Path, env: dict) -> dict:
    """One whole command on one file: its wall seconds, the labels it wrote, and (children) its loop's seconds."""
    if variant in CHILDREN:
        out = out_dir / f"{variant}-{input_csv.stem}.json"
        command = [sys.executable, str(Path(__file__).resolve()), "--child", variant, "--model",
                   export_dir if variant == "onnx-int8" else model_dir, "--input", str(input_csv), "--out", str(out)]
    else:
        out = out_dir / f"{variant}-{input_csv.stem}.jsonl"
        precision = variant.removeprefix("bertkit").removeprefix("-")
        command = [str(BIN / "bertkit"), "predict", model_dir, str(input_csv), "-o", str(out)]
        command += ["--precision", precision] if precision else []
    out.unlink(missing_ok=True)
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode:
        sys.exit(f"{variant} failed ({' '.join(command)}):\n{done.stderr[-3000:]}")
    if variant in CHILDREN:
        result = json.loads(out.read_text())
        return {"seconds": seconds, "labels": result["labels"], "load_s": result["load_s"], "loop_s": result["loop_s"]}
    with open(out, encoding="utf-8") as handle:
        return {"seconds": seconds, "labels": [json.loads(line)["label"] for line in handle if line.strip()]}


def spread(values: list[float], fmt: str = "{:,.1f}") -> str:
    values = sorted(values)
    if not values:
        return "-"
    if len(values) == 1:
        return fmt.format(values[0])
    return " / ".join(fmt.format(v) for v in (values[0], statistics.median(values), values[-1]))


def print_table(results: dict, agreement: dict, rows: int) -> None:
    print(f"\ntexts/s on {rows:,} texts (min / median / max over repeats): whole = the command, startup included; "
          f"steady = ({rows:,} - {SMALL}) / (seconds - seconds on {SMALL} texts); loop = the child's loop alone. "
          "Ratios per repeat; agree = labels equal to bertkit-fp32's")
    header = (f"{'variant':<13} {'whole':>20} {'steady':>20} {'loop':>20} {f'{SMALL}-row s':>17} "
              f"{'whole x onnx':>18} {'whole x pipe':>18} {'steady x onnx':>18} {'steady x pipe':>18} {'agree':>7}")
    print(header)
    for variant, runs in results.items():
        cells = []
        for key in ("whole", "steady"):
            for reference in ("onnx-int8", "pipeline"):
                ref = results.get(reference)
                cells.append(spread([r[key] / b[key] for r, b in zip(runs, ref)], "{:.2f}x")
                             if ref and variant != reference else "-")
        agree = f"{agreement[variant]:.4f}" if variant in agreement else "-"
        print(f"{variant:<13} {spread([r['whole'] for r in runs]):>20} {spread([r['steady'] for r in runs]):>20} "
              f"{spread([r['loop'] for r in runs if 'loop' in r]):>20} "
              f"{spread([r['small_s'] for r in runs], '{:.2f}'):>17} {cells[0]:>18} {cells[1]:>18} {cells[2]:>18} "
              f"{cells[3]:>18} {agree:>7}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sst2", help="SST-2's train.tsv (sentence<TAB>label, no header)")
    parser.add_argument("--rows", type=int, default=10000, help="the first ROWS sentences (default 10000)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--workdir", default="/tmp/bench_predict")
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument("--child", choices=CHILDREN, help=argparse.SUPPRESS)  # this script as one user loop
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.model, args.input, args.out)
        return
    if not args.sst2:
        parser.error("--sst2 PATH (SST-2's train.tsv) is needed")
    if args.rows <= SMALL:
        parser.error(f"--rows must be above {SMALL} (the small file's rows)")
    variants = args.variants.split(",")
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        parser.error(f"unknown variants {sorted(unknown)}: use {', '.join(VARIANTS)}")

    from bench_http import build_models, machine_line
    from cli_runs import read_tsv, write_csv

    print(machine_line(), flush=True)
    workdir = Path(args.workdir).resolve()
    texts = [row[0] for row in read_tsv(Path(args.sst2))[:args.rows]]
    if len(texts) < args.rows:
        sys.exit(f"{args.sst2} has {len(texts)} sentences, fewer than --rows {args.rows}")
    big = write_csv([[t] for t in texts], workdir / f"sst2-{args.rows}.csv", header=("text",))
    small = write_csv([[t] for t in texts[:SMALL]], workdir / f"sst2-{SMALL}.csv", header=("text",))
    model_dir, export_dir = build_models(workdir, need_onnx=True)
    out_dir = workdir / "out"
    out_dir.mkdir(exist_ok=True)
    env = {**os.environ, "BERTKIT_CACHE": str(workdir / "cache"), "HF_HUB_OFFLINE": "1"}
    print(f"{args.rows:,} texts of {args.sst2} (and the first {SMALL}); variants {variants}; repeats {args.repeats}",
          flush=True)

    results, labels = {v: [] for v in variants}, {}
    for repeat in range(args.repeats):
        for variant in variants:
            whole = run(variant, model_dir, export_dir, big, out_dir, env)
            short = run(variant, model_dir, export_dir, small, out_dir, env)
            if len(whole["labels"]) != args.rows or len(short["labels"]) != SMALL:
                sys.exit(f"{variant} wrote {len(whole['labels'])} / {len(short['labels'])} labels for "
                         f"{args.rows} / {SMALL} texts")
            labels[variant] = whole.pop("labels")
            gap = whole["seconds"] - short["seconds"]
            entry = {"seconds": whole["seconds"], "small_s": short["seconds"], "whole": args.rows / whole["seconds"],
                     "steady": (args.rows - SMALL) / gap if gap > 0 else float("nan")}
            if "loop_s" in whole:
                entry.update(load_s=whole["load_s"], loop_s=whole["loop_s"], loop=args.rows / whole["loop_s"])
            results[variant].append(entry)
            print(f"  repeat {repeat + 1} {variant:<13} {whole['seconds']:7.2f} s ({entry['whole']:7.1f} texts/s); "
                  f"{SMALL} texts {short['seconds']:6.2f} s; steady {entry['steady']:7.1f} texts/s"
                  + (f"; loop {entry['loop']:7.1f} texts/s after {entry['load_s']:.2f} s loading"
                     if "loop" in entry else ""), flush=True)

    reference = labels.get("bertkit-fp32")
    agreement = {v: sum(a == b for a, b in zip(got, reference)) / len(reference) for v, got in labels.items()
                 } if reference else {}
    print_table(results, agreement, args.rows)
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine_line(), "sst2": args.sst2, "rows": args.rows,
                                               "small_rows": SMALL, "repeats": args.repeats, "results": results,
                                               "agreement_with_bertkit_fp32": agreement}, indent=2))


if __name__ == "__main__":
    main()
