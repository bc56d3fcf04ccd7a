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
from typing import Any, Callable, Literal

from . import speed
from .errors import BertkitError, require_packages

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


class InputError(ValueError):
    """A request input the task cannot take: answered 422 with this message."""


# ----------------------------------------------------------------------------------------------- the tasks


def _text(value, where: str) -> str:
    if not isinstance(value, str):
        raise InputError(f"{where} must be a string, got {type(value).__name__}")
    return value


def _filled(value, where: str) -> str:
    """A text the task needs words in: an empty (or blank) one is refused, as `bertkit run` refuses it in training
    data, instead of answered with a guess."""
    if not _text(value, where).strip():
        raise InputError(f"{where} is empty — give it some text (training refuses empty texts too)")
    return value


def _items(inputs, where: str = "inputs") -> list:
    """A request's inputs as a list: one input (a string or an object) or a list of them."""
    return list(inputs) if isinstance(inputs, list) else [inputs]


def _token_counter(tokenizer, max_length: int):
    def count(firsts: list[str], seconds: list[str] | None = None) -> list[int]:
        encoded = tokenizer(firsts, seconds, truncation=True, max_length=max_length) if seconds else \
            tokenizer(firsts, truncation=True, max_length=max_length)
        return [len(ids) for ids in encoded["input_ids"]]
    return count


class ClassifyEndpoint:
    """Texts or pairs in; label, score and every probability out (multi-label: the labels over the threshold)."""

    name = "classify"

    def __init__(self, run_dir: str):
        from .tasks.classify import load_predictor

        self.predictor = classifier = load_predictor(run_dir)
        # Whether the model reads pairs is known when its run named the pair column; TEI reads ["a", "b"] as one
        # pair, and so does bertkit then; otherwise a list of strings is a batch of single texts.
        self.takes_pairs = bool(classifier.column_overrides.get("text_pair_column"))
        self.count = _token_counter(classifier.tokenizer, classifier.max_length)
        self.info = {"labels": classifier.labels.names, "label_kind": classifier.labels.kind,
                     "pairs": self.takes_pairs, "max_length": classifier.max_length,
                     "long_doc": classifier.long_doc.strategy, "temperature": classifier.temperature,
                     "abstain_below": classifier.abstain_below}

    @staticmethod
    def one(value, where: str) -> tuple[str, str | None]:
        if isinstance(value, str):
            return _filled(value, where), None
        if isinstance(value, dict):
            if set(value) - {"text", "text_pair"} or "text" not in value:
                raise InputError(f"{where}: an object input takes \"text\" (and \"text_pair\"), got "
                                 f"{sorted(value)}")
            pair = value.get("text_pair")
            return (_filled(value["text"], f"{where}.text"),
                    None if pair is None else _filled(pair, f"{where}.text_pair"))
        if isinstance(value, list) and len(value) in (1, 2):
            texts = [_filled(v, f"{where}[{i}]") for i, v in enumerate(value)]
            return texts[0], texts[1] if len(texts) == 2 else None
        raise InputError(f"{where} must be a text, [text], [text, text_pair] or {{\"text\", \"text_pair\"}}")

    def parse(self, inputs) -> list:
        if isinstance(inputs, list) and self.takes_pairs and len(inputs) == 2 and \
                all(isinstance(v, str) for v in inputs):
            inputs = [inputs]  # TEI: ["a", "b"] is one pair
        examples = [self.one(value, f"inputs[{i}]") for i, value in enumerate(_items(inputs))]
        if len({pair is None for _, pair in examples}) > 1:
            raise InputError("mixed inputs: give every input as a pair, or none")
        return examples

    def chars(self, example) -> int:
        return len(example[0]) + len(example[1] or "")

    def tokens(self, examples: list) -> list[int]:
        paired = examples[0][1] is not None
        return self.count([t for t, _ in examples], [p for _, p in examples] if paired else None)

    def predict(self, examples: list) -> list[dict]:
        from .tasks.classify import describe_prediction, predict_probabilities

        labels, records = self.predictor.labels, [None] * len(examples)
        for paired in (False, True):  # a batch may join requests of pairs and of single texts
            indices = [i for i, (_, pair) in enumerate(examples) if (pair is not None) == paired]
            if indices:
                probs = predict_probabilities(self.predictor, [examples[i][0] for i in indices],
                                              [examples[i][1] for i in indices] if paired else None)
                for i, row in zip(indices, probs):
                    records[i] = describe_prediction(row, labels, labels.threshold,
                                                     self.predictor.abstain_below)
        return records


