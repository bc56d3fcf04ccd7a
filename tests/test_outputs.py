"""What a command may write where (bertkit/rundir.py): predict / evaluate / export never write over their
own input, the model they read or any file of a run directory; a run never replaces files that no bertkit run wrote
(overwrite=true removes only what an earlier run wrote) nor the model it starts from; and a write cut short (a full
disk) leaves no partial output that looks valid, nor anything that blocks the retry."""

# ruff: noqa: F811 - pytest fixtures (sentiment) are arguments named like the imported fixture

import errno
import json
import os
import shutil
from pathlib import Path

import pytest
from test_classify import base_overrides, run_recipe, sentiment, write_csv  # noqa: F401 - fixture
from typer.testing import CliRunner

from bertkit import rundir
from bertkit.cli import app

runner = CliRunner()
pytestmark = pytest.mark.usefixtures("one_thread")
TINY = ["train.max_steps=2", "train.eval_strategy=no", "train.save_strategy=no", "train.load_best_model_at_end=false"]


def one_line_error(result) -> str:
    """The CLI's answer to a refused command: exit 2, one `error:` line, no traceback."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "unexpected" not in result.output, result.output
    assert result.output.count("error: ") == 1, result.output
    message = "error: " + " ".join(result.output.split("error: ")[1].split())
    assert len(message) > 20, result.output
    return message


def overrides(model_dir, sentiment, out, *extra):
    return base_overrides(model_dir, sentiment["train"], sentiment["dev"], out, *TINY, *extra)


@pytest.fixture(scope="module")
def finished(tmp_path_factory, tiny_model_dir, sentiment):
    """One finished classify run (2 steps), copied by `copy_of` for tests that change it."""
    out = tmp_path_factory.mktemp("finished") / "run"
    run_recipe(overrides(tiny_model_dir, sentiment, out))
    return out


def copy_of(run: Path, tmp_path: Path, name: str = "run") -> Path:
    return Path(shutil.copytree(run, tmp_path / name))


def digests(folder: Path) -> dict:
    return {p.name: rundir.file_digest(p)["sha256"] for p in sorted(folder.iterdir()) if p.is_file()}


def rows_of(path: str) -> list[list[str]]:
    lines = Path(path).read_text().splitlines()[1:]
    return [line.rsplit(",", 1) for line in lines]


# ------------------------------------------------------------------------------------ 1, 2: the command's input


@pytest.mark.parametrize("spelling", ["same", "dot", "absolute", "symlink"])
@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_predict_refuses_to_write_over_its_input(finished, sentiment, tmp_path, monkeypatch, spelling, suffix):
    monkeypatch.chdir(tmp_path)
    data = tmp_path / f"data{suffix}"
    if suffix == ".csv":
        shutil.copyfile(sentiment["dev"], data)
    else:
        data.write_text("".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in rows_of(sentiment["dev"])))
    before = data.read_bytes()
    output = {"same": data.name, "dot": f"./{data.name}", "absolute": str(data), "symlink": "link" + suffix}[spelling]
    if spelling == "symlink":
        os.symlink(data, tmp_path / output)
    message = one_line_error(runner.invoke(app, ["predict", str(finished), data.name, "-o", output]))
    assert f"-o {output} is the input file" in message and "choose another output" in message, message
    assert f"data.predictions{suffix if suffix == '.csv' else '.jsonl'}" in message, message
    assert data.read_bytes() == before


def test_evaluate_refuses_to_write_over_its_input(finished, sentiment, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    dev = tmp_path / "dev.json"
    dev.write_text(json.dumps([{"text": t, "label": y} for t, y in rows_of(sentiment["dev"])]))
    before = dev.read_bytes()
    message = one_line_error(runner.invoke(app, ["evaluate", str(finished), "dev.json", "-o", "dev.json"]))
    assert "-o dev.json is the input file" in message and "dev.metrics.json" in message, message
    assert dev.read_bytes() == before
    # through a symlink too
    os.symlink(dev, tmp_path / "metrics.json")
    message = one_line_error(runner.invoke(app, ["evaluate", str(finished), "dev.json", "-o", "metrics.json"]))
    assert "is the input file" in message and dev.read_bytes() == before


# ------------------------------------------------------------------------------------ 3: a run directory


@pytest.mark.parametrize("name", ["config.json", "metrics.json", "README.md", "checkpoint-2/preds.jsonl"])
def test_predict_and_evaluate_never_write_a_file_of_a_run_directory(finished, sentiment, tmp_path, name):
    run = copy_of(finished, tmp_path)
    other = copy_of(finished, tmp_path, "other")  # any bertkit run directory, not only the model being read
    before, other_before = digests(run), digests(other)
    for command in ("predict", "evaluate"):
        for target in (run, other):
            output = str(target / name)
            message = one_line_error(runner.invoke(app, [command, str(run), sentiment["dev"], "-o", output]))
            assert f"-o {output} is a file of the run directory {target}" in message, message
            assert "choose a new name or an output outside it" in message, message
    assert digests(run) == before and digests(other) == other_before
    assert rundir.run_state(run) == ("finished", "")


def test_a_new_file_beside_the_model_is_fine_and_the_run_stays_finished(finished, sentiment, tmp_path):
    """`make demo` writes runs/en_sentiment/dev_predictions.jsonl: a name no run writes changes nothing the record
    vouches for, so it is written (and written again), and the run still loads."""
    run = copy_of(finished, tmp_path)
    before = digests(run)
    for _ in range(2):
        result = runner.invoke(app, ["predict", str(run), sentiment["dev"], "-o", str(run / "dev_predictions.jsonl")])
        assert result.exit_code == 0, result.output
    assert (run / "dev_predictions.jsonl").read_text().count("\n") > 0
    assert {k: v for k, v in digests(run).items() if k != "dev_predictions.jsonl"} == before
    assert rundir.run_state(run) == ("finished", "")
    result = runner.invoke(app, ["evaluate", str(run), sentiment["dev"], "-o", str(run / "dev_metrics.json")])
    assert result.exit_code == 0, result.output


# ------------------------------------------------------------------------------------ 4, 5: the user's files


def test_a_run_never_replaces_files_no_run_wrote(tiny_model_dir, sentiment, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "README.md").write_text("# my notes\n")
    (out / "training_curve.png").write_bytes(b"\x89PNG my own drawing")
    (out / "data.txt").write_text("keep")
    for extra in ([], ["overwrite=true"]):
        message = one_line_error(runner.invoke(app, ["run", "classify", *overrides(tiny_model_dir, sentiment, out,
                                                                                     *extra)]))
        assert f"output_dir {out} holds README.md and training_curve.png" in message, message
        assert "no bertkit run wrote" in message and "move them" in message and "output_dir=..." in message
        assert "set overwrite=true" not in message
    assert (out / "README.md").read_text() == "# my notes\n"
    assert (out / "training_curve.png").read_bytes() == b"\x89PNG my own drawing"
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "data.txt", "training_curve.png"]


def test_overwrite_removes_only_what_a_run_wrote(finished, tiny_model_dir, sentiment, tmp_path):
    out = copy_of(finished, tmp_path)
    (out / "results.png").write_bytes(b"\x89PNG the user's")
    (out / "notes.md").write_text("mine")
    (out / "dev_results.json").write_text("{}")  # an evaluation saved beside the model: a run-like name, not a run's
    result = runner.invoke(app, ["run", "classify", *overrides(tiny_model_dir, sentiment, out, "overwrite=true")])
    assert result.exit_code == 0, result.output
    assert (out / "results.png").read_bytes() == b"\x89PNG the user's" and (out / "notes.md").read_text() == "mine"
    assert (out / "dev_results.json").read_text() == "{}"
    assert rundir.run_state(out) == ("finished", "")
    assert "results.png" not in json.loads((out / rundir.RECORD_FILE).read_text())["files"]


def test_overwrite_of_an_unfinished_run_keeps_the_users_files(tmp_path):
    """No record: what the run wrote is its checkpoints and the names a run writes since it began (its fingerprint);
    a README.md or picture that was there before is the user's."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "README.md").write_text("mine, from before")
    (run / "plot.png").write_bytes(b"mine")
    stamp = os.stat(run / "README.md").st_mtime_ns
    os.utime(run / "README.md", ns=(stamp - 10**9, stamp - 10**9))
    os.utime(run / "plot.png", ns=(stamp - 10**9, stamp - 10**9))
    (run / rundir.FINGERPRINT_FILE).write_text("{}")
    (run / "checkpoint-2").mkdir()
    (run / "checkpoint-2" / "model.safetensors").write_bytes(b"x")
    (run / "trainer_state.json").write_text("{}")
    files, checkpoints = rundir.clear_old_run(run)
    assert (checkpoints, sorted(p.name for p in run.iterdir())) == (1, ["README.md", "plot.png"])


