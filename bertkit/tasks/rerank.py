"""Reranking with a cross-encoder: a (query, passage) pair in, one relevance logit out (a sequence classifier with one
label, sentence-transformers' CrossEncoder). The task interface of bertkit.tasks and the pieces the rerank recipe,
`bertkit predict / evaluate / serve` and the export share. Files are read by bertkit/tasks/retrieval_files.py (pairs,
groups, FlagEmbedding JSONL, scored pairs); the measures (NDCG@10, MRR@10, Recall@k) and the BM25 first stage come
from there too.

    settings     what a run saves in config.json: max_length, the columns, the first stage and top-k of its evaluation
    encoding     retrieval rows -> the text dataset CrossEncoderTrainer takes: (query, passage, label) rows for BCE,
                 (query, docs, labels) groups for a listwise loss (LambdaLoss, ListNet)
    evaluating   each dev query's top-k from a first stage (BM25 over the dev passages, or an embed model), re-ranked
                 by the cross-encoder: NDCG@10 / MRR@10 / Recall@10 before (the first stage alone) and after
    predict      load a reranker (a rerank run, a stock CrossEncoder folder, or an ONNX export) and score pairs in
                 length-sorted batches under a token budget; the score is sigmoid(logit), as CrossEncoder.predict
                 gives it

A reranker is told apart from a classifier by sentence-transformers' own files (tasks.sentence_transformers_kind):
config_sentence_transformers.json says model_type CrossEncoder.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Callable, Literal, Sequence

import datasets
import numpy as np
import torch
from pydantic import Field

from bertkit import tasks
from bertkit.tasks import reporting, serving
from bertkit.checkpoints import load_finetuned, load_tokenizer
from bertkit.console import ExamplesProgress, say, warn
from bertkit.errors import BertkitError
from bertkit.inference import run_batch, sigmoid, token_budget_batches
from bertkit.modeling_bert import BertkitForSequenceClassification
from bertkit.rundir import atomic_output, check_output_path, write_json
from bertkit.tasks.retrieval_files import (BM25Index, RetrievalColumns, RetrievalData, distinct_texts, ir_metrics,
                                           read_retrieval_file)

LOSSES = ("bce", "lambda", "listnet")
REPORTED = ("ndcg@10", "mrr@10", "recall@10")  # reported before and after re-ranking


# ------------------------------------------------------------------------------------------------ settings


@dataclass
class Settings:
    max_length: int | None = None
    """Tokens per (query, passage) pair, [CLS] and [SEP]s included; the longer segment is cut first (None: the
    tokenizer's model_max_length, at most the model's positions)."""
    columns: RetrievalColumns = field(default_factory=RetrievalColumns)
    """Column overrides of the files the run read (null: detected by name)."""
    first_stage: str = "bm25"
    """What `bertkit evaluate` re-ranks: BM25 over the file's passages, or an embed model folder's top-k."""
    top_k: Annotated[int, Field(ge=1)] = 20
    """Candidates per query taken from the first stage."""
    fusion_weight: Annotated[float, Field(ge=0, le=1)] = 1.0
    """The reranker's share of the re-ranked score (each side min-max normalised over a query's candidates), tuned on
    the run's dev set: 1 is the reranker alone, 0 the first stage's own order (the reranker adds nothing)."""

    def check(self) -> None:
        if self.max_length is not None and self.max_length < 4:
            raise BertkitError(f"max_length={self.max_length} must be at least 4 ([CLS], two [SEP] and some text)")


# ------------------------------------------------------------------------------------------------ encoding


def read_examples(path: str, columns: RetrievalColumns | None = None, allow_no_positive: bool = False
                  ) -> RetrievalData:
    """A retrieval file's rows (query, positives, negatives, or a score), checked line by line: an empty query or
    passage is one line naming the file, the line and the column."""
    return read_retrieval_file(path, columns, allow_no_positive=allow_no_positive)


def encode(data: RetrievalData, loss: str = "bce") -> datasets.Dataset:
    """The text dataset CrossEncoderTrainer takes (its losses read columns by position, the label by name): for
    `bce` a (query, passage, label) row per passage, positives 1 and negatives 0, or the score of a scored pair
    (within [0, 1]); for a listwise loss one (query, docs, labels) row per distinct query."""
    if loss not in LOSSES:
        raise BertkitError(f"loss={loss}: use one of {', '.join(LOSSES)}")
    if data.kind == "scored":
        outside = next((row for row in data.rows if not 0 <= row.score <= 1), None)
        if outside is not None:
            raise BertkitError(f"{outside.where}: score {outside.score:g} is outside [0, 1] — a reranker learns a "
                               "relevance probability: rescale the scores to 0..1 (e.g. divide a 0-5 STS score by 5)")
        triples = [(row.query, row.positives[0], float(row.score)) for row in data.rows]
    else:
        triples = [(row.query, text, label) for row in data.rows
                   for texts, label in ((row.positives, 1.0), (row.negatives, 0.0)) for text in texts]
    labels = {label for _, _, label in triples}
    if labels <= {1.0}:
        raise BertkitError(f"{data.path}: every pair is a positive, so a reranker has nothing to tell apart — give "
                           "negatives (a negative column, FlagEmbedding's \"neg\") or set negatives_per_query=N to "
                           "mine them")
    if loss == "bce":
        return datasets.Dataset.from_dict({"query": [q for q, _, _ in triples], "passage": [p for _, p, _ in triples],
                                           "label": [label for _, _, label in triples]})
    groups: dict[str, tuple[list, list]] = {}
    for query, passage, label in triples:
        docs, scores = groups.setdefault(query, ([], []))
        if passage not in docs:
            docs.append(passage)
            scores.append(label)
    return datasets.Dataset.from_dict({"query": list(groups), "docs": [docs for docs, _ in groups.values()],
                                       "labels": [scores for _, scores in groups.values()]})


# ------------------------------------------------------------------------------------------------ evaluating


@dataclass
class RerankDev:
    """The dev ranking task: each query's first-stage candidates (corpus indices, best first) and relevant set."""

    queries: list[str]
    corpus: list[str]
    candidates: list[list[int]]
    relevant: list[set[int]]
    first_stage: str
    top_k: int
    scores: list[list[float]] = field(default_factory=list)
    """The first stage's score of each candidate (BM25's, or the embed model's cosine)."""

    def samples(self) -> list[dict]:
        """sentence-transformers' CrossEncoderRerankingEvaluator samples (with always_rerank_positives=False: a
        positive the first stage missed stays missed, as in a real pipeline)."""
        return [{"query": query, "positive": [self.corpus[i] for i in gold],
                 "documents": [self.corpus[i] for i in ranked]}
                for query, ranked, gold in zip(self.queries, self.candidates, self.relevant)]


