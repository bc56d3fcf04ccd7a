"""The tasks bertkit fine-tunes and serves, and the one table that maps a saved architecture to its task.

Each task is a module (or a package) `bertkit.tasks.<name>` whose `__all__` starts with the same seven names, in
this order (`INTERFACE`): read its files, encode them into model rows, its metrics, the inference settings a run
saves beside the model (a dataclass), load a predictor, predict a file, evaluate a file. Task modules sit above the
model and the data readers and below the Trainer wiring: they import nothing from `bertkit.training`. Beside the
tasks lie the pieces they are built from: long_documents (windows over long documents and their aggregation, and the
one sliding-window rule NER's long sentences follow too), ner_files (CoNLL / JSONL files into sentences of words) and
ner_tag_schemes (IOB2, IOB1, BIOES).
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

INTERFACE = ("read_examples", "encode", "compute_metrics_fn", "Settings", "load_predictor", "predict_file",
             "evaluate_file")
SETTINGS_KEY = "bertkit_task_settings"  # config.json key holding a task's Settings, saved with the model


@dataclass(frozen=True)
class Task:
    name: str
    """Module under bertkit.tasks, and the recipe that fine-tunes it."""
    suffix: str
    """End of the architecture name in config.json, e.g. ForSequenceClassification."""
    pipeline_tag: str
    """The Hub's pipeline tag for a model card."""
    auto_class: str
    """The transformers Auto class that loads such a checkpoint."""
    peft_task_type: str | None = None
    """peft's task_type for an adapter on this head (adapter folders carry no architecture)."""


TASKS = (
    Task("classify", "ForSequenceClassification", "text-classification", "AutoModelForSequenceClassification",
         "SEQ_CLS"),
    # long_doc.aggregate=attention (bertkit/modeling_document.py): stock transformers loads it as the sequence head
    Task("classify", "ForDocumentClassification", "text-classification", "AutoModelForSequenceClassification",
         "SEQ_CLS"),
    Task("ner", "ForTokenClassification", "token-classification", "AutoModelForTokenClassification", "TOKEN_CLS"),
    Task("qa", "ForQuestionAnswering", "question-answering", "AutoModelForQuestionAnswering", "QUESTION_ANS"),
    Task("choice", "ForMultipleChoice", "multiple-choice", "AutoModelForMultipleChoice"),
    Task("mlm", "ForMaskedLM", "fill-mask", "AutoModelForMaskedLM"),
    Task("mlm", "ForPreTraining", "fill-mask", "AutoModelForPreTraining"),
)


# Tasks whose model another library saves and loads, told by that library's files (sentence_transformers_kind), not
# by an architecture in TASKS: a SetFit model, a sentence-transformers embedding model and a cross-encoder
LIBRARY_TASKS = ("fewshot", "embed", "rerank")
# Tasks whose training rows `bertkit audit` checks for wrong labels (their module's Audit, on tasks/label_issues.py)
AUDITED = ("classify", "ner")
# Tasks whose training file is a table of texts with labels, what `bertkit inspect` reads and reports on (label counts,
# lengths, truncation); NER's CoNLL, QA's SQuAD JSON and MLM's corpora have readers of their own
INSPECTED = ("classify", "fewshot")
# Tasks whose predict ranks a corpus (--corpus, --top-k: their module's predict_top_k) and whose predict / evaluate
# take --retriever (the first stage: bertkit/tasks/first_stage.py; a reranker refuses it, re-ranking its run's own)
CORPUS_RANKERS = ("embed", "rerank")
RETRIEVERS = ("dense", "bm25", "hybrid")  # the first stages (bertkit/tasks/first_stage.py)
# The route `bertkit serve` answers a task's model on: Text Embeddings Inference's own for embeddings and reranking,
# TEI's POST /predict for the rest (each task's Endpoint: bertkit/tasks/serving.py)
ROUTES = {"embed": "/embed", "rerank": "/rerank"}


def route_of(task: str) -> str:
    return ROUTES.get(task, "/predict")


def task_names() -> list[str]:
    """Every task, by its module under bertkit.tasks (the table's rows and the retrieval tasks)."""
    return list(dict.fromkeys([*(task.name for task in TASKS), *LIBRARY_TASKS, *ROUTES, *CORPUS_RANKERS]))


def task_part(name: str, part: str):
    """`part` of task `name`'s module (a function or class it offers), or None when it has none or `name` is not a
    task (a recipe such as distill): how a tool asks a task for what only some tasks have."""
    if name not in task_names():
        return None
    return getattr(task_module(name), part, None)


def served_routes() -> list[str]:
    """Every route `bertkit serve` knows: the model's own answers, the others say which one does."""
    return list(dict.fromkeys(["/predict", *ROUTES.values()]))


def task_of_architecture(architecture: str | None) -> Task | None:
    """The task of a config.json architecture ('BertForTokenClassification' -> ner), None for a bare encoder."""
    return next((task for task in TASKS if architecture and architecture.endswith(task.suffix)), None)


def task_of_peft(task_type: str | None) -> Task | None:
    """The task of a peft adapter_config.json task_type ('SEQ_CLS' -> classify)."""
    return next((task for task in TASKS if task_type and task.peft_task_type == task_type), None)


