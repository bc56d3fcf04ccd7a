"""The first stage of a search: BM25, the embedding model, or the two fused, over a corpus; which of them a run
answers with, chosen on its dev set and saved beside the model (retriever.json).

    candidates = Candidates.of(query_vectors, corpus_vectors, bm25_index, queries, depth=100)
    ranked, scores = fuse(candidates, Retriever("hybrid", weight=0.6), k=10)    -> (Q, k) corpus indices, best first
    retriever, rows = choose(candidates, relevant)     the weight tuned on dev; rows: bm25 / dense / hybrid metrics
    save(run_dir, retriever) / load(run_dir)           retriever.json beside the model

Why fuse: on question -> paragraph data BM25 is hard to beat (the questions share the paragraph's words) and a dense
model finds what is said in other words; their combination beats both even where BM25 wins alone (Pyserini's DPR
replication on SQuAD, top-20 accuracy: BM25 71.1, dense 52.0, hybrid 75.1). Bruch et al. (2023, "An analysis of
fusion functions for hybrid retrieval") find a convex combination of normalised scores, its weight tuned on a few
labelled queries, better than reciprocal-rank fusion; so does XQuAD here (docs/retrieval.md).

How: each retriever returns its `depth` best passages per query; each side's scores are min-max normalised over its
own candidates for that query (a passage the other side did not return counts as that side's lowest, 0), and
`weight * dense + (1 - weight) * bm25` orders the union (fusion="convex"); fusion="rrf" sums 1 / (60 + rank) instead.
The weight is tuned on dev over 0.1, ..., 0.9, and BM25 alone and the dense model alone are candidates beside it, so
on dev the choice is never below the better of the two. On a tie the simpler retriever wins (dense alone, then BM25
alone; between weights, the one nearest 0.5).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import BertkitError
from . import RETRIEVERS
from .retrieval_files import CHINESE_TERMS, ir_metrics

FUSIONS = ("convex", "rrf")
WEIGHTS = tuple(round(i / 10, 1) for i in range(1, 10))  # the model's shares tried (0 and 1: each alone, beside)
RRF_K = 60  # reciprocal-rank fusion's constant (Cormack et al. 2009)
DEPTH = 100  # candidates per retriever and query
RETRIEVER_FILE = "retriever.json"


@dataclass
class Retriever:
    """Which first stage answers, as a run chose it on dev (or as a user asked)."""

    kind: str = "dense"
    """dense (the embedding model alone), bm25 (BM25 alone) or hybrid (both, fused)."""
    weight: float = 0.5
    """The embedding model's share of the convex fusion (0..1): what `kind` hybrid ranks with, kept (tuned on dev)
    whichever kind was chosen, so that `--retriever hybrid` uses it."""
    fusion: str = "convex"
    """hybrid: convex (normalised scores, `weight`) or rrf (reciprocal-rank fusion)."""
    chinese: str = "bigram"
    """BM25's terms for Chinese text: bigram (characters and their bigrams), char or jieba (retrieval_files)."""
    dev: dict = field(default_factory=dict)
    """NDCG@10 on the run's dev set of each retriever tried ({"bm25": ..., "dense": ..., "hybrid": ...})."""

    def check(self, where: str = RETRIEVER_FILE) -> None:
        if self.kind not in RETRIEVERS:
            raise BertkitError(f"{where}: retriever '{self.kind}' is unknown — use {', '.join(RETRIEVERS)}")
        if self.fusion not in FUSIONS:
            raise BertkitError(f"{where}: fusion '{self.fusion}' is unknown — use {' or '.join(FUSIONS)}")
        if not isinstance(self.weight, (int, float)) or not 0 <= self.weight <= 1:
            raise BertkitError(f"{where}: weight {self.weight!r} is not a share — give a number from 0 to 1")
        if self.chinese not in CHINESE_TERMS:
            raise BertkitError(f"{where}: chinese '{self.chinese}' is unknown — use {', '.join(CHINESE_TERMS)}")
        if not isinstance(self.dev, dict) or not all(isinstance(v, (int, float)) for v in self.dev.values()):
            raise BertkitError(f"{where}: dev {self.dev!r} is not each retriever's NDCG@10 — delete the file to "
                               "rank with the embedding model alone, or rerun the embed run")

    def describe(self) -> str:
        if self.kind != "hybrid":
            return "BM25 alone" if self.kind == "bm25" else "the embedding model alone"
        if self.fusion == "rrf":
            return "BM25 + the embedding model, reciprocal-rank fusion"
        return f"BM25 + the embedding model, weight {self.weight:g} on the model"

    @property
    def uses_model(self) -> bool:
        return self.kind != "bm25"

    @property
    def uses_bm25(self) -> bool:
        return self.kind != "dense"


# ----------------------------------------------------------------------------------------------------------------
# Candidates and their fusion


@dataclass
class Candidates:
    """Each query's best `depth` passages by each retriever (corpus indices, best first) and their scores; a
    retriever not run has None."""

    dense: tuple[np.ndarray, np.ndarray] | None
    bm25: tuple[np.ndarray, np.ndarray] | None
    queries: int

    @classmethod
    def of(cls, query_vectors: np.ndarray | None, corpus_vectors: np.ndarray | None, bm25_index, queries: Sequence[str],
           depth: int = DEPTH) -> "Candidates":
        from .retrieval_files import top_k

        dense = top_k(query_vectors, corpus_vectors, depth) if query_vectors is not None else None
        bm25 = bm25_index.search(list(queries), depth) if bm25_index is not None else None
        return cls(dense, bm25, len(queries))