def first_stage_dev(data: RetrievalData, corpus: Sequence[str] = (), first_stage: str = "bm25",
                    k: int = 20) -> RerankDev:
    """Each distinct dev query with a positive ranks the dev passages (positives, negatives) plus `corpus` by the
    first stage, "bm25" or an embed model folder (SentenceTransformer: its query / document prompts); the top `k`
    are its candidates."""
    passages = distinct_texts(data.rows, corpus)
    index = {text: i for i, text in enumerate(passages)}
    gold: dict[str, set[int]] = {}
    for row in data.rows:
        if row.positives:
            gold.setdefault(row.query, set()).update(index[text] for text in row.positives)
    if not gold:
        raise BertkitError(f"{data.path}: no query has a positive in the corpus, so there is nothing to rank — give "
                           f"the dev queries their positive passages (column '{data.columns.positive}')")
    queries = list(gold)
    ranked, scores = first_stage_top(first_stage, queries, passages, k)
    return RerankDev(queries, passages, ranked, [gold[q] for q in queries], first_stage, k, scores)


def first_stage_top(first_stage: str, queries: list[str], passages: list[str], k: int
                    ) -> tuple[list[list[int]], list[list[float]]]:
    """Each query's `k` best passages (indices, best first) and their scores by the first stage: "bm25", or an embed
    model folder ranking as its run chose on dev (retriever.json: the model, BM25 or both fused; a folder without
    one: the model alone, its query / document prompts applied), as `bertkit predict EMBED_RUN --corpus` ranks."""
    if first_stage == "bm25":
        ranked, scores = BM25Index(passages).search(queries, k)
        return [list(map(int, row)) for row in ranked], [list(map(float, row)) for row in scores]
    if not Path(first_stage).is_dir() or tasks.sentence_transformers_kind(first_stage) != "embed":
        raise BertkitError(f"first_stage={first_stage}: not an embedding model folder (an embed run's output_dir or "
                           "a sentence-transformers model) — give one, or first_stage=bm25")
    from bertkit.tasks import embed
    from bertkit.tasks.first_stage import DEPTH, fuse

    retriever = embed.retriever_of(first_stage)
    embedder = embed.load_predictor(first_stage) if retriever.uses_model else None
    return fuse(embed.first_stage(embedder, queries, passages, retriever, depth=max(DEPTH, k)), retriever, k)


