"""`make gpu-check` (benchmarks/gpu_check.py): its CPU-safe part runs here — the arguments, every benchmark case on
a tiny model on CPU, the JSON — and, with no CUDA Python on the machine, it says so and exits 1."""

import importlib.util
import json

import pytest
import torch
from test_distributed import ROOT

spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
gpu_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_check)


def test_arguments():
    args = gpu_check.parse_args(["--quick", "--no-tests", "--out", "x.json"])
    assert args.quick and args.no_tests and str(args.out) == "x.json" and not args.worker
    assert gpu_check.parse_args([]).out == ROOT / "benchmarks" / "results" / "gpu.json"


def test_varied_lengths_pad_to_the_longest_row():
    ids, mask = gpu_check.make_batch(8, "varied", 64, 30522, "cpu")
    lengths = mask.sum(1)
    assert ids.shape[1] == int(lengths.max()) and int(lengths.min()) >= 16 and len(set(lengths.tolist())) > 1
    assert (ids[mask == 0] == 0).all()


@pytest.mark.usefixtures("one_thread")
def test_each_case_measures_tokens_per_second_on_cpu():
    row = gpu_check.bench_case("bertkit", "train", "bf16", "varied", "tiny", "cpu", batch=4, max_length=32,
                               warmup=1, iterations=1)
    assert row["tokens"] > 0 and row["tokens_per_s"] == pytest.approx(row["tokens"] / (row["ms"] / 1000), rel=0.01)
    assert row["peak_mib"] is None  # GPU memory only


@pytest.mark.skipif(torch.cuda.is_available(), reason="the no-CUDA path")
@pytest.mark.usefixtures("one_thread")
def test_without_cuda_it_says_so_and_writes_the_cpu_rows(tmp_path, capsys):
    out = tmp_path / "gpu.json"
    assert gpu_check.main(["--quick", "--out", str(out), "--python", gpu_check.sys.executable]) == 1
    assert "has no CUDA torch" in capsys.readouterr().out
    results = json.loads(out.read_text())
    assert results["environment"]["device"] == "cpu" and "gpu_tests" not in results
    cases = {(r["implementation"], r["mode"], r["lengths"]) for r in results["benchmark"] if "tokens_per_s" in r}
    assert ("bertkit", "train", "varied") in cases and ("transformers-sdpa", "inference", "fixed") in cases
    assert ("modernbert-sdpa", "train", "varied") in cases
