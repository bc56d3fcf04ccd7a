"""Retrieval data and the measures of a ranking: reading training / dev files for embedding models and rerankers,
corpora, the IR metrics, a BM25 first stage and hard-negative mining. Shared by the embed and rerank tasks (and
serving); nothing here loads a model except `mine_negatives`, which is handed one.

    data = read_retrieval_file("train.jsonl")           -> RetrievalData(kind="pairs" | "scored", rows=[...])
        rows: RetrievalRow(query, positives=[...], negatives=[...], score=None | float, where="train.jsonl line 3")
    corpus = read_corpus("corpus.txt")                  -> [passage, ...] (distinct, file order)
    dev = ir_dev_set(read_retrieval_file("dev.jsonl", allow_no_positive=True), corpus)
        -> IRDevSet(queries={qid: text}, corpus={cid: text}, relevant={qid: {cid, ...}}): the inputs of
           sentence_transformers' InformationRetrievalEvaluator, and of `ir_metrics` below
    ranked, scores = top_k(query_vectors, corpus_vectors, k=100)    -> (Q, k) indices by cosine, best first
    ir_metrics(ranked, [{relevant indices} per query])  -> {"ndcg@10", "mrr@10", "recall@1", "recall@10", "recall@100"}
    spearman(predicted, gold)                            -> float (scored pairs)
    BM25Index(corpus).search(queries, k)                 -> (Q, k) indices, scores (bm25s; Chinese by characters and
                                                            their bigrams)
    mine_negatives(rows, corpus, model=st_model, bm25=True, ...) -> Mined(rows with negatives, near-duplicate count)
    write_flag_jsonl(rows, path)                         -> FlagEmbedding's {"query", "pos": [...], "neg": [...]}

File formats (CSV, TSV, JSON, JSONL, Parquet: anything `bertkit.datafiles.read_table` reads):
- pairs `query, positive`; triplets `query, positive, negative`; n-tuples `query, positive, negative_1, ...`;
- FlagEmbedding JSONL `{"query": ..., "pos": [...], "neg": [...]}` (a list cell or a single string);
- scored pairs `sentence1, sentence2, score` (STS-style; any numeric label column makes a file "scored").
Columns are found by name as `bertkit.datafiles.resolve_columns` finds them (case-insensitive, in priority order:
QUERY_COLUMNS, POSITIVE_COLUMNS, NEGATIVE_COLUMNS, SCORE_COLUMNS); `RetrievalColumns` (a recipe's `data.*_column=`
keys) overrides them. Every mistake is a `BertkitError` of one line naming the file, the line and the column.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Sequence

import numpy as np

from ..datafiles import clip, listing, read_table, row_location, value_kind
from ..errors import BertkitError

# Case-insensitive, in priority order: the first name in a list that a file has wins.
QUERY_COLUMNS = ("query", "question", "anchor", "q", "sentence1", "text", "text_a", "sentence_a", "premise",
                 "查询", "问题", "句子1", "文本", "文本1")
POSITIVE_COLUMNS = ("positive", "pos", "positives", "passage", "document", "doc", "context", "paragraph", "answer",
                    "response", "sentence2", "text_pair", "text_b", "sentence_b", "hypothesis",
                    "正例", "段落", "文档", "答案", "句子2", "文本2")
NEGATIVE_COLUMNS = ("negative", "neg", "negatives", "hard_negative", "hard_negatives", "负例")
NUMBERED_NEGATIVE = re.compile(r"(?:negative|neg|hard_negative)[_ -]?(\d+)", re.IGNORECASE)  # negative_1, neg2 ...
SCORE_COLUMNS = ("score", "label", "labels", "similarity", "scores", "relevance", "分数", "标签", "相似度")
CORPUS_TEXT_COLUMNS = ("text", "passage", "document", "doc", "content", "paragraph", "context", "positive", "正文",
                       "段落", "文档", "内容")
KS = (1, 10, 100)  # recall@k
METRIC_NAMES = ("ndcg@10", "mrr@10", "recall@1", "recall@10", "recall@100")


# ----------------------------------------------------------------------------------------------------------------
# Reading: rows of (query, positives, negatives) or scored pairs, columns detected or given


@dataclass
class RetrievalColumns:
    """The `data.*_column=` keys of a retrieval recipe (embed, rerank); null = detected by name."""

    query_column: str | None = None
    """Column holding the query / first sentence (auto-detected: query, question, anchor, sentence1, 问题, ...)."""
    positive_column: str | None = None
    """Column holding the positive passage(s) / second sentence (auto: positive, pos, passage, sentence2, ...)."""
    negative_column: str | None = None
    """Column holding negative passage(s) (auto: negative, neg, negative_1..N, 负例, ...); optional."""
    score_column: str | None = None
    """Column holding a similarity score / label; present = scored pairs (auto: score, label, similarity, 分数)."""


@dataclass(frozen=True)
class RetrievalColumnMap:
    """The columns a file's rows were read from (`negatives`: none, one list column, or negative_1..N)."""

    query: str
    positive: str | None
    negatives: tuple[str, ...] = ()
    score: str | None = None