# ------------------------------------------------------------------------------------ 6: the model it starts from


def test_training_into_the_model_it_starts_from_is_refused(finished, sentiment, tmp_path):
    base = copy_of(finished, tmp_path, "base")
    before = digests(base)
    for extra in ([], ["overwrite=true"]):
        message = one_line_error(runner.invoke(app, ["run", "classify", *overrides(base, sentiment, base, *extra)]))
        assert f"output_dir {base} is the model this run reads (model={base})" in message, message
        assert "overwrite=true" not in message.replace("overwrite=true cannot", ""), message
        assert "choose another output_dir" in message
    through_dot = runner.invoke(app, ["run", "classify", *overrides(base, sentiment, f"{base}/./", "overwrite=true")])
    assert "is the model this run reads" in one_line_error(through_dot)
    assert digests(base) == before


def test_training_from_a_checkpoint_into_its_own_run_directory_is_refused(finished, sentiment, tmp_path):
    """model=X/checkpoint-2 output_dir=X overwrite=true: clearing the old run would delete the model being read."""
    run = copy_of(finished, tmp_path)
    checkpoint = run / "checkpoint-2"
    checkpoint.mkdir()
    for path in finished.iterdir():
        if path.is_file():
            shutil.copy2(path, checkpoint / path.name)
    before = digests(checkpoint)
    message = one_line_error(runner.invoke(app, ["run", "classify", *overrides(checkpoint, sentiment, run,
                                                                                 "overwrite=true")]))
    assert f"output_dir {run} holds the model this run reads (model={checkpoint})" in message, message
    assert "set overwrite=true" not in message
    assert digests(checkpoint) == before


