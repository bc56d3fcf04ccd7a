"""`bertkit export RUN_DIR --format onnx [--quantize int8]`: a fine-tuned run as an ONNX model for ONNX Runtime.

    export_run("runs/classify", "runs/classify-onnx", quantize="int8")

The export folder holds `model.onnx` (fp32, standard ONNX ops; and `model_int8.onnx`, ONNX Runtime's dynamic int8
quantization of it after ONNX Runtime's BERT fusions: a graph for ONNX Runtime only), the run's config.json (label
map, task settings), tokenizer files and bertkit_config.yaml (max_length, columns, long_doc), `onnx_export.json`
(what was exported, the parity with PyTorch, dev metrics) and a completion record, so `bertkit predict EXPORT_DIR
file.csv` and `bertkit evaluate` run it through ONNX Runtime (`--precision int8` picks the int8 file). Every
fine-tuned head exports (sequence classification of every label kind, token classification, QA, multiple choice) of
every encoder family with dynamic batch and sequence axes (and choices); inputs are input_ids, attention_mask and
(where the model has them: not DistilBERT or ModernBERT) token_type_ids, int64.

The model is exported with eager attention (transformers' sdpa mask traces wrong, docs/notes.md) on the padded path:
bertkit's model never unpads while being traced (`is_tracing`), and `check_parity` compares ONNX Runtime with the
PyTorch model on padded batches of several shapes before anything is written. onnxruntime, onnx and onnxscript are
the optional extra `bertkit[onnx]`.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn

from . import tasks
from .checkpoints import TOKENIZER_FILES, load_finetuned
from .console import say, summary
from .errors import BertkitError
from .families import is_bertkit, position_limit, takes_token_types
from .onnx_model import (EXPORT_FILE, INPUT_NAMES, INT8_FILE, ONNX_FILE, PARITY_TOLERANCE, Head, TaskGraph, head_of,
                         is_onnx_export, require_onnx, session)
from .rundir import (RUN_CONFIG_FILE, atomic_folder, check_output_path, model_task, read_run_config, remove_record,
                     write_json_atomic, write_record)

COPIED_FILES = ("config.json", RUN_CONFIG_FILE, "tokenizer_config.json", "special_tokens_map.json",
                "modules.json", "config_sentence_transformers.json", "sentence_bert_config.json",
                "added_tokens.json", *TOKENIZER_FILES)  # and the task's own (TaskGraph.files)


# ------------------------------------------------------------------------------------------------ exporting


class OnnxOutputs(nn.Module):
    """The head as a graph: three int64 inputs in, its output tensors (a tuple, in `head.outputs` order) out."""

    def __init__(self, model: nn.Module, head: Head):
        super().__init__()
        self.model, self.names = model, head.outputs

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        types = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        output = self.model(input_ids=input_ids, attention_mask=attention_mask, return_dict=True, **types)
        return tuple(getattr(output, name) for name in self.names)


def input_names(model: nn.Module) -> tuple[str, ...]:
    """The graph's inputs: token_type_ids only for a model that has them (DistilBERT and ModernBERT have none)."""
    return tuple(name for name in INPUT_NAMES if name != "token_type_ids" or takes_token_types(model))


def padded_forward(model: nn.Module, inputs: dict):
    """The PyTorch outputs the graph is compared with: bertkit's BERT on its padded path (as traced, so per-token
    outputs agree at padding positions too); another family's model as it is."""
    extra = {"unpad": False} if is_bertkit(model) else {}
    return model(**inputs, return_dict=True, **extra)


def task_graph(run_dir: str) -> TaskGraph:
    """What the graph holds: the task's own (its module's `onnx_graph`: an embedding model with its pooling) where
    it has one, else the run's transformers head. Only a sentence-transformers folder's task is not told by its
    architecture (a reranker's is a sequence classifier's, exported as one)."""
    if is_onnx_export(run_dir):
        raise BertkitError(f"{run_dir} is an ONNX export already — export the run directory it came from")
    own = tasks.task_part(tasks.sentence_transformers_kind(run_dir) or "", "onnx_graph")
    return own(run_dir) if own else TaskGraph(*load_for_export(run_dir))


