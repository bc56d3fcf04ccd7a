"""Embedding models (bi-encoders) on sentence-transformers: loading one with bertkit's BERT as its backbone,
encoding texts, and `bertkit predict` / `evaluate` on an embed run. Reading the files and the ranking measures are
`bertkit.tasks.retrieval_files`.

    read_examples("dev.jsonl")                      -> RetrievalData (pairs / groups / scored pairs)
    load_predictor(run_dir)                         -> Embedder(model: SentenceTransformer, settings)
    encode(embedder, texts, "query")                -> (N, D) float32, the run's query prefix applied
    predict_file(run_dir, "texts.jsonl", "vectors.npy")           one vector per row (.jsonl or .npy)
    predict_top_k(run_dir, "queries.jsonl", "top.jsonl", corpus="corpus.txt", top_k=10)
        ranked by the first stage the run chose on dev: the model, BM25 or both fused (bertkit/tasks/first_stage.py)
    evaluate_file(run_dir, "dev.jsonl")             -> NDCG@10, MRR@10, Recall@1/10/100 (pairs) or Spearman (scored)
    choose_retriever(model, dev, corpus)            -> (Retriever, {"bm25", "dense", "hybrid": dev metrics})

What a run saves is the stock sentence-transformers layout: modules.json (only sentence_transformers classes),
config.json (`model_type: bert`, `BertModel`), 1_Pooling/config.json (pooling), 2_Normalize (normalised vectors),
and config_sentence_transformers.json whose `prompts` hold the query / passage prefixes ("query", "document"), so
that `SentenceTransformer(path).encode(texts, prompt_name="query")` gives what bertkit predict gives. `Settings` is
read from those files, not saved a second time.

sentence-transformers' `models.Transformer` always loads a BERT folder into transformers' BertModel: bertkit swaps in
its own (`use_bertkit_backbone`, same parameter names, unpadded path), which saves back as the stock layout.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ..console import say, warn
from ..datafiles import listing, read_table, row_location
from ..errors import BertkitError
from ..families import position_limit
from ..report_html import missing, section, table
from ..rundir import atomic_output, check_output_path, write_json
from . import SETTINGS_KEY, no_confidence_cut, read_settings, reporting, serving
from .first_stage import DEPTH, RETRIEVER_FILE, RETRIEVERS, Candidates, Retriever, choose, fuse
from .first_stage import load as load_retriever
from .retrieval_files import (BM25Index, RetrievalColumns, RetrievalData, distinct_texts, ir_dev_set, ir_metrics,
                              read_corpus, read_retrieval_file, spearman, top_k)

POOLING_MODES = ("cls", "mean", "max", "lasttoken", "weightedmean")
MODEL_FILES = (RETRIEVER_FILE,)  # the run's first stage: a push uploads it and an export copies it
QUERY = "query"  # the prompt names sentence-transformers' encode_query / encode_document use
DOCUMENT = "document"
QUERY_LIKE = ("query", "question", "anchor", "q", "查询", "问题")  # a predict input column encoded as queries


def read_examples(path: str, columns: RetrievalColumns | None = None, allow_no_positive: bool = False
                  ) -> RetrievalData:
    """A training or dev file (bertkit.tasks.retrieval_files.read_retrieval_file)."""
    return read_retrieval_file(path, columns, allow_no_positive)


# ================================================================================================ the model


def saved_pooling(model_path: str) -> tuple[str | None, bool | None]:
    """(pooling mode, normalised) a sentence-transformers folder records (modules.json + its Pooling config), or
    (None, None) for a folder without that information (a plain BERT checkpoint) or a Hub id not in the cache."""
    folder = Path(model_path)
    modules_file = folder / "modules.json"
    if not modules_file.is_file():
        return None, None
    try:
        modules = json.loads(modules_file.read_text(encoding="utf-8"))
        pooling = next(m for m in modules if m.get("type", "").endswith(".Pooling"))
        config = json.loads((folder / pooling.get("path", "1_Pooling") / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, StopIteration, AttributeError):
        return None, None
    mode = next((name.removeprefix("pooling_mode_").removesuffix("_token").removesuffix("_tokens")
                 for name, on in config.items() if name.startswith("pooling_mode_") and on is True), None)
    mode = {"mean_sqrt_len": "mean", "cls": "cls"}.get(mode, mode) if mode else config.get("pooling_mode")
    normalized = any(m.get("type", "").endswith(".Normalize") for m in modules)
    return mode, normalized


def build_model(model_path: str, pooling: str, normalize: bool, max_length: int | None):
    """A SentenceTransformer: the folder's own modules when it is a sentence-transformers model (pooling and
    normalisation then changed only where they differ from `pooling` / `normalize`), else Transformer + Pooling
    (+ Normalize) built around a plain checkpoint. BERT runs on bertkit's backbone (use_bertkit_backbone)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    saved_mode, saved_norm = saved_pooling(model_path)
    if saved_mode is not None:
        model = SentenceTransformer(model_path, device="cpu")
        modules = list(model)
        if saved_mode != pooling:
            modules[1] = Pooling(modules[0].get_embedding_dimension(), pooling_mode=pooling)
        if saved_norm != normalize:
            modules = modules[:2] + ([Normalize()] if normalize else []) + [m for m in modules[2:]
                                                                            if type(m).__name__ != "Normalize"]
        if modules != list(model):
            model = SentenceTransformer(modules=modules, device="cpu")
    else:
        transformer = Transformer(model_path, max_seq_length=max_length)
        modules = [transformer, Pooling(transformer.get_embedding_dimension(), pooling_mode=pooling)]
        model = SentenceTransformer(modules=modules + ([Normalize()] if normalize else []), device="cpu")
    limit = position_limit(model[0].auto_model.config)
    if max_length is not None:
        model.max_seq_length = max_length
    elif model.max_seq_length is None or model.max_seq_length > limit:  # a plain checkpoint: its tokenizer's 512
        model.max_seq_length = min(256, limit)
    if model.max_seq_length > limit:
        raise BertkitError(f"data.max_length={model.max_seq_length} is more than the model's {limit} positions — set "
                           f"data.max_length<={limit}")
    use_bertkit_backbone(model, transformer_path(model_path))
    return model


