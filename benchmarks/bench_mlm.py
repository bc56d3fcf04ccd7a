"""bertkit's mlm recipe against a plain run_mlm.py-style script on synthetic corpora: memory, start-up, throughput.

    python benchmarks/bench_mlm.py [--sizes 10,100,1000] [--repeats 3] [--steps 6] [--num-proc N] [--workdir DIR]
        [--variants bertkit,reference]
        [--quality-steps 80 [--quality-length 512] [--quality-seeds 42,43]] [--lr 5.0e-5]

For each corpus size (MB of text, generated here at run time from MiniLM's vocabulary with Zipf-like word
frequencies: sentences, paragraphs one per line, blank lines between documents; written under --workdir, never
committed) and each repeat, every variant runs in its own subprocess:
  bertkit     `bertkit run mlm` (recipes/mlm.py in-process): datasets text loader, row-wise tokenize map with
              data.num_proc workers into the datasets cache, blocks read from the memory-mapped token table
  reference   transformers' run_mlm.py recipe: load_dataset("text"), tokenize map and group_texts map with the
              same num_proc, DataCollatorForLanguageModeling, BertForMaskedLM, Trainer
Each variant: a first run on a fresh cache, a cached rerun (same cache, same settings) at max_length 128, and a
cached run at 512. Both fine-tune the embedded all-MiniLM-L6-v2, fp32, batch --batch, --steps optimizer steps at
learning rate --lr.
bertkit runs with head_warmup_steps=0 and data.max_eval_examples=16 (its held-out "before" perplexity is part of
its time to the first step; the reference evaluates nothing).
Measures:
  peak RSS       the largest sum of RSS over the run's process tree (main process + map workers), polled every
                 0.1 s; "main" is the main process's own ru_maxrss. Memory-mapped Arrow pages that a process
                 touches count in its RSS.
  peak private   the same sum of RSS less shared (file-backed) pages: the anonymous memory the kernel cannot
                 reclaim. Arrow files read through mmap grow RSS, not this.
  first step s   wall time from starting the process to the end of the first optimizer step
  tokens/s       training tokens (batch x max_length) per second from the end of step 1 to the end of the last
The table gives min / median / max over the repeats. The machine may be shared: figures move between runs.
--quality-steps N also trains each variant N steps (at --quality-length tokens, default 128) on the first corpus,
once per --quality-seeds seed, and prints its tokens/s and held-out masked-LM loss (`held_out_loss`: the same text,
masks and stock model class for both), so the speed ratio is read at equal (or not) held-out loss.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from machine import cpu_model  # benchmarks/machine.py

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "TOKENIZERS_PARALLELISM": "false",
       "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}
VARIANTS = ("bertkit", "reference")


# ------------------------------------------------------------------------------------------------ the corpus


def corpus_words() -> list[str]:
    from bertkit.checkpoints import embedded_model_path

    vocab = (Path(embedded_model_path()) / "vocab.txt").read_text(encoding="utf-8").split("\n")
    return [w for w in vocab if w.isalpha() and w.isascii() and len(w) > 1]


def generate_corpus(path: Path, megabytes: int, seed: int = 0) -> Path:
    """Synthetic English-like text: Zipf-distributed vocabulary words, 8-24 word sentences, 2-6 sentences per
    paragraph (one per line), 2-8 paragraphs per document, blank lines between documents."""
    if path.exists() and path.stat().st_size >= megabytes * 10**6:
        return path
    words = np.array(corpus_words())
    rng = np.random.default_rng(seed)
    weights = 1.0 / (np.arange(len(words)) + 20.0)
    order = rng.permutation(len(words))  # the frequent words are not the vocabulary's first ones
    probabilities = weights / weights.sum()
    written, target = 0, megabytes * 10**6
    with path.open("w", encoding="utf-8") as handle:
        while written < target:
            picks = words[order[rng.choice(len(words), size=200_000, p=probabilities)]]
            text = _documents(picks.tolist(), rng)
            handle.write(text)
            written += len(text)
    return path


def _documents(picks: list[str], rng) -> str:
    out, cursor = [], 0
    while cursor < len(picks) - 1000:
        paragraphs = []
        for _ in range(int(rng.integers(2, 9))):
            sentences = []
            for _ in range(int(rng.integers(2, 7))):
                n = int(rng.integers(8, 25))
                sentence = " ".join(picks[cursor:cursor + n])
                cursor += n
                sentences.append(sentence[:1].upper() + sentence[1:] + ".")
            paragraphs.append(" ".join(sentences))
        out.append("\n".join(paragraphs) + "\n\n")
    return "".join(out)


# ------------------------------------------------------------------------------------------------ children


class Timing:
    """A TrainerCallback (built lazily: transformers is imported in the child only) recording step end times."""

    @staticmethod
    def install(times: list[float]):
        import transformers

        class Callback(transformers.TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                times.append(time.time())

        original = transformers.Trainer.__init__

        def init(self, *args, **kwargs):
            original(self, *args, **kwargs)
            self.add_callback(Callback())

        transformers.Trainer.__init__ = init


def run_bertkit(a) -> None:
    from bertkit.checkpoints import embedded_model_path
    from bertkit.cli import load_recipe
    from bertkit.config import load_config

    module = load_recipe("mlm")
    overrides = [f"model={embedded_model_path()}", f"data.train={a.corpus}", f"data.cache_dir={a.cache}",
                 f"data.num_proc={a.num_proc}", f"output_dir={a.output}", "overwrite=true", "precision=fp32",
                 f"data.max_length={a.max_length}", "head_warmup_steps=0", "data.max_eval_examples=16",
                 f"train.max_steps={a.steps}", f"train.per_device_train_batch_size={a.batch}", f"seed={a.seed}",
                 f"train.learning_rate={a.lr}",
                 # the reference's objective and optimizer: token-level masking, no warm-up, no weight decay
                 "masking.whole_word=none", "train.warmup_steps=0", "train.weight_decay=0",
                 "train.eval_strategy=no", "train.save_strategy=no", "train.load_best_model_at_end=false",
                 "train.logging_steps=1000"]
    module.main(load_config(module.Config, None, overrides))


def run_reference(a) -> None:
    """transformers' examples/pytorch/language-modeling/run_mlm.py, its default (not line-by-line) path."""
    import datasets
    import transformers

    from bertkit.checkpoints import embedded_model_path

    transformers.set_seed(a.seed)
    model_path = embedded_model_path()
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_path)
    raw = datasets.load_dataset("text", data_files=a.corpus, split="train", cache_dir=a.cache)

    def tokenize_function(examples):
        return tokenizer(examples["text"], return_special_tokens_mask=True)

    tokenized = raw.map(tokenize_function, batched=True, num_proc=a.num_proc, remove_columns=["text"])
    block_size = a.max_length

    def group_texts(examples):
        concatenated = {k: [t for row in examples[k] for t in row] for k in examples}
        total = (len(concatenated["input_ids"]) // block_size) * block_size
        return {k: [t[i:i + block_size] for i in range(0, total, block_size)] for k, t in concatenated.items()}

    grouped = tokenized.map(group_texts, batched=True, num_proc=a.num_proc)
    model = transformers.BertForMaskedLM.from_pretrained(model_path)
    collator = transformers.DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)
    args = transformers.TrainingArguments(output_dir=a.output, max_steps=a.steps, per_device_train_batch_size=a.batch,
                                          learning_rate=a.lr, save_strategy="no", report_to="none",
                                          logging_steps=1000, seed=a.seed)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=grouped, data_collator=collator)
    trainer.train()
    trainer.save_model()  # for the held-out check; bertkit saves its final model itself


