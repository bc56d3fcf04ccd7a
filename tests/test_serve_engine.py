"""serve's engine (bertkit/engine.py): PyTorch or ONNX Runtime, each for the calls it runs faster on the machine the
server starts on. The graph is exported once into the cache and reused, checked against PyTorch (a mismatch keeps
PyTorch, never a wrong answer), answers as PyTorch does, and ONNX Runtime never computes a padded token (rows of one
length run together)."""

import json

import numpy as np
import pytest
import torch
import transformers
from fastapi.testclient import TestClient
from helpers import assert_close_records, tiny_config_kwargs
from typer.testing import CliRunner

import bertkit
from bertkit import engine as engines
from bertkit.cli import app
from bertkit.errors import BertkitError

pytest.importorskip("onnxscript")
pytest.importorskip("onnxruntime")

from bertkit.export import padded_inputs  # noqa: E402
from bertkit.onnx_model import PAD_LOGIT, OnnxModel, head_of, length_groups, load_onnx_model  # noqa: E402
from bertkit.serve import Limits, Server, create_app  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")
runner = CliRunner()

HEADS = {  # name: (class, config overrides)
    "classify": (bertkit.BertkitForSequenceClassification, {"id2label": {0: "negative", 1: "positive"}}),
    "ner": (bertkit.BertkitForTokenClassification, {"id2label": {0: "O", 1: "B-PER", 2: "I-PER"}}),
    "qa": (bertkit.BertkitForQuestionAnswering, {"num_labels": 2}),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, minilm_dir):
    """A tiny model directory per head (real tokenizer), and a cache of graphs shared by the module's tests."""
    root = tmp_path_factory.mktemp("engine")
    folders = {}
    for name, (model_class, overrides) in HEADS.items():
        torch.manual_seed(0)
        model_class(bertkit.BertkitConfig(**tiny_config_kwargs(vocab_size=30522, **overrides))).save_pretrained(
            root / name)
        transformers.AutoTokenizer.from_pretrained(minilm_dir).save_pretrained(root / name)
        folders[name] = str(root / name)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BERTKIT_CACHE", str(root / "cache"))
        yield folders


class CountingSession:
    """The real ONNX Runtime session, counting its calls and the shapes it was given."""

    def __init__(self, session):
        self.session, self.shapes = session, []

    def run(self, names, feed):
        self.shapes.append(feed["input_ids"].shape)
        return self.session.run(names, feed)

    def get_inputs(self):
        return self.session.get_inputs()


@pytest.mark.parametrize("name", list(HEADS))
def test_rows_of_similar_length_run_together_cut_to_their_longest_and_match_the_padded_graph(runs, name):
    folder = engines.cached_export(runs[name], int8=False)
    model = load_onnx_model(str(folder))
    inputs = padded_inputs(model.config, head_of(folder), 7, 24, seed=3)
    inputs["attention_mask"][1], inputs["input_ids"][1] = inputs["attention_mask"][0], inputs["input_ids"][0]  # a pair
    lengths = inputs["attention_mask"].sum(-1)
    padded = model.session.run(list(model.head.outputs), {k: v.numpy() for k, v in inputs.items()})
    model.session = CountingSession(model.session)
    unpadded = model(**inputs)
    expected_calls = [(len(rows), length) for rows, length in length_groups(inputs["attention_mask"].numpy())]
    assert sorted(model.session.shapes) == sorted(expected_calls) and len(expected_calls) < len(set(lengths.tolist()))
    assert sum(shape[0] for shape in model.session.shapes) == 7
    for output_name, expected in zip(model.head.outputs, padded):
        got = getattr(unpadded, output_name).numpy()
        if model.head.per_token:
            real = inputs["attention_mask"].numpy().astype(bool)
            np.testing.assert_allclose(got[real], expected[real], atol=1e-5)
            assert (got[~real] == PAD_LOGIT).all()
        else:
            np.testing.assert_allclose(got, expected, atol=1e-5)


