"""What a benchmark prints about the machine it ran on (speed ratios differ between the CPUs this project meets)."""

from __future__ import annotations

import platform
from pathlib import Path


def cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    for line in cpuinfo.read_text().splitlines() if cpuinfo.exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"
