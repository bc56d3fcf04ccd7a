"""The console of a run (bertkit/console.py): what a person reads while training and after it,
through the installed `bertkit` entry point with output that is not a terminal; train.log keeps the rest; quiet
loading; layouts that fit 80 and 160 columns."""

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
import transformers
from rich.console import Console

import bertkit
import bertkit.llrd
import bertkit.training
from bertkit import checkpoints
from bertkit import console as run_console
from bertkit import training_display as display
from bertkit import rundir

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = Path(sys.executable).parent / "bertkit"
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "TOKENIZERS_PARALLELISM": "false",
       "OMP_NUM_THREADS": "1", "COLUMNS": "100"}
ESCAPE = "\x1b["


def small_split(tmp_path, name, rows):
    frame = pd.read_csv(ROOT / "data/en_sentiment" / f"{name}.csv").groupby("label").head(rows // 2)
    path = tmp_path / f"{name}.csv"
    frame.to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, tiny_model_dir):
    """One tiny classify run through the console script, stdout and stderr captured (not a terminal)."""
    tmp_path = tmp_path_factory.mktemp("console-run")
    out = tmp_path / "run"
    command = [str(SCRIPT), "run", "classify", f"model={tiny_model_dir}",
               f"data.train={small_split(tmp_path, 'train', 16)}", f"data.eval={small_split(tmp_path, 'dev', 8)}",
               f"output_dir={out}", "precision=fp32", "llrd=0.9", "train.num_train_epochs=2",
               "train.per_device_train_batch_size=8", "train.logging_steps=1",
               "keep_checkpoints=true"]  # test_train_log_... compares the log with a checkpoint's trainer_state
    result = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=ENV, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result, out


pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason="bertkit is not installed in this environment")


def test_console_of_a_run_has_no_machinery(tiny_run):
    result, _ = tiny_run
    text = result.stdout + result.stderr
    assert ESCAPE not in text, "raw escape codes on a console that is not a terminal"
    assert not re.search(r"\d+%\|", text) and "it/s]" not in text, "a tqdm bar"
    assert "{'loss'" not in text and "{'eval_loss'" not in text and "{'train_runtime'" not in text, "Trainer's dicts"
    assert "LOAD REPORT" not in text and "MISSING" not in text
    assert "Writing model shards" not in text and "Loading weights" not in text
    assert "new, randomly initialised: classifier" in text  # the expected new head: one line
    assert "(no decay)" not in text  # the LLRD table merges decay and no-decay groups


def test_console_of_a_run_shows_progress_evaluations_summary_and_next_commands(tiny_run):
    result, out = tiny_run
    lines = (result.stdout + result.stderr).splitlines()
    evaluations = [line for line in lines if line.startswith("dev  epoch")]
    assert len(evaluations) == 2, lines
    assert "macro_f1" in evaluations[0] and "best so far" in evaluations[0]
    assert any(line.startswith("step ") and "loss" in line and "ex/s" in line for line in lines)
    assert any(line.startswith("saved checkpoint-") for line in lines)
    assert "classify: single labels, dev metrics" in lines  # the title on one line of its own
    assert any(re.match(r"accuracy\s+\d\.\d{4}$", line) for line in lines)
    for command in (f"bertkit predict {out} FILE", f"bertkit evaluate {out} ", f"bertkit push {out} USER/NAME"):
        assert any(line.strip().startswith(command) for line in lines), command


def test_train_log_holds_every_logged_metric_and_the_config(tiny_run):
    _, out = tiny_run
    log = (out / "train.log").read_text(encoding="utf-8")
    logged = [json.loads(line.removeprefix("logged ")) for line in log.splitlines() if line.startswith("logged ")]
    history = json.loads((out / "checkpoint-4" / "trainer_state.json").read_text())["log_history"]
    assert history and len(logged) == len(history) + 1  # + the final train_runtime line, after the last checkpoint
    for entry, line in zip(history, logged):
        assert line == entry
    assert "train_runtime" in logged[-1]
    assert "resolved config:" in log and "llrd: 0.9" in log
    assert "LOAD REPORT" in log  # transformers' report: on disk, not on the console
    assert "classify: single labels, dev metrics" in log  # the summary too


def test_train_log_is_not_part_of_the_completion_record(tiny_run):
    """The log grows after the record (summary, push, a resumed run): the run stays finished and loadable."""
    _, out = tiny_run
    assert "train.log" not in json.loads((out / rundir.RECORD_FILE).read_text())["files"]
    (out / "train.log").open("a").write("a later line\n")
    assert rundir.run_state(out) == ("finished", "")
    rundir.check_finished(out, "predict")


def test_overwrite_removes_the_old_train_log(tmp_path):
    (tmp_path / "train.log").write_text("old run\n")
    (tmp_path / "notes.txt").write_text("mine\n")
    rundir.clear_old_run(tmp_path)
    assert not (tmp_path / "train.log").exists() and (tmp_path / "notes.txt").exists()


