"""Encoder families: which implementation runs a checkpoint, decided in one place from config.json's `model_type`.

BERT checkpoints (bert-base-*, bert-base-chinese, chinese-roberta-wwm-ext and MacBERT, which are BERT inside, bge,
MiniLM) run on bertkit's own classes and their unpadded path. The other encoder families run through transformers'
own `AutoModelFor<Task>` classes behind the same recipes: a checkpoint is never loaded into a class of another
architecture (transformers would warn once and start every missing weight at random). Anything that is not a
bidirectional encoder is refused before anything is built, in one line naming its model_type.

    family_of(config)              -> Family (or BertkitError: a decoder, an encoder-decoder, an unknown type)
    model_class(config, Bertkit*)  -> the bertkit class for BERT, else transformers' AutoModelFor<Task>
    position_limit(config)         -> tokens per sequence the model's positions allow
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass

import transformers

from .errors import BertkitError


@dataclass(frozen=True)
class Family:
    model_type: str
    """config.json's model_type."""
    name: str
    """What people call it."""
    examples: str
    """Checkpoints of this family on the Hub."""
    implementation: str = "transformers"
    """"bertkit" (bertkit's own BERT) or "transformers" (transformers' AutoModelFor<Task>)."""
    caveat: str = ""
    """A known trap of the family, said when it applies (README's family table lists them all)."""
    fp16_overflows: bool = False
    """fp16 overflows in its attention: precision=fp16 is refused, bf16 or fp32 offered."""
    shared_layers: bool = False
    """One layer's weights are shared across depth (ALBERT): layer-wise decay sees a single layer."""
    lora_targets: tuple[str, ...] = ("query", "value")
    """The attention projections LoRA wraps when lora.target_modules is left at its default (query, value)."""


FAMILIES = {family.model_type: family for family in (
    Family("bert", "BERT", "bert-base-uncased, bert-base-chinese, chinese-roberta-wwm-ext, MacBERT, MiniLM, bge-*-v1.5",
           implementation="bertkit"),
    Family("bertkit", "BERT (saved by bertkit)", "a bertkit run directory", implementation="bertkit"),
    Family("roberta", "RoBERTa", "FacebookAI/roberta-base"),
    Family("xlm-roberta", "XLM-RoBERTa", "FacebookAI/xlm-roberta-base, BAAI/bge-m3"),
    Family("deberta-v2", "DeBERTa-v2/v3", "microsoft/deberta-v3-base",
           caveat="overflows in fp16 (microsoft/DeBERTa#77): use bf16 or fp32", fp16_overflows=True,
           lora_targets=("query_proj", "value_proj")),
    Family("electra", "ELECTRA", "google/electra-base-discriminator, hfl/chinese-electra-180g-base-discriminator"),
    Family("distilbert", "DistilBERT", "distilbert-base-uncased", caveat="no token types: pairs are one segment",
           lora_targets=("q_lin", "v_lin")),
    Family("albert", "ALBERT", "albert-base-v2",
           caveat="one layer's weights shared across depth: llrd sees one layer", shared_layers=True),
    Family("ernie", "ERNIE", "nghuyong/ernie-3.0-base-zh"),
    Family("modernbert", "ModernBERT", "answerdotai/ModernBERT-base, jhu-clsp/mmBERT-base",
           caveat="bf16 NaN losses reported in classification (ModernBERT#227): a NaN loss stops the run",
           lora_targets=("Wqkv",)),  # query, key and value in one fused projection
)}

def _model_type(config) -> str | None:
    return config.get("model_type") if isinstance(config, dict) else getattr(config, "model_type", None)


def supported() -> str:
    return ", ".join(family.name for t, family in FAMILIES.items() if t != "bertkit")


def family_of(config, source: str = "the model") -> Family:
    """The family of a checkpoint's config (config.json's dict or a PretrainedConfig); anything bertkit does not
    fine-tune is refused in one line naming its model_type and what it is."""
    model_type = _model_type(config)
    if model_type in FAMILIES:
        return FAMILIES[model_type]
    what = _what_it_is(model_type)
    raise BertkitError(f"{source} has {f'model_type {model_type!r}' if model_type else 'no model_type'} in its "
                       f"config.json{what} — bertkit fine-tunes bidirectional encoders: {supported()}; give a "
                       "checkpoint of one of those")


