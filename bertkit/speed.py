"""bertkit's speed tricks in one place: what each does, where it lives, what it measured, and one switch that turns
them off.

    BERTKIT_PLAIN=1 bertkit run classify ...            # every trick off: plain torch and transformers behaviour
    BERTKIT_PLAIN=dropout,buckets bertkit run ...       # only these off (names below)

Plain is for debugging and parity checks: a result that changes with BERTKIT_PLAIN=1 points at a trick. Eval-mode
outputs of the real tokens are the same either way (tests/test_speed.py); training sees dropout at the same rates
from different random masks. Gains measured with `python benchmarks/bench_speed.py` (MiniLM, 2 threads of an AMD EPYC,
lengths uniform in 16..256, batch 16; each trick turned off alone against all on, interleaved, median of 3 repeats;
the spread of one variant reached 27 %, so about 1.1x either way is noise; docs/benchmarks.md#speed). All off,
training steps were 2.15x slower and inference 1.74x:

- `unpadding`: linear layers, LayerNorms and the feed-forward run on the real tokens only, packed once per forward
  (modeling_bert.py; padding.py `Unpadding`). Gain: training step 1.80x, inference 1.67x.
- `buckets`: unpadded attention groups rows of similar length (64-token steps) and pads each group to its own
  longest row, instead of one (B, T) layout (padding.py `Unpadding.with_length_buckets`). Gain: training step
  1.42x, inference 1.17x.
- `dropout`: CPU dropout masks from 16 random bits per element instead of torch's per-element Bernoulli draw
  (padding.py `fast_dropout`). Gain: training step 1.07x (within the spread).
- `eager_dropout`: CPU training with attention dropout runs eager attention (CPU sdpa has no fused kernel with
  dropout and falls back to the same arithmetic with torch's slower mask) (modeling_bert.py). Gain: training step
  1.10x (within the spread).
- `fused_qkv`: one (3D, D) matmul for query, key and value instead of three (modeling_bert.py `project_qkv`). Gain:
  training step 0.91x, inference 1.06x: within the spread, so not shown to pay in fp32 here; kept for bf16
  autocast, where the input is cast once instead of three times (not measured on this AVX2-only machine). At
  inference (checkpoints.py `for_inference`) the three weights share one buffer, so the stacked weight is a view
  instead of a copy per call: the copies were 11 % of a one-sentence bf16 prediction (cProfile, MiniLM).
- `fused_gelu`: bf16 inference on CPU runs the feed-forward's first matmul and BERT's exact GELU as one oneDNN call
  (modeling_bert.py `BertkitIntermediate`), so the (N, 4D) output is written once. Gain: the cast-once bf16 forward
  at lengths 16..256 (MiniLM, 2 batches of 32, 8 interleaved rounds) took 424 ms median against 488 (min 418 / 429);
  outputs as close to fp32 as before (max abs 0.063 against 0.075).
- `blockwise_attention`: bf16 inference on CPU runs attention as three large calls per block of rows (scaled scores
  plus mask in one `baddbmm`, softmax, `bmm`; modeling_bert.py `blockwise_attention`) instead of sdpa, whose CPU
  flash kernel makes two small matmuls per 32 queries, head and row. Only where it pays: bf16 (in fp32 the two ran
  within 15 % either way), no gradients, and at least 32k scores a call (below that sdpa's one pass is cheaper).
  Gain: the cast-once bf16 forward at lengths 16..256 (MiniLM, 2 batches of 32, interleaved rounds) took 369-380 ms
  median against 419-431 with sdpa; `bench_speed.py --groups bf16` (batches of 16) 1.06x and 1.12x in two runs. On
  single calls: 1.9-2.3x sdpa's speed with 32-wide heads at 64-256 tokens, 2.5-2.7x with 64-wide heads. SST-2 dev
  accuracy at bf16 moved by 0.08 ± 0.13 points (benchmarks/results/precision.json).
- `malloc`: glibc keeps freed blocks under 1 GB for reuse (`keep_freed_memory`, below; the CLI's process only).
  Gain: 6-9 % on MiniLM training steps, measured when it was added (not timed by bench_speed.py: it is set once
  per process).
- `page_release`: madvise(MADV_DONTNEED) on the read pages of memory-mapped corpora, so RSS stays flat in corpus
  size (tasks/mlm/corpus.py). Memory, not speed: the masked-LM tables of docs/benchmarks.md.
- `server_memory`: a long-running `bertkit serve` keeps 256 compiled kernels instead of 1,024 in oneDNN's cache of
  matmuls (about 0.4 MB each; bf16 batches of every token count fill it) and in ideep's cache of torch's mkldnn ops
  (the GELU-fused feed-forward), and hands freed heap back to the OS (malloc_trim) between batches, at most every
  5 s (serve.py). Memory, not speed: in 3 minutes at concurrency 64 (bf16, MiniLM) RSS grew from 0.73 to 2.0 GB
  without the oneDNN limit and malloc_trim and held at 1.0-1.4 GB with them; once the fused feed-forward came, RSS
  rose again (1.2 -> 1.5 GB in 3 minutes) until ideep's cache was limited too (1.09-1.16 GB, same requests/s).
  A 10-minute soak with all of it stayed at 0.9-1.25 GB from the first minute on (docs/benchmarks.md#http).
- `serve_engine`: `bertkit serve`'s engine auto: ONNX Runtime and PyTorch timed at start, each kind of call to the
  faster (engine.py); off, serve runs PyTorch alone unless --engine / BERTKIT_ENGINE says otherwise. Gain: one client
  60 -> 99 req/s (MiniLM, bf16, AMD EPYC, docs/benchmarks.md#http).
- `onnx_unpadding`: ONNX Runtime runs rows of similar real length together (the longest at most 15 % + 2 tokens
  longer than the shortest), cut to the longest, instead of the padded batch (onnx_model.py `length_groups`);
  per-token outputs at padding positions are PAD_LOGIT. Gain: serving the int8 export at 64 clients went from 0.63x
  to 0.85x a plain ONNX Runtime app's requests/s with groups of one exact length; groups of similar length then ran
  a batch of 64 sentences at 2.3-2.5 ms per sentence against 2.8-2.9.
- `gc_freeze`: `bertkit serve` moves every object alive once the model is loaded (about 530,000: torch,
  transformers, the model's modules) into the interpreter's permanent generation (`gc.freeze`, serve.py), so that the
  cyclic collector's full passes no longer walk them. A full pass over them took 265 ms, and under load the requests
  in flight (whose objects outlive two young collections) set one off every few seconds, stalling every request
  waiting. Gain (3 interleaved rounds over HTTP, MiniLM, AMD EPYC, 2 cores; medians): p99 at 64 clients 318
  against 525 ms (int8) and 349 against 625 (default), requests/s at 64 clients 333 against 271 and 227 against
  201; at one client the same.

Not switchable here because they change no numbers and have no plain twin: the MLM head scoring only the masked
positions (`config.sparse_prediction`) and length-sorted batches under a token budget at inference (inference.py).
"""

