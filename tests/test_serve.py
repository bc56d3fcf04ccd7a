"""`bertkit serve` through a real uvicorn server on a loopback port: every task's response shape, batching that
batches, each bad request's 4xx with the server still answering, the 503 of a full queue, refusal of an unfinished
run, and shutdown with requests in flight. Requests are few and bounded; every server is stopped by its test."""

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from bertkit.serve import Limits, create_app  # noqa: E402
from helpers import tiny_task_models  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def models(tmp_path_factory, minilm_dir):
    return tiny_task_models(tmp_path_factory.mktemp("serve-models"), minilm_dir)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def running(model_dir: str, precision: str = "fp32", **limits):
    """A uvicorn server for `model_dir` in a thread of this process, on a free loopback port; stopped on exit."""
    import uvicorn

    app = create_app(model_dir, precision, Limits(**limits))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}", app
    finally:
        server.should_exit = True
        thread.join(30)


def metric(text: str, name: str) -> float:
    """The value of one sample line of Prometheus text (`name` with its labels, exactly)."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"{name} not in /metrics")


@pytest.mark.parametrize("task, inputs, check", [
    ("classify", "a fine film", lambda r: r["label"] in ("negative", "positive") and
     abs(sum(r["probabilities"].values()) - 1) < 1e-4),
    ("classify", [["a fine film"], ["a dull film"]], lambda r: set(r) == {"label", "score", "probabilities"}),
    ("classify", [["the cat sat", "a cat was sitting"]], lambda r: "label" in r),
    ("ner", ["Angela Merkel visited Paris", "nothing here"], lambda r: "text" in r and isinstance(r["entities"], list)),
    ("qa", {"question": "Where is the cat?", "context": "The cat sleeps on the mat in the kitchen."},
     lambda r: r["answer"] == "The cat sleeps on the mat in the kitchen."[r["start"]:r["end"]]),
    ("choice", {"context": "He was hungry.", "question": "So he", "options": ["ate", "slept", "ran"]},
     lambda r: r["option"] == ["ate", "slept", "ran"][r["choice"]] and len(r["probabilities"]) == 3),
    ("mlm", "the cat sat on the [MASK].", lambda r: len(r["masks"]) == 1 and len(r["masks"][0]) == 5),
])
def test_every_task_answers_what_predict_writes(models, task, inputs, check):
    with running(models[task]) as (url, _):
        response = httpx.post(f"{url}/predict", json={"inputs": inputs}, timeout=30)
        assert response.status_code == 200, response.text
        records = response.json()
        assert len(records) == (len(inputs) if isinstance(inputs, list) else 1)
        assert all(check(record) for record in records), records
        info = httpx.get(f"{url}/info").json()
        assert info["task"] == task and info["implementation"].startswith("Bertkit")


def test_the_answer_is_the_one_predict_gives(models, tmp_path):
    """Served probabilities equal `bertkit predict`'s for the same texts (the server adds batching, not numbers)."""
    from typer.testing import CliRunner

    from bertkit.cli import app

    texts = ["a fine film", "the worst plot in years", "it was fine, I guess, with some good parts and bad ones"]
    (tmp_path / "in.csv").write_text("text\n" + "\n".join(f'"{t}"' for t in texts) + "\n")
    result = CliRunner().invoke(app, ["predict", models["classify"], str(tmp_path / "in.csv"), "-o",
                                      str(tmp_path / "out.jsonl")])
    assert result.exit_code == 0, result.output
    expected = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    with running(models["classify"]) as (url, _):
        served = httpx.post(f"{url}/predict", json={"inputs": texts}, timeout=30).json()
    for mine, theirs in zip(served, expected):
        assert mine["label"] == theirs["label"]
        for name, p in mine["probabilities"].items():
            assert abs(p - theirs["probabilities"][name]) < 1e-5


def test_serve_runs_at_auto_unless_told_and_says_what_auto_chose(models):
    """The default precision is auto: bf16 where the CPU has native bf16 matmul, else fp32; /info says which."""
    from bertkit.precision import cpu_supports_bf16

    for precision, runs_at in (("auto", "bf16" if cpu_supports_bf16() else "fp32"), ("fp32", "fp32")):
        with running(models["classify"], precision) as (url, app):
            info = httpx.get(f"{url}/info").json()
            assert (info["precision"], info["precision_asked"]) == (runs_at, precision)
            dtype = next(app.state.server.endpoint.predictor.model.parameters()).dtype
            assert str(dtype) == {"bf16": "torch.bfloat16", "fp32": "torch.float32"}[runs_at]
            assert httpx.post(f"{url}/predict", json={"inputs": "a fine film"}, timeout=30).status_code == 200
    assert create_app.__defaults__[0] == "auto"


