"""`bertkit serve RUN_DIR`: a fine-tuned run (or its ONNX export) behind HTTP, with dynamic batching.

    POST /predict   {"inputs": ...}: one input or a list; answers a list with what `bertkit predict` writes per row
    POST /embed     an embedding model (sentence-transformers folder): TEI's {"inputs", "normalize", "prompt_name"}
                    -> a list of vectors
    POST /rerank    a reranker (CrossEncoder folder): TEI's {"query", "texts", "raw_scores", "return_text"}
                    -> [{"index", "score"}], best first
    GET  /health    200 while the model thread is alive
    GET  /info      model, task, the endpoint it answers on, labels, settings, implementation, precision, limits
    GET  /metrics   Prometheus text: requests by status, latency, inputs and requests per batch, queue depth

How a request is served: the handler parses and checks its inputs (422 for a wrong shape or an unknown field, 413
over a limit), and puts them on a queue of bounded size (503 with Retry-After when it is full, instead of growing
without end); that is all the event loop does with a request. One model thread owns the model: it takes the first
waiting request, waits at most `max_wait_ms` for more, packs requests in arrival order up to a token budget (counting
their tokens there, not on the event loop), and runs them as one call of the task's predictor (which
sorts by length and runs unpadded batches): under load, what queued while the model ran goes together. Each
request gets its own slice of the results, in its input order. A request whose client went away, or that waited
past `timeout_s` (504), is dropped before it costs model time; a batch that fails is retried request by request, so
one bad input fails alone and the server goes on. Shutdown (Ctrl-C, SIGTERM) stops accepting, finishes what is
queued, then exits.

The request shape follows Text Embeddings Inference's `/predict` where the task allows: `{"inputs": "text"}`,
`{"inputs": [["a"], ["b"]]}` and, for a model trained on pairs, `{"inputs": ["a", "b"]}` as one pair; a list of
strings is a batch of single texts for a model that takes one text. Other tasks take objects:
ner `"text"`, qa `{"question", "context"}`, choice `{"context", "question", "options"}`, mlm `"a [MASK] text"`.
Each shape, its checks and its answer are the task's own (`Endpoint` in bertkit/tasks/<task>, on the interface of
bertkit/tasks/serving.py): this module serves whichever the model's task gives, and knows none of them.
"""

# No `from __future__ import annotations`: FastAPI reads the endpoints' annotations, which name classes local to
# create_app (the request model), and a string annotation could not be resolved there.

import asyncio
import contextlib
import errno
import math
import queue
import socket
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from . import speed
from .errors import BertkitError, require_packages
from .tasks.serving import InputError

@dataclass
class Limits:
    """What one request may ask and how much the server holds: each bounds memory or latency for everyone else."""

    max_inputs: int = 64
    """Inputs in one request (413 above)."""
    max_chars: int = 20_000
    """Characters in one input, all its fields together (413 above)."""
    max_queue: int = 1024
    """Inputs waiting for the model; a request that would go past it gets 503 with Retry-After."""
    max_batch_tokens: int = 16_384
    """Tokens (as the tokenizer counts them, truncated as trained) in one call of the model."""
    max_wait_ms: float = 0.0
    """How long the first waiting request waits for others to batch with. 0 (continuous batching): the requests that
    queued while the model ran go together at once; measured here, waiting 5 ms cost 5 ms at concurrency 1 and
    gained nothing at 64."""
    timeout_s: float = 30.0
    """A request not answered after this gets 504 (and is dropped if it has not run yet)."""

    def check(self) -> None:
        for name in ("max_inputs", "max_chars", "max_queue", "max_batch_tokens"):
            if int(getattr(self, name)) < 1:
                raise BertkitError(f"--{name.replace('_', '-')} {getattr(self, name)}: must be at least 1")
        if not 0 <= self.max_wait_ms <= 1000:
            raise BertkitError(f"--max-wait-ms {self.max_wait_ms}: use 0..1000 (milliseconds)")
        if not self.timeout_s > 0:
            raise BertkitError(f"--timeout {self.timeout_s}: must be more than 0 seconds")
        if self.max_queue < self.max_inputs:
            raise BertkitError(f"--max-queue {self.max_queue} is below --max-inputs {self.max_inputs}: a full "
                               "request could never be queued — raise --max-queue")