def task_module(name: str) -> ModuleType:
    """bertkit.tasks.<name>, imported on first use (the CLI loads only the task it runs)."""
    return importlib.import_module(f"{__name__}.{name}")


def module_for_model(model_dir: str) -> ModuleType:
    """The task module that predicts / evaluates (and serves) the fine-tuned model in `model_dir` (task_of_model)."""
    return task_module(task_of_model(model_dir))


def task_of_model(model_dir: str) -> str:
    """The task of the fine-tuned model in `model_dir`, by its saved architecture (TASKS, the one table), read from
    its files without importing the task; a directory that holds no fine-tuned head is one line saying what to give."""
    from pathlib import Path

    from bertkit.errors import BertkitError
    from bertkit.rundir import model_task

    if not Path(model_dir).is_dir():
        raise BertkitError(f"model directory {model_dir} does not exist — give the output_dir of a bertkit run")
    if not (Path(model_dir) / "config.json").is_file():
        raise BertkitError(f"{model_dir} holds no model (no config.json) — give the output_dir of a bertkit run")
    retrieval = sentence_transformers_kind(model_dir)
    if retrieval is not None:  # before the table: a reranker's architecture is a sequence classifier's
        return retrieval
    architecture = model_task(model_dir)
    task = task_of_architecture(architecture)
    if task is None:
        names = task_names()
        raise BertkitError(f"{model_dir} holds a {architecture or 'model without architectures'} checkpoint, which "
                           f"predict, evaluate, serve and export cannot use — give a model trained by "
                           f"{', '.join(names[:-1])} or {names[-1]}")
    return task.name


def sentence_transformers_kind(model_dir: str) -> str | None:
    """The LIBRARY_TASKS task of a folder: "fewshot" for a SetFit model (a sentence-transformers body beside
    config_setfit.json and its head), "rerank" for a sentence-transformers CrossEncoder folder, "embed" for a
    SentenceTransformer (bi-encoder) one, None for anything else. sentence-transformers 6 writes modules.json for
    both of its kinds and tells them apart in config_sentence_transformers.json's `model_type` (a bi-encoder saved by
    older versions has none); a CrossEncoder saved by sentence-transformers 3-5 has no modules.json but a
    `sentence_transformers` key in config.json."""
    import json
    from pathlib import Path

    folder = Path(model_dir)

    def read(name: str) -> dict:
        try:
            data = json.loads((folder / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    if (folder / "config_setfit.json").is_file():
        return "fewshot"
    kind = read("config_sentence_transformers.json").get("model_type")
    if kind == "CrossEncoder" or "sentence_transformers" in read("config.json"):
        return "rerank"
    if (folder / "modules.json").is_file() and kind in (None, "SentenceTransformer"):
        return "embed"
    return None


def no_confidence_cut(min_confidence: float | None, task: str) -> None:
    """predict_file's `min_confidence` (`predict --min-confidence`) is the classifiers' abstention: the other tasks
    take the argument, to keep one interface, and refuse a value in one line."""
    if min_confidence is not None:
        from bertkit.errors import BertkitError

        raise BertkitError(f"--min-confidence is for classifiers, and this is a {task} model — leave "
                           "--min-confidence out")


def check_min_confidence(value: float | None, kind: str, where: str = "--min-confidence") -> None:
    """A confidence cut is a probability strictly between 0 and 1, and needs a classifier."""
    from bertkit.errors import BertkitError

    if value is None:
        return
    if not 0 < value < 1:
        raise BertkitError(f"{where}={value:g} is not a confidence: give a probability between 0 and 1, e.g. 0.7")
    if kind == "regression":
        raise BertkitError(f"{where}: a regression model has no confidence to abstain on — leave {where} out")


def settings_dict(settings: Any) -> dict:
    """A task's Settings as the plain dict saved under SETTINGS_KEY in config.json."""
    return dataclasses.asdict(settings)


def read_settings(settings_cls: type, model_config: Any, source: str) -> Any:
    """A task's Settings from a model config (a PretrainedConfig or config.json's dict), typed as a recipe config
    is (a bad value names `bertkit_task_settings.<key>` and the file) and then checked by its `check()`, here for
    every task, so that no caller can serve a model under settings that cannot work. A model that saved none (a
    stock checkpoint) gets the defaults."""
    from bertkit.config import build_config

    saved = (model_config.get(SETTINGS_KEY) if isinstance(model_config, dict)
             else getattr(model_config, SETTINGS_KEY, None))
    data = saved if saved is not None else {}
    settings = build_config(settings_cls, data, source, prefix=SETTINGS_KEY if saved is not None else "")
    settings.check()
    return settings


__all__ = ["INTERFACE", "SETTINGS_KEY", "Task", "TASKS", "LIBRARY_TASKS", "AUDITED", "CORPUS_RANKERS", "RETRIEVERS",
           "ROUTES", "route_of",
           "task_names", "task_part", "served_routes", "task_of_architecture",
           "task_of_peft", "task_module",
           "module_for_model", "task_of_model", "sentence_transformers_kind", "no_confidence_cut",
           "check_min_confidence", "settings_dict", "read_settings"]
