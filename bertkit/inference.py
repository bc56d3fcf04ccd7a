"""What every task's predictor shares at inference time: the precision predict / evaluate run at, length-sorted
batches under a token budget, one padded batch through the model on its device, and its logits' softmax / sigmoid."""

from __future__ import annotations

import contextlib

import numpy as np
import torch

from .checkpoints import LOAD_PRECISION
from .families import takes_token_types
from .precision import INFERENCE_PRECISIONS, check_inference_precision, resolve_precision


def run_batch(model, batch):
    """The model's outputs for one padded batch, built on CPU and moved to the model's device. token_type_ids go
    only to a model that takes them (a tokenizer of one family may make them for a model of another that has none)."""
    takes_types = not hasattr(model, "forward") or takes_token_types(model)  # an ONNX export fills in zeros itself
    return model(**{key: value.to(model.device) for key, value in batch.items()
                    if key != "token_type_ids" or takes_types})


def softmax(logits) -> np.ndarray:
    """Probabilities over the last axis, in numpy (float32). Not torch: a torch op between ONNX Runtime's calls in a
    server's model thread cost a tenth of that thread's time and a quarter of its requests/s at 8 clients (MiniLM int8
    export, AMD EPYC, 2 cores; docs/notes.md)."""
    logits = np.asarray(logits, dtype=np.float32)
    exp = np.exp(logits - logits.max(-1, keepdims=True))
    return exp / exp.sum(-1, keepdims=True)


def sigmoid(logits) -> np.ndarray:
    """1 / (1 + exp(-x)) in numpy, in the logits' own float type, with no overflow far below 0 (exp(-x) is never
    formed)."""
    return np.exp(-np.logaddexp(0, -np.asarray(logits)))


@contextlib.contextmanager
def inference_precision(precision: str):
    """The precision predict / evaluate / serve run at: fp32 (exact; the default), bf16, fp16 (CUDA), or auto (bf16 or
    fp16 where the device runs it natively, else fp32) - what `precision` means for training too. Models loaded
    inside are readied for it (checkpoints.for_inference): bf16 casts them once, int8 quantizes their linear layers
    (dynamic, on CPU), and an ONNX export runs its int8 graph; autocast stays on around the calls (fp16's only
    mechanism, and for bf16 the fp32 losses and anything not loaded here)."""
    check_inference_precision(precision)
    token = LOAD_PRECISION.set(precision)
    try:
        if precision == "int8":
            yield
            return
        flags, _ = resolve_precision(precision)
        dtype = torch.bfloat16 if flags.get("bf16") else torch.float16 if flags.get("fp16") else None
        device_type = "cuda" if torch.cuda.is_available() else "cpu"
        with torch.autocast(device_type, dtype=dtype, enabled=dtype is not None):
            yield
    finally:
        LOAD_PRECISION.reset(token)


def resolved_precision(precision: str) -> tuple[str, str]:
    """What `precision` runs as on this device (fp32, bf16, fp16 or int8), and a sentence saying why."""
    check_inference_precision(precision)
    if precision == "int8":
        return "int8", "precision int8 (asked for)"
    flags, why = resolve_precision(precision)
    return ("bf16" if flags.get("bf16") else "fp16" if flags.get("fp16") else "fp32"), why


def token_budget_batches(lengths: list[int], max_tokens: int, max_rows: int) -> list[list[int]]:
    """Indices sorted by length, cut into batches whose padded size (rows x longest) stays within max_tokens."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    batches, current, longest = [], [], 0
    for index in order:
        longest_if_added = max(longest, lengths[index])
        if current and (len(current) + 1 > max_rows or (len(current) + 1) * longest_if_added > max_tokens):
            batches.append(current)
            current, longest_if_added = [], lengths[index]
        current.append(index)
        longest = longest_if_added
    return batches + ([current] if current else [])


__all__ = ["INFERENCE_PRECISIONS", "softmax", "sigmoid", "run_batch", "inference_precision", "resolved_precision",
           "token_budget_batches"]
