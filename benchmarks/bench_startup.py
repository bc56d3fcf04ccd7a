"""How fast the installed `bertkit` command answers, as a user sees it: wall seconds per command, run through the
console script from a fresh temporary folder outside the checkout, with the heavy modules each command imported.

Commands are interleaved (repeat 1: every command once, repeat 2: ...) so that machine noise spreads across them;
min / median / max over the repeats. Targets: `--help`, `COMMAND --help` and `ls` answer in at most 0.5 s (median),
`validate` and the refusals in at most 1.0 s. Standard library only: it imports neither torch nor bertkit.

    python benchmarks/bench_startup.py [--repeats 3] [--bertkit PATH] [--json PATH]
    git worktree add /tmp/before <commit>; python benchmarks/bench_startup.py --before /tmp/before --results startup

With --before, every command also runs on that checkout's code (the same console script with PYTHONPATH set to it),
interleaved with the current code's runs; --results NAME writes benchmarks/results/NAME.json for tables.py.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEAVY = ["torch", "transformers", "sentence_transformers", "datasets", "sklearn", "pandas", "numpy", "scipy",
         "pyarrow", "accelerate", "peft"]
ENV = {"HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "TOKENIZERS_PARALLELISM": "false"}
# (label, arguments after `bertkit`, expected exit code, target median seconds or None); {out} is a fresh file name
COMMANDS = [
    ("--help", ["--help"], 0, 0.5),
    ("run --help", ["run", "--help"], 0, 0.5),
    ("predict --help", ["predict", "--help"], 0, 0.5),
    ("ls", ["ls"], 0, 0.5),
    ("runs (empty runs/ folder)", ["runs"], 0, None),
    ("version", ["version"], 0, None),
    ("validate classify", ["validate", "classify"], 0, 1.0),
    ("validate classify --keys", ["validate", "classify", "--keys"], 0, 1.0),
    ("cp classify/en_sentiment OUT.yaml", ["cp", "classify/en_sentiment", "{out}"], 0, None),
    ("run classify data.train=missing.csv", ["run", "classify", "data.train=missing.csv"], 2, 1.0),
    ("predict no_such_run x.csv", ["predict", "no_such_run", "x.csv"], 2, 1.0),
    ("validate classify train.num_train_epochs=0", ["validate", "classify", "train.num_train_epochs=0"], 2, 1.0),
    ("run classify data.max_length=1", ["run", "classify", "data.max_length=1"], 2, 1.0),
]
REFERENCES = [('python -c "import torch"', ["-c", "import torch"]), ('python -c "pass"', ["-c", "pass"])]


def machine_header() -> list[str]:
    """Lines naming the CPU, the Python, torch / transformers versions (from package metadata) and the date."""
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []
    cpu = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), None)
    versions = []
    for package in ("bertkit", "torch", "transformers"):
        try:
            versions.append(f"{package} {importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{package} not installed")
    return [f"CPU: {cpu or platform.processor() or 'unknown'} ({os.cpu_count()} logical CPUs)",
            f"Python {platform.python_version()} ({sys.executable}); " + ", ".join(versions),
            f"Date: {datetime.datetime.now().isoformat(timespec='seconds')}"]


def script_python(script: Path) -> str:
    """The interpreter in the console script's shebang (the one that runs it), else this Python."""
    first = script.read_bytes()[:200].split(b"\n", 1)[0].decode(errors="replace")
    interpreter = first[2:].strip().split(" ")[0] if first.startswith("#!") else ""
    return interpreter if interpreter and Path(interpreter).exists() else sys.executable


def run_once(argv: list[str], cwd: str, env: dict | None = None) -> tuple[float, int, str]:
    """Run argv from cwd with the benchmark environment (and `env`): (wall seconds, exit code, stderr)."""
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env={**os.environ, **ENV, **(env or {})}, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=300)
    return time.perf_counter() - start, done.returncode, done.stderr


def heavy_imports(stderr: str) -> list[str]:
    """The HEAVY top-level modules named in `-X importtime` lines ("import time: self | cumulative | package")."""
    seen = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            seen.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return [name for name in HEAVY if name in seen]


def measure(bertkit: Path, repeats: int, cwd: str, before: Path | None = None) -> list[dict]:
    """Time every row `repeats` times, interleaved (with `before`, the old code's row right after the current one's),
    then once more under -X importtime; one result dict per row and code."""
    python = script_python(bertkit)
    variants = [("", {})] + ([(" (before)", {"PYTHONPATH": str(before)})] if before else [])
    rows = [{"command": f"bertkit {label}{name}", "args": args, "expected": code, "target": target, "env": env,
             "program": [str(bertkit)], "importtime": [python, "-X", "importtime", str(bertkit)]}
            for label, args, code, target in COMMANDS for name, env in variants]
    rows += [{"command": label, "args": args, "expected": 0, "target": None, "program": [python], "env": {},
              "importtime": [python, "-X", "importtime"]} for label, args in REFERENCES]
    for row in rows:
        row.update(seconds=[], exit_codes=[], note="")
    fresh = iter(range(10**6))

    def argv_of(row: dict) -> list[str]:
        """The row's arguments, with a fresh file name for {out} (cp never meets its earlier copy)."""
        return [arg.replace("{out}", f"out_{next(fresh)}.yaml") for arg in row["args"]]

    for repeat in range(repeats):
        for row in rows:
            if row["note"]:
                continue
            seconds, code, stderr = run_once(row["program"] + argv_of(row), cwd, row["env"])
            if code == 2 and "No such command" in stderr and row["expected"] == 0:
                row["note"] = f"skipped: `{row['command']}` does not exist yet"
                continue
            row["seconds"].append(seconds)
            row["exit_codes"].append(code)
            if code != row["expected"] and not row.get("stderr_tail"):
                row["stderr_tail"] = (stderr.strip().splitlines() or [""])[-1][:160]
        print(f"repeat {repeat + 1}/{repeats} done", file=sys.stderr, flush=True)
    for row in rows:
        if not row["note"]:
            row["heavy"] = heavy_imports(run_once(row["importtime"] + argv_of(row), cwd, row["env"])[2])
    return rows


