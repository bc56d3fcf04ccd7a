"""Embedding models (`bertkit run embed`, `bertkit mine`, predict / evaluate of an embed run): the retrieval file
readers (pairs, n-tuples, FlagEmbedding JSONL, scored pairs; Chinese), the IR metrics against hand-computed values,
runs through the installed command whose saved folder loads in stock sentence-transformers and transformers with
the same vectors as `bertkit predict`, prefixes saved and applied, base and fine-tuned dev metrics, mining, and every
bad input as one line with exit 2."""

import inspect
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from bertkit import tasks
from bertkit.cli import app
from bertkit.errors import BertkitError
from bertkit.tasks import embed
from bertkit.tasks.retrieval_files import (BM25Index, RetrievalRow, ir_dev_set, ir_metrics, mine_negatives,
                                           read_retrieval_file, spearman, top_k)
from helpers import one_line_error, write_csv
from test_hub import TOKEN, hub, make_hub, no_internet  # noqa: F401 - fixtures

runner = CliRunner()
ROOT = Path(__file__).resolve().parent.parent
EN_QA = ROOT / "data" / "embed" / "en_qa"
SCRIPT = Path(sys.executable).parent / "bertkit"
pytestmark = pytest.mark.usefixtures("one_thread")


def write_jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return str(path)


def small_pairs(path: Path, count: int = 12, offset: int = 0) -> str:
    """The first rows of the shipped en_qa split (distinct positives)."""
    rows = [json.loads(line) for line in (EN_QA / "train.jsonl").read_text(encoding="utf-8").splitlines()]
    return write_jsonl(path, rows[offset:offset + count])


# ------------------------------------------------------------------------------------------------ readers, metrics


def test_every_format_is_read_with_its_columns_detected(tmp_path):
    pairs = read_retrieval_file(write_jsonl(tmp_path / "p.jsonl", [{"question": "q1", "passage": "p1"}]))
    assert (pairs.kind, pairs.rows[0].query, pairs.rows[0].positives) == ("pairs", "q1", ["p1"])
    tuples = read_retrieval_file(write_csv(tmp_path / "t.csv", ["anchor", "positive", "negative_2", "negative_1"],
                                           [["q", "p", "n2", "n1"]]))
    assert tuples.rows[0].negatives == ["n1", "n2"]  # by their number, not the column order
    flag = read_retrieval_file(write_jsonl(tmp_path / "f.jsonl", [{"query": "q", "pos": ["a", "b"], "neg": ["c"]},
                                                                  {"query": "r", "pos": ["d"], "neg": []}]))
    assert [r.positives for r in flag.rows] == [["a", "b"], ["d"]] and flag.rows[0].negatives == ["c"]
    scored = read_retrieval_file(write_csv(tmp_path / "s.csv", ["sentence1", "sentence2", "score"],
                                           [["a", "b", "4.5"], ["c", "d", "1"]]))
    assert scored.kind == "scored" and [r.score for r in scored.rows] == [4.5, 1.0]
    rows = [{"问题": "猫是什么？", "段落": "猫是一种小动物。"}]
    chinese = read_retrieval_file(write_jsonl(tmp_path / "zh.jsonl", rows))
    assert (chinese.rows[0].query, chinese.rows[0].positives) == ("猫是什么？", ["猫是一种小动物。"])
    given = read_retrieval_file(write_csv(tmp_path / "g.csv", ["a", "b"], [["x", "y"]]),
                                embed.RetrievalColumns(query_column="a", positive_column="b"))
    assert given.rows[0].positives == ["y"]


def test_reader_errors_name_the_file_and_line(tmp_path):
    path = write_jsonl(tmp_path / "e.jsonl", [{"query": "q", "positive": "p"}, {"query": " ", "positive": "p2"}])
    with pytest.raises(BertkitError, match=r"e\.jsonl line 2: column 'query' is empty"):
        read_retrieval_file(path)
    with pytest.raises(BertkitError, match="no positive column .* data.positive_column"):
        read_retrieval_file(write_csv(tmp_path / "c.csv", ["text", "label"], [["a", "1"]]))
    with pytest.raises(BertkitError, match=r"line 1: no positive"):
        read_retrieval_file(write_jsonl(tmp_path / "n.jsonl", [{"query": "q", "pos": []}]))


