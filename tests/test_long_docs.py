"""Long documents: exact window arithmetic, window -> document mapping, aggregation on hand-made numbers, head+tail
selection with special tokens in place, chunked prediction equal to plain prediction on short documents, and every
strategy end to end through the CLI on a slice of data/long_docs (tiny model, max_length 64, one epoch)."""

import json
import logging

import datasets
import numpy as np
import pytest
import torch
import transformers
from helpers import shortest_long_docs
from typer.testing import CliRunner

from bertkit import BertkitConfig, BertkitForSequenceClassification
from bertkit.cli import app
from bertkit.datafiles import ColumnMap
from bertkit.labels import LabelSpace
from bertkit.errors import BertkitError
from bertkit.inspection import coverage_report, document_coverage
from bertkit.tasks.classify import Classifier, compute_metrics_fn, encode, predict_probabilities
from bertkit.tasks.long_documents import (LongDocConfig, aggregate, combine, covered, encode_documents, evenly_spaced,
                                          plan_windows, sliding_windows)

runner = CliRunner()
NUMBERS = " ".join(str(i) for i in range(100, 130))  # 30 words, one token each in the uncased BERT vocab


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return transformers.AutoTokenizer.from_pretrained(tiny_model_dir)


def tokens(tokenizer, ids):
    return tokenizer.convert_ids_to_tokens(ids)


# ------------------------------------------------------------------------------------------------ windows


def test_sliding_windows_exact():
    assert sliding_windows(30, 10, 3) == [(0, 10), (7, 17), (14, 24), (21, 30)]
    assert sliding_windows(30, 10, 0) == [(0, 10), (10, 20), (20, 30)]
    assert sliding_windows(30, 8, 4) == [(0, 8), (4, 12), (8, 16), (12, 20), (16, 24), (20, 28), (24, 30)]
    assert sliding_windows(11, 10, 3) == [(0, 10), (7, 11)]
    assert sliding_windows(10, 10, 3) == [(0, 10)]
    assert sliding_windows(0, 10, 3) == [(0, 0)]
    # max_length 512, stride 128: a 1,000-token text -> windows of 510 starting every 382 tokens
    assert sliding_windows(1000, 510, 128) == [(0, 510), (382, 892), (764, 1000)]


@pytest.mark.parametrize("max_length,stride", [(12, 3), (10, 4), (14, 0)])
def test_windows_are_the_fast_tokenizers_overflow_windows(tokenizer, max_length, stride):
    texts = [NUMBERS, "apple pie"]
    ours = encode_documents(tokenizer, texts, None, max_length, LongDocConfig("chunk", stride=stride))
    theirs = tokenizer(texts, truncation=True, max_length=max_length, stride=stride, return_overflowing_tokens=True)
    assert ours.input_ids == theirs["input_ids"]
    assert ours.doc_ids.tolist() == list(theirs["overflow_to_sample_mapping"])


def test_pair_windows_keep_the_short_segment_whole_in_each(tokenizer):
    cfg = LongDocConfig("chunk", stride=2)
    # the long segment second (question, document) and first (document, question): windows over the long one only
    for question_first in (True, False):
        pair = ("is it", NUMBERS) if question_first else (NUMBERS, "is it")
        ours = encode_documents(tokenizer, [pair[0]], [pair[1]], 13, cfg)  # room 13 - 3 - 2 = 8, step 6
        theirs = tokenizer(pair[0], pair[1], max_length=13, stride=2, return_overflowing_tokens=True,
                           truncation="only_second" if question_first else "only_first")
        assert ours.input_ids == theirs["input_ids"] and len(ours.input_ids) == 5
        assert ours.token_type_ids == theirs["token_type_ids"]
    assert tokens(tokenizer, ours.input_ids[1]) == ["[CLS]", *"106 107 108 109 110 111 112 113".split(), "[SEP]",
                                                    "is", "it", "[SEP]"]


def test_window_to_document_mapping(tokenizer):
    texts = [" ".join(["word"] * 25), "short", " ".join(["word"] * 9)]
    windows = encode_documents(tokenizer, texts, None, 12, LongDocConfig("chunk", stride=2))  # room 10, step 8
    assert windows.doc_ids.tolist() == [0, 0, 0, 1, 2]
    assert [len(ids) for ids in windows.input_ids] == [12, 12, 11, 3, 11]


