"""Pushing to the Hub and the model card, end to end against a fake Hub on 127.0.0.1 (tests/hub_server.py).

The real huggingface_hub client talks real HTTP to the fake; files are downloaded back with the client and the
model is reloaded with stock transformers. A guard fails any test that connects to a non-loopback address.
"""

from __future__ import annotations

import ipaddress
import json
import shutil
import socket
import struct
import time
import zlib
from pathlib import Path

import pytest
import torch
import yaml
from huggingface_hub import ModelCard, constants, hf_hub_download, snapshot_download
from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError
from huggingface_hub.utils import close_session
from transformers import AutoModelForSequenceClassification, AutoTokenizer, BertConfig, BertForSequenceClassification
from transformers import BertTokenizer

from bertkit.errors import BertkitError
from bertkit.hub import NO_CHANGES, explain, push_model, select_files
from bertkit.model_card import read_metrics, render_model_card, task_of
from bertkit.rundir import write_record

from hub_server import FakeHub, HubError

TOKEN = "hf_test_write_token"
REPO = "tester/tiny-sentiment"
UPLOADED = ["bertkit_config.yaml", "config.json", "metrics.json", "model.safetensors", "tokenizer.json",
            "tokenizer_config.json", "training_curve.png", "vocab.txt"]  # fmt: skip
JUNK = ["checkpoint-10/optimizer.pt", "checkpoint-10/model.safetensors", "training_args.bin", "optimizer.pt",
        "pytorch_model.bin", "token", "runs/events.png"]  # fmt: skip
# huggingface_hub's legacy LFS upload passes a file object as `data=`, which httpx2 deprecates; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>':DeprecationWarning")

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "movie", "was", "great", "bad", "!", ".", "i", "it",
         "liked"] + list("abcdefghijklmnopqrstuvwxyz") + ["##" + c for c in "abcdefghijklmnopqrstuvwxyz"]  # fmt: skip


# ---------------------------------------------------------------- guards and fixtures


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: resolving it is already going out


@pytest.fixture(autouse=True)
def no_internet(monkeypatch):
    """Fail the test if anything connects beyond loopback. The error is recorded as well as raised: client code
    swallows some connection errors (e.g. its agent-registry fetch), which must not hide the attempt."""
    attempts: list[object] = []
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def check(sock: socket.socket, address) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(str(address[0])):
            attempts.append(address)
            raise OSError(f"test tried to connect to {address}: only loopback is allowed")

    monkeypatch.setattr(socket.socket, "connect", lambda s, a: (check(s, a), real_connect(s, a))[1])
    monkeypatch.setattr(socket.socket, "connect_ex", lambda s, a: (check(s, a), real_connect_ex(s, a))[1])
    yield attempts
    assert not attempts, f"non-loopback connections attempted: {attempts}"


def point_client_at(monkeypatch, endpoint: str, home: Path) -> None:
    """Make huggingface_hub talk only to `endpoint`. It reads the environment at import, so the module constants
    are patched too; HUGGINGFACE_CO_URL_TEMPLATE must follow ENDPOINT or hf_hub_url keeps the public host."""
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(var, raising=False)
    env = {"HF_ENDPOINT": endpoint, "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_XET": "1", "HF_HOME": str(home)}
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    patches = {
        "ENDPOINT": endpoint,
        "HUGGINGFACE_CO_URL_TEMPLATE": endpoint + "/{repo_id}/resolve/{revision}/{filename}",
        "HF_HUB_OFFLINE": False,
        "HF_HUB_DISABLE_XET": True,
        "HF_HUB_DISABLE_TELEMETRY": True,
        "HF_TOKEN_PATH": str(home / "token"),  # never the developer's real login
        "HF_STORED_TOKENS_PATH": str(home / "stored_tokens"),
        "HF_HUB_CACHE": str(home / "hub"),
    }
    for name, value in patches.items():
        monkeypatch.setattr(constants, name, value)


@pytest.fixture
def make_hub(monkeypatch, tmp_path):
    """Start a fake Hub (options as FakeHub's) and point the client at it; stopped after the test."""
    servers: list[FakeHub] = []

    def start(**options) -> FakeHub:
        server = FakeHub(token=TOKEN, **options).start()
        point_client_at(monkeypatch, server.endpoint, tmp_path / "hf_home")
        servers.append(server)
        return server

    yield start
    close_session()  # the shared httpx client keeps connections to a server that is going away
    for server in servers:
        server.stop()
        assert not server.bugs, f"the fake Hub itself failed: {server.bugs}"


