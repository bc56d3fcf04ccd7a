"""`make gpu-check`: everything bertkit can check on one CUDA GPU, in one script of under 8 minutes, from the repo
alone, for the day a GPU is lent. It writes benchmarks/results/gpu.json.

    python3 benchmarks/gpu_check.py [--out benchmarks/results/gpu.json] [--quick] [--no-tests] [--python PY]

1. A Python with CUDA torch, the first of: --python; this interpreter; .venv-gpu/ (made earlier); the GPU image's
   /opt/torch/.venv/bin/python3 or `python3` on PATH; else a new .venv-gpu with `torch==2.13.0` from the cu128 index
   (needs the internet; offline machines have CUDA torch in their image). bertkit runs from the checkout
   (PYTHONPATH), so nothing needs installing where torch, transformers, typer and pydantic are already there. With
   no CUDA Python at all it says so, runs the CPU-safe part on a tiny model instead, and exits 1.
2. `pytest -m gpu` (the gpu-marked tests), its summary line recorded.
3. A short benchmark at bert-base size with random weights (sequence classification, batch 16): bertkit against
   transformers with sdpa (and flash attention 2 where flash_attn is installed), bf16 and fp16, inference (weights
   cast) and one training step (fp32 weights, autocast, AdamW), at a fixed length (128) and at lengths uniform in
   16..256; real tokens per second and peak GPU memory. ModernBERT (transformers', small random config) sdpa
   against flash attention 2, its unpadded path. FSDP on 1 GPU: the classify recipe's multi_gpu_fsdp config under
   torchrun --nproc_per_node 1 for a few steps, its sharding line recorded.

The benchmark functions run on CPU too (tiny config, bf16 only): tests/test_gpu_check.py runs them in the suite.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "gpu.json"
CUDA_INDEX = "https://download.pytorch.org/whl/cu128"
TORCH_PIN = "torch==2.13.0"
SIZES = {  # BERT encoder shapes: bert-base, and a tiny one for CPU checks
    "base": {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072},
    "tiny": {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64},
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the JSON results go")
    parser.add_argument("--quick", action="store_true", help="fewer timed steps (a smoke run)")
    parser.add_argument("--no-tests", action="store_true", help="skip pytest -m gpu")
    parser.add_argument("--python", help="the Python (with CUDA torch) to run the checks with")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)  # the part that runs in that Python
    parser.add_argument("--device", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--size", choices=sorted(SIZES), default=None, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


# ---------------------------------------------------------------------------------------------- the benchmark


def make_batch(batch: int, lengths: str, max_length: int, vocab: int, device: str, seed: int = 0):
    """input_ids and attention_mask of `batch` rows: all `max_length` long ("fixed"), or uniform in 16..max_length
    ("varied", padded to the longest)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    low = min(16, max_length)
    sizes = (torch.full((batch,), max_length) if lengths == "fixed" else
             torch.randint(low, max_length + 1, (batch,), generator=generator))
    width = int(sizes.max())
    ids = torch.randint(1000, vocab, (batch, width), generator=generator)
    mask = (torch.arange(width)[None, :] < sizes[:, None]).long()
    return ids.mul(mask).to(device), mask.to(device)