def test_max_windows_keeps_evenly_spaced_first_and_last(tokenizer, caplog):
    assert evenly_spaced(7, 3) == [0, 3, 6]
    assert evenly_spaced(10, 4) == [0, 3, 6, 9]
    assert evenly_spaced(5, 1) == [0] and evenly_spaced(2, 5) == [0, 1]
    rows, capped = plan_windows(30, 8, LongDocConfig("chunk", stride=4, max_windows=3))  # 7 windows
    assert rows == [[(0, 8)], [(12, 20)], [(24, 30)]] and capped
    assert covered(rows) == 8 + 8 + 6
    split = datasets.Dataset.from_dict({"text": [NUMBERS, "tiny", NUMBERS], "labels": [0, 1, 1]})
    with caplog.at_level(logging.WARNING, logger="bertkit"):
        rows = encode(tokenizer, split, ColumnMap("text"), 10, LongDocConfig("chunk", stride=4, max_windows=3),
                      "dev")
    assert rows["doc_id"] == [0, 0, 0, 1, 2, 2, 2] and rows["labels"] == [0, 0, 0, 1, 1, 1, 1]
    assert "2 of 3 dev documents" in caplog.text and "max_windows=3" in caplog.text


# ------------------------------------------------------------------------------------------------ head / tail


def test_head_tail_keeps_both_ends_with_special_tokens_in_place(tokenizer):
    windows = encode_documents(tokenizer, [NUMBERS], None, 8, LongDocConfig("head_tail", head_tokens=2))
    assert tokens(tokenizer, windows.input_ids[0]) == ["[CLS]", "100", "101", "126", "127", "128", "129", "[SEP]"]
    ids = tokenizer(NUMBERS, add_special_tokens=False)["input_ids"]
    assert windows.input_ids[0] == [tokenizer.cls_token_id, *ids[:2], *ids[-4:], tokenizer.sep_token_id]
    tail = encode_documents(tokenizer, [NUMBERS], None, 6, LongDocConfig("tail"))
    assert tokens(tokenizer, tail.input_ids[0]) == ["[CLS]", "126", "127", "128", "129", "[SEP]"]
    # a pair: head_tail on the longer segment, the shorter one whole, segment order and token types kept
    pair = encode_documents(tokenizer, ["is it"], [NUMBERS], 11, LongDocConfig("head_tail", head_tokens=1))
    assert tokens(tokenizer, pair.input_ids[0]) == ["[CLS]", "is", "it", "[SEP]", "100", "125", "126", "127",
                                                    "128", "129", "[SEP]"]
    assert pair.token_type_ids[0] == [0] * 4 + [1] * 7


def test_head_is_plain_truncation_and_every_strategy_agrees_on_short_texts(tokenizer):
    texts, pairs = [NUMBERS, "a b c", NUMBERS], ["x y", "d e f g", "p " * 20]
    plain = tokenizer(texts, pairs, truncation=True, max_length=16)
    for strategy in ("head", "tail", "head_tail", "chunk"):
        cfg = LongDocConfig(strategy, head_tokens=4, stride=4)
        short = encode_documents(tokenizer, ["a b c"], ["d e f g"], 16, cfg)
        assert short.input_ids == [plain["input_ids"][1]] and short.token_type_ids == [plain["token_type_ids"][1]]
    head = encode_documents(tokenizer, texts, pairs, 16, LongDocConfig("head"))
    assert head.input_ids == plain["input_ids"]
    # inspect's plan of head on pairs is the tokenizer's longest_first: same number of tokens kept
    lengths = [[len(ids) for ids in tokenizer(side, add_special_tokens=False)["input_ids"]] for side in (texts, pairs)]
    shares, rows, _ = document_coverage(lengths[0], lengths[1], 16, LongDocConfig("head"))
    kept = [len(ids) - 3 for ids in plain["input_ids"]]
    assert np.allclose(shares, np.array(kept) / (np.array(lengths[0]) + np.array(lengths[1])))


# ------------------------------------------------------------------------------------------------ aggregation