def compute_metrics_fn(dev: RerankDev, weight: float = 1.0) -> Callable[[Sequence[Sequence[float]]], dict]:
    """The rerank metrics of a dev set: given each query's scores of its candidates (the cross-encoder's), NDCG@10,
    MRR@10 and Recall@10 after re-ranking by the fused score (`weight`: fused_order), beside the first stage's own
    (`first_stage_...`) and the ceiling re-ranking cannot pass (`recall@{k}` of the first stage: the positives among
    the candidates)."""
    before = ir_metrics(dev.candidates, dev.relevant)
    ceiling = ir_metrics([ranked[:dev.top_k] for ranked in dev.candidates], dev.relevant)

    def compute_metrics(scores: Sequence[Sequence[float]]) -> dict:
        after = ir_metrics(fused_order(dev, scores, weight), dev.relevant)
        return {**{name: round(after[name], 4) for name in REPORTED},
                **{f"first_stage_{name}": round(before[name], 4) for name in REPORTED},
                f"first_stage_recall@{dev.top_k}": round(min(ceiling["recall@100"], 1.0), 4),
                "queries": len(dev.queries), "first_stage": dev.first_stage, "top_k": dev.top_k,
                "fusion_weight": weight}

    return compute_metrics


def _min_max(values: Sequence[float]) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    span = values.max() - values.min() if len(values) else 0.0
    return (values - values.min()) / span if span > 0 else np.ones_like(values)


def fused_scores(first: Sequence[float], reranker: Sequence[float], weight: float) -> np.ndarray:
    """One query's candidates scored `weight` * the reranker's + (1 - weight) * the first stage's, each min-max
    normalised over the candidates: at 0 the first stage's order stands, at 1 the reranker's alone."""
    return weight * _min_max(reranker) + (1 - weight) * _min_max(first)


def fused_order(dev: RerankDev, scores: Sequence[Sequence[float]], weight: float) -> list[list[int]]:
    """Each query's candidates (corpus indices) by fused score, best first (a tie keeps the first stage's order)."""
    first = dev.scores or [[-rank for rank in range(len(row))] for row in dev.candidates]
    return [[ranked[i] for i in np.argsort(-fused_scores(f, row, weight), kind="stable")]
            for ranked, f, row in zip(dev.candidates, first, scores)]


FUSION_WEIGHTS = tuple(round(i / 10, 1) for i in range(11))


