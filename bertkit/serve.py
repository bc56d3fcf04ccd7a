"""`bertkit serve RUN_DIR`: a fine-tuned run (or its ONNX export) behind HTTP, with dynamic batching.

    POST /predict   {"inputs": ...}: one input or a list; answers a list with what `bertkit predict` writes per row
    GET  /health    200 while the model thread is alive
    GET  /info      model, task, labels, settings, implementation, precision, limits
    GET  /metrics   Prometheus text: requests by status, latency, inputs and requests per batch, queue depth

How a request is served: the handler parses and checks its inputs (422 for a wrong shape or an unknown field, 413
over a limit), and puts them on a queue of bounded size (503 with Retry-After when it is full, instead of growing
without end). One model thread owns the model: it takes the first waiting request, waits at most `max_wait_ms` for
more, packs requests in arrival order up to a token budget, and runs them as one call of the task's predictor (which
sorts by length and runs unpadded batches). Each request gets its own slice of the results, in its input order. A
request whose client went away, or that waited past `timeout_s` (504), is dropped before it costs model time; a
batch that fails is retried request by request, so one bad input fails alone and the server goes on. Shutdown
(Ctrl-C, SIGTERM) stops accepting, finishes what is queued, then exits.

The request shape follows Text Embeddings Inference's `/predict` where the task allows: `{"inputs": "text"}`,
`{"inputs": [["a"], ["b"]]}` and, for a model trained on pairs, `{"inputs": ["a", "b"]}` as one pair; a list of
strings is a batch of single texts for a model that takes one text. Other tasks take objects:
ner `"text"`, qa `{"question", "context"}`, choice `{"context", "question", "options"}`, mlm `"a [MASK] text"`.
"""

# No `from __future__ import annotations`: FastAPI reads the endpoints' annotations, which name classes local to
# create_app (the request model), and a string annotation could not be resolved there.

import asyncio
import math
import queue
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from .errors import BertkitError

SERVE_HINT = 'pip install "bertkit[serve]"'


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
    max_wait_ms: float = 5.0
    """How long the first waiting request waits for others to batch with."""
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


class InputError(ValueError):
    """A request input the task cannot take: answered 422 with this message."""


# ----------------------------------------------------------------------------------------------- the tasks


def _text(value, where: str) -> str:
    if not isinstance(value, str):
        raise InputError(f"{where} must be a string, got {type(value).__name__}")
    return value


def _items(inputs, where: str = "inputs") -> list:
    """A request's inputs as a list: one input (a string or an object) or a list of them."""
    return list(inputs) if isinstance(inputs, list) else [inputs]


@dataclass
class TaskEndpoint:
    """One task behind the server: parse a request's inputs into examples, count their tokens, predict records."""

    name: str
    predictor: Any
    parse: Callable[[Any], list]
    """inputs -> examples (raises InputError)"""
    chars: Callable[[Any], int]
    """example -> characters, for max_chars"""
    tokens: Callable[[list], list[int]]
    """examples -> tokens each, for the batch budget"""
    predict: Callable[[list], list[dict]]
    """examples -> one record each, what `bertkit predict` writes"""
    info: dict = field(default_factory=dict)


def _token_counter(tokenizer, max_length: int):
    def count(firsts: list[str], seconds: list[str] | None = None) -> list[int]:
        encoded = tokenizer(firsts, seconds, truncation=True, max_length=max_length) if seconds else \
            tokenizer(firsts, truncation=True, max_length=max_length)
        return [len(ids) for ids in encoded["input_ids"]]
    return count