def transformer_path(model_path: str) -> str:
    """The folder of a sentence-transformers model's Transformer module (the root, or 0_Transformer in old ones)."""
    try:
        modules = json.loads((Path(model_path) / "modules.json").read_text(encoding="utf-8"))
        return str(Path(model_path) / modules[0].get("path", ""))
    except (OSError, ValueError, IndexError, KeyError, AttributeError):
        return model_path


def use_bertkit_backbone(model, path: str) -> bool:
    """Put bertkit's BERT (its unpadded path) in place of transformers' BertModel inside a SentenceTransformer
    whose checkpoint is BERT (`model_type: bert`); other families keep transformers' class. The weights are the same
    tensors by name; saving writes the stock BertModel layout. Returns whether it swapped."""
    from ..checkpoints import load_pretrained
    from ..modeling_bert import BertkitModel

    inner = model[0].auto_model
    if getattr(inner.config, "model_type", None) != "bert":
        return False
    bertkit = load_pretrained(BertkitModel, path) if Path(path).is_dir() else BertkitModel(inner.config)
    if not Path(path).is_dir():  # a Hub id: take the weights transformers already loaded
        bertkit.load_state_dict(inner.state_dict())
    # `auto_model` is a read-only property over `model` in sentence-transformers 6: assigning it would register a
    # second, unused module beside the real one (and leave transformers' BertModel running)
    model[0].model = bertkit.to(inner.device)
    return True


def set_prefixes(model, query_prefix: str, passage_prefix: str) -> None:
    """The prefixes as the model's prompts, saved in config_sentence_transformers.json (stock encode applies them
    with prompt_name="query" / "document"; encode_query / encode_document pick them by those names)."""
    model.prompts = {QUERY: query_prefix or "", DOCUMENT: passage_prefix or ""}


# ================================================================================================ settings


@dataclass
class Settings:
    max_length: int = 256
    """Tokens per text, [CLS] and [SEP] included (sentence-transformers' max_seq_length)."""
    pooling: Literal["cls", "mean", "max", "lasttoken", "weightedmean"] = "mean"
    """How token vectors become one vector (1_Pooling/config.json)."""
    normalize: bool = True
    """Vectors scaled to length 1 (a 2_Normalize module)."""
    query_prefix: str = ""
    """Put before every query (config_sentence_transformers.json prompts.query)."""
    passage_prefix: str = ""
    """Put before every passage (prompts.document)."""

    def check(self) -> None:
        """Raise a one-line BertkitError naming the key when a value cannot work."""
        if self.max_length < 3:  # [CLS] token [SEP]
            raise BertkitError(f"{SETTINGS_KEY}.max_length={self.max_length} leaves no room for text between [CLS] "
                               f"and [SEP] — it must be at least 3")