def tune_fusion(dev: RerankDev, scores: Sequence[Sequence[float]]) -> tuple[float, dict[float, float]]:
    """The reranker's share of the fused score that ranks dev best by NDCG@10 (0: the first stage alone, 1: the
    reranker alone; on a tie the lower, so that a reranker that adds nothing leaves the ranking alone), and the
    NDCG@10 of each weight tried. On dev the fused ranking is never below the first stage's."""
    ndcg = {weight: ir_metrics(fused_order(dev, scores, weight), dev.relevant)["ndcg@10"] for weight in FUSION_WEIGHTS}
    return min(ndcg, key=lambda weight: (-round(ndcg[weight], 6), weight)), ndcg


def rerank_scores(score_pairs: Callable[[list[str], list[str]], np.ndarray], dev: RerankDev) -> list[list[float]]:
    """Every dev query's candidates scored in one call of `score_pairs(queries, passages)`."""
    queries = [q for q, ranked in zip(dev.queries, dev.candidates) for _ in ranked]
    passages = [dev.corpus[i] for ranked in dev.candidates for i in ranked]
    flat = np.asarray(score_pairs(queries, passages), dtype=np.float64).reshape(-1)
    bounds = np.cumsum([0, *map(len, dev.candidates)])
    return [flat[a:b].tolist() for a, b in zip(bounds, bounds[1:])]


# ------------------------------------------------------------------------------------------------ predict / evaluate


@dataclass
class Reranker:
    model: object
    """A sequence classifier with one logit (bertkit's BERT, another family's transformers class, or an export)."""
    tokenizer: object
    max_length: int
    settings: Settings


def has_one_score_head(config) -> bool:
    """Whether a checkpoint's config (transformers' PretrainedConfig) is a sequence classifier with one output, a
    trained reranker's head (a CrossEncoder); anything else starts a reranker with a new head."""
    architectures = getattr(config, "architectures", None) or []
    return any(name.endswith("ForSequenceClassification") for name in architectures) and \
        getattr(config, "num_labels", None) == 1


def load_predictor(model_dir: str) -> Reranker:
    """The reranker of a rerank run directory, of a stock sentence-transformers CrossEncoder folder, or of their ONNX
    export, with the settings it was trained under."""
    model = load_finetuned(BertkitForSequenceClassification, model_dir, "rerank")
    settings = tasks.read_settings(Settings, model.config, str(Path(model_dir) / "config.json"))
    if getattr(model.config, "num_labels", 1) != 1:
        raise BertkitError(f"{model_dir} holds a classifier with {model.config.num_labels} labels, not a reranker's "
                           "one relevance score — use `bertkit predict` as a classifier, or a rerank run")
    tokenizer = load_tokenizer(model_dir)
    positions = int(getattr(model.config, "max_position_embeddings", 512) or 512)
    saved = tokenizer.model_max_length if tokenizer.model_max_length < 10**6 else positions
    return Reranker(model, tokenizer, settings.max_length or min(saved, positions), settings)


@torch.inference_mode()
def predict_logits(reranker: Reranker, queries: list[str], passages: list[str], batch_size: int = 64,
                   progress: ExamplesProgress | None = None) -> np.ndarray:
    """(N,) relevance logits of the (query, passage) pairs, in the order given: tokenized as CrossEncoder does
    (longest segment cut first), run in length-sorted batches under a token budget."""
    encoded = reranker.tokenizer(queries, passages, truncation="longest_first", max_length=reranker.max_length)
    features = [{key: encoded[key][i] for key in encoded.keys()} for i in range(len(queries))]
    logits = np.zeros(len(features), dtype=np.float32)
    for rows in token_budget_batches([len(f["input_ids"]) for f in features], batch_size * reranker.max_length,
                                     batch_size):
        padded = reranker.tokenizer.pad([features[i] for i in rows], return_tensors="pt")
        logits[rows] = run_batch(reranker.model, padded).logits.float().cpu().numpy()[:, 0]
        if progress is not None:
            progress.advance(len(rows))
    return logits


