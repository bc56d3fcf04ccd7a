"""Calibration, class weights and data.max_length=auto on real data: what each changes, same model and settings.

    python benchmarks/bench_trust.py --sst2 SST2_DIR --conll CONLL_DIR --bbc BBC_DIR [--seeds 3] [--bbc-seeds 1]
        [--parts calibration,weights,length] [--work /tmp/bench_trust] [--out benchmarks/results/trust.json]

Every run goes through the CLI (`bertkit run` with data.eval = the folder's dev split, which picks the best epoch and
fits the temperature), fine-tuning the embedded all-MiniLM-L6-v2:
  calibration  SST-2, the first 2,000 training rows, max_length 128 (today's default), calibrate=true: metrics.json's
               ECE before / after on dev and the coverage table; then the same model on 2,000 training rows it never
               saw (rows 2,000-3,999): ECE of the raw softmax and of softmax(logits / T) with the temperature fitted on
               dev, and the coverage table there
  weights      SST-2 with positives subsampled to 10 % (the negatives and a tenth of the positives of the first 4,000
               training rows): dev macro-F1 and accuracy without and with class_weights=auto
  length       data.max_length=128 against auto on SST-2 (2,000 rows), CoNLL-2003 (ner, 2,000 sentences, windows of
               max_length with stride 32) and BBC News (classify, long documents, head truncation): the value auto
               chose, the share of training texts over it and over 128, the dev score and the run's wall time
Settings: 3 epochs, batch 32, lr 5e-5 (ner: batch 16, lr 2e-4 as recipes/configs/ner/en_conll.yaml; BBC: batch 16,
--bbc-epochs). Tables give mean ± sd over seeds 42, 43, ...; wall times on a shared 2-core machine (min / max shown).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import random
from pathlib import Path

import numpy as np
from cli_runs import band, bertkit, read_tsv, write_csv  # benchmarks/cli_runs.py

from machine import cpu_model  # benchmarks/machine.py
from tables import markdown_table  # benchmarks/tables.py

MODEL = "all-MiniLM-L6-v2"
CLASSIFY = ["train.num_train_epochs=3", "train.per_device_train_batch_size=32", "train.learning_rate=5.0e-5"]
NER = ["train.num_train_epochs=3", "train.per_device_train_batch_size=16", "train.learning_rate=2.0e-4"]
BBC = ["train.per_device_train_batch_size=16", "train.learning_rate=5.0e-5"]  # epochs: --bbc-epochs


# ------------------------------------------------------------------------------------------------ data


def head_sentences(source: Path, target: Path, count: int) -> Path:
    """The first `count` sentences of a CoNLL file."""
    blocks = [b for b in source.read_text(encoding="utf-8").split("\n\n") if b.strip()][:count]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("\n\n".join(b.strip("\n") for b in blocks) + "\n\n", encoding="utf-8")
    return target


def subsample_positives(rows, share: float, seed: int):
    rng = random.Random(seed)
    return [row for row in rows if row[1] != "1" or rng.random() < share]


# ------------------------------------------------------------------------------------------------ runs


def run(recipe: str, out: Path, *overrides: str) -> dict:
    """One `bertkit run`; its metrics.json with the wall time and the max_length it used."""
    bertkit("run", recipe, f"model={MODEL}", f"output_dir={out}", "overwrite=true", *overrides)
    metrics = json.loads((out / "metrics.json").read_text())
    metrics["max_length"] = json.loads((out / "config.json").read_text())["bertkit_task_settings"]["max_length"]
    return metrics


def held_out_calibration(run_dir: Path, rows) -> dict:
    """ECE of the raw and the calibrated probabilities on labelled rows the model never trained on, from one pass:
    single-label softmax(log p / T) is softmax(logits / T), so the raw probabilities give both."""
    from bertkit import calibration
    from bertkit.tasks.classify import load_predictor, predict_probabilities

    classifier = load_predictor(str(run_dir))
    temperature, classifier.temperature = classifier.temperature, None
    raw = predict_probabilities(classifier, [text for text, _ in rows], None)
    references = np.array([classifier.labels.names.index(label) for _, label in rows])
    logits = np.log(np.clip(raw, 1e-12, 1)) / (temperature[0] if temperature else 1.0)
    calibrated = np.exp(logits - logits.max(-1, keepdims=True))
    calibrated /= calibrated.sum(-1, keepdims=True)
    return {"ece_before": calibration.expected_calibration_error(raw, references, "single"),
            "ece": calibration.expected_calibration_error(calibrated, references, "single"),
            "coverage": calibration.coverage_table(calibrated, references, "single"),
            "accuracy": float((calibrated.argmax(-1) == references).mean())}


def truncated_shares(recipe: str, path: Path, chosen: int) -> tuple[float, float]:
    """The share of training texts (ner: sentences) longer than `chosen` tokens and than 128."""
    from bertkit.checkpoints import load_tokenizer, resolve_model

    tokenizer = load_tokenizer(resolve_model(MODEL), words=recipe == "ner")
    if recipe == "ner":
        blocks = [b for b in path.read_text(encoding="utf-8").split("\n\n") if b.strip()]
        words = [[line.split()[0] for line in b.strip("\n").split("\n")] for b in blocks]
        ids = tokenizer(words, is_split_into_words=True, truncation=False, verbose=False)["input_ids"]
    else:
        with open(path, newline="", encoding="utf-8") as handle:
            texts = [record["text"] for record in csv.DictReader(handle)]
        ids = tokenizer(texts, truncation=False, verbose=False)["input_ids"]
    lengths = np.array([len(i) for i in ids])
    return float((lengths > chosen).mean()), float((lengths > 128).mean())


# ------------------------------------------------------------------------------------------------ parts


def calibration_part(args, seed: int, files: dict) -> dict:
    out = args.work / f"calibration-{seed}"
    metrics = run("classify", out, f"data.train={files['sst2_train']}", f"data.eval={files['sst2_dev']}",
                  f"seed={seed}", "data.max_length=128", *CLASSIFY)
    held = held_out_calibration(out, read_tsv(args.sst2 / "train.tsv")[2000:4000])
    return {"dev": metrics["calibration"], "dev_accuracy": metrics["eval"]["accuracy"], "held_out": held,
            "wall_s": metrics["wall_time_s"]}


def weights_part(args, seed: int, files: dict) -> dict:
    rows = subsample_positives(read_tsv(args.sst2 / "train.tsv")[:4000], 0.1, seed)
    train = write_csv(rows, args.work / f"weights-{seed}" / "train.csv")
    result = {"rows": len(rows), "positives": sum(r[1] == "1" for r in rows)}
    for name, extra in (("plain", []), ("auto", ["class_weights=auto"])):
        metrics = run("classify", args.work / f"weights-{seed}" / name, f"data.train={train}",
                      f"data.eval={files['sst2_dev']}", f"seed={seed}", "data.max_length=64", *CLASSIFY, *extra)
        result[name] = {"macro_f1": metrics["eval"]["macro_f1"], "accuracy": metrics["eval"]["accuracy"]}
    return result


def length_part(args, seed: int, files: dict, dataset: str) -> dict:
    recipe, train, dev, settings, metric = {
        "sst2": ("classify", files["sst2_train"], files["sst2_dev"], CLASSIFY, "accuracy"),
        "conll": ("ner", files.get("conll_train"), files.get("conll_dev"), NER, "f1"),
        "bbc": ("classify", args.bbc / "train.csv", args.bbc / "val.csv",
                [*BBC, f"train.num_train_epochs={args.bbc_epochs}"], "accuracy"),
    }[dataset]
    extra = ["data.label_column=category"] if dataset == "bbc" else []
    result = {}
    for name in ("128", "auto"):
        metrics = run(recipe, args.work / f"length-{dataset}-{seed}" / name, f"data.train={train}",
                      f"data.eval={dev}", f"seed={seed}", f"data.max_length={name}", *settings, *extra)
        result[name] = {"score": metrics["eval"][metric], "wall_s": metrics["wall_time_s"],
                        "max_length": metrics["max_length"]}
    result["over_auto"], result["over_128"] = truncated_shares(recipe, Path(train), result["auto"]["max_length"])
    return result


# ------------------------------------------------------------------------------------------------ tables


def spread(values) -> str:
    return f"{np.mean(values):.0f} ({min(values):.0f}-{max(values):.0f})"


def tables(results: dict) -> list[dict]:
    """The tables of docs/benchmarks.md (benchmarks/tables.py's format) from the runs."""
    out = []
    if results.get("calibration"):
        runs = results["calibration"]
        rows = []
        for split, label in (("dev", "SST-2 dev (872 rows; the split the temperature is fitted on)"),
                             ("held_out", "2,000 training rows the model never saw (rows 2,000-3,999)")):
            parts = [r[split] for r in runs]
            accuracy = [r["dev_accuracy"] for r in runs] if split == "dev" else [p["accuracy"] for p in parts]
            cuts = [" / ".join(band([p["coverage"][cut][key] for p in parts], 3) for key in ("kept", "accuracy"))
                    for cut in ("0.7", "0.9")]
            rows.append([label, band([p["ece_before"] for p in parts], 3), band([p["ece"] for p in parts], 3),
                         band(accuracy, 3), *cuts])
        out.append({"caption": f"Calibration: SST-2, 2,000 training rows, max_length 128, temperature fitted on dev "
                               f"(temperatures {', '.join(str(r['dev']['temperature']) for r in runs)})",
                    "columns": ["scored on", "ECE raw", "ECE calibrated", "accuracy", "kept / accuracy at 0.7",
                                "kept / accuracy at 0.9"], "rows": rows})
    if results.get("weights"):
        runs = results["weights"]
        out.append({"caption": f"Class weights: SST-2 with positives subsampled to 10 % ({runs[0]['rows']:,} rows, "
                               f"{runs[0]['positives']} positive; dev is balanced)",
                    "columns": ["class_weights", "dev macro-F1", "dev accuracy"],
                    "rows": [["none" if name == "plain" else "auto", band([r[name]["macro_f1"] for r in runs]),
                              band([r[name]["accuracy"] for r in runs])] for name in ("plain", "auto")]})
    for dataset, label in (("sst2", "SST-2 (2,000 rows), dev accuracy"),
                           ("conll", "CoNLL-2003 (ner, 2,000 sentences), dev entity F1"),
                           ("bbc", "BBC News (1,557 documents, head truncation), val accuracy")):
        runs = results.get(f"length_{dataset}")
        if not runs:
            continue
        rows = []
        for name in ("128", "auto"):
            over = [r["over_128"] if name == "128" else r["over_auto"] for r in runs]
            chosen = ", ".join(str(v) for v in sorted({r[name]["max_length"] for r in runs}))
            rows.append([name, chosen, f"{np.mean(over):.1%}", band([r[name]["score"] for r in runs]),
                         spread([r[name]["wall_s"] for r in runs])])
        out.append({"caption": f"data.max_length on {label}; {len(runs)} seed(s)",
                    "columns": ["data.max_length", "value", "training texts over it", "dev score",
                                "wall s, mean (min-max)"], "rows": rows})
    return out


def result_file(results: dict, command: str) -> dict:
    return {"id": "trust", "order": 9, "title": "Calibration, class weights and data.max_length=auto on real data",
            "command": [command], "script": "benchmarks/bench_trust.py", "machine": results["machine"],
            "date": datetime.date.today().isoformat(),
            "setup": "Every run is `bertkit run` on the embedded all-MiniLM-L6-v2 with data.eval = the folder's dev "
                     "split (it picks the best epoch and fits the temperature); 3 epochs, batch 32, lr 5e-5 (ner: "
                     "batch 16, lr 2e-4; BBC: batch 16, --bbc-epochs), precision auto (bf16 autocast on this "
                     "AVX-512 BF16 CPU). mean ± sd over seeds 42, 43, ...; wall times on "
                     "a shared 2-core machine with other benchmarks running beside them.",
            "tables": tables(results), "notes": [], "runs": results}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sst2", type=Path, required=True, help="folder with SST-2's train.tsv and dev.tsv")
    parser.add_argument("--conll", type=Path, help="folder with CoNLL-2003's train.txt and dev.txt")
    parser.add_argument("--bbc", type=Path, help="folder with BBC News' train.csv and val.csv")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--bbc-seeds", type=int, default=1, help="BBC's long documents take minutes per run")
    parser.add_argument("--parts", default="calibration,weights,length",
                        help="calibration, weights, length, or one length job: length_sst2, length_conll, length_bbc")
    parser.add_argument("--bbc-epochs", type=int, default=2, help="BBC's long documents take minutes per epoch")
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_trust"))
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "trust.json")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    files = {"sst2_train": write_csv(read_tsv(args.sst2 / "train.tsv")[:2000], args.work / "sst2" / "train.csv"),
             "sst2_dev": write_csv(read_tsv(args.sst2 / "dev.tsv"), args.work / "sst2" / "dev.csv")}
    if args.conll:
        files["conll_train"] = head_sentences(args.conll / "train.txt", args.work / "conll" / "train.conll", 2000)
        files["conll_dev"] = head_sentences(args.conll / "dev.txt", args.work / "conll" / "dev.conll", 10**9)
    results: dict = {"machine": f"{cpu_model()}, {os.cpu_count()} cores", "model": MODEL}
    seeds = [42 + i for i in range(args.seeds)]
    jobs = {"calibration": lambda seed: calibration_part(args, seed, files),
            "weights": lambda seed: weights_part(args, seed, files),
            "length_sst2": lambda seed: length_part(args, seed, files, "sst2")}
    if args.conll:
        jobs["length_conll"] = lambda seed: length_part(args, seed, files, "conll")
    if args.bbc:
        jobs["length_bbc"] = lambda seed: length_part(args, seed, files, "bbc")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for name, job in jobs.items():
        if name not in parts and name.split("_")[0] not in parts:
            continue
        results[name] = []
        for seed in seeds[:args.bbc_seeds] if name == "length_bbc" else seeds:
            results[name].append(job(seed))
            print(json.dumps({name: results[name][-1]}), flush=True)
            args.out.write_text(json.dumps(result_file(results, "(partial)"), indent=1) + "\n")  # survives a stop
    command = "python benchmarks/bench_trust.py --sst2 SST2_DIR --conll CONLL_DIR --bbc BBC_DIR"
    args.out.write_text(json.dumps(result_file(results, command), indent=1, ensure_ascii=False) + "\n")
    print(f"{results['machine']}; {MODEL}; results in {args.out}")
    for table in tables(results):
        print("\n" + table["caption"] + "\n" + "\n".join(markdown_table(table)))


if __name__ == "__main__":
    main()