def test_a_negatives_column_of_an_unknown_name_is_named_not_dropped(tmp_path):
    """`query, positive, hard_neg` trained on pairs and dropped the negatives without a word."""
    path = write_csv(tmp_path / "h.csv", ["query", "positive", "hard_neg"], [["q", "p", "n"]])
    with pytest.raises(BertkitError, match=r"h\.csv: column 'hard_neg' looks like negatives .* "
                                           r"data\.negative_column=hard_neg"):
        read_retrieval_file(path)
    given = read_retrieval_file(path, embed.RetrievalColumns(negative_column="hard_neg"))
    assert given.rows[0].negatives == ["n"]
    other = read_retrieval_file(write_csv(tmp_path / "o.csv", ["query", "positive", "source"], [["q", "p", "wiki"]]))
    assert other.rows[0].negatives == []  # a column of another kind is left alone


def test_ir_metrics_match_hand_computed_values():
    # query 0: relevant {0} ranked 2nd; query 1: relevant {1, 2} ranked 1st and 3rd; query 2: relevant never ranked
    metrics = ir_metrics([[2, 0, 1], [1, 0, 2], [0, 1]], [{0}, {1, 2}, {5}])
    ndcg = [1 / math.log2(3), (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3)), 0.0]
    assert metrics["ndcg@10"] == pytest.approx(sum(ndcg) / 3)
    assert metrics["mrr@10"] == pytest.approx((1 / 2 + 1 + 0) / 3)
    assert metrics["recall@1"] == pytest.approx((0 + 0.5 + 0) / 3)
    assert metrics["recall@10"] == pytest.approx((1 + 1 + 0) / 3)
    assert spearman([1, 2, 3, 4], [10, 20, 40, 30]) == pytest.approx(0.8)
    ranked, scores = top_k(np.array([[1.0, 0.0]]), np.array([[0.0, 1.0], [2.0, 0.1], [1.0, 1.0]]), 2)
    assert ranked.tolist() == [[1, 2]] and scores[0, 0] > scores[0, 1]


def test_ir_metrics_agree_with_sentence_transformers_evaluator(minilm_dir, tmp_path):
    from sentence_transformers.sentence_transformer.evaluation import InformationRetrievalEvaluator

    dev = read_retrieval_file(small_pairs(tmp_path / "d.jsonl", 20))
    ir = ir_dev_set(dev)
    predictor = embed.load_predictor(minilm_dir)
    ours = embed.compute_metrics_fn(dev)(predictor)
    theirs = InformationRetrievalEvaluator(ir.queries, ir.corpus, ir.relevant, precision_recall_at_k=[1, 10, 100],
                                           write_csv=False, name="d")(predictor.model)
    for name in ("ndcg@10", "mrr@10", "recall@1", "recall@10"):
        assert ours[name] == pytest.approx(theirs[f"d_cosine_{name}"], abs=1e-6), name


def test_bm25_ranks_english_and_chinese():
    english = BM25Index(["The bridge was built in 1982.", "Cats sleep a lot.", "The river floods in spring."])
    assert english.search(["when was the bridge built"], 1)[0].tolist() == [[0]]
    chinese = BM25Index(["云石镇位于福建省。", "猫喜欢睡觉。", "这条河春天会涨水。"])
    assert chinese.zh and chinese.search(["猫为什么睡觉"], 1)[0].tolist() == [[1]]


def test_embed_exposes_the_task_interface():
    assert tuple(embed.__all__[:len(tasks.INTERFACE)]) == tasks.INTERFACE
    reference = tasks.task_module("classify")
    for name in ("predict_file", "evaluate_file", "load_predictor"):
        ours = inspect.signature(getattr(embed, name)).parameters
        theirs = list(inspect.signature(getattr(reference, name)).parameters)
        assert list(ours)[:len(theirs)] == theirs, name
        # anything more is the task's own option, by keyword and with a default (evaluate's --retriever)
        assert all(p.kind == p.KEYWORD_ONLY and p.default is not p.empty for p in list(ours.values())[len(theirs):])


