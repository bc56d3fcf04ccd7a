"""`bertkit inspect`: a look at a dataset before training — labels, lengths in tokens, truncation, unknown tokens,
empty and duplicate rows, train/dev overlap, and what share of each document every long-document strategy keeps."""

from __future__ import annotations

import shlex

import numpy as np
import transformers

from .checkpoints import DEFAULT_MODEL, load_tokenizer, resolve_model
from .datafiles import read_table, resolve_columns
from .families import position_limit
from .labels import label_distribution
from .splits import duplicate_and_overlap_report, load_split
from .tokenization import token_lengths, word_token_lengths
from .tasks.long_documents import LongDocConfig, covered, plan_windows, short_segment_keep


def label_rows(counts: dict[str, int], limit: int = 20) -> dict[str, int | str]:
    """The `label NAME: count` rows `bertkit inspect` prints: every label up to `limit`, else the `limit` most
    frequent and one row for the rest (5,000 labels are not 5,000 lines)."""
    if len(counts) <= limit:
        return {f"label {name}": count for name, count in counts.items()}
    top = sorted(counts.items(), key=lambda item: -item[1])[:limit]
    rest = len(counts) - limit
    return {**{f"label {name}": count for name, count in top},
            f"... and {rest:,} more labels": f"{sum(counts.values()) - sum(c for _, c in top):,} rows"}


def unknown_rate(tokenizer, texts: list[str]) -> float:
    encoded = tokenizer(texts, add_special_tokens=False, truncation=False, verbose=False)["input_ids"]
    total = sum(len(ids) for ids in encoded)
    unknown = sum(ids.count(tokenizer.unk_token_id) for ids in encoded)
    return unknown / max(total, 1)


AUTO_PERCENTILE = 99  # data.max_length=auto covers this share of the training texts
# below this many training rows for the rarest label, the few-shot recipe is the better bet: on SST-2 it led classify
# by 12-16 points from 8 to 64 per class, the largest size measured (docs/benchmarks.md#fewshot)
FEW_PER_LABEL = 64
IMBALANCE_RATIO = 5  # inspect suggests class_weights=auto when the largest label has this many times the smallest


def auto_max_length(lengths: np.ndarray, limit: int) -> tuple[int, float]:
    """data.max_length=auto: the smallest multiple of 8 covering the 99th percentile of the training texts' token
    lengths (special tokens included), within the model's `limit` positions; and the share of rows it truncates."""
    value = int(np.ceil(np.percentile(lengths, AUTO_PERCENTILE) / 8) * 8)
    value = min(max(value, 8), limit)
    return value, float((lengths > value).mean())


def imbalance_warning(counts: dict[str, int]) -> str | None:
    """A line for `bertkit inspect` when the labels are strongly imbalanced (single-label)."""
    present = {name: count for name, count in counts.items() if count}
    if len(present) < 2:
        return None
    (big, most), (small, least) = max(present.items(), key=lambda i: i[1]), min(present.items(), key=lambda i: i[1])
    if most < IMBALANCE_RATIO * least:
        return None
    return (f"labels are imbalanced: {big} has {most:,} rows, {small} {least:,} ({most / least:.0f}x) — consider "
            "class_weights=auto (inverse-frequency loss weights) and watch macro_f1 rather than accuracy")


def length_summary(lengths: np.ndarray, max_length: int) -> dict:
    return {
        "min": int(lengths.min()), "median": int(np.median(lengths)), "p90": int(np.percentile(lengths, 90)),
        "p99": int(np.percentile(lengths, 99)), "max": int(lengths.max()),
        "over_max_length": float((lengths > max_length).mean()),
        "tokens_kept_by_truncation": float(np.minimum(lengths, max_length).sum() / lengths.sum()),
    }


def strategy_settings(max_length: int, long_doc: LongDocConfig | None = None) -> dict[str, LongDocConfig]:
    """The strategies inspect compares, by the name it shows. Values that do not fit this max_length (the default
    head_tokens=128 at max_length=128, say) become a quarter of the room; the capped chunk row uses
    long_doc.max_windows, or 4."""
    base, room = long_doc or LongDocConfig(), max_length - 2
    head = base.head_tokens if 0 <= base.head_tokens < room else room // 4
    stride = base.stride if 0 <= base.stride < room else room // 4
    cap = base.max_windows or 4
    return {
        "head": LongDocConfig("head"), "tail": LongDocConfig("tail"),
        f"head_tail ({head} + {room - head})": LongDocConfig("head_tail", head_tokens=head),
        f"chunk (stride {stride})": LongDocConfig("chunk", stride=stride),
        f"chunk (stride {stride}, max {cap} windows)": LongDocConfig("chunk", stride=stride, max_windows=cap),
    }