def settings_of(model) -> Settings:
    """The Settings a loaded SentenceTransformer runs with (its own files are where they live)."""
    pooling = next((m for m in model if type(m).__name__ == "Pooling"), None)
    mode = getattr(pooling, "pooling_mode", "mean") if pooling is not None else "mean"
    prompts = model.prompts or {}
    settings = Settings(int(model.max_seq_length or 512), mode if mode in POOLING_MODES else "mean",
                        any(type(m).__name__ == "Normalize" for m in model), prompts.get(QUERY, ""),
                        prompts.get(DOCUMENT, prompts.get("passage", "")))
    return read_settings(Settings, {SETTINGS_KEY: {f.name: getattr(settings, f.name) for f in fields(Settings)}},
                         "the model's sentence-transformers files")


def export_settings(model) -> Settings:
    """The Settings an embed export runs with (onnx_model.OnnxEmbedder: what onnx_export.json recorded)."""
    prompts = model.prompts or {}
    settings = Settings(model.max_seq_length, model.pooling if model.pooling in POOLING_MODES else "mean",
                        model.normalize, prompts.get(QUERY, ""), prompts.get(DOCUMENT, prompts.get("passage", "")))
    return read_settings(Settings, {SETTINGS_KEY: {f.name: getattr(settings, f.name) for f in fields(Settings)}},
                         "the export's onnx_export.json")


# ================================================================================================ predict / evaluate


@dataclass
class Embedder:
    """A loaded embedding model (a SentenceTransformer, bertkit's BERT inside where the checkpoint is BERT)."""

    model: object
    settings: Settings | None = None


def load_predictor(model_dir: str) -> Embedder:
    """An embed run's output directory (any sentence-transformers folder), in eval mode at the precision
    `inference_precision` set."""
    from sentence_transformers import SentenceTransformer

    from ..checkpoints import LOAD_PRECISION, for_inference, weights_read
    from ..onnx_model import is_onnx_export, load_onnx_embedder

    if is_onnx_export(model_dir):  # `bertkit export` of an embed run: pooling and normalisation inside the graph
        model = load_onnx_embedder(model_dir, LOAD_PRECISION.get())
        return Embedder(model, export_settings(model))
    if not (Path(model_dir) / "modules.json").is_file():
        raise BertkitError(f"{model_dir} is not a sentence-transformers model (no modules.json) — give the "
                           f"output_dir of a bertkit embed run")
    with weights_read(model_dir):
        model = SentenceTransformer(model_dir, device="cpu", local_files_only=True)
    use_bertkit_backbone(model, transformer_path(model_dir))
    model[0].model = for_inference(model[0].auto_model)
    model.to(model[0].auto_model.device)
    model.eval()
    return Embedder(model, settings_of(model))


def encode(embedder: Embedder, texts: list[str], kind: str = QUERY, batch_size: int = 64) -> np.ndarray:
    """(N, D) float32 vectors of `texts`, the run's prefix for `kind` ("query" or "document") put before each."""
    import torch

    with torch.inference_mode():
        vectors = embedder.model.encode(list(texts), prompt_name=kind, batch_size=batch_size,
                                        convert_to_numpy=True, show_progress_bar=False)
    return np.asarray(vectors, dtype=np.float32)


def compute_metrics_fn(dev: RetrievalData, corpus: list[str] = (), batch_size: int = 64):
    """A function of an Embedder giving its dev metrics: NDCG@10, MRR@10, Recall@1/10/100 when every query ranks
    the dev corpus (pairs), Spearman of cosine against the gold score (scored pairs). The recipe evaluates with
    sentence-transformers' evaluators; this is predict / evaluate's own, numpy only."""

    def metrics(embedder: Embedder) -> dict:
        if dev.kind == "scored":
            first = encode(embedder, [r.query for r in dev.rows], QUERY, batch_size)
            second = encode(embedder, [r.positives[0] for r in dev.rows], DOCUMENT, batch_size)
            cosine = np.sum(_unit(first) * _unit(second), axis=1)
            return {"spearman": spearman(cosine, [r.score for r in dev.rows])}
        ir = ir_dev_set(dev, corpus)
        queries = encode(embedder, list(ir.queries.values()), QUERY, batch_size)
        passages = encode(embedder, list(ir.corpus.values()), DOCUMENT, batch_size)
        ranked, _ = top_k(queries, passages, 100)
        return ir_metrics(ranked, ir.relevant_indices())

    return metrics