class NerEndpoint:
    """Texts in (split into words as the run split them); entity spans with character offsets out."""

    name = "ner"

    def __init__(self, run_dir: str):
        from .tasks.ner import load_predictor

        self.predictor = tagger = load_predictor(run_dir)
        self.count = _token_counter(tagger.tokenizer, tagger.settings.max_length)
        self.info = {"entity_types": sorted({label.split("-", 1)[-1] for label in tagger.id2label.values()
                                             if label != "O"}), "max_length": tagger.settings.max_length}

    def parse(self, inputs) -> list:
        from .tasks.ner import Sentence, split_words

        sentences = []
        for i, value in enumerate(_items(inputs)):
            if isinstance(value, dict) and set(value) == {"text"}:
                value = value["text"]
            text = _filled(value, f"inputs[{i}]")
            offsets = split_words(text, self.predictor.settings.split)
            sentences.append(Sentence([text[a:b] for a, b in offsets], None, f"inputs[{i}]", text, offsets))
        return sentences

    def chars(self, sentence) -> int:
        return len(sentence.text)

    def tokens(self, sentences: list) -> list[int]:
        return self.count([sentence.text for sentence in sentences])

    def predict(self, sentences: list) -> list[dict]:
        from .tasks.ner import decode, entities_from_tags, predict_word_probabilities

        records = []
        for sentence, word_probs in zip(sentences, predict_word_probabilities(self.predictor, sentences)):
            tags, scores = decode(word_probs, self.predictor.id2label)
            records.append({"text": sentence.text, "entities": entities_from_tags(sentence, tags, scores)})
        return records


class QAEndpoint:
    """{question, context} in; the answer span with its offsets and score out (and the null score under v2)."""

    name = "qa"

    def __init__(self, run_dir: str):
        from .tasks.qa import load_predictor

        self.predictor = qa = load_predictor(run_dir)
        self.count = _token_counter(qa.tokenizer, 10**9)  # the context is cut into windows: every token costs
        self.info = {"max_length": qa.settings.max_length, "doc_stride": qa.settings.doc_stride}

    def parse(self, inputs) -> list:
        from .tasks.qa import QAExample

        examples = []
        for i, value in enumerate(_items(inputs)):
            where = f"inputs[{i}]"
            if not isinstance(value, dict) or not {"question", "context"} <= set(value) or \
                    set(value) - {"question", "context", "id"}:
                raise InputError(f"{where} must be {{\"question\", \"context\"}} (and an optional \"id\")")
            examples.append(QAExample(str(value.get("id", i)), _filled(value["question"], f"{where}.question"),
                                      _filled(value["context"], f"{where}.context"), [], where))
        return examples

    def chars(self, example) -> int:
        return len(example.question) + len(example.context)

    def tokens(self, examples: list) -> list[int]:
        return self.count([e.question for e in examples], [e.context for e in examples])

    def predict(self, examples: list) -> list[dict]:
        from .tasks.qa import predict_examples, prediction_record

        predictions = predict_examples(self.predictor, examples)
        return [prediction_record(e, p, self.predictor.settings.null_threshold) for e, p in zip(examples, predictions)]


class ChoiceEndpoint:
    """{context, question, options} in; the chosen option, its score and every option's probability out."""

    name = "choice"

    def __init__(self, run_dir: str):
        from .tasks.choice import load_predictor

        self.predictor = chooser = load_predictor(run_dir)
        self.count = _token_counter(chooser.tokenizer, chooser.settings.max_length)
        self.info = {"max_length": chooser.settings.max_length}

    def parse(self, inputs) -> list:
        from .tasks.choice import ChoiceExample

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

    def chars(self, example) -> int:
        return len(example.context) + len(example.question) + sum(len(o) for o in example.options)

    def tokens(self, examples: list) -> list[int]:
        return [sum(self.count([e.context] * len(e.options), [f"{e.question} {o}" for o in e.options]))
                for e in examples]

    def predict(self, examples: list) -> list[dict]:
        from .tasks.choice import predict_probabilities

        records = []
        for example, row in zip(examples, predict_probabilities(self.predictor, examples)):
            best = int(row.argmax())
            records.append({"question": example.question, "choice": best, "option": example.options[best],
                            "score": round(float(row[best]), 6), "probabilities": [round(float(p), 6) for p in row]})
        return records


class MaskedLMEndpoint:
    """Texts holding the mask token in; per mask, the likeliest tokens with their probabilities out."""

    name = "mlm"

    def __init__(self, run_dir: str):
        from .tasks.mlm import TOP_K, load_predictor

        self.predictor = predictor = load_predictor(run_dir)
        self.mask, self.top_k = predictor.tokenizer.mask_token, TOP_K
        self.count = _token_counter(predictor.tokenizer, predictor.settings.max_length)
        self.info = {"mask_token": self.mask, "top_k": TOP_K, "max_length": predictor.settings.max_length}

    def parse(self, inputs) -> list:
        texts = [_text(value, f"inputs[{i}]") for i, value in enumerate(_items(inputs))]
        for i, text in enumerate(texts):
            if self.mask not in text:
                raise InputError(f"inputs[{i}] holds no {self.mask}: nothing to fill")
        return texts

    def chars(self, text: str) -> int:
        return len(text)

    def tokens(self, texts: list) -> list[int]:
        return self.count(texts)

    def predict(self, texts: list) -> list[dict]:
        return [{"text": text, "masks": masks} for text, masks in zip(texts, self.predictor.top_tokens(texts,
                                                                                                        self.top_k))]


