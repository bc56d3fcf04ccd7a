"""long_doc.aggregate=attention: the document model (bertkit/modeling_document.py) on hand-made batches, its parity
with stock transformers on one-window documents, exact gradient accumulation, and the classify recipe end to end
(train, dev metrics per document, predict, evaluate, reload), with the settings refused at validate time."""

import json

import numpy as np
import pytest
import torch
import transformers
from helpers import shortest_long_docs, tiny_config_kwargs
from typer.testing import CliRunner

import bertkit
from bertkit.cli import app
from bertkit.errors import BertkitError
from bertkit.modeling_document import BertkitForDocumentClassification, segment_softmax
from bertkit.tasks.classify import DocumentCollator, LongDocConfig

pytestmark = pytest.mark.usefixtures("one_thread")


def _model(seed=0, **overrides) -> BertkitForDocumentClassification:
    torch.manual_seed(seed)
    config = bertkit.BertkitConfig(**tiny_config_kwargs(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                                        **overrides))
    return BertkitForDocumentClassification(config).eval()


def _windows(count, seed=0, length=9):
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(1, 99, (count, length), generator=gen)


# ------------------------------------------------------------------------------------------------ the model


def test_segment_softmax_normalises_within_each_document():
    scores = torch.tensor([1.0, 2.0, 3.0, 0.5, -4.0, 7.0])
    documents = torch.tensor([0, 0, 2, 1, 1, 0])
    weights = segment_softmax(scores, documents, 3)
    assert torch.allclose(weights[[0, 1, 5]], torch.softmax(scores[[0, 1, 5]], 0))
    assert torch.allclose(weights[[3, 4]], torch.softmax(scores[[3, 4]], 0))
    assert weights[2] == 1.0  # a document of one window


def test_shapes_and_pooling_by_hand():
    """3 documents of 2, 1 and 3 windows: the logits are the classifier of each document's attention-weighted sum."""
    model = _model()
    input_ids = _windows(6)
    document_ids = torch.tensor([0, 0, 1, 2, 2, 2])
    mask = torch.ones_like(input_ids)
    mask[1, 6:] = 0  # one padded window
    with torch.no_grad():
        output = model(input_ids=input_ids, attention_mask=mask, document_ids=document_ids,
                       labels=torch.tensor([0, 2, 1]))
        vectors = model.window_vectors(input_ids=input_ids, attention_mask=mask)  # (W, H)
        scores = model.window_attention(vectors)
        expected = []
        for doc in range(3):
            mine = document_ids == doc
            weights = torch.softmax(scores[mine], 0)
            expected.append(model.classifier((weights[:, None] * vectors[mine]).sum(0)))
    assert output.logits.shape == (3, 3) and output.loss.dim() == 0
    assert torch.allclose(output.logits, torch.stack(expected), atol=1e-6)
    pooled_alone = model(input_ids=input_ids[1:2, :6]).logits  # padding does not change a window's vector
    assert torch.allclose(model.window_vectors(input_ids=input_ids[1:2, :6]), vectors[1:2], atol=1e-5)
    assert pooled_alone.shape == (1, 3)


def test_chunked_inference_matches_one_forward():
    """window_vectors on pieces, then classify_windows: the same logits as one forward over all windows."""
    model = _model()
    input_ids, document_ids = _windows(7, seed=3), torch.tensor([0, 0, 0, 1, 2, 2, 2])
    with torch.no_grad():
        whole = model(input_ids=input_ids, document_ids=document_ids).logits
        pieces = torch.cat([model.window_vectors(input_ids=input_ids[i:i + 2]) for i in range(0, 7, 2)])
        chunked = model.classify_windows(pieces, document_ids).logits
    assert torch.allclose(whole, chunked, atol=1e-5)


def test_one_window_documents_match_stock_transformers(tmp_path):
    """A checkpoint loaded into stock BertForSequenceClassification (window_attention dropped) gives the same logits
    on documents of one window: its weight is exactly 1."""
    model = _model(seed=1)
    with torch.no_grad():  # the attention must not be a no-op: give it weights that matter on longer documents
        model.window_attention.dense.weight.normal_(0, 1.0)
        model.window_attention.score.weight.normal_(0, 10.0)
    model.save_pretrained(tmp_path)
    stock, info = transformers.BertForSequenceClassification.from_pretrained(tmp_path, output_loading_info=True)
    assert sorted(info["unexpected_keys"]) == ["window_attention.dense.bias", "window_attention.dense.weight",
                                               "window_attention.score.bias", "window_attention.score.weight"]
    assert not info["missing_keys"]
    input_ids = _windows(4, seed=5)
    mask = torch.ones_like(input_ids)
    mask[2, 5:] = 0
    with torch.no_grad():
        ours = model(input_ids=input_ids, attention_mask=mask, document_ids=torch.arange(4)).logits
        theirs = stock.eval()(input_ids=input_ids, attention_mask=mask).logits
        vectors = model.window_vectors(input_ids=input_ids, attention_mask=mask)
        _, weights = model.document_vectors(vectors, torch.tensor([0, 0, 1, 1]))
    assert torch.allclose(ours, theirs, atol=1e-5)
    assert (weights - 0.5).abs().min() > 0.01  # on several windows the weights are learned, not a plain mean