def build_model(implementation: str, size: str, device: str):
    """A random sequence-classification model: bertkit's BERT, transformers' BERT with an attention implementation
    (`transformers-sdpa`, `transformers-flash_attention_2`), or transformers' ModernBERT (`modernbert-<attn>`)."""
    import torch
    import transformers

    torch.manual_seed(0)
    shape = dict(SIZES[size], vocab_size=30522, max_position_embeddings=512, num_labels=2)
    if implementation == "bertkit":
        import bertkit

        return bertkit.BertkitForSequenceClassification(bertkit.BertkitConfig(**shape)).to(device)
    family, attention = implementation.split("-", 1)
    if family == "modernbert":
        config = transformers.ModernBertConfig(
            vocab_size=30522, hidden_size=max(64, shape["hidden_size"] // 3),
            num_hidden_layers=max(2, shape["num_hidden_layers"] // 3), num_attention_heads=4,
            intermediate_size=max(128, shape["intermediate_size"] // 3), num_labels=2,
            pad_token_id=0, cls_token_id=101, sep_token_id=102, bos_token_id=101, eos_token_id=102)
    else:
        config = transformers.BertConfig(**shape)
    return transformers.AutoModelForSequenceClassification.from_config(config, attn_implementation=attention).to(device)


def time_case(step, device: str, warmup: int, iterations: int) -> tuple[float, int | None]:
    """Seconds per call of `step` (median of `iterations` after `warmup`), and the peak GPU memory in bytes (None
    on CPU)."""
    import statistics

    import torch

    cuda = device.startswith("cuda")
    for _ in range(warmup):
        step()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        step()
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times), (torch.cuda.max_memory_allocated() if cuda else None)


def bench_case(implementation: str, mode: str, dtype_name: str, lengths: str, size: str, device: str,
               batch: int = 16, max_length: int = 128, warmup: int = 2, iterations: int = 5) -> dict:
    """One row: real tokens per second and peak memory of inference (weights cast to dtype) or one training step
    (fp32 weights under autocast, AdamW) for one implementation, precision and length mix."""
    import torch

    dtype = getattr(torch, {"bf16": "bfloat16", "fp16": "float16"}[dtype_name])
    row = {"implementation": implementation, "mode": mode, "dtype": dtype_name, "lengths": lengths, "size": size,
           "batch": batch, "max_length": max_length if lengths == "fixed" else 2 * max_length}
    try:
        model = build_model(implementation, size, device)
    except (ImportError, ValueError) as error:  # flash attention 2 not installed, say
        return {**row, "skipped": str(error).splitlines()[0][:200]}
    ids, mask = make_batch(batch, lengths, row["max_length"], model.config.vocab_size, device)
    labels = torch.zeros(batch, dtype=torch.long, device=device)
    device_type = "cuda" if device.startswith("cuda") else "cpu"
    if mode == "inference":
        model = model.to(dtype).eval()

        def step():
            with torch.inference_mode():
                model(input_ids=ids, attention_mask=mask)
    else:
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
        scaler = torch.amp.GradScaler(device_type, enabled=dtype_name == "fp16")

        def step():
            with torch.autocast(device_type, dtype=dtype):
                loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
    seconds, peak = time_case(step, device, warmup, iterations)
    tokens = int(mask.sum())
    return {**row, "tokens": tokens, "ms": round(seconds * 1000, 3), "tokens_per_s": round(tokens / seconds, 1),
            "peak_mib": round(peak / 2**20, 1) if peak is not None else None}


def flash_attention_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("flash_attn") is not None


def benchmark_rows(device: str, size: str, quick: bool = False) -> list[dict]:
    """Every row of the model benchmark on `device`: BERT implementations x {inference, train} x dtypes x
    {fixed, varied} lengths, then ModernBERT's attention implementations at varied lengths."""
    cuda = device.startswith("cuda")
    dtypes = ["bf16", "fp16"] if cuda else ["bf16"]
    attentions = ["sdpa"] + (["flash_attention_2"] if cuda and flash_attention_available() else [])
    implementations = ["bertkit", *(f"transformers-{a}" for a in attentions)]
    timing = {"warmup": 1, "iterations": 2} if quick or not cuda else {"warmup": 3, "iterations": 10}
    max_length = 128 if size == "base" else 32
    rows = []
    for mode in ("inference", "train"):
        for dtype in dtypes:
            for lengths in ("fixed", "varied"):
                for implementation in implementations:
                    rows.append(bench_case(implementation, mode, dtype, lengths, size, device,
                                           max_length=max_length, **timing))
                    print(json.dumps(rows[-1]), flush=True)
    for mode in ("inference", "train"):
        for attention in attentions:
            rows.append(bench_case(f"modernbert-{attention}", mode, dtypes[0], "varied", size, device,
                                   max_length=max_length, **timing))
            print(json.dumps(rows[-1]), flush=True)
    return rows


def fsdp_one_gpu(python: str, env: dict, steps: int = 10) -> dict:
    """The classify recipe's multi_gpu_fsdp config under torchrun --nproc_per_node 1 at bert-base size (random
    weights, the shipped bert-base-chinese vocabulary and zh_sentiment data) for a few steps: exit code, wall time,
    the sharding line."""
    import transformers

    work = Path(tempfile.mkdtemp(prefix="gpu-check-fsdp-"))
    model_dir = work / "model"
    transformers.BertModel(transformers.BertConfig(vocab_size=21128, **SIZES["base"])).save_pretrained(model_dir)
    transformers.BertTokenizerFast(vocab_file=str(ROOT / "bertkit" / "resources" / "bert-base-chinese-vocab.txt"),
                                   do_lower_case=False).save_pretrained(model_dir)
    command = [python, "-m", "torch.distributed.run", "--nproc_per_node", "1", "-m", "bertkit", "run", "classify",
               "-c", "classify/multi_gpu_fsdp", f"model={model_dir}", f"output_dir={work / 'run'}",
               f"train.max_steps={steps}", "train.per_device_train_batch_size=16", "data.max_length=128"]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    lines = [line for line in done.stderr.splitlines() if line.startswith(("fsdp:", "error:"))]
    shutil.rmtree(work, ignore_errors=True)
    return {"returncode": done.returncode, "wall_s": round(time.perf_counter() - start, 1), "lines": lines,
            "tail": done.stderr[-1500:] if done.returncode else ""}


def gpu_tests(python: str, env: dict) -> dict:
    done = subprocess.run([python, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider", "tests"],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    lines = done.stdout.strip().splitlines()
    return {"returncode": done.returncode, "summary": lines[-1] if lines else done.stderr[-500:]}


def environment(device: str) -> dict:
    import torch
    import transformers

    info = {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
            "device": device, "flash_attn": flash_attention_available()}
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def write_results(path: Path, results: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return path


def worker(args: argparse.Namespace) -> int:
    """In the chosen Python: the environment, the gpu tests, the benchmark, FSDP on 1 GPU; the JSON."""
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    size = args.size or ("base" if device.startswith("cuda") else "tiny")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    started = time.perf_counter()
    results = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "environment": environment(device)}
    if not args.no_tests and device.startswith("cuda"):
        results["gpu_tests"] = gpu_tests(sys.executable, env)
    results["benchmark"] = benchmark_rows(device, size, args.quick)
    if device.startswith("cuda"):
        results["fsdp_one_gpu"] = fsdp_one_gpu(sys.executable, env)
    results["wall_s"] = round(time.perf_counter() - started, 1)
    write_results(args.out, results)
    print(f"gpu-check: results in {args.out} ({results['wall_s']} s)")
    return 0 if device.startswith("cuda") else 1


# ---------------------------------------------------------------------------------------------- finding CUDA torch


def has_cuda(python: str) -> bool:
    try:
        done = subprocess.run([python, "-c", "import torch; print(torch.cuda.is_available())"], capture_output=True,
                              text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and done.stdout.strip().endswith("True")


def install_cuda_torch(venv: Path) -> str | None:
    """A new venv with the CUDA build of torch and bertkit's dependencies (needs the package indexes)."""
    python = venv / "bin" / "python"
    steps = [[sys.executable, "-m", "venv", str(venv)],
             [str(python), "-m", "pip", "install", "-q", TORCH_PIN, "--index-url", CUDA_INDEX],
             [str(python), "-m", "pip", "install", "-q", "-e", f"{ROOT}[dev]"]]
    for step in steps:
        print("gpu-check:", " ".join(step), flush=True)
        if subprocess.run(step, timeout=900).returncode != 0:
            return None
    return str(python)


def find_python(args: argparse.Namespace) -> tuple[str | None, str]:
    """The Python to run the checks with, and how it was found."""
    candidates = [(args.python, "--python"), (sys.executable, "this interpreter"),
                  (str(ROOT / ".venv-gpu" / "bin" / "python"), ".venv-gpu"),
                  ("/opt/torch/.venv/bin/python3", "the GPU image's Python"), (shutil.which("python3"), "python3")]
    for python, how in candidates:
        if python and Path(python).exists() and has_cuda(python):
            return python, how
    if args.python:
        return None, f"--python {args.python} has no CUDA torch"
    if shutil.which("nvidia-smi") is None:
        return None, "no NVIDIA driver (nvidia-smi) on this machine"
    python = install_cuda_torch(ROOT / ".venv-gpu")
    return (python, f"new .venv-gpu ({TORCH_PIN}, {CUDA_INDEX})") if python else (
        None, f"could not install {TORCH_PIN} from {CUDA_INDEX} (offline?) and no Python here has CUDA torch")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        return worker(args)
    python, how = find_python(args)
    forwarded = ["--out", str(args.out), *(["--quick"] if args.quick else []),
                 *(["--no-tests"] if args.no_tests else [])]
    if python is None:
        print(f"gpu-check: {how} — running the CPU-safe part only (tiny model); nothing GPU-side was checked",
              flush=True)
        cpu_args = ["--worker", "--device", "cpu", "--size", "tiny", *forwarded]
        try:
            import torch  # noqa: F401
        except ImportError:  # e.g. `make gpu-check` with a system python3: the project's venv has torch
            venv = ROOT / ".venv" / "bin" / "python"
            if not venv.exists():
                print("gpu-check: no torch here either — make setup first for the CPU-safe part")
                return 1
            env = {**os.environ, "PYTHONPATH": str(ROOT)}
            subprocess.run([str(venv), __file__, *cpu_args], env=env)
            return 1
        worker(parse_args(cpu_args))
        return 1
    print(f"gpu-check: {python} ({how})", flush=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([python, __file__, "--worker", *forwarded], env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