def held_out_loss(model_dir: str, corpus: str, max_length: int = 128, tokens: int = 32768) -> float:
    """Mean masked-LM loss of a saved model on fixed masks over held-out text, judged the same way for both
    variants: stock transformers BertForMaskedLM, `tokens` worth of [CLS] + max_length - 2 tokens + [SEP] blocks,
    15 % of the positions selected (80/10/10) by DataCollatorForLanguageModeling under a fixed torch seed."""
    import torch
    import transformers

    from bertkit.checkpoints import embedded_model_path

    tokenizer = transformers.AutoTokenizer.from_pretrained(embedded_model_path())
    lines = [line for line in Path(corpus).read_text(encoding="utf-8").split("\n") if line.strip()]
    ids = [t for row in tokenizer(lines, add_special_tokens=False)["input_ids"] for t in row]
    size, blocks = max_length - 2, tokens // max_length
    rows = [[tokenizer.cls_token_id, *ids[k * size:(k + 1) * size], tokenizer.sep_token_id] for k in range(blocks)]
    torch.manual_seed(0)
    batch = transformers.DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)(
        [{"input_ids": row} for row in rows])
    model = transformers.BertForMaskedLM.from_pretrained(model_dir).eval()
    total, count = 0.0, int((batch["labels"] != -100).sum())
    with torch.no_grad():
        for start in range(0, blocks, 32):
            logits = model(input_ids=batch["input_ids"][start:start + 32]).logits
            total += float(torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch["labels"][start:start + 32]
                                                             .flatten(), ignore_index=-100, reduction="sum"))
    return total / count