def document_coverage(first_lengths: list[int], second_lengths: list[int] | None, max_length: int,
                      cfg: LongDocConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per document: the share of its text tokens (both segments, special tokens not counted) that the strategy
    puts in front of the model, how many rows (windows) it becomes, and how many tokens those rows hold in all."""
    shares, rows_per_doc, tokens = [], [], []
    for index, n_first in enumerate(first_lengths):
        n_second = second_lengths[index] if second_lengths is not None else None
        n_long, n_short = (n_first, 0) if n_second is None else (max(n_first, n_second), min(n_first, n_second))
        room = max_length - (2 if n_second is None else 3)
        short = short_segment_keep(n_short, room) if n_second is not None else 0
        rows, _ = plan_windows(n_long, room - short, cfg)
        shares.append((covered(rows) + short) / max(n_long + n_short, 1))
        rows_per_doc.append(len(rows))
        specials = max_length - room
        tokens.append(sum(end - start for row in rows for start, end in row) + len(rows) * (short + specials))
    return np.array(shares), np.array(rows_per_doc), np.array(tokens)


def coverage_report(tokenizer, texts: list[str], pairs: list[str] | None, max_length: int,
                    long_doc: LongDocConfig | None = None) -> dict:
    """For each strategy: mean share of a document's tokens kept, share of documents kept whole, windows per
    document (mean / max), and tokens run through the model relative to plain truncation (the compute cost)."""
    first = [len(ids) for ids in tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]]
    second = ([len(ids) for ids in tokenizer(pairs, add_special_tokens=False, verbose=False)["input_ids"]]
              if pairs is not None else None)
    report, head_tokens = {}, None
    for name, cfg in strategy_settings(max_length, long_doc).items():
        shares, rows, tokens = document_coverage(first, second, max_length, cfg)
        head_tokens = tokens.sum() if head_tokens is None else head_tokens
        report[name] = {"mean_share_kept": float(shares.mean()), "documents_whole": float((shares >= 1.0).mean()),
                        "windows_mean": float(rows.mean()), "windows_max": int(rows.max()),
                        "tokens_vs_head": float(tokens.sum() / max(head_tokens, 1))}
    return report


def coverage_table(report: dict) -> tuple[str, dict]:
    """A title and rows for the CLI's summary table: kept share / documents whole / windows per document."""
    rows = {name: f"{r['mean_share_kept']:.1%} kept, {r['documents_whole']:.1%} whole"
                  + (f"; {r['windows_mean']:.1f} windows (max {r['windows_max']}), {r['tokens_vs_head']:.1f}x "
                     "the tokens of head" if r["windows_max"] > 1 else "")
            for name, r in report["long_doc"].items()}
    return (f"long documents at max_length {report['max_length']}: mean share of each document's tokens kept, "
            f"documents kept whole", rows)


def few_labels_hint(counts: dict[str, int], train_path: str, dev_path: str | None = None) -> str | None:
    """A line for `bertkit inspect` and `bertkit run classify` when the rarest label has fewer than FEW_PER_LABEL
    training rows: there the few-shot recipe (SetFit) beats fine-tuning a fresh head (docs/benchmarks.md#fewshot)."""
    if not counts:
        return None
    name, fewest = min(counts.items(), key=lambda item: item[1])
    if fewest >= FEW_PER_LABEL:
        return None
    command = f"bertkit run fewshot data.train={shlex.quote(str(train_path))}"
    command += f" data.eval={shlex.quote(str(dev_path))}" if dev_path else ""
    return (f"few labels: the rarest label ({name}) has {fewest} training rows — below {FEW_PER_LABEL} per label the "
            f"few-shot recipe is likely better than fine-tuning a classification head: {command}")


def inspect_data(train_path: str, dev_path: str | None = None, model: str = DEFAULT_MODEL, max_length: int = 128,
                 column_overrides: dict | None = None, long_doc: LongDocConfig | None = None,
                 label_kind: str = "auto") -> dict:
    """The report `bertkit inspect` prints, as a dict. `label_kind` decides a label column that auto refuses as
    ambiguous (as data.label_kind does for classify)."""
    has_labels = resolve_columns(read_table(train_path).column_names, train_path, require_label=False).label is not None
    train, columns, labels = load_split(train_path, column_overrides, None, require_label=has_labels,
                                        label_kind=label_kind)
    dev = load_split(dev_path, column_overrides, labels, require_label=has_labels)[0] if dev_path else None
    model_path = resolve_model(model)
    tokenizer = load_tokenizer(model_path)
    texts = list(train[columns.text])
    pairs = list(train[columns.text_pair]) if columns.text_pair else None
    lengths = token_lengths(tokenizer, texts, pairs)
    auto, auto_truncated = auto_max_length(lengths, position_limit(transformers.AutoConfig.from_pretrained(model_path)))
    return {
        "file": train_path, "rows": len(train),
        "columns": {"text": columns.text, "text_pair": columns.text_pair, "label": columns.label},
        "label_kind": labels.kind if labels else None,
        "labels": label_distribution(train, labels),
        "warnings": [line for line in [imbalance_warning(label_distribution(train, labels))
                                       if labels is not None and labels.kind == "single" else None,
                                       few_labels_hint(label_distribution(train, labels), train_path, dev_path)
                                       if labels is not None and labels.kind != "regression" else None] if line],
        "max_length": max_length,
        "tokens": length_summary(lengths, max_length),
        "auto_max_length": {"value": auto, "truncated": auto_truncated},
        "long_doc": coverage_report(tokenizer, texts, pairs, max_length, long_doc),
        "unknown_token_rate": unknown_rate(tokenizer, texts + (pairs or [])),
        "quality": duplicate_and_overlap_report(train, dev, columns),
    }


__all__ = ["inspect_data", "auto_max_length", "imbalance_warning", "few_labels_hint", "FEW_PER_LABEL",
           "label_distribution", "label_rows",
           "token_lengths", "word_token_lengths", "unknown_rate", "length_summary",
           "strategy_settings", "document_coverage", "coverage_report", "coverage_table"]