def _documents(problem_type, count=8):
    """`count` documents of 1..4 windows each, with labels for the problem type."""
    gen = torch.Generator().manual_seed(11)
    rows = []
    for doc in range(count):
        windows = _windows(1 + doc % 4, seed=doc, length=6 + doc % 3).tolist()
        label = {"single_label_classification": int(torch.randint(0, 3, (1,), generator=gen)),
                 "multi_label_classification": torch.randint(0, 2, (3,), generator=gen).float().tolist(),
                 "regression": float(torch.rand(1, generator=gen))}[problem_type]
        rows.append({"input_ids": windows, "token_type_ids": [[0] * len(w) for w in windows], "labels": label})
    return rows


class _PadOnly:
    """What DocumentCollator needs of a tokenizer: pad() over input_ids / token_type_ids, with an attention mask."""

    def pad(self, rows, return_tensors="pt"):
        longest = max(len(row["input_ids"]) for row in rows)
        out = {key: torch.tensor([row[key] + [0] * (longest - len(row[key])) for row in rows])
               for key in ("input_ids", "token_type_ids")}
        out["attention_mask"] = torch.tensor([[1] * len(r["input_ids"]) + [0] * (longest - len(r["input_ids"]))
                                              for r in rows])
        return out


def _one_sgd_step(problem_type, batch_size, accumulation, tmp_path) -> dict:
    model = _model(num_labels=1 if problem_type == "regression" else 3, problem_type=problem_type).train()
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / f"{batch_size}x{accumulation}"), per_device_train_batch_size=batch_size,
        gradient_accumulation_steps=accumulation, max_steps=1, learning_rate=1.0, optim="sgd",
        lr_scheduler_type="constant", weight_decay=0.0, max_grad_norm=0.0, save_strategy="no", report_to="none",
        use_cpu=True, seed=0, disable_tqdm=True, remove_unused_columns=False)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    transformers.Trainer(model=model, args=args, train_dataset=_documents(problem_type),
                         data_collator=DocumentCollator(_PadOnly())).train()
    return {name: p.detach() - before[name] for name, p in model.named_parameters()}


@pytest.mark.parametrize("problem_type", ["single_label_classification", "multi_label_classification",
                                          "regression"])
def test_gradient_accumulation_is_exact(problem_type, tmp_path):
    """8 documents x GA 1 and 2 x GA 4 give the same update, though the micro-batches hold different window counts."""
    full_batch = _one_sgd_step(problem_type, 8, 1, tmp_path)
    accumulated = _one_sgd_step(problem_type, 2, 4, tmp_path)
    assert torch.sqrt(sum((u**2).sum() for u in full_batch.values())) > 1e-3
    assert full_batch["window_attention.dense.weight"].abs().sum() > 0  # the attention is trained
    for name, update in full_batch.items():
        assert torch.allclose(update, accumulated[name], atol=1e-6, rtol=1e-4), name


def test_collator_flattens_windows_and_numbers_documents():
    batch = DocumentCollator(_PadOnly())(_documents("single_label_classification", count=3))
    assert batch["input_ids"].shape == (1 + 2 + 3, 8)
    assert batch["document_ids"].tolist() == [0, 1, 1, 2, 2, 2]
    assert batch["labels"].shape == (3,) and batch["labels"].dtype == torch.long


# ------------------------------------------------------------------------------------------------ settings


@pytest.mark.parametrize("strategy", ["head", "tail", "head_tail"])
def test_attention_needs_chunk_windows(strategy):
    with pytest.raises(BertkitError, match="long_doc.aggregate=attention.*long_doc.strategy=chunk"):
        LongDocConfig(strategy=strategy, aggregate="attention").check(256)


def test_attention_caps_windows_when_max_windows_is_null():
    assert LongDocConfig("chunk", aggregate="attention").window_limit() == 16
    assert LongDocConfig("chunk", aggregate="attention", max_windows=3).window_limit() == 3
    assert LongDocConfig("chunk", aggregate="mean").window_limit() is None


# ------------------------------------------------------------------------------------------------ the recipe

runner = CliRunner()


@pytest.fixture(scope="module")
def long_docs(tmp_path_factory):
    """Two documents per label of the shipped long-document sample (train and dev), the shortest ones."""
    return shortest_long_docs(tmp_path_factory.mktemp("long_docs"))


