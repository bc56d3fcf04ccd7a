"""Runs you can trust (bertkit/rundir.py, bertkit/checkpoints.py): a run that did not finish never looks finished,
a finished run is never replaced without overwrite=true, two runs never share a directory, resume continues only
the same run, a full disk says so, and a broken model directory is refused with one line before it is used."""

# ruff: noqa: F811 - pytest fixtures (sentiment) are arguments named like the imported fixture

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import transformers
from test_classify import base_overrides, run_recipe, sentiment, write_csv  # noqa: F401 - fixture
from typer.testing import CliRunner

from bertkit import rundir
from bertkit.cli import app
from bertkit.errors import BertkitError

runner = CliRunner()
pytestmark = pytest.mark.usefixtures("one_thread")
STEPS = ["train.num_train_epochs=2", "train.save_strategy=steps", "train.save_steps=3", "train.eval_strategy=no",
         "train.load_best_model_at_end=false"]  # 48 rows / batch 8: checkpoints at steps 3, 6, 9, 12


def overrides(model_dir, sentiment, out, *extra):  # noqa: F811
    return base_overrides(model_dir, sentiment["train"], sentiment["dev"], out, *extra)


def one_line_error(result) -> str:
    """The CLI's answer to a refused command: exit 2, one `error:` line, no traceback."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.output.count("error: ") == 1, result.output
    message = "error: " + result.output.split("error: ")[1].split("\n")[0]  # a progress bar may precede it
    assert len(message) > 20, result.output
    return message


def flat(text: str) -> str:
    """Console output with rich's line wrapping undone."""
    return " ".join(text.split())


@pytest.fixture(scope="module")
def finished(tmp_path_factory, tiny_model_dir, sentiment):  # noqa: F811
    """One finished classify run, copied by `copy_of` for tests that change it."""
    out = tmp_path_factory.mktemp("finished") / "run"
    run_recipe(overrides(tiny_model_dir, sentiment, out))
    return out


def copy_of(run: Path, tmp_path: Path, name: str = "run") -> Path:
    return Path(shutil.copytree(run, tmp_path / name))


def run_interrupted_at(monkeypatch, step: int, args: list[str]) -> None:
    """Run a recipe that stops (KeyboardInterrupt) right after the checkpoint of `step` is saved, as a kill would."""
    original = transformers.Trainer._save_checkpoint

    def save_then_crash(self, *args, **kwargs):
        original(self, *args, **kwargs)
        if self.state.global_step == step:
            raise KeyboardInterrupt("simulated interruption")

    monkeypatch.setattr(transformers.Trainer, "_save_checkpoint", save_then_crash)
    with pytest.raises(KeyboardInterrupt):
        run_recipe(args)
    monkeypatch.setattr(transformers.Trainer, "_save_checkpoint", original)


# ------------------------------------------------------------------------------------------ the completion record


def test_a_finished_run_has_a_completion_record_that_lists_its_files(finished):
    record = json.loads((finished / rundir.RECORD_FILE).read_text())
    assert record["status"] == "finished" and record["recipe"] == "classify"
    assert record["started"] <= record["finished"]
    for name in ("model.safetensors", "config.json", "tokenizer.json", "metrics.json", "bertkit_config.yaml",
                 "README.md", "classification_report.txt", rundir.FINGERPRINT_FILE):
        assert record["files"][name]["size"] == (finished / name).stat().st_size, name
    weights = record["files"]["model.safetensors"]
    assert weights == rundir.file_digest(finished / "model.safetensors")
    assert rundir.RECORD_FILE not in record["files"] and rundir.LOCK_FILE not in record["files"]
    assert rundir.run_state(finished) == ("finished", "")
    assert not list(finished.glob("*.tmp"))  # written atomically through a temp file