def test_single_label_aggregation_arithmetic():
    probs = np.array([[0.6, 0.3, 0.1],   # doc 0
                      [0.2, 0.7, 0.1],   # doc 1
                      [0.1, 0.5, 0.4],   # doc 0
                      [0.4, 0.1, 0.5],   # doc 0
                      [0.3, 0.3, 0.4]])  # doc 2
    doc_ids = np.array([0, 1, 0, 0, 2])
    mean = aggregate(probs, doc_ids, "single", "mean")
    assert np.allclose(mean, [[1.1 / 3, 0.9 / 3, 1.0 / 3], [0.2, 0.7, 0.1], [0.3, 0.3, 0.4]])
    top = aggregate(probs, doc_ids, "single", "max")
    assert np.allclose(top[0], np.array([0.6, 0.5, 0.5]) / 1.6) and np.allclose(top[1:], probs[[1, 4]])
    # vote: doc 0's windows vote class 0, 1, 2 -> a three-way tie, won by the highest mean probability (class 0)
    vote = aggregate(probs, doc_ids, "single", "vote")
    assert np.allclose(vote[0], (np.array([1, 1, 1]) + mean[0]) / 4) and vote[0].argmax() == 0
    assert np.allclose(vote.sum(1), 1.0) and np.allclose(vote[1:], probs[[1, 4]])  # one window: its own row
    # a majority beats a higher mean: two weak votes for class 1 against one confident vote for class 0
    rows = np.array([[0.98, 0.01, 0.01], [0.45, 0.55, 0.0], [0.45, 0.55, 0.0]])
    assert rows.mean(0).argmax() == 0 and combine(rows, "single", "vote").argmax() == 1
    # ties between two classes: the higher mean probability wins
    tied = np.array([[0.9, 0.1], [0.4, 0.6]])
    assert combine(tied, "single", "vote").argmax() == 0 and combine(tied[::-1], "single", "vote").argmax() == 0
    assert combine(1 - tied, "single", "vote").argmax() == 1


def test_multi_label_aggregation_arithmetic():
    probs = np.array([[0.9, 0.2, 0.6], [0.1, 0.3, 0.7], [0.2, 0.8, 0.1], [0.5, 0.5, 0.5]])
    doc_ids = np.array([0, 0, 0, 1])
    assert np.allclose(aggregate(probs, doc_ids, "multi", "mean"), [[0.4, 1.3 / 3, 1.4 / 3], [0.5, 0.5, 0.5]])
    assert np.allclose(aggregate(probs, doc_ids, "multi", "max"), [[0.9, 0.8, 0.7], [0.5, 0.5, 0.5]])
    vote = aggregate(probs, doc_ids, "multi", "vote")
    assert np.allclose(vote, [[0.2, 0.3, 0.6], [0.5, 0.5, 0.5]])  # per-label median
    assert ((vote[0] >= 0.5) == [False, False, True]).all()  # label 2: 2 of 3 windows over 0.5, the others 1 of 3
    assert ((vote[0] >= 0.25) == [False, True, True]).all()  # at another threshold, still a per-label majority
    with pytest.raises(BertkitError, match="regression"):
        combine(probs[:2, :1], "regression", "vote")


def test_trainer_metrics_are_per_document():
    """Window argmaxes get 2 of 6 windows right; per document, the mean gets 0 of 3 right and the vote 1 of 3."""
    labels = LabelSpace("single", ["a", "b"])
    logits = np.log(np.array([[0.9, 0.1], [0.4, 0.6], [0.4, 0.6], [0.6, 0.4], [0.6, 0.4], [0.1, 0.9]]))
    doc_ids = np.array([0, 0, 0, 1, 1, 2])
    references = np.array([1, 1, 1, 1, 1, 0])
    eval_prediction = transformers.EvalPrediction(predictions=logits, label_ids=references)
    assert compute_metrics_fn(labels)(eval_prediction)["accuracy"] == pytest.approx(2 / 6)
    by_document = compute_metrics_fn(labels, doc_ids=doc_ids, how="mean")(eval_prediction)
    assert by_document["accuracy"] == pytest.approx(0 / 3)
    assert compute_metrics_fn(labels, doc_ids=doc_ids, how="vote")(eval_prediction)["accuracy"] == \
        pytest.approx(1 / 3)
    with pytest.raises(ValueError):
        compute_metrics_fn(labels, doc_ids=doc_ids[:-1])(eval_prediction)


# ------------------------------------------------------------------------------------------------ prediction