def run_attention(model_dir, files, out, *extra):
    return runner.invoke(app, ["run", "classify", f"model={model_dir}", f"data.train={files['train']}",
                               f"data.eval={files['dev']}", f"output_dir={out}", "precision=fp32",
                               "data.max_length=64", "long_doc.strategy=chunk", "long_doc.stride=16",
                               "long_doc.aggregate=attention", "train.num_train_epochs=2",
                               "train.per_device_train_batch_size=4", "train.per_device_eval_batch_size=3",
                               "train.learning_rate=1.0e-3", "train.save_total_limit=1", *extra])


@pytest.fixture(scope="module")
def attention_run(tiny_model_dir, long_docs, tmp_path_factory):
    out = tmp_path_factory.mktemp("attention-run")
    result = run_attention(tiny_model_dir, long_docs, out)
    assert result.exit_code == 0, result.output
    assert "at most 16 evenly spaced windows (long_doc.max_windows is null" in result.output
    return out


def _dev(files) -> list[dict]:
    return [json.loads(line) for line in files["dev"].read_text().splitlines()]


def test_attention_run_trains_documents_and_scores_them(attention_run, long_docs):
    metrics = json.loads((attention_run / "metrics.json").read_text())
    documents = len(_dev(long_docs))
    assert metrics["rows"]["dev"] == metrics["rows"]["dev_documents"] == documents  # rows are documents
    assert metrics["eval"]["documents"] == documents
    confusion = json.loads((attention_run / "confusion_matrix.json").read_text())
    assert sum(map(sum, confusion["matrix"])) == documents
    history = json.loads((attention_run / "log_history.json").read_text())
    evaluations = [entry for entry in history if "eval_accuracy" in entry]
    assert len(evaluations) == 2 and all((e["eval_accuracy"] * documents).is_integer() for e in evaluations)
    config = json.loads((attention_run / "config.json").read_text())
    assert config["architectures"] == ["BertForDocumentClassification"]  # saved under stock BERT's naming
    assert config["bertkit_task_settings"]["long_doc"]["aggregate"] == "attention"
    card = (attention_run / "README.md").read_text()
    assert "per-window classifier" in card and "bertkit predict` pools the windows" in card


def test_attention_model_learns_window_weights(attention_run, tiny_model_dir):
    from safetensors.torch import load_file

    weights = load_file(str(attention_run / "model.safetensors"))
    assert "window_attention.score.weight" in weights
    fresh = _model()  # the run's attention moved away from its initialisation (it was trained)
    assert not torch.equal(weights["window_attention.dense.weight"], fresh.window_attention.dense.weight)


def test_predict_and_evaluate_are_per_document_and_match_the_run(attention_run, long_docs, tmp_path):
    predictions = tmp_path / "predictions.jsonl"
    result = runner.invoke(app, ["predict", str(attention_run), str(long_docs["dev"]), "-o", str(predictions),
                                 "--batch-size", "5"])  # 5 windows a batch: documents span several encoder calls
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in predictions.read_text().splitlines()]
    dev = _dev(long_docs)
    assert [r["text"] for r in records] == [d["text"] for d in dev]
    accuracy = np.mean([r["label"] == d["label"] for r, d in zip(records, dev)])
    metrics_file = tmp_path / "eval.json"
    result = runner.invoke(app, ["evaluate", str(attention_run), str(long_docs["dev"]), "-o", str(metrics_file)])
    assert result.exit_code == 0, result.output
    evaluated = json.loads(metrics_file.read_text())
    run_metrics = json.loads((attention_run / "metrics.json").read_text())["eval"]
    assert evaluated["examples"] == len(dev) and evaluated["accuracy"] == pytest.approx(accuracy)
    for key in ("accuracy", "macro_f1"):  # the same documents and windows as the run's own final evaluation
        assert evaluated[key] == pytest.approx(run_metrics[key])


def test_diagnose_runs_the_document_model_on_dev(attention_run):
    result = runner.invoke(app, ["diagnose", str(attention_run)])
    assert result.exit_code == 0, result.output
    assert "chance" in result.output  # it reached the classify task's dev predictions


def test_reloaded_predictor_is_the_document_model(attention_run, long_docs):
    from bertkit.tasks.classify import load_predictor, predict_probabilities

    classifier = load_predictor(str(attention_run))
    assert isinstance(classifier.model, BertkitForDocumentClassification)
    texts = [d["text"] for d in _dev(long_docs)]
    small = predict_probabilities(classifier, texts, None, batch_size=2)
    large = predict_probabilities(classifier, texts, None, batch_size=64)
    assert small.shape == (len(texts), 4) and np.allclose(small, large, atol=1e-5)
    assert np.allclose(small.sum(-1), 1.0, atol=1e-5)