@dataclass
class RetrievalRow:
    query: str
    positives: list[str]
    """One or more (FlagEmbedding `pos` list); empty only in a dev file read with allow_no_positive."""
    negatives: list[str] = field(default_factory=list)
    score: float | None = None
    """Scored pairs: the similarity of (query, positives[0])."""
    where: str = ""
    """'train.jsonl line 3', for messages."""


@dataclass
class RetrievalData:
    path: str
    kind: str
    """"pairs" (query, positive(s), optional negatives) or "scored" (sentence1, sentence2, score)."""
    rows: list[RetrievalRow]
    columns: RetrievalColumnMap

    @property
    def has_negatives(self) -> bool:
        return any(row.negatives for row in self.rows)


def _lower_names(names: Sequence[str]) -> dict[str, str]:
    return {name.strip().lower(): name for name in names}


def _first(candidates: Sequence[str], names: Sequence[str], taken: set) -> str | None:
    lowered = _lower_names([n for n in names if n not in taken])
    return next((lowered[c] for c in candidates if c in lowered), None)


def _explicit(name: str, names: Sequence[str], source: str, key: str) -> str:
    if name in names:
        return name
    close = difflib.get_close_matches(name, list(names), n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    raise BertkitError(f"column '{name}' (data.{key}) is not in {source} (columns: {listing(names)}) — {hint}set "
                       f"data.{key} to one of those")


def resolve_retrieval_columns(names: Sequence[str], source: str, given: RetrievalColumns | None = None,
                              require_positive: bool = True) -> RetrievalColumnMap:
    """Which columns hold the query, the positive(s), the negative(s) and a score: `given` names win, else the
    first known name (QUERY_COLUMNS, ...); negative_1..N columns are all negatives, in their number's order."""
    given = given or RetrievalColumns()
    names = list(names)
    taken: set = set()

    def pick(key: str, candidates: Sequence[str]) -> str | None:
        explicit = getattr(given, key)
        found = _explicit(explicit, names, source, key) if explicit else _first(candidates, names, taken)
        taken.add(found)
        return found

    score = pick("score_column", SCORE_COLUMNS)
    query = pick("query_column", QUERY_COLUMNS)
    positive = pick("positive_column", POSITIVE_COLUMNS)
    if given.negative_column:
        negatives = (_explicit(given.negative_column, names, source, "negative_column"),)
    else:
        one = _first(NEGATIVE_COLUMNS, names, taken)
        numbered = sorted((int(m.group(1)), n) for n in names if n not in taken
                          and (m := NUMBERED_NEGATIVE.fullmatch(n.strip())))
        negatives = (one,) if one else tuple(name for _, name in numbered)
    if query is None:
        raise BertkitError(f"no query column in {source} (columns: {listing(names)}) — name it 'query' (or "
                           f"'question', 'anchor', 'sentence1') or set data.query_column=<name>")
    if positive is None and require_positive:
        raise BertkitError(f"no positive column in {source} (columns: {listing(names)}) — name it 'positive' (or "
                           f"'pos', 'passage', 'sentence2') or set data.positive_column=<name>")
    used = [c for c in (query, positive, score, *negatives) if c]
    if len(set(used)) != len(used):
        raise BertkitError(f"{source}: one column is used twice (query={query}, positive={positive}, "
                           f"negative={','.join(negatives) or None}, score={score}) — give data.query_column, "
                           f"data.positive_column, data.negative_column and data.score_column different columns")
    unread = [name for name in names if name not in used and ("neg" in name.lower() or "负" in name)]
    if unread and not negatives:  # `hard_neg`: not a name bertkit knows, so its negatives would be dropped unsaid
        raise BertkitError(f"{source}: column '{unread[0]}' looks like negatives but is not read (query={query}, "
                           f"positive={positive}) — set data.negative_column={unread[0]} to train on it, or remove "
                           f"the column")
    return RetrievalColumnMap(query, positive, negatives, score)


def _text(value: Any, where: str, column: str) -> str:
    """A non-empty string cell."""
    if not isinstance(value, str):
        raise BertkitError(f"{where}: column '{column}' holds {value_kind(value)}, not text — write a string there")
    if not value.strip():
        raise BertkitError(f"{where}: column '{column}' is empty — fill it in or remove the line")
    return value


def _texts(value: Any, where: str, column: str) -> list[str]:
    """A cell holding one text or a list of texts (FlagEmbedding's pos / neg); None = none."""
    if value is None:
        return []
    if isinstance(value, list):
        return [_text(item, where, column) for item in value]
    return [_text(value, where, column)]


def _score(value: Any, where: str, column: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise BertkitError(f"{where}: column '{column}' holds {value_kind(value)} ({clip(value, 20)}), not a "
                           f"number — scored pairs need a numeric score on every line")
    return float(value)


def read_retrieval_file(path: str, columns: RetrievalColumns | None = None, allow_no_positive: bool = False,
                        split: str = "train") -> RetrievalData:
    """Every row of a retrieval file, checked: a non-empty query, at least one non-empty positive (a dev file may
    hold queries without one when `allow_no_positive`: they are left out of the ranking), non-empty negatives, a
    numeric score in scored files. `split` applies to Hub datasets only."""
    table = read_table(path, split)
    names = list(table.column_names)
    found = resolve_retrieval_columns(names, str(path), columns)
    kind = "scored" if found.score and not found.negatives else "pairs"
    cells = {name: table[name][:] for name in {c for c in (found.query, found.positive, found.score,
                                                           *found.negatives) if c}}
    rows = []
    for i in range(len(table)):
        where = f"{path} {row_location(table, i)}"
        query = _text(cells[found.query][i], where, found.query)
        positives = _texts(cells[found.positive][i], where, found.positive)
        if not positives and not allow_no_positive:
            raise BertkitError(f"{where}: no positive in column '{found.positive}' — give each query at least one "
                               f"positive passage, or remove the line")
        negatives = [text for column in found.negatives for text in _texts(cells[column][i], where, column)]
        score = _score(cells[found.score][i], where, found.score) if kind == "scored" else None
        if kind == "scored" and len(positives) != 1:
            raise BertkitError(f"{where}: a scored pair needs exactly one second sentence in column "
                               f"'{found.positive}', not {len(positives)}")
        rows.append(RetrievalRow(query, positives, negatives, score, where))
    return RetrievalData(str(path), kind, rows, found)


def read_corpus(path: str, text_column: str | None = None) -> list[str]:
    """The passages of a corpus file, distinct, in file order: a .txt file holds one per line (blank lines
    skipped); a table holds them in `text_column` (auto: text, passage, document, content, 段落, ...)."""
    table = read_table(path)
    names = list(table.column_names)
    column = (_explicit(text_column, names, str(path), "corpus_text_column") if text_column
              else _first(CORPUS_TEXT_COLUMNS, names, set()))
    if column is None:
        strings = [n for n in names if isinstance(table[0][n], str)]
        column = strings[0] if len(strings) == 1 else None
    if column is None:
        raise BertkitError(f"cannot tell which column of the corpus {path} holds the passages (columns: "
                           f"{listing(names)}) — name it 'text' or write one passage per line in a .txt file")
    passages = []
    for i, value in enumerate(table[column][:]):
        if isinstance(value, str) and not value.strip() and str(path).endswith(".txt"):
            continue
        passages.append(_text(value, f"{path} {row_location(table, i)}", column))
    if not passages:
        raise BertkitError(f"{path} holds no passages — put one passage per line in it")
    return list(dict.fromkeys(passages))


def distinct_texts(rows: Iterable[RetrievalRow], corpus: Iterable[str] = ()) -> list[str]:
    """All positives (and negatives) of `rows` then `corpus`, distinct, in order: the passages a ranking runs over."""
    texts = [text for row in rows for text in (*row.positives, *row.negatives)]
    return list(dict.fromkeys([*texts, *corpus]))


# ----------------------------------------------------------------------------------------------------------------
# A dev set for ranking: every dev query ranks the corpus = all dev positives (+ negatives, + a corpus file)


@dataclass
class IRDevSet:
    """InformationRetrievalEvaluator's inputs: queries {qid: text}, corpus {cid: text}, relevant {qid: {cid}}."""

    queries: dict[str, str]
    corpus: dict[str, str]
    relevant: dict[str, set[str]]
    left_out: int = 0
    """Queries of the file with no positive (not ranked)."""

    def relevant_indices(self) -> list[set[int]]:
        """Per query (in `queries` order), the corpus positions of its positives."""
        position = {cid: i for i, cid in enumerate(self.corpus)}
        return [{position[cid] for cid in self.relevant[qid]} for qid in self.queries]


def ir_dev_set(data: RetrievalData, corpus: Sequence[str] = ()) -> IRDevSet:
    """The dev ranking task of a pairs file: each distinct query ranks every dev positive and negative plus
    `corpus`; its positives are relevant. A file where no query has a positive is refused in one line."""
    texts = distinct_texts(data.rows, corpus)
    cid = {text: f"d{i}" for i, text in enumerate(texts)}
    queries: dict[str, str] = {}
    relevant: dict[str, set[str]] = {}
    qid_of: dict[str, str] = {}
    left_out = 0
    for row in data.rows:
        if not row.positives:
            left_out += 1
            continue
        qid = qid_of.setdefault(row.query, f"q{len(qid_of)}")
        queries[qid] = row.query
        relevant.setdefault(qid, set()).update(cid[text] for text in row.positives)
    if not queries:
        raise BertkitError(f"{data.path}: no query has a positive in the corpus, so there is nothing to rank — give "
                           f"the dev queries their positive passages (column '{data.columns.positive}')")
    return IRDevSet(queries, {c: t for t, c in cid.items()}, relevant, left_out)


# ----------------------------------------------------------------------------------------------------------------
# Measures: top-k by cosine, NDCG@10 / MRR@10 / Recall@k (binary relevance, as sentence-transformers'
# InformationRetrievalEvaluator computes them), Spearman


def top_k(query_vectors: np.ndarray, corpus_vectors: np.ndarray, k: int, chunk: int = 1024
          ) -> tuple[np.ndarray, np.ndarray]:
    """(Q, min(k, N)) corpus indices by cosine similarity, best first, and their scores."""
    q = _unit(np.asarray(query_vectors, dtype=np.float32))
    c = _unit(np.asarray(corpus_vectors, dtype=np.float32))
    k = min(k, len(c))
    indices, scores = [], []
    for start in range(0, len(q), chunk):
        sim = q[start:start + chunk] @ c.T  # (q, N)
        part = np.argpartition(-sim, k - 1, axis=1)[:, :k] if k < sim.shape[1] else np.tile(np.arange(k), (len(sim), 1))
        part_scores = np.take_along_axis(sim, part, axis=1)
        order = np.argsort(-part_scores, axis=1, kind="stable")
        indices.append(np.take_along_axis(part, order, axis=1))
        scores.append(np.take_along_axis(part_scores, order, axis=1))
    return np.concatenate(indices), np.concatenate(scores)


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def ir_metrics(rankings: Sequence[Sequence[int]], relevant: Sequence[set[int]]) -> dict[str, float]:
    """NDCG@10, MRR@10 and Recall@1/10/100 averaged over queries, from each query's ranking (best first) and its
    set of relevant items. Binary relevance; a ranking shorter than k counts what it has."""
    if len(rankings) != len(relevant) or len(rankings) == 0:
        raise ValueError("ir_metrics needs one ranking per query and at least one query")
    sums = dict.fromkeys(METRIC_NAMES, 0.0)
    for ranking, gold in zip(rankings, relevant):
        hits = [int(item) in gold for item in list(ranking)[:max(KS)]]
        dcg = sum(1.0 / math.log2(rank + 2) for rank, hit in enumerate(hits[:10]) if hit)
        ideal = sum(1.0 / math.log2(rank + 2) for rank in range(min(len(gold), 10)))
        sums["ndcg@10"] += dcg / ideal if ideal else 0.0
        sums["mrr@10"] += next((1.0 / (rank + 1) for rank, hit in enumerate(hits[:10]) if hit), 0.0)
        for k in KS:
            sums[f"recall@{k}"] += sum(hits[:k]) / len(gold) if gold else 0.0
    return {name: total / len(rankings) for name, total in sums.items()}


def spearman(predicted: Sequence[float], gold: Sequence[float]) -> float:
    """Spearman's rank correlation (ties share their mean rank), as scipy computes it."""
    from scipy.stats import spearmanr

    return float(spearmanr(np.asarray(predicted, dtype=np.float64), np.asarray(gold, dtype=np.float64)).statistic)


# ----------------------------------------------------------------------------------------------------------------
# BM25 (the bm25s package): English by words without stopwords, Chinese by characters and their bigrams


_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_ZH_RUNS = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+|[A-Za-z0-9]+")
_ZH_WORD = re.compile(r"\w")


def is_chinese(texts: Sequence[str], sample: int = 200) -> bool:
    """Whether texts are mostly Chinese: CJK characters are at least a third of the non-space characters."""
    joined = "".join(texts[:sample])
    letters = len(re.sub(r"\s", "", joined))
    return letters > 0 and len(_CJK.findall(joined)) / letters >= 1 / 3


CHINESE_TERMS = ("bigram", "char", "jieba")


def bm25_tokens(texts: Sequence[str], chinese: str = "bigram", zh: bool | None = None) -> list[list[str]]:
    """Each text as BM25 terms. Chinese (`zh`, auto-detected when None): every character and every pair of adjacent
    characters (chinese="bigram", the default), single characters ("char") or rjieba words ("jieba"), ASCII words
    kept whole; else bm25s' word tokenizer with English stopwords. On CMRC 2018's trial set (1,000 questions over 256
    paragraphs, NDCG@10) bigrams gave 0.988 / 0.992 (train / dev questions), characters 0.980 / 0.976, rjieba words
    0.977 / 0.993: bigrams were never far from the best and need no word segmenter (docs/retrieval.md)."""
    zh = is_chinese(texts) if zh is None else zh
    if not zh:
        import bm25s

        return bm25s.tokenize(list(texts), stopwords="en", return_ids=False, show_progress=False)
    if chinese == "jieba":
        import rjieba

        return [[w.lower() for w in rjieba.cut(text) if _ZH_WORD.search(w)] for text in texts]
    if chinese not in CHINESE_TERMS:
        raise BertkitError(f"BM25 Chinese terms '{chinese}' are unknown — use {', '.join(CHINESE_TERMS)}")
    return [_chinese_terms(text.lower(), chinese == "bigram") for text in texts]


def _chinese_terms(text: str, bigrams: bool) -> list[str]:
    terms = []
    for run in _ZH_RUNS.findall(text):
        if not _CJK.match(run):  # an ASCII word
            terms.append(run)
            continue
        terms.extend(run)
        if bigrams:
            terms.extend(run[i:i + 2] for i in range(len(run) - 1))
    return terms


class BM25Index:
    """A BM25 index over `corpus` (bm25s): `search(queries, k)` -> (Q, k) corpus indices, best first, and scores.
    The language is decided once from the corpus (is_chinese) and used for the queries too."""

    def __init__(self, corpus: Sequence[str], chinese: str = "bigram"):
        import bm25s

        self.corpus, self.chinese = list(corpus), chinese
        self.zh = is_chinese(self.corpus)
        self.retriever = bm25s.BM25()
        self.retriever.index(bm25_tokens(self.corpus, chinese, self.zh), show_progress=False)

    def search(self, queries: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        k = min(k, len(self.corpus))
        tokens = [t or ["\x00"] for t in bm25_tokens(list(queries), self.chinese, self.zh)]  # an empty query
        indices, scores = self.retriever.retrieve(tokens, k=k, show_progress=False, n_threads=1)
        return np.asarray(indices), np.asarray(scores)


# ----------------------------------------------------------------------------------------------------------------
# Hard negatives: from a sentence-transformers model (util.mine_hard_negatives) and/or BM25, near-positives skipped


NEAR_DUPLICATE = 0.9  # difflib ratio at or above which a mined negative is the positive in other words


def near_duplicate(a: str, b: str, threshold: float = NEAR_DUPLICATE) -> bool:
    """Whether two passages are (nearly) the same text: whitespace and case ignored, difflib ratio >= threshold."""
    a, b = " ".join(a.lower().split()), " ".join(b.lower().split())
    if a == b:
        return True
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return matcher.real_quick_ratio() >= threshold and matcher.quick_ratio() >= threshold \
        and matcher.ratio() >= threshold


@dataclass
class Mined:
    rows: list[RetrievalRow]
    """The input rows, one per distinct query, positives merged and `negatives` the mined ones (model first)."""
    negatives: int
    """Negatives written in all."""
    near_duplicates: int
    """Of those, how many are near-duplicates of one of their query's positives (near_duplicate)."""
    short: int
    """Queries that got fewer than num_negatives."""


def _grouped(rows: Sequence[RetrievalRow]) -> list[RetrievalRow]:
    """One row per distinct query, positives (and given negatives) merged in order."""
    by_query: dict[str, RetrievalRow] = {}
    for row in rows:
        kept = by_query.setdefault(row.query, RetrievalRow(row.query, [], [], None, row.where))
        kept.positives = list(dict.fromkeys([*kept.positives, *row.positives]))
        kept.negatives = list(dict.fromkeys([*kept.negatives, *row.negatives]))
    return list(by_query.values())


def _model_negatives(rows: list[RetrievalRow], corpus: list[str], model, num_negatives: int, range_min: int,
                     range_max: int | None, relative_margin: float | None, query_prompt: str | None,
                     passage_prompt: str | None, batch_size: int) -> dict[str, list[str]]:
    """query -> negatives ranked by the model, via sentence_transformers.util.mine_hard_negatives (candidates in
    [range_min, range_max) of its ranking, none within relative_margin of the weakest positive's score)."""
    import datasets
    from sentence_transformers.util import mine_hard_negatives

    pairs = datasets.Dataset.from_dict({"query": [r.query for r in rows for _ in r.positives],
                                        "positive": [p for r in rows for p in r.positives]})
    try:
        mined = mine_hard_negatives(pairs, model, "query", "positive", corpus=corpus, range_min=range_min,
                                    range_max=range_max, relative_margin=relative_margin,
                                    num_negatives=num_negatives, sampling_strategy="top", output_format="triplet",
                                    query_prompt=query_prompt or None, corpus_prompt=passage_prompt or None,
                                    batch_size=batch_size, verbose=False)
    except ValueError as error:  # its window checks (range_min >= range_max, too few candidates)
        raise BertkitError(f"hard-negative mining refused the settings ({clip(error, 160)}) — change --range-min "
                           f"/ --range-max / --num-negatives (negatives_per_query in a rerank run)") from None
    found: dict[str, list[str]] = {}
    for query, negative in zip(mined["query"], mined["negative"]):
        found.setdefault(query, [])
        if negative not in found[query]:
            found[query].append(negative)
    return found


def _bm25_negatives(rows: list[RetrievalRow], corpus: list[str], num_negatives: int, range_min: int,
                    range_max: int | None, chinese: str) -> dict[str, list[str]]:
    """query -> negatives ranked by BM25: positives skipped, then the candidates in [range_min, range_max) of the
    remaining ranking with a score above 0 (a zero score shares no term: a random passage, not a hard one)."""
    index = BM25Index(corpus, chinese)
    window = range_max if range_max is not None else range_min + num_negatives * 10
    indices, scores = index.search([row.query for row in rows], window + max(len(r.positives) for r in rows) + 1)
    found = {}
    for row, ranked, ranked_scores in zip(rows, indices, scores):
        positives = set(row.positives)
        candidates = [corpus[i] for i, s in zip(ranked, ranked_scores) if s > 0 and corpus[i] not in positives
                      and corpus[i] != row.query]
        found[row.query] = candidates[range_min:window][:num_negatives]
    return found


def mine_negatives(rows: Sequence[RetrievalRow], corpus: Sequence[str] = (), model=None, bm25: bool = False,
                   num_negatives: int = 3, range_min: int = 0, range_max: int | None = None,
                   relative_margin: float | None = 0.05, query_prompt: str | None = None,
                   passage_prompt: str | None = None, chinese: str = "bigram", batch_size: int = 32) -> Mined:
    """Hard negatives for each distinct query of `rows`, from the passages of `corpus` and of the rows themselves:
    ranked by `model` (a SentenceTransformer; sentence_transformers.util.mine_hard_negatives), by BM25 (`bm25`), or
    both (model negatives first, BM25 filling up to num_negatives). Positives are never negatives; `range_min`
    skips the top of each ranking (likely unlabelled positives), `relative_margin` (model only) skips candidates
    scoring within that share of the positive's score. Negatives already in the rows are kept first."""
    if model is None and not bm25:
        raise BertkitError("hard-negative mining needs a model, BM25 or both — give --model and/or --bm25")
    grouped = _grouped(rows)
    if any(not row.positives for row in grouped):
        raise BertkitError(f"{next(r.where for r in grouped if not r.positives)}: a query without a positive cannot "
                           f"be mined — give it a positive or remove it")
    passages = distinct_texts([replace(r, negatives=[]) for r in grouped], corpus)
    if len(passages) < 2:
        raise BertkitError("the corpus holds no passage besides the positives — give a corpus (--corpus FILE)")
    by_model = (_model_negatives(grouped, passages, model, num_negatives, range_min, range_max, relative_margin,
                                 query_prompt, passage_prompt, batch_size) if model is not None else {})
    by_bm25 = _bm25_negatives(grouped, passages, num_negatives, range_min, range_max, chinese) if bm25 else {}
    total = near = short = 0
    for row in grouped:
        mined = list(dict.fromkeys([*by_model.get(row.query, []), *by_bm25.get(row.query, [])]))
        mined = [text for text in mined if text not in row.positives and text not in row.negatives][:num_negatives]
        short += len(mined) < num_negatives
        near += sum(any(near_duplicate(text, p) for p in row.positives) for text in mined)
        total += len(mined)
        row.negatives = [*row.negatives, *mined]
    return Mined(grouped, total, near, short)


def write_flag_jsonl(rows: Iterable[RetrievalRow], handle) -> int:
    """FlagEmbedding's training format, one {"query", "pos": [...], "neg": [...]} object a line, into an open
    text handle; returns the rows written."""
    import json

    count = 0
    for row in rows:
        handle.write(json.dumps({"query": row.query, "pos": row.positives, "neg": row.negatives},
                                ensure_ascii=False) + "\n")
        count += 1
    return count


__all__ = ["QUERY_COLUMNS", "POSITIVE_COLUMNS", "NEGATIVE_COLUMNS", "SCORE_COLUMNS", "CORPUS_TEXT_COLUMNS",
           "METRIC_NAMES", "RetrievalColumns", "RetrievalColumnMap", "RetrievalRow", "RetrievalData",
           "resolve_retrieval_columns", "read_retrieval_file", "read_corpus", "distinct_texts", "IRDevSet",
           "ir_dev_set", "top_k", "ir_metrics", "spearman", "is_chinese", "bm25_tokens", "BM25Index",
           "NEAR_DUPLICATE", "near_duplicate", "Mined", "mine_negatives", "write_flag_jsonl"]
