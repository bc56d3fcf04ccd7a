"""The installed `bertkit` console script and `python -m bertkit`, as a user runs them."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = Path(sys.executable).parent / "bertkit"
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}


def run(*args, env=ENV):
    return subprocess.run([*args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)


@pytest.mark.skipif(not SCRIPT.exists(), reason="bertkit is not installed in this environment")
def test_console_script_validates_a_shipped_config():
    result = run(str(SCRIPT), "validate", "classify", "-c", "recipes/configs/classify/en_sentiment.yaml")
    assert result.returncode == 0, result.stderr
    assert "ok: classify config is valid" in result.stdout
    assert "learning_rate: 0.0001" in result.stdout


def test_python_dash_m_lists_recipes():
    result = run(sys.executable, "-m", "bertkit", "ls")
    assert result.returncode == 0, result.stderr
    assert "classify" in result.stdout


@pytest.mark.skipif(not SCRIPT.exists(), reason="bertkit is not installed in this environment")
def test_bad_input_through_the_console_script_is_one_line_and_exit_2(tmp_path):
    result = run(str(SCRIPT), "run", "classify", f"data.train={tmp_path / 'missing.csv'}")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().count("\n") == 0 and result.stderr.startswith("error:")
    assert "missing.csv" in result.stderr


def test_end_to_end_benchmark_commands_are_valid(tmp_path):
    """benchmarks/bench_e2e.py's bertkit command line validates, with the hyperparameters as numbers; the plain
    Trainer side builds its TrainingArguments from the same constants."""
    import transformers

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_e2e
    finally:
        sys.path.pop(0)
    line = bench_e2e.command("bertkit classify bf16", ROOT / "data/en_sentiment/train.csv", tmp_path / "out", 4, 43,
                             tmp_path / "result.json")
    assert line[1:3] == ["run", "classify"]
    result = run(sys.executable, "-m", "bertkit", "validate", *line[2:])
    assert result.returncode == 0, result.stderr
    for expected in ("learning_rate: 0.0001", "warmup_steps: 0.1", "precision: bf16", "seed: 43", "llrd: 1.0",
                     "metric_for_best_model: accuracy"):
        assert expected in result.stdout, expected
    args = transformers.TrainingArguments(output_dir=str(tmp_path), use_cpu=True, **bench_e2e.TRAIN_ARGS)
    assert args.learning_rate == 1e-4 and args.per_device_train_batch_size == 16


@pytest.mark.skipif(not SCRIPT.exists(), reason="bertkit is not installed in this environment")
def test_help_texts_keep_their_square_brackets():
    """Help is rendered as rich markup: `bertkit[onnx]` came out as `bertkit` (the tag eaten), in the command list
    and in `export --help`. Every bracketed word of every command's docstring must survive."""
    import re

    from typer.testing import CliRunner

    from bertkit.cli import app

    listing = run(str(SCRIPT), "--help", env={**ENV, "COLUMNS": "200"})
    assert 'pip install "bertkit[onnx]"' in listing.stdout, listing.stdout
    for command in app.registered_commands:
        name = command.name or command.callback.__name__
        text = " ".join(CliRunner().invoke(app, [name, "--help"], terminal_width=200).output.split())
        for bracketed in re.findall(r"\S*\[[^\]\s]+\]\S*", (command.callback.__doc__ or "").replace("\\[", "[")):
            assert bracketed in text, (name, bracketed)


def test_the_command_list_wraps_each_summary_to_the_terminal_not_to_the_docstring():
    """`bertkit --help` shows each command's first paragraph wrapped to the terminal's width: it was cut where the
    docstring's source lines end ("... The full log goes to" | "OUTPUT_DIR/train.log.", on a 200-column terminal)."""
    from typer.testing import CliRunner

    from bertkit.cli import app

    listing = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"}).output
    lines = [" ".join(line.strip("│ ").split()) for line in listing.splitlines()]
    for command in app.registered_commands:
        summary = " ".join((command.callback.__doc__ or "").split("\n\n")[0].split())
        first = summary.replace("\\[", "[").replace("`", "")[:150]  # fits one line beside the name; spans a line break
        assert any(first in line for line in lines), (command.name or command.callback.__name__, first, listing)


def test_a_reader_that_goes_away_stops_the_command_quietly():
    """`bertkit validate ... | head -1`: stdout's reader closes first; the command stops with 141 (SIGPIPE's code) and
    says nothing (it said "unexpected BrokenPipeError")."""
    process = subprocess.Popen([str(SCRIPT), "validate", "classify", "-c", "classify/en_sentiment"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    process.stdout.close()  # before the command writes its first line
    stderr = process.stderr.read()
    assert process.wait(60) == 141 and stderr == "", stderr