def predict_file(model_dir: str, input_path: str, output_path: str, batch_size: int = 64,
                 min_confidence: float | None = None) -> int:
    """Score every (query, passage) pair of a file (a pairs file; a group row's positives and negatives are each a
    pair): one record per pair, {"query", "passage", "score", "logit"}, in file order, as JSONL or CSV. The score is
    sigmoid(logit), what CrossEncoder.predict gives."""
    tasks.no_confidence_cut(min_confidence, "rerank")
    output_path = check_output_path(output_path, inputs=[input_path], model_dirs=[model_dir],
                                    suffixes=(".jsonl", ".json", ".csv", ".tsv"),
                                    wrong_suffix="use a .jsonl or .csv name")
    suffix = Path(output_path).suffix.lower()
    reranker = load_predictor(model_dir)
    data = read_examples(input_path, reranker.settings.columns)
    pairs = [(row.query, text) for row in data.rows for text in [*row.positives, *row.negatives]]
    with ExamplesProgress("scoring", len(pairs)) as progress:
        logits = predict_logits(reranker, [q for q, _ in pairs], [p for _, p in pairs], batch_size, progress)
    scores = sigmoid(np.asarray(logits, dtype=np.float64))  # CrossEncoder's default activation for one label
    with atomic_output(Path(output_path), "predictions", newline="") as handle:
        if suffix in (".csv", ".tsv"):
            writer = csv.writer(handle, delimiter="\t" if suffix == ".tsv" else ",")
            writer.writerow(["query", "passage", "score", "logit"])
            writer.writerows([q, p, round(float(s), 6), round(float(x), 6)]
                             for (q, p), s, x in zip(pairs, scores, logits))
        else:
            for (query, passage), score, logit in zip(pairs, scores, logits):
                handle.write(json.dumps({"query": query, "passage": passage, "score": round(float(score), 6),
                                         "logit": round(float(logit), 6)}, ensure_ascii=False) + "\n")
    return len(pairs)


def evaluate_file(model_dir: str, input_path: str, output_path: str | None = None, batch_size: int = 64, *,
                  retriever: str | None = None) -> dict:
    """Re-ranking metrics on a dev file (query, positive(s), optional negatives): each query's top-k of the run's
    first stage (its saved first_stage and top_k) over the file's passages, before and after re-ranking (by the
    fused score the run tuned: fusion_weight)."""
    no_retriever(retriever)
    if output_path:
        output_path = check_output_path(output_path, inputs=[input_path], model_dirs=[model_dir], what="metrics")
    reranker = load_predictor(model_dir)
    settings = reranker.settings
    data = read_examples(input_path, settings.columns, allow_no_positive=True)
    dev = first_stage_dev(data, (), settings.first_stage, settings.top_k)
    say_fusion(settings)
    total = sum(map(len, dev.candidates))
    with ExamplesProgress("re-ranking", total) as progress:
        scores = rerank_scores(lambda q, p: predict_logits(reranker, q, p, batch_size, progress), dev)
    metrics = compute_metrics_fn(dev, settings.fusion_weight)(scores)
    if output_path:
        write_json(Path(output_path), {"file": str(input_path), **metrics})
    return metrics


def say_fusion(settings: Settings) -> None:
    """One line: how the re-ranked order is made, and why."""
    weight = settings.fusion_weight
    if weight == 1.0:
        say("re-ranked by the reranker's score alone (fusion_weight 1)")
    elif weight == 0.0:
        say(f"the {settings.first_stage} order kept: the run found the reranker adds nothing on its dev set "
            "(fusion_weight 0)")
    else:
        say(f"re-ranked by {weight:g} x the reranker's score + {1 - weight:g} x {settings.first_stage}'s (each "
            "normalised per query; fusion_weight tuned on the run's dev set)")


def no_retriever(retriever: str | None) -> None:
    if retriever is not None:
        raise BertkitError(f"--retriever {retriever}: a reranker re-ranks its run's own first stage (first_stage in "
                           "the run's config) — leave --retriever out")