def _unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def read_texts(path: str) -> tuple[list[str], str]:
    """The texts of a predict input and how to encode them: a query column (query, question, anchor, 问题) as
    queries, else the one text column (text, passage, ...; a .txt file's lines) as passages."""
    table = read_table(path)
    names = list(table.column_names)
    lowered = {n.strip().lower(): n for n in names}
    column = next((lowered[c] for c in QUERY_LIKE if c in lowered), None)
    kind = QUERY
    if column is None:
        from .retrieval_files import CORPUS_TEXT_COLUMNS

        column = next((lowered[c] for c in CORPUS_TEXT_COLUMNS if c in lowered), None)
        kind = DOCUMENT
    if column is None:
        strings = [n for n in names if isinstance(table[0][n], str)]
        if len(strings) != 1:
            raise BertkitError(f"cannot tell which column of {path} holds the texts (columns: {listing(names)}) — "
                               f"name it 'query' (encoded as queries) or 'text' (as passages)")
        column = strings[0]
    texts = table[column][:]
    for i, text in enumerate(texts):
        if not isinstance(text, str) or not text.strip():
            raise BertkitError(f"{path} {row_location(table, i)}: column '{column}' is empty — fill it in or remove "
                               f"the line")
    return texts, kind


def predict_file(model_dir: str, input_path: str, output_path: str, batch_size: int = 64,
                 min_confidence: float | None = None) -> int:
    """One vector per row of `input_path`, in input order: JSONL {"text", "embedding"} or, for a .npy output, an
    (N, D) float32 array. Query columns get the query prefix, passage columns the passage prefix (read_texts)."""
    no_confidence_cut(min_confidence, "embed")
    suffix = Path(output_path).suffix.lower()
    output_path = check_output_path(output_path, inputs=[input_path], model_dirs=[model_dir], what="vectors",
                                    suffixes=(".jsonl", ".json", ".npy"),
                                    wrong_suffix="use a .jsonl name (or .npy for a NumPy array)")
    texts, kind = read_texts(input_path)  # a file that cannot be read is said before the model loads
    embedder = load_predictor(model_dir)
    say(f"encoding {len(texts)} texts as {'queries' if kind == QUERY else 'passages'}")
    vectors = encode(embedder, texts, kind, batch_size)
    if suffix == ".npy":
        with atomic_output(output_path, "vectors", mode="wb") as handle:
            np.save(handle, vectors)
        return len(texts)
    with atomic_output(output_path, "vectors") as handle:
        for text, vector in zip(texts, vectors):
            handle.write(json.dumps({"text": text, "embedding": [round(float(x), 7) for x in vector]},
                                    ensure_ascii=False) + "\n")
    return len(texts)


def first_stage(embedder: "Embedder | None", queries: list[str], passages: list[str], retriever: Retriever,
                batch_size: int = 64, depth: int = DEPTH) -> Candidates:
    """Each query's best `depth` passages by the sides `retriever` uses: the model's cosine, BM25, or both."""
    index = BM25Index(passages, retriever.chinese) if retriever.uses_bm25 else None
    dense = retriever.uses_model
    return Candidates.of(encode(embedder, queries, QUERY, batch_size) if dense else None,
                         encode(embedder, passages, DOCUMENT, batch_size) if dense else None, index, queries, depth)


def choose_retriever(model, dev: RetrievalData, corpus: list[str] = (), kind: str = "auto", fusion: str = "convex",
                     chinese: str = "bigram", batch_size: int = 64) -> tuple[Retriever, dict[str, dict]]:
    """The first stage a run answers with, chosen on its dev set (pairs): BM25, the model `model` (a
    SentenceTransformer) or their fusion, the weight tuned there (bertkit/tasks/first_stage.py); and each one's dev
    metrics."""
    ir = ir_dev_set(dev, corpus)
    queries, passages = list(ir.queries.values()), list(ir.corpus.values())
    candidates = first_stage(Embedder(model), queries, passages, Retriever("hybrid", chinese=chinese),
                             batch_size)
    retriever, rows = choose(candidates, ir.relevant_indices(), fusion, kind)
    retriever.chinese = chinese
    return retriever, rows


def retriever_of(model_dir: str, asked: str | None = None) -> Retriever:
    """The first stage that ranks for `model_dir`: `asked` (dense, bm25 or hybrid: predict / evaluate --retriever)
    over the one its run chose on dev (retriever.json), else the model alone; said in one line, with why."""
    saved = load_retriever(model_dir)
    if asked is not None and asked not in RETRIEVERS:
        raise BertkitError(f"--retriever {asked}: use {', '.join(RETRIEVERS)}")
    if asked is None and saved is not None:
        dev = ", ".join(f"{name} {value:.3f}" for name, value in saved.dev.items())
        say(f"ranking with {saved.kind} ({saved.describe()}): the run chose it on its dev set"
            + (f" (NDCG@10 {dev})" if dev else ""))
        return saved
    if asked is None:
        say(f"ranking with dense (the embedding model alone): {model_dir} has no {RETRIEVER_FILE} (a run with a dev "
            "set of pairs chooses between BM25, the model and both) — --retriever hybrid fuses BM25 in")
        return Retriever("dense")
    # the run's tuned weight and Chinese terms whichever kind it chose; without a retriever.json: weight 0.5
    chosen = Retriever(asked, saved.weight, saved.fusion, saved.chinese) if saved is not None else Retriever(asked)
    how = " at weight 0.5 (the run tuned none)" if asked == "hybrid" and saved is None else ""
    say(f"ranking with {asked} ({chosen.describe()}){how}: asked for by --retriever")
    return chosen