def classify_endpoint(run_dir: str) -> TaskEndpoint:
    from .tasks.classify.predict import load_predictor, predict_probabilities
    from .tasks.classify.scoring import describe_prediction

    classifier = load_predictor(run_dir)
    # Whether the model reads pairs is known when its run named the pair column; TEI reads ["a", "b"] as one pair,
    # and so does bertkit then; otherwise a list of strings is a batch of single texts.
    takes_pairs = bool(classifier.column_overrides.get("text_pair_column"))

    def one(value, where: str) -> tuple[str, str | None]:
        if isinstance(value, str):
            return value, None
        if isinstance(value, dict):
            if set(value) - {"text", "text_pair"} or "text" not in value:
                raise InputError(f"{where}: an object input takes \"text\" (and \"text_pair\"), got "
                                 f"{sorted(value)}")
            pair = value.get("text_pair")
            return _text(value["text"], f"{where}.text"), None if pair is None else _text(pair, f"{where}.text_pair")
        if isinstance(value, list) and len(value) in (1, 2):
            texts = [_text(v, f"{where}[{i}]") for i, v in enumerate(value)]
            return texts[0], texts[1] if len(texts) == 2 else None
        raise InputError(f"{where} must be a text, [text], [text, text_pair] or {{\"text\", \"text_pair\"}}")

    def parse(inputs) -> list:
        if isinstance(inputs, list) and takes_pairs and len(inputs) == 2 and all(isinstance(v, str) for v in inputs):
            inputs = [inputs]  # TEI: ["a", "b"] is one pair
        examples = [one(value, f"inputs[{i}]") for i, value in enumerate(_items(inputs))]
        if len({pair is None for _, pair in examples}) > 1:
            raise InputError("mixed inputs: give every input as a pair, or none")
        return examples

    count = _token_counter(classifier.tokenizer, classifier.max_length)

    def predict(examples: list) -> list[dict]:
        records: list[dict | None] = [None] * len(examples)
        for paired in (False, True):  # a batch may join requests of pairs and of single texts
            indices = [i for i, (_, pair) in enumerate(examples) if (pair is not None) == paired]
            if not indices:
                continue
            probs = predict_probabilities(classifier, [examples[i][0] for i in indices],
                                          [examples[i][1] for i in indices] if paired else None)
            for i, row in zip(indices, probs):
                records[i] = describe_prediction(row, classifier.labels, classifier.labels.threshold)
        return records

    return TaskEndpoint(
        "classify", classifier, parse, lambda e: len(e[0]) + len(e[1] or ""),
        lambda examples: count([t for t, _ in examples], [p for _, p in examples] if examples[0][1] is not None
                               else None),
        predict, {"labels": classifier.labels.names, "label_kind": classifier.labels.kind,
                  "pairs": takes_pairs, "max_length": classifier.max_length,
                  "long_doc": classifier.long_doc.strategy})


def ner_endpoint(run_dir: str) -> TaskEndpoint:
    from .tasks.ner import Sentence, decode, entities_from_tags, load_predictor, predict_word_probabilities, \
        split_words

    tagger = load_predictor(run_dir)

    def parse(inputs) -> list:
        sentences = []
        for i, value in enumerate(_items(inputs)):
            if isinstance(value, dict) and set(value) == {"text"}:
                value = value["text"]
            text = _text(value, f"inputs[{i}]")
            offsets = split_words(text, tagger.settings.split)
            sentences.append(Sentence([text[a:b] for a, b in offsets], None, f"inputs[{i}]", text, offsets))
        return sentences

    count = _token_counter(tagger.tokenizer, tagger.settings.max_length)

    def predict(sentences: list) -> list[dict]:
        probs = predict_word_probabilities(tagger, sentences)
        records = []
        for sentence, word_probs in zip(sentences, probs):
            tags, scores = decode(word_probs, tagger.id2label)
            records.append({"text": sentence.text, "entities": entities_from_tags(sentence, tags, scores)})
        return records

    types = sorted({label.split("-", 1)[-1] for label in tagger.id2label.values() if label != "O"})
    return TaskEndpoint("ner", tagger, parse, lambda s: len(s.text), lambda s: count([x.text for x in s]),
                        predict, {"entity_types": types, "max_length": tagger.settings.max_length})


