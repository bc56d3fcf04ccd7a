"""`bertkit serve` of retrieval models through a real uvicorn server: TEI's POST /embed on a sentence-transformers
embedding folder (the real all-MiniLM-L6-v2) equals `SentenceTransformer(path).encode`, POST /rerank on a CrossEncoder
folder equals `CrossEncoder(path).predict` sorted best first, and each model refuses the other routes naming its
own. The server helper is test_serve.py's."""

import math
from pathlib import Path

import httpx
import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from test_serve import running  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

EMPTY = "is empty — give it some text (training refuses empty texts too)"  # /predict's words, one check for all
TEXTS = ["How do glaciers move?", "A glacier flows downhill under its own weight, slowly deforming.",
         "The cat sat on the mat.", "x"]


@pytest.fixture(scope="module")
def cross_encoder_dir(tmp_path_factory, tiny_model_dir):
    """A stock CrossEncoder folder (one label, random head) saved by sentence-transformers from the tiny BERT."""
    import torch
    from sentence_transformers import CrossEncoder

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("cross-encoder")
    CrossEncoder(tiny_model_dir, num_labels=1, max_length=64).save_pretrained(str(path))
    return str(path)


def test_embed_equals_sentence_transformers_encode(minilm_dir):
    from sentence_transformers import SentenceTransformer

    expected = SentenceTransformer(minilm_dir, device="cpu").encode(TEXTS)
    with running(minilm_dir) as (url, _):
        response = httpx.post(f"{url}/embed", json={"inputs": TEXTS}, timeout=60)
        assert response.status_code == 200, response.text
        vectors = np.asarray(response.json(), dtype=np.float32)
        assert vectors.shape == (len(TEXTS), 384)
        assert np.abs(vectors - expected).max() < 1e-4
        one = httpx.post(f"{url}/embed", json={"inputs": TEXTS[0], "normalize": False}, timeout=60).json()
        assert len(one) == 1 and np.abs(np.asarray(one[0]) - expected[0]).max() < 1e-4  # TEI: always a list
        info = httpx.get(f"{url}/info").json()
        assert info["task"] == "embed" and info["endpoints"] == ["/embed"] and info["dimension"] == 384
        wrong = httpx.post(f"{url}/predict", json={"inputs": "a text"}, timeout=30)
        assert wrong.status_code == 400 and "POST /embed" in wrong.json()["error"]
        for body, words in (({"inputs": ["fine", ""]}, f"inputs[1] {EMPTY}"), ({"inputs": " \n"}, f"inputs[0] {EMPTY}"),
                            ({"inputs": "a", "prompt_name": "nope"}, "prompt_name 'nope'"),
                            ({"inputs": "a", "pooling": "cls"}, "pooling")):
            refused = httpx.post(f"{url}/embed", json=body, timeout=30)
            assert refused.status_code == 422 and words in refused.json()["error"], refused.text


def test_rerank_equals_cross_encoder_predict_best_first(cross_encoder_dir):
    import torch
    from sentence_transformers import CrossEncoder

    query, texts = TEXTS[0], TEXTS[1:]
    expected = CrossEncoder(cross_encoder_dir, device="cpu").predict([[query, t] for t in texts])
    logits = CrossEncoder(cross_encoder_dir, device="cpu").predict([[query, t] for t in texts],
                                                                   activation_fn=torch.nn.Identity())
    with running(cross_encoder_dir) as (url, _):
        response = httpx.post(f"{url}/rerank", json={"query": query, "texts": texts, "return_text": True}, timeout=60)
        assert response.status_code == 200, response.text
        ranked = response.json()
        assert [r["index"] for r in ranked] == list(np.argsort(-expected, kind="stable"))
        assert all(abs(r["score"] - expected[r["index"]]) < 1e-5 and r["text"] == texts[r["index"]] for r in ranked)
        raw = httpx.post(f"{url}/rerank", json={"query": query, "texts": texts, "raw_scores": True}, timeout=60).json()
        assert all(abs(r["score"] - logits[r["index"]]) < 1e-4 and "text" not in r for r in raw)
        assert httpx.get(f"{url}/info").json()["endpoints"] == ["/rerank"]
        wrong = httpx.post(f"{url}/embed", json={"inputs": "a text"}, timeout=30)
        assert wrong.status_code == 400 and "POST /rerank" in wrong.json()["error"]
        for route in ("/rerank", "/embed", "/predict"):  # FastAPI's own "error parsing the body" named nothing
            latin1 = httpx.post(f"{url}{route}", content='{"query": "café", "texts": ["a"]}'.encode("latin-1"),
                                headers={"content-type": "application/json"}, timeout=30)
            assert latin1.status_code == 400 and "not UTF-8" in latin1.json()["error"], latin1.text
        for body, words in (({"query": " ", "texts": ["a"]}, f"query {EMPTY}"),
                            ({"query": "q", "texts": []}, "texts must be a non-empty list"),
                            ({"query": "q", "texts": ["a", ""]}, f"texts[1] {EMPTY}"),
                            ({"query": "q"}, "texts")):
            refused = httpx.post(f"{url}/rerank", json=body, timeout=30)
            assert refused.status_code == 422 and words in refused.json()["error"], refused.text


