"""The rerank recipe through the installed `bertkit` command on the tiny BERT: the saved folder loads in stock
sentence-transformers' CrossEncoder and transformers with the scores `bertkit predict` writes; metrics.json has the
first stage's NDCG@10 / MRR@10 beside the re-ranked ones; `bertkit evaluate` reproduces them; a listwise loss trains;
bad input is one line, exit 2, naming the file and line."""

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import run_in_process

TOPICS = ["glaciers", "volcanoes", "owls", "bridges", "pianos", "coffee", "trains", "bees", "rivers", "comets"]


def bertkit(*args, cwd):
    """The command in this process (helpers.run_in_process): what it answers, not the entry point."""
    return run_in_process(*args, cwd=cwd)


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def question_rows(topics, suffix=""):
    return [{"query": f"Where do {t} come from{suffix}?", "positive": f"The {t} of this story come from the "
             f"north, where {t} are common and studied."} for t in topics]


@pytest.fixture(scope="module")
def rerank_run(tmp_path_factory, tiny_model_dir):
    root = tmp_path_factory.mktemp("rerank")
    write_jsonl(root / "train.jsonl", question_rows(TOPICS[:7]) + question_rows(TOPICS[:7], " today"))
    write_jsonl(root / "dev.jsonl", question_rows(TOPICS[7:]))
    result = bertkit("run", "rerank", f"model={tiny_model_dir}", "data.train=train.jsonl", "data.eval=dev.jsonl",
                     "output_dir=run", "data.max_length=64", "precision=fp32", "negatives_per_query=2",
                     "train.num_train_epochs=1", "train.per_device_train_batch_size=8", cwd=root)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return root


def test_the_run_loads_in_stock_cross_encoder_with_the_scores_predict_writes(rerank_run):
    import torch
    import transformers
    from sentence_transformers import CrossEncoder

    result = bertkit("predict", "run", "dev.jsonl", "-o", "scores.jsonl", cwd=rerank_run)
    assert result.returncode == 0, result.stderr[-2000:]
    records = [json.loads(line) for line in (rerank_run / "scores.jsonl").read_text().splitlines()]
    assert len(records) == 3 and {"query", "passage", "score", "logit"} <= set(records[0])
    pairs = [[r["query"], r["passage"]] for r in records]
    stock = CrossEncoder(str(rerank_run / "run"), device="cpu").predict(pairs)
    assert np.abs(stock - np.array([r["score"] for r in records])).max() < 1e-5
    plain = transformers.AutoModelForSequenceClassification.from_pretrained(rerank_run / "run").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(rerank_run / "run")
    with torch.no_grad():
        logits = plain(**tokenizer([q for q, _ in pairs], [p for _, p in pairs], padding=True,
                                   return_tensors="pt")).logits[:, 0].numpy()
    assert np.abs(logits - np.array([r["logit"] for r in records])).max() < 1e-4
    config = json.loads((rerank_run / "run" / "config_sentence_transformers.json").read_text())
    assert config["model_type"] == "CrossEncoder"  # what tells a reranker from a classifier


def test_metrics_json_has_the_first_stage_beside_the_reranked_and_evaluate_agrees(rerank_run):
    metrics = json.loads((rerank_run / "run" / "metrics.json").read_text())["eval"]
    for name in ("ndcg@10", "mrr@10", "recall@10"):
        assert 0 <= metrics[name] <= 1 and 0 <= metrics[f"first_stage_{name}"] <= 1
    assert metrics["queries"] == 3 and metrics["first_stage"] == "bm25" and metrics["top_k"] == 20
    result = bertkit("evaluate", "run", "dev.jsonl", "-o", "eval.json", cwd=rerank_run)
    assert result.returncode == 0, result.stderr[-2000:]
    again = json.loads((rerank_run / "eval.json").read_text())
    assert all(abs(again[k] - metrics[k]) < 1e-3 for k in ("ndcg@10", "mrr@10", "first_stage_ndcg@10"))