def test_a_kill_during_the_final_save_leaves_a_visibly_unfinished_run(finished, tiny_model_dir, sentiment, tmp_path,
                                                                     monkeypatch):  # noqa: F811
    """Continuing a finished run (resume=true, one more epoch) that is killed while saving its final model: the
    old record is gone, so predict / evaluate / push / model= refuse the half-written directory."""
    out = tmp_path / "run"
    run_recipe(overrides(tiny_model_dir, sentiment, out, "keep_checkpoints=true"))  # resumable once finished
    original = transformers.Trainer.save_model

    def half_save(self, output_dir=None, *args, **kwargs):
        if output_dir == str(out):  # the final save, not a checkpoint's
            (out / "model.safetensors").write_bytes((out / "model.safetensors").read_bytes()[:1000])
            raise KeyboardInterrupt("killed while saving")
        return original(self, output_dir, *args, **kwargs)

    monkeypatch.setattr(transformers.Trainer, "save_model", half_save)
    with pytest.raises(KeyboardInterrupt):
        run_recipe(overrides(tiny_model_dir, sentiment, out, "train.num_train_epochs=2", "resume=true"))
    monkeypatch.setattr(transformers.Trainer, "save_model", original)
    assert not (out / rundir.RECORD_FILE).exists()
    assert rundir.run_state(out)[0] == "unfinished"
    rundir.release(out)  # the interrupted run held it in this process; a new process never would

    message = one_line_error(runner.invoke(app, ["predict", str(out), sentiment["dev"], "-o",
                                                 str(tmp_path / "p.jsonl")]))
    assert "unfinished bertkit run" in message and str(out) in message and "resume=true" in message
    assert "unfinished" in one_line_error(runner.invoke(app, ["evaluate", str(out), sentiment["dev"]]))
    assert "unfinished" in one_line_error(runner.invoke(app, ["push", str(out), "tester/x", "--token", "hf_x",
                                                              "--endpoint", "http://127.0.0.1:9"]))
    with pytest.raises(BertkitError, match="unfinished bertkit run"):
        run_recipe(overrides(str(out), sentiment, tmp_path / "second"))


def test_a_directory_mixing_two_runs_is_refused(finished, tiny_model_dir, sentiment, tmp_path):  # noqa: F811
    other = tmp_path / "other"
    run_recipe(overrides(tiny_model_dir, sentiment, other, "seed=7"))
    mixed = copy_of(finished, tmp_path, "mixed")
    shutil.copyfile(other / "model.safetensors", mixed / "model.safetensors")  # same size, other weights
    assert rundir.run_state(mixed)[0] == "mixed"
    message = one_line_error(runner.invoke(app, ["predict", str(mixed), sentiment["dev"], "-o",
                                                 str(tmp_path / "p.jsonl")]))
    assert "mixes files of different runs" in message and "model.safetensors" in message
    with pytest.raises(BertkitError, match="mixes files of different runs"):
        run_recipe(overrides(str(mixed), sentiment, tmp_path / "from-mixed"))
    message = one_line_error(runner.invoke(app, ["push", str(mixed), "tester/x", "--token", "hf_x",
                                                 "--endpoint", "http://127.0.0.1:9"]))
    assert "model.safetensors" in message
    # a loading file that the record does not list (an adapter dropped in by another run) is mixing too
    adapter = copy_of(finished, tmp_path, "adapter")
    (adapter / "adapter_config.json").write_text("{}")
    assert "adapter_config.json is not part of the run" in rundir.run_state(adapter)[1]
    # an edited model card is fine (README.md is the user's to improve), and so are the user's own files
    edited = copy_of(finished, tmp_path, "edited")
    (edited / "README.md").write_text("# my model\n")
    (edited / "predictions.jsonl").write_text("{}\n")
    assert rundir.run_state(edited) == ("finished", "")