@pytest.fixture(scope="module")
def classifier_parts(tiny_model_dir, tokenizer):
    config = BertkitConfig.from_pretrained(tiny_model_dir, num_labels=3)
    transformers.set_seed(0)
    model = BertkitForSequenceClassification.from_pretrained(tiny_model_dir, config=config).eval()
    return model, tokenizer


def test_chunked_prediction_of_a_short_document_equals_plain_prediction(classifier_parts):
    model, tokenizer = classifier_parts
    labels = LabelSpace("single", ["a", "b", "c"])
    texts = ["a short text", "another short one, a little longer than the first", NUMBERS]
    plain = predict_probabilities(Classifier(model, tokenizer, labels, 40, {}), texts, None)
    for how in ("mean", "max", "vote"):
        chunked = Classifier(model, tokenizer, labels, 40, {}, LongDocConfig("chunk", stride=8, aggregate=how))
        assert np.allclose(predict_probabilities(chunked, texts, None), plain, atol=1e-6), how
    # a long document: the mean of its windows run one at a time (no batching, no padding)
    chunked = Classifier(model, tokenizer, labels, 12, {}, LongDocConfig("chunk", stride=3, aggregate="mean"))
    got = predict_probabilities(chunked, [NUMBERS, "tiny"], None, batch_size=3)
    windows = encode_documents(tokenizer, [NUMBERS], None, 12, chunked.long_doc)
    with torch.no_grad():
        alone = [model(input_ids=torch.tensor([ids])).logits.softmax(-1)[0].numpy() for ids in windows.input_ids]
    assert len(alone) == 4 and got.shape == (2, 3)
    assert np.allclose(got[0], np.mean(alone, 0), atol=1e-5)


# ------------------------------------------------------------------------------------------------ end to end


@pytest.fixture(scope="module")
def long_docs(tmp_path_factory):
    return shortest_long_docs(tmp_path_factory.mktemp("long_docs"))


def run_classify(model_dir, files, out, *extra):
    return runner.invoke(app, ["run", "classify", f"model={model_dir}", f"data.train={files['train']}",
                               f"data.eval={files['dev']}", f"output_dir={out}", "precision=fp32",
                               "data.max_length=64", "long_doc.stride=16", "long_doc.head_tokens=16",
                               "train.num_train_epochs=1", "train.per_device_train_batch_size=16",
                               "train.learning_rate=1.0e-3", "train.save_total_limit=1", *extra])


@pytest.fixture(scope="module")
def chunk_run(tiny_model_dir, long_docs, tmp_path_factory):
    out = tmp_path_factory.mktemp("chunk-run")
    result = run_classify(tiny_model_dir, long_docs, out, "long_doc.strategy=chunk", "long_doc.aggregate=mean",
                          "keep_checkpoints=true")  # the epoch's evaluation is read from its checkpoint
    assert result.exit_code == 0, result.output
    return out


def _dev_documents(files) -> list[dict]:
    return [json.loads(line) for line in files["dev"].read_text().splitlines()]


@pytest.mark.parametrize("strategy,aggregate", [("head", "mean"), ("tail", "mean"), ("head_tail", "mean"),
                                                ("chunk", "max")])
def test_each_strategy_runs_end_to_end(tiny_model_dir, long_docs, tmp_path, strategy, aggregate):
    out = tmp_path / "run"
    result = run_classify(tiny_model_dir, long_docs, out, f"long_doc.strategy={strategy}",
                          f"long_doc.aggregate={aggregate}", "train.save_strategy=no", "train.eval_strategy=no",
                          "train.load_best_model_at_end=false")
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    documents = len(_dev_documents(long_docs))
    assert metrics["rows"]["dev_documents"] == documents
    assert (metrics["rows"]["dev"] > documents) == (strategy == "chunk")
    confusion = json.loads((out / "confusion_matrix.json").read_text())
    assert sum(map(sum, confusion["matrix"])) == documents  # counted over documents, never windows
    saved = (out / "bertkit_config.yaml").read_text()
    assert f"strategy: {strategy}" in saved and f"aggregate: {aggregate}" in saved