from __future__ import annotations

import ctypes
import gc
import os
import sys

PLAIN_ENV = "BERTKIT_PLAIN"
TRICKS = ("unpadding", "buckets", "dropout", "eager_dropout", "fused_qkv", "fused_gelu", "blockwise_attention",
          "malloc", "page_release", "server_memory", "serve_engine", "onnx_unpadding", "gc_freeze")


def plain_tricks() -> frozenset[str]:
    """The tricks BERTKIT_PLAIN turns off, read at each call (so a test or a benchmark can flip it): `1`/`all` is
    every one, a comma list names some, unset/`0` none. An unknown name is refused rather than ignored."""
    value = os.environ.get(PLAIN_ENV, "").strip().lower()
    if value in ("", "0", "false", "no"):
        return frozenset()
    if value in ("1", "all", "true", "yes"):
        return frozenset(TRICKS)
    names = frozenset(name.strip() for name in value.split(",") if name.strip())
    unknown = sorted(names - set(TRICKS))
    if unknown:
        from .errors import BertkitError

        raise BertkitError(f"{PLAIN_ENV}={value}: unknown trick {', '.join(unknown)} — use 1 for all, or some of "
                           f"{', '.join(TRICKS)}")
    return names


def on(trick: str) -> bool:
    """Whether `trick` (one of TRICKS) is in use."""
    assert trick in TRICKS, trick
    return trick not in plain_tricks()


