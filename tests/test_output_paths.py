"""No output replaces a file a run was made from (issue 44, "Data loss"): one rule (rundir.check_output_path) for every
command that writes a file the user names. Refused whatever the spelling, --force or not: the command's input, a
file of a run directory, a data file (or model) recorded by a run the command reads — its bertkit_config.yaml, the
content hashes of its fingerprint, the files `bertkit evaluate` measured on it. Refused without --force: an existing
file of another kind than the command writes. And `bertkit evaluate` keeps one record per file, not per file name."""

# ruff: noqa: F811 - pytest fixtures (sentiment) are arguments named like the imported fixture

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import run_in_process
from test_classify import base_overrides, run_recipe, sentiment  # noqa: F401 - fixture
from typer.testing import CliRunner

from bertkit import rundir
from bertkit.cli import app

runner = CliRunner()
pytestmark = pytest.mark.usefixtures("one_thread")
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "COLUMNS": "400"}
TINY = ["train.max_steps=2", "train.eval_strategy=no", "train.save_strategy=no", "train.load_best_model_at_end=false"]


def bertkit(cwd: Path, *args) -> subprocess.CompletedProcess:
    """The command in this process, as the console script runs it (helpers.run_in_process)."""
    return run_in_process(*args, cwd=cwd, env={"COLUMNS": "400"})


def refused(result) -> str:
    """Exit 2 and one `error:` line (installed command or CliRunner); the line, with whitespace made single."""
    code = getattr(result, "returncode", getattr(result, "exit_code", None))
    text = result.stderr if hasattr(result, "stderr") and isinstance(result, subprocess.CompletedProcess) else \
        result.output
    assert code == 2, (code, text)
    assert "Traceback" not in text and "unexpected" not in text, text
    assert text.count("error: ") == 1, text
    return "error: " + " ".join(text.split("error: ")[1].split())


@pytest.fixture(scope="module")
def project(tmp_path_factory, tiny_model_dir, sentiment):
    """A user's folder: data/train.csv and data/dev.csv, and two finished tiny runs A and B trained there with the
    paths written relative (as a user types them), so their configs record `data/train.csv`."""
    root = tmp_path_factory.mktemp("project")
    (root / "data").mkdir()
    for split in ("train", "dev"):
        shutil.copyfile(sentiment[split], root / "data" / f"{split}.csv")
    (root / "new.csv").write_text("text\na film that was fine\nthe film number 3 was dull\n")
    here = os.getcwd()
    os.chdir(root)
    try:
        for name, rate in (("A", "1.0e-3"), ("B", "3.0e-3")):
            run_recipe(base_overrides(tiny_model_dir, "data/train.csv", "data/dev.csv", f"runs/{name}", *TINY,
                                      f"train.learning_rate={rate}"))
    finally:
        os.chdir(here)
    assert rundir.read_run_config(str(root / "runs" / "A"))["data"]["train"] == "data/train.csv"
    return root


def contents(root: Path) -> dict:
    return {path: path.read_bytes() for path in sorted((root / "data").rglob("*")) if path.is_file()}


# ------------------------------------------------------------------ 1: predict -o the file the run was trained on


def test_predict_never_writes_over_the_file_the_run_was_trained_on(project):
    before = contents(project)
    message = refused(bertkit(project, "predict", "runs/A", "new.csv", "-o", "data/train.csv"))
    assert "-o data/train.csv is data.train=data/train.csv of the run runs/A" in message, message
    assert "--force cannot make that safe" in message and "-o new.predictions.csv" in message, message
    # --force replaces a file of another kind, never what a run was made from
    message = refused(bertkit(project, "predict", "runs/A", "new.csv", "-o", "data/train.csv", "--force"))
    assert "data.train=data/train.csv" in message, message
    assert contents(project) == before and not list(project.glob("*.predictions.*"))


@pytest.mark.parametrize("spelling", ["dot", "absolute", "dotdot", "symlink", "home", "dev"])
def test_every_spelling_of_a_recorded_data_file_is_refused(project, monkeypatch, spelling):
    monkeypatch.chdir(project)
    monkeypatch.setenv("HOME", str(project))
    link = project / "link.csv"
    if spelling == "symlink" and not link.exists():
        os.symlink(project / "data" / "train.csv", link)
    output = {"dot": "./data/train.csv", "absolute": str(project / "data" / "train.csv"),
              "dotdot": "data/../data/train.csv", "symlink": "link.csv", "home": "~/data/train.csv",
              "dev": "data/dev.csv"}[spelling]
    before = contents(project)
    message = refused(runner.invoke(app, ["predict", "runs/A", "new.csv", "-o", output]))
    assert f"-o {output} is data.{'eval' if spelling == 'dev' else 'train'}=" in message, message
    assert contents(project) == before