def ranking_inputs(model_dir: str, input_path: str, output_path: str, corpus: str, top: int
                   ) -> tuple[str, list[str], list[str]]:
    """What `predict --corpus` checks and reads before any model loads (embed's and rerank's predict_top_k): the
    top-k, the output path, the queries and the corpus; a mistake in any is one line."""
    if top < 1:
        raise BertkitError(f"--top-k {top}: give at least 1")
    output_path = check_output_path(output_path, inputs=[input_path, corpus], model_dirs=[model_dir],
                                    suffixes=(".jsonl", ".json"))
    queries, _ = read_texts(input_path)
    return output_path, queries, read_corpus(corpus)


def predict_top_k(model_dir: str, input_path: str, output_path: str, corpus: str, top: int = 10,
                  batch_size: int = 64, retriever: str | None = None) -> int:
    """For each query of `input_path`, the `top` passages of `corpus`, best first, as JSONL {"query", "results":
    [{"rank", "passage", "score"}, ...]}, ranked by the first stage the run chose (retriever_of: cosine, BM25 or
    their fusion, whose score is the fused one)."""
    output_path, queries, passages = ranking_inputs(model_dir, input_path, output_path, corpus, top)
    chosen = retriever_of(model_dir, retriever)
    embedder = load_predictor(model_dir) if chosen.uses_model else None
    ranked, scores = fuse(first_stage(embedder, queries, passages, chosen, batch_size, max(DEPTH, top)), chosen, top)
    with atomic_output(output_path, "rankings") as handle:
        for query, row, row_scores in zip(queries, ranked, scores):
            results = [{"rank": r + 1, "passage": passages[i], "score": round(float(s), 6)}
                       for r, (i, s) in enumerate(zip(row, row_scores))]
            handle.write(json.dumps({"query": query, "results": results}, ensure_ascii=False) + "\n")
    return len(queries)


def evaluate_file(model_dir: str, input_path: str, output_path: str | None = None, batch_size: int = 64, *,
                  retriever: str | None = None) -> dict:
    """Ranking metrics on a dev file (every query ranks all the file's passages) by the first stage the run chose
    (retriever_of) or, for scored pairs, Spearman of the model's cosine."""
    if output_path:
        output_path = check_output_path(output_path, inputs=[input_path], model_dirs=[model_dir], what="metrics")
    dev = read_examples(input_path, allow_no_positive=True)
    if dev.kind == "scored":
        if retriever is not None:
            raise BertkitError(f"--retriever {retriever}: {input_path} holds scored pairs, which the model's cosine "
                               "alone scores — leave --retriever out")
        metrics = compute_metrics_fn(dev, batch_size=batch_size)(load_predictor(model_dir))
    else:
        chosen = retriever_of(model_dir, retriever)
        ir = ir_dev_set(dev)
        queries, passages = list(ir.queries.values()), list(ir.corpus.values())
        embedder = load_predictor(model_dir) if chosen.uses_model else None
        ranked, _ = fuse(first_stage(embedder, queries, passages, chosen, batch_size), chosen, 100)
        metrics = ir_metrics(ranked, ir.relevant_indices())
    if output_path:
        passages = len(distinct_texts(dev.rows))
        write_json(Path(output_path), {"file": str(input_path), "examples": len(dev.rows), "passages": passages,
                                       **metrics})
    return metrics