def qa_endpoint(run_dir: str) -> TaskEndpoint:
    from .tasks.qa.postprocess import prediction_record
    from .tasks.qa.predict import load_predictor, predict_examples
    from .tasks.qa.read import QAExample

    qa = load_predictor(run_dir)

    def parse(inputs) -> list:
        examples = []
        for i, value in enumerate(_items(inputs)):
            where = f"inputs[{i}]"
            if not isinstance(value, dict) or not {"question", "context"} <= set(value) or \
                    set(value) - {"question", "context", "id"}:
                raise InputError(f"{where} must be {{\"question\", \"context\"}} (and an optional \"id\")")
            examples.append(QAExample(str(value.get("id", i)), _text(value["question"], f"{where}.question"),
                                      _text(value["context"], f"{where}.context"), [], where))
        return examples

    count = _token_counter(qa.tokenizer, 10**9)  # the context is cut into windows: every token costs

    def predict(examples: list) -> list[dict]:
        predictions = predict_examples(qa, examples)
        return [prediction_record(e, p, qa.settings.null_threshold) for e, p in zip(examples, predictions)]

    return TaskEndpoint("qa", qa, parse, lambda e: len(e.question) + len(e.context),
                        lambda examples: count([e.question for e in examples], [e.context for e in examples]),
                        predict, {"max_length": qa.settings.max_length, "doc_stride": qa.settings.doc_stride})


def choice_endpoint(run_dir: str) -> TaskEndpoint:
    from .tasks.choice import ChoiceExample, load_predictor, predict_probabilities

    chooser = load_predictor(run_dir)

    def parse(inputs) -> list:
        examples = []
        for i, value in enumerate(_items(inputs)):
            where = f"inputs[{i}]"
            options = value.get("options", value.get("choices")) if isinstance(value, dict) else None
            if not isinstance(options, list) or len(options) < 2 or \
                    set(value) - {"context", "question", "options", "choices"}:
                raise InputError(f"{where} must be {{\"context\", \"question\", \"options\": [at least two]}}")
            examples.append(ChoiceExample(_text(value.get("context", ""), f"{where}.context"),
                                          _text(value.get("question", ""), f"{where}.question"),
                                          [_text(o, f"{where}.options[{j}]") for j, o in enumerate(options)],
                                          None, where))
        return examples

    count = _token_counter(chooser.tokenizer, chooser.settings.max_length)

    def tokens(examples: list) -> list[int]:
        return [sum(count([e.context] * len(e.options), [f"{e.question} {o}" for o in e.options])) for e in examples]

    def predict(examples: list) -> list[dict]:
        records = []
        for example, row in zip(examples, predict_probabilities(chooser, examples)):
            best = int(row.argmax())
            records.append({"question": example.question, "choice": best, "option": example.options[best],
                            "score": round(float(row[best]), 6), "probabilities": [round(float(p), 6) for p in row]})
        return records

    return TaskEndpoint("choice", chooser, parse,
                        lambda e: len(e.context) + len(e.question) + sum(len(o) for o in e.options), tokens, predict,
                        {"max_length": chooser.settings.max_length})


def mlm_endpoint(run_dir: str) -> TaskEndpoint:
    from .tasks.mlm.fill_mask import TOP_K, load_predictor

    predictor = load_predictor(run_dir)
    mask = predictor.tokenizer.mask_token

    def parse(inputs) -> list:
        texts = [_text(value, f"inputs[{i}]") for i, value in enumerate(_items(inputs))]
        for i, text in enumerate(texts):
            if mask not in text:
                raise InputError(f"inputs[{i}] holds no {mask}: nothing to fill")
        return texts

    count = _token_counter(predictor.tokenizer, predictor.settings.max_length)

    def predict(texts: list) -> list[dict]:
        return [{"text": text, "masks": masks} for text, masks in zip(texts, predictor.top_tokens(texts, TOP_K))]

    return TaskEndpoint("mlm", predictor, parse, len, count, predict,
                        {"mask_token": mask, "top_k": TOP_K, "max_length": predictor.settings.max_length})


ENDPOINTS = {"classify": classify_endpoint, "ner": ner_endpoint, "qa": qa_endpoint, "choice": choice_endpoint,
             "mlm": mlm_endpoint}


# ----------------------------------------------------------------------------------------------- batching