def test_distilling_into_the_teacher_or_a_data_file_is_refused(finished, sentiment, tmp_path):
    teacher = copy_of(finished, tmp_path, "teacher")
    before = digests(teacher)
    for extra in ([], ["overwrite=true"]):
        message = one_line_error(runner.invoke(app, [
            "run", "distill", f"teacher={teacher}", f"data.train={sentiment['train']}", f"output_dir={teacher}",
            "train.max_steps=2", "precision=fp32", *extra]))
        assert f"is the model this run reads (teacher={teacher})" in message, message
        assert "set overwrite=true" not in message
    assert digests(teacher) == before
    train = Path(sentiment["train"])
    before_train = train.read_bytes()
    message = one_line_error(runner.invoke(app, ["run", "classify", *overrides(teacher, sentiment, train,
                                                                                 "overwrite=true")]))
    assert f"output_dir {train} is the data file this run reads (data.train=" in message, message
    assert train.read_bytes() == before_train


# ------------------------------------------------------------------------------------ 7, 8: files and folders


def test_an_output_dir_that_is_a_file_is_one_line(tiny_model_dir, sentiment, tmp_path):
    taken = tmp_path / "taken.txt"
    taken.write_text("mine")
    message = one_line_error(runner.invoke(app, ["run", "classify", *overrides(tiny_model_dir, sentiment, taken)]))
    assert f"output_dir {taken} is a file, not a folder" in message and "output_dir=..." in message, message
    below = taken / "run"
    message = one_line_error(runner.invoke(app, ["run", "classify", *overrides(tiny_model_dir, sentiment, below)]))
    assert f"{taken} is a file, not a folder" in message, message
    assert taken.read_text() == "mine"


def test_predict_creates_a_missing_output_folder_and_says_so(finished, sentiment, tmp_path):
    target = tmp_path / "new" / "deeper" / "p.jsonl"
    result = runner.invoke(app, ["predict", str(finished), sentiment["dev"], "-o", str(target)])
    assert result.exit_code == 0, result.output
    assert f"created folder {target.parent}" in " ".join(result.output.split())
    assert len(target.read_text().splitlines()) == 16
    metrics = tmp_path / "other" / "m.json"
    result = runner.invoke(app, ["evaluate", str(finished), sentiment["dev"], "-o", str(metrics)])
    assert result.exit_code == 0, result.output
    assert "accuracy" in json.loads(metrics.read_text())


# ------------------------------------------------------------------------------------ 9: a write cut short


class FullDisk:
    """Files opened for writing under `folder` take `room` bytes, then every write raises ENOSPC, as on a full disk
    (builtins.open and io.open, which pathlib uses, are both patched)."""

    def __init__(self, monkeypatch, folder: Path, room: int):
        import builtins
        import io

        self.folder, self.room, self.real = str(folder), room, io.open
        monkeypatch.setattr(builtins, "open", self.open)
        monkeypatch.setattr(io, "open", self.open)

    def open(self, file, mode="r", *args, **kwargs):
        handle = self.real(file, mode, *args, **kwargs)
        if isinstance(file, int) or not any(m in mode for m in "wax+"):
            return handle
        return _Filling(handle, self) if os.path.abspath(os.fspath(file)).startswith(self.folder) else handle