def load_for_export(run_dir: str) -> tuple[nn.Module, Head]:
    """The run's model in fp32 on CPU, with eager attention (what exports exactly)."""
    if is_onnx_export(run_dir):
        raise BertkitError(f"{run_dir} is an ONNX export already — export the run directory it came from")
    if (model_task(run_dir) or "").endswith("ForDocumentClassification"):  # its attention pools across windows
        raise BertkitError(f"{run_dir} holds a long_doc.aggregate=attention document model, which export does not "
                           "support (the graph would be per window, without the pooling across windows) — run "
                           f"`bertkit predict {run_dir} FILE` on the run directory itself")
    head = head_of(run_dir)
    model = load_finetuned(head.model_class, run_dir, head.recipe).float().cpu().eval()
    model.set_attn_implementation("eager")
    return model, head


def padded_inputs(config, head: Head, batch: int, seq_len: int, seed: int = 0, choices: int = 3,
                  names: tuple[str, ...] = INPUT_NAMES) -> dict:
    """Random int64 inputs whose rows have different real lengths (the first row full): (B, T) or (B, N, T)."""
    generator = torch.Generator().manual_seed(seed)
    shape = (batch, choices, seq_len) if head.choices else (batch, seq_len)
    lengths = torch.randint(1, seq_len + 1, shape[:-1], generator=generator)
    lengths.view(-1)[0] = seq_len
    mask = (torch.arange(seq_len) < lengths.unsqueeze(-1)).long()  # (..., T)
    ids = torch.randint(1, config.vocab_size, shape, generator=generator) * mask
    segments = (torch.arange(seq_len) >= seq_len // 2).long().expand(shape) * mask
    if getattr(config, "type_vocab_size", 0) < 2:  # RoBERTa's one segment, DeBERTa-v3's none
        segments = torch.zeros_like(segments)
    inputs = {"input_ids": ids, "attention_mask": mask, "token_type_ids": segments.contiguous()}
    return {name: inputs[name] for name in names}


def dynamic_shapes(head: Head, max_length: int, names: tuple[str, ...] = INPUT_NAMES) -> dict:
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("sequence", max=max_length)
    axes = {0: batch, 1: torch.export.Dim("choices"), 2: seq} if head.choices else {0: batch, 1: seq}
    return {name: axes for name in names}


@contextlib.contextmanager
def _quiet():
    """The exporter's warnings and log lines (torchvision missing, deprecations, axis renames) are not the user's."""
    loggers = [logging.getLogger(name) for name in ("", "torch.onnx", "torch.export", "torch._dynamo", "onnxscript")]
    levels = [log.level for log in loggers]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for log in loggers:
            log.setLevel(logging.ERROR)
        try:
            yield
        finally:
            for log, level in zip(loggers, levels):
                log.setLevel(level)


def export_onnx(model: nn.Module, head: Head, path: Path) -> Path:
    """torch.onnx.export (dynamo) with dynamic batch / sequence (/ choices) axes; one self-contained file."""
    names = input_names(model)
    example = padded_inputs(model.config, head, batch=2, seq_len=16, names=names)
    with _quiet(), torch.no_grad():
        program = torch.onnx.export(OnnxOutputs(model, head), (), kwargs=example, dynamo=True,
                                    dynamic_shapes=dynamic_shapes(head, position_limit(model.config), names),
                                    input_names=list(names), output_names=list(head.outputs), verbose=False)
        program.save(str(path))
    return path


def check_parity(model: nn.Module, head: Head, path: Path, shapes=((1, 5), (3, 17), (8, 64))) -> float:
    """Max abs difference between ONNX Runtime and PyTorch (its padded path, which the graph is: per-token outputs
    then agree at padding positions too) on padded batches of several shapes (batch, seq); a BertkitError above
    PARITY_TOLERANCE."""
    runner, worst, names = session(path), 0.0, input_names(model)
    for number, (batch, seq_len) in enumerate(shapes):
        seq_len = min(seq_len, position_limit(model.config))
        inputs = padded_inputs(model.config, head, batch, seq_len, seed=number + 1, names=names)
        with torch.no_grad():
            expected = padded_forward(model, inputs)
        got = runner.run(list(head.outputs), {k: v.numpy() for k, v in inputs.items()})
        for name, array in zip(head.outputs, got):
            worst = max(worst, float((torch.from_numpy(array) - getattr(expected, name)).abs().max()))
    if worst > PARITY_TOLERANCE:
        raise BertkitError(f"the ONNX export differs from the PyTorch model by {worst:.2e} (more than "
                           f"{PARITY_TOLERANCE:g}) — please report it with the model's config.json")
    return worst


def quantize_int8(model: nn.Module, head: Head, source: Path, target: Path) -> str:
    """ONNX Runtime's dynamic quantization (int8 weights of every MatMul with a scale per output column,
    activations quantized per call) of the graph fused by ONNX Runtime's transformer optimizer (LayerNorm with its
    residual add, GELU with its bias), when the fused fp32 graph still matches PyTorch; else of `source` itself.
    Fusing first is what pays: quantized, the unfused graph's LayerNorm and GELU patterns are split by the
    quantization nodes and ONNX Runtime no longer fuses them as it loads (MiniLM, one 31-token sentence, AMD EPYC:
    3.4 ms against 4.5). A scale per column instead of one per matrix, at the same speed: SST-2 dev accuracy
    -0.57 ± 0.40 points from fp32 against -0.88 ± 0.40 (MiniLM, 3 seeds; docs/benchmarks.md#precision). Returns
    which graph was quantized and why (onnx_export.json says it)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    fused = target.with_name("fused.onnx")
    try:
        source, how = fuse(model, head, source, fused), "fused (ONNX Runtime's transformer optimizer)"
    except Exception as problem:  # noqa: BLE001 - a fusion that fails costs speed, never the export
        why = (str(problem).splitlines() or [type(problem).__name__])[0][:200]
        how = f"unfused: the fused graph was not used ({why})"
    try:
        with _quiet():
            quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8, per_channel=True,
                             reduce_range=not cpu_has_vnni())
    finally:
        fused.unlink(missing_ok=True)
    return how


def cpu_has_vnni() -> bool:
    """Whether this CPU has VNNI (AVX-512 VNNI or AVX-VNNI), the int8 dot product ONNX Runtime's int8 kernels use.
    Without it they multiply unsigned 8-bit activations by signed 8-bit weights with 16-bit sums that saturate, and a
    full-range (8-bit) weight can overflow them: ONNX Runtime's documentation advises 7-bit weights (reduce_range)
    there. A tiny ModernBERT's int8 export was 0.33 from PyTorch without it on an AVX2-only AMD EPYC."""
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return True  # not Linux: keep ONNX Runtime's default
    return "avx512_vnni" in flags or "avx_vnni" in flags


def fuse(model: nn.Module, head: Head, source: Path, target: Path) -> Path:
    """`source` through ONNX Runtime's transformer optimizer (BERT fusions; patterns a family does not have are left
    as they are), saved to `target` once check_parity finds it still equal to PyTorch."""
    from onnxruntime.transformers.optimizer import optimize_model

    with _quiet():
        fused = optimize_model(str(source), model_type="bert", opt_level=1,
                               num_heads=getattr(model.config, "num_attention_heads", 0) or 0,
                               hidden_size=getattr(model.config, "hidden_size", 0) or 0)
        fused.save_model_to_file(str(target))
    check_parity(model, head, target)
    return target


def copy_model_files(run_dir: Path, out: Path, more: tuple[str, ...] = ()) -> list[str]:
    """config.json (label map, task settings), the tokenizer and the run's config, copied beside the graph; and
    `more`, the files the task's runner needs besides (TaskGraph.files)."""
    copied = []
    for name in (*COPIED_FILES, *more):
        if (run_dir / name).is_file() and name not in copied:
            shutil.copy2(run_dir / name, out / name)
            copied.append(name)
    return copied


def default_output(run_dir: str) -> str:
    return str(Path(run_dir).resolve().with_name(Path(run_dir).resolve().name + "-onnx"))


def prepare_output(out: Path, run_dir: str, force: bool = False) -> None:
    """Never inside a run directory (the one exported included), never over a file, a folder of other things or
    what the run was made from; over an earlier export only with `force` (rundir.check_output_path)."""
    check_output_path(out, model_dirs=[run_dir], what="the export", force=force)


def export_run(run_dir: str, output: str | None = None, fmt: str = "onnx", quantize: str | None = None,
               evaluate: bool = True, force: bool = False) -> dict:
    """Export a run directory; returns (and writes to onnx_export.json) what was exported and how it measured."""
    if fmt != "onnx":
        raise BertkitError(f"--format {fmt}: the only export format is onnx")
    if quantize not in (None, "int8"):
        raise BertkitError(f"--quantize {quantize}: the only quantization is int8")
    require_onnx()
    out = Path(output or default_output(run_dir))
    prepare_output(out, run_dir, force)
    graph = task_graph(run_dir)
    model, head = graph.model, graph.head
    task = tasks.sentence_transformers_kind(run_dir) or head.recipe  # a reranker's head is a classifier's
    say(f"exporting {run_dir} ({type(model).__name__}) to {out / ONNX_FILE}")
    # built under a temporary name beside `out`, renamed when complete: a failure (a full disk) leaves nothing
    # that looks like an export, nor anything that blocks the retry
    with atomic_folder(out, "the ONNX export", replace=force) as building:
        export_onnx(model, head, building / ONNX_FILE)
        files = {"fp32": ONNX_FILE}
        summary = {"format": "onnx", "architecture": type(model).__name__, "recipe": task,
                   "inputs": list(input_names(model)), "outputs": list(head.outputs), "files": files,
                   "parity_max_abs_diff": {"fp32": check_parity(model, head, building / ONNX_FILE)}}
        if quantize == "int8":
            summary["int8_graph"] = quantize_int8(model, head, building / ONNX_FILE, building / INT8_FILE)
            files["int8"] = INT8_FILE
            summary["parity_max_abs_diff"]["int8"] = int8_difference(model, head, building / INT8_FILE)
        copy_model_files(Path(run_dir), building, graph.files)
        summary.update(graph.summary)
        finish_export(building, summary)  # from here the folder loads as a finished export (the dev metrics read it)
        if graph.check:  # the whole path (tokenizer + graph + runner) against the task's reference
            summary["parity_max_abs_diff"].update(graph.check(building))
            finish_export(building, summary)
    if evaluate and graph.dev_metrics:
        summary["dev"] = dev_metrics(str(out), list(files))
        finish_export(out, summary)
    return {**summary, "output": str(out)}


def finish_export(out: Path, summary: dict) -> None:
    """onnx_export.json, then the completion record over every file (predict checks the files against it)."""
    remove_record(out)
    write_json_atomic(out / EXPORT_FILE, summary)
    write_record(out, "export")


def int8_difference(model: nn.Module, head: Head, path: Path) -> float:
    """Max abs output difference of the int8 graph from PyTorch fp32 on one padded batch (informative only)."""
    names = input_names(model)
    inputs = padded_inputs(model.config, head, 4, min(32, position_limit(model.config)), seed=7, names=names)
    with torch.no_grad():
        expected = padded_forward(model, inputs)
    got = session(path).run(list(head.outputs), {k: v.numpy() for k, v in inputs.items()})
    return max(float(np.abs(array - getattr(expected, name).numpy()).max()) for name, array in zip(head.outputs, got))


def dev_metrics(export_dir: str, precisions: list[str]) -> dict:
    """The export's metrics on the run's dev split (data.eval of bertkit_config.yaml), per precision, printed side
    by side; {} (with a line saying why) when the run had no dev file or it is not there any more."""
    from .inference import inference_precision

    dev = read_run_config(export_dir).get("data", {}).get("eval")
    if not dev or not Path(dev).exists():
        say(f"no dev metrics: the run's data.eval ({dev or 'not set'}) is not a file here")
        return {}
    module = tasks.module_for_model(export_dir)  # a rerank export is its own task, not a classifier
    results = {}
    for precision in precisions:
        with inference_precision(precision):
            results[precision] = module.evaluate_file(export_dir, dev)
    rows = {key: " / ".join(f"{results[p][key]:.4f}" for p in precisions) for key in results[precisions[0]]
            if all(isinstance(results[p].get(key), float) for p in precisions)}
    summary(f"ONNX Runtime on {dev}: {' / '.join(precisions)}", rows)
    return results


__all__ = ["export_run", "export_onnx", "check_parity", "task_graph", "quantize_int8", "padded_inputs",
           "load_for_export", "dev_metrics", "PARITY_TOLERANCE"]