def predict_top_k(model_dir: str, input_path: str, output_path: str, corpus: str, top: int = 10,
                  batch_size: int = 64, retriever: str | None = None) -> int:
    """The pipeline: for each query of `input_path`, the run's first stage takes its top_k passages of `corpus`,
    the reranker scores them, and the `top` best by the fused score (say_fusion) are written as JSONL {"query",
    "results": [{"rank", "passage", "score", "reranker_score"}, ...]} (score: the fused one; reranker_score:
    sigmoid of the logit, what /rerank answers)."""
    from bertkit.tasks.embed import ranking_inputs

    no_retriever(retriever)
    output_path, queries, passages = ranking_inputs(model_dir, input_path, output_path, corpus, top)
    reranker = load_predictor(model_dir)
    settings = reranker.settings
    depth = max(settings.top_k, top)
    ranked, first = first_stage_top(settings.first_stage, queries, passages, depth)
    say(f"{settings.first_stage} takes the top {depth} of {len(passages)} passages for each of {len(queries)} queries")
    say_fusion(settings)
    with ExamplesProgress("re-ranking", sum(map(len, ranked))) as progress:
        logits = predict_logits(reranker, [q for q, row in zip(queries, ranked) for _ in row],
                                [passages[i] for row in ranked for i in row], batch_size, progress)
    bounds = np.cumsum([0, *map(len, ranked)])
    with atomic_output(output_path, "rankings") as handle:
        for query, row, row_first, a, b in zip(queries, ranked, first, bounds, bounds[1:]):
            fused = fused_scores(row_first, logits[a:b], settings.fusion_weight)
            order = np.argsort(-fused, kind="stable")[:top]
            results = [{"rank": r + 1, "passage": passages[row[i]], "score": round(float(fused[i]), 6),
                        "reranker_score": round(float(sigmoid(np.float64(logits[a + i]))), 6)}
                       for r, i in enumerate(order)]
            handle.write(json.dumps({"query": query, "results": results}, ensure_ascii=False) + "\n")
    return len(queries)


def say_metrics(metrics: dict) -> None:
    """One line: NDCG@10 / MRR@10 of the first stage -> after re-ranking."""
    say(f"re-ranking the {metrics['first_stage']} top-{metrics['top_k']} of {metrics['queries']} dev queries: "
        + ", ".join(f"{name} {metrics[f'first_stage_{name}']:.4f} -> {metrics[name]:.4f}" for name in REPORTED))


def worse_than_first_stage(metrics: dict) -> str | None:
    """The warning of a reranker whose own order leaves NDCG@10 below its first stage's (None when it does not): how
    much lower, what the fused score keeps of it, and what to try. A model that makes the ranking worse must not
    pass for a result."""
    before, after = metrics["first_stage_ndcg@10"], metrics.get("reranker_ndcg@10", metrics["ndcg@10"])
    if after >= before:
        return None
    weight = metrics.get("fusion_weight", 1.0)
    kept = (f"; predict and evaluate use the fused score (fusion_weight {weight:g}, NDCG@10 {metrics['ndcg@10']:.4f})"
            if "reranker_ndcg@10" in metrics else "")
    return (f"the reranker alone made the {metrics['first_stage']} top-{metrics['top_k']} WORSE: NDCG@10 "
            f"{before:.4f} -> {after:.4f} ({before - after:.4f} lower){kept} — train more (train.num_train_epochs, a "
            "higher train.learning_rate / head_lr for a new head, more data or negatives_per_query) or start from a "
            "trained cross-encoder (model=cross-encoder/ms-marco-MiniLM-L6-v2)")


def warn_mined(mined, wanted: int) -> None:
    """The warnings of mining: near-duplicates of a positive among the negatives, queries that got fewer."""
    if mined.near_duplicates:
        warn(f"{mined.near_duplicates} of {mined.negatives} mined negatives are near-duplicates of their query's "
             "positive (likely unlabelled positives): check the corpus for duplicate passages")
    if mined.short:
        warn(f"{mined.short} queries got fewer than {wanted} mined negatives (a small corpus): they train with what "
             "was found")


