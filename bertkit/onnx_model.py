"""An ONNX export (`bertkit export`) run by ONNX Runtime behind the interface predict / evaluate use of a PyTorch
model: which head a directory holds, the files an export writes, and loading its fp32 or int8 graph. Writing an
export is bertkit/export.py; this is what serving one needs."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

import numpy as np
import torch
import transformers

from . import speed
from .errors import BertkitError, require_packages
from .families import implementation_for
from .modeling_bert import (BertkitForMultipleChoice, BertkitForQuestionAnswering, BertkitForSequenceClassification,
                            BertkitForTokenClassification)
from .rundir import RECORD_FILE, model_task, read_config_json

ONNX_FILE = "model.onnx"
INT8_FILE = "model_int8.onnx"
EXPORT_FILE = "onnx_export.json"
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
PAD_LOGIT = -1e4  # a per-token output at a padding position the graph was not run on
PARITY_TOLERANCE = 1e-4  # max abs difference of the fp32 export's outputs from PyTorch's


@dataclass(frozen=True)
class Head:
    """A fine-tuned head: its class, the recipe (and task, bertkit/tasks) that trains it, its output tensors, and
    whether inputs are (B, N choices, T) instead of (B, T)."""

    model_class: type
    recipe: str
    outputs: tuple[str, ...]
    choices: bool = False
    per_token: bool = False  # outputs (B, T, ...) rather than (B, ...)



@dataclass
class TaskGraph:
    """What `bertkit export` writes for a model whose task puts more than its transformers head in the graph (a task
    module's `onnx_graph(run_dir)`: an embedding model's pooling and normalisation)."""

    model: torch.nn.Module
    head: Head
    summary: dict = field(default_factory=dict)
    """Keys onnx_export.json adds for the export's runner."""
    check: Callable[[Path], dict] | None = None
    """The written export (run as predict runs it) against the reference: {name: max abs difference}."""
    dev_metrics: bool = True
    """Whether export measures the run's dev file through the graph (a first stage measures itself)."""
    files: tuple[str, ...] = ()
    """The run's files the export's runner needs beside the graph (a few-shot model's head)."""


HEADS = {
    "ForSequenceClassification": Head(BertkitForSequenceClassification, "classify", ("logits",)),
    "ForTokenClassification": Head(BertkitForTokenClassification, "ner", ("logits",), per_token=True),
    "ForQuestionAnswering": Head(BertkitForQuestionAnswering, "qa", ("start_logits", "end_logits"), per_token=True),
    "ForMultipleChoice": Head(BertkitForMultipleChoice, "choice", ("logits",), choices=True),
}


def require_onnx() -> None:
    """ONNX Runtime, onnx and onnxscript importable, or one line saying how to install them."""
    require_packages(("onnxruntime", "onnx", "onnxscript"), "ONNX export and ONNX Runtime inference", "onnx")


def head_of(model_dir: str | Path) -> Head:
    architecture = model_task(model_dir) or ""
    for suffix, head in HEADS.items():
        if architecture.endswith(suffix):
            return head
    raise BertkitError(f"{model_dir} holds a {architecture or 'model without architectures'} checkpoint — export "
                       "needs a model fine-tuned by classify, ner, qa, choice, distill, embed or rerank")


def is_onnx_export(model_dir: str | Path) -> bool:
    return (Path(model_dir) / EXPORT_FILE).is_file()


def check_graphs(export_dir: str | Path) -> None:
    """Every graph file an export lists there, and as long as the export wrote it (its completion record says): a
    copy cut short is named as such, before anything else about the directory is judged."""
    export_dir = Path(export_dir)
    try:
        files = json.loads((export_dir / EXPORT_FILE).read_text(encoding="utf-8")).get("files", {})
        recorded = json.loads((export_dir / RECORD_FILE).read_text(encoding="utf-8")).get("files", {}) \
            if (export_dir / RECORD_FILE).is_file() else {}
    except (ValueError, AttributeError):
        return  # an unreadable record or export file: the finished-run check says so
    for name in files.values() if isinstance(files, dict) else []:
        path, size = export_dir / name, (recorded.get(name) or {}).get("size")
        if not path.is_file():
            raise BertkitError(f"{path} is missing from the ONNX export {export_dir} — export again: bertkit export "
                               "RUN_DIR")
        if isinstance(size, int) and path.stat().st_size != size:
            raise BertkitError(f"{path} is {path.stat().st_size:,} bytes, and the export wrote {size:,}: it is "
                               "truncated or damaged (an interrupted copy?) — copy it again, or export again: "
                               "bertkit export RUN_DIR")


