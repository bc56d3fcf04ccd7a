"""Serving speed on CPU: every way bertkit can run a MiniLM sentence classifier, against transformers, in one run.

Rows (all-MiniLM-L6-v2 weights with a 2-label head, inference only), in real (non-padding) tokens per second:
  transformers fp32         BertForSequenceClassification, sdpa, batches padded to their longest row (the reference)
  bertkit fp32              bertkit's default: unpadded (linear layers on the real tokens, attention in length buckets)
  bertkit bf16              the same under torch.autocast("cpu", bfloat16) (fast only on CPUs with native bf16)
  bertkit int8              `--precision int8`: torch dynamic int8 quantization of every nn.Linear, unpadded
  onnxruntime fp32          `bertkit export` of the bertkit model, run by ONNX Runtime on the padded batches
  onnxruntime int8          `bertkit export --quantize int8` (ORT dynamic quantization), padded batches
  student fp32 / int8       a 3-layer student (MiniLM's layers 0, 2, 4, what `bertkit run distill` starts from)
Two workloads: random batches of 32 rows with lengths uniform in 16..256 (as requests arrive), and a fixed 32 x 128.
Variants are interleaved (A, B, C, ..., A, B, C, ...) and each pass is timed `--repeats` times; every row prints
min / median / max tokens/s, and its ratio to transformers fp32 as min / median / max of the per-repeat ratios (the
reference timed in the same repeat, so machine load hits both alike). The CPU model, its bf16 / AMX / VNNI flags and
the load average are printed first: on this shared machine figures move between runs; the spreads say how much.

    python benchmarks/bench_serve.py [--repeats 5] [--batches 3] [--threads N] [--student RUN_DIR]
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import torch  # noqa: E402
import transformers  # noqa: E402

import bertkit  # noqa: E402
from bertkit.checkpoints import embedded_model_path, quantize_int8  # noqa: E402
from bertkit.distill import student_from_teacher  # noqa: E402

VOCAB = 30522
BATCH = 32


# ------------------------------------------------------------------------------------------------------------ data


def variable_batches(count: int, seed: int = 0) -> list[dict]:
    """`count` batches of 32 rows, lengths uniform in 16..256, each padded to its longest row."""
    gen = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(count):
        lengths = torch.randint(16, 257, (BATCH,), generator=gen)
        mask = (torch.arange(int(lengths.max())) < lengths[:, None]).long()  # (B, T)
        batches.append(make_batch(torch.randint(1000, VOCAB, mask.shape, generator=gen) * mask, mask))
    return batches


def fixed_batches(count: int, seq_len: int = 128, seed: int = 1) -> list[dict]:
    gen = torch.Generator().manual_seed(seed)
    return [make_batch(torch.randint(1000, VOCAB, (BATCH, seq_len), generator=gen),
                       torch.ones(BATCH, seq_len, dtype=torch.long)) for _ in range(count)]


def make_batch(ids, mask) -> dict:
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}


def real_tokens(batches) -> int:
    return sum(int(b["attention_mask"].sum()) for b in batches)


# ------------------------------------------------------------------------------------------------------------ runners


def torch_runner(model, bf16: bool = False):
    def run(batches):
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            for batch in batches:
                model(**batch)
    return run


def onnx_runner(path: Path, threads: int):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def run(batches):
        for batch in batches:
            session.run(["logits"], {k: v.numpy() for k, v in batch.items()})
    return run


def build_models(student_dir: str | None):
    path = embedded_model_path()
    quiet = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()  # the new 2-label head's "newly initialized" notice
    reference = transformers.BertForSequenceClassification.from_pretrained(path, num_labels=2).eval()
    ours = bertkit.BertkitForSequenceClassification.from_pretrained(path, num_labels=2).eval()
    transformers.logging.set_verbosity(quiet)
    ours.classifier.load_state_dict(reference.classifier.state_dict())
    if student_dir:
        student = bertkit.BertkitForSequenceClassification.from_pretrained(student_dir).eval()
    else:
        student = student_from_teacher(ours, [0, 2, 4]).eval()
    return reference, ours, student


def export_graphs(model, folder: Path) -> tuple[Path, Path]:
    from bertkit.export import export_onnx, quantize_int8 as ort_quantize_int8
    from bertkit.onnx_model import HEADS

    fp32 = export_onnx(copy.deepcopy(model).float(), HEADS["ForSequenceClassification"], folder / "model.onnx")
    return fp32, ort_quantize_int8(fp32, folder / "model_int8.onnx")


def variants(student_dir: str | None, folder: Path, threads: int) -> dict:
    reference, ours, student = build_models(student_dir)
    eager = copy.deepcopy(ours)
    eager.set_attn_implementation("eager")  # what export traces (docs/notes.md); the PyTorch rows keep sdpa
    onnx_fp32, onnx_int8 = export_graphs(eager, folder)
    return {
        "transformers fp32": torch_runner(reference),
        "bertkit fp32 (unpadded)": torch_runner(ours),
        "bertkit bf16 autocast": torch_runner(ours, bf16=True),
        "bertkit int8 (torch dynamic)": torch_runner(quantize_int8(copy.deepcopy(ours))),
        "onnxruntime fp32": onnx_runner(onnx_fp32, threads),
        "onnxruntime int8": onnx_runner(onnx_int8, threads),
        "student 3 layers fp32": torch_runner(student),
        "student 3 layers int8": torch_runner(quantize_int8(copy.deepcopy(student))),
    }


# ------------------------------------------------------------------------------------------------------------ timing


def measure(runners: dict, batches: list[dict], repeats: int) -> dict[str, list[float]]:
    """tokens/s of each runner per repeat; runners interleaved, one warm-up pass each first."""
    tokens = real_tokens(batches)
    for run in runners.values():
        run(batches[:1])
    speeds = {name: [] for name in runners}
    for _ in range(repeats):
        for name, run in runners.items():
            start = time.perf_counter()
            run(batches)
            speeds[name].append(tokens / (time.perf_counter() - start))
    return speeds


def spread(values) -> str:
    return f"{min(values):8.2f} {statistics.median(values):8.2f} {max(values):8.2f}"


def report(title: str, speeds: dict[str, list[float]]) -> None:
    reference = speeds["transformers fp32"]
    print(f"\n{title}")
    print(f"{'variant':<30} {'tokens/s min / median / max':>30}   {'x transformers min / median / max':>34}")
    for name, values in speeds.items():
        ratios = [v / r for v, r in zip(values, reference)]
        tokens = f"{min(values):8.0f} {statistics.median(values):8.0f} {max(values):8.0f}"
        print(f"{name:<30} {tokens:>30}   {spread(ratios):>34}")


def machine() -> str:
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "?")
    flags = next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), [])
    wanted = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16")
    shown = [flag for flag in wanted if flag in flags]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"CPU: {model} ({os.cpu_count()} cores; {', '.join(shown) or 'no AVX flags'}); torch {torch.__version__}, "
            f"{torch.get_num_threads()} threads; load average {load:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batches", type=int, default=3, help="batches of 32 per timed pass, per workload")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--student", default=None, help="a distilled student run directory (default: MiniLM's "
                                                        "layers 0, 2, 4 with no training: the same speed)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(machine())
    with tempfile.TemporaryDirectory() as folder:
        runners = variants(args.student, Path(folder), torch.get_num_threads())
        workloads = {"lengths 16..256, random batches of 32": variable_batches(args.batches),
                     "fixed 32 x 128": fixed_batches(args.batches)}
        for title, batches in workloads.items():
            report(f"{title}: {real_tokens(batches):,} real tokens per pass, {args.repeats} repeats",
                   measure(runners, batches, args.repeats))


if __name__ == "__main__":
    main()
