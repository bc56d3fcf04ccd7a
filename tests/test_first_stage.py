"""The first stage of a search (bertkit/tasks/first_stage.py): BM25, the embedding model and their fusion, the
retriever an embed run chooses on dev and saves (retriever.json), and `bertkit predict --corpus` / `evaluate`
ranking with it (or with --retriever), each saying which retriever answers and why."""

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from bertkit.cli import app
from bertkit.tasks import first_stage
from bertkit.tasks.first_stage import Candidates, Retriever, choose, fuse
from bertkit.tasks.retrieval_files import BM25Index, bm25_tokens, ir_metrics
from helpers import one_line_error
from test_embed import EN_QA, small_pairs, write_jsonl

runner = CliRunner()
pytestmark = pytest.mark.usefixtures("one_thread")


def candidates_of(dense_scores: np.ndarray, bm25_scores: np.ndarray) -> Candidates:
    """Candidates from full (Q, N) score matrices: every passage is a candidate of both sides."""
    def side(scores):
        order = np.argsort(-scores, axis=1, kind="stable")
        return order, np.take_along_axis(scores, order, axis=1)
    return Candidates(side(dense_scores), side(bm25_scores), len(dense_scores))


def test_the_ends_of_the_weight_are_each_retriever_alone():
    rng = np.random.default_rng(0)
    dense, bm25 = rng.normal(size=(5, 30)), rng.gamma(2.0, size=(5, 30))
    candidates = candidates_of(dense, bm25)
    assert fuse(candidates, Retriever("hybrid", 1.0), 10)[0] == np.argsort(-dense, axis=1)[:, :10].tolist()
    assert fuse(candidates, Retriever("hybrid", 0.0), 10)[0] == np.argsort(-bm25, axis=1)[:, :10].tolist()
    assert fuse(candidates, Retriever("bm25"), 10)[0] == np.argsort(-bm25, axis=1)[:, :10].tolist()


def test_convex_fusion_normalises_each_side_and_counts_a_missing_passage_as_its_lowest():
    # dense returned passages 0, 1 (scores 0.9, 0.5), BM25 passages 2, 1 (scores 12, 2): min-max per side
    candidates = Candidates((np.array([[0, 1]]), np.array([[0.9, 0.5]])), (np.array([[2, 1]]), np.array([[12.0, 2.0]])),
                            1)
    ranked, scores = fuse(candidates, Retriever("hybrid", 0.4), 3)
    # 0: 0.4 * 1 + 0.6 * 0 = 0.4; 1: 0.4 * 0 + 0.6 * 0 = 0; 2: 0.4 * 0 + 0.6 * 1 = 0.6
    assert ranked == [[2, 0, 1]] and scores[0] == pytest.approx([0.6, 0.4, 0.0])
    ranked, scores = fuse(candidates, Retriever("hybrid", 0.5, "rrf"), 3)
    assert ranked == [[1, 0, 2]]  # 1 is second on both sides: 2 / 62 beats 1 / 61 each
    assert scores[0][0] == pytest.approx(0.5 * (1 / 62) + 0.5 * (1 / 62))


def test_on_dev_the_choice_is_never_below_the_better_of_bm25_and_the_model():
    rng = np.random.default_rng(1)
    for trial in range(6):
        relevant = [{int(i)} for i in rng.integers(0, 40, size=25)]
        truth = np.zeros((25, 40))
        for q, gold in enumerate(relevant):
            truth[q, list(gold)] = 1
        dense = truth * rng.uniform(0, 2) + rng.normal(size=truth.shape)  # two noisy views of the truth
        bm25 = np.maximum(truth * rng.uniform(0, 2) + rng.normal(size=truth.shape) + 3, 0)
        chosen, rows = choose(candidates_of(dense, bm25), relevant)
        best_single = max(rows["dense"]["ndcg@10"], rows["bm25"]["ndcg@10"])
        ranked = fuse(candidates_of(dense, bm25), chosen, 100)[0]
        assert ir_metrics(ranked, relevant)["ndcg@10"] >= best_single - 1e-12, (trial, chosen, rows)
        assert chosen.dev == {name: round(row["ndcg@10"], 4) for name, row in rows.items()}


def test_fusion_is_chosen_where_bm25_and_the_model_err_on_different_queries():
    # query 0: the model ranks its passage (0) first, BM25 second; query 1 (passage 1): the other way round
    dense = np.array([[0.9, 0.2, 0.3, 0.1], [0.7, 0.75, 0.1, 0.8]])
    bm25 = np.array([[2.5, 0.0, 3.0, 2.0], [0.0, 9.0, 1.0, 2.0]])
    chosen, rows = choose(candidates_of(dense, bm25), [{0}, {1}])
    assert rows["hybrid"]["ndcg@10"] == 1.0 > max(rows["dense"]["ndcg@10"], rows["bm25"]["ndcg@10"])
    assert chosen.kind == "hybrid" and 0 < chosen.weight < 1
    forced, _ = choose(candidates_of(dense, bm25), [{0}, {1}], kind="dense")
    assert forced.kind == "dense" and forced.weight == chosen.weight  # the tuned weight kept for --retriever hybrid