# ------------------------------------------------------------------------------------------------ in-process


@pytest.fixture
def captured(monkeypatch):
    """bertkit's console as a string of the given width."""

    def make(width):
        buffer = io.StringIO()
        monkeypatch.setattr(run_console, "console", Console(file=buffer, width=width, force_terminal=False))
        return buffer

    return make


@pytest.mark.parametrize("width", [80, 160])
def test_run_summary_fits_the_terminal_width(captured, width):
    buffer = captured(width)
    out = "/a/rather/long/path/to/the/runs/folder/of/a/person/who/keeps/many/runs/classify-minilm-lr3e-5-seed42"
    run_console.run_summary("classify: single labels, dev metrics, and a title long enough to wrap somewhere",
                                 {"accuracy": 0.8125, "macro_f1": 0.80123, "documents": 120, "wall time (s)": 73.71},
                                 out, "classify")
    lines = buffer.getvalue().splitlines()
    assert lines[0] == "classify: single labels, dev metrics, and a title long enough to wrap somewhere"
    table = lines[1:5]
    assert all(len(line) <= width for line in table)
    assert re.match(r"accuracy\s+0\.8125$", table[0]) and re.match(r"wall time \(s\)\s+73\.7$", table[3])
    assert f"  bertkit predict {out} FILE -o predictions.jsonl" in lines  # a command stays whole, to copy
    assert f"  bertkit push {out} USER/NAME" in lines


def test_quiet_mode_shows_only_the_summary(captured):
    buffer = captured(100)
    with run_console.console_session("quiet"):
        run_console.say("loading things")
        run_console.run_summary("mlm: held-out perplexity", {"perplexity": 12.5}, "runs/mlm", "mlm")
    text = buffer.getvalue()
    assert "loading things" not in text
    assert "mlm: held-out perplexity" in text and "bertkit run classify model=runs/mlm" in text
    assert "bertkit predict" not in text  # a masked LM is fine-tuned next, not predicted with


def test_lr_table_is_one_row_per_layer():
    groups = [("embeddings", 100, 4e-5, 0.01), ("embeddings (no decay)", 10, 4e-5, 0.0),
              ("layer 0", 50, 4.5e-5, 0.01), ("layer 0 (no decay)", 5, 4.5e-5, 0.0), ("head", 3, 5e-5, 0.01)]
    assert bertkit.llrd.lr_rows(groups) == {"embeddings": (110, 4e-5), "layer 0": (55, 4.5e-5),
                                                "head": (3, 5e-5)}


def test_lr_table_is_shown_once(captured):
    buffer = captured(100)
    rows = {"embeddings": (110, 4e-5), "layer 0": (55, 4.5e-5)}
    bertkit.llrd.show_learning_rates(rows, 0.9, 0.01)
    bertkit.llrd.show_learning_rates(rows, 0.9, 0.01)
    assert buffer.getvalue().count("embeddings") == 1


# ------------------------------------------------------------------------------------------------ loading


def save_tiny(model_class, path, **config):
    torch.manual_seed(0)
    kwargs = dict(vocab_size=99, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=37,
                  max_position_embeddings=64)
    model_class(transformers.BertConfig(**{**kwargs, **config})).save_pretrained(path)
    return str(path)


def test_new_head_is_one_line_and_pretraining_heads_are_expected(tmp_path, captured):
    buffer = captured(300)
    path = save_tiny(transformers.BertForPreTraining, tmp_path / "stock")
    checkpoints.load_pretrained(bertkit.BertkitForSequenceClassification, path, num_labels=2)
    lines = buffer.getvalue().splitlines()
    assert lines == [f"bertkit: new, randomly initialised: classifier (not in {path}; trained from scratch)"]


def test_unexpected_weights_and_size_mismatches_stay_loud(tmp_path, captured):
    buffer = captured(200)
    path = save_tiny(transformers.BertForTokenClassification, tmp_path / "tagger", num_labels=5)
    checkpoints.load_pretrained(bertkit.BertkitForSequenceClassification, path, num_labels=2,
                                ignore_mismatched_sizes=True)
    text = buffer.getvalue()
    assert "warning" in text and "classifier.weight re-initialised" in text and "(5, 32)" in text

    buffer.truncate(0)
    model = transformers.BertModel(transformers.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=1,
                                                           num_attention_heads=4, intermediate_size=37))
    state = {**model.state_dict(), "adapter.down.weight": torch.zeros(2, 2)}
    from safetensors.torch import save_file

    (tmp_path / "extra").mkdir()
    model.config.save_pretrained(tmp_path / "extra")
    save_file({k: v.contiguous() for k, v in state.items()}, tmp_path / "extra" / "model.safetensors")
    checkpoints.load_pretrained(bertkit.BertkitForSequenceClassification, str(tmp_path / "extra"), num_labels=2)
    assert "are not used by this model: adapter.down" in buffer.getvalue()


# ------------------------------------------------------------------------------------------------ callbacks