def test_a_data_file_recorded_relative_to_another_folder_is_known_by_its_content(project, tmp_path, monkeypatch):
    """The run's config says `data/train.csv`, relative to the folder it was trained in: from elsewhere that path
    names nothing, but the fingerprint's sha256 still knows the file."""
    monkeypatch.chdir(tmp_path)
    output = project / "data" / "train.csv"
    before = contents(project)
    message = refused(runner.invoke(app, ["predict", str(project / "runs" / "A"), str(project / "new.csv"), "-o",
                                          str(output)]))
    assert "holds the same content as data.train of the run" in message, message
    message = refused(runner.invoke(app, ["evaluate", str(project / "runs" / "A"), str(project / "data" / "dev.csv"),
                                          "-o", str(output)]))
    assert "holds the same content as data.train" in message, message
    assert contents(project) == before


def test_the_model_a_run_started_from_is_never_an_output(project, tiny_model_dir, monkeypatch):
    """model= of the run's config: a stock model folder, not a run directory, so only the config knows it."""
    monkeypatch.chdir(project)
    target = Path(tiny_model_dir) / "tokenizer.json"  # a .json name predict accepts
    before = target.read_bytes()
    message = refused(runner.invoke(app, ["predict", "runs/A", "new.csv", "-o", str(target)]))
    assert f"-o {target} is inside model={tiny_model_dir} of the run runs/A" in message, message
    assert target.read_bytes() == before


def test_evaluate_minus_o_never_writes_over_a_recorded_data_file(project, monkeypatch):
    monkeypatch.chdir(project)
    before = contents(project)
    for force in ([], ["--force"]):
        message = refused(runner.invoke(app, ["evaluate", "runs/A", "data/dev.csv", "-o", "data/train.csv", *force]))
        assert "-o data/train.csv is data.train=data/train.csv of the run runs/A" in message, message
        assert "-o data/dev.metrics.json" in message, message
    assert contents(project) == before


# ------------------------------------------------------------------ 2: report A B -o dev.csv, and other kinds


def test_report_never_writes_over_the_dev_file_the_runs_used(project):
    before = contents(project)
    message = refused(bertkit(project, "report", "runs/A", "runs/B", "-o", "data/dev.csv"))
    assert "-o data/dev.csv is data.eval=data/dev.csv of the run runs/A" in message, message
    assert "the comparison would replace what the run was made from" in message, message
    message = refused(bertkit(project, "report", "runs/A", "runs/B", "-o", "data/dev.csv", "--force"))
    assert "data.eval=data/dev.csv" in message
    assert contents(project) == before


def test_report_replaces_a_file_of_another_kind_only_with_force(project, tmp_path):
    shutil.copytree(project / "runs", tmp_path / "runs")
    existing = tmp_path / "existing.json"
    existing.write_text('{"mine": true}\n')
    message = refused(bertkit(tmp_path, "report", "runs/A", "runs/B", "-o", "existing.json"))
    assert "-o existing.json already exists and is not an HTML page" in message, message
    assert "first line is '{\"mine\": true}'" in message and "add --force to replace it" in message, message
    assert "-o existing-compare.html" in message, message
    assert existing.read_text() == '{"mine": true}\n'
    result = bertkit(tmp_path, "report", "runs/A", "runs/B", "-o", "existing.json", "--force")
    assert result.returncode == 0 and "existing.json, replacing the earlier file" in result.stdout, result.stderr
    assert existing.read_text().startswith("<!DOCTYPE html>")
    # an earlier comparison page is the same kind: written again without --force, as before, and said
    result = bertkit(tmp_path, "report", "runs/A", "runs/B", "-o", "existing.json")
    assert result.returncode == 0 and "existing.json, replacing the earlier file" in result.stdout, result.stderr
    result = bertkit(tmp_path, "report", "runs/A", "runs/B", "-o", "new.html")
    assert result.returncode == 0 and "replacing" not in result.stdout, result.stdout