def test_chunk_run_evaluates_per_document_every_epoch(chunk_run, long_docs):
    metrics = json.loads((chunk_run / "metrics.json").read_text())
    assert metrics["rows"]["dev"] > 3 * metrics["rows"]["dev_documents"]
    state = json.loads(next(chunk_run.glob("checkpoint-*/trainer_state.json")).read_text())
    evaluations = [entry for entry in state["log_history"] if "eval_accuracy" in entry]
    documents = metrics["rows"]["dev_documents"]
    assert len(evaluations) == 1 and (evaluations[0]["eval_accuracy"] * documents).is_integer()
    # one epoch: the epoch's evaluation and the final one score the same model on the same documents
    for key in ("accuracy", "macro_f1"):
        assert evaluations[0][f"eval_{key}"] == pytest.approx(metrics["eval"][key])


def test_predict_and_evaluate_on_a_chunked_model_are_per_document(chunk_run, long_docs, tmp_path):
    predictions = tmp_path / "predictions.jsonl"
    result = runner.invoke(app, ["predict", str(chunk_run), str(long_docs["dev"]), "-o", str(predictions),
                                 "--batch-size", "7"])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in predictions.read_text().splitlines()]
    dev = _dev_documents(long_docs)
    assert [r["text"] for r in records] == [d["text"] for d in dev]  # one row per document, in input order
    accuracy = np.mean([r["label"] == d["label"] for r, d in zip(records, dev)])
    metrics_file = tmp_path / "eval.json"
    result = runner.invoke(app, ["evaluate", str(chunk_run), str(long_docs["dev"]), "-o", str(metrics_file)])
    assert result.exit_code == 0, result.output
    evaluated = json.loads(metrics_file.read_text())
    assert evaluated["examples"] == len(dev) and evaluated["long_doc"] == "chunk"
    assert evaluated["accuracy"] == pytest.approx(accuracy)
    # the same documents, the same aggregation as the run's own final evaluation
    assert evaluated["accuracy"] == pytest.approx(json.loads((chunk_run / "metrics.json").read_text())["eval"]
                                                  ["accuracy"])


def test_multi_label_chunk_vote(tiny_model_dir, long_docs, tmp_path):
    files = {}
    for name in ("train", "dev"):
        rows = [json.loads(line) for line in long_docs[name].read_text().splitlines()]
        files[name] = tmp_path / f"{name}.jsonl"
        files[name].write_text("".join(json.dumps({"text": r["text"], "labels": [r["label"], "news"]}) + "\n"
                                       for r in rows))
    out = tmp_path / "run"
    result = run_classify(tiny_model_dir, files, out, "long_doc.strategy=chunk", "long_doc.aggregate=vote",
                          "long_doc.max_windows=3", "data.label_kind=multi", "train.save_strategy=no",
                          "train.eval_strategy=no", "train.load_best_model_at_end=false")
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["rows"]["dev"] <= 3 * metrics["rows"]["dev_documents"]
    assert {"micro_f1", "subset_accuracy"} <= set(metrics["eval"])
    predictions = tmp_path / "predictions.jsonl"
    assert runner.invoke(app, ["predict", str(out), str(files["dev"]), "-o", str(predictions)]).exit_code == 0
    assert len(predictions.read_text().splitlines()) == metrics["rows"]["dev_documents"]


@pytest.mark.parametrize("override,key", [("long_doc.stride=62", "long_doc.stride"),
                                          ("long_doc.head_tokens=70", "long_doc.head_tokens")])
def test_settings_that_cannot_fit_are_one_line_errors(tiny_model_dir, long_docs, tmp_path, override, key):
    strategy = "chunk" if "stride" in override else "head_tail"
    result = run_classify(tiny_model_dir, long_docs, tmp_path, f"long_doc.strategy={strategy}", override)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert key in result.output and "data.max_length=64" in result.output


def test_validate_catches_settings_that_cannot_fit():
    result = runner.invoke(app, ["validate", "classify", "long_doc.strategy=head_tail", "data.max_length=128"])
    assert result.exit_code == 2 and "long_doc.head_tokens=128" in result.output and "e.g. 31" in result.output
    ok = runner.invoke(app, ["validate", "classify", "long_doc.strategy=head_tail", "data.max_length=256"])
    assert ok.exit_code == 0, ok.output