def test_concurrent_requests_run_as_one_batch(models):
    with running(models["classify"], max_wait_ms=300) as (url, _):
        async def both():
            async with httpx.AsyncClient(timeout=30) as client:
                return await asyncio.gather(*(client.post(f"{url}/predict", json={"inputs": [text]})
                                              for text in ("one film", "another film")))
        responses = asyncio.run(both())
        assert [r.status_code for r in responses] == [200, 200]
        text = httpx.get(f"{url}/metrics").text
        assert metric(text, "bertkit_batch_requests_count") == 1  # one call of the model
        assert metric(text, "bertkit_batch_inputs_sum") == 2
        assert metric(text, 'bertkit_requests_total{status="200"}') == 2


def test_the_model_thread_hands_freed_memory_back_between_batches(models, monkeypatch):
    """speed.py's server_memory: malloc_trim between batches (at most every TRIM_EVERY_S), not during one."""
    import bertkit.serve as serve_module

    calls = []
    monkeypatch.setattr(serve_module, "TRIM_EVERY_S", 0.0)
    monkeypatch.setattr(serve_module.speed, "release_freed_memory", lambda: calls.append(time.monotonic()))
    with running(models["classify"]) as (url, _):
        for text in ("one film", "another film"):
            assert httpx.post(f"{url}/predict", json={"inputs": text}, timeout=30).status_code == 200
        batches = metric(httpx.get(f"{url}/metrics").text, "bertkit_batch_requests_count")
    assert batches == 2 and len(calls) == 2


@pytest.mark.parametrize("body, status, fragment", [
    (b'{"inputs": "unclosed', 422, "invalid request body"),
    (b'{"text": "no inputs key"}', 422, "inputs"),
    (b'{"inputs": "fine", "temperature": 2}', 422, "temperature"),
    (b'{"inputs": 42}', 422, "inputs[0]"),
    (b'{"inputs": []}', 422, "empty"),
    (json.dumps({"inputs": ["x"] * 9}).encode(), 413, "limit is 8"),
    (json.dumps({"inputs": "x" * 101}).encode(), 413, "101 characters"),
])
def test_a_bad_request_gets_its_4xx_and_the_next_one_succeeds(models, body, status, fragment):
    with running(models["classify"], max_inputs=8, max_chars=100) as (url, _):
        response = httpx.post(f"{url}/predict", content=body, headers={"content-type": "application/json"})
        assert response.status_code == status, response.text
        assert fragment in response.json()["error"], response.json()
        assert httpx.post(f"{url}/predict", json={"inputs": "fine"}).status_code == 200
        assert httpx.get(f"{url}/health").json() == {"status": "ok"}


def test_a_full_queue_answers_503_with_retry_after(models):
    with running(models["classify"], max_queue=2, max_inputs=2) as (url, app):
        release = held_model(app)

        async def flood():
            async with httpx.AsyncClient(timeout=30) as client:
                first = asyncio.create_task(client.post(f"{url}/predict", json={"inputs": ["a", "b"]}))
                await asyncio.sleep(0.5)  # taken by the (held) model thread
                second = asyncio.create_task(client.post(f"{url}/predict", json={"inputs": ["c", "d"]}))
                await asyncio.sleep(0.5)  # waiting in the queue, which is now full
                third = await client.post(f"{url}/predict", json={"inputs": ["e"]})
                release.set()
                return third, await first, await second

        third, first, second = asyncio.run(flood())
        assert third.status_code == 503 and third.headers["retry-after"] == "1", third.text
        assert "queue is full" in third.json()["error"]
        assert first.status_code == 200 and second.status_code == 200


def test_a_failing_input_fails_alone(models):
    """A batch that raises is rerun request by request: only the request that breaks the model gets 500."""
    with running(models["classify"], max_wait_ms=300) as (url, app):
        predict = app.state.batcher.endpoint.predict

        def fragile(examples):
            if any(text == "boom" for text, _ in examples):
                raise RuntimeError("the model broke on this input")
            return predict(examples)

        app.state.batcher.endpoint.predict = fragile

        async def both():
            async with httpx.AsyncClient(timeout=30) as client:
                return await asyncio.gather(client.post(f"{url}/predict", json={"inputs": "boom"}),
                                            client.post(f"{url}/predict", json={"inputs": "fine"}))
        bad, good = asyncio.run(both())
        assert bad.status_code == 500 and "the model broke" in bad.json()["error"]
        assert good.status_code == 200
        assert httpx.get(f"{url}/health").status_code == 200