def test_length_groups_stretch_at_most_15_percent_and_2_tokens():
    lengths = np.array([21, 5, 40, 7, 20, 6, 3])
    mask = (np.arange(48) < lengths[:, None]).astype(np.int64)
    groups = [(rows.tolist(), length) for rows, length in length_groups(mask)]
    assert groups == [([1, 6], 5), ([3, 5], 7), ([0, 4], 21), ([2], 40)]  # 3 takes up to 5.45, 6 up to 8.9
    assert length_groups(mask[:, ::-1].copy()) is None  # left padding: not cut


def test_left_padded_rows_run_as_they_are(runs):
    model = load_onnx_model(str(engines.cached_export(runs["classify"], int8=False)))
    model.session = CountingSession(model.session)
    ids = torch.tensor([[101, 2023, 102], [0, 101, 102]])
    model(input_ids=ids, attention_mask=torch.tensor([[1, 1, 1], [0, 1, 1]]))
    assert model.session.shapes == [(2, 3)]


@pytest.mark.parametrize("name, inputs", [("classify", ["a fine film", "a dull, long and tiresome film"]),
                                          ("ner", ["Ada Lovelace met Charles Babbage in London", "Alan"])])
def test_engine_onnx_answers_as_pytorch_does(runs, name, inputs):
    served = {engine: Server(runs[name], "fp32", Limits(), engine=engine) for engine in ("torch", "onnx")}
    assert isinstance(served["onnx"].endpoint.predictor.model, OnnxModel)
    assert served["onnx"].info["engine"]["single"] == "onnxruntime fp32" and \
        served["torch"].info["engine"]["batch"] == "torch fp32"
    for texts in (inputs[:1], inputs):  # one input, then a batch of two lengths
        assert_close_records(*(server.endpoint.predict(server.endpoint.parse(texts)) for server in served.values()))


def test_auto_times_both_here_and_gives_each_kind_of_call_to_the_faster(runs, monkeypatch):
    server = Server(runs["classify"], "fp32", Limits(), engine="auto")
    timed = server.engine.ms_per_input
    assert set(timed) == {"torch fp32 one", "torch fp32 batch", "onnxruntime fp32 one", "onnxruntime fp32 batch"}
    assert all(value > 0 for value in timed.values())
    for kind, chosen in (("one", server.engine.single), ("batch", server.engine.batch)):  # PyTorch by a margin
        faster = timed[f"torch fp32 {kind}"] * engines.TORCH_MARGIN < timed[f"onnxruntime fp32 {kind}"]
        assert chosen == ("torch fp32" if faster else "onnxruntime fp32")
    # when they differ, a call of one input goes to one and a call of several to the other
    monkeypatch.setattr(engines, "measure", lambda runtimes, config, head: {
        "torch fp32 one": 9.0, "torch fp32 batch": 1.0, "onnxruntime fp32 one": 2.0, "onnxruntime fp32 batch": 5.0})
    assert engines.choose(runs["classify"], Server(runs["classify"], "fp32", Limits(), engine="torch").endpoint
                          .predictor, "auto", "fp32").batch == "torch fp32"
    monkeypatch.setattr(engines, "measure", lambda runtimes, config, head: {  # faster, but not by the margin
        "torch fp32 one": 9.0, "torch fp32 batch": 4.0, "onnxruntime fp32 one": 2.0, "onnxruntime fp32 batch": 5.0})
    assert engines.choose(runs["classify"], Server(runs["classify"], "fp32", Limits(), engine="torch").endpoint
                          .predictor, "auto", "fp32").batch == "onnxruntime fp32"
    monkeypatch.setattr(engines, "measure", lambda runtimes, config, head: {
        "torch fp32 one": 9.0, "torch fp32 batch": 1.0, "onnxruntime fp32 one": 2.0, "onnxruntime fp32 batch": 5.0})
    server = Server(runs["classify"], "fp32", Limits(), engine="auto")
    assert (server.engine.single, server.engine.batch) == ("onnxruntime fp32", "torch fp32")
    model = server.endpoint.predictor.model
    assert isinstance(model, engines.TwoRuntimes) and isinstance(model.single, OnnxModel)
    model.single.session = CountingSession(model.single.session)
    server.endpoint.predict(server.endpoint.parse(["one text"]))
    assert len(model.single.session.shapes) == 1
    server.endpoint.predict(server.endpoint.parse(["one text", "and another, longer text"]))
    assert len(model.single.session.shapes) == 1  # the batch went to PyTorch
    assert "one input -> onnxruntime fp32, batches -> torch fp32" in server.engine.describe()


