"""Bad input the error points at the real cause of, and the one-line rule for every error the CLI meets.

Each case ends with one line on stderr (`error: ...`), no traceback, and exit code 2 when it is the user's input
(1 when bertkit did not expect it); --debug shows the traceback instead."""

import errno
from pathlib import Path

import pytest
from typer.testing import CliRunner

import bertkit.cli as cli
from bertkit.cli import app
from helpers import one_line_error

runner = CliRunner()
DATA = Path(__file__).resolve().parent.parent / "data"


@pytest.mark.parametrize("name, content, fragments", [
    ("semicolons.csv", 'text;label\n"great" film, really;positive\nbad "movie;negative\n',
     ["line 1", "separated by ';'", "comma-separated"]),
    ("commas.tsv", 'text,label\n"a, b",pos\nbad "x,neg\n', ["line 1", "separated by ','", "tab-separated"]),
])
def test_a_file_with_the_wrong_separator_is_named_as_such_not_blamed_on_quotes(tmp_path, name, content, fragments):
    path = tmp_path / name
    path.write_text(content)
    message = one_line_error(runner.invoke(app, ["inspect", str(path)]), 2, str(path), *fragments)
    assert "quotes" not in message


def test_a_truncated_squad_file_says_it_is_cut_off(tmp_path):
    text = (DATA / "qa/en/train.json").read_text()
    cut = tmp_path / "cut.json"
    cut.write_text(text[: len(text) // 2])
    from bertkit.tasks.qa import read_examples
    from bertkit.errors import BertkitError

    with pytest.raises(BertkitError, match="ends in the middle of its JSON .* cut off") as error:
        read_examples(str(cut))
    assert "JSON-lines" not in str(error.value) and "each line must hold" not in str(error.value)


def test_a_broken_squad_file_names_line_and_column(tmp_path):
    text = (DATA / "qa/en/train.json").read_text()
    broken = tmp_path / "broken.json"
    position = text.index('"context"')
    broken.write_text(text[:position] + '"context" ' + text[position + len('"context":'):])
    from bertkit.tasks.qa import read_examples
    from bertkit.errors import BertkitError

    line = text[:position].count("\n") + 1
    with pytest.raises(BertkitError, match=f"line {line} column \\d+ is not valid JSON \\(Expecting ':' delimiter"):
        read_examples(str(broken))


def test_predict_on_a_folder_that_holds_no_model(tmp_path):
    (tmp_path / "dev.csv").write_text("text\nhello\n")
    result = runner.invoke(app, ["predict", str(tmp_path), str(tmp_path / "dev.csv")])
    one_line_error(result, 2, str(tmp_path), "holds no model (no config.json)", "output_dir of a bertkit run")


@pytest.fixture()
def failing_ls(monkeypatch):
    """`bertkit ls` made to fail with a given exception, to check how the CLI reports it."""
    def fail_with(error):
        def broken():
            raise error
        monkeypatch.setattr(cli, "recipe_names", broken)
    return fail_with


@pytest.mark.parametrize("error, code, fragments", [
    (OSError(errno.ENOSPC, "No space left on device", "/data/run/model.safetensors"), 2,
     ["No space left on device at /data/run/model.safetensors", "disk is full"]),
    (PermissionError(errno.EACCES, "Permission denied", "/readonly/runs"), 2,
     ["Permission denied at /readonly/runs", "no permission"]),
    (OSError(errno.EROFS, "Read-only file system", "/mnt/ro"), 2, ["read-only"]),
    (ValueError("something deep inside a library\nwith a second line"), 1,
     ["unexpected ValueError: something deep inside a library", "--debug"]),
])
def test_every_error_is_one_line(failing_ls, error, code, fragments):
    failing_ls(error)
    one_line_error(runner.invoke(app, ["ls"]), code, *fragments)


def test_debug_shows_the_traceback(failing_ls):
    failing_ls(ValueError("deep"))
    result = runner.invoke(app, ["--debug", "ls"])
    assert result.exit_code == 1 and isinstance(result.exception, ValueError)
    runner.invoke(app, ["ls"])  # and the flag does not stick to the next command
    assert cli.DEBUG["traceback"] is False


def test_a_bertkit_error_stays_one_line_even_with_newlines_inside(failing_ls):
    from bertkit.errors import BertkitError

    failing_ls(BertkitError("first part\nsecond part"))
    assert one_line_error(runner.invoke(app, ["ls"]), 2) == "error: first part second part"


def test_the_entry_point_prints_no_traceback_for_a_bad_json_config(tmp_path):
    import subprocess
    import sys

    config = tmp_path / "bad.yaml"
    config.write_text("data:\n  train: [unclosed\n")
    result = subprocess.run([sys.executable, "-m", "bertkit", "validate", "classify", "-c", str(config)],
                            capture_output=True, text=True, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith("error: ") and str(config) in result.stderr