def test_a_classifier_refuses_embed_and_rerank_naming_predict(tmp_path, minilm_dir):
    import transformers
    from helpers import tiny_stock_head

    classify = tiny_stock_head(transformers.BertForSequenceClassification, tmp_path / "classify", minilm_dir,
                               id2label={0: "no", 1: "yes"}, label2id={"no": 0, "yes": 1})
    with running(classify) as (url, _):
        for route, body in (("/embed", {"inputs": "a"}), ("/rerank", {"query": "q", "texts": ["a"]})):
            refused = httpx.post(f"{url}{route}", json=body, timeout=30)
            assert refused.status_code == 400 and "POST /predict" in refused.json()["error"]


def test_embed_export_holds_pooling_and_normalisation_and_serves_what_encode_gives(tmp_path, minilm_dir):
    """`bertkit export` of the MiniLM embedding folder: the graph's output is the sentence embedding (mean pooling
    and Normalize inside), checked against SentenceTransformer.encode at export time, and /embed of the export
    equals encode within 1e-4."""
    pytest.importorskip("onnxruntime")
    from sentence_transformers import SentenceTransformer

    from bertkit.export import export_run

    summary = export_run(minilm_dir, str(tmp_path / "minilm-onnx"))
    assert summary["recipe"] == "embed" and summary["outputs"] == ["sentence_embedding"]
    assert summary["embedding"]["pooling"] == "mean" and summary["embedding"]["normalize"] is True
    assert summary["parity_max_abs_diff"]["encode"] < 1e-4
    expected = SentenceTransformer(minilm_dir, device="cpu").encode(TEXTS)
    with running(summary["output"]) as (url, _):
        response = httpx.post(f"{url}/embed", json={"inputs": TEXTS}, timeout=60)
        assert response.status_code == 200, response.text
        assert np.abs(np.asarray(response.json()) - expected).max() < 1e-4
        refused = httpx.post(f"{url}/embed", json={"inputs": ["fine", "  "]}, timeout=30)
        assert refused.status_code == 422 and f"inputs[1] {EMPTY}" in refused.json()["error"], refused.text
        info = httpx.get(f"{url}/info").json()
        assert info["task"] == "embed" and info["precision"] == "fp32" and info["implementation"] == "OnnxEmbedder"


def test_predict_and_evaluate_read_an_embed_export(tmp_path, minilm_dir):
    """predict / evaluate on an embed run's ONNX export said "unexpected OSError: no file named model.safetensors"
    (serve took the same export): they run its graph, with the vectors SentenceTransformer.encode gives."""
    pytest.importorskip("onnxruntime")
    from sentence_transformers import SentenceTransformer

    from bertkit.export import export_run
    from helpers import run_in_process

    export = export_run(minilm_dir, str(tmp_path / "minilm-onnx"))["output"]
    (tmp_path / "texts.txt").write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    result = run_in_process("predict", export, "texts.txt", "-o", "vectors.npy", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    expected = SentenceTransformer(minilm_dir, device="cpu").encode(TEXTS)
    assert np.abs(np.load(tmp_path / "vectors.npy") - expected).max() < 1e-4
    dev = Path(__file__).resolve().parent.parent / "data" / "embed" / "en_qa" / "dev.jsonl"
    result = run_in_process("evaluate", export, dev, cwd=tmp_path)
    assert result.returncode == 0 and "ndcg@10" in result.stdout, result.stdout + result.stderr


def test_rerank_scores_of_huge_logits_do_not_overflow():
    """math.exp(-x) overflows below x = -709: /rerank answered 500 for a very negative logit."""
    from bertkit.tasks.rerank import Endpoint as RerankEndpoint

    ranked = RerankEndpoint.ranked([-1000.0, 1000.0, 0.0, -800.0], ["a", "b", "c", "d"], False, True)
    assert [r["index"] for r in ranked[:2]] == [1, 2]
    assert [r["score"] for r in ranked] == [1.0, 0.5, 0.0, 0.0]
    assert RerankEndpoint.ranked([-1000.0], ["a"], True, False) == [{"index": 0, "score": -1000.0}]
    assert abs(RerankEndpoint.ranked([2.0], ["a"], False, False)[0]["score"] - 1 / (1 + math.exp(-2.0))) < 1e-12
    tiny = RerankEndpoint.ranked([-40.0, -38.0], ["a", "b"], False, False)  # tiny scores keep the logits' order
    assert [r["index"] for r in tiny] == [1, 0] and 0 < tiny[1]["score"] < tiny[0]["score"] < 1e-16