# ================================================================================================ serving


class Endpoint(serving.Endpoint):
    """TEI's POST /rerank on a reranker (a rerank run, a sentence-transformers CrossEncoder, or its ONNX export):
    a query and texts in; [{"index", "score"}] out, best first, the score as `CrossEncoder(path).predict` gives it
    (sigmoid of the logit; raw_scores=true: the logit)."""

    name, shape = "rerank", '{"query": ..., "texts": [...]}'
    form, many = ("query", "texts"), ("texts",)

    def body_of(self, values: dict) -> dict:
        return {"query": values["query"], "texts": values["texts"], "return_text": True}

    @staticmethod
    def request_model():
        from pydantic import BaseModel, ConfigDict

        class RerankRequest(BaseModel):  # TEI's /rerank; pairs are cut as the reranker trained (longest first)
            model_config = ConfigDict(extra="forbid")
            query: Any
            texts: Any
            raw_scores: bool = False
            return_text: bool = False
            truncate: bool = True
            truncation_direction: Literal["Right", "right"] = "Right"

        return RerankRequest

    @staticmethod
    def inputs_of(body):
        return body

    def answer(self, body, records: list) -> list:
        """TEI's answer: the reranker's own scores (not the fused ones of predict --corpus), best first."""
        return self.ranked(records, body.texts, body.raw_scores, body.return_text)

    def __init__(self, run_dir: str):
        self.predictor = reranker = load_predictor(run_dir)
        self.count = serving.token_counter(reranker.tokenizer, reranker.max_length)
        self.info = {"max_length": reranker.max_length, "activation": "sigmoid"}

    def parse(self, body) -> list[tuple[str, str]]:
        query = serving.filled(body.query, "query")
        if not isinstance(body.texts, list) or not body.texts:
            raise serving.InputError("texts must be a non-empty list of strings")
        texts = [serving.filled(value, f"texts[{i}]") for i, value in enumerate(body.texts)]
        return [(query, text) for text in texts]

    def chars(self, example) -> int:
        return len(example[0]) + len(example[1])

    def tokens(self, examples: list) -> list[int]:
        return self.count([q for q, _ in examples], [t for _, t in examples])

    def predict(self, examples: list) -> list[float]:
        return [float(x) for x in predict_logits(self.predictor, [q for q, _ in examples], [t for _, t in examples])]

    @staticmethod
    def ranked(logits: list[float], texts: list[str], raw_scores: bool, return_text: bool) -> list[dict]:
        """TEI's answer: every text's index and score, highest score first."""
        def sigmoid(x: float) -> float:  # exp of -|x| only: math.exp(-x) overflowed below x = -709 (an error 500)
            small = math.exp(-abs(x))
            return 1 / (1 + small) if x >= 0 else small / (1 + small)

        scores = logits if raw_scores else [sigmoid(x) if math.isfinite(x) else x for x in logits]
        order = sorted(range(len(scores)), key=lambda i: -scores[i] if math.isfinite(scores[i]) else math.inf)
        return [{"index": i, "score": scores[i], **({"text": texts[i]} if return_text else {})} for i in order]