def test_stock_model_directories_still_load(minilm_dir, tiny_model_dir, sentiment, tmp_path):  # noqa: F811
    """No bertkit_config.yaml: a downloaded or save_pretrained model, fine-tuned or not, is not a bertkit run."""
    from bertkit.checkpoints import check_model_dir
    from bertkit.tasks.classify import load_predictor

    check_model_dir(minilm_dir, "model=")
    stock = tmp_path / "stock"
    config = transformers.AutoConfig.from_pretrained(tiny_model_dir, num_labels=2, id2label={0: "neg", 1: "pos"},
                                                     label2id={"neg": 0, "pos": 1})
    transformers.BertForSequenceClassification.from_pretrained(tiny_model_dir, config=config).save_pretrained(stock)
    transformers.AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(stock)
    assert load_predictor(str(stock)).model.config.id2label == {0: "neg", 1: "pos"}
    result = runner.invoke(app, ["predict", str(stock), sentiment["dev"], "-o", str(tmp_path / "p.jsonl")])
    assert result.exit_code == 0, result.output


# ------------------------------------------------------------------------------------------ overwrite


def test_rerun_into_a_finished_run_is_refused(finished, tiny_model_dir, sentiment, tmp_path):  # noqa: F811
    out = copy_of(finished, tmp_path)
    before = rundir.file_digest(out / "model.safetensors")
    message = one_line_error(runner.invoke(app, ["run", "classify", *overrides(tiny_model_dir, sentiment, out)]))
    assert f"output_dir {out} already holds a finished run" in message
    assert "output_dir=..." in message and "overwrite=true" in message
    assert "resume=true" not in message  # it kept no checkpoint: resume=true would be refused in turn
    assert rundir.file_digest(out / "model.safetensors") == before and rundir.run_state(out)[0] == "finished"
    assert rundir.lock_holder(out) is None  # the refused run let go of the directory
    kept = out / "checkpoint-12"  # as keep_checkpoints=true leaves it
    kept.mkdir()
    shutil.copy(out / "model.safetensors", kept)
    (kept / "trainer_state.json").write_text("{}")
    (kept / "optimizer.pt").write_bytes(b"state")
    message = one_line_error(runner.invoke(app, ["run", "classify", *overrides(tiny_model_dir, sentiment, out)]))
    assert message.endswith("or resume=true to continue it"), message  # kept (keep_checkpoints=true): offered


def test_overwrite_replaces_the_old_run_and_says_so(finished, tiny_model_dir, sentiment, tmp_path, capsys):  # noqa: F811
    out = copy_of(finished, tmp_path)
    (out / "checkpoint-99").mkdir()
    (out / "notes.txt").write_text("mine")
    rows = [[f"sentence {i}", f"{i % 5}.5"] for i in range(16)]
    regression = write_csv(tmp_path / "sts.csv", ["text", "score"], rows)
    run_recipe([f"model={tiny_model_dir}", f"data.train={regression}", f"output_dir={out}", "precision=fp32",
                "data.max_length=32", "data.label_kind=regression", "train.num_train_epochs=1", "overwrite=true"])
    assert "overwrite=true: replaced the finished run in" in flat(capsys.readouterr().err)
    # no eval split this time: the old run's reports and checkpoints must not linger as if this run wrote them
    assert not (out / "classification_report.txt").exists() and not (out / "confusion_matrix.json").exists()
    assert not (out / "checkpoint-99").exists() and (out / "notes.txt").read_text() == "mine"
    assert json.loads((out / "config.json").read_text())["problem_type"] == "regression"
    assert rundir.run_state(out) == ("finished", "")
    assert "overwrite: false" in (out / "bertkit_config.yaml").read_text()  # rerunning it cannot replace silently
    # the user's file was there before this run began: not part of its record, so changing it later (a new
    # evaluation saved beside the model) leaves the run finished
    assert "notes.txt" not in json.loads((out / rundir.RECORD_FILE).read_text())["files"]
    (out / "notes.txt").write_text("mine, edited")
    assert rundir.run_state(out) == ("finished", "")