def test_export_and_distill_refuse_a_document_model(attention_run, long_docs, tmp_path):
    exported = runner.invoke(app, ["export", str(attention_run), "-o", str(tmp_path / "onnx")])
    assert exported.exit_code == 2 and "Traceback" not in exported.output
    assert "long_doc.aggregate=attention" in exported.output
    distilled = runner.invoke(app, ["run", "distill", f"teacher={attention_run}", f"data.train={long_docs['train']}",
                                    f"output_dir={tmp_path / 'student'}"])
    assert distilled.exit_code == 2 and "Traceback" not in distilled.output
    assert "BertForDocumentClassification checkpoint" in distilled.output


@pytest.mark.parametrize("overrides,message", [
    (["long_doc.aggregate=attention"], "long_doc.aggregate=attention"),
    (["long_doc.strategy=head_tail", "data.max_length=256", "long_doc.aggregate=attention"], "long_doc.strategy=chunk"),
    (["long_doc.strategy=chunk", "long_doc.aggregate=attention", "lora.enabled=true", "lora.merge=false"],
     "lora.merge=true"),
])
def test_validate_refuses_attention_settings_that_cannot_work(overrides, message):
    result = runner.invoke(app, ["validate", "classify", *overrides])
    assert result.exit_code == 2 and "Traceback" not in result.output and message in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_validate_accepts_attention_on_chunks():
    result = runner.invoke(app, ["validate", "classify", "long_doc.strategy=chunk", "long_doc.aggregate=attention"])
    assert result.exit_code == 0, result.output


def test_lora_merged_attention_run_predicts(tiny_model_dir, long_docs, tmp_path):
    out = tmp_path / "lora"
    result = run_attention(tiny_model_dir, long_docs, out, "lora.enabled=true", "lora.merge=true",
                           "train.num_train_epochs=1", "train.save_strategy=no", "train.eval_strategy=no",
                           "train.load_best_model_at_end=false")
    assert result.exit_code == 0, result.output
    assert "window_attention" in result.output  # trained in full beside the adapters
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["BertForDocumentClassification"]  # saved under stock BERT's naming
    metrics_file = tmp_path / "eval.json"
    evaluated = runner.invoke(app, ["evaluate", str(out), str(long_docs["dev"]), "-o", str(metrics_file)])
    assert evaluated.exit_code == 0, evaluated.output
    assert json.loads(metrics_file.read_text())["accuracy"] == pytest.approx(
        json.loads((out / "metrics.json").read_text())["eval"]["accuracy"])


def test_evaluation_encodes_many_windows_a_slice_at_a_time(monkeypatch):
    """Under no_grad a batch of many windows goes through the encoder in slices of inference_windows: same logits."""
    model = _model()
    input_ids, document_ids = _windows(7, seed=4), torch.tensor([0, 0, 1, 1, 1, 2, 2])
    with torch.no_grad():
        whole = model(input_ids=input_ids, document_ids=document_ids).logits
        calls = []
        encode = model.bert.encode
        monkeypatch.setattr(model.bert, "encode", lambda ids, *a, **k: calls.append(len(ids)) or encode(ids, *a, **k))
        monkeypatch.setattr(model, "inference_windows", 3)
        sliced = model(input_ids=input_ids, document_ids=document_ids).logits
    assert calls == [3, 3, 1] and torch.allclose(whole, sliced, atol=1e-5)


def test_multi_label_attention_tunes_its_threshold_per_document(tiny_model_dir, long_docs, tmp_path):
    files = {}
    for name in ("train", "dev"):
        rows = [json.loads(line) for line in long_docs[name].read_text().splitlines()]
        files[name] = tmp_path / f"{name}.jsonl"
        files[name].write_text("".join(json.dumps({"text": r["text"], "labels": [r["label"], "news"]}) + "\n"
                                       for r in rows))
    out = tmp_path / "run"
    result = run_attention(tiny_model_dir, files, out, "data.label_kind=multi", "long_doc.max_windows=3",
                           "train.num_train_epochs=1")
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["rows"]["dev"] == metrics["eval"]["documents"] == len(_dev(long_docs))
    assert {"micro_f1", "subset_accuracy"} <= set(metrics["eval"]) and 0.0 < metrics["threshold"] < 1.0
    config = json.loads((out / "config.json").read_text())
    assert config["multi_label_threshold"] == metrics["threshold"]
    metrics_file = tmp_path / "eval.json"
    assert runner.invoke(app, ["evaluate", str(out), str(files["dev"]), "-o", str(metrics_file)]).exit_code == 0
    assert json.loads(metrics_file.read_text())["micro_f1"] == pytest.approx(metrics["eval"]["micro_f1"])