class Card(reporting.Card):
    """The rerank part of the model card: a sentence-transformers cross-encoder, its dev re-ranking against the first
    stage alone and the fused order (Settings.fusion_weight), used through CrossEncoder."""

    tag = "text-ranking"
    tags = ["sentence-transformers", "cross-encoder", "reranker"]
    library = "sentence-transformers"
    intended_use = ("scores how relevant a passage is to a query (a cross-encoder reranker): give it a first stage's "
                    "candidates (BM25, an embedding model) and sort them by its score")
    TEXTS = {"zh": ("这部电影好看吗？", ["这部电影真好看！", "今天天气很好。"]),
             "en": ("Was the movie good?", ["This movie was great!", "The weather is fine today."])}
    NAMES = ("ndcg@10", "mrr@10", "recall@10")

    @property
    def evaluated(self) -> dict:
        found = self.run_metrics.get("eval")
        return found if isinstance(found, dict) else {}

    def note(self) -> str:
        return ("It is a sentence-transformers cross-encoder (reranker): `CrossEncoder(path)` loads it with no custom "
                "code and scores a (query, passage) pair with sigmoid(logit); plain `transformers` loads it as "
                "`AutoModelForSequenceClassification` with one logit.")

    def results(self) -> list[str]:
        """Each dev metric of the first stage alone, of this model alone and of the fused order bertkit predict /
        evaluate use, and the run's warning when the model alone made the ranking worse."""
        evaluated = self.evaluated
        names = [n for n in self.NAMES if n in evaluated and f"first_stage_{n}" in evaluated]
        if not names:
            return []
        stage = evaluated.get("first_stage", "first stage")
        fused = all(f"reranker_{n}" in evaluated for n in names)
        header = ["metric", f"{stage} alone", "re-ranked by this model"] + (
            [f"fused (weight {evaluated.get('fusion_weight', 1.0):g} on this model)"] if fused else [])
        rows = [[n, f"{evaluated[f'first_stage_{n}']:.4f}", f"{evaluated[f'reranker_{n}' if fused else n]:.4f}"]
                + ([f"{evaluated[n]:.4f}"] if fused else []) for n in names]
        lines = [f"Dev re-ranking: each of {evaluated.get('queries', '?')} dev queries' "
                 f"top-{evaluated.get('top_k', '?')} of {stage}, before (the first stage alone) and after re-ranking "
                 "by this model"
                 + (" (`CrossEncoder(path)` alone), and the fused order `bertkit predict` uses (the model's and the "
                    "first stage's scores, normalised per query and mixed with the weight tuned on dev)"
                    if fused else "")
                 + ":\n\n" + reporting.markdown_table(header, rows)]
        warnings = self.run_metrics.get("warnings") if isinstance(self.run_metrics.get("warnings"), list) else []
        return lines + [f"**Warning:** {reporting.markdown_cell(w)}" for w in warnings]

    def metrics(self) -> dict:
        """The model-index metrics: this model's re-ranking alone, what `CrossEncoder(path)` gives (the first
        stage's and the fused order's are in the results table)."""
        evaluated = self.evaluated
        return {n: float(evaluated.get(f"reranker_{n}", evaluated.get(n))) for n in self.NAMES
                if isinstance(evaluated.get(f"reranker_{n}", evaluated.get(n)), (int, float))}

    def usage(self, repo: str, lang: str) -> str:
        """sentence-transformers' CrossEncoder: scores of (query, passage) pairs, and a query's passages ranked."""
        query, passages = self.TEXTS[lang]
        lines = ["from sentence_transformers import CrossEncoder", "", f'model = CrossEncoder("{repo}")',
                 f"query, passages = {json.dumps(query, ensure_ascii=False)}, "
                 f"{json.dumps(passages, ensure_ascii=False)}",
                 "scores = model.predict([(query, passage) for passage in passages])  # sigmoid(logit), higher = "
                 "relevant",
                 "print(model.rank(query, passages))  # [{'corpus_id': ..., 'score': ...}, ...] best first"]
        return "```python\n" + "\n".join(lines) + "\n```"


__all__ = ["read_examples", "encode", "compute_metrics_fn", "Settings", "load_predictor", "predict_file",
           "evaluate_file", "LOSSES", "REPORTED", "RerankDev", "has_one_score_head", "first_stage_dev",
           "first_stage_top", "fused_scores", "fused_order", "tune_fusion", "say_fusion",
           "predict_top_k", "rerank_scores", "Reranker", "predict_logits", "sigmoid", "say_metrics",
           "worse_than_first_stage", "warn_mined", "Endpoint", "Card"]