# ----------------------------------------------------------------------------------------------- batching


@dataclass
class Pending:
    """One request waiting for the model: its examples, where its answer goes, and its token counts (taken by the
    model thread: Batcher.tokens)."""

    examples: list
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop
    dropped: bool = False  # the client left or the request timed out: skip it
    tokens: list[int] | None = None

    def answer(self, result=None, error: BaseException | None = None) -> None:
        def settle():
            if not self.future.done():
                self.future.set_exception(error) if error is not None else self.future.set_result(result)
        self.loop.call_soon_threadsafe(settle)


STOP = object()  # queued by Batcher.stop: the model thread ends when it reaches it
TRIM_EVERY_S = 5.0  # how often at most the model thread hands freed heap back to the OS (speed.py: server_memory)


class Batcher:
    """The model thread: requests in, batches of them through the task's predictor, answers out in order."""

    def __init__(self, endpoint, limits: Limits, stats: "Stats", run_in: Callable = contextlib.nullcontext):
        self.endpoint, self.limits, self.stats = endpoint, limits, stats
        self.queue: queue.Queue = queue.Queue()  # Pending requests, then STOP
        self.waiting_inputs = 0  # inputs queued and not yet taken by the model thread
        self.lock = threading.Lock()
        self.run_in = run_in  # a context the model runs under (the precision's autocast): entered in the thread
        self.thread = threading.Thread(target=self._run, name="bertkit-model", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def alive(self) -> bool:
        return self.thread.is_alive()

    def submit(self, pending: Pending) -> bool:
        """Queue a request; False (nothing queued) when it would overfill the queue."""
        with self.lock:
            if self.waiting_inputs + len(pending.examples) > self.limits.max_queue:
                return False
            self.waiting_inputs += len(pending.examples)
        self.stats.queue_depth.set(self.waiting_inputs)
        self.queue.put(pending)
        return True

    def stop(self, timeout: float = 60.0) -> None:
        """Finish what is queued, then end the thread."""
        self.queue.put(STOP)
        self.thread.join(timeout)

    def _take(self, pending: Pending) -> None:
        with self.lock:
            self.waiting_inputs -= len(pending.examples)
        self.stats.queue_depth.set(self.waiting_inputs)

    def tokens(self, pending: Pending) -> int:
        """The request's tokens, counted here in the model thread. On the event loop, which every request waits on,
        counting took a fifth of its time at 8 clients (py-spy), and ran the tokenizer beside the model thread's: a
        fast tokenizer keeps its truncation settings in one Rust object, and two threads with different settings
        get each other's. A request whose tokens cannot be counted runs alone (predict then tells it what is wrong)."""
        if pending.tokens is None:
            try:
                pending.tokens = self.endpoint.tokens(pending.examples)
            except Exception:  # noqa: BLE001 - the model call reports it, to this request alone
                pending.tokens = [self.limits.max_batch_tokens]
        return sum(pending.tokens)

    def _collect(self, first: Pending) -> tuple[list[Pending], object]:
        """The first request and those that join it within max_wait_ms, in arrival order, up to the token budget
        (a request is never split: a large one runs alone). Returns (batch, what starts the next one: a request
        that did not fit, STOP, or None)."""
        batch, budget = [first], self.tokens(first)
        deadline = time.perf_counter() + self.limits.max_wait_ms / 1000
        while budget < self.limits.max_batch_tokens:
            try:
                following = self.queue.get(timeout=max(deadline - time.perf_counter(), 0))
            except queue.Empty:
                return batch, None
            if following is STOP or budget + self.tokens(following) > self.limits.max_batch_tokens:
                return batch, following
            batch.append(following)
            budget += self.tokens(following)
        return batch, None

    def _run(self) -> None:
        with self.run_in():
            following, trimmed = None, time.monotonic()
            while True:
                first = following or self.queue.get()
                if first is STOP:  # stop() queued it after every request it had accepted: all are answered
                    return
                batch, following = self._collect(first)
                for pending in batch:
                    self._take(pending)
                self._run_batch([p for p in batch if not p.dropped and not p.future.done()])
                if time.monotonic() - trimmed > TRIM_EVERY_S:  # between batches, even under load
                    speed.release_freed_memory()
                    trimmed = time.monotonic()

    def _run_batch(self, batch: list[Pending]) -> None:
        if not batch:
            return
        started = time.perf_counter()
        try:
            records = self.endpoint.predict([e for p in batch for e in p.examples])
        except Exception as error:  # noqa: BLE001 - one bad request must not fail the others: rerun them one by one
            if len(batch) == 1:
                batch[0].answer(error=error)
                self.stats.model_errors.inc()
                return
            for pending in batch:
                self._run_batch([pending])
            return
        self.stats.observe_batch(len(batch), sum(len(p.examples) for p in batch),
                                 sum(sum(p.tokens) for p in batch), time.perf_counter() - started)
        position = 0
        for pending in batch:
            pending.answer(records[position:position + len(pending.examples)])
            position += len(pending.examples)


# ----------------------------------------------------------------------------------------------- metrics


class Stats:
    """The Prometheus metrics of one server (their own registry: two servers in one process do not mix)."""

    def __init__(self):
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        self.requests = Counter("bertkit_requests", "HTTP requests to /predict, by status code", ["status"],
                                registry=self.registry)
        self.latency = Histogram("bertkit_request_latency_seconds", "Time from receiving a /predict request to its "
                                 "answer", registry=self.registry,
                                 buckets=(.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30))
        self.batch_requests = Histogram("bertkit_batch_requests", "Requests run together in one call of the model",
                                        registry=self.registry, buckets=(1, 2, 4, 8, 16, 32, 64, 128))
        self.batch_inputs = Histogram("bertkit_batch_inputs", "Inputs run together in one call of the model",
                                      registry=self.registry, buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024))
        self.batch_tokens = Counter("bertkit_batch_tokens", "Tokens run through the model", registry=self.registry)
        self.model_seconds = Counter("bertkit_model_seconds", "Time the model thread spent predicting",
                                     registry=self.registry)
        self.queue_depth = Gauge("bertkit_queue_inputs", "Inputs waiting for the model", registry=self.registry)
        self.model_errors = Counter("bertkit_model_errors", "Requests whose prediction raised",
                                    registry=self.registry)

    def observe_batch(self, requests: int, inputs: int, tokens: int, seconds: float) -> None:
        self.batch_requests.observe(requests)
        self.batch_inputs.observe(inputs)
        self.batch_tokens.inc(tokens)
        self.model_seconds.inc(seconds)

    def text(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


# ----------------------------------------------------------------------------------------------- the app


def require_serve() -> None:
    require_packages(("fastapi", "uvicorn", "prometheus_client"), "bertkit serve", "serve")


def load_endpoint(run_dir: str):
    """The task endpoint of a run directory (or export), chosen by its saved architecture as predict chooses; an
    unfinished or mixed run is refused as predict refuses it."""
    from .tasks import module_for_model

    return module_for_model(run_dir).Endpoint(run_dir)


class Server:
    """What the routes do, apart from FastAPI: the endpoint, the batcher, the limits and the metrics."""

    def __init__(self, run_dir: str, precision: str, limits: Limits, engine: str | None = None):
        from . import __version__
        from .engine import Engine, choose, measure
        from .inference import inference_precision, resolved_precision
        from .onnx_model import OnnxModel, head_of

        limits.check()
        self.runs_at, self.precision_reason = resolved_precision(precision)
        with inference_precision(precision):  # int8 quantizes as the model loads, bf16 casts it
            self.endpoint = load_endpoint(run_dir)
            model = getattr(self.endpoint.predictor, "model", None)
            if model is not None and not hasattr(model, "parameters"):  # an ONNX export: its int8 graph if asked
                if engine == "torch":  # asked for by name (not by BERTKIT_ENGINE): it cannot be honoured
                    raise BertkitError(f"--engine torch: {run_dir} is an ONNX export, which ONNX Runtime runs — serve "
                                       "the run directory it came from for PyTorch, or leave --engine out")
                self.runs_at = "int8" if precision == "int8" else "fp32"
                self.precision_reason = f"the export's {self.runs_at} graph"
                self.engine = Engine(f"onnxruntime {self.runs_at}", f"onnxruntime {self.runs_at}", "an ONNX export")
                if isinstance(model, OnnxModel):  # timed as the engine times a run: /info says it, and the export
                    # then served 272 against 228 req/s at 8 clients (MiniLM int8, AMD EPYC, 4 rounds, medians)
                    self.engine.ms_per_input = measure({self.engine.single: model}, model.config, head_of(run_dir))
            else:  # PyTorch, ONNX Runtime or each for the calls it runs faster (engine.py)
                self.engine = choose(run_dir, self.endpoint.predictor, engine, self.runs_at)
        self.limits, self.stats = limits, Stats()
        self.batcher = Batcher(self.endpoint, limits, self.stats, run_in=lambda: inference_precision(precision))
        self.info = {"model": str(Path(run_dir).resolve()), "task": self.endpoint.name,
                     "endpoints": [self.endpoint.route], "precision": self.runs_at,
                     "precision_asked": precision, "engine": asdict(self.engine),
                     "implementation": type(model).__name__ if model is not None else None, "bertkit": __version__,
                     "limits": asdict(limits), **self.endpoint.info}

    def error(self, status: int, message: str, headers: dict | None = None):
        from fastapi.responses import JSONResponse

        self.stats.requests.labels(str(status)).inc()
        return JSONResponse({"error": message, "status": status}, status_code=status, headers=headers)

    def check(self, examples: list):
        """The 4xx answer for inputs over a limit, or None."""
        if not examples:
            return self.error(422, "inputs is empty: give at least one input")
        if len(examples) > self.limits.max_inputs:
            return self.error(413, f"{len(examples)} inputs in one request; the limit is {self.limits.max_inputs} "
                                   "(--max-inputs): split the request")
        for i, example in enumerate(examples):
            if self.endpoint.chars(example) > self.limits.max_chars:
                return self.error(413, f"inputs[{i}] has {self.endpoint.chars(example):,} characters; the limit is "
                                       f"{self.limits.max_chars:,} (--max-chars)")
        return None

    def wrong_route(self, route: str):
        """The 400 for a route this model does not serve, naming the one it does (None when it serves `route`)."""
        serves = self.endpoint.route
        if serves == route:
            return None
        return self.error(400, f"this is a {self.endpoint.name} model: POST {serves} answers it, not {route}")

    async def predict(self, inputs, request, finish: Callable | None = None):
        """Parse (`inputs`: what the endpoint's parse takes), check, queue, wait, answer: the records, or
        finish(records) (/rerank sorts them)."""
        started = time.perf_counter()
        try:
            examples = self.endpoint.parse(inputs)
        except InputError as problem:
            return self.error(422, str(problem))
        refusal = self.check(examples)
        if refusal is not None:
            return refusal
        loop = asyncio.get_running_loop()
        pending = Pending(examples, loop.create_future(), loop)
        if not self.batcher.submit(pending):
            return self.error(503, f"the queue is full ({self.limits.max_queue} inputs waiting): retry shortly",
                              {"Retry-After": "1"})
        answer = await self.wait(pending, request, started + self.limits.timeout_s)
        if answer is not None:
            return answer
        try:
            records = pending.future.result()
        except Exception as problem:  # noqa: BLE001 - the model raised on this request alone
            return self.error(500, f"prediction failed: {type(problem).__name__}: {str(problem).splitlines()[0]}")
        self.stats.requests.labels("200").inc()
        self.stats.latency.observe(time.perf_counter() - started)
        return _clean(finish(records) if finish is not None else records)

    async def wait(self, pending: Pending, request, deadline: float):
        """Wait for the answer, waking now and then: a request past its deadline (504) or whose client left is
        dropped before it costs model time. None once answered."""
        from fastapi.responses import Response

        while not pending.future.done():
            await asyncio.wait([pending.future], timeout=min(0.25, max(deadline - time.perf_counter(), 0)))
            if pending.future.done():
                return None
            if time.perf_counter() >= deadline:
                pending.dropped = True
                return self.error(504, f"no answer within {self.limits.timeout_s:g} s (--timeout): the server is "
                                       "overloaded; retry later or send fewer inputs")
            if await request.is_disconnected():
                pending.dropped = True
                self.stats.requests.labels("499").inc()
                return Response(status_code=499)
        return None


def answer_errors_as_json(app, server: Server) -> None:
    """A body that is not the request shape is 422 naming what is wrong; anything unexpected is 500 with one line
    (uvicorn logs the traceback) and the server goes on."""
    from fastapi import Request
    from fastapi.exception_handlers import http_exception_handler
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException

    def shape(request: Request) -> str:  # only the model's own route validates a body
        return server.endpoint.shape

    @app.exception_handler(RequestValidationError)
    async def invalid_body(request: Request, exc: RequestValidationError):
        problems = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ())[1:]) or 'body'}: {e.get('msg')}"
                             for e in exc.errors()[:5])
        return server.error(422, f"invalid request body — {problems}; send {shape(request)}")

    @app.exception_handler(HTTPException)
    async def unreadable_body(request: Request, exc: HTTPException):
        # FastAPI's own 400 for a body it cannot decode (bytes that are not UTF-8): its text named nothing
        if exc.status_code == 400 and exc.detail == "There was an error parsing the body":
            return server.error(400, f"the request body is not UTF-8 text — send {shape(request)} as UTF-8 JSON")
        return await http_exception_handler(request, exc)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception):
        first = (str(exc).splitlines() or [""])[0]
        return server.error(500, f"unexpected {type(exc).__name__}: {first}")


