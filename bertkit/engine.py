"""Which runtime answers a served model: PyTorch (bertkit's unpadded BERT) or ONNX Runtime, chosen on the machine the
server starts on, per kind of call.

The two win at different shapes on a CPU. One input at a time, ONNX Runtime's graph has little per-call overhead
and fast small matrix kernels; a batch of inputs of different lengths, PyTorch runs only the real tokens (unpadding)
where the graph pays for every padded one. On the AMD EPYC of docs/benchmarks.md#http, one ~31-token sentence took
ONNX Runtime 3.9 ms (int8) / 6.0 ms (fp32) and bertkit's PyTorch path 6.6 ms (bf16) / 12 ms (fp32); batches of 16
reversed the order. The balance moves with the CPU (AMX makes PyTorch's bf16 several times faster), so `bertkit
serve` (engine auto) does not guess: it exports the run once to ONNX (kept in the user cache, keyed by the weights:
later starts reuse it), checks the graph against PyTorch (a mismatch keeps PyTorch, with a warning, never a wrong
answer), times both runtimes here on one input and on a batch, and gives each kind of call to the faster one
(PyTorch only by TORCH_MARGIN, which the timing alone misses: see there).
`/info` says what it chose and what it measured.

Precision classes are kept: fp32 and bf16 serving time ONNX Runtime's fp32 graph (fp32 is at least as exact as
bf16), int8 its int8 graph (ONNX Runtime's dynamic quantization, against PyTorch's dynamic int8).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import speed
from .cache import cache_root
from .console import warn
from .errors import BertkitError

# torch and the inference helpers are imported by the functions that run a model: serve checks --engine (check_engine)
# before it binds its port and loads anything
ENGINES = ("auto", "torch", "onnx")
TIMED_LENGTH = 32  # tokens of the one-input call timed at start: about one sentence
TIMED_BATCH = (16, 64)  # rows and longest row of the batch timed at start (rows of random lengths up to it)
# bump when the export's graph changes, so that old cached graphs are not reused (4: 7-bit int8 weights without VNNI)
CACHE_VERSION = "4"
# PyTorch is chosen for a kind of call only when it times this much faster than ONNX Runtime at start. The start-up
# timing runs alone; a serving process shares its cores with the HTTP side, and there PyTorch's many small
# multi-threaded ops lose more than ONNX Runtime's one call (AMD EPYC, 2 cores, MiniLM, bench_http.py: int8 batches
# timed 2.3-2.5 ms per input in PyTorch against 2.9-3.1 in ONNX Runtime, yet served 121 / 178 req/s at 8 / 64
# clients against 195 / 238; bf16 batches, 3.1 against ONNX Runtime fp32's 5.0-5.4, served 175 req/s at 64 against
# 143).
TORCH_MARGIN = 1.4


@dataclass
class Engine:
    """What runs the calls of one input and the calls of several, and why (served in /info)."""

    single: str
    batch: str
    reason: str
    ms_per_input: dict = field(default_factory=dict)  # "{runtime} one" / "{runtime} batch" -> ms per input

    def describe(self) -> str:
        if self.single == self.batch:
            return f"{self.single} ({self.reason})"
        return f"one input -> {self.single}, batches -> {self.batch} ({self.reason})"


class TwoRuntimes:
    """A model for `run_batch` made of two: a call of one row goes to `single`, a larger call to `batch`."""

    def __init__(self, single, batch):
        self.single, self.batch = single, batch
        import torch

        self.config, self.device = batch.config, torch.device("cpu")

    def __call__(self, **inputs):
        from .inference import run_batch

        return run_batch(self.single if len(inputs["input_ids"]) == 1 else self.batch, inputs)

    def eval(self):
        return self


def weights_key(run_dir: str) -> str:
    """A digest of what the graph is made from: config.json and every weight file (not the path: a copied run
    reuses its graph, a retrained one never does), and the torch version that exported it."""
    import torch

    digest = hashlib.sha256(f"{CACHE_VERSION} {torch.__version__}".encode())
    folder = Path(run_dir)
    for path in sorted([folder / "config.json", *folder.glob("*.safetensors"), *folder.glob("*.bin")]):
        if path.is_file():
            digest.update(path.name.encode())
            with open(path, "rb") as handle:
                while chunk := handle.read(1 << 22):
                    digest.update(chunk)
    return digest.hexdigest()[:24]


def cached_export(run_dir: str, int8: bool) -> Path:
    """The run's ONNX export in the cache (made now if it is not there; int8 added to it when asked): its folder."""
    from .export import export_run
    from .onnx_model import EXPORT_FILE, check_graphs

    folder = cache_root() / "onnx" / weights_key(run_dir)
    files = {}
    if (folder / EXPORT_FILE).is_file():
        try:
            check_graphs(folder)
            files = json.loads((folder / EXPORT_FILE).read_text(encoding="utf-8")).get("files", {})
        except (BertkitError, ValueError):  # a damaged cache entry is made again
            files = {}
    if "fp32" not in files or (int8 and "int8" not in files):
        # the first start of a run under --engine auto / onnx: tens of seconds with nothing else to show (serve's
        # console is quiet, and this is what the person waits for)
        print(f"exporting {run_dir} to ONNX{' (and int8)' if int8 else ''} for ONNX Runtime, once: the graph is "
              f"traced, checked against PyTorch and kept in {folder} (15-40 s on a small CPU; later starts reuse it)",
              file=sys.stderr, flush=True)
        from .inference import inference_precision

        with inference_precision("fp32"):  # the graph is traced from the fp32 model, whatever the server runs at
            export_run(run_dir, str(folder), quantize="int8" if int8 else None, evaluate=False, force=True)
    return folder