# ------------------------------------------------------------------------------------------------ runs


@pytest.fixture(scope="module")
def minilm_run(tmp_path_factory):
    """A two-step en_qa run of the embedded MiniLM through the installed command, with prefixes."""
    out = tmp_path_factory.mktemp("embed-minilm") / "run"
    result = subprocess.run([str(SCRIPT), "run", "embed", "-c", "embed/en_qa", f"output_dir={out}",
                             "train.max_steps=2", "train.per_device_train_batch_size=8", "precision=fp32",
                             "train.save_strategy=no", "train.eval_strategy=no", "train.load_best_model_at_end=false",
                             'query_prefix="query: "', 'passage_prefix="passage: "'],
                            capture_output=True, text=True, env={**__import__("os").environ, "HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    return out, result.stdout + result.stderr


def test_minilm_run_loads_in_stock_libraries_with_bertkits_vectors(minilm_run, minilm_dir, tmp_path):
    import transformers
    from sentence_transformers import SentenceTransformer

    out, _ = minilm_run
    modules = json.loads((out / "modules.json").read_text())
    assert all(m["type"].startswith("sentence_transformers.") for m in modules)
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "bert" and config["architectures"] == ["BertModel"]
    queries = write_jsonl(tmp_path / "q.jsonl", [{"query": "Who designed the Millrace Bridge?"},
                                                 {"query": "How many people live in Upperfold today?"}])
    result = runner.invoke(app, ["predict", str(out), queries, "-o", str(tmp_path / "v.jsonl")])
    assert result.exit_code == 0, result.output
    ours = np.array([json.loads(line)["embedding"] for line in (tmp_path / "v.jsonl").read_text().splitlines()])
    stock = SentenceTransformer(str(out))  # no trust_remote_code
    texts = ["Who designed the Millrace Bridge?", "How many people live in Upperfold today?"]
    np.testing.assert_allclose(ours, stock.encode(texts, prompt_name="query"), atol=1e-4)
    assert not np.allclose(ours, stock.encode(texts), atol=1e-3)  # the prefix is applied, not ignored
    np.testing.assert_allclose(stock.encode(["query: " + t for t in texts]), ours, atol=1e-4)
    assert type(transformers.AutoModel.from_pretrained(str(out))).__name__ == "BertModel"
    base = SentenceTransformer(minilm_dir)
    assert not np.allclose(base.encode(["query: " + t for t in texts]), ours, atol=1e-4)  # it trained


def test_prefixes_and_pooling_are_saved_with_the_model(minilm_run):
    out, _ = minilm_run
    saved = json.loads((out / "config_sentence_transformers.json").read_text())
    assert saved["prompts"] == {"query": "query: ", "document": "passage: "}
    assert json.loads((out / "1_Pooling" / "config.json").read_text())["pooling_mode"] == "mean"
    assert (out / "2_Normalize").is_dir()


def test_dev_metrics_before_and_after_are_recorded_and_evaluate_agrees(minilm_run, tmp_path):
    out, output = minilm_run
    metrics = json.loads((out / "metrics.json").read_text())
    for name in ("ndcg@10", "mrr@10", "recall@1", "recall@10", "recall@100"):
        assert 0 <= metrics["base_eval"][name] <= 1 and 0 <= metrics["eval"][name] <= 1
    assert metrics["selection_metric"] == "ndcg@10" and metrics["rows"] == {"train": 212, "dev_queries": 70}
    assert "ndcg@10" in output and "->" in output  # the side-by-side summary
    # evaluate ranks with the first stage the run chose (BM25, the model or both); --retriever dense: the model's
    chosen = metrics["first_stage"]["retriever"]["kind"]
    for asked, expected in ((None, metrics["first_stage"]["fine_tuned"][chosen]["ndcg@10"]),
                            ("dense", metrics["eval"]["ndcg@10"])):
        result = runner.invoke(app, ["evaluate", str(out), str(EN_QA / "dev.jsonl"), "-o", str(tmp_path / "m.json"),
                                     "--force", *(["--retriever", asked] if asked else [])])
        assert result.exit_code == 0, result.output
        evaluated = json.loads((tmp_path / "m.json").read_text())
        assert evaluated["ndcg@10"] == pytest.approx(expected, abs=1e-3), asked


def test_predict_writes_numpy_vectors_and_top_k_passages(minilm_run, tmp_path):
    out, _ = minilm_run
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("The Millrace Bridge was designed by Marta Kovač.\nCats sleep a lot.\nRivers flood.\n")
    queries = write_jsonl(tmp_path / "q.jsonl", [{"query": "Who designed the Millrace Bridge?"}])
    result = runner.invoke(app, ["predict", str(out), queries, "-o", str(tmp_path / "v.npy")])
    assert result.exit_code == 0, result.output
    assert np.load(tmp_path / "v.npy").shape == (1, 384)
    result = runner.invoke(app, ["predict", str(out), queries, "--corpus", str(corpus), "--top-k", "2",
                                 "-o", str(tmp_path / "top.jsonl")])
    assert result.exit_code == 0, result.output
    top = json.loads((tmp_path / "top.jsonl").read_text().splitlines()[0])
    assert [r["rank"] for r in top["results"]] == [1, 2]
    assert top["results"][0]["passage"].startswith("The Millrace Bridge")


def test_a_plain_checkpoint_trains_with_mean_pooling_said(tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    train = small_pairs(tmp_path / "t.jsonl")
    result = runner.invoke(app, ["run", "embed", f"model={tiny_model_dir}", f"data.train={train}",
                                 f"data.eval={small_pairs(tmp_path / 'd.jsonl', 8, 40)}", f"output_dir={out}",
                                 "train.max_steps=2", "train.per_device_train_batch_size=4", "precision=fp32",
                                 "matryoshka_dims=[32,16]"])
    assert result.exit_code == 0, result.output
    assert "no sentence-transformers pooling information" in result.output and "mean pooling assumed" in result.output
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics["base_eval"]) == set(metrics["eval"]) >= {"ndcg@10", "mrr@10"}
    assert json.loads((out / "1_Pooling" / "config.json").read_text())["pooling_mode"] == "mean"


def test_scored_pairs_train_with_cosent_and_report_spearman(tiny_model_dir, tmp_path):
    rows = [[f"a man plays guitar number {i}", f"a person plays an instrument {i}", str(i % 6)] for i in range(10)]
    header, out = ["sentence1", "sentence2", "score"], tmp_path / "run"
    result = runner.invoke(app, ["run", "embed", f"model={tiny_model_dir}", "loss=cosent", "pooling=cls",
                                 f"data.train={write_csv(tmp_path / 't.csv', header, rows)}",
                                 f"data.eval={write_csv(tmp_path / 'd.csv', header, rows)}",
                                 f"output_dir={out}", "train.max_steps=1", "train.per_device_train_batch_size=4",
                                 "precision=fp32"])
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    assert -1 <= metrics["base_eval"]["spearman"] <= 1 and -1 <= metrics["eval"]["spearman"] <= 1
    assert json.loads((out / "1_Pooling" / "config.json").read_text())["pooling_mode"] == "cls"


def test_chinese_pairs_train_on_a_chinese_vocabulary(tiny_zh_model_dir, tmp_path):
    rows = [{"query": f"第{i}个问题是什么？", "pos": [f"这是第{i}段文字，讲的是第{i}件事。"]} for i in range(8)]
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", "embed", f"model={tiny_zh_model_dir}", "pooling=mean",
                                 f"data.train={write_jsonl(tmp_path / 't.jsonl', rows)}",
                                 f"data.eval={write_jsonl(tmp_path / 'd.jsonl', rows)}", f"output_dir={out}",
                                 "train.max_steps=1", "train.per_device_train_batch_size=4", "precision=fp32"])
    assert result.exit_code == 0, result.output
    assert "pooling information" not in result.output  # pooling= given: nothing assumed
    assert json.loads((out / "metrics.json").read_text())["eval"]["recall@100"] == 1.0