def check_training_data(data: RetrievalData, loss: str, batch_size: int) -> None:
    """What in-batch-negative losses cannot learn from, in one line: a scored file (use cosent), a pairs file for
    cosent, one positive for every row, a batch of one."""
    in_batch = loss in ("mnrl", "cached_mnrl")
    if in_batch and data.kind == "scored":
        raise BertkitError(f"{data.path} holds scored pairs (column '{data.columns.score}'), which loss={loss} "
                           f"cannot use: it treats every pair as a positive — use loss=cosent")
    if loss == "cosent" and data.kind != "scored":
        raise BertkitError(f"loss=cosent needs scored pairs (sentence1, sentence2, score) and {data.path} has "
                           f"none (no score column) — use loss=mnrl, or add a score column")
    positives = {text for row in data.rows for text in row.positives}
    if in_batch and len(positives) == 1 and len(data.rows) > 1:
        raise BertkitError(f"every row of {data.path} has the same positive ({next(iter(positives))[:40]!r}): "
                           f"in-batch negatives would all be that positive — give each query its own positive")
    if in_batch and batch_size < 2:
        raise BertkitError(f"train.per_device_train_batch_size={batch_size}: loss={loss} takes its negatives from "
                           f"the other rows of a batch, and a batch of 1 has none — use at least 2 (16-256 typical)")


def mine_file(input_path: str, output_path: str, model_name: str | None = None, corpus: str | None = None,
              bm25: bool = False, num_negatives: int = 3, range_min: int = 0, range_max: int | None = None,
              margin: float | None = 0.05, batch_size: int = 64) -> int:
    """`bertkit mine`: hard negatives for every query of a pairs file (retrieval_files.mine_negatives) written as
    FlagEmbedding JSONL; the model's own query / passage prefixes are used for its ranking. Returns the queries
    written."""
    from ..checkpoints import resolve_model
    from .retrieval_files import mine_negatives, write_flag_jsonl

    if model_name is None and not bm25:
        raise BertkitError("nothing to rank the corpus with — give --model (an embedding model) and/or --bm25")
    if num_negatives < 1:
        raise BertkitError(f"--num-negatives {num_negatives}: give at least 1")
    # a run given as --model: never over its files nor the data it was trained on (rundir.check_output_path)
    local_model = [model_name] if model_name and Path(model_name).expanduser().is_dir() else []
    output_path = check_output_path(output_path, inputs=[input_path, corpus], model_dirs=local_model,
                                    what="the training file", suffixes=(".jsonl", ".json"))
    data = read_examples(input_path)
    if data.kind == "scored":
        raise BertkitError(f"{input_path} holds scored pairs (column '{data.columns.score}'): mining needs (query, "
                           f"positive) pairs — give a pairs file")
    passages = read_corpus(corpus) if corpus else []
    model = None
    if model_name is not None:
        path = resolve_model(model_name)
        if (Path(path) / "modules.json").is_file():
            model = load_predictor(path).model
        else:
            warn(f"{model_name} has no sentence-transformers pooling information (no modules.json): mean pooling "
                 f"assumed")
            model = build_model(path, "mean", True, None)
    prompts = (model.prompts or {}) if model is not None else {}
    mined = mine_negatives(data.rows, passages, model, bm25, num_negatives, range_min, range_max,
                           margin if model is not None else None, prompts.get(QUERY), prompts.get(DOCUMENT),
                           batch_size=batch_size)
    say(f"mined {mined.negatives} negatives for {len(mined.rows)} queries"
        f"{f' ({mined.short} got fewer than {num_negatives})' if mined.short else ''}")
    warn_near_duplicates(mined.near_duplicates, mined.negatives, by_model=model is not None)
    with atomic_output(output_path, "the training file") as handle:
        return write_flag_jsonl(mined.rows, handle)


def warn_near_duplicates(near: int, total: int, by_model: bool = True) -> None:
    """The mined-negatives warning: how many are near-duplicates of their positive (likely unlabelled positives);
    --margin is suggested only where a model ranked (BM25 alone takes none)."""
    if total and near / total >= 0.5:
        warn(f"{near} of {total} mined negatives are near-duplicates of their query's positive — they are probably "
             f"positives too; raise --range-min{' or --margin' if by_model else ''}, or clean the corpus")
    elif near:
        say(f"{near} of {total} mined negatives are near-duplicates of their query's positive")


# ================================================================================================ serving


