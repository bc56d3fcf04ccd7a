"""`bertkit runs` (bertkit/runs.py): every run under a folder in one table, read from the run directories' own
files, with its status; two runs side by side with the config keys that differ."""

import json
import subprocess
import sys
import time

import yaml
from typer.testing import CliRunner

from bertkit import rundir
from bertkit.cli import app
from bertkit.runs import config_differences, find_runs, flatten, read_run, sort_runs


def fake_run(path, status="finished", lr=5e-5, accuracy=0.8, recipe="classify"):
    """A run directory as a bertkit run leaves it, without training one."""
    path.mkdir(parents=True)
    config = {"model": "/models/minilm", "output_dir": str(path), "data": {"train": "/data/en_sentiment/train.csv"},
              "train": {"learning_rate": lr, "num_train_epochs": 3}}
    (path / rundir.FINGERPRINT_FILE).write_text(json.dumps({"recipe": recipe, "started": "2026-11-30T10:00:00+00:00",
                                                            "config": flatten(config)}))
    if status == "failed":
        (path / rundir.LOG_FILE).write_text("bertkit: 10 train examples\nbertkit: run failed: OSError: disk\n")
    if status != "finished":
        return path
    (path / rundir.RUN_CONFIG_FILE).write_text(yaml.safe_dump(config))
    (path / "metrics.json").write_text(json.dumps({"eval": {"accuracy": accuracy, "macro_f1": accuracy - 0.1},
                                                   "selection_metric": "accuracy", "wall_time_s": 75.0}))
    rundir.write_record(path, recipe, started="2026-11-30T10:00:00+00:00")
    return path


def test_every_run_under_a_folder_with_its_status(tmp_path):
    fake_run(tmp_path / "a", accuracy=0.7)
    fake_run(tmp_path / "group" / "b", accuracy=0.9, lr=3e-5)
    fake_run(tmp_path / "c", status="failed")
    fake_run(tmp_path / "d", status="unfinished")
    (tmp_path / "a" / "checkpoint-5").mkdir()
    (tmp_path / "notes").mkdir()
    runs = {str(r.path.relative_to(tmp_path)): r for r in map(read_run, find_runs(tmp_path))}
    assert set(runs) == {"a", "group/b", "c", "d"}
    assert {name: r.status for name, r in runs.items()} == {"a": "finished", "group/b": "finished", "c": "failed",
                                                           "d": "unfinished"}
    assert runs["a"].metric == "accuracy" and runs["a"].value == 0.7 and runs["a"].wall_time_s == 75.0
    assert runs["a"].recipe == "classify" and runs["a"].model == "models/minilm"
    assert runs["a"].data == "en_sentiment/train.csv"
    assert [str(r.path.name) for r in sort_runs(list(runs.values()), "metric")][:2] == ["b", "a"]


def test_a_run_that_holds_its_lock_is_running(tmp_path):
    run = fake_run(tmp_path / "live", status="unfinished")
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from bertkit import rundir; "
                               f"rundir.acquire({str(run)!r}); print('held', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert read_run(run).status == "running"
    finally:
        holder.kill()
        holder.wait()
    time.sleep(0.1)
    assert read_run(run).status == "unfinished"


def test_runs_command_at_80_and_160_columns(tmp_path):
    fake_run(tmp_path / "a-long-run-name-that-a-person-gave-it-with-its-settings-lr5e-5", accuracy=0.7)
    fake_run(tmp_path / "b", accuracy=0.9)
    for width in (80, 160):
        result = CliRunner().invoke(app, ["runs", str(tmp_path), "--sort", "metric"], env={"COLUMNS": str(width)})
        assert result.exit_code == 0, result.output
        lines = result.output.splitlines()
        assert all(len(line) <= width for line in lines), result.output
        rows = [line for line in lines if "accuracy" in line]
        assert "accuracy 0.9000" in rows[0] and "accuracy 0.7000" in rows[1]  # best first
        assert all("finished" in row and "1:15" in row for row in rows)
        assert (lines[0].split()[1] == "model") == (width >= 120)  # a column of its own when there is room


def test_two_runs_show_the_keys_that_differ(tmp_path):
    a, b = fake_run(tmp_path / "a", lr=5e-5, accuracy=0.7), fake_run(tmp_path / "b", lr=3e-5, accuracy=0.9)
    assert config_differences(read_run(a), read_run(b)) == [("train.learning_rate", "5e-05", "3e-05")]
    result = CliRunner().invoke(app, ["runs", str(a), str(b)], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert any(line.split() == ["accuracy", "0.7000", "0.9000"] for line in lines), result.output
    assert any(line.split() == ["train.learning_rate", "5e-05", "3e-05"] for line in lines), result.output
    assert not any(line.startswith("output_dir") for line in lines)


def test_runs_of_a_folder_that_is_not_there_is_one_line(tmp_path):
    result = CliRunner().invoke(app, ["runs", str(tmp_path / "missing")])
    assert result.exit_code == 2 and "is not a folder" in result.output