def test_the_model_card_is_a_sentence_transformers_card_with_base_and_fine_tuned(minilm_run):
    from huggingface_hub import ModelCard

    out, _ = minilm_run
    text = (out / "README.md").read_text(encoding="utf-8")
    card = ModelCard(text)
    assert card.data.library_name == "sentence-transformers" and card.data.pipeline_tag == "sentence-similarity"
    assert {"sentence-transformers", "sentence-similarity"} <= set(card.data.tags)
    metrics = json.loads((out / "metrics.json").read_text())
    assert "| metric | base model | fine-tuned |" in text
    assert f"| ndcg@10 | {metrics['base_eval']['ndcg@10']:.4g} | {metrics['eval']['ndcg@10']:.4g} |" in text
    assert 'SentenceTransformer("<namespace>/<model-name>")' in text
    assert 'prompt_name="query")  # prefixed with "query: "' in text and "mean pooling" in text


def test_report_shows_the_dev_metric_and_base_beside_fine_tuned(minilm_run):
    import re

    out, _ = minilm_run
    result = runner.invoke(app, ["report", str(out)])
    assert result.exit_code == 0, result.output
    page = re.sub(r"<[^>]+>", " ", (out / "report.html").read_text(encoding="utf-8"))
    assert "dev ndcg@10 =" in page and "no dev metric" not in page
    assert "Base model and fine-tuned" in page and "no task view" not in page


