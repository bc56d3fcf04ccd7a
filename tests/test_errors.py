"""Bad input through the real CLI: one line naming the file / row / column / key and the fix, a non-zero exit,
and no traceback."""

import json

import pytest
import transformers
from typer.testing import CliRunner

from bertkit.cli import app

runner = CliRunner()


@pytest.fixture()
def files(tmp_path):
    def write(name, content, mode="w"):
        path = tmp_path / name
        if mode == "wb":
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return str(path)

    return write


@pytest.fixture()
def good(files):
    rows = "\n".join(f"sentence number {i},{'pos' if i % 2 else 'neg'}" for i in range(12))
    return files("good.csv", "text,label\n" + rows + "\n")


def run_classify(model_dir, *overrides):
    return runner.invoke(app, ["run", "classify", f"model={model_dir}", "precision=fp32", "train.max_steps=1",
                               "train.save_strategy=no", *overrides])


def assert_one_line_error(result, *fragments):
    assert result.exit_code != 0
    text = result.output
    assert "Traceback" not in text, text
    lines = [line for line in text.strip().splitlines() if line.startswith("error:")]
    assert len(lines) == 1, text
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_missing_file(tiny_model_dir, tmp_path):
    result = run_classify(tiny_model_dir, f"data.train={tmp_path / 'nope.csv'}")
    assert_one_line_error(result, "nope.csv")


def test_unknown_format(tiny_model_dir, files):
    path = files("train.xlsx", "whatever")
    assert_one_line_error(run_classify(tiny_model_dir, f"data.train={path}"), "train.xlsx")


def test_missing_column(tiny_model_dir, good):
    result = run_classify(tiny_model_dir, f"data.train={good}", "data.text_column=review")
    assert_one_line_error(result, "review", "good.csv")


def test_empty_file(tiny_model_dir, files):
    assert_one_line_error(run_classify(tiny_model_dir, f"data.train={files('empty.csv', '')}"), "empty.csv")


def test_row_with_empty_text(tiny_model_dir, files):
    path = files("gaps.csv", "text,label\nfine text,pos\n,neg\nmore text,neg\n")
    assert_one_line_error(run_classify(tiny_model_dir, f"data.train={path}"), "gaps.csv", "line 3")


def test_eval_label_never_seen_in_training(tiny_model_dir, good, files):
    dev = files("dev.csv", "text,label\na,pos\nb,neutral\n")
    result = run_classify(tiny_model_dir, f"data.train={good}", f"data.eval={dev}")
    assert_one_line_error(result, "neutral", "dev.csv", "line 3")


def test_malformed_jsonl_line(tiny_model_dir, files):
    path = files("bad.jsonl",
                 '{"text": "ok", "label": "a"}\n{"text": "broken", "label": \n{"text": "x", "label": "b"}\n')
    assert_one_line_error(run_classify(tiny_model_dir, f"data.train={path}"), "bad.jsonl", "line 2")


def test_non_utf8_file(tiny_model_dir, files):
    path = files("latin1.csv", "text,label\ncaf\xe9 au lait,pos\nthe tea,neg\n".encode("latin-1"), mode="wb")
    assert_one_line_error(run_classify(tiny_model_dir, f"data.train={path}"), "latin1.csv", "UTF-8")


def test_max_length_over_model_positions(tiny_model_dir, good):
    result = run_classify(tiny_model_dir, f"data.train={good}", "data.max_length=1000")
    assert_one_line_error(result, "max_length", "128")


def test_model_path_that_does_not_exist(good, tmp_path):
    result = run_classify(str(tmp_path / "models" / "missing"), f"data.train={good}")
    assert_one_line_error(result, "does not exist")


def test_unknown_config_key_suggests_the_right_one(tiny_model_dir, good):
    result = run_classify(tiny_model_dir, f"data.trian={good}")
    assert_one_line_error(result, "data.trian", "data.train")


def test_string_learning_rate_is_a_float_not_a_silent_string(tiny_model_dir, good, tmp_path):
    result = runner.invoke(app, ["validate", "classify", "train.learning_rate=5e-5"])
    assert result.exit_code == 0
    assert "learning_rate: 5.0e-05" in result.output
    result = runner.invoke(app, ["validate", "classify", "train.learning_rate=fast"])
    assert_one_line_error(result, "train.learning_rate")


def _save_stock(model_class, path):
    config = transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=16)
    model_class(config).save_pretrained(path)
    return str(path)


def test_checkpoint_that_no_task_can_predict_with(tmp_path, good):
    model_dir = _save_stock(transformers.BertModel, tmp_path / "encoder-only")  # no head: nothing to predict
    assert_one_line_error(runner.invoke(app, ["predict", model_dir, good]), "BertModel")


def test_classifier_loader_refuses_a_checkpoint_of_another_task(tmp_path):
    from bertkit.errors import BertkitError
    from bertkit.tasks.classify import load_predictor

    model_dir = _save_stock(transformers.BertForTokenClassification, tmp_path / "ner-model")
    with pytest.raises(BertkitError, match="BertForTokenClassification"):
        load_predictor(model_dir)


def test_predict_on_missing_model_dir(tmp_path, good):
    assert_one_line_error(runner.invoke(app, ["predict", str(tmp_path / "nothing"), good]), "does not exist")


def test_unknown_recipe():
    assert_one_line_error(runner.invoke(app, ["run", "clasify"]), "clasify", "classify")


def test_config_file_with_a_yaml_error(files):
    path = files("broken.yaml", "data:\n  train: [unclosed\n")
    assert_one_line_error(runner.invoke(app, ["validate", "classify", "-c", path]), "broken.yaml")


def test_json_output_error_names_extension(tiny_model_dir, tmp_path, good):
    # a trained model is needed to reach the writer: build the smallest one through the recipe
    out = tmp_path / "run"
    assert run_classify(tiny_model_dir, f"data.train={good}", f"output_dir={out}").exit_code == 0
    result = runner.invoke(app, ["predict", str(out), good, "-o", str(tmp_path / "out.xml")])
    assert_one_line_error(result, "out.xml")
    json.loads((out / "config.json").read_text())


def test_a_missing_optional_package_is_one_line_naming_the_extra():
    from bertkit.errors import BertkitError, require_packages

    with pytest.raises(BertkitError) as error:
        require_packages(("json", "bertkit_no_such_package"), "bertkit serve", "serve")
    assert str(error.value) == ('bertkit serve: the optional packages json and bertkit_no_such_package are needed '
                                '(bertkit_no_such_package is not installed) — pip install "bertkit[serve]"')
    require_packages(("json", "csv"), "anything", "none")  # all there: nothing raised