# glibc's malloc hands a freed block above its mmap threshold (at most 32 MB by default) back to the OS, and the next
# allocation of that size page-faults every page in again. A BERT training step frees and re-allocates blocks that
# large every time: the word-embedding gradient alone is 47 MB for MiniLM, 94 MB for bert-base.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt parameters, from glibc's malloc.h
KEEP_FREED_BELOW_BYTES = 1 << 30


def keep_freed_memory() -> bool:
    """Have glibc keep freed blocks under 1 GB in the heap for reuse, as tcmalloc, jemalloc or torch's CUDA caching
    allocator do, instead of returning them to the OS. On MiniLM training steps (2 CPU cores) this made steps 6-9 %
    faster; the process then holds on to its peak memory until it exits. For processes bertkit owns (the CLI). True
    if applied; False off Linux, without glibc, or with the `malloc` trick off."""
    if not sys.platform.startswith("linux") or not on("malloc"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, KEEP_FREED_BELOW_BYTES)
                    and libc.mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))
    except (OSError, AttributeError):  # another C library
        return False


# oneDNN, which runs torch's bf16 matmuls on CPU, compiles a kernel per matmul shape and keeps the last 1,024 (its
# default). Batches of a server come in every token count, so the cache fills: measured 0.36 MB a kernel here. ideep,
# under torch's mkldnn ops (the GELU-fused feed-forward, `fused_gelu`), keeps its own 1,024 per op: with it full, a
# soak's RSS rose 1.2 -> 1.5 GB in 3 minutes where the same run at 256 held 1.09-1.16 GB (bf16, MiniLM, c=64).
KERNEL_CACHE_ENVS = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")  # oneDNN's, ideep's
SERVER_KERNEL_CACHE = 256


def limit_kernel_cache() -> None:
    """Keep SERVER_KERNEL_CACHE compiled kernels in oneDNN's and in ideep's cache, unless the user set the variable.
    Both are read at the first matmul: call before the model runs. (A oneDNN capacity of 0 saved more, but
    recompiling cost 110 us per small matmul, 2.6 ms per MiniLM forward.)"""
    if on("server_memory"):
        for variable in KERNEL_CACHE_ENVS:
            os.environ.setdefault(variable, str(SERVER_KERNEL_CACHE))


def freeze_loaded_objects() -> bool:
    """Collect, then gc.freeze(): what is alive now (the imports, the loaded model) is never scanned again by the
    cyclic collector. For a long-lived server, once it has loaded; objects made later are collected as before. True
    if done (False with the `gc_freeze` trick off)."""
    if not on("gc_freeze"):
        return False
    gc.collect()
    gc.freeze()
    return True


def release_freed_memory() -> bool:
    """glibc's malloc_trim(0): hand the free pages of every heap back to the OS. A server's batches allocate
    activations of every size from several threads' heaps, which otherwise keep what they once held. True if done."""
    if not sys.platform.startswith("linux") or not on("server_memory"):
        return False
    try:
        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0))
    except (OSError, AttributeError):  # another C library
        return False


__all__ = ["PLAIN_ENV", "TRICKS", "plain_tricks", "on", "keep_freed_memory", "limit_kernel_cache",
           "freeze_loaded_objects", "release_freed_memory"]