def test_push_uploads_the_sentence_transformers_folder(hub, tiny_model_dir, tmp_path):  # noqa: F811
    from huggingface_hub import snapshot_download
    from sentence_transformers import SentenceTransformer

    out, result = tiny_run(tiny_model_dir, tmp_path, 'query_prefix="query: "')
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["push", str(out), "tester/embed", "--token", TOKEN, "--endpoint", hub.endpoint])
    assert result.exit_code == 0, result.output
    remote = hub.files("tester/embed")
    assert {"modules.json", "1_Pooling/config.json", "2_Normalize/config.json", "config_sentence_transformers.json",
            "sentence_bert_config.json", "config.json", "model.safetensors", "README.md"} <= set(remote)
    assert not any(name.startswith(("checkpoint-", "eval/")) for name in remote)
    local = snapshot_download("tester/embed", token=TOKEN, cache_dir=str(tmp_path / "cache"))
    texts = ["Who designed the Millrace Bridge?"]
    np.testing.assert_allclose(SentenceTransformer(local).encode(texts, prompt_name="query"),
                               SentenceTransformer(str(out)).encode(texts, prompt_name="query"), atol=1e-6)


def test_saving_prints_no_widget_progress_bar(minilm_run):
    _, output = minilm_run
    assert "Computing widget examples" not in output  # sentence-transformers' card, which bertkit's replaces


def tiny_run(model_dir: str, tmp_path: Path, *overrides: str):
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", "embed", f"model={model_dir}", "pooling=mean", f"output_dir={out}",
                                 f"data.train={small_pairs(tmp_path / 't.jsonl', 16)}",
                                 f"data.eval={small_pairs(tmp_path / 'd.jsonl', 8, 40)}", "train.max_steps=2",
                                 "train.per_device_train_batch_size=8", "train.learning_rate=1.0e-3", "precision=fp32",
                                 *overrides])
    return out, result