def test_the_graph_is_exported_once_and_a_damaged_one_again(runs, monkeypatch):
    folder = engines.cached_export(runs["classify"], int8=False)
    made = []
    import bertkit.export as export_module

    original = export_module.export_run
    monkeypatch.setattr(export_module, "export_run", lambda *a, **k: made.append(a) or original(*a, **k))
    assert engines.cached_export(runs["classify"], int8=False) == folder and made == []
    graph = folder / "model.onnx"
    graph.write_bytes(graph.read_bytes()[:1000])  # cut short
    assert engines.cached_export(runs["classify"], int8=False) == folder and len(made) == 1
    load_onnx_model(str(folder))  # whole again


def test_a_graph_that_does_not_match_pytorch_keeps_pytorch_with_a_warning(runs, monkeypatch, tmp_path, capsys):
    import bertkit.export as export_module

    monkeypatch.setenv("BERTKIT_CACHE", str(tmp_path))  # nothing cached: the check runs

    def mismatch(*args, **kwargs):
        raise BertkitError("the ONNX export differs from the PyTorch model by 3.1e-01")

    monkeypatch.setattr(export_module, "check_parity", mismatch)
    server = Server(runs["classify"], "fp32", Limits(), engine="auto")
    assert server.engine.single == server.engine.batch == "torch fp32"
    assert not isinstance(server.endpoint.predictor.model, OnnxModel)
    assert "serving with PyTorch" in capsys.readouterr().err
    with pytest.raises(BertkitError, match="differs"):
        Server(runs["classify"], "fp32", Limits(), engine="onnx")


def test_int8_times_the_int8_graph(runs):
    server = Server(runs["classify"], "int8", Limits(), engine="onnx")
    assert server.engine.single == "onnxruntime int8"
    assert "int8" in json.loads((engines.cached_export(runs["classify"], int8=True) / "onnx_export.json").read_text())[
        "files"]


def test_an_embedding_model_stays_on_pytorch_and_onnx_says_why(minilm_dir):
    from bertkit.serve import load_endpoint

    endpoint = load_endpoint(minilm_dir)
    assert engines.choose(minilm_dir, endpoint.predictor, "auto", "fp32").single == "torch fp32"
    with pytest.raises(BertkitError, match="--engine onnx: a embed model"):
        engines.choose(minilm_dir, endpoint.predictor, "onnx", "fp32")


def test_info_says_which_engine_answers(runs):
    with TestClient(create_app(runs["classify"], "fp32", engine="onnx")) as client:
        info = client.get("/info").json()
        assert info["engine"]["single"] == info["engine"]["batch"] == "onnxruntime fp32"
        assert client.post("/predict", json={"inputs": "a fine film"}).status_code == 200


@pytest.mark.parametrize("args, env, fragment", [(["--engine", "fast"], {}, "--engine fast: use one of auto, torch"),
                                                 ([], {"BERTKIT_ENGINE": "fast"}, "BERTKIT_ENGINE=fast: use one of")])
def test_an_unknown_engine_is_one_line_before_anything_loads(runs, args, env, fragment, monkeypatch):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    result = runner.invoke(app, ["serve", runs["classify"], "--port", "70000", *args])  # said before the port
    assert result.exit_code == 2 and fragment in result.output, result.output
    assert "Traceback" not in result.output