# Rows of similar real length run together, padded to the longest of their group, which is at most this much longer
# than the shortest: one call per exact length left a batch of 64 sentences in ~33 calls of one or two rows, and a
# group that stretches 15 % + 2 tokens ran 2.3-2.5 ms per sentence against 2.8-2.9 (MiniLM int8, AMD EPYC).
GROUP_STRETCH, GROUP_SLACK = 1.15, 2


def length_groups(mask: np.ndarray) -> list[tuple[np.ndarray, int]] | None:
    """(row indices, length to run them at) for groups of rows of similar real length, when every row's mask is a
    prefix of ones (right padding, as BERT tokenizers pad); None otherwise (the batch then runs as it is)."""
    lengths = mask.sum(-1)
    if not (mask == (np.arange(mask.shape[-1]) < lengths[:, None])).all():
        return None
    order, groups, start = np.argsort(lengths, kind="stable"), [], 0
    for end in range(1, len(order) + 1):
        if end == len(order) or lengths[order[end]] > lengths[order[start]] * GROUP_STRETCH + GROUP_SLACK:
            groups.append((np.sort(order[start:end]), int(lengths[order[end - 1]])))
            start = end
    return groups


def session(path: str | Path, threads: int | None = None):
    """An ONNX Runtime CPU session on as many threads as torch uses (one per core, or what --threads set)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads or torch.get_num_threads()
    try:
        return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as error:  # noqa: BLE001 - onnxruntime's InvalidProtobuf / Fail / InvalidGraph: a bad file
        if not Path(path).is_file() or type(error).__module__.split(".")[0] != "onnxruntime":
            raise
        first = (str(error).splitlines() or [""])[0][:160]
        raise BertkitError(f"{path} cannot be read by ONNX Runtime ({type(error).__name__}: {first}): it is "
                           "truncated or damaged — copy it again, or export again: bertkit export RUN_DIR") from None


class OnnxModel:
    """An exported model behind the interface predict / evaluate use of a PyTorch one: `.config`, `.device`, and a
    call on a batch of tensors that returns an object with the head's output tensors (logits, or start_logits and
    end_logits). Missing token_type_ids are zeros, as in the PyTorch model."""

    def __init__(self, path: Path, config, head: Head):
        self.session, self.config, self.head = session(path), config, head
        self.device = torch.device("cpu")
        self.input_names = [node.name for node in self.session.get_inputs()]

    def __call__(self, **batch):
        if "token_type_ids" not in batch:
            batch["token_type_ids"] = torch.zeros_like(batch["input_ids"])
        feed = {name: np.ascontiguousarray(batch[name].cpu().numpy(), dtype=np.int64) for name in self.input_names}
        unpad = not self.head.choices and speed.on("onnx_unpadding")
        groups = length_groups(feed["attention_mask"]) if unpad else None
        if groups is None:
            outputs = self.session.run(list(self.head.outputs), feed)
        else:
            outputs = self._run_unpadded(feed, groups)
        return SimpleNamespace(**{name: torch.from_numpy(array) for name, array in zip(self.head.outputs, outputs)})

    def _run_unpadded(self, feed: dict, groups: list[tuple[np.ndarray, int]]) -> list[np.ndarray]:
        """The graph on each group of rows of similar real length, cut to its longest: almost no padded token is
        computed (a batch padded to its longest sentence cost twice as much per sentence at 64 rows). Per-token
        outputs are PAD_LOGIT at every padding position, where no decoder looks."""
        rows, width = feed["attention_mask"].shape
        outputs = None
        for members, length in groups:
            part = {name: np.ascontiguousarray(array[members, :length]) for name, array in feed.items()}
            results = self.session.run(list(self.head.outputs), part)
            if outputs is None:  # (B, ...) per sequence, (B, T, ...) per token
                outputs = [np.full((rows, width, *r.shape[2:]) if self.head.per_token else (rows, *r.shape[1:]),
                                   PAD_LOGIT, dtype=r.dtype) for r in results]
            for output, result in zip(outputs, results):
                if self.head.per_token:
                    output[members, :length] = result
                else:
                    output[members] = result
        if self.head.per_token:  # a row shorter than its group's length was run with padding there
            for output in outputs:
                output[feed["attention_mask"] == 0] = PAD_LOGIT
        return outputs

    def eval(self):
        return self


def load_onnx_model(export_dir: str, precision: str = "fp32") -> OnnxModel:
    """The exported graph for `precision` (fp32, or int8 when exported with --quantize int8)."""
    require_onnx()
    head, precision = head_of(export_dir), {"auto": "fp32"}.get(precision, precision)
    files = json.loads((Path(export_dir) / EXPORT_FILE).read_text(encoding="utf-8")).get("files", {})
    if precision not in files:
        hint = "export again with --quantize int8" if precision == "int8" else "use --precision fp32 or int8"
        raise BertkitError(f"{export_dir} is an ONNX export with {' and '.join(files) or 'no'} graphs, not "
                           f"{precision} — {hint}")
    bert = implementation_for(read_config_json(Path(export_dir) / "config.json"), export_dir) == "bertkit"
    config = (head.model_class.config_class if bert else transformers.AutoConfig).from_pretrained(export_dir)
    return OnnxModel(Path(export_dir) / files[precision], config, head)


class OnnxEmbedder:
    """An embed export (`bertkit export` of a sentence-transformers embedding folder: pooling and normalisation are
    in the graph, whose one output is `sentence_embedding`) behind the part of SentenceTransformer's interface that
    predict / serve use: `encode(texts, prompt_name=...)`, `tokenizer`, `max_seq_length`, `prompts`,
    `default_prompt_name`, `get_embedding_dimension()`. Texts run in length-sorted padded batches."""

    def __init__(self, path: Path, tokenizer, saved: dict):
        self.session, self.tokenizer = session(path), tokenizer
        self.max_seq_length = int(saved["max_seq_length"])
        self.prompts = dict(saved.get("prompts") or {})
        self.default_prompt_name = saved.get("default_prompt_name")
        self.dimension = int(saved["dimension"])
        self.pooling, self.normalize = saved.get("pooling", "mean"), bool(saved.get("normalize", True))
        self.input_names = [node.name for node in self.session.get_inputs()]

    def get_embedding_dimension(self) -> int:
        return self.dimension

    def encode(self, texts, prompt_name: str | None = None, batch_size: int = 32, convert_to_tensor: bool = False,
               normalize_embeddings: bool = False, **_):
        """(N, D) float32 embeddings of `texts` (one string: (D,)), in the order given, as the model's encode."""
        single = isinstance(texts, str)
        texts = [texts] if single else list(texts)
        name = prompt_name if prompt_name is not None else self.default_prompt_name
        if name is not None and name not in self.prompts:
            raise BertkitError(f"prompt_name {name!r}: this model's prompts are {sorted(self.prompts) or 'none'}")
        prefix = (self.prompts.get(name) or "") if name is not None else ""
        order = np.argsort([-len(text) for text in texts], kind="stable")
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(texts), batch_size):
            rows = order[start:start + batch_size]
            batch = self.tokenizer([prefix + texts[i] for i in rows], padding=True, truncation=True,
                                   max_length=self.max_seq_length, return_tensors="np")
            if "token_type_ids" not in batch:
                batch["token_type_ids"] = np.zeros_like(batch["input_ids"])
            feed = {key: np.ascontiguousarray(batch[key], dtype=np.int64) for key in self.input_names}
            vectors[rows] = self.session.run(["sentence_embedding"], feed)[0]
        if normalize_embeddings:
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        result = torch.from_numpy(vectors) if convert_to_tensor else vectors
        return result[0] if single else result


def load_onnx_embedder(export_dir: str, precision: str = "fp32") -> OnnxEmbedder:
    """An embed export's graph for `precision` (fp32, or int8 when exported with --quantize int8)."""
    require_onnx()
    precision = {"auto": "fp32", "bf16": "fp32"}.get(precision, precision)
    saved = json.loads((Path(export_dir) / EXPORT_FILE).read_text(encoding="utf-8"))
    files = saved.get("files", {})
    if precision not in files:
        hint = "export again with --quantize int8" if precision == "int8" else "use --precision fp32 or int8"
        raise BertkitError(f"{export_dir} is an ONNX export with {' and '.join(files) or 'no'} graphs, not "
                           f"{precision} — {hint}")
    tokenizer = transformers.AutoTokenizer.from_pretrained(export_dir)
    return OnnxEmbedder(Path(export_dir) / files[precision], tokenizer, saved.get("embedding", {}))


__all__ = ["OnnxModel", "load_onnx_model", "OnnxEmbedder", "load_onnx_embedder", "is_onnx_export", "require_onnx",
           "head_of", "check_graphs", "Head", "HEADS", "session", "ONNX_FILE", "INT8_FILE", "EXPORT_FILE",
           "INPUT_NAMES"]
