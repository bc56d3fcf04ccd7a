"""bertkit as a user installs it: a wheel built from this checkout, installed with its dependencies into a fresh
venv, its `bertkit` command run from a folder that is not the checkout.

The venv cannot see the checkout (no editable install, no PYTHONPATH, another working directory), so the recipes,
configs and sample data must come from the wheel. About two minutes: most of it is pip installing the dependencies
from its cache. The torch requirement is pinned (BERTKIT_TORCH, from the Makefile) so that pip never pulls a CUDA
build.
"""

import csv
import glob
import json
import os
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
import yaml

from bertkit.shipped import CONFIGS_DIR, recipe_names

ROOT = Path(__file__).resolve().parent.parent
TORCH = os.environ.get("BERTKIT_TORCH") or f"torch=={torch.__version__.split('+')[0]}"

pytestmark = pytest.mark.wheel


def _run(command, cwd, env=None, timeout=900):
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{' '.join(map(str, command))}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(bertkit command, environment, a work folder) of a fresh venv with bertkit installed from its wheel."""
    base = tmp_path_factory.mktemp("wheel")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(base / "dist"), str(ROOT)], cwd=base)
    wheel = glob.glob(str(base / "dist" / "bertkit-*.whl"))
    assert len(wheel) == 1, wheel
    _run([sys.executable, "-m", "venv", str(base / "venv")], cwd=base)
    # --no-compile: no .pyc written ahead for the thousands of files of torch and the rest, which the commands below
    # never import; Python compiles what they do import when they first import it
    _run([str(base / "venv/bin/python"), "-m", "pip", "install", "-q", "--no-compile", *shlex.split(TORCH), wheel[0]],
         cwd=base)
    # (conftest drops PYTHONDONTWRITEBYTECODE: the .pyc files the first command writes serve the rest, where each
    # command compiled torch and transformers again, 15 s a command here)
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(HF_HUB_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1", TOKENIZERS_PARALLELISM="false",
               PATH=f"{base / 'venv/bin'}{os.pathsep}{env.get('PATH', '')}", HF_HOME=str(base / "hf_home"))
    work = base / "work"
    work.mkdir()
    return {"bertkit": str(base / "venv/bin/bertkit"), "python": str(base / "venv/bin/python"), "env": env,
            "work": work, "wheel": Path(wheel[0])}


def bertkit(installed, *args):
    return _run([installed["bertkit"], *args], cwd=installed["work"], env=installed["env"]).stdout


def test_the_wheel_carries_recipes_configs_and_sample_data(installed):
    names = zipfile.ZipFile(installed["wheel"]).namelist()
    for recipe in recipe_names():
        assert f"bertkit/shipped/recipes/{recipe}.py" in names
    for config in CONFIGS_DIR.glob("*/*.*"):
        assert f"bertkit/shipped/recipes/configs/{config.parent.name}/{config.name}" in names
    assert "bertkit/shipped/data/en_sentiment/train.csv" in names
    assert not any(name.startswith(("recipes/", "data/", "tests/")) for name in names)


def test_installed_package_is_not_the_checkout(installed):
    where = _run([installed["python"], "-c", "import bertkit.shipped as s; print(s.ROOT)"], cwd=installed["work"],
                 env=installed["env"]).stdout.strip()
    assert "site-packages" in where and not Path(where).is_relative_to(ROOT), where


def test_ls_lists_every_recipe_and_config(installed):
    listing = bertkit(installed, "ls")
    for recipe in recipe_names():
        assert f"\n{recipe} " in f"\n{listing}", recipe
    for config in CONFIGS_DIR.glob("*/*.yaml"):
        assert f"{config.parent.name}/{config.stem}" in listing


def test_main_job_runs_from_another_folder_and_predicts(installed):
    """The README's main job (a shipped config by name; a few steps) and predict, from the work folder. The user's
    relative paths (output_dir, a dev file of their own) resolve against that folder, the shipped config's own
    data against the installed package. (One run for both: each run here starts a fresh venv's torch.)"""
    with open(installed["work"] / "my_dev.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        writer.writerows([["a good film", "positive"], ["a bad film", "negative"]] * 4)
    bertkit(installed, "run", "classify", "-c", "classify/en_sentiment", "output_dir=runs/demo",
            "data.eval=my_dev.csv", "train.max_steps=3", "train.eval_strategy=steps", "train.save_strategy=steps",
            "train.eval_steps=3", "train.save_steps=3", "precision=fp32")
    out = installed["work"] / "runs" / "demo"
    saved = yaml.safe_load((out / "bertkit_config.yaml").read_text())
    assert "site-packages/bertkit/shipped/data/en_sentiment/train.csv" in saved["data"]["train"]
    assert (installed["work"] / saved["data"]["eval"]).resolve() == (installed["work"] / "my_dev.csv").resolve()
    assert json.loads((out / "metrics.json").read_text())["rows"]["dev"] == 8
    rows = installed["work"] / "new.csv"
    rows.write_text("text\nwhat a wonderful film\nboring and far too long\n")
    bertkit(installed, "predict", "runs/demo", "new.csv", "-o", "predictions.jsonl")
    predictions = [json.loads(line) for line in (installed["work"] / "predictions.jsonl").read_text().splitlines()]
    assert len(predictions) == 2 and {p["label"] for p in predictions} <= {"positive", "negative"}


def test_the_few_shot_recipe_runs_installed_on_its_shipped_sample(installed):
    """setfit comes with the wheel's dependencies, and `fewshot/en_sentiment` names its 16-row sample from any
    folder; the run predicts through the same installed command."""
    out = installed["work"] / "runs" / "few"
    bertkit(installed, "run", "fewshot", "-c", "fewshot/en_sentiment", f"output_dir={out}", "num_iterations=2")
    assert (out / "model_head.pkl").is_file() and (out / "config_setfit.json").is_file()
    (installed["work"] / "few.csv").write_text("text\nwhat a wonderful film\nboring and far too long\n")
    bertkit(installed, "predict", str(out), "few.csv", "-o", "few.jsonl")
    predictions = [json.loads(line) for line in (installed["work"] / "few.jsonl").read_text().splitlines()]
    assert len(predictions) == 2 and {p["label"] for p in predictions} <= {"positive", "negative"}


def test_a_copied_config_and_recipe_run_from_their_new_place(installed):
    bertkit(installed, "cp", "classify/en_sentiment", "mine/")
    bertkit(installed, "cp", "classify", "mine/")
    copied = installed["work"] / "mine" / "en_sentiment.yaml"
    assert "site-packages/bertkit/shipped/data/en_sentiment/train.csv" in copied.read_text()
    other = installed["work"] / "elsewhere"
    other.mkdir()
    result = _run([installed["bertkit"], "validate", "../mine/classify.py", "-c", "../mine/en_sentiment.yaml"],
                  cwd=other, env=installed["env"])
    assert "ok: " in result.stdout


def test_the_app_extra_serves_its_pages_installed(installed):
    """`bertkit[app]` on top of the wheel: the page's templates come from the installed package, and the installed
    command serves the Train page with the shipped recipes' keys from another folder."""
    import socket
    import time
    import urllib.request

    assert any(name.startswith("bertkit/resources/app/") and name.endswith("train.html")
               for name in zipfile.ZipFile(installed["wheel"]).namelist())
    _run([installed["python"], "-m", "pip", "install", "-q", "--no-compile", f"bertkit[app] @ "
          f"{installed['wheel'].as_uri()}"], cwd=installed["work"], env=installed["env"])
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    app = subprocess.Popen([installed["bertkit"], "app", "--port", str(port), "--runs-dir", "app-runs"],
                           cwd=installed["work"], env=installed["env"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:  # until the port answers; then one request, given its time (a fresh venv compiles on import)
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert app.poll() is None and time.monotonic() < deadline, app.stderr.read() if app.poll() else "slow"
                time.sleep(0.3)
        page = urllib.request.urlopen(f"http://127.0.0.1:{port}/train?recipe=classify", timeout=120).read()
        text = page.decode("utf-8")
        assert "Start a run" in text and 'name="train.learning_rate"' in text and "classify/en_sentiment" in text
        assert (installed["work"] / "app-runs").is_dir()
    finally:
        app.kill()
        app.wait(30)