@dataclass
class Pending:
    """One request waiting for the model: its examples and token counts, and where its answer goes."""

    examples: list
    tokens: list[int]
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop
    queued_at: float = field(default_factory=time.perf_counter)
    dropped: bool = False  # the client left or the request timed out: skip it

    def answer(self, result=None, error: BaseException | None = None) -> None:
        def settle():
            if not self.future.done():
                self.future.set_exception(error) if error is not None else self.future.set_result(result)
        self.loop.call_soon_threadsafe(settle)


class Batcher:
    """The model thread: requests in, batches of them through the task's predictor, answers out in order."""

    def __init__(self, endpoint: TaskEndpoint, limits: Limits, stats: "Stats", run_in: Callable = None):
        self.endpoint, self.limits, self.stats = endpoint, limits, stats
        self.queue: queue.Queue[Pending | None] = queue.Queue()
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
        self.queue.put(None)
        self.thread.join(timeout)

    def _take(self, pending: Pending) -> None:
        with self.lock:
            self.waiting_inputs -= len(pending.examples)
        self.stats.queue_depth.set(self.waiting_inputs)

    def _collect(self, first: Pending) -> tuple[list[Pending], bool]:
        """The first request and those that join it within max_wait_ms, in arrival order, up to the token budget
        (a request is never split: a large one runs alone). Returns (batch, stop seen)."""
        batch, budget = [first], sum(first.tokens)
        deadline = time.perf_counter() + self.limits.max_wait_ms / 1000
        while budget < self.limits.max_batch_tokens:
            try:
                nxt = self.queue.get(timeout=max(deadline - time.perf_counter(), 0)) \
                    if self.limits.max_wait_ms else self.queue.get_nowait()
            except queue.Empty:
                break
            if nxt is None:
                return batch, True
            if budget + sum(nxt.tokens) > self.limits.max_batch_tokens:
                self._carry = nxt  # starts the next batch
                break
            batch.append(nxt)
            budget += sum(nxt.tokens)
        return batch, False

    def _run(self) -> None:
        import contextlib

        self._carry = None
        with self.run_in() if self.run_in else contextlib.nullcontext():
            stopping = False
            while True:
                first, self._carry = self._carry, None
                if first is None:
                    if stopping:
                        try:
                            first = self.queue.get_nowait()
                        except queue.Empty:
                            return
                    else:
                        first = self.queue.get()
                if first is None:
                    stopping = True
                    continue
                batch, stop_seen = self._collect(first)
                stopping = stopping or stop_seen
                for pending in batch:
                    self._take(pending)
                self._run_batch([p for p in batch if not p.dropped and not p.future.done()])

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
    for name in ("fastapi", "uvicorn", "prometheus_client"):
        try:
            __import__(name)
        except ImportError:
            raise BertkitError(f"bertkit serve needs the optional packages fastapi, uvicorn and prometheus_client "
                               f"({name} is not installed) — {SERVE_HINT}") from None


def load_endpoint(run_dir: str) -> TaskEndpoint:
    """The task endpoint of a run directory (or export), chosen by its saved architecture as predict chooses; an
    unfinished or mixed run is refused as predict refuses it."""
    from .cli import task_module

    module = task_module(run_dir)
    return ENDPOINTS[module.__name__.rsplit(".", 1)[-1]](run_dir)