def _what_it_is(model_type: str | None) -> str:
    """Why a model_type is refused, from transformers' own Auto tables."""
    from transformers.models.auto import modeling_auto as auto

    if not model_type:
        return ""
    if model_type in auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES:
        return ", an encoder-decoder model"
    if model_type in auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        return ", an encoder bertkit has not been tested with"
    if model_type in auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return ", a decoder-only language model"
    if model_type in transformers.CONFIG_MAPPING:
        return ", which is not a text encoder (a vision, audio or multimodal model)"
    return ", a model_type transformers does not know"


def implementation_for(config, source: str = "the model") -> str:
    """"bertkit" or "transformers": the implementation that runs a checkpoint of this config (refusals as
    `family_of`)."""
    return family_of(config, source).implementation


def model_class(config, bertkit_class: type) -> type:
    """The class that loads a checkpoint of `config` for the task `bertkit_class` stands for: the bertkit class
    itself for BERT, else transformers' AutoModelFor<Task> (BertkitForTokenClassification -> AutoModelForToken-
    Classification). A bertkit-only head (the document model) is refused for another family."""
    if implementation_for(config) == "bertkit":
        return bertkit_class
    if bertkit_class.__name__ in BERTKIT_ONLY_HEADS:
        setting, instead = BERTKIT_ONLY_HEADS[bertkit_class.__name__]
        raise BertkitError(f"{setting} runs on bertkit's own BERT only, and this is a {family_of(config).name} "
                           f"checkpoint — {instead}")
    return getattr(transformers, f"AutoModel{bertkit_class.__name__.removeprefix('Bertkit')}")


# Heads bertkit has and transformers has not -> the setting that asks for one, and what to do with another family.
BERTKIT_ONLY_HEADS = {
    "BertkitForDocumentClassification": ("long_doc.aggregate=attention",
                                         "use long_doc.aggregate=mean or max (windows classified, then combined)"),
}


def is_bertkit(model) -> bool:
    """Whether a built model is bertkit's own BERT (its unpadded path, its tricks) rather than transformers'."""
    return family_of(model.config).implementation == "bertkit"


def takes_token_types(model) -> bool:
    """Whether a model's forward takes token_type_ids (DistilBERT's and ModernBERT's do not); a tokenizer of one
    family may make them for a model that has none. inspect.signature follows the decorators' __wrapped__."""
    return "token_type_ids" in inspect.signature(model.forward).parameters


def check_fp16(config, fp16: bool) -> None:
    """A family that overflows in fp16 (DeBERTa-v3) is refused fp16 training before any step, whether fp16 was
    asked for or chosen by precision=auto on a GPU without bf16."""
    family = family_of(config)
    if fp16 and family.fp16_overflows:
        raise BertkitError(f"{family.name} {family.caveat} — set precision=bf16 (a GPU with bf16, or CPU) or "
                           "precision=fp32")


def position_limit(config) -> int:
    """Tokens per sequence the position table allows: RoBERTa-style tables start after the padding index (514
    entries hold 512 positions)."""
    limit = config.max_position_embeddings
    if _model_type(config) in ("roberta", "xlm-roberta", "camembert"):
        limit -= (config.pad_token_id or 0) + 1
    return limit


def num_layers(config) -> int | None:
    """Encoder layers as the weights hold them (a config.json dict or a PretrainedConfig): ALBERT keeps
    num_hidden_groups layers shared across its depth; DistilBERT's config.json calls them n_layers."""
    get = config.get if isinstance(config, dict) else lambda key, default=None: getattr(config, key, default)
    if family_of(config).shared_layers:
        return get("num_hidden_groups", 1)
    return get("num_hidden_layers", get("n_layers"))


# Encoder layer N in parameter names: bert.encoder.layer.N, roberta.encoder.layer.N, distilbert.transformer.layer.N,
# model.layers.N (ModernBERT), albert.encoder.albert_layer_groups.N.
LAYER_INDEX = re.compile(r"\.(?:layer|layers|albert_layer_groups)\.(\d+)\.")


def layer_of(parameter_name: str) -> int | None:
    """The encoder layer a parameter belongs to, None outside the layers."""
    match = LAYER_INDEX.search(f".{parameter_name}")
    return int(match.group(1)) if match else None


__all__ = ["Family", "FAMILIES", "family_of", "implementation_for", "model_class", "is_bertkit",
           "takes_token_types", "check_fp16", "position_limit", "num_layers", "LAYER_INDEX", "layer_of", "supported"]