def create_app(run_dir: str, precision: str = "auto", limits: Limits | None = None, engine: str | None = None):
    """The FastAPI app serving `run_dir`. The model is loaded here (errors surface before the server listens), under
    `precision`, and runs in one thread under that precision's autocast."""
    require_serve()
    speed.limit_kernel_cache()  # before the model's first matmul
    from fastapi import Body as JsonBody
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, Response

    from .tasks import served_routes

    server = Server(run_dir, precision, limits or Limits(), engine)
    endpoint = server.endpoint
    Body = endpoint.request_model()  # the task's request shape: validation and the OpenAPI schema

    @contextlib.asynccontextmanager
    async def lifespan(app):
        server.batcher.start()
        yield
        await asyncio.get_running_loop().run_in_executor(None, server.batcher.stop)  # finish what is queued

    app = FastAPI(title=f"bertkit serve {Path(run_dir).name}", version=server.info["bertkit"], lifespan=lifespan)
    app.state.server, app.state.batcher = server, server.batcher
    answer_errors_as_json(app, server)

    @app.get("/health")
    async def health():
        alive = server.batcher.alive()
        return JSONResponse({"status": "ok" if alive else "model thread stopped"}, status_code=200 if alive else 503)

    app.get("/info")(lambda: server.info)
    app.get("/metrics")(lambda: Response(server.stats.text(), media_type="text/plain; version=0.0.4; charset=utf-8"))

    async def serve(body: Body, request: Request):
        return await server.predict(endpoint.inputs_of(body), request,
                                    finish=lambda records: endpoint.answer(body, records))

    def refusal(route: str):
        async def wrong_route(body: Any = JsonBody(None)):  # the body read as JSON: undecodable bytes are said first
            return server.wrong_route(route)
        return wrong_route

    app.post(endpoint.route)(serve)
    for route in served_routes():  # another task's route: 400 naming the one this model answers on
        if route != endpoint.route:
            app.post(route, include_in_schema=False)(refusal(route))

    return app