def test_report_refuses_any_existing_file_that_is_not_a_bertkit_page(project, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name, text in (("notes.csv", "a,b\n1,2\n"), ("index.html", "<html><title>my page</title></html>\n")):
        (tmp_path / name).write_text(text)
        args = ["report", str(project / "runs" / "A"), str(project / "runs" / "B"), "-o", name]
        message = refused(runner.invoke(app, args))
        assert f"-o {name} already exists and is not an HTML page" in message, message
        assert (tmp_path / name).read_text() == text


# ------------------------------------------------------------------ the same rule in predict, evaluate, cp, audit


def test_predict_and_evaluate_replace_a_file_of_another_kind_only_with_force(project, tmp_path, monkeypatch):
    """A labelled CSV that no run recorded (a held-out test split) is not predictions: said, not replaced; an
    earlier predictions file of the same name is replaced as it always was."""
    monkeypatch.chdir(tmp_path)
    run, new = str(project / "runs" / "A"), str(project / "new.csv")
    test_split = tmp_path / "test.csv"
    test_split.write_text("text,label\nthe film number 9 was dull,negative\n")
    message = refused(runner.invoke(app, ["predict", run, new, "-o", "test.csv"]))
    assert "-o test.csv already exists and is not predictions" in message, message
    assert "first line is 'text,label'" in message and "-o test.predictions.csv" in message, message
    assert test_split.read_text().startswith("text,label\n")
    for again in (False, True):  # an earlier predictions file: replaced, no --force needed, and said
        for name in ("preds.csv", "preds.jsonl"):
            result = runner.invoke(app, ["predict", run, new, "-o", name])
            said = f"to {name}, replacing the earlier file" in result.output
            assert result.exit_code == 0 and said == again, result.output
    result = runner.invoke(app, ["predict", run, new, "-o", "test.csv", "--force"])
    assert result.exit_code == 0, result.output
    assert test_split.read_text().startswith("text,label,score")
    # evaluate -o: JSON metrics never over a CSV or notes without --force; over earlier metrics as before
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    message = refused(runner.invoke(app, ["evaluate", run, str(project / "data" / "dev.csv"), "-o", "notes.txt"]))
    assert "-o notes.txt already exists and is not metrics as JSON" in message, message
    assert notes.read_text() == "my notes\n"
    for again in (False, True):  # earlier metrics: replaced, and said
        result = runner.invoke(app, ["evaluate", run, str(project / "data" / "dev.csv"), "-o", "m.json"])
        said = "saved metrics to m.json, replacing the earlier file" in result.output
        assert result.exit_code == 0 and said == again, result.output


def test_a_file_evaluated_on_the_run_is_never_a_predict_output(project, tmp_path, monkeypatch):
    run = tmp_path / "A"
    shutil.copytree(project / "runs" / "A", run)
    test_split = tmp_path / "held-out.csv"
    shutil.copyfile(project / "data" / "dev.csv", test_split)
    assert runner.invoke(app, ["evaluate", str(run), str(test_split)]).exit_code == 0
    before = test_split.read_bytes()
    for force in ([], ["--force"]):
        message = refused(runner.invoke(app, ["predict", str(run), str(project / "new.csv"), "-o", str(test_split),
                                              *force]))
        assert f"is a file evaluated on it ({test_split})" in message, message
    assert test_split.read_bytes() == before


def test_mine_never_writes_over_what_a_run_was_made_from_nor_an_existing_training_file(project, tiny_model_dir,
                                                                                       tmp_path, monkeypatch):
    """`bertkit mine` writes a training file: over what a run given as --model was made from never, over any
    existing file (a hand-labelled training file looks like a mined one) only with --force."""
    monkeypatch.chdir(project)
    before = contents(project)
    target = Path(tiny_model_dir) / "tokenizer.json"
    tokenizer = target.read_bytes()
    message = refused(runner.invoke(app, ["mine", "new.csv", "-o", str(target), "--model", "runs/A", "--force"]))
    assert f"-o {target} is inside model={tiny_model_dir} of the run runs/A" in message, message
    assert target.read_bytes() == tokenizer
    labelled = tmp_path / "train.jsonl"
    labelled.write_text('{"query": "q", "pos": ["p"], "neg": ["n"]}\n')
    message = refused(runner.invoke(app, ["mine", "new.csv", "-o", str(labelled), "--bm25"]))
    assert f"-o {labelled} already exists (a " in message and "add --force to replace it" in message, message
    assert labelled.read_text() == '{"query": "q", "pos": ["p"], "neg": ["n"]}\n' and contents(project) == before


def test_cp_force_never_replaces_a_file_of_a_run(project, tmp_path):
    run = tmp_path / "A"
    shutil.copytree(project / "runs" / "A", run)
    target = run / rundir.RUN_CONFIG_FILE
    before = target.read_bytes()
    message = refused(runner.invoke(app, ["cp", "classify/en_sentiment", str(target), "--force"]))
    assert f"the destination {target} is a file of the run directory" in message, message
    assert target.read_bytes() == before and rundir.run_state(run) == ("finished", "")


def test_audit_output_never_holds_the_model_it_reads_nor_a_run_directory(project, tiny_model_dir, tmp_path):
    """With overwrite=true the audit clears its folder's folds/: a model kept there by audit.keep_models would go
    while the audit reads it."""
    audit_dir = tmp_path / "audit"
    model = audit_dir / "folds" / "fold-1" / "model"
    shutil.copytree(tiny_model_dir, model)
    data = [f"data.train={project / 'data' / 'train.csv'}", f"output_dir={tmp_path / 'out'}", "overwrite=true"]
    message = refused(runner.invoke(app, ["audit", "classify", f"model={model}", *data,
                                          f"audit.output={audit_dir}"]))
    assert f"audit.output {audit_dir} holds {model}, which this command reads" in message, message
    assert (model / "config.json").is_file()
    run = tmp_path / "A"
    shutil.copytree(project / "runs" / "A", run)
    for output in (run, run / "checkpoint-2"):
        message = refused(runner.invoke(app, ["audit", "classify", f"model={tiny_model_dir}", *data,
                                              f"audit.output={output}"]))
        assert f"audit.output {output} is inside the run directory {run}" in message, message
        assert f"audit.output={run}-audit" in message, message
    assert rundir.run_state(run) == ("finished", "")


def test_export_replaces_only_an_earlier_export_and_only_with_force(project, tmp_path):
    pytest.importorskip("onnxscript")
    pytest.importorskip("onnxruntime")
    run = tmp_path / "A"
    shutil.copytree(project / "runs" / "A", run)
    target = tmp_path / "onnx"
    assert runner.invoke(app, ["export", str(run), "-o", str(target)]).exit_code == 0
    stamp = (target / rundir.RECORD_FILE).read_bytes()
    message = refused(runner.invoke(app, ["export", str(run), "-o", str(target)]))
    assert f"-o {target} holds an earlier export — add --force to replace it" in message, message
    result = runner.invoke(app, ["export", str(run), "-o", str(target), "--force"])
    assert result.exit_code == 0, result.output
    assert rundir.run_state(target) == ("finished", "") and (target / rundir.RECORD_FILE).read_bytes() != stamp
    assert sorted(p.name for p in tmp_path.iterdir()) == ["A", "onnx"]  # no temporary or old folder left
    others = tmp_path / "mine"
    (others / "keep.txt").parent.mkdir()
    (others / "keep.txt").write_text("mine")
    message = refused(runner.invoke(app, ["export", str(run), "-o", str(others), "--force"]))
    assert "already exists and is not empty (and is not an export" in message, message
    assert (others / "keep.txt").read_text() == "mine"


# ------------------------------------------------------------------ 3: evaluations of two files of one name


def test_evaluations_of_two_files_of_one_name_are_both_kept(project, tmp_path):
    run = tmp_path / "A"
    shutil.copytree(project / "runs" / "A", run)
    shutil.rmtree(run / rundir.EVALUATIONS_DIR, ignore_errors=True)  # what other tests measured on the shared run
    for folder, rows in (("x", 16), ("y", 9)):
        (tmp_path / folder).mkdir()
        lines = (project / "data" / "dev.csv").read_text().splitlines()
        (tmp_path / folder / "dev.csv").write_text("\n".join(lines[:rows + 1]) + "\n")
    for folder in ("x", "y"):
        result = bertkit(tmp_path, "evaluate", "A", f"{folder}/dev.csv")
        assert result.returncode == 0, result.stderr
        assert "replaced the earlier evaluation" not in result.stdout + result.stderr
    records = [json.loads(p.read_text()) for p in sorted((run / rundir.EVALUATIONS_DIR).glob("*.json"))]
    assert sorted(r["given"] for r in records) == ["x/dev.csv", "y/dev.csv"], records
    assert sorted(r["file"] for r in records) == [str(tmp_path / "x" / "dev.csv"), str(tmp_path / "y" / "dev.csv")]
    page = (run / rundir.REPORT_FILE).read_text()
    assert "<td>x/dev.csv</td>" in page and "<td>y/dev.csv</td>" in page
    # the same file again, by another spelling: its own record is replaced, and that is said
    result = bertkit(tmp_path / "x", "evaluate", "../A", "dev.csv")
    assert result.returncode == 0, result.stderr
    assert "replaced the earlier evaluation of dev.csv" in " ".join((result.stdout + result.stderr).split())
    records = [json.loads(p.read_text()) for p in sorted((run / rundir.EVALUATIONS_DIR).glob("*.json"))]
    assert sorted(r["given"] for r in records) == ["dev.csv", "y/dev.csv"], records