class Endpoint(serving.Endpoint):
    """TEI's POST /embed on a sentence-transformers embedding folder (an embed run, a stock model such as
    all-MiniLM-L6-v2, or its ONNX export): texts in, one vector each out, exactly as `SentenceTransformer(path)
    .encode(texts, prompt_name=...)` gives it (the model's own pooling, Normalize module and saved prompts; without
    prompt_name its default_prompt_name, if any). normalize=true (TEI's default) L2-normalises the vectors;
    normalize=false gives them as the model outputs them (still unit length for a model that saved a Normalize
    module, as SentenceTransformer.encode does)."""

    name, shape = "embed", '{"inputs": ...}'
    form, many = ("query", "texts"), ("texts",)

    def try_it(self, values: dict) -> list:
        """The passages ranked for the query by cosine similarity (the query with the model's "query" prompt, if it
        saved one, the passages with its "document" prompt): the dense ranking of `bertkit predict --corpus`."""
        if not values["texts"]:
            raise serving.InputError("texts: give at least one passage to rank")

        def vectors(texts: list[str], prompt: str) -> list[list[float]]:
            named = {"prompt_name": prompt} if prompt in self.prompts else {}
            return self.predict(self.parse(self.request_model()(inputs=texts, **named)))

        query, passages = vectors([values["query"]], "query")[0], vectors(values["texts"], "document")
        scores = [sum(q * p for q, p in zip(query, passage)) for passage in passages]
        order = sorted(range(len(scores)), key=lambda i: -scores[i])
        return [{"index": i, "score": round(scores[i], 6), "text": values["texts"][i]} for i in order]

    @staticmethod
    def request_model():
        from pydantic import BaseModel, ConfigDict

        class EmbedRequest(BaseModel):  # TEI's /embed; texts are cut at the model's max_seq_length as it encodes
            model_config = ConfigDict(extra="forbid")
            inputs: Any
            normalize: bool = True
            prompt_name: str | None = None
            truncate: bool = True
            truncation_direction: Literal["Right", "right"] = "Right"

        return EmbedRequest

    @staticmethod
    def inputs_of(body):
        return body

    def __init__(self, run_dir: str):
        model = load_embedder(run_dir)
        self.predictor = _Holder(model)
        self.prompts = dict(getattr(model, "prompts", None) or {})
        self.default_prompt = getattr(model, "default_prompt_name", None)
        self.count = serving.token_counter(model.tokenizer, model.max_seq_length)
        self.info = {"dimension": model.get_embedding_dimension(), "max_length": model.max_seq_length,
                     "prompts": self.prompts, "default_prompt_name": self.default_prompt}

    def parse(self, body) -> list[tuple[str, str | None, bool]]:
        """(text, prompt name, normalize) per input."""
        name = body.prompt_name if body.prompt_name is not None else self.default_prompt
        if name is not None and name not in self.prompts:
            raise serving.InputError(f"prompt_name {name!r}: this model's prompts are {sorted(self.prompts) or 'none'}")
        texts = [serving.filled(value, f"inputs[{i}]") for i, value in enumerate(serving.items(body.inputs))]
        return [(text, name, bool(body.normalize)) for text in texts]

    def chars(self, example) -> int:
        return len(example[0]) + len(self.prompts.get(example[1]) or "")

    def tokens(self, examples: list) -> list[int]:
        return self.count([(self.prompts.get(name) or "") + text for text, name, _ in examples])

    def predict(self, examples: list) -> list[list[float]]:
        import torch

        vectors = [None] * len(examples)
        for name in dict.fromkeys(name for _, name, _ in examples):  # a batch may join requests of several prompts
            indices = [i for i, example in enumerate(examples) if example[1] == name]
            encoded = torch.as_tensor(self.predictor.model.encode(
                [examples[i][0] for i in indices], prompt_name=name, batch_size=64, show_progress_bar=False,
                convert_to_tensor=True)).float().cpu()
            for i, vector in zip(indices, encoded):
                vectors[i] = torch.nn.functional.normalize(vector, dim=-1) if examples[i][2] else vector
        return [vector.tolist() for vector in vectors]


def load_embedder(model_dir: str):
    """The embedding model of a folder, at the precision `inference_precision` set: its ONNX export run by ONNX
    Runtime, or the folder loaded by sentence-transformers itself (its modules, pooling and prompts as saved: a
    stock folder, no trust_remote_code) and readied as predict readies a model (checkpoints.for_inference)."""
    from ..checkpoints import LOAD_PRECISION, for_inference, weights_read
    from ..onnx_model import is_onnx_export, load_onnx_embedder

    if is_onnx_export(model_dir):
        return load_onnx_embedder(model_dir, LOAD_PRECISION.get())
    from sentence_transformers import SentenceTransformer

    try:
        with weights_read(model_dir):
            model = SentenceTransformer(model_dir, device="cpu", local_files_only=True)
    except (OSError, ValueError, KeyError) as error:
        raise BertkitError(f"{model_dir}: sentence-transformers could not load this embedding model "
                           f"({str(error).splitlines()[0] if str(error) else type(error).__name__}) — give an embed "
                           "run's output_dir or a sentence-transformers model folder") from None
    return for_inference(model)


class _Holder:
    """What Server reads of a predictor: its `.model` (a SentenceTransformer, or an ONNX export's runner)."""

    def __init__(self, model):
        self.model = model