def test_a_run_that_stops_before_training_changes_nothing(finished, tiny_model_dir, sentiment, tmp_path):  # noqa: F811
    """A typo found while loading (here a column that is not there): the run it was to replace is intact, a fresh
    output_dir is not even created, and the corrected rerun is not refused as 'unfinished'."""
    out = copy_of(finished, tmp_path)
    with pytest.raises(BertkitError, match="review"):
        run_recipe(overrides(tiny_model_dir, sentiment, out, "overwrite=true", "data.text_column=review"))
    assert rundir.run_state(out) == ("finished", "") and (out / "classification_report.txt").exists()
    fresh = tmp_path / "new" / "run"
    result = subprocess.run([sys.executable, "-m", "bertkit", "run", "classify",
                             *overrides(tiny_model_dir, sentiment, fresh, "data.text_column=review")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and result.stderr.startswith("error: column 'review'"), result.stderr
    assert not (tmp_path / "new").exists()  # the process let go of what it had created
    run_recipe(overrides(tiny_model_dir, sentiment, fresh))
    assert rundir.run_state(fresh) == ("finished", "") and not (fresh / rundir.LOCK_FILE).exists()


def test_rerun_into_an_unfinished_run_is_refused_and_resume_continues_it(tiny_model_dir, sentiment, tmp_path,
                                                                       monkeypatch):  # noqa: F811
    out = tmp_path / "run"
    run_interrupted_at(monkeypatch, 6, overrides(tiny_model_dir, sentiment, out, *STEPS))
    with pytest.raises(BertkitError, match=r"already holds an unfinished run .*resume=true to continue it"):
        run_recipe(overrides(tiny_model_dir, sentiment, out, *STEPS))
    assert (out / "checkpoint-6").is_dir()  # the refusal touched nothing
    run_recipe(overrides(tiny_model_dir, sentiment, out, *STEPS, "resume=true"))
    assert rundir.run_state(out) == ("finished", "")


# ------------------------------------------------------------------------------------------ the lock

HOLD = """
import sys, time
from bertkit import rundir
rundir.acquire(sys.argv[1])
print("held", flush=True)
time.sleep(60)
"""


def test_a_second_run_into_a_held_directory_is_refused(tiny_model_dir, sentiment, tmp_path):  # noqa: F811
    out = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        message = one_line_error(runner.invoke(app, ["run", "classify", *overrides(tiny_model_dir, sentiment, out)]))
        assert f"output_dir {out} is in use by another bertkit run (pid {holder.pid})" in message
        assert not (out / "model.safetensors").exists()
    finally:
        holder.kill()
        holder.wait()
    # the holder died: its lock file stays behind, but the kernel dropped its flock, so it blocks nothing
    assert (out / rundir.LOCK_FILE).read_text().strip() == str(holder.pid)
    run_recipe(overrides(tiny_model_dir, sentiment, out))
    assert rundir.run_state(out) == ("finished", "")


def test_a_directory_held_by_a_live_run_is_not_read(tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(tiny_model_dir, out)
    (out / rundir.FINGERPRINT_FILE).write_text("{}")
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(BertkitError, match=f"a run \\(pid {holder.pid}\\) is still writing it"):
            rundir.check_finished(out, "predict")
    finally:
        holder.kill()
        holder.wait()


# ------------------------------------------------------------------------------------------ resume


def test_resume_refuses_checkpoints_of_another_config_or_data(tiny_model_dir, sentiment, tmp_path,
                                                             monkeypatch):  # noqa: F811
    out = tmp_path / "run"
    run_interrupted_at(monkeypatch, 6, overrides(tiny_model_dir, sentiment, out, *STEPS))
    rundir.release(out)
    result = runner.invoke(app, ["run", "classify", *overrides(tiny_model_dir, sentiment, out, *STEPS, "resume=true",
                                                               "train.learning_rate=2.0e-3")])
    message = one_line_error(result)
    assert "come from another run (train.learning_rate was 0.001, now 0.002)" in message
    changed = tmp_path / "train.csv"
    changed.write_text(Path(sentiment["train"]).read_text().replace("great", "good"))
    with pytest.raises(BertkitError, match="the content of data.train changed"):
        run_recipe(base_overrides(tiny_model_dir, changed, sentiment["dev"], out, *STEPS, "resume=true"))
    moved = tmp_path / "same.csv"
    shutil.copyfile(sentiment["train"], moved)  # another path, the same rows: the same run
    run_recipe(base_overrides(tiny_model_dir, moved, sentiment["dev"], out, *STEPS, "resume=true",
                              "train.num_train_epochs=3"))  # more epochs: a continuation, not another run
    assert max(entry.get("step", 0) for entry in json.loads((out / "log_history.json").read_text())) == 18


def test_resume_passes_over_a_checkpoint_killed_while_saving(tiny_model_dir, sentiment, tmp_path, monkeypatch,
                                                             capsys):  # noqa: F811
    out = tmp_path / "run"
    run_interrupted_at(monkeypatch, 6, overrides(tiny_model_dir, sentiment, out, *STEPS))
    partial = out / "checkpoint-6"  # as a kill in the middle of writing the weights leaves it
    for name in ("trainer_state.json", "optimizer.pt", "scheduler.pt"):
        (partial / name).unlink()
    (partial / "model.safetensors").write_bytes((partial / "model.safetensors").read_bytes()[:4096])
    results = run_recipe(overrides(tiny_model_dir, sentiment, out, *STEPS, "resume=true"))
    err = flat(capsys.readouterr().err)
    assert "checkpoint-6 is incomplete (trainer_state.json is missing" in err
    assert err.split("resuming from", 1)[1].replace(" ", "").startswith(str(out / "checkpoint-3"))
    assert results["train"]["epoch"] == 2 and rundir.run_state(out) == ("finished", "")


# ------------------------------------------------------------------------------------------ disk full


def test_disk_full_while_saving_a_checkpoint(tiny_model_dir, sentiment, tmp_path, monkeypatch):  # noqa: F811
    out = tmp_path / "run"
    original = transformers.Trainer._save_checkpoint

    def full_at_six(self, *args, **kwargs):
        if self.state.global_step == 6:
            (out / "checkpoint-6").mkdir()
            raise OSError(errno.ENOSPC, "No space left on device")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(transformers.Trainer, "_save_checkpoint", full_at_six)
    message = one_line_error(runner.invoke(app, ["run", "classify", *overrides(tiny_model_dir, sentiment, out,
                                                                                 *STEPS)]))
    assert f"disk full while saving a checkpoint to {out}" in message
    assert f"kept {out / 'checkpoint-3'} (the last complete checkpoint)" in message and "resume=true" in message
    assert rundir.run_state(out)[0] == "unfinished"


def test_disk_full_while_saving_the_final_model(tiny_model_dir, sentiment, tmp_path, monkeypatch):  # noqa: F811
    out = tmp_path / "run"

    original = transformers.Trainer.save_model

    def torch_full(self, output_dir=None, *args, **kwargs):  # what torch.save says when the disk fills under it
        if output_dir != str(out):
            return original(self, output_dir, *args, **kwargs)
        raise RuntimeError("[enforce fail at inline_container.cc:626] . unexpected pos 64 vs 0: basic_ios::clear: "
                           "iostream error")

    monkeypatch.setattr(transformers.Trainer, "save_model", torch_full)
    with pytest.raises(BertkitError, match="disk full while saving the final model to .* the run is not finished; "
                                           "kept .*checkpoint-6"):
        run_recipe(overrides(tiny_model_dir, sentiment, out, "train.save_strategy=steps", "train.save_steps=6"))
    assert rundir.run_state(out)[0] == "unfinished"


def test_disk_full_is_recognised_in_its_forms():
    assert rundir.is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert rundir.is_disk_full(RuntimeError("PytorchStreamWriter failed writing file data/3: file write failed"))
    wrapped = RuntimeError("save failed")
    wrapped.__cause__ = OSError(errno.ENOSPC, "full")
    assert rundir.is_disk_full(wrapped)
    assert not rundir.is_disk_full(OSError(errno.EACCES, "Permission denied"))
    assert not rundir.is_disk_full(RuntimeError("CUDA out of memory"))


# ------------------------------------------------------------------------------------------ model directories


def test_a_model_without_tokenizer_files_is_refused(finished, tiny_model_dir, sentiment, tmp_path):  # noqa: F811
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copyfile(Path(tiny_model_dir) / name, bare / name)
    message = one_line_error(runner.invoke(app, ["run", "classify", *overrides(bare, sentiment, tmp_path / "out")]))
    assert f"{bare} has no tokenizer files" in message and "[UNK]" in message
    assert not (tmp_path / "out" / "model.safetensors").exists()
    stock = copy_of(finished, tmp_path, "stock")
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json",
                 rundir.RECORD_FILE, "bertkit_config.yaml", rundir.FINGERPRINT_FILE):
        (stock / name).unlink(missing_ok=True)
    message = one_line_error(runner.invoke(app, ["predict", str(stock), sentiment["dev"]]))
    assert "has no tokenizer files" in message


@pytest.mark.parametrize("damage", ["empty", "truncated"])
def test_empty_or_truncated_weights_name_the_file(finished, sentiment, tmp_path, damage):  # noqa: F811
    out = copy_of(finished, tmp_path)
    weights = out / "model.safetensors"
    weights.write_bytes(b"" if damage == "empty" else weights.read_bytes()[: weights.stat().st_size // 2])
    (out / rundir.RECORD_FILE).unlink()
    for name in ("bertkit_config.yaml", rundir.FINGERPRINT_FILE):  # as a stock directory: the weights check alone
        (out / name).unlink()
    message = one_line_error(runner.invoke(app, ["evaluate", str(out), sentiment["dev"]]))
    assert f"{weights} is {'empty (0 bytes)' if damage == 'empty' else 'truncated'}" in message
    with pytest.raises(BertkitError, match=f"{weights} is"):
        run_recipe(overrides(str(out), sentiment, tmp_path / "from-damaged"))


@pytest.mark.parametrize("content,expected", [("{\"model_type\": \"bert\",", "is not valid JSON (line 1"),
                                              ('{"hidden_size": 32}', "has no model_type")])
def test_a_broken_config_json_is_one_line_naming_the_file(finished, sentiment, tmp_path, content, expected):  # noqa: F811
    out = copy_of(finished, tmp_path)
    for name in (rundir.RECORD_FILE, "bertkit_config.yaml", rundir.FINGERPRINT_FILE):
        (out / name).unlink()
    (out / "config.json").write_text(content)
    message = one_line_error(runner.invoke(app, ["predict", str(out), sentiment["dev"]]))
    assert f"{out / 'config.json'} {expected}" in message
    with pytest.raises(BertkitError, match="config.json"):
        run_recipe(overrides(str(out), sentiment, tmp_path / "from-broken"))


@pytest.mark.parametrize("damage", ["empty", "truncated"])
def test_push_refuses_broken_weights_before_any_upload(finished, tmp_path, damage):
    out = copy_of(finished, tmp_path)
    weights = out / "model.safetensors"
    weights.write_bytes(b"" if damage == "empty" else weights.read_bytes()[:-100])
    message = one_line_error(runner.invoke(app, ["push", str(out), "tester/x", "--token", "hf_x",
                                                 "--endpoint", "http://127.0.0.1:9"]))  # nothing listens there
    assert f"{weights} is {'empty' if damage == 'empty' else 'truncated'}" in message


def test_the_lock_is_taken_by_rank_zero_only(tmp_path, monkeypatch):
    """Under torchrun the other ranks neither lock nor check: rank 0 writes, and a lock each would deadlock."""
    from bertkit.training import start_run

    from bertkit.options import RunOptions

    class Cfg:
        run = RunOptions(output_dir=str(tmp_path / "run"))

    monkeypatch.setenv("RANK", "1")
    monkeypatch.setattr("bertkit.training.config_to_dict", lambda cfg: {})
    start_run(Cfg(), "classify")
    assert not (tmp_path / "run").exists()
    monkeypatch.setenv("RANK", "0")
    start_run(Cfg(), "classify")
    assert (tmp_path / "run" / rundir.LOCK_FILE).read_text().strip() == str(os.getpid())
    rundir.release(tmp_path / "run")
