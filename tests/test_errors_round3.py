"""Issue 44, "poor errors": each case through the `bertkit` command, as a user meets it — one `error:` line
that names the file / option / key and the fix, exit 2, no traceback, and nothing loaded or written first when the
mistake can be seen before. The cases "look further" found beyond the issue's list are marked (further)."""

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import torch
import transformers
from typer.testing import CliRunner

from bertkit.cli import app
from helpers import run_in_process, tiny_stock_head, write_csv

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"
SCRIPT = Path(sys.executable).parent / "bertkit"
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "TOKENIZERS_PARALLELISM": "false",
       "OMP_NUM_THREADS": "1"}
runner = CliRunner()

pytestmark = [pytest.mark.usefixtures("one_thread"),
              pytest.mark.skipif(not SCRIPT.exists(), reason="bertkit is not installed in this environment")]


def bertkit(*args, cwd=ROOT, timeout=300) -> subprocess.CompletedProcess:
    """The command in this process (helpers.run_in_process); `serve`, which binds a port and runs until stopped, as
    the installed command in a subprocess with a timeout."""
    if args[0] != "serve":
        return run_in_process(*args, cwd=cwd)
    return subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True, text=True, cwd=cwd, env=ENV,
                          timeout=timeout)


def error_line(result: subprocess.CompletedProcess, *fragments: str, whole: bool = True) -> str:
    """The command failed with exit 2 and one `error:` line holding every fragment. `whole`: that line is all of
    stderr (a command that trains may log progress before it, but the error is still its one last line)."""
    assert result.returncode == 2, (result.returncode, result.stderr[-3000:])
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    assert [line for line in lines if line.startswith("error:")] == lines[-1:], result.stderr[-3000:]
    if whole:
        assert len(lines) == 1, result.stderr[-3000:]
    for fragment in fragments:
        assert fragment in lines[-1], (fragment, lines[-1])
    return lines[-1]


def train_run(output_dir: Path, model_dir: str, *overrides: str) -> str:
    """A tiny classify run, trained in this process (the setup, not what is tested)."""
    train = DATA / "en_sentiment/train.csv"
    result = runner.invoke(app, ["run", "classify", f"model={model_dir}", f"data.train={train}",
                                 f"output_dir={output_dir}", "precision=fp32", "train.max_steps=2", "--quiet",
                                 *overrides])
    assert result.exit_code == 0, result.output
    return str(output_dir)


@pytest.fixture(scope="module")
def classifier(tmp_path_factory, minilm_dir):
    """A stock classifier directory (predict / serve take it as it is): nothing trained."""
    labels = {"id2label": {0: "negative", 1: "positive"}, "label2id": {"negative": 0, "positive": 1}}
    return tiny_stock_head(transformers.BertForSequenceClassification, tmp_path_factory.mktemp("round3") / "classify",
                           minilm_dir, **labels)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ------------------------------------------------------------------------------------------------ serve

def test_serve_on_a_port_in_use_says_so_before_loading_the_model(classifier):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        result = bertkit("serve", classifier, "--port", port)
    error_line(result, f"port {port} is in use", "choose another --port")
    assert "serving" not in result.stdout  # refused before the model loaded


@pytest.mark.parametrize("option, fragments", [
    (["--port", "70000"], ["--port 70000", "1..65535"]),  # (further) uvicorn served on 70000 % 65536 = 4464
    (["--port", "-1"], ["--port -1", "1..65535"]),  # (further)
    (["--host", "192.0.2.1"], ["--host 192.0.2.1 is not an address of this machine", "127.0.0.1"]),  # (further)
    (["--host", "no-such-host.invalid"], ["--host no-such-host.invalid", "0.0.0.0"]),  # (further)
])
def test_serve_refuses_a_port_or_host_it_cannot_listen_on(classifier, option, fragments):
    """(further) These reached uvicorn after the model loaded: exit 3 with uvicorn's own message, or a server on
    another port than the one asked."""
    result = bertkit("serve", classifier, *option, timeout=120)
    error_line(result, *fragments)
    assert "serving" not in result.stdout