def time_per_input(model, inputs: dict, calls: int) -> float:
    """Median ms per input of `calls` calls of `model` on `inputs` (after one warm-up call)."""
    from .inference import run_batch

    run_batch(model, inputs)
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        run_batch(model, inputs)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000 / len(inputs["input_ids"])


def measure(runtimes: dict, config, head, rounds: int = 3) -> dict:
    """ms per input of each runtime on one TIMED_LENGTH-token input and on a TIMED_BATCH batch, interleaved."""
    import torch

    from .export import padded_inputs

    names = ("input_ids", "attention_mask", "token_type_ids")
    one = padded_inputs(config, head, 1, TIMED_LENGTH, seed=1, names=names)
    batch = padded_inputs(config, head, *TIMED_BATCH, seed=2, names=names)
    times = {f"{name} {kind}": [] for name in runtimes for kind in ("one", "batch")}
    with torch.inference_mode():
        for _ in range(rounds):
            for name, model in runtimes.items():
                times[f"{name} one"].append(time_per_input(model, one, 5))
                times[f"{name} batch"].append(time_per_input(model, batch, 1))
    return {key: round(min(values), 3) for key, values in times.items()}


def check_engine(engine: str | None) -> str:
    """`engine`, or $BERTKIT_ENGINE when it is None, else auto; refused in one line when it is not one of ENGINES."""
    where = "--engine" if engine is not None else "BERTKIT_ENGINE="
    default = "auto" if speed.on("serve_engine") else "torch"  # BERTKIT_PLAIN: PyTorch alone
    engine = engine if engine is not None else os.environ.get("BERTKIT_ENGINE") or default
    if engine not in ENGINES:
        raise BertkitError(f"{where}{'' if where.endswith('=') else ' '}{engine}: use one of {', '.join(ENGINES)}")
    return engine


def choose(run_dir: str, predictor, engine: str | None, runs_at: str) -> Engine:
    """Set `predictor.model` to what serves it under `engine` (auto, torch, onnx) at `runs_at` (the resolved
    precision), and say what that is. PyTorch stays where ONNX Runtime cannot serve the run (no onnxruntime, a head
    export does not cover, a graph that does not match)."""
    engine = check_engine(engine)
    torch_name = f"torch {runs_at}"
    if engine == "torch":
        return Engine(torch_name, torch_name, "--engine torch")
    why_not = unavailable(run_dir, predictor, runs_at)
    if why_not:
        if engine == "onnx":
            raise BertkitError(f"--engine onnx: {why_not} — use --engine torch (or auto)")
        return Engine(torch_name, torch_name, why_not)
    from .onnx_model import head_of, load_onnx_model

    int8 = runs_at == "int8"
    try:
        folder = cached_export(run_dir, int8)
    except BertkitError as problem:  # the graph did not match PyTorch, or did not export: PyTorch answers
        if engine == "onnx":
            raise
        warn(f"serving with PyTorch: the ONNX export of {run_dir} failed its check ({problem})")
        return Engine(torch_name, torch_name, "the ONNX graph failed its check against PyTorch")
    graph = load_onnx_model(str(folder), "int8" if int8 else "fp32")
    graph_name = f"onnxruntime {'int8' if int8 else 'fp32'}"
    if engine == "onnx":
        predictor.model = graph
        return Engine(graph_name, graph_name, "--engine onnx")
    timed = measure({torch_name: predictor.model, graph_name: graph}, predictor.model.config, head_of(run_dir))
    single, batch = (torch_name if timed[f"{torch_name} {kind}"] * TORCH_MARGIN < timed[f"{graph_name} {kind}"]
                     else graph_name for kind in ("one", "batch"))
    runtimes = {torch_name: predictor.model, graph_name: graph}
    predictor.model = runtimes[single] if single == batch else TwoRuntimes(runtimes[single], runtimes[batch])
    return Engine(single, batch, f"the faster of each, timed at start on this machine (PyTorch when {TORCH_MARGIN}x "
                  "faster)", timed)


def unavailable(run_dir: str, predictor, runs_at: str) -> str | None:
    """Why ONNX Runtime cannot serve this run (None when it can)."""
    from .onnx_model import HEADS, is_onnx_export
    from .rundir import model_task
    from .tasks import sentence_transformers_kind

    if is_onnx_export(run_dir):
        return "an ONNX export is served by ONNX Runtime already"
    if any(importlib.util.find_spec(name) is None for name in ("onnxruntime", "onnx", "onnxscript")):
        return 'onnxruntime is not installed (pip install "bertkit[onnx]")'
    import torch

    if runs_at not in ("fp32", "bf16", "int8") or torch.cuda.is_available():
        return f"ONNX Runtime runs here on CPU only, and this server runs at {runs_at}"
    if sentence_transformers_kind(run_dir):
        return f"a {sentence_transformers_kind(run_dir)} model is served by PyTorch here"
    architecture = model_task(run_dir) or ""
    if not any(architecture.endswith(suffix) for suffix in HEADS) or not hasattr(predictor, "model"):
        return f"a {architecture or 'model without architectures'} is not exported to ONNX"
    return None


__all__ = ["ENGINES", "Engine", "check_engine", "TwoRuntimes", "choose", "cached_export", "cache_root", "measure"]