@pytest.fixture
def hub(make_hub) -> FakeHub:
    return make_hub()


def _png(width: int = 2, height: int = 2) -> bytes:
    """A valid tiny RGB PNG, without an imaging library."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def _write_model_dir(out: Path) -> None:
    """A tiny classifier as a bertkit run leaves it: weights, tokenizer, config, metrics, curve, and junk."""
    out.mkdir(parents=True)
    (out / "vocab.txt").write_text("\n".join(WORDS) + "\n", encoding="utf-8")
    tokenizer = BertTokenizer(vocab=str(out / "vocab.txt"))  # vocab=, not vocab_file= (docs/notes.md)
    config = BertConfig(vocab_size=len(WORDS), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=64, id2label={0: "neg", 1: "pos"},
                        label2id={"neg": 0, "pos": 1})  # fmt: skip
    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "metrics.json").write_text(json.dumps({"eval": {"eval_accuracy": 0.875, "eval_f1": 0.8571,
                                                           "eval_loss": 0.41, "eval_runtime": 1.2}}))  # fmt: skip
    recipe = {"recipe": "classify", "model": "bert-base-uncased", "data": {"train": "data/train.csv",
              "validation": "data/dev.csv"}, "llrd": 0.9, "train": {"learning_rate": 3.0e-5, "num_train_epochs": 2,
              "per_device_train_batch_size": 8, "gradient_accumulation_steps": 2, "bf16": True, "hub_token": None}}
    (out / "bertkit_config.yaml").write_text(yaml.safe_dump(recipe))  # fmt: skip
    (out / "training_curve.png").write_bytes(_png())
    for junk in JUNK:
        (out / junk).parent.mkdir(parents=True, exist_ok=True)
        (out / junk).write_bytes(b"must not be uploaded")
    write_record(out, "classify")  # last, as a finished run writes it: push refuses a run without one


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("run") / "model"
    _write_model_dir(out)
    return out


def _snapshot(directory: Path) -> dict[str, tuple[int, int]]:
    """(size, mtime_ns) of every path under `directory`: proof that a push wrote nothing there."""
    return {str(p.relative_to(directory)): (p.stat().st_size, p.stat().st_mtime_ns) for p in directory.rglob("*")}


def _copy(model_dir: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(model_dir, tmp_path / "model_copy", symlinks=False))


# ---------------------------------------------------------------- push, download back, reload


def test_push_uploads_only_model_files_and_they_round_trip(hub, model_dir, tmp_path):
    before = _snapshot(model_dir)
    url = push_model(model_dir, REPO, token=TOKEN, endpoint=hub.endpoint)

    assert url.startswith(f"{hub.endpoint}/{REPO}/commit/")
    assert _snapshot(model_dir) == before, "push must not write into the model dir"
    assert not (model_dir / "README.md").exists()
    remote = hub.files(REPO)
    assert sorted(remote) == sorted(UPLOADED + ["README.md", ".gitattributes"])
    assert not any(name in remote for name in JUNK)

    local = Path(snapshot_download(REPO, endpoint=hub.endpoint, token=TOKEN, cache_dir=tmp_path / "dl"))
    for name in UPLOADED:
        assert (local / name).read_bytes() == (model_dir / name).read_bytes(), name


def test_downloaded_model_loads_in_stock_transformers_with_same_logits(hub, model_dir, tmp_path):
    push_model(model_dir, REPO, token=TOKEN, endpoint=hub.endpoint)
    local = snapshot_download(REPO, endpoint=hub.endpoint, token=TOKEN, cache_dir=tmp_path / "dl")

    original = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    downloaded = AutoModelForSequenceClassification.from_pretrained(local).eval()
    tokenizer = AutoTokenizer.from_pretrained(local)
    inputs = tokenizer(["the movie was great !", "it was bad ."], return_tensors="pt", padding=True)
    assert inputs.input_ids[0].tolist() == [2, 5, 6, 7, 8, 10, 3]  # the vocab survived the trip
    assert type(downloaded).__name__ == "BertForSequenceClassification"
    assert downloaded.config.id2label == {0: "neg", 1: "pos"}
    with torch.no_grad():
        assert torch.allclose(original(**inputs).logits, downloaded(**inputs).logits)


def test_generated_readme_has_valid_front_matter(hub, model_dir, tmp_path):
    push_model(model_dir, REPO, token=TOKEN, endpoint=hub.endpoint)
    local = Path(snapshot_download(REPO, endpoint=hub.endpoint, token=TOKEN, cache_dir=tmp_path / "dl"))
    card = ModelCard((local / "README.md").read_text(encoding="utf-8"))

    assert hub.calls("POST", "/api/validate-yaml") >= 1  # the client had the fake Hub validate it too
    assert card.data.pipeline_tag == "text-classification"
    assert card.data.library_name == "transformers"
    assert {"bertkit", "bert", "text-classification"} <= set(card.data.tags)
    assert card.data.base_model == "bert-base-uncased"
    results = {r.metric_type: r.metric_value for r in card.data.eval_results}
    assert results == {"accuracy": 0.875, "f1": 0.8571, "loss": 0.41}
    assert card.data.model_name == "tiny-sentiment"
    assert f'AutoModelForSequenceClassification.from_pretrained("{REPO}")' in card.text
    assert "![Training curve](training_curve.png)" in card.text

    # The "How to use" snippet runs as written, pointed at the downloaded copy instead of the Hub.
    code = card.text.split("```python\n", 1)[1].split("```", 1)[0]
    exec(code.replace(REPO, str(local)), {})


def test_repush_unchanged_makes_no_commit_and_a_change_does(hub, model_dir, tmp_path):
    push_model(model_dir, REPO, token=TOKEN, endpoint=hub.endpoint)
    commits = hub.commit_count(REPO)

    assert push_model(model_dir, REPO, token=TOKEN, endpoint=hub.endpoint) == NO_CHANGES
    assert hub.commit_count(REPO) == commits

    changed = _copy(model_dir, tmp_path)
    (changed / "metrics.json").write_text(json.dumps({"eval_accuracy": 0.9}))
    write_record(changed, "classify")  # as a new run leaves it (a hand-edited metrics.json alone is refused)
    url = push_model(changed, REPO, token=TOKEN, endpoint=hub.endpoint)
    assert url != NO_CHANGES and hub.commit_count(REPO) == commits + 1
    assert json.loads(hub.files(REPO)["metrics.json"]) == {"eval_accuracy": 0.9}
    assert "| accuracy | 0.9 |" in hub.files(REPO)["README.md"].decode()  # the card follows the metrics


def test_existing_readme_is_uploaded_as_is(hub, model_dir, tmp_path):
    own = _copy(model_dir, tmp_path)
    (own / "README.md").write_text("---\nlicense: mit\n---\n# Mine\n")
    push_model(own, REPO, token=TOKEN, endpoint=hub.endpoint)
    assert hub.files(REPO)["README.md"] == b"---\nlicense: mit\n---\n# Mine\n"

    (own / "README.md").write_text("---\nmodel-index: 5\n---\n# Broken\n")
    with pytest.raises(BertkitError, match="README.md has invalid metadata .*model-index.*delete README.md"):
        push_model(own, REPO, token=TOKEN, endpoint=hub.endpoint)


def test_repo_name_without_namespace_goes_to_the_users_namespace(hub, model_dir):
    assert push_model(model_dir, "bare-name", token=TOKEN, endpoint=hub.endpoint).startswith(hub.endpoint)
    readme = hub.files("tester/bare-name")["README.md"].decode()
    assert 'from_pretrained("tester/bare-name")' in readme


def test_revision_creates_and_pushes_a_branch(hub, model_dir, tmp_path):
    url = push_model(model_dir, REPO, revision="dev", token=TOKEN, endpoint=hub.endpoint)

    assert url.startswith(f"{hub.endpoint}/{REPO}/commit/")
    assert "config.json" in hub.files(REPO, "dev")
    assert sorted(hub.files(REPO, "main")) == [".gitattributes"]  # main untouched
    path = hf_hub_download(REPO, "config.json", revision="dev", endpoint=hub.endpoint, cache_dir=tmp_path / "d")
    assert Path(path).read_bytes() == (model_dir / "config.json").read_bytes()
    assert push_model(model_dir, REPO, revision="dev", token=TOKEN, endpoint=hub.endpoint) == NO_CHANGES


def test_lfs_multipart_upload_without_xet(make_hub, model_dir, tmp_path):
    # Files of 1 kB or more go through LFS; objects above 10 kB in parts of 10 kB (model.safetensors: ~32 kB).
    hub = make_hub(lfs_threshold=1_000, part_size=10_000)
    size = (model_dir / "model.safetensors").stat().st_size
    assert size > 3 * 10_000

    push_model(model_dir, REPO, token=TOKEN, endpoint=hub.endpoint)
    assert hub.calls("POST", f"/{REPO}.git/info/lfs/objects/batch") == 1
    assert hub.calls("PUT", "/__lfs/") >= -(-size // 10_000) + 1  # the parts, plus basic PUTs of smaller files
    assert any(p.endswith("/complete") for m, p in hub.log if m == "POST")
    assert hub.calls("POST", f"/{REPO}.git/info/lfs/objects/verify") >= 2
    local = Path(snapshot_download(REPO, endpoint=hub.endpoint, token=TOKEN, cache_dir=tmp_path / "dl"))
    for name in UPLOADED:
        assert (local / name).read_bytes() == (model_dir / name).read_bytes(), name

    puts = hub.calls("PUT", "/__lfs/")
    assert push_model(model_dir, REPO, token=TOKEN, endpoint=hub.endpoint) == NO_CHANGES
    assert hub.calls("PUT", "/__lfs/") == puts  # stored objects are not sent again


def test_default_xet_path_pushes_regular_files_and_skips_unchanged(hub, model_dir, monkeypatch):
    """With hf_xet on (what users get), upload_folder takes its pipelined path; a fake answering "regular" for
    every file is enough to exercise it, and its no-op detection must give "no changes" too."""
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", False)
    monkeypatch.delenv("HF_HUB_DISABLE_XET")
    assert push_model(model_dir, REPO, token=TOKEN, endpoint=hub.endpoint).startswith(hub.endpoint)
    commits = hub.commit_count(REPO)
    assert push_model(model_dir, REPO, token=TOKEN, endpoint=hub.endpoint) == NO_CHANGES
    assert hub.commit_count(REPO) == commits
    assert sorted(hub.files(REPO)) == sorted(UPLOADED + ["README.md", ".gitattributes"])


# ---------------------------------------------------------------- tokens


def test_bad_token_is_a_one_line_error_that_says_how_to_pass_one(hub, model_dir):
    with pytest.raises(BertkitError, match="token") as info:
        push_model(model_dir, REPO, token="hf_wrong", endpoint=hub.endpoint)
    assert "--token" in str(info.value) and "\n" not in str(info.value)
    assert "hf_wrong" not in str(info.value)
    assert REPO not in hub.repos


def test_token_from_env_then_saved_login_then_none(hub, model_dir, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    assert push_model(model_dir, REPO, endpoint=hub.endpoint).startswith(hub.endpoint)

    monkeypatch.delenv("HF_TOKEN")
    Path(constants.HF_TOKEN_PATH).parent.mkdir(parents=True, exist_ok=True)
    Path(constants.HF_TOKEN_PATH).write_text(TOKEN)
    assert push_model(model_dir, REPO, endpoint=hub.endpoint) == NO_CHANGES

    Path(constants.HF_TOKEN_PATH).unlink()
    requests = len(hub.log)
    with pytest.raises(BertkitError, match="no Hub token found: pass --token, set HF_TOKEN"):
        push_model(model_dir, REPO, endpoint=hub.endpoint)
    assert len(hub.log) == requests  # refused before any request


def test_bad_token_from_env_names_the_env_var(hub, model_dir, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_expired")
    with pytest.raises(BertkitError, match="HF_TOKEN environment variable"):
        push_model(model_dir, REPO, endpoint=hub.endpoint)


def test_namespace_without_write_access(hub, model_dir):
    with pytest.raises(BertkitError, match=r"may not write to someone-else/model \(403"):
        push_model(model_dir, "someone-else/model", token=TOKEN, endpoint=hub.endpoint)


def test_token_in_a_config_is_never_published(hub, model_dir, tmp_path):
    leaky = _copy(model_dir, tmp_path)
    recipe = yaml.safe_load((leaky / "bertkit_config.yaml").read_text())
    recipe["train"]["hub_token"] = "hf_" + "a" * 34
    (leaky / "bertkit_config.yaml").write_text(yaml.safe_dump(recipe))
    with pytest.raises(BertkitError, match="bertkit_config.yaml line .* token"):
        push_model(leaky, REPO, token=TOKEN, endpoint=hub.endpoint)
    assert hub.log == []


# ---------------------------------------------------------------- other failures


def test_unreachable_endpoint_fails_fast(model_dir, monkeypatch, tmp_path):
    with socket.socket() as sock:  # a port that was just free: nothing listens there
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    point_client_at(monkeypatch, dead, tmp_path)
    started = time.monotonic()
    with pytest.raises(BertkitError, match=f"cannot reach the Hub at {dead}"):
        push_model(model_dir, REPO, token=TOKEN, endpoint=dead)
    assert time.monotonic() - started < 5, "no retry/backoff on a refused connection"


def test_silent_endpoint_times_out(model_dir, monkeypatch, tmp_path):
    """A host that accepts the connection and never answers (a stuck proxy) must not hang the push."""
    monkeypatch.setattr("bertkit.hub._PROBE_TIMEOUT_S", 0.5)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()  # the kernel completes the handshake; nobody ever reads or answers
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}"
        point_client_at(monkeypatch, endpoint, tmp_path)
        with pytest.raises(BertkitError, match="cannot reach the Hub at .*(?i:timeout|timed out)"):
            push_model(model_dir, REPO, token=TOKEN, endpoint=endpoint)


def test_offline_mode_says_so(hub, model_dir, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(BertkitError, match="unset HF_HUB_OFFLINE"):
        push_model(model_dir, REPO, token=TOKEN, endpoint=hub.endpoint)


@pytest.mark.parametrize("remove", ["dir", "config.json", "model.safetensors"])
def test_missing_model_dir_or_files(model_dir, tmp_path, remove):
    broken = _copy(model_dir, tmp_path)
    if remove == "dir":
        broken = tmp_path / "nope"
    else:
        (broken / remove).unlink()
    with pytest.raises(BertkitError, match={"dir": "does not exist", "config.json": "no config.json",
                                            "model.safetensors": r"pickle weights \(pytorch_model.bin\)"}[remove]):
        push_model(broken, REPO, token=TOKEN, endpoint="http://127.0.0.1:9")  # fmt: skip


def test_failed_push_leaves_dir_untouched_and_reruns(hub, model_dir):
    hub.fail_next["commit"] = HubError(422, "commit rejected for the test")
    before = _snapshot(model_dir)
    with pytest.raises(BertkitError, match="422: commit rejected for the test"):
        push_model(model_dir, REPO, token=TOKEN, endpoint=hub.endpoint)
    assert _snapshot(model_dir) == before
    assert sorted(hub.files(REPO)) == [".gitattributes"]

    assert push_model(model_dir, REPO, token=TOKEN, endpoint=hub.endpoint).startswith(hub.endpoint)
    assert "model.safetensors" in hub.files(REPO)


def test_bad_branch_name_is_reported(hub, model_dir):
    with pytest.raises(BertkitError, match="Invalid reference name"):
        push_model(model_dir, REPO, revision="bad..name", token=TOKEN, endpoint=hub.endpoint)


def test_client_errors_on_download_and_their_messages(hub, model_dir, tmp_path):
    """The fake answers missing repos/revisions/files the way the client expects, and bertkit words them."""
    push_model(model_dir, REPO, token=TOKEN, endpoint=hub.endpoint)
    kwargs = {"endpoint": hub.endpoint, "token": TOKEN, "cache_dir": tmp_path / "dl"}
    with pytest.raises(RepositoryNotFoundError) as missing_repo:
        hf_hub_download("tester/missing", "config.json", **kwargs)
    with pytest.raises(RevisionNotFoundError) as missing_rev:
        hf_hub_download(REPO, "config.json", revision="nope", **kwargs)
    with pytest.raises(Exception, match="Entry Not Found"):
        hf_hub_download(REPO, "optimizer.pt", **kwargs)

    words = {"endpoint": hub.endpoint, "source": "the token passed with --token"}
    assert "repo tester/missing not found" in explain(missing_repo.value, repo_id="tester/missing", revision=None,
                                                      **words)  # fmt: skip
    assert "branch 'nope' not found" in explain(missing_rev.value, repo_id=REPO, revision="nope", **words)


def test_guard_blocks_non_loopback(no_internet):
    with pytest.raises(OSError, match="only loopback"):
        socket.create_connection(("192.0.2.1", 443), timeout=1)  # TEST-NET-1: never routable
    assert no_internet == [("192.0.2.1", 443)]
    no_internet.clear()  # seen; let the guard's teardown pass


# ---------------------------------------------------------------- model card, offline


def test_select_files_keeps_model_files_only(model_dir):
    assert select_files(model_dir) == sorted(UPLOADED)


@pytest.mark.parametrize(
    ("architecture", "tag", "auto_class"),
    [
        ("BertForSequenceClassification", "text-classification", "AutoModelForSequenceClassification"),
        ("BertkitForTokenClassification", "token-classification", "AutoModelForTokenClassification"),
        ("BertForQuestionAnswering", "question-answering", "AutoModelForQuestionAnswering"),
        ("BertForMaskedLM", "fill-mask", "AutoModelForMaskedLM"),
        ("BertkitForPreTraining", "fill-mask", "AutoModelForPreTraining"),
        ("BertForMultipleChoice", "multiple-choice", "AutoModelForMultipleChoice"),
        ("BertModel", "feature-extraction", "AutoModel"),
    ],
)
def test_card_for_each_head_from_config_alone(tmp_path, architecture, tag, auto_class):
    config = {"architectures": [architecture], "model_type": "bert", "id2label": {"0": "LABEL_0", "1": "LABEL_1"}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    text = render_model_card(tmp_path, repo_id="me/m")
    card = ModelCard(text)

    assert task_of({"architectures": [architecture]}) == (tag, auto_class)
    assert card.data.pipeline_tag == tag and "model-index" not in text  # no metrics.json: no results
    assert f"from transformers import AutoTokenizer, {auto_class}\n" in text
    assert "import bertkit" not in text and "trust_remote_code" not in text
    for absent in ("## Results", "## Training hyperparameters", "## Training data", "training_curve.png"):
        assert absent not in text
    assert ("## Labels" in text) == (tag in ("text-classification", "token-classification"))
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    compile(code, "snippet", "exec")  # the snippet is valid Python


def test_card_sections_from_run_files(model_dir):
    text = render_model_card(model_dir, language=["en"], datasets=["imdb"], license="mit")
    card = ModelCard(text)

    assert card.data.language == ["en"] and card.data.license == "mit" and card.data.datasets == ["imdb"]
    assert card.data.eval_results[0].dataset_type == "imdb"
    for row in ("| learning_rate | 3e-05 |", "| gradient_accumulation_steps | 2 |", "| precision | bf16 |",
                "| llrd (layer-wise LR decay) | 0.9 |", "| accuracy | 0.875 |", "| 1 | pos |"):  # fmt: skip
        assert row in text
    assert "runtime" not in text  # timing is not a metric
    assert "- validation: `data/dev.csv`" in text
    assert "<namespace>/<model-name>" in text  # no repo id given: a placeholder in the snippet
    assert ModelCard(render_model_card(model_dir)).data.language is None  # none given, none in the config
    assert render_model_card(model_dir, language=["en"], datasets=["imdb"], license="mit") == text  # deterministic


def test_flat_metrics_and_broken_optional_files(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["BertForSequenceClassification"]}))
    (tmp_path / "metrics.json").write_text(json.dumps({"eval_accuracy": 0.5, "epoch": 3.0, "note": "x"}))
    assert read_metrics(tmp_path / "metrics.json") == {"accuracy": 0.5}
    (tmp_path / "bertkit_config.yaml").write_text("train: [unclosed\n")
    with pytest.raises(BertkitError, match="bertkit_config.yaml"):
        render_model_card(tmp_path)