def _normalised(indices: np.ndarray, scores: np.ndarray) -> list[dict[int, float]]:
    """Per query, {passage: score min-max normalised over that query's candidates} (all equal: 1)."""
    out = []
    for row, values in zip(indices, np.asarray(scores, dtype=np.float64)):
        low, high = float(values.min()), float(values.max())
        span = high - low
        out.append({int(i): (float(v) - low) / span if span > 0 else 1.0 for i, v in zip(row, values)})
    return out


def _reciprocal_ranks(indices: np.ndarray) -> list[dict[int, float]]:
    return [{int(i): 1.0 / (RRF_K + rank + 1) for rank, i in enumerate(row)} for row in indices]


def fuse(candidates: Candidates, retriever: Retriever, k: int) -> tuple[list[list[int]], list[list[float]]]:
    """Each query's `k` best passages (corpus indices) and their scores under `retriever`: one side's own ranking,
    or the fusion of both (module docstring)."""
    if retriever.kind == "dense" or retriever.kind == "bm25":
        side = candidates.dense if retriever.kind == "dense" else candidates.bm25
        if side is None:
            raise BertkitError(f"the {retriever.kind} retriever was not run — please report this bug")
        return [list(map(int, row[:k])) for row in side[0]], [list(map(float, row[:k])) for row in side[1]]
    if candidates.dense is None or candidates.bm25 is None:
        raise BertkitError("a hybrid ranking needs both BM25 and the embedding model — please report this bug")
    if retriever.fusion == "rrf":
        dense, bm25, weight = _reciprocal_ranks(candidates.dense[0]), _reciprocal_ranks(candidates.bm25[0]), 0.5
    else:
        dense, bm25, weight = _normalised(*candidates.dense), _normalised(*candidates.bm25), retriever.weight
    ranked, scores = [], []
    for d, b in zip(dense, bm25):
        fused = {i: weight * d.get(i, 0.0) + (1 - weight) * b.get(i, 0.0) for i in {**d, **b}}
        order = sorted(fused, key=lambda i: (-fused[i], i))[:k]
        ranked.append(order)
        scores.append([fused[i] for i in order])
    return ranked, scores


# ----------------------------------------------------------------------------------------------------------------
# Choosing on dev


def choose(candidates: Candidates, relevant: Sequence[set[int]], fusion: str = "convex",
           kind: str = "auto") -> tuple[Retriever, dict[str, dict]]:
    """The retriever that ranks dev best by NDCG@10 (`kind`="auto"; on a tie the simpler: dense alone, then BM25
    alone), or the one asked for (a hybrid's weight still tuned), and every retriever's dev metrics: {"bm25",
    "dense", "hybrid" (at its best weight, or by rrf)}."""
    def measured(retriever: Retriever) -> dict:
        return ir_metrics(fuse(candidates, retriever, DEPTH)[0], relevant)

    if fusion == "rrf":
        hybrid = Retriever("hybrid", 0.5, "rrf")
        best = measured(hybrid)
    else:  # the weight of the fusion proper (between 0 and 1); nearest 0.5 on a tie
        scores = {weight: measured(Retriever("hybrid", weight)) for weight in WEIGHTS}
        weight = min(scores, key=lambda w: (-round(scores[w]["ndcg@10"], 6), abs(w - 0.5)))
        hybrid, best = Retriever("hybrid", weight), {**scores[weight], "weight": weight}
    # each alone as it ranks alone (not the fusion at weight 0 or 1, which orders its ties otherwise)
    rows = {"dense": measured(Retriever("dense")), "bm25": measured(Retriever("bm25")), "hybrid": best}
    if kind == "auto":
        kind = max(rows, key=lambda name: (round(rows[name]["ndcg@10"], 6), -list(rows).index(name)))
    chosen = Retriever(kind, hybrid.weight, hybrid.fusion)
    chosen.dev = {name: round(row["ndcg@10"], 4) for name, row in rows.items()}
    return chosen, rows


# ----------------------------------------------------------------------------------------------------------------
# Saved beside the model


def save(folder: str | Path, retriever: Retriever) -> None:
    from ..rundir import write_json

    write_json(Path(folder) / RETRIEVER_FILE, asdict(retriever))


def load(folder: str | Path) -> Retriever | None:
    """The retriever a run chose (None: the folder has no retriever.json, e.g. a stock model); a damaged file is one
    line naming it."""
    path = Path(folder) / RETRIEVER_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        retriever = Retriever(**{key: data[key] for key in ("kind", "weight", "fusion", "chinese", "dev")
                                 if key in data})
    except (OSError, ValueError, TypeError) as error:
        raise BertkitError(f"{path} cannot be read ({type(error).__name__}) — delete it to rank with the embedding "
                           "model alone, or rerun the embed run") from None
    retriever.check(str(path))
    return retriever


__all__ = ["RETRIEVERS", "FUSIONS", "WEIGHTS", "RETRIEVER_FILE", "Retriever", "Candidates", "fuse",
           "choose", "save", "load"]