def test_first_stage_metrics_are_the_bm25_ranking_measured():
    """compute_metrics_fn on hand-made candidates: before = the first stage's order, after = the scores' order."""
    from bertkit.tasks.rerank import RerankDev, compute_metrics_fn

    dev = RerankDev(["q0", "q1"], ["a", "b", "c"], [[0, 1, 2], [2, 1, 0]], [{1}, {2}], "bm25", 3)
    metrics = compute_metrics_fn(dev)([[0.1, 0.9, 0.0], [0.0, 0.5, 0.1]])
    assert metrics["first_stage_mrr@10"] == pytest.approx((0.5 + 1) / 2, abs=1e-4)
    assert metrics["mrr@10"] == pytest.approx((1 + 1 / 3) / 2, abs=1e-4)  # q1: its positive ranked third
    assert metrics["first_stage_recall@3"] == 1.0


def test_a_listwise_loss_trains_on_query_groups(tmp_path, tiny_model_dir):
    rows = [{"query": f"Where do {t} live?", "pos": [f"{t} live in the north."],
             "neg": [f"{o} live in the south." for o in TOPICS if o != t][:3]} for t in TOPICS[:6]]
    write_jsonl(tmp_path / "groups.jsonl", rows)
    result = bertkit("run", "rerank", f"model={tiny_model_dir}", "data.train=groups.jsonl", "output_dir=run",
                     "loss=lambda", "data.max_length=48", "precision=fp32", "train.num_train_epochs=1", cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["loss"] == "lambda" and metrics["train"]["loss"] > 0


@pytest.mark.parametrize("rows, words", [
    ([{"query": "Where?", "positive": "Here."}, {"query": "", "positive": "There."}], "line 2"),
    ([{"query": "Where?", "positive": "Here."}, {"query": "Why?", "positive": "  "}], "line 2"),
])
def test_an_empty_query_or_passage_is_one_line_naming_the_line(tmp_path, tiny_model_dir, rows, words):
    write_jsonl(tmp_path / "bad.jsonl", rows)
    result = bertkit("run", "rerank", f"model={tiny_model_dir}", "data.train=bad.jsonl", "output_dir=run",
                     cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and "bad.jsonl" in lines[0] and words in lines[0] and "empty" in lines[0], lines
    assert "Traceback" not in result.stderr


def test_a_reranker_worse_than_its_first_stage_says_so_and_the_fused_ranking_keeps_the_first_stage(tmp_path,
                                                                                                   tiny_model_dir):
    """BM25 ranks these dev questions perfectly (each names its topic); a random tiny model trained one step at a
    tiny rate re-ranks them worse: the run must say so, by how much and what to try, not pass it off as a result
    (summary, metrics.json, report.html), and the re-ranked order predict and evaluate use (the fused score, its
    weight tuned on dev) must not be worse than BM25's: weight 0, the first stage's order kept."""
    write_jsonl(tmp_path / "train.jsonl", question_rows(TOPICS[:5]))
    write_jsonl(tmp_path / "dev.jsonl", question_rows(TOPICS))
    result = bertkit("run", "rerank", f"model={tiny_model_dir}", "data.train=train.jsonl", "data.eval=dev.jsonl",
                     "output_dir=run", "data.max_length=48", "precision=fp32", "negatives_per_query=2",
                     "train.max_steps=1", "train.learning_rate=1.0e-7", cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())
    metrics = saved["eval"]
    assert metrics["first_stage_ndcg@10"] == 1.0 and metrics["reranker_ndcg@10"] < 1.0
    assert metrics["ndcg@10"] == 1.0 and metrics["fusion_weight"] == 0.0  # the fused order: BM25's
    [warning] = saved["warnings"]
    lower = f"{1.0 - metrics['reranker_ndcg@10']:.4f} lower"
    assert "WORSE" in warning and lower in warning and "cross-encoder" in warning
    console = " ".join((result.stdout + result.stderr).split())
    assert "warning" in console and f"({lower})" in console and "the reranker adds nothing" in console
    page = (tmp_path / "run" / "report.html").read_text()
    assert 'class="warning"' in page and lower in page
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["bertkit_task_settings"]["fusion_weight"] == 0.0
    # evaluate re-ranks with the fused score: BM25's perfect order stands, and says why
    evaluated = bertkit("evaluate", "run", "dev.jsonl", "-o", "m.json", cwd=tmp_path)
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    assert json.loads((tmp_path / "m.json").read_text())["ndcg@10"] == 1.0
    assert "adds nothing on its dev set" in " ".join(evaluated.stderr.split())


def test_no_warning_when_re_ranking_matches_the_first_stage():
    from bertkit.tasks.rerank import worse_than_first_stage

    metrics = {"first_stage_ndcg@10": 0.9, "ndcg@10": 0.9, "first_stage_mrr@10": 0.8, "mrr@10": 0.85,
               "first_stage": "bm25", "top_k": 20}
    assert worse_than_first_stage(metrics) is None
    assert "0.1000 lower" in worse_than_first_stage({**metrics, "ndcg@10": 0.8})
    assert worse_than_first_stage({**metrics, "reranker_ndcg@10": 0.9}) is None
    assert "0.2000 lower" in worse_than_first_stage({**metrics, "reranker_ndcg@10": 0.7})


def test_the_onnx_export_scores_as_the_run_and_predict_reads_it(rerank_run):
    """`bertkit export` of a rerank run: the graph's logits equal PyTorch's within 1e-5, `bertkit predict` of the
    export writes the run's scores, and the export's dev re-ranking is the run's."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    result = bertkit("export", "run", "-o", "onnx", cwd=rerank_run)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    summary = json.loads((rerank_run / "onnx" / "onnx_export.json").read_text())
    assert summary["recipe"] == "rerank" and summary["parity_max_abs_diff"]["fp32"] < 1e-5
    scores = {}
    for name in ("run", "onnx"):
        result = bertkit("predict", name, "dev.jsonl", "-o", f"{name}_scores.jsonl", "--precision", "fp32",
                         cwd=rerank_run)
        assert result.returncode == 0, result.stderr[-2000:]
        scores[name] = [json.loads(line) for line in (rerank_run / f"{name}_scores.jsonl").read_text().splitlines()]
    assert [r["passage"] for r in scores["onnx"]] == [r["passage"] for r in scores["run"]] and scores["run"]
    for key in ("score", "logit"):
        assert np.abs(np.array([r[key] for r in scores["onnx"]]) - np.array([r[key] for r in scores["run"]])).max() \
            < 1e-5
    metrics = json.loads((rerank_run / "run" / "metrics.json").read_text())["eval"]
    assert abs(summary["dev"]["fp32"]["ndcg@10"] - metrics["ndcg@10"]) < 1e-3


def test_the_model_card_says_text_ranking_with_a_cross_encoder_snippet_and_the_first_stage_beside(rerank_run):
    from huggingface_hub import ModelCard

    text = (rerank_run / "run" / "README.md").read_text()
    card = ModelCard(text)
    assert card.data.pipeline_tag == "text-ranking" and card.data.library_name == "sentence-transformers"
    assert "cross-encoder" in card.data.tags
    assert "from sentence_transformers import CrossEncoder" in text and "model.rank(" in text
    metrics = json.loads((rerank_run / "run" / "metrics.json").read_text())["eval"]
    # the first stage, this model alone (what CrossEncoder(path) gives) and the fused order bertkit predict uses
    row = (f"| ndcg@10 | {metrics['first_stage_ndcg@10']:.4f} | {metrics['reranker_ndcg@10']:.4f} | "
           f"{metrics['ndcg@10']:.4f} |")
    header = (f"| metric | bm25 alone | re-ranked by this model | fused (weight {metrics['fusion_weight']:g} on this "
              "model) |")
    assert header in text and row in text, text
    assert {result.metric_type for result in card.data.eval_results} == {"ndcg@10", "mrr@10", "recall@10"}
    assert {r.metric_type: r.metric_value for r in card.data.eval_results}["ndcg@10"] == metrics["reranker_ndcg@10"]


def test_first_stage_is_bm25_or_an_embed_model_folder_checked_by_validate(tmp_path, minilm_dir, tiny_model_dir):
    """first_stage=nope passed `bertkit validate` and was said only at the dev evaluation, after mining."""
    from typer.testing import CliRunner

    from bertkit.cli import app
    from helpers import one_line_error

    runner = CliRunner()
    result = runner.invoke(app, ["validate", "rerank", "first_stage=nope"])
    one_line_error(result, 2, "config key 'first_stage'", "nope", "first_stage=bm25", "(from override first_stage=")
    result = runner.invoke(app, ["validate", "rerank", f"first_stage={tiny_model_dir}"])  # a plain BERT checkpoint
    one_line_error(result, 2, "config key 'first_stage'", "not an embedding model folder")
    for good in ("bm25", minilm_dir):  # MiniLM is a sentence-transformers embedding folder
        result = runner.invoke(app, ["validate", "rerank", f"first_stage={good}"])
        assert result.exit_code == 0, result.output


def test_the_fused_score_is_never_below_the_first_stage_on_dev_and_mixes_when_that_helps():
    import numpy as np

    from bertkit.tasks.rerank import RerankDev, fused_order, tune_fusion

    # query 0: positive 0 is BM25's second and the reranker's first; query 1: positive 5 is BM25's first, and the
    # reranker puts it last: the reranker alone gets 0 right at 1's cost, the mix gets both
    dev = RerankDev(["q0", "q1"], [f"p{i}" for i in range(6)], [[1, 0, 2], [5, 3, 4]], [{0}, {5}], "bm25", 3,
                    [[9.0, 8.8, 1.0], [9.0, 5.0, 4.0]])
    reranker = [[0.0, 1.0, -5.0], [0.0, 0.4, 0.5]]
    weight, tried = tune_fusion(dev, reranker)
    assert tried[weight] == 1.0 > max(tried[0.0], tried[1.0]) and 0 < weight < 1
    assert [ranked[0] for ranked in fused_order(dev, reranker, weight)] == [0, 5]  # each positive first
    rng = np.random.default_rng(0)
    for _ in range(5):  # any reranker, however bad: the tuned fusion is at least the first stage on dev
        candidates = [list(rng.permutation(20)) for _ in range(8)]
        dev = RerankDev([f"q{i}" for i in range(8)], [f"p{i}" for i in range(20)], candidates,
                        [{int(rng.integers(20))} for _ in range(8)], "bm25", 20,
                        [sorted(rng.uniform(0, 10, 20), reverse=True) for _ in range(8)])
        weight, tried = tune_fusion(dev, rng.normal(size=(8, 20)).tolist())
        assert tried[weight] >= tried[0.0]


def test_predict_with_a_corpus_runs_the_first_stage_then_the_reranker(rerank_run, tmp_path):
    """`bertkit predict RERANK_RUN queries --corpus C`: BM25 (the run's first stage) takes the candidates, the
    reranker scores them, the fused score orders them; reranker_score is what /rerank and predict on pairs give."""
    corpus = tmp_path / "corpus.txt"
    rows = question_rows(TOPICS)
    corpus.write_text("".join(row["positive"] + "\n" for row in rows))
    queries = write_jsonl(tmp_path / "q.jsonl", [{"query": row["query"]} for row in rows[7:]])
    result = bertkit("predict", str(rerank_run / "run"), str(queries), "--corpus", str(corpus), "--top-k", "3",
                     "-o", str(tmp_path / "top.jsonl"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    console = " ".join(result.stderr.split())
    assert "bm25 takes the top 20 of 10 passages" in console and "fusion_weight" in console
    settings = json.loads((rerank_run / "run" / "config.json").read_text())["bertkit_task_settings"]
    ranked = [json.loads(line) for line in (tmp_path / "top.jsonl").read_text().splitlines()]
    assert [r["query"] for r in ranked] == [row["query"] for row in rows[7:]]
    pairs = []
    for record in ranked:
        assert [r["rank"] for r in record["results"]] == [1, 2, 3]
        assert [r["score"] for r in record["results"]] == sorted([r["score"] for r in record["results"]], reverse=True)
        pairs += [{"query": record["query"], "passage": r["passage"], "label": 1} for r in record["results"]]
    write_jsonl(tmp_path / "pairs.jsonl", pairs)
    result = bertkit("predict", str(rerank_run / "run"), str(tmp_path / "pairs.jsonl"), "-o",
                     str(tmp_path / "scores.jsonl"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    scored = [json.loads(line)["score"] for line in (tmp_path / "scores.jsonl").read_text().splitlines()]
    assert [r["reranker_score"] for record in ranked for r in record["results"]] == pytest.approx(scored, abs=1e-5)
    if settings["fusion_weight"] == 0.0:  # the first stage's order kept: BM25 puts each query's own paragraph first
        assert all(record["results"][0]["passage"].split()[1] in record["query"] for record in ranked)
    result = bertkit("predict", str(rerank_run / "run"), str(queries), "--corpus", str(corpus), "--retriever", "bm25",
                     "-o", str(tmp_path / "x.jsonl"), cwd=tmp_path)
    assert result.returncode == 2 and "re-ranks its run's own first stage" in result.stderr


def test_a_classifier_of_another_width_starts_a_reranker_with_a_new_head_said(tmp_path, tiny_model_dir):
    """A classify run (2 labels) as the start: its body kept, its head replaced by a one-score head, said in
    bertkit's words (no size-mismatch error, no transformers line about id2label on the console)."""
    from helpers import tiny_task_models

    classifier = tiny_task_models(tmp_path / "models", tiny_model_dir)["classify"]
    write_jsonl(tmp_path / "train.jsonl", question_rows(TOPICS))
    result = bertkit("run", "rerank", f"model={classifier}", "data.train=train.jsonl", "output_dir=run",
                     "data.max_length=32", "precision=fp32", "negatives_per_query=2", "train.max_steps=1",
                     cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    console = " ".join((result.stdout + result.stderr).split())
    assert "classifier.weight re-initialised: its shape in" in console and "needs (1, 32)" in console
    assert "id2label" not in console
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert len(config["id2label"]) == 1


def test_a_new_head_gets_its_own_learning_rate_and_a_trained_one_keeps_the_bodys(rerank_run, tiny_model_dir,
                                                                                   tmp_path):
    """A start without a trained one-score head (here a plain BERT) trains its new head at the recipe's own
    rate, said; a reranker's own head (a rerank run as the start) and a head_lr that is set are left alone."""
    write_jsonl(tmp_path / "train.jsonl", question_rows(TOPICS))
    common = ["data.train=train.jsonl", "data.max_length=32", "precision=fp32", "negatives_per_query=1",
              "train.max_steps=1"]
    fresh = bertkit("run", "rerank", f"model={tiny_model_dir}", "output_dir=fresh", *common, cwd=tmp_path)
    assert fresh.returncode == 0, fresh.stderr[-2000:]
    said = " ".join(fresh.stderr.split())
    assert "has no trained one-score head, so the new one learns at head_lr=0.001" in said
    assert "learning rate 2e-05 for all" not in said  # the head's rate differs: the table of rates is shown
    again = bertkit("run", "rerank", f"model={rerank_run / 'run'}", "output_dir=again", *common, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "one-score head" not in again.stderr
    chosen = bertkit("run", "rerank", f"model={tiny_model_dir}", "output_dir=chosen", "head_lr=5.0e-4", *common,
                     cwd=tmp_path)
    assert chosen.returncode == 0 and "one-score head" not in chosen.stderr


def test_a_sentence_transformers_start_is_named_by_bertkit_not_by_the_library(tmp_path, tiny_model_dir):
    """A bi-encoder folder as the start: sentence-transformers' "Converting SentenceTransformer model ... to
    CrossEncoder" goes to train.log, and the console keeps bertkit's own line about the new head."""
    from sentence_transformers import SentenceTransformer

    bi_encoder = tmp_path / "bi-encoder"
    SentenceTransformer(tiny_model_dir, device="cpu").save(str(bi_encoder))
    write_jsonl(tmp_path / "train.jsonl", question_rows(TOPICS))
    result = bertkit("run", "rerank", f"model={bi_encoder}", "data.train=train.jsonl", "output_dir=run",
                     "data.max_length=32", "precision=fp32", "negatives_per_query=1", "train.max_steps=1",
                     cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    console = result.stdout + result.stderr
    assert "Converting" not in console and "has no trained one-score head" in " ".join(console.split())
    assert "to CrossEncoder" in (tmp_path / "run" / "train.log").read_text(encoding="utf-8")