def test_a_seed_band_records_mean_and_sd_of_the_dev_metrics(tiny_model_dir, tmp_path):
    out, result = tiny_run(tiny_model_dir, tmp_path, "seeds=[1,2]")
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    band = metrics["seeds"]
    assert band["metric"] == "ndcg@10" and [run["seed"] for run in band["runs"]] == [1, 2]
    assert set(band["mean"]) == set(band["sd"]) == set(metrics["eval"]) >= {"ndcg@10", "mrr@10", "recall@1"}
    values = [run["eval"]["ndcg@10"] for run in band["runs"]]
    assert band["mean"]["ndcg@10"] == pytest.approx(sum(values) / 2)
    assert metrics["eval"]["ndcg@10"] == pytest.approx(max(values))  # the best seed's model is the one saved
    assert "(2 seeds)" in result.output and "ndcg@10 (base)" in result.output
    assert (out / "modules.json").is_file() and not list(out.glob("seed-*"))


def test_lora_trains_the_backbone_and_saves_a_merged_stock_folder(tiny_model_dir, tmp_path):
    from safetensors.torch import load_file
    from sentence_transformers import SentenceTransformer

    out, result = tiny_run(tiny_model_dir, tmp_path, "lora.enabled=true", "lora.r=4")
    assert result.exit_code == 0, result.output
    assert "LoRA r=4 on query, value" in result.output
    assert not (out / "adapter_config.json").exists()
    tuned, base = load_file(out / "model.safetensors"), load_file(Path(tiny_model_dir) / "model.safetensors")
    assert not any("lora" in name for name in tuned)
    base = {name.removeprefix("bert."): tensor for name, tensor in base.items()}
    changed = {name for name, tensor in tuned.items() if not np.allclose(tensor.numpy(), base[name].numpy())}
    assert changed and all(".query." in name or ".value." in name for name in changed), changed
    texts = ["Who designed the Millrace Bridge?"]
    np.testing.assert_allclose(SentenceTransformer(str(out)).encode(texts),
                               embed.encode(embed.load_predictor(str(out)), texts), atol=1e-4)


def test_a_search_picks_a_trial_by_dev_ndcg(tiny_model_dir, tmp_path):
    out, result = tiny_run(tiny_model_dir, tmp_path, "search.trials=2", "search.batch_sizes=[4,8]",
                           "search.pruning=false")
    assert result.exit_code == 0, result.output
    search = json.loads((out / "metrics.json").read_text())["search"]
    assert search["metric"] == "ndcg@10" and len(search["trials"]) == 2
    assert (out / "modules.json").is_file() and not list(out.glob("trial-*"))


def test_lora_without_merge_is_one_line(tiny_model_dir, tmp_path):
    _, result = tiny_run(tiny_model_dir, tmp_path, "lora.enabled=true", "lora.merge=false")
    one_line_error(result, 2, "lora.merge=false", "lora.merge=true")


# ------------------------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize("case", ["no_positive", "empty_query", "same_positive", "scored_to_mnrl", "batch_of_one",
                                  "dev_without_positives"])
def test_bad_input_is_one_line_exit_2(case, tiny_model_dir, tmp_path):
    train = small_pairs(tmp_path / "t.jsonl", 6)
    extra = []
    if case == "no_positive":
        train, fragments = write_csv(tmp_path / "t.csv", ["text", "label"], [["a", "1"], ["b", "0"]]), [
            "no positive column", "data.positive_column"]
    elif case == "empty_query":
        train = write_jsonl(tmp_path / "e.jsonl", [{"query": "q", "positive": "p"}, {"query": "", "positive": "x"}])
        fragments = ["e.jsonl line 2", "'query' is empty"]
    elif case == "same_positive":
        train = write_jsonl(tmp_path / "s.jsonl", [{"query": f"q{i}", "positive": "one passage"} for i in range(4)])
        fragments = ["the same positive", "its own positive"]
    elif case == "scored_to_mnrl":
        train = write_csv(tmp_path / "s.csv", ["sentence1", "sentence2", "score"], [["a", "b", "1"], ["c", "d", "2"]])
        fragments = ["scored pairs", "use loss=cosent"]
    elif case == "batch_of_one":
        extra, fragments = ["train.per_device_train_batch_size=1"], ["batch of 1", "at least 2"]
    else:
        extra = [f"data.eval={write_jsonl(tmp_path / 'd.jsonl', [{'query': 'q', 'pos': []}] * 2)}"]
        fragments = ["no query has a positive", "d.jsonl"]
    result = runner.invoke(app, ["run", "embed", f"model={tiny_model_dir}", f"data.train={train}", "pooling=mean",
                                 f"output_dir={tmp_path / 'run'}", "train.max_steps=1", *extra])
    one_line_error(result, 2, *fragments)