class FakeIntegration(transformers.TrainerCallback):
    """Stands for a report_to integration (TensorBoard, W&B, MLflow): none is installed here."""


def tiny_trainer(tmp_path, **args):
    model = bertkit.BertkitForSequenceClassification(bertkit.BertkitConfig(
        vocab_size=99, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=37))
    arguments = bertkit.training.training_arguments({"report_to": args.pop("report_to", "none"), **args},
                                                    str(tmp_path), "fp32", 0, False, None)
    return transformers.Trainer(model=model, args=arguments,
                                callbacks=[transformers.EarlyStoppingCallback(early_stopping_patience=1)])


def test_display_replaces_trainers_printer_and_keeps_report_to_integrations(tmp_path, monkeypatch):
    monkeypatch.setattr(transformers.trainer, "get_reporting_integration_callbacks", lambda _: [FakeIntegration])
    trainer = tiny_trainer(tmp_path)
    display.use_display(trainer)
    kinds = [type(c) for c in trainer.callback_handler.callbacks]
    assert transformers.trainer_callback.PrinterCallback not in kinds
    assert transformers.trainer_callback.ProgressCallback not in kinds
    assert FakeIntegration in kinds and transformers.EarlyStoppingCallback in kinds
    assert kinds.count(display.TrainingDisplay) == 1
    display.use_display(trainer)  # twice (a recipe's own call, then run_trainer's): still one display
    assert [type(c) for c in trainer.callback_handler.callbacks].count(display.TrainingDisplay) == 1


@pytest.mark.skipif(not transformers.integrations.is_tensorboard_available(), reason="tensorboard is not installed")
def test_report_to_tensorboard_still_reports(tmp_path):
    trainer = tiny_trainer(tmp_path, report_to="tensorboard")
    display.use_display(trainer)
    assert any(type(c).__name__ == "TensorBoardCallback" for c in trainer.callback_handler.callbacks)


# ------------------------------------------------------------------------------------------------ predict / evaluate


def test_evaluate_prints_one_result_line_and_predict_one_line(tiny_run, tmp_path):
    _, out = tiny_run
    dev = small_split(tmp_path, "dev", 8)
    result = subprocess.run([str(SCRIPT), "evaluate", str(out), str(dev)], capture_output=True, text=True,
                            cwd=tmp_path, env=ENV, timeout=300)
    assert result.returncode == 0, result.stderr
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"{dev}: accuracy 0.") and "macro_f1" in lines[0], lines
    assert "f1_positive" not in lines[0]  # per-label figures: in -o JSON
    result = subprocess.run([str(SCRIPT), "predict", str(out), str(dev), "-o", str(tmp_path / "p.jsonl")],
                            capture_output=True, text=True, cwd=tmp_path, env=ENV, timeout=300)
    assert result.returncode == 0
    assert (result.stdout + result.stderr).strip() == f"wrote 8 predictions to {tmp_path}/p.jsonl"


def test_progress_of_predict_counts_examples_not_batches(monkeypatch):
    buffer = io.StringIO()
    monkeypatch.setattr(run_console, "console", Console(file=buffer, width=100, force_terminal=True))
    with run_console.ExamplesProgress("tagging", 10) as progress:
        for _ in range(4):  # e.g. 4 batches of windows, each worth 2.5 sentences
            progress.advance(2.5)
            progress.progress.refresh()
    assert "10/10 examples" in buffer.getvalue()


# ------------------------------------------------------------------------------------------------ --quiet / --verbose


def cli_run(tmp_path, tiny_model_dir, *flags):
    from typer.testing import CliRunner

    from bertkit.cli import app

    out = tmp_path / f"run{'-'.join(flags)}"
    result = CliRunner().invoke(app, ["run", "classify", *flags, f"model={tiny_model_dir}",
                                      f"data.train={small_split(tmp_path, 'train', 8)}",
                                      f"data.eval={small_split(tmp_path, 'dev', 4)}", f"output_dir={out}",
                                      "precision=fp32", "train.num_train_epochs=1", "train.logging_steps=1"])
    assert result.exit_code == 0, result.output
    return result.output, out


def test_quiet_run_shows_the_summary_only_and_verbose_the_raw_stream(tmp_path, tiny_model_dir):
    quiet, out = cli_run(tmp_path, tiny_model_dir, "--quiet")
    assert quiet.startswith("classify: single labels, dev metrics"), quiet
    assert "dev  epoch" not in quiet and "bertkit: 8 train" not in quiet
    assert f"bertkit predict {out}" in quiet
    assert '"eval_loss"' in (out / "train.log").read_text()  # nothing lost: the log has it all

    verbose, out = cli_run(tmp_path, tiny_model_dir, "--verbose")
    assert "'eval_loss'" in verbose and "LOAD REPORT" in verbose  # Trainer's printed dicts, transformers' report
    assert "classify: single labels, dev metrics" in verbose and (out / "train.log").exists()