def test_a_tie_goes_to_the_simpler_retriever():
    scores = np.array([[3.0, 2.0, 1.0]])
    chosen, _ = choose(candidates_of(scores, scores), [{0}])
    assert chosen.kind == "dense"


def test_chinese_bm25_terms_are_characters_and_their_bigrams():
    terms = ["北", "京", "大", "学", "北京", "京大", "大学", "in", "2024", "年"]
    assert bm25_tokens(["北京大学 in 2024年"], zh=True) == [terms]
    assert bm25_tokens(["北京大学"], "char", zh=True) == [["北", "京", "大", "学"]]
    index = BM25Index(["北京大学位于海淀区。", "大连在辽宁。", "京都大学在日本。"])
    assert index.search(["北京大学在哪里"], 1)[0].tolist() == [[0]]


# ------------------------------------------------------------------------------------------------ runs


def embed_run(model_dir: str, root: Path, *overrides: str) -> tuple[Path, str]:
    out = root / "run"
    result = runner.invoke(app, ["run", "embed", f"model={model_dir}", "pooling=mean", f"output_dir={out}",
                                 f"data.train={small_pairs(root / 't.jsonl', 16)}",
                                 f"data.eval={small_pairs(root / 'd.jsonl', 12, 40)}", "train.max_steps=1",
                                 "train.per_device_train_batch_size=8", "precision=fp32", *overrides])
    assert result.exit_code == 0, result.output
    return out, result.output


@pytest.fixture(scope="module")
def tiny_embed_run(tiny_model_dir, tmp_path_factory):
    return embed_run(tiny_model_dir, tmp_path_factory.mktemp("first-stage"))


def test_an_embed_run_chooses_its_first_stage_on_dev_and_says_the_three(tiny_embed_run):
    out, output = tiny_embed_run
    saved = first_stage.load(out)
    metrics = json.loads((out / "metrics.json").read_text())
    stages = metrics["first_stage"]
    assert set(stages["fine_tuned"]) == set(stages["base"]) == {"dense", "bm25", "hybrid"}
    best = max(row["ndcg@10"] for row in stages["fine_tuned"].values())
    assert stages["fine_tuned"][saved.kind]["ndcg@10"] == pytest.approx(best)
    assert stages["retriever"]["kind"] == saved.kind and saved.dev["bm25"] == round(stages["fine_tuned"]["bm25"]
                                                                                     ["ndcg@10"], 4)
    for name in ("dense", "bm25", "hybrid"):  # the summary: each base -> fine-tuned
        assert f"{name} ndcg@10" in output
    assert "retriever" in output
    # what to run next is a ranking of the user's passages (vectors alone are not a search)
    assert f"bertkit predict {out} QUERIES_FILE --corpus PASSAGES_FILE --top-k 10 -o ranked.jsonl" in output, output


def test_predict_and_evaluate_rank_with_the_chosen_retriever_and_say_why(tiny_embed_run, tmp_path):
    out, _ = tiny_embed_run
    saved = first_stage.load(out)
    # a retriever.json of the run's, made hybrid: predict must follow the file, not the model alone
    hybrid = Retriever("hybrid", 0.3, dev={"dense": 0.1, "bm25": 0.5, "hybrid": 0.6})
    first_stage.save(out, hybrid)
    try:
        passages = [json.loads(line)["positive"] for line in (EN_QA / "dev.jsonl").read_text().splitlines()[:30]]
        corpus = tmp_path / "corpus.txt"
        corpus.write_text("\n".join(dict.fromkeys(p.replace("\n", " ") for p in passages)) + "\n")
        queries = write_jsonl(tmp_path / "q.jsonl", [{"query": json.loads(line)["query"]} for line in
                                                     (EN_QA / "dev.jsonl").read_text().splitlines()[:4]])
        result = runner.invoke(app, ["predict", str(out), queries, "--corpus", str(corpus), "--top-k", "3",
                                     "-o", str(tmp_path / "top.jsonl")])
        assert result.exit_code == 0, result.output
        assert "ranking with hybrid (BM25 + the embedding model, weight 0.3 on the model): the run chose it on its " \
               "dev set (NDCG@10 dense 0.100, bm25 0.500, hybrid 0.600)" in " ".join(result.output.split())
        result = runner.invoke(app, ["predict", str(out), queries, "--corpus", str(corpus), "--top-k", "3",
                                     "--retriever", "bm25", "-o", str(tmp_path / "bm25.jsonl")])
        assert result.exit_code == 0 and "ranking with bm25 (BM25 alone): asked for by --retriever" in result.output
        texts = corpus.read_text().splitlines()
        expected, _ = BM25Index(texts).search([json.loads(q)["query"] for q in Path(queries).read_text().splitlines()],
                                              3)
        got = [[texts.index(r["passage"]) for r in json.loads(line)["results"]]
               for line in (tmp_path / "bm25.jsonl").read_text().splitlines()]
        assert got == expected.tolist()
    finally:
        first_stage.save(out, saved)
    dev = str(out.parent / "d.jsonl")
    results = {}
    for asked in (None, "dense", "bm25", "hybrid"):
        result = runner.invoke(app, ["evaluate", str(out), dev, "-o", str(tmp_path / f"{asked}.json"),
                                     *(["--retriever", asked] if asked else [])])
        assert result.exit_code == 0, result.output
        results[asked] = json.loads((tmp_path / f"{asked}.json").read_text())["ndcg@10"]
    stages = json.loads((out / "metrics.json").read_text())["first_stage"]["fine_tuned"]
    assert results[None] == pytest.approx(stages[saved.kind]["ndcg@10"])  # the run's dev file, the run's choice
    assert results["bm25"] == pytest.approx(stages["bm25"]["ndcg@10"])
    # the tiny random model's cosines nearly tie: another batching may swap a few
    assert results["dense"] == pytest.approx(stages["dense"]["ndcg@10"], abs=0.02)