def test_shipped_configs_validate():
    for name in ("en_qa", "zh_qa", "en_sts"):
        result = runner.invoke(app, ["validate", "embed", "-c", f"embed/{name}"])
        assert result.exit_code == 0, (name, result.output)


# ------------------------------------------------------------------------------------------------ mining


def test_mine_writes_negatives_that_are_not_the_positive(tiny_model_dir, tmp_path):
    pairs = small_pairs(tmp_path / "p.jsonl", 10)
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(json.loads(line)["positive"] + "\n"
                              for line in (EN_QA / "dev.jsonl").read_text(encoding="utf-8").splitlines()[:30]))
    out = tmp_path / "mined.jsonl"
    result = runner.invoke(app, ["mine", pairs, "-o", str(out), "--model", tiny_model_dir, "--bm25",
                                 "--corpus", str(corpus), "--num-negatives", "2"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    # a random tiny model ranks some positives low: the margin then leaves a query fewer than 2, never none here
    assert len(rows) == 10 and all(1 <= len(row["neg"]) <= 2 for row in rows)
    assert all(not set(row["neg"]) & set(row["pos"]) for row in rows)
    read_back = read_retrieval_file(str(out))  # the mined file is a training file
    assert read_back.has_negatives


def test_mining_near_duplicates_of_the_positive_is_warned(capsys):
    rows = [RetrievalRow("where is the bridge", ["The bridge spans the River Alder."]),
            RetrievalRow("what do cats eat", ["Cats eat fish and mice."])]
    corpus = ["The bridge spans the river Alder!", "Cats eat fish and mice!!", "Rivers flood in spring."]
    mined = mine_negatives(rows, corpus, bm25=True, num_negatives=1)
    assert mined.near_duplicates == 2 and mined.negatives == 2
    embed.warn_near_duplicates(mined.near_duplicates, mined.negatives)
    assert "2 of 2 mined negatives are near-duplicates" in capsys.readouterr().err


def test_mine_without_a_ranker_is_one_line(tmp_path):
    result = runner.invoke(app, ["mine", small_pairs(tmp_path / "p.jsonl", 3), "-o", str(tmp_path / "m.jsonl")])
    one_line_error(result, 2, "--model", "--bm25")


def test_a_row_with_fewer_negatives_is_filled_not_every_negative_dropped(tmp_path):
    """A mined file where one query got no negative (mine found none outside its margin): the others' negatives are
    kept, and that row gets a random passage of another query, never one of its own."""
    from bertkit.cli import load_recipe
    from bertkit.tasks.retrieval_files import read_retrieval_file

    rows = [{"query": f"question {i}", "pos": [f"answer {i}"], "neg": [f"hard negative {i}"] if i else []}
            for i in range(5)]
    path = tmp_path / "mined.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    dataset = load_recipe("embed").training_dataset(read_retrieval_file(str(path)), seed=1)
    assert dataset.column_names == ["anchor", "positive", "negative_1"]
    assert dataset["negative_1"][1:] == [f"hard negative {i}" for i in range(1, 5)]
    filled = dataset["negative_1"][0]
    assert filled not in ("answer 0", "") and filled in {*(f"answer {i}" for i in range(1, 5)),
                                                         *(f"hard negative {i}" for i in range(1, 5))}


# ------------------------------------------------------------------------------------------------ retrieval defects


@pytest.mark.parametrize("dims, fragments", [
    ("[]", ["'matryoshka_dims' is an empty list", "leave the key out", "(from override matryoshka_dims=[])"]),
    ("[64,64]", ["'matryoshka_dims' is [64, 64]", "largest first, each once, e.g. [64]"]),  # the same size twice
    ("[16,64]", ["'matryoshka_dims' is [16, 64]", "largest first", "e.g. [64, 16]"]),
    ("[0]", ["matryoshka_dims", "greater than or equal to 1"]),
])
def test_matryoshka_dims_are_refused_by_validate_unless_sizes_largest_first(dims, fragments):
    result = runner.invoke(app, ["validate", "embed", f"matryoshka_dims={dims}"])
    one_line_error(result, 2, *fragments)


def test_matryoshka_dims_larger_than_the_models_vectors_are_said_before_the_dev_evaluation(tiny_model_dir, tmp_path):
    """Refused only as the trainer built the loss: after the base model's dev evaluation (minutes on a large one)."""
    _, result = tiny_run(tiny_model_dir, tmp_path, "matryoshka_dims=[64,16]")  # the tiny BERT's vectors: 32
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    last = result.output.strip().splitlines()[-1]
    assert last == "error: matryoshka_dims=[64, 16]: the model's vectors have 32 dimensions — give sizes up to 32"
    assert "base model on dev" not in result.output, result.output


def test_mine_refuses_a_margin_with_bm25_alone(tmp_path):
    """--margin is a share of the positive's score by the embedding model: BM25 alone has no such score (its
    scores are on another scale), and the margin was silently ignored."""
    pairs, out = small_pairs(tmp_path / "p.jsonl", 6), tmp_path / "m.jsonl"
    result = runner.invoke(app, ["mine", pairs, "-o", str(out), "--bm25", "--margin", "0.2"])
    one_line_error(result, 2, "--margin 0.2", "--model", "BM25")
    assert not out.exists()
    result = runner.invoke(app, ["mine", pairs, "-o", str(out), "--bm25"])  # no --margin: BM25 alone still mines
    assert result.exit_code == 0, result.output
    assert out.exists()


def test_predict_refuses_top_k_without_a_corpus(minilm_dir, tmp_path):
    queries = write_jsonl(tmp_path / "q.jsonl", [{"query": "Who designed the Millrace Bridge?"}])
    out = tmp_path / "v.jsonl"
    result = runner.invoke(app, ["predict", minilm_dir, queries, "--top-k", "3", "-o", str(out)])
    one_line_error(result, 2, "--top-k 3 needs --corpus", "add --corpus")
    assert not out.exists()


def test_an_output_that_is_the_input_is_said_before_its_suffix(minilm_dir, tmp_path):
    """`predict EMBED_RUN texts.csv -o texts.csv` said "use a .jsonl name" rather than that it is the input."""
    texts = write_csv(tmp_path / "texts.csv", ["query"], [["Who designed the Millrace Bridge?"]])
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("The Millrace Bridge was designed by Marta Kovač.\nCats sleep a lot.\n")
    before = Path(texts).read_text()
    for extra in ([], ["--corpus", str(corpus)]):
        result = runner.invoke(app, ["predict", minilm_dir, texts, "-o", texts, *extra])
        one_line_error(result, 2, f"-o {texts} is the input file")
    result = runner.invoke(app, ["predict", minilm_dir, texts, "--corpus", str(corpus), "-o", str(corpus)])
    one_line_error(result, 2, f"-o {corpus} is the input file")
    result = runner.invoke(app, ["mine", texts, "-o", texts, "--bm25"])
    one_line_error(result, 2, f"-o {texts} is the input file")
    assert Path(texts).read_text() == before


def test_mine_suggests_a_name_it_takes(tmp_path):
    """`mine -o existing.csv` suggested a .predictions.csv name, which mine refuses too: it writes JSONL only."""
    pairs = small_pairs(tmp_path / "p.jsonl", 3)
    existing = tmp_path / "existing.csv"
    existing.write_text("a,b\n1,2\n")
    result = runner.invoke(app, ["mine", pairs, "-o", str(existing), "--bm25"])
    one_line_error(result, 2, f"-o {tmp_path / 'existing.mined.jsonl'}")
    result = runner.invoke(app, ["mine", pairs, "-o", str(tmp_path / "existing.mined.jsonl"), "--bm25"])
    assert result.exit_code == 0, result.output