def summarize(row: dict) -> dict:
    """Add min / median / max, the PASS / MISS verdict against the target and the exit-code check to a row."""
    if row["seconds"]:
        row.update(min=min(row["seconds"]), median=statistics.median(row["seconds"]), max=max(row["seconds"]))
        row["ok"] = "-" if row["target"] is None else ("PASS" if row["median"] <= row["target"] else "MISS")
        row["exit_ok"] = all(code == row["expected"] for code in row["exit_codes"])
    return row


def table(rows: list[dict]) -> list[str]:
    """The markdown-style table, then a note for every skipped row and every unexpected exit code."""
    lines = ["| command | exit (expected) | min | median | max | target | ok | heavy imports |",
             "|---|---|---|---|---|---|---|---|"]
    notes = []
    for row in rows:
        if row["note"]:
            lines.append(f"| `{row['command']}` | - | - | - | - | - | - | {row['note']} |")
            continue
        codes = ",".join(str(code) for code in sorted(set(row["exit_codes"])))
        exit_cell = f"{codes} ({row['expected']})" + ("" if row["exit_ok"] else " MISMATCH")
        target = "-" if row["target"] is None else f"{row['target']:.1f} s"
        lines.append(f"| `{row['command']}` | {exit_cell} | {row['min']:.2f} | {row['median']:.2f} | {row['max']:.2f} "
                     f"| {target} | {row['ok']} | {', '.join(row['heavy']) or 'none'} |")
        if not row["exit_ok"]:
            tail = row.get("stderr_tail", "")
            notes.append(f"- `{row['command']}`: exit {codes}, expected {row['expected']}: {tail}")
    return lines + ([""] + notes if notes else [])


def main() -> None:
    """Parse the options, measure, print the header and the table, write the JSON if asked."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each command (default 3)")
    parser.add_argument("--bertkit", type=Path, default=Path(sys.executable).parent / "bertkit",
                        help="the console script to time (default: the bertkit next to this Python)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON to this file")
    parser.add_argument("--before", type=Path, help="a checkout of the code to compare with (e.g. a git worktree)")
    parser.add_argument("--results", help="write benchmarks/results/NAME.json (docs/benchmarks.md's table)")
    options = parser.parse_args()
    if options.repeats < 1:
        parser.error("--repeats must be at least 1")
    if not options.bertkit.is_file():
        parser.error(f"no bertkit console script at {options.bertkit} (give one with --bertkit)")
    cwd = tempfile.mkdtemp(prefix="bertkit_startup_")
    (Path(cwd) / "runs").mkdir()  # `bertkit runs` reads runs/ by default: an empty one, so it finds no runs
    header = machine_header() + [f"bertkit: {options.bertkit}; cwd: {cwd}; repeats: {options.repeats}; "
                                 + " ".join(f"{key}={value}" for key, value in ENV.items())]
    rows = [summarize(row) for row in measure(options.bertkit.resolve(), options.repeats, cwd, options.before)]
    print("\n".join(header + [""] + table(rows)))
    if options.json:
        keep = ("command", "expected", "exit_codes", "exit_ok", "seconds", "min", "median", "max", "target", "ok",
                "heavy", "note", "stderr_tail")
        results = {"header": header, "rows": [{key: row[key] for key in keep if key in row} for row in rows]}
        options.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    if options.results:
        write_results(options.results, header, rows, options)


def write_results(name: str, header: list[str], rows: list[dict], options) -> None:
    """benchmarks/results/NAME.json in tables.py's form: one row per command, before and after side by side."""
    def cell(row: dict | None) -> str:
        if row is None or row["note"]:
            return "-"
        return f"{row['median']:.2f} ({row['min']:.2f}-{row['max']:.2f})"

    def heavy(row: dict | None) -> str:
        return "-" if row is None or row["note"] else ", ".join(row["heavy"]) or "none"

    by_name = {row["command"]: row for row in rows}
    table = []
    for row in rows:
        if row["command"].endswith(" (before)"):
            continue
        old = by_name.get(row["command"] + " (before)")
        target = "-" if row["target"] is None else f"{row['target']:.1f}"
        table.append([f"`{row['command']}`", cell(old), cell(row), target, row.get("ok", "-"), heavy(old),
                      heavy(row)])
    result = {
        "id": name, "order": 0, "title": "Start-up: how fast the installed `bertkit` answers",
        "command": f"python benchmarks/bench_startup.py --repeats {options.repeats}"
                   + (" --before BEFORE_CHECKOUT" if options.before else "") + f" --results {name}",
        "script": "benchmarks/bench_startup.py", "machine": header[0].removeprefix("CPU: "),
        "date": header[2].removeprefix("Date: ")[:10],
        "setup": "Each command through the installed console script, from a fresh folder outside the checkout, "
                 "interleaved over the repeats; seconds are median (min-max) of wall time. Before: the code of the "
                 "checkout given as --before (the same venv, PYTHONPATH set to it). Heavy imports: what -X importtime "
                 "saw imported of torch, transformers, sentence-transformers, datasets, scikit-learn, pandas, numpy, "
                 "scipy, pyarrow, accelerate and peft. " + header[1],
        "tables": [{"columns": ["command", "before (s)", "now (s)", "target (s)", "ok", "heavy imports before",
                                "heavy imports now"], "rows": table}],
    }
    path = Path(__file__).resolve().parent / "results" / f"{name}.json"
    path.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