class EmbedEndpoint:
    """TEI's POST /embed on a sentence-transformers embedding folder (an embed run, a stock model such as
    all-MiniLM-L6-v2, or its ONNX export): texts in, one vector each out, exactly as `SentenceTransformer(path)
    .encode(texts, prompt_name=...)` gives it (the model's own pooling, Normalize module and saved prompts; without
    prompt_name its default_prompt_name, if any). normalize=true (TEI's default) L2-normalises the vectors;
    normalize=false gives them as the model outputs them (still unit length for a model that saved a Normalize
    module, as SentenceTransformer.encode does)."""

    name, route = "embed", "/embed"

    def __init__(self, run_dir: str):
        model = load_embedder(run_dir)
        self.predictor = _Holder(model)
        self.prompts = dict(getattr(model, "prompts", None) or {})
        self.default_prompt = getattr(model, "default_prompt_name", None)
        self.count = _token_counter(model.tokenizer, model.max_seq_length)
        self.info = {"dimension": model.get_embedding_dimension(), "max_length": model.max_seq_length,
                     "prompts": self.prompts, "default_prompt_name": self.default_prompt}

    def parse(self, body) -> list[tuple[str, str | None, bool]]:
        """(text, prompt name, normalize) per input."""
        name = body.prompt_name if body.prompt_name is not None else self.default_prompt
        if name is not None and name not in self.prompts:
            raise InputError(f"prompt_name {name!r}: this model's prompts are {sorted(self.prompts) or 'none'}")
        texts = [_filled(value, f"inputs[{i}]") for i, value in enumerate(_items(body.inputs))]
        return [(text, name, bool(body.normalize)) for text in texts]

    def chars(self, example) -> int:
        return len(example[0]) + len(self.prompts.get(example[1]) or "")

    def tokens(self, examples: list) -> list[int]:
        return self.count([(self.prompts.get(name) or "") + text for text, name, _ in examples])

    def predict(self, examples: list) -> list[list[float]]:
        import torch

        vectors = [None] * len(examples)
        for name in dict.fromkeys(name for _, name, _ in examples):  # a batch may join requests of several prompts
            indices = [i for i, example in enumerate(examples) if example[1] == name]
            encoded = torch.as_tensor(self.predictor.model.encode(
                [examples[i][0] for i in indices], prompt_name=name, batch_size=64, show_progress_bar=False,
                convert_to_tensor=True)).float().cpu()
            for i, vector in zip(indices, encoded):
                vectors[i] = torch.nn.functional.normalize(vector, dim=-1) if examples[i][2] else vector
        return [vector.tolist() for vector in vectors]


class RerankEndpoint:
    """TEI's POST /rerank on a reranker (a rerank run, a sentence-transformers CrossEncoder, or its ONNX export):
    a query and texts in; [{"index", "score"}] out, best first, the score as `CrossEncoder(path).predict` gives it
    (sigmoid of the logit; raw_scores=true: the logit)."""

    name, route = "rerank", "/rerank"

    def __init__(self, run_dir: str):
        from .tasks.rerank import load_predictor

        self.predictor = reranker = load_predictor(run_dir)
        self.count = _token_counter(reranker.tokenizer, reranker.max_length)
        self.info = {"max_length": reranker.max_length, "activation": "sigmoid"}

    def parse(self, body) -> list[tuple[str, str]]:
        query = _filled(body.query, "query")
        if not isinstance(body.texts, list) or not body.texts:
            raise InputError("texts must be a non-empty list of strings")
        texts = [_filled(value, f"texts[{i}]") for i, value in enumerate(body.texts)]
        return [(query, text) for text in texts]

    def chars(self, example) -> int:
        return len(example[0]) + len(example[1])

    def tokens(self, examples: list) -> list[int]:
        return self.count([q for q, _ in examples], [t for _, t in examples])

    def predict(self, examples: list) -> list[float]:
        from .tasks.rerank import predict_logits

        return [float(x) for x in predict_logits(self.predictor, [q for q, _ in examples], [t for _, t in examples])]

    @staticmethod
    def ranked(logits: list[float], texts: list[str], raw_scores: bool, return_text: bool) -> list[dict]:
        """TEI's answer: every text's index and score, highest score first."""
        def sigmoid(x: float) -> float:  # exp of -|x| only: math.exp(-x) overflowed below x = -709 (an error 500)
            small = math.exp(-abs(x))
            return 1 / (1 + small) if x >= 0 else small / (1 + small)

        scores = logits if raw_scores else [sigmoid(x) if math.isfinite(x) else x for x in logits]
        order = sorted(range(len(scores)), key=lambda i: -scores[i] if math.isfinite(scores[i]) else math.inf)
        return [{"index": i, "score": scores[i], **({"text": texts[i]} if return_text else {})} for i in order]


