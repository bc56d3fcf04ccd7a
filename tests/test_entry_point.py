"""The installed `bertkit` console script and `python -m bertkit`, as a user runs them."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = Path(sys.executable).parent / "bertkit"
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}


def run(*args):
    return subprocess.run([*args], capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=300)


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
