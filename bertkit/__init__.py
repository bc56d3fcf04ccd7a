"""bertkit: a readable BERT reimplementation that plugs into the Hugging Face stack, plus fine-tuning recipes.

Importing bertkit registers its classes with transformers' Auto classes under model_type "bertkit", so
`AutoModelForSequenceClassification.from_config(BertkitConfig(...))` and friends build bertkit models.
"""

import os

import torch
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForMaskedLM,
    AutoModelForMultipleChoice,
    AutoModelForPreTraining,
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
)

from .configuration_bert import BertkitConfig
from .modeling_bert import (
    BertkitForMaskedLM,
    BertkitForMultipleChoice,
    BertkitForPreTraining,
    BertkitForQuestionAnswering,
    BertkitForSequenceClassification,
    BertkitForTokenClassification,
    BertkitModel,
    BertkitPreTrainedModel,
)

__version__ = "0.1.0"

# DeepSpeed picks its accelerator when first imported (transformers imports it wherever it is installed) and, finding
# none, warns on every import that it fell back to the CPU. Where torch sees no accelerator the CPU is the only choice:
# name it, so that the warning does not reach the console of every run on a CPU machine with bertkit[deepspeed].
_accelerator = getattr(torch, "accelerator", None)  # torch >= 2.6
_has_accelerator = _accelerator.is_available() if _accelerator else torch.cuda.is_available()
if "DS_ACCELERATOR" not in os.environ and not _has_accelerator:
    os.environ["DS_ACCELERATOR"] = "cpu"

_AUTO_CLASSES = {
    AutoModel: BertkitModel,
    AutoModelForPreTraining: BertkitForPreTraining,
    AutoModelForMaskedLM: BertkitForMaskedLM,
    AutoModelForSequenceClassification: BertkitForSequenceClassification,
    AutoModelForTokenClassification: BertkitForTokenClassification,
    AutoModelForQuestionAnswering: BertkitForQuestionAnswering,
    AutoModelForMultipleChoice: BertkitForMultipleChoice,
}


def _register_with_transformers():
    AutoConfig.register(BertkitConfig.model_type, BertkitConfig, exist_ok=True)
    for auto_class, model_class in _AUTO_CLASSES.items():
        auto_class.register(BertkitConfig, model_class, exist_ok=True)


_register_with_transformers()

__all__ = [
    "BertkitConfig",
    "BertkitPreTrainedModel",
    "BertkitModel",
    "BertkitForPreTraining",
    "BertkitForMaskedLM",
    "BertkitForSequenceClassification",
    "BertkitForTokenClassification",
    "BertkitForQuestionAnswering",
    "BertkitForMultipleChoice",
]