def test_an_unfinished_run_is_refused_before_serving(models, tmp_path):
    import shutil

    from typer.testing import CliRunner

    from bertkit.cli import app

    unfinished = tmp_path / "run"
    shutil.copytree(models["classify"], unfinished)
    (unfinished / "bertkit_config.yaml").write_text("model: x\n")  # a run that never wrote its completion record
    result = CliRunner().invoke(app, ["serve", str(unfinished), "--port", str(free_port())])
    assert result.exit_code == 2, result.output
    assert "unfinished bertkit run" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("flag, value, fragment", [("--max-inputs", "0", "--max-inputs 0"),
                                                   ("--max-wait-ms", "-1", "--max-wait-ms"),
                                                   ("--precision", "fp8", "--precision fp8"),
                                                   ("--threads", "0", "--threads 0")])
def test_bad_serve_options_are_one_line(models, flag, value, fragment):
    from typer.testing import CliRunner

    from bertkit.cli import app

    result = CliRunner().invoke(app, ["serve", models["classify"], flag, value])
    assert result.exit_code == 2 and result.output.startswith("error: ") and fragment in result.output, result.output


def test_the_installed_command_serves_and_shuts_down_with_requests_in_flight(models):
    """`bertkit serve` as a user starts it; SIGTERM while requests are queued: each still gets its answer."""
    script = Path(sys.executable).parent / "bertkit"
    if not script.exists():
        pytest.skip("bertkit is not installed in this environment")
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    server = subprocess.Popen([str(script), "serve", models["classify"], "--port", str(port), "--max-wait-ms", "50"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert server.poll() is None, server.stdout.read()
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            assert time.monotonic() < deadline, "bertkit serve did not come up"
            time.sleep(0.2)

        async def in_flight():
            async with httpx.AsyncClient(timeout=60) as client:
                tasks = [asyncio.create_task(client.post(f"{url}/predict", json={"inputs": [f"film {i}"] * 8}))
                         for i in range(6)]
                await asyncio.sleep(0.05)
                server.send_signal(signal.SIGTERM)
                return await asyncio.gather(*tasks, return_exceptions=True)

        responses = asyncio.run(in_flight())
        assert all(isinstance(r, httpx.Response) and r.status_code == 200 and len(r.json()) == 8
                   for r in responses), responses
        # uvicorn finishes the requests, shuts down, then re-raises the signal it caught: the exit is SIGTERM's
        assert server.wait(60) in (0, -signal.SIGTERM)
        log = server.stdout.read()
        assert "Finished server process" in log and "Traceback" not in log, log
        assert "at precision " in log.split("serving ", 1)[1].splitlines()[0], log
        assert "POST /predict" not in log, log  # no line per request unless --access-log
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


@pytest.mark.parametrize("args, expected", [([], False), (["--access-log"], True)])
def test_access_log_only_when_asked_for(models, monkeypatch, args, expected):
    import uvicorn
    from typer.testing import CliRunner

    from bertkit.cli import app

    seen = {}
    monkeypatch.setattr(uvicorn.Server, "run",
                        lambda self, sockets=None: seen.update(access_log=self.config.access_log))
    result = CliRunner().invoke(app, ["serve", models["classify"], "--port", str(free_port()), *args])
    assert seen == {"access_log": expected}, result.output


@pytest.mark.parametrize("plain, frozen", [("", True), ("gc_freeze", False)])
def test_what_is_loaded_is_frozen_out_of_the_collector_before_serving(models, monkeypatch, plain, frozen):
    """A full pass of the cyclic collector over the imports and the loaded model (~530,000 objects) took 265 ms and
    stalled every request in flight (p99 at 64 clients); serve freezes them before it serves, unless
    BERTKIT_PLAIN=gc_freeze."""
    import gc

    import uvicorn
    from typer.testing import CliRunner

    from bertkit.cli import app

    monkeypatch.setenv("BERTKIT_PLAIN", plain)
    seen = {}
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: seen.update(frozen=gc.get_freeze_count()))
    gc.unfreeze()
    try:
        result = CliRunner().invoke(app, ["serve", models["classify"], "--port", str(free_port())])
    finally:
        gc.unfreeze()  # the rest of the test session collects as before
    assert "frozen" in seen, result.output
    assert (seen["frozen"] > 100_000) is frozen, seen


def test_tokens_are_counted_in_the_model_thread_not_on_the_event_loop(models):
    """The event loop, which every request waits on, never runs the tokenizer (it was a fifth of its time under
    load, and ran beside the model thread's tokenizer calls)."""
    with running(models["classify"]) as (url, app):
        batcher, threads = app.state.batcher, []
        count = batcher.endpoint.tokens

        def counted(examples):
            threads.append(threading.current_thread().name)
            return count(examples)

        batcher.endpoint.tokens = counted

        async def several():
            async with httpx.AsyncClient(timeout=30) as client:
                return await asyncio.gather(*(client.post(f"{url}/predict", json={"inputs": [f"text {i}"] * (i + 1)})
                                              for i in range(6)))
        assert [answer.status_code for answer in asyncio.run(several())] == [200] * 6
        assert len(threads) == 6 and set(threads) == {"bertkit-model"}
        text = httpx.get(f"{url}/metrics").text
        assert metric(text, "bertkit_batch_inputs_sum") == 21


def test_a_request_whose_tokens_cannot_be_counted_fails_alone_and_the_model_thread_goes_on(models):
    with running(models["classify"], max_wait_ms=300) as (url, app):
        endpoint = app.state.batcher.endpoint
        count, predict = endpoint.tokens, endpoint.predict

        def broken(examples):
            if any(text == "boom" for text, _ in examples):
                raise RuntimeError("this input breaks the tokenizer")
            return count(examples)

        def fragile(examples):
            if any(text == "boom" for text, _ in examples):
                raise RuntimeError("this input breaks the tokenizer")
            return predict(examples)

        endpoint.tokens, endpoint.predict = broken, fragile

        async def both():
            async with httpx.AsyncClient(timeout=30) as client:
                return await asyncio.gather(client.post(f"{url}/predict", json={"inputs": "fine"}),
                                            client.post(f"{url}/predict", json={"inputs": "boom"}))
        good, bad = asyncio.run(both())
        assert good.status_code == 200 and bad.status_code == 500, (good.text, bad.text)
        assert "breaks the tokenizer" in bad.json()["error"]
        assert httpx.get(f"{url}/health").status_code == 200
        assert httpx.post(f"{url}/predict", json={"inputs": "fine again"}).status_code == 200


def held_model(app):
    """Make the model thread wait for the returned event before each batch (a busy server, on demand)."""
    release = threading.Event()
    predict = app.state.batcher.endpoint.predict

    def held(examples):
        release.wait(30)
        return predict(examples)

    app.state.batcher.endpoint.predict = held
    return release


def test_a_client_that_leaves_costs_no_model_time(models):
    with running(models["classify"]) as (url, app):
        release = held_model(app)

        async def scenario():
            async with httpx.AsyncClient(timeout=30) as client:
                first = asyncio.create_task(client.post(f"{url}/predict", json={"inputs": ["a", "b"]}))
                await asyncio.sleep(0.3)  # the model thread holds it
                with pytest.raises(httpx.ReadTimeout):  # this client gives up while it waits in the queue
                    await client.post(f"{url}/predict", json={"inputs": ["c", "d", "e"]}, timeout=0.3)
                await asyncio.sleep(0.6)  # the server notices the disconnect
                release.set()
                return await first

        assert asyncio.run(scenario()).status_code == 200
        time.sleep(0.5)
        text = httpx.get(f"{url}/metrics").text
        assert metric(text, 'bertkit_requests_total{status="499"}') == 1
        assert metric(text, "bertkit_batch_inputs_sum") == 2  # only the first request's inputs ran
        assert httpx.post(f"{url}/predict", json={"inputs": "fine"}).status_code == 200


def test_a_request_not_answered_in_time_gets_504_and_the_server_goes_on(models):
    with running(models["classify"], timeout_s=0.5) as (url, app):
        release = held_model(app)
        late = httpx.post(f"{url}/predict", json={"inputs": ["f"]}, timeout=30)
        release.set()
        assert late.status_code == 504 and "no answer within 0.5 s" in late.json()["error"], late.text
        assert httpx.post(f"{url}/predict", json={"inputs": "fine"}, timeout=30).status_code == 200