def child(a) -> None:
    import resource

    times: list[float] = []
    Timing.install(times)
    (run_bertkit if a.child == "bertkit" else run_reference)(a)
    tokens = a.batch * a.max_length * (len(times) - 1)
    Path(a.result).write_text(json.dumps({
        "first_step_end": times[0], "tokens_per_s": tokens / (times[-1] - times[0]) if len(times) > 1 else None,
        "main_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def measure(variant: str, corpus: Path, cache: Path, max_length: int, a, work: Path) -> dict:
    """One run in a fresh process; peak RSS of its process tree, polled."""
    import psutil

    result = work / "result.json"
    result.unlink(missing_ok=True)
    command = [sys.executable, __file__, "--child", variant, "--corpus", str(corpus), "--cache", str(cache),
               "--output", str(work / f"out-{variant}"), "--max-length", str(max_length), "--steps", str(a.steps),
               "--batch", str(a.batch), "--num-proc", str(a.num_proc), "--seed", str(a.seed), "--lr", str(a.lr),
               "--result", str(result)]
    log = (work / f"{variant}.log").open("w")
    started = time.time()
    process = psutil.Popen(command, cwd=ROOT, env=ENV, stdout=log, stderr=subprocess.STDOUT)
    peak = private = 0
    while process.poll() is None:
        rss, anonymous = _tree_memory(process)
        peak, private = max(peak, rss), max(private, anonymous)
        time.sleep(0.1)
    log.close()
    if process.returncode != 0:
        tail = (work / f"{variant}.log").read_text()[-3000:]
        raise SystemExit(f"{variant} failed (exit {process.returncode}):\n{tail}")
    out = json.loads(result.read_text())
    return {"peak_rss_mb": peak / 2**20, "peak_private_mb": private / 2**20, "main_rss_mb": out["main_rss_mb"],
            "first_step_s": out["first_step_end"] - started, "tokens_per_s": out["tokens_per_s"]}


def _tree_memory(process) -> tuple[int, int]:
    """(RSS, RSS less shared pages) summed over the process and its children, in bytes."""
    import psutil

    rss = private = 0
    try:
        for p in [process, *process.children(recursive=True)]:
            try:
                info = p.memory_info()
                rss, private = rss + info.rss, private + info.rss - info.shared
            except psutil.Error:
                pass
    except psutil.Error:
        pass
    return rss, private


# ------------------------------------------------------------------------------------------------ the report


def spread(values: list[float], digits: int = 1) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    return " / ".join(f"{v:,.{digits}f}" for v in (min(values), statistics.median(values), max(values)))


def report(results: dict, sizes: list[int]) -> None:
    rows = [("peak RSS MB (tree)", "first", "peak_rss_mb", 0), ("peak RSS MB (main)", "first", "main_rss_mb", 0),
            ("peak private MB (tree)", "first", "peak_private_mb", 0),
            ("peak RSS MB (tree), cached", "cached", "peak_rss_mb", 0),
            ("first step s, first run", "first", "first_step_s", 1),
            ("first step s, cached rerun", "cached", "first_step_s", 1),
            ("tokens/s at 128", "cached", "tokens_per_s", 0), ("tokens/s at 512", "cached512", "tokens_per_s", 0)]
    print(f"\n{'corpus':>7} {'variant':<10} {'measure':<28} {'min / median / max':>28}")
    for size in sizes:
        for variant in VARIANTS:
            for label, run, key, digits in rows:
                values = [r.get(key) for r in results[size][variant][run]]  # older results lack private
                print(f"{size:>5}MB {variant:<10} {label:<28} {spread(values, digits):>28}")
    print("\ntargets (medians)")
    first, last = sizes[0], sizes[-1]

    def med(size, variant, run, key):
        values = [r[key] for r in results[size][variant][run]]
        return statistics.median(values) if values else float("nan")  # an interrupted benchmark

    growth = med(last, "bertkit", "first", "peak_rss_mb") / med(first, "bertkit", "first", "peak_rss_mb")
    ref_growth = med(last, "reference", "first", "peak_rss_mb") / med(first, "reference", "first", "peak_rss_mb")
    print(f"  peak RSS {last} MB / {first} MB: bertkit {growth:.2f}x (target <= 1.2x), reference {ref_growth:.2f}x")
    if all("peak_private_mb" in r for runs in results.values() for v in runs.values() for r in v["first"]):
        private = [med(last, v, "first", "peak_private_mb") / med(first, v, "first", "peak_private_mb")
                   for v in VARIANTS]
        print(f"  peak private memory {last} MB / {first} MB: bertkit {private[0]:.2f}x, reference {private[1]:.2f}x")
    for size in sizes:
        cached = med(size, "bertkit", "cached", "first_step_s") / med(size, "bertkit", "first", "first_step_s")
        ratio = med(size, "reference", "first", "first_step_s") / med(size, "bertkit", "first", "first_step_s")
        prep = {v: med(size, v, "first", "first_step_s") - med(size, v, "cached", "first_step_s") for v in VARIANTS}
        print(f"  {size} MB: bertkit cached rerun / first run to the first step {cached:.0%} (target < 10%); "
              f"reference / bertkit first-run time to first step {ratio:.2f}x; preprocessing (first run minus "
              f"cached rerun) bertkit {prep['bertkit']:.0f} s, reference {prep['reference']:.0f} s (target: "
              "bertkit <= reference)")


def no_runs() -> dict:
    """One corpus size's results before any run: each variant's first, cached and cached512 runs."""
    return {v: {"first": [], "cached": [], "cached512": []} for v in VARIANTS}


def merge_results(saved: list[dict]) -> dict:
    """Several results.json contents as one: the runs of each size, variant and kind put together."""
    merged: dict = {}
    for results in saved:
        for size, variants in results.items():
            into = merged.setdefault(int(size), no_runs())
            for variant, runs in variants.items():
                for run, values in runs.items():
                    into[variant][run] += values
    return merged


def compare_quality(a, corpus: Path, work: Path) -> None:
    """Both variants trained a.quality_steps steps per seed: training tokens/s and held-out loss, side by side."""
    held_out = generate_corpus(work / "heldout_1MB.txt", 1, seed=1)  # other text than any training corpus
    length = a.quality_length
    print(f"\nheld-out masked-LM loss after {a.quality_steps} steps at {length} (batch {a.batch}, lr {a.lr}; "
          f"{corpus.name}; {held_out.name}, fixed masks)\n| seed | variant | tokens/s | held-out loss |\n"
          "|---|---|---|---|")
    for seed in (int(s) for s in a.quality_seeds.split(",")):
        run = argparse.Namespace(**{**vars(a), "steps": a.quality_steps, "seed": seed})
        for variant in VARIANTS:
            measured = measure(variant, corpus, work / f"cache-{variant}", length, run, work)
            loss = held_out_loss(str(work / f"out-{variant}"), str(held_out), length)
            print(f"| {seed} | {variant} | {measured['tokens_per_s']:.0f} | {loss:.4f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10,100,1000", help="corpus sizes in MB, comma-separated")
    parser.add_argument("--repeats", default="3", help="repeats, or one per size (e.g. 3,3,1)")
    parser.add_argument("--steps", type=int, default=6, help="optimizer steps per run")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--num-proc", type=int, default=None, help="map workers for both (default: the cores)")
    parser.add_argument("--workdir", default=None, help="where corpora and caches go (default: a temp folder)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--lr", type=float, default=5e-5, help="learning rate of both variants")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="which to run (a rerun of one, for --report)")
    parser.add_argument("--quality-steps", type=int, default=0, help="also compare held-out loss after N steps")
    parser.add_argument("--quality-seeds", default="42", help="seeds of the held-out comparison, comma-separated")
    parser.add_argument("--quality-length", type=int, default=128, help="max_length of the held-out comparison")
    parser.add_argument("--child", choices=VARIANTS)
    for name in ("--corpus", "--cache", "--output", "--result"):
        parser.add_argument(name)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--report", nargs="+", help="print the table of results.json files of earlier runs (merged)")
    a = parser.parse_args()
    if a.child:
        return child(a)
    if a.report:
        merged = merge_results([json.loads(Path(path).read_text()) for path in a.report])
        return report(merged, sorted(merged))
    if unknown := set(a.variants.split(",")) - set(VARIANTS):
        parser.error(f"--variants: unknown {', '.join(sorted(unknown))} (choose from {', '.join(VARIANTS)})")
    a.num_proc = a.num_proc or len(os.sched_getaffinity(0))
    sizes = [int(s) for s in a.sizes.split(",")]
    repeats = [int(r) for r in a.repeats.split(",")]
    repeats = repeats * len(sizes) if len(repeats) == 1 else repeats
    work = Path(a.workdir or tempfile.mkdtemp(prefix="bench_mlm_"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"CPU: {cpu_model()}, {len(os.sched_getaffinity(0))} cores usable (a shared machine: other work moves "
          f"the figures); num_proc {a.num_proc}; batch {a.batch}; {a.steps} steps; repeats {a.repeats}; {work}")
    results = {}
    for size, count in zip(sizes, repeats):
        corpus = generate_corpus(work / f"corpus_{size}MB.txt", size)
        results[size] = no_runs()
        for repeat in range(count):
            for variant in a.variants.split(","):  # interleaved, so machine noise hits both alike
                cache = work / f"cache-{variant}"
                shutil.rmtree(cache, ignore_errors=True)
                runs = results[size][variant]
                for run, length in (("first", 128), ("cached", 128), ("cached512", 512)):
                    runs[run].append(measure(variant, corpus, cache, length, a, work))
                    print(f"{size} MB #{repeat + 1} {variant} {run}: {json.dumps(runs[run][-1])}", flush=True)
                    (work / "results.json").write_text(json.dumps(results))  # --report reads it
                shutil.rmtree(cache, ignore_errors=True)
    report(results, sizes)
    if a.quality_steps:
        compare_quality(a, work / f"corpus_{sizes[0]}MB.txt", work)


if __name__ == "__main__":
    main()