@contextlib.contextmanager
def served(model_dir: str):
    """`bertkit serve` as a user starts it, on a free loopback port, stopped (SIGINT) on exit."""
    port = free_port()
    process = subprocess.Popen([str(SCRIPT), "serve", model_dir, "--port", str(port), "--precision", "fp32"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert process.poll() is None, process.communicate()[1][-2000:]
            assert time.monotonic() < deadline, "the server did not start"
            with contextlib.suppress(OSError):
                urllib.request.urlopen(f"{url}/health", timeout=2)
                break
            time.sleep(0.3)
        yield url
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


def post(url: str, body) -> tuple[int, dict]:
    request = urllib.request.Request(f"{url}/predict", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_serve_answers_an_empty_text_422_as_training_refuses_it(classifier):
    with served(classifier) as url:
        assert post(url, {"inputs": "a fine film"})[0] == 200
        for inputs, where in (("", "inputs[0]"), (["a fine film", "   "], "inputs[1]"),
                              ({"text": "", "text_pair": "x"}, "inputs[0].text")):
            status, answer = post(url, {"inputs": inputs})
            assert status == 422, (inputs, answer)
            assert f"{where} is empty" in answer["error"] and "training refuses" in answer["error"], answer


# ------------------------------------------------------------------------------------------------ distill

def test_distill_takes_a_lora_adapter_teacher(tmp_path, tiny_model_dir):
    teacher = train_run(tmp_path / "teacher", tiny_model_dir, "lora.enabled=true", "lora.merge=false")
    assert (Path(teacher) / "adapter_config.json").is_file() and not (Path(teacher) / "model.safetensors").exists()
    result = bertkit("run", "distill", f"teacher={teacher}", f"data.train={DATA / 'en_sentiment/train.csv'}",
                     f"output_dir={tmp_path / 'student'}", "precision=fp32", "train.max_steps=1", "--quiet")
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "student" / "model.safetensors").is_file()
    assert "LoRA adapter" not in result.stderr


def test_predict_on_an_adapter_run_shows_no_load_report_of_its_base_model(tmp_path, tiny_model_dir):
    """(further) The base model's head is 'MISSING ... newly initialized, consider training' on every predict of a
    lora.merge=false run: the adapter brings the head, so the warning was false (and a FutureWarning of peft's)."""
    run_dir = train_run(tmp_path / "adapter", tiny_model_dir, "lora.enabled=true", "lora.merge=false")
    texts = write_csv(tmp_path / "texts.csv", ["text"], [["a fine film"], ["a dull film"]])
    result = bertkit("predict", run_dir, texts, "-o", tmp_path / "out.jsonl")
    assert result.returncode == 0, result.stderr
    assert "MISSING" not in result.stderr and "FutureWarning" not in result.stderr, result.stderr


# ------------------------------------------------------------------------------------------------ encodings

@pytest.mark.parametrize("name, encode, fragments", [
    ("corpus.txt", lambda text: text.encode("gb18030"), ["line 1", "GBK/GB18030", "iconv -f GB18030"]),
    ("corpus.txt", lambda text: text.encode("utf-16"), ["offset 0", "UTF-16"]),
    # a GBK CSV: also datasets' own "Failed to read file ..." line on stderr before the error (further)
    ("corpus.csv", lambda text: ("text\n" + "\n".join(f'"{line}"' for line in text.splitlines() if line.strip())
                                 ).encode("gbk", "replace"), ["line 2", "GBK/GB18030"]),
])
def test_an_mlm_corpus_in_gbk_or_utf16_is_named_with_its_encoding(tmp_path, tiny_zh_model_dir, name, encode,
                                                                   fragments):
    corpus = tmp_path / name
    corpus.write_bytes(encode((DATA / "corpus/zh_legal.txt").read_text(encoding="utf-8")[:3000]))
    result = bertkit("run", "mlm", f"model={tiny_zh_model_dir}", f"data.train={corpus}",
                     f"output_dir={tmp_path / 'run'}", "train.max_steps=1", "--quiet")
    message = error_line(result, str(corpus), "is not UTF-8", *fragments)
    assert "latin1" not in message  # iconv -f latin1 turns Chinese into mojibake that trains silently


def test_the_encoding_guess_takes_a_sample_cut_inside_a_character():
    from bertkit.datafiles import encoding_guess

    data = "合同履行过程中".encode("gb18030")
    assert "GB18030" in encoding_guess(data[:-1])  # the corpus reader guesses from a 64 KiB sample


# ------------------------------------------------------------------------------------------------ resume

def test_resume_from_a_checkpoint_with_pickled_state_torch_refuses(tmp_path, tiny_model_dir):
    """A checkpoint whose optimizer / scheduler state holds a pickled object torch's weights_only load refuses:
    "unexpected UnpicklingError" with torch's text before; now the file and the fix, as model= says it for pickles."""
    run_dir = Path(train_run(tmp_path / "run", tiny_model_dir))
    (run_dir / "bertkit_run.json").unlink()  # interrupted after its checkpoint: resume=true continues it
    for kept in run_dir.glob("checkpoint-*"):
        shutil.rmtree(kept)
    checkpoint = run_dir / "checkpoint-1"
    checkpoint.mkdir()
    shutil.copy(run_dir / "model.safetensors", checkpoint)
    shutil.copy(run_dir / "config.json", checkpoint)
    control = {"should_epoch_stop": False, "should_evaluate": False, "should_log": False, "should_save": True,
               "should_training_stop": False}
    (checkpoint / "trainer_state.json").write_text(json.dumps({
        "global_step": 1, "max_steps": 2, "epoch": 0.04, "train_batch_size": 16, "logging_steps": 10,
        "eval_steps": 500, "save_steps": 500, "num_train_epochs": 1, "log_history": [],
        "stateful_callbacks": {"TrainerControl": {"args": control, "attributes": {}}}}))
    torch.save({"state": {}, "param_groups": [], "saved_with": argparse.Namespace(lr=1)}, checkpoint / "optimizer.pt")
    torch.save({"last_epoch": 1, "saved_with": argparse.Namespace(lr=1)}, checkpoint / "scheduler.pt")
    result = bertkit("run", "classify", f"model={tiny_model_dir}", f"data.train={DATA / 'en_sentiment/train.csv'}",
                     f"output_dir={run_dir}", "precision=fp32", "train.max_steps=2", "resume=true", "--quiet")
    message = error_line(result, str(checkpoint), "optimizer.pt", "argparse.Namespace", "unpickling can run any code",
                         "resume from a checkpoint")
    assert "UnpicklingError" not in message and "unexpected" not in message


def test_resume_given_a_file_says_it_is_a_file(tmp_path, tiny_model_dir):
    result = bertkit("run", "classify", f"model={tiny_model_dir}", f"data.train={DATA / 'en_sentiment/train.csv'}",
                     f"output_dir={tmp_path / 'run'}", f"resume={DATA / 'en_sentiment/dev.csv'}")
    message = error_line(result, "dev.csv is a file, not a checkpoint folder", "checkpoint-* directory")
    assert "does not exist" not in message


# ------------------------------------------------------------------------------------------------ numbers

@pytest.mark.parametrize("command, fragments", [
    (["predict", "{model}", "{texts}", "-o", "{out}", "--batch-size", "0"], ["--batch-size 0", "at least 1"]),
    (["predict", "{model}", "{texts}", "-o", "{out}", "--batch-size", "-3"], ["--batch-size -3", "at least 1"]),
    (["evaluate", "{model}", "{labelled}", "--batch-size", "0"], ["--batch-size 0", "at least 1"]),  # (further)
    (["inspect", "{labelled}", "--model", "{model}", "--max-length", "0"], ["--max-length 0", "at least 8"]),
    (["inspect", "{labelled}", "--model", "{model}", "--max-length", "-5"], ["--max-length -5", "at least 8"]),
])
def test_a_number_option_that_cannot_work_is_refused(tmp_path, classifier, command, fragments):
    paths = {"model": classifier, "out": tmp_path / "out.jsonl",
             "texts": write_csv(tmp_path / "texts.csv", ["text"], [["a fine film"]]),
             "labelled": write_csv(tmp_path / "labelled.csv", ["text", "label"],
                                   [["a fine film", "positive"], ["a dull film", "negative"]])}
    result = bertkit(*[part.format(**paths) for part in command])
    message = error_line(result, *fragments)
    assert "stride" not in message
    assert not (tmp_path / "out.jsonl").exists()


# ------------------------------------------------------------------------------------------------ runs, ner, onnx

@pytest.mark.parametrize("other, fragments", [
    ("missing", ["missing does not exist"]),
    ("file.csv", ["file.csv is a file, not a run directory"]),
    ("folder", ["folder is not a bertkit run"]),
])
def test_runs_with_two_paths_names_the_one_that_is_not_a_run(tmp_path, tiny_model_dir, other, fragments):
    run_dir = train_run(tmp_path / "a run", tiny_model_dir)
    (tmp_path / "file.csv").write_text("text\nx\n")
    (tmp_path / "folder").mkdir()
    result = bertkit("runs", run_dir, tmp_path / other)
    error_line(result, *fragments, "compares two run directories")
    result = bertkit("runs", tmp_path / other, run_dir)  # either side
    error_line(result, *fragments)


def test_a_classification_csv_given_to_ner_is_named_as_one(tmp_path, tiny_model_dir):
    result = bertkit("run", "ner", f"model={tiny_model_dir}", f"data.train={DATA / 'en_sentiment/train.csv'}",
                     f"output_dir={tmp_path / 'run'}")
    message = error_line(result, "train.csv looks like a classification table", "CoNLL", "JSONL",
                         "bertkit run classify")
    assert "has one column" not in message


def test_predict_on_an_export_with_a_truncated_graph(tmp_path, tiny_model_dir):
    pytest.importorskip("onnxruntime")
    run_dir = train_run(tmp_path / "run", tiny_model_dir)
    exported = runner.invoke(app, ["export", run_dir, "-o", str(tmp_path / "export")])
    assert exported.exit_code == 0, exported.output
    texts = write_csv(tmp_path / "texts.csv", ["text"], [["a fine film"]])
    graph = tmp_path / "export" / "model.onnx"
    graph.write_bytes(graph.read_bytes()[: graph.stat().st_size // 2])
    message = error_line(bertkit("predict", tmp_path / "export", texts, "-o", tmp_path / "out.jsonl"),
                         "model.onnx", "truncated", "export again")
    assert "model.safetensors" not in message
    graph.unlink()  # (further) a graph that is not there at all
    error_line(bertkit("predict", tmp_path / "export", texts, "-o", tmp_path / "out.jsonl"), "model.onnx is missing")


# ------------------------------------------------------------------------------------------------ audit, diagnose

def small_conll(path: Path, sentences: int) -> Path:
    blocks = [block for block in (DATA / "ner/en/train.conll").read_text(encoding="utf-8").split("\n\n")
              if block.strip() and not block.startswith("-DOCSTART-")]
    path.write_text("\n\n".join(blocks[:sentences]) + "\n", encoding="utf-8")
    return path


def test_a_ner_audit_whose_fold_models_learned_nothing_stops(tmp_path, tiny_model_dir):
    """One step per fold: the fold models flag every sentence. Before, the audit wrote a 0-sentence training file and
    printed a retrain command on it."""
    train = small_conll(tmp_path / "train.conll", 10)
    result = bertkit("audit", "ner", f"model={tiny_model_dir}", f"data.train={train}", f"output_dir={tmp_path / 'run'}",
                     "audit.folds=2", "train.max_steps=1", "precision=fp32")
    error_line(result, "every one of the 10 sentences", "learned nothing", "no cleaned file was written",
               "train.num_train_epochs", whole=False)
    assert "retrain" not in result.stdout
    assert not list((tmp_path / "run" / "audit").glob("train_without_issues*"))


def test_an_audit_of_a_one_sentence_file_is_refused(tmp_path, tiny_model_dir):
    """(further) 'audit.folds=2 is more than the 1 sentences — set audit.folds=2 or fewer': advice that cannot work."""
    train = small_conll(tmp_path / "one.conll", 1)
    result = bertkit("audit", "ner", f"model={tiny_model_dir}", f"data.train={train}", f"output_dir={tmp_path / 'run'}",
                     "audit.folds=2")
    message = error_line(result, "holds 1 sentence", "at least 2")
    assert "2 or fewer" not in message


def test_diagnose_does_not_suggest_a_dev_file_that_is_gone(tmp_path, tiny_model_dir):
    dev = tmp_path / "dev.csv"
    shutil.copy(DATA / "en_sentiment/dev.csv", dev)
    run_dir = train_run(tmp_path / "run", tiny_model_dir, f"data.eval={dev}")
    dev.unlink()
    result = bertkit("diagnose", run_dir, "--no-predict")
    assert result.returncode == 0, result.stderr
    tries = [line for line in result.stdout.splitlines() if line.strip().startswith("try:")]
    assert tries, result.stdout  # the tiny run's dev score is low: an inspect command is suggested
    assert all(str(dev) not in line for line in tries), result.stdout
    assert any("--dev DEV_FILE" in line for line in tries), result.stdout
    assert f"dev file {dev} is not there any more: DEV_FILE in the commands stands for it" in result.stdout