def test_inspect_reports_what_each_strategy_keeps(tiny_model_dir, long_docs, tokenizer, monkeypatch):
    from bertkit.console import console

    monkeypatch.setattr(console, "_width", 200)  # whole table rows, whatever the terminal
    result = runner.invoke(app, ["inspect", str(long_docs["train"]), "--model", tiny_model_dir, "--max-length", "64"])
    assert result.exit_code == 0, result.output
    # the defaults head_tokens=128, stride=64 do not fit 62 text tokens: inspect shows a quarter of the room
    for name in ("head ", "tail ", "head_tail (15 + 47)", "chunk (stride 15)", "chunk (stride 15, max 4 windows)"):
        assert name in result.output, name
    texts = [json.loads(line)["text"] for line in long_docs["train"].read_text().splitlines()]
    report = coverage_report(tokenizer, texts, None, 64, LongDocConfig(head_tokens=16, stride=16))
    lengths = np.array([len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]])
    for name in ("head", "tail", "head_tail (16 + 46)"):
        assert report[name]["mean_share_kept"] == pytest.approx(np.mean(np.minimum(lengths, 62) / lengths))
    assert report["chunk (stride 16)"]["mean_share_kept"] == 1.0 == report["chunk (stride 16)"]["documents_whole"]
    assert report["chunk (stride 16)"]["windows_mean"] == pytest.approx(np.mean(1 + np.ceil((lengths - 62) / 46)))
    capped = report["chunk (stride 16, max 4 windows)"]
    kept = []
    for n in lengths:
        spans = sliding_windows(n, 62, 16)
        kept.append(covered([[spans[i]] for i in evenly_spaced(len(spans), 4)]))
    assert capped["windows_max"] == 4 and capped["mean_share_kept"] == pytest.approx(np.mean(np.array(kept) / lengths))
    assert capped["mean_share_kept"] < 1.0
    assert f"{report['head']['mean_share_kept']:.1%} kept" in result.output


def test_final_evaluation_reuses_the_kept_checkpoints_dev_predictions():
    """The predictions an evaluation during training made at the step of the kept weights stand in for one more dev
    pass; at any other step (or without them) the final evaluation predicts."""
    from types import SimpleNamespace

    from bertkit.tasks.classify import DevPredictions, final_evaluation

    labels = LabelSpace("single", ["neg", "pos"])
    doc_ids = np.array([0, 0, 1])
    memory = DevPredictions()
    metrics_fn = compute_metrics_fn(labels, doc_ids=doc_ids, memory=memory)
    for step, logits in ((10, [[3.0, 0.0], [2.0, 0.0], [0.0, 1.0]]), (20, [[0.0, 3.0], [0.0, 2.0], [1.0, 0.0]])):
        metrics_fn(transformers.EvalPrediction(predictions=np.array(logits), label_ids=np.array([0, 0, 1])))
        memory.on_evaluate(None, SimpleNamespace(global_step=step), None)

    def trainer(best, load_best=True):
        def predict(*args, **kwargs):
            raise AssertionError("predicted again")
        return SimpleNamespace(state=SimpleNamespace(global_step=20, best_model_checkpoint=best),
                               args=SimpleNamespace(load_best_model_at_end=load_best), predict=predict)

    def accuracy(*args):
        return final_evaluation(*args).metrics["accuracy"]

    assert accuracy(trainer("out/checkpoint-10"), None, doc_ids, labels, "mean", memory) == 1.0
    assert accuracy(trainer("out/checkpoint-20"), None, doc_ids, labels, "mean", memory) == 0.0
    assert accuracy(trainer("out/checkpoint-10", load_best=False), None, doc_ids, labels, "mean",
                    memory) == 0.0  # the last step's weights
    with pytest.raises(AssertionError, match="predicted again"):
        final_evaluation(trainer("out/checkpoint-30"), None, doc_ids, labels, "mean", memory)


def test_a_search_or_seed_band_keeps_no_dev_memory(tmp_path):
    """Several trainings on one Trainer share step numbers: the final evaluation must predict, not reuse."""
    from bertkit.cli import load_recipe_config

    dev = tmp_path / "dev.csv"
    dev.write_text("text,label\na,x\n")
    module, one = load_recipe_config("classify", None, [f"data.eval={dev}"])
    assert module.dev_memory(one) is not None
    _, band = load_recipe_config("classify", None, [f"data.eval={dev}", "seeds=[1,2]"])
    assert module.dev_memory(band) is None
