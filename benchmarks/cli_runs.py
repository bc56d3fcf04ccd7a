"""What the CLI-driven benchmarks share: running the `bertkit` of this environment offline, a mean ± sd cell, and
reading SST-2's TSV files and writing the CSV files the runs take."""

from __future__ import annotations

import csv
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "TOKENIZERS_PARALLELISM": "false"}


def bertkit(*args: str) -> float:
    """Run `bertkit ARGS...`; the wall time in seconds. A failure stops the benchmark with the command's stderr."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "bertkit", *args], env=ENV, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"bertkit {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - started


def band(values: list[float], digits: int = 4) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.{digits}f} ± {sd:.{digits}f}"


def read_tsv(source: Path) -> list[list[str]]:
    """`sentence<TAB>label` lines (SST-2's files: no header) as [text, label] rows."""
    with open(source, encoding="utf-8") as handle:
        return [line.rstrip("\n").rsplit("\t", 1) for line in handle if line.strip()]


def write_csv(records, target: Path, header=("text", "label")) -> Path:
    """Rows as a CSV file with a header (its folder made if need be); returns the path."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(records)
    return target