def load_embedder(model_dir: str):
    """The embedding model of a folder, at the precision `inference_precision` set: its ONNX export run by ONNX
    Runtime, or the folder loaded by sentence-transformers itself (its modules, pooling and prompts as saved: a
    stock folder, no trust_remote_code) and readied as predict readies a model (checkpoints.for_inference)."""
    from .checkpoints import LOAD_PRECISION, for_inference, weights_read
    from .onnx_model import is_onnx_export, load_onnx_embedder

    if is_onnx_export(model_dir):
        return load_onnx_embedder(model_dir, LOAD_PRECISION.get())
    from sentence_transformers import SentenceTransformer

    try:
        with weights_read(model_dir):
            model = SentenceTransformer(model_dir, device="cpu", local_files_only=True)
    except (OSError, ValueError, KeyError) as error:
        raise BertkitError(f"{model_dir}: sentence-transformers could not load this embedding model "
                           f"({str(error).splitlines()[0] if str(error) else type(error).__name__}) — give an embed "
                           "run's output_dir or a sentence-transformers model folder") from None
    return for_inference(model)


class _Holder:
    """What Server reads of a predictor: its `.model` (a SentenceTransformer, or an ONNX export's runner)."""

    def __init__(self, model):
        self.model = model


# Each task's endpoint: `parse(inputs) -> examples` (InputError: 422), `chars(example)` and `tokens(examples)` for
# the limits and the batch budget, `predict(examples) -> records` (what `bertkit predict` writes), `info`.
ENDPOINTS = {endpoint.name: endpoint for endpoint in (ClassifyEndpoint, NerEndpoint, QAEndpoint, ChoiceEndpoint,
                                                      MaskedLMEndpoint, EmbedEndpoint, RerankEndpoint)}


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
    from .tasks import task_of_model

    return ENDPOINTS[task_of_model(run_dir)](run_dir)


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
                     "endpoints": [getattr(self.endpoint, "route", "/predict")], "precision": self.runs_at,
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
        serves = getattr(self.endpoint, "route", "/predict")
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

    def shape(request: Request) -> str:
        return '{"query": ..., "texts": [...]}' if request.url.path == "/rerank" else '{"inputs": ...}'

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
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, Response
    from pydantic import BaseModel, ConfigDict

    server = Server(run_dir, precision, limits or Limits(), engine)

    class PredictRequest(BaseModel):  # TEI's shape; `truncate` is accepted: bertkit cuts texts as it trained
        model_config = ConfigDict(extra="forbid")
        inputs: Any
        truncate: bool = True

    class EmbedRequest(BaseModel):  # TEI's /embed; texts are cut at the model's max_seq_length as it encodes
        model_config = ConfigDict(extra="forbid")
        inputs: Any
        normalize: bool = True
        prompt_name: str | None = None
        truncate: bool = True
        truncation_direction: Literal["Right", "right"] = "Right"

    class RerankRequest(BaseModel):  # TEI's /rerank; pairs are cut as the reranker trained (longest first)
        model_config = ConfigDict(extra="forbid")
        query: Any
        texts: Any
        raw_scores: bool = False
        return_text: bool = False
        truncate: bool = True
        truncation_direction: Literal["Right", "right"] = "Right"

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

    @app.post("/predict")
    async def predict(body: PredictRequest, request: Request):
        refusal = server.wrong_route("/predict")
        return refusal if refusal is not None else await server.predict(body.inputs, request)

    @app.post("/embed")
    async def embed(body: EmbedRequest, request: Request):
        refusal = server.wrong_route("/embed")
        return refusal if refusal is not None else await server.predict(body, request)

    @app.post("/rerank")
    async def rerank(body: RerankRequest, request: Request):
        def ranked(logits):
            return RerankEndpoint.ranked(logits, body.texts, body.raw_scores, body.return_text)
        refusal = server.wrong_route("/rerank")
        return refusal if refusal is not None else await server.predict(body, request, finish=ranked)

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


__all__ = ["Limits", "InputError", "ENDPOINTS", "Batcher", "Stats", "Server", "create_app", "load_endpoint",
           "listening_socket", "serve", "require_serve"]