def _clean(value):
    """JSON has no NaN or inf: such a score becomes null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def listening_socket(host: str, port: int) -> socket.socket:
    """The server's socket, bound before the model loads: a port in use, a port that cannot be one or a host that is
    not this machine's is one line at once, not uvicorn's error (exit 3) after the whole model has loaded."""
    if not 1 <= port <= 65535:
        raise BertkitError(f"--port {port}: a port is a number in 1..65535 — e.g. --port 8000")
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
    except socket.gaierror as error:
        raise BertkitError(f"--host {host}: not an address this machine can listen on ({error.strerror}) — use "
                           "127.0.0.1 (this machine only) or 0.0.0.0 (every interface)") from None
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: a port in TIME_WAIT is free
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        if error.errno == errno.EADDRINUSE:
            raise BertkitError(f"port {port} is in use — choose another --port (or stop the program that listens "
                               "on it)") from None
        if error.errno == errno.EACCES:
            raise BertkitError(f"port {port} needs administrator rights (ports below 1024) — choose another --port, "
                               "e.g. --port 8000") from None
        if error.errno == errno.EADDRNOTAVAIL:
            raise BertkitError(f"--host {host} is not an address of this machine — use 127.0.0.1 (this machine "
                               "only) or 0.0.0.0 (every interface)") from None
        raise
    return sock


def serve(run_dir: str, host: str = "127.0.0.1", port: int = 8000, precision: str = "auto",
          limits: Limits | None = None, log_level: str = "info", engine: str | None = None,
          access_log: bool = False) -> None:
    """Bind the port, load the run, then serve it with uvicorn until Ctrl-C / SIGTERM (queued requests are finished
    first). uvicorn's line per request only with `access_log`: /metrics counts requests, and the line cost 9-12 % of
    the requests/s at 1 and 64 clients (MiniLM int8, AMD EPYC, 2 cores; a plain FastAPI app runs without it too)."""
    require_serve()
    import uvicorn

    from .console import console_session
    from .engine import check_engine
    from .tasks import task_of_model

    (limits or Limits()).check()  # before the port and the model: a limit that cannot work is said first
    check_engine(engine)  # said before the port; None stays None: BERTKIT_ENGINE is a default, not --engine
    sock = listening_socket(host, port)
    try:
        task_of_model(run_dir)  # a folder that is not there, or holds no fine-tuned model: before the model stack
        if sys.stderr.isatty():  # a person waiting at a terminal; a log or a script gets the serving line alone
            print(f"serve: loading {run_dir} (PyTorch and transformers first: seconds) to serve it on "
                  f"http://{host}:{port}", file=sys.stderr, flush=True)
        with console_session("quiet"):  # transformers' log as a run's; no progress bars per batch
            app = create_app(run_dir, precision, limits, engine)
            speed.freeze_loaded_objects()  # the collector's full passes skip the model and libraries: no stalls
            server = app.state.server
            print(f"serving {server.info['model']} ({server.endpoint.name}) at {server.precision_reason}; engine: "
                  f"{server.engine.describe()}", flush=True)
            config = uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=access_log,
                                    timeout_graceful_shutdown=30)
            runner = uvicorn.Server(config)
            runner.run(sockets=[sock])
    finally:
        sock.close()
    if not runner.started:  # uvicorn said why on its log (as uvicorn.run exits 3)
        sys.exit(3)


__all__ = ["Limits", "InputError", "Batcher", "Stats", "Server", "create_app", "load_endpoint",
           "listening_socket", "serve", "require_serve"]