def test_a_retriever_set_in_the_config_is_the_one_saved(tiny_model_dir, tmp_path):
    out, output = embed_run(tiny_model_dir, tmp_path, "retriever=bm25")
    assert first_stage.load(out).kind == "bm25" and "retriever" in output


def test_a_model_without_retriever_json_ranks_with_the_model_and_says_so(minilm_dir, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("The bridge was built in 1982.\nCats sleep a lot.\n")
    queries = write_jsonl(tmp_path / "q.jsonl", [{"query": "When was the bridge built?"}])
    result = runner.invoke(app, ["predict", minilm_dir, queries, "--corpus", str(corpus), "-o",
                                 str(tmp_path / "top.jsonl")])
    assert result.exit_code == 0, result.output
    assert f"ranking with dense (the embedding model alone): {minilm_dir} has no retriever.json" in \
        " ".join(result.output.split())


@pytest.mark.parametrize("case", ["no_corpus", "unknown", "not_embed", "damaged", "damaged_dev", "scored"])
def test_retriever_mistakes_are_one_line(case, tiny_embed_run, tmp_path, tiny_model_dir):
    out, _ = tiny_embed_run
    queries = write_jsonl(tmp_path / "q.jsonl", [{"query": "When?"}])
    corpus = tmp_path / "c.txt"
    corpus.write_text("one passage\nanother passage\n")
    if case == "no_corpus":
        args, fragments = ["predict", str(out), queries, "--retriever", "bm25"], ["--retriever bm25 needs --corpus"]
    elif case == "unknown":
        args, fragments = ["evaluate", str(out), queries, "--retriever", "hybird"], ["use dense, bm25, hybrid"]
    elif case == "not_embed":
        from helpers import tiny_task_models

        model = tiny_task_models(tmp_path / "m", tiny_model_dir)["classify"]
        args, fragments = ["evaluate", model, queries, "--retriever", "bm25"], ["--retriever is for embedding models"]
    elif case in ("damaged", "damaged_dev"):
        damaged = tmp_path / "copy"
        import shutil

        shutil.copytree(out, damaged)
        bad = '{"kind": "bm26"}' if case == "damaged" else '{"kind": "hybrid", "dev": {"bm25": "high"}}'
        (damaged / "retriever.json").write_text(bad)
        args = ["predict", str(damaged), queries, "--corpus", str(corpus), "-o", str(tmp_path / "t.jsonl")]
        fragments = ["retriever.json", "retriever 'bm26' is unknown" if case == "damaged" else "is not each retriever"]
    else:
        scored = write_jsonl(tmp_path / "s.jsonl", [{"sentence1": "a b", "sentence2": "a c", "score": 0.5},
                                                    {"sentence1": "d e", "sentence2": "f g", "score": 0.1}])
        args, fragments = ["evaluate", str(out), scored, "--retriever", "bm25"], ["scored pairs"]
    one_line_error(runner.invoke(app, args), 2, *fragments)


def test_a_reranker_over_an_embed_run_re_ranks_what_that_run_retrieves(tiny_embed_run):
    """first_stage=EMBED_RUN of a rerank run: its candidates are the embed run's own ranking (its retriever.json),
    the one `bertkit predict EMBED_RUN --corpus` writes, not the model's cosine alone."""
    from bertkit.tasks import embed, rerank

    out, _ = tiny_embed_run
    saved = first_stage.load(out)
    rows = [json.loads(line) for line in (EN_QA / "dev.jsonl").read_text().splitlines()[:20]]
    queries, passages = [r["query"] for r in rows[:5]], list(dict.fromkeys(r["positive"] for r in rows))
    for kind in ("bm25", "dense"):
        first_stage.save(out, Retriever(kind, saved.weight, saved.fusion, saved.chinese, saved.dev))
        try:
            ranked, _ = rerank.first_stage_top(str(out), queries, passages, 5)
            chosen = first_stage.load(out)
            embedder = embed.load_predictor(str(out)) if chosen.uses_model else None
            expected, _ = fuse(embed.first_stage(embedder, queries, passages, chosen), chosen, 5)
            assert ranked == expected, kind
            if kind == "bm25":  # the run chose BM25: the reranker re-ranks BM25's candidates, not the model's
                assert ranked == BM25Index(passages).search(queries, 5)[0].tolist()
        finally:
            first_stage.save(out, saved)
