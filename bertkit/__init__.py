"""bertkit: a readable BERT reimplementation that plugs into the Hugging Face stack, plus fine-tuning recipes.

Importing bertkit registers its classes with transformers' Auto classes under model_type "bertkit", so
`AutoModelForSequenceClassification.from_config(BertkitConfig(...))` and friends build bertkit models.

`import bertkit` itself imports neither torch nor transformers (the `bertkit` command answers `--help`, `ls` or a
bad argument at once): the model classes below are imported on first use, and the registration happens the moment
transformers' Auto classes are imported (at once if they already are), so that no Auto class is ever used without it.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import os
import sys

__version__ = "0.1.0"

# name -> the module that defines it, imported when the name is first used (`from bertkit import BertkitModel`)
_MODEL_CLASSES = {
    "BertkitConfig": "configuration_bert",
    "BertkitPreTrainedModel": "modeling_bert",
    "BertkitModel": "modeling_bert",
    "BertkitForPreTraining": "modeling_bert",
    "BertkitForMaskedLM": "modeling_bert",
    "BertkitForSequenceClassification": "modeling_bert",
    "BertkitForTokenClassification": "modeling_bert",
    "BertkitForQuestionAnswering": "modeling_bert",
    "BertkitForMultipleChoice": "modeling_bert",
}

_AUTO_MODULE = "transformers.models.auto"  # every transformers Auto class lives under it


def __getattr__(name: str):
    if name in _MODEL_CLASSES:
        return getattr(importlib.import_module(f"{__name__}.{_MODEL_CLASSES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_MODEL_CLASSES))


def _register_with_transformers() -> None:
    """modeling_bert registers its classes with the Auto classes at its end. If it is half-imported (it is what
    imported transformers), import_module returns it as it is, and its own last lines still register."""
    _name_the_cpu_for_deepspeed()
    importlib.import_module(f"{__name__}.modeling_bert")


def _name_the_cpu_for_deepspeed() -> None:
    """DeepSpeed picks its accelerator when first imported (transformers imports it wherever it is installed) and,
    finding none, warns on every import that it fell back to the CPU. Where torch sees no accelerator the CPU is the
    only choice: name it, so that the warning does not reach the console of every run on a CPU machine."""
    if "DS_ACCELERATOR" in os.environ:
        return
    import torch

    accelerator = getattr(torch, "accelerator", None)  # torch >= 2.6
    if not (accelerator.is_available() if accelerator else torch.cuda.is_available()):
        os.environ["DS_ACCELERATOR"] = "cpu"


def _initializing(name: str) -> bool:
    module = sys.modules.get(name)
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


class _RegisterWithAutoClasses(importlib.abc.MetaPathFinder):
    """Finds nothing itself: it lets the other finders find each transformers module and has its loader check, once
    the module has run, whether transformers' Auto classes are loaded and no transformers module is still half-
    imported (modeling_bert needs them whole). Then bertkit registers, and this finder leaves sys.meta_path."""

    def find_spec(self, name, path, target=None):
        if name.partition(".")[0] != "transformers":
            return None
        spec = next((found for finder in sys.meta_path if finder is not self and hasattr(finder, "find_spec")
                     for found in [finder.find_spec(name, path, target)] if found is not None), None)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run_module = spec.loader.exec_module

        def exec_module(module):
            run_module(module)
            self.register_when_ready(name)

        spec.loader.exec_module = exec_module
        return spec

    def register_when_ready(self, just_run: str) -> None:
        if self not in sys.meta_path or _AUTO_MODULE not in sys.modules:
            return
        if any(name != just_run and name.partition(".")[0] == "transformers" and _initializing(name)
               for name in list(sys.modules)):
            return  # the outermost transformers import has not finished: this check runs again at its end
        sys.meta_path.remove(self)
        _register_with_transformers()


if _AUTO_MODULE in sys.modules:
    _register_with_transformers()
elif not any(isinstance(finder, _RegisterWithAutoClasses) for finder in sys.meta_path):
    sys.meta_path.insert(0, _RegisterWithAutoClasses())

__all__ = list(_MODEL_CLASSES)