def onnx_graph(run_dir: str):
    """What `bertkit export` puts in the graph of an embedding model (its pooling and Normalize too), and how the
    export is checked: bertkit/tasks/embed_export.py."""
    from .embed_export import onnx_graph as embedding_graph

    return embedding_graph(run_dir)

# ------------------------------------------------------------------------------------------------ its report


class Report(reporting.Report):
    """The embed part of report.html: the dev metrics of the model before training (metrics.json base_eval) beside
    the fine-tuned one's: ranking (NDCG@10, MRR@10, Recall@k) or Spearman for scored pairs."""

    def sections(self, view, examples: dict, diagnosis) -> str:
        base = view.metrics.get("base_eval") if isinstance(view.metrics.get("base_eval"), dict) else {}
        rows = [[name, base.get(name, "-"), value] for name, value in view.eval.items()]
        body = table(["dev metric", "base model", "fine-tuned"], rows) if rows else \
            missing("no dev metrics in metrics.json")
        return section("Base model and fine-tuned", body, 3)


class Card(reporting.Card):
    """The embed part of the model card: a sentence-transformers embedding model, what it says of itself (pooling,
    normalised, vector size, its non-empty prompts "query" / "document"), used through SentenceTransformer."""

    tag = "sentence-similarity"
    tags = ["sentence-transformers", "feature-extraction"]
    library = "sentence-transformers"
    intended_use = ("maps a text to one vector; texts that mean the same get close vectors (cosine similarity), for "
                    "semantic search, retrieval and similarity")
    TEXTS = {"zh": ("这部电影好看吗？", "这部电影真好看！"), "en": ("Was the movie good?", "This movie was great!")}

    def __init__(self, model_dir, run_metrics: dict):
        super().__init__(model_dir, run_metrics)
        self.described = self.describe(self.model_dir)

    @staticmethod
    def describe(model_dir: Path) -> dict:
        """Pooling, dimension, normalize and prompts, from modules.json, 1_Pooling/config.json and
        config_sentence_transformers.json."""
        modules = reporting.read_json(model_dir / "modules.json", [])
        modules = [m for m in modules if isinstance(m, dict)]
        pooling = next((m for m in modules if str(m.get("type", "")).endswith(".Pooling")), {})
        config = reporting.read_json(model_dir / str(pooling.get("path", "1_Pooling")) / "config.json", {})
        prompts = reporting.read_json(model_dir / "config_sentence_transformers.json", {}).get("prompts") or {}
        return {"pooling": config.get("pooling_mode", "mean"),
                "dimension": config.get("embedding_dimension", config.get("word_embedding_dimension")),
                "normalize": any(str(m.get("type", "")).endswith(".Normalize") for m in modules),
                "prompts": {name: text for name, text in prompts.items() if isinstance(text, str) and text}
                if isinstance(prompts, dict) else {}}

    def note(self) -> str:
        d = self.described
        return (f"It is a sentence-transformers embedding model ({d['pooling']} pooling, {d['dimension']}-dimensional "
                f"vectors{', normalised' if d['normalize'] else ''}): `SentenceTransformer(path)` loads it with no "
                "custom code, and its encoder loads with plain `transformers` too.")

    def usage(self, repo: str, lang: str) -> str:
        """sentence-transformers' own loading; the saved query / passage prefixes applied by prompt name."""
        query, passage = self.TEXTS[lang]
        prompts = self.described["prompts"]
        lines = ["from sentence_transformers import SentenceTransformer", "",
                 f'model = SentenceTransformer("{repo}")']
        for name, text, variable in (("query", query, "queries"), ("document", passage, "passages")):
            prompt = f', prompt_name="{name}"' if name in prompts else ""
            note = f"  # prefixed with {json.dumps(prompts[name], ensure_ascii=False)}" if name in prompts else ""
            lines.append(f'{variable} = model.encode(["{text}"]{prompt}){note}')
        lines.append("print(model.similarity(queries, passages))")
        return "```python\n" + "\n".join(lines) + "\n```"


__all__ = ["read_examples", "encode", "compute_metrics_fn", "Settings", "load_predictor", "predict_file",
           "evaluate_file", "Embedder", "POOLING_MODES", "QUERY", "DOCUMENT", "saved_pooling", "build_model",
           "transformer_path", "use_bertkit_backbone", "set_prefixes", "settings_of", "export_settings", "read_texts",
           "predict_top_k",
           "check_training_data", "mine_file", "warn_near_duplicates", "Endpoint", "Report",
           "Card", "onnx_graph", "MODEL_FILES"]
