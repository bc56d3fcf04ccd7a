"""What every task's served endpoint shares: the interface `bertkit serve` asks of a task (`Endpoint`), the error a
request input gets (`InputError`: 422), and the checks of a request's texts.

Each task module defines `class Endpoint(serving.Endpoint)`; bertkit/serve.py loads the one of the model it serves
(`tasks.module_for_model(run_dir).Endpoint(run_dir)`) and knows nothing of any task:

    endpoint = Endpoint(run_dir)         the task's predictor loaded, `info` (for GET /info) filled
    endpoint.route                       the route it answers on: "/predict" (TEI's shape), or its own (/embed, /rerank)
    endpoint.request_model()             the pydantic model of a request body on that route (its OpenAPI schema)
    endpoint.parse(endpoint.inputs_of(body))  -> examples (InputError: 422 naming the input)
    endpoint.chars(example), endpoint.tokens(examples)   for the limits and the batch's token budget
    endpoint.predict(examples)           -> one record per example: what `bertkit predict` writes per row
    endpoint.answer(body, records)       -> the response body (default: the records; /rerank sorts them)

`bertkit app`'s Try page asks the same Endpoint: `form` (its fields), `many` (those given one per line), `spans_in`
(the field an answer's offsets point into), `body_of(values)` (a request body from them) and `try_it(values)`.
"""

from __future__ import annotations

from typing import Any

from . import route_of


class InputError(ValueError):
    """A request input the task cannot take: answered 422 with this message."""


def text(value, where: str) -> str:
    if not isinstance(value, str):
        raise InputError(f"{where} must be a string, got {type(value).__name__}")
    return value


def filled(value, where: str) -> str:
    """A text the task needs words in: an empty (or blank) one is refused, as `bertkit run` refuses it in training
    data, instead of answered with a guess."""
    if not text(value, where).strip():
        raise InputError(f"{where} is empty — give it some text (training refuses empty texts too)")
    return value


def items(inputs) -> list:
    """A request's inputs as a list: one input (a string or an object) or a list of them."""
    return list(inputs) if isinstance(inputs, list) else [inputs]


def token_counter(tokenizer, max_length: int):
    """count(firsts, seconds=None) -> tokens per text (or pair), truncated as the model reads them."""
    def count(firsts: list[str], seconds: list[str] | None = None) -> list[int]:
        encoded = tokenizer(firsts, seconds, truncation=True, max_length=max_length) if seconds else \
            tokenizer(firsts, truncation=True, max_length=max_length)
        return [len(ids) for ids in encoded["input_ids"]]
    return count


class Endpoint:
    """The default of a task's endpoint: TEI's POST /predict, `{"inputs": one input or a list, "truncate"}`."""

    name = ""
    """The task's name (its module under bertkit.tasks)."""
    shape = '{"inputs": ...}'
    """A valid body in a few characters, for the 422 of one that is not."""
    predictor: Any = None
    info: dict = {}

    @property
    def route(self) -> str:
        return route_of(self.name)

    @staticmethod
    def request_model():
        from pydantic import BaseModel, ConfigDict

        class PredictRequest(BaseModel):  # TEI's shape; `truncate` is accepted: bertkit cuts texts as it trained
            model_config = ConfigDict(extra="forbid")
            inputs: Any
            truncate: bool = True

        return PredictRequest

    @staticmethod
    def inputs_of(body):
        return body.inputs

    @staticmethod
    def answer(body, records: list) -> list:
        return records

    # ---- what `bertkit app`'s Try page asks for and shows

    form: tuple[str, ...] = ("text",)
    """The fields the Try page asks for, in order."""
    many: tuple[str, ...] = ()
    """Those of `form` that take one text per line (the Try page gives them as a list)."""
    spans_in: str | None = None
    """The field of `form` that an answer's character offsets (start, end) point into: the Try page marks them."""

    def body_of(self, values: dict) -> dict:
        """A request body on this route from the Try page's fields."""
        return {"inputs": [values["text"]]}

    def try_it(self, values: dict) -> list:
        """What the route answers for the Try page's fields, through the same parse and checks as a request."""
        body = self.request_model()(**self.body_of(values))
        return self.answer(body, self.predict(self.parse(self.inputs_of(body))))


__all__ = ["InputError", "text", "filled", "items", "token_counter", "Endpoint"]