def create_app(run_dir: str, precision: str = "fp32", limits: Limits | None = None):
    """The FastAPI app serving `run_dir`. The model is loaded here (errors surface before the server listens), under
    `precision` (int8 quantizes as it loads), and runs in one thread under that precision's autocast."""
    require_serve()
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, Response
    from pydantic import BaseModel, ConfigDict

    from . import __version__
    from .inference import inference_precision

    limits = limits or Limits()
    limits.check()
    with inference_precision(precision):
        endpoint = load_endpoint(run_dir)
    stats = Stats()
    batcher = Batcher(endpoint, limits, stats, run_in=lambda: inference_precision(precision))
    model = endpoint.predictor.model if hasattr(endpoint.predictor, "model") else None
    info = {"model": str(Path(run_dir).resolve()), "task": endpoint.name, "precision": precision,
            "implementation": type(model).__name__ if model is not None else None, "bertkit": __version__,
            "limits": asdict(limits), **endpoint.info}

    class PredictRequest(BaseModel):
        model_config = ConfigDict(extra="forbid")
        inputs: Any
        truncate: bool = True  # TEI's field: bertkit always truncates (or windows) as the model was trained

    async def lifespan(app):
        batcher.start()
        yield
        await asyncio.get_running_loop().run_in_executor(None, batcher.stop)

    app = FastAPI(title=f"bertkit serve {Path(run_dir).name}", version=__version__, lifespan=lifespan)
    app.state.batcher, app.state.stats, app.state.limits = batcher, stats, limits

    def error(status: int, message: str, headers: dict | None = None) -> JSONResponse:
        stats.requests.labels(str(status)).inc()
        return JSONResponse({"error": message, "status": status}, status_code=status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_body(request: Request, exc: RequestValidationError):
        problems = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ())[1:]) or 'body'}: {e.get('msg')}"
                             for e in exc.errors()[:5])
        return error(422, f"invalid request body — {problems}; send {{\"inputs\": ...}}")

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception):
        return error(500, f"unexpected {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")

    @app.get("/health")
    async def health():
        if not batcher.alive():
            return JSONResponse({"status": "model thread stopped"}, status_code=503)
        return {"status": "ok"}

    @app.get("/info")
    async def get_info():
        return info

    @app.get("/metrics")
    async def metrics():
        return Response(stats.text(), media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.post("/predict")
    async def predict(body: PredictRequest, request: Request):
        started = time.perf_counter()
        try:
            examples = endpoint.parse(body.inputs)
        except InputError as problem:
            return error(422, str(problem))
        if not examples:
            return error(422, "inputs is empty: give at least one input")
        if len(examples) > limits.max_inputs:
            return error(413, f"{len(examples)} inputs in one request; the limit is {limits.max_inputs} "
                              "(--max-inputs): split the request")
        for i, example in enumerate(examples):
            if endpoint.chars(example) > limits.max_chars:
                return error(413, f"inputs[{i}] has {endpoint.chars(example):,} characters; the limit is "
                                  f"{limits.max_chars:,} (--max-chars)")
        loop = asyncio.get_running_loop()
        pending = Pending(examples, endpoint.tokens(examples), loop.create_future(), loop)
        if not batcher.submit(pending):
            return error(503, f"the queue is full ({limits.max_queue} inputs waiting): retry shortly",
                         {"Retry-After": "1"})
        deadline = started + limits.timeout_s
        while not pending.future.done():  # wake now and then: a client that left costs nothing more
            await asyncio.wait([pending.future], timeout=min(0.25, max(deadline - time.perf_counter(), 0)))
            if pending.future.done():
                break
            if time.perf_counter() >= deadline:
                pending.dropped = True
                return error(504, f"no answer within {limits.timeout_s:g} s (--timeout): the server is overloaded; "
                                  "retry later or send fewer inputs")
            if await request.is_disconnected():
                pending.dropped = True
                stats.requests.labels("499").inc()
                return Response(status_code=499)
        try:
            records = pending.future.result()
        except Exception as problem:  # noqa: BLE001 - the model raised on this request alone
            return error(500, f"prediction failed: {type(problem).__name__}: {str(problem).splitlines()[0]}")
        stats.requests.labels("200").inc()
        stats.latency.observe(time.perf_counter() - started)
        return _clean(records)

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


def serve(run_dir: str, host: str = "127.0.0.1", port: int = 8000, precision: str = "fp32",
          limits: Limits | None = None, log_level: str = "info") -> None:
    """Load the run, then serve it with uvicorn until Ctrl-C / SIGTERM (queued requests are finished first)."""
    require_serve()
    import uvicorn

    app = create_app(run_dir, precision, limits)
    uvicorn.run(app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=30)


__all__ = ["Limits", "InputError", "TaskEndpoint", "ENDPOINTS", "Batcher", "Stats", "create_app", "load_endpoint",
           "serve", "require_serve"]