def test_bertkit_plain_turns_both_tricks_off(runs, monkeypatch):
    monkeypatch.setenv("BERTKIT_PLAIN", "serve_engine,onnx_unpadding")
    monkeypatch.delenv("BERTKIT_ENGINE", raising=False)
    assert engines.check_engine(None) == "torch"
    model = load_onnx_model(str(engines.cached_export(runs["classify"], int8=False)))
    model.session = CountingSession(model.session)
    ids = torch.tensor([[101, 2023, 102], [101, 102, 0]])
    model(input_ids=ids, attention_mask=(ids > 0).long())
    assert model.session.shapes == [(2, 3)]  # the padded batch as it is
    monkeypatch.delenv("BERTKIT_PLAIN")
    assert engines.check_engine(None) == "auto"


def test_engine_torch_on_an_onnx_export_is_refused(runs):
    export = engines.cached_export(runs["classify"], int8=False)
    with pytest.raises(BertkitError, match="--engine torch: .* is an ONNX export"):
        Server(str(export), "fp32", Limits(), engine="torch")
    engine = Server(str(export), "fp32", Limits()).engine
    assert engine.single == "onnxruntime fp32"
    # timed at start as a run's engine is (what /info says); the timing also warmed it: +19 % req/s at 8 clients
    assert set(engine.ms_per_input) == {"onnxruntime fp32 one", "onnxruntime fp32 batch"}
    assert all(ms > 0 for ms in engine.ms_per_input.values())


def test_bertkit_engine_torch_in_the_environment_still_serves_an_export(runs, monkeypatch):
    """BERTKIT_ENGINE sets a default, not an --engine: an export it cannot apply to is served, not refused."""
    import socket

    import bertkit.serve as serving

    def free_port() -> int:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return sock.getsockname()[1]

    monkeypatch.setenv("BERTKIT_ENGINE", "torch")
    seen = []

    def stop_before_listening(run_dir, precision, limits, engine):
        seen.append(engine)
        raise KeyboardInterrupt

    monkeypatch.setattr(serving, "create_app", stop_before_listening)
    with pytest.raises(KeyboardInterrupt):
        serving.serve(str(engines.cached_export(runs["classify"], int8=False)), port=free_port())
    assert seen == [None]  # the server reads the environment itself, as a default


@pytest.mark.parametrize("name", ["classify", "ner"])
def test_probabilities_of_an_onnx_model_run_no_torch_kernel(runs, name):
    """Between ONNX Runtime's calls in the model thread, a torch softmax cost a quarter of the requests/s at 8
    clients (bertkit/inference.py `softmax`): the ONNX path computes its probabilities in numpy."""
    from bertkit.tasks import classify, ner

    folder = str(engines.cached_export(runs[name], int8=False))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        if name == "classify":
            probs = classify.predict_probabilities(classify.load_predictor(folder), ["a fine film", "a dull film"],
                                                   None)
        else:
            sentences = [ner.Sentence(words, None, "test") for words in (["Ada", "met", "Alan"], ["Paris"])]
            probs = np.concatenate(ner.predict_word_probabilities(ner.load_predictor(folder), sentences))
    computed = {event.name for event in profile.events()} & {"aten::softmax", "aten::_softmax", "aten::sigmoid"}
    assert not computed and np.allclose(probs.sum(-1), 1, atol=1e-5)


def test_probabilities_match_torch_softmax_and_sigmoid_at_any_logit():
    from bertkit.tasks.classify import probabilities

    logits = np.array([[0.3, -1.2, 2.0], [-1000.0, 0.0, 1000.0], [5.0, 5.0, 5.0]], dtype=np.float32)
    expected = {"single": torch.from_numpy(logits).softmax(-1), "multi": torch.from_numpy(logits).sigmoid()}
    for kind, reference in expected.items():
        with np.errstate(over="raise", invalid="raise", divide="raise"):  # no overflow on the way
            got = probabilities(logits, kind)
        assert got.dtype == np.float32 and np.allclose(got, reference.numpy(), atol=1e-6), kind
    assert np.allclose(probabilities(logits, "multi", [2.0, 2.0, 2.0]), torch.sigmoid(torch.from_numpy(logits) / 2))
    assert np.array_equal(probabilities(logits, "regression"), logits)
