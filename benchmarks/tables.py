"""docs/benchmarks.md from the results in benchmarks/results/*.json (stdlib only).

Each JSON file is one benchmark: its title, the command that produced it, the machine and date, a setup paragraph,
one or more tables (columns and rows of cells, transcribed as measured) and notes. Edit or add a results file, then

    python benchmarks/tables.py            # rewrites docs/benchmarks.md
    python benchmarks/tables.py --check    # exit status 1 if docs/benchmarks.md is not what the results give
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
OUTPUT = ROOT / "docs" / "benchmarks.md"

HEADER = """# Benchmarks

Every measured figure of bertkit, with the command and the machine it ran on. This file is generated: the numbers
live in [`benchmarks/results/*.json`](../benchmarks/results/) (one file per benchmark), and
`python benchmarks/tables.py` rewrites this page from them. Figures on shared 2-core CPU machines move from run to
run; where a table gives min / median / max or mean ± sd, read the spread before the median.

Placeholders in commands: `SST2_DIR` and `BBC_DIR` are local copies of the public SST-2 and BBC News data sets (the
benchmark's setup says which files the folder holds); `RUN_DIR` is a run's output_dir.
"""


def load_results(folder: Path = RESULTS) -> list[dict]:
    results = [json.loads(path.read_text(encoding="utf-8")) for path in sorted(folder.glob("*.json"))]
    return sorted(results, key=lambda result: (result.get("order", 1_000), result["id"]))


def markdown_table(table: dict) -> list[str]:
    columns, rows = table["columns"], table["rows"]
    for row in rows:
        if len(row) != len(columns):
            raise ValueError(f"row {row} has {len(row)} cells, the table {len(columns)} columns")
    return [markdown_row(columns), "|" + "---|" * len(columns)] + [markdown_row(row) for row in rows]


def markdown_row(cells: list) -> str:
    return "|" + "|".join(f" {cell} " if str(cell) else " " for cell in cells) + "|"


def section(result: dict) -> list[str]:
    lines = [f'<a id="{result["id"]}"></a>', "", f"## {result['title']}", ""]
    commands = result["command"] if isinstance(result["command"], list) else [result["command"]]
    shown = ", then ".join(f"`{command}`" for command in commands)
    lines.append(f"- Command: {shown}" + (f" ({result['command_note']})" if result.get("command_note") else ""))
    if result.get("script"):
        lines.append(f"- Code: `{result['script']}`")
    lines.append(f"- Machine: {result['machine']}")
    if result.get("date"):
        lines.append(f"- Date: {result['date']}" + (f" ({result['date_source']})" if result.get("date_source") else ""))
    lines.append(f"- Data: [`benchmarks/results/{result['id']}.json`](../benchmarks/results/{result['id']}.json)")
    lines.append("")
    if result.get("setup"):
        lines += [result["setup"], ""]
    for table in result["tables"]:
        if table.get("caption"):
            lines += [table["caption"], ""]
        lines += markdown_table(table) + [""]
    for note in result.get("notes", []):
        lines += [note, ""]
    return lines


def render(results: list[dict]) -> str:
    lines = HEADER.splitlines() + [""]
    lines += [f"- [{result['title']}](#{result['id']})" for result in results] + [""]
    for result in results:
        lines += section(result)
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that docs/benchmarks.md is up to date")
    args = parser.parse_args(argv)
    text = render(load_results())
    if args.check:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
        if current != text:
            print(f"{OUTPUT.relative_to(ROOT)} is out of date: run python benchmarks/tables.py", file=sys.stderr)
            return 1
        return 0
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(ROOT)} ({len(text.splitlines())} lines, {len(load_results())} benchmarks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
