"""What the CLI-driven benchmarks share: running the `bertkit` of this environment offline, and a mean ± sd cell."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

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