class _Filling:
    def __init__(self, handle, disk: FullDisk):
        self._handle, self._disk = handle, disk

    def write(self, data):
        if len(data) > self._disk.room:
            self._handle.write(data[:self._disk.room])
            self._handle.flush()
            self._disk.room = 0
            raise OSError(errno.ENOSPC, "No space left on device")
        self._disk.room -= len(data)
        return self._handle.write(data)

    def __getattr__(self, name):
        return getattr(self._handle, name)

    def __iter__(self):
        return iter(self._handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._handle.close()


def test_a_full_disk_during_predict_leaves_no_partial_file(finished, sentiment, tmp_path, monkeypatch):
    folder = tmp_path / "out"
    folder.mkdir()
    output = folder / "p.jsonl"
    disk = FullDisk(monkeypatch, folder, room=600)  # a few of the 16 rows fit
    message = one_line_error(runner.invoke(app, ["predict", str(finished), sentiment["dev"], "-o", str(output)]))
    assert "disk full while writing" in message and str(output) in message, message
    assert list(folder.iterdir()) == []  # neither a partial file that looks valid nor a temp one
    # an earlier, complete predictions file of that name is kept as it was
    earlier = '{"text": "old", "label": "positive", "score": 0.9}\n'
    with disk.real(output, "w") as handle:
        handle.write(earlier)
    disk.room = 600
    assert str(output) in one_line_error(runner.invoke(app, ["predict", str(finished), sentiment["dev"], "-o",
                                                             str(output)]))
    assert output.read_text() == earlier and list(folder.iterdir()) == [output]
    disk.room = 10**9  # space freed: the retry works
    assert runner.invoke(app, ["predict", str(finished), sentiment["dev"], "-o", str(output)]).exit_code == 0
    assert len(output.read_text().splitlines()) == 16 and list(folder.iterdir()) == [output]


def test_a_full_disk_during_evaluate_leaves_no_partial_metrics(finished, sentiment, tmp_path, monkeypatch):
    folder = tmp_path / "out"
    folder.mkdir()
    output = folder / "m.json"
    FullDisk(monkeypatch, folder, room=40)
    message = one_line_error(runner.invoke(app, ["evaluate", str(finished), sentiment["dev"], "-o", str(output)]))
    assert "disk full while writing" in message and str(output) in message, message
    assert list(folder.iterdir()) == []


def test_a_full_disk_during_export_leaves_nothing_and_the_retry_works(finished, tmp_path, monkeypatch):
    pytest.importorskip("onnxscript")
    pytest.importorskip("onnxruntime")
    from bertkit import export

    original = export.export_onnx

    def half_written(model, head, path):
        Path(path).write_bytes(b"partial graph")
        raise OSError(errno.ENOSPC, "No space left on device")

    target = tmp_path / "onnx"
    monkeypatch.setattr(export, "export_onnx", half_written)
    message = one_line_error(runner.invoke(app, ["export", str(finished), "-o", str(target)]))
    assert "disk" in message and str(target) in message, message
    assert not target.exists() and list(tmp_path.iterdir()) == []
    monkeypatch.setattr(export, "export_onnx", original)
    result = runner.invoke(app, ["export", str(finished), "-o", str(target)])
    assert result.exit_code == 0, result.output
    assert rundir.run_state(target) == ("finished", "") and not list(tmp_path.glob(".*"))


def test_export_never_writes_into_a_run_directory(finished, tmp_path):
    pytest.importorskip("onnxscript")
    run = copy_of(finished, tmp_path)
    before = digests(run)
    message = one_line_error(runner.invoke(app, ["export", str(run), "-o", str(run / "onnx")]))
    assert f"is inside the run directory {run}" in message and f"-o {run}-onnx" in message, message
    assert digests(run) == before and not (run / "onnx").exists()


@pytest.mark.parametrize("task", ["ner", "qa", "choice"])
def test_predict_of_a_jsonl_only_task_names_the_input_before_the_suffix(task, tmp_path):
    """-o naming the input file is said as that (the data is what is at stake), not as a wrong output suffix."""
    import importlib

    from bertkit.errors import BertkitError

    data = tmp_path / "data.csv"
    data.write_text("text\na sentence\n")
    predict_file = importlib.import_module(f"bertkit.tasks.{task}").predict_file
    with pytest.raises(BertkitError, match=f"-o {data} is the input file"):
        predict_file(str(tmp_path / "run"), str(data), str(data))
    assert data.read_text() == "text\na sentence\n"
