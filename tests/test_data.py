"""bertkit.datafiles, bertkit.labels and bertkit.splits: every file format, every input mistake (one-line messages
that name file, line and column), column detection, label spaces, and the shipped sample datasets."""

import json
from pathlib import Path

import datasets
import pandas as pd
import pytest
import transformers

from bertkit.datafiles import ColumnMap, read_table, resolve_columns, row_location
from bertkit.labels import LabelSpace
from bertkit.splits import check_texts, duplicate_and_overlap_report, load_split
from bertkit.errors import BertkitError

DATA = Path(__file__).resolve().parent.parent / "data"


def write(tmp_path, name, content, encoding="utf-8"):
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding=encoding, newline="")
    return str(path)


def error_of(fn, *args, **kwargs) -> str:
    """The BertkitError message; it must be one line (the CLI prints it as is)."""
    with pytest.raises(BertkitError) as info:
        fn(*args, **kwargs)
    message = str(info.value)
    assert "\n" not in message and message.strip() == message
    return message


# ---------------------------------------------------------------------------------------------------------------
# Formats


def test_csv_reads_in_order_with_types(tmp_path):
    path = write(tmp_path, "a.csv", 'text,label,score\n"hello, world",1,0.5\nbye,0,2\n')
    ds = read_table(path)
    assert ds.column_names == ["text", "label", "score"]
    assert ds["text"][:] == ["hello, world", "bye"]
    assert ds["label"][:] == [1, 0]
    assert ds["score"][:] == [0.5, 2.0]


def test_csv_keeps_codes_with_leading_zeros_and_text_that_pandas_would_null(tmp_path):
    path = write(tmp_path, "a.csv", "text,code\nNA,007\nNone,010\n")
    ds = read_table(path)
    assert ds["text"][:] == ["NA", "None"]  # pandas would read both as missing values
    assert ds["code"][:] == ["007", "010"]


def test_tsv(tmp_path):
    ds = read_table(write(tmp_path, "a.tsv", "sentence\tlabel\nit's, fine\tpos\nbad\tneg\n"))
    assert ds["sentence"][:] == ["it's, fine", "bad"]
    assert ds["label"][:] == ["pos", "neg"]


def test_jsonl_and_json_lines_in_a_json_file(tmp_path):
    rows = [{"text": "a\u2028b", "labels": ["x", "y"]}, {"text": "c", "labels": []}]
    content = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    for name in ("a.jsonl", "a.json"):
        ds = read_table(write(tmp_path, name, content))
        assert ds["text"][:] == ["a\u2028b", "c"]  # U+2028 inside a string is not a line break
        assert ds["labels"][:] == [["x", "y"], []]


def test_json_array(tmp_path):
    path = write(tmp_path, "a.json", json.dumps([{"text": "a", "label": 1}, {"text": "b", "label": 2}], indent=2))
    ds = read_table(path)
    assert ds["text"][:] == ["a", "b"] and ds["label"][:] == [1, 2]


def test_json_key_missing_from_first_row_is_kept(tmp_path):
    ds = read_table(write(tmp_path, "a.jsonl", '{"text": "a"}\n{"text": "b", "label": "x"}\n'))
    assert ds["label"][:] == [None, "x"]


def test_parquet(tmp_path):
    path = str(tmp_path / "a.parquet")
    pd.DataFrame({"text": ["a", "b", "c"], "label": [2, 0, 1]}).to_parquet(path)
    ds = read_table(path)
    assert ds.column_names == ["text", "label"]
    assert ds["label"][:] == [2, 0, 1]
    assert row_location(ds, 1) == "row 2"


def test_txt_one_text_per_line(tmp_path):
    ds = read_table(write(tmp_path, "a.txt", "first line\r\nsecond, with comma\n"))
    assert ds.column_names == ["text"]
    assert ds["text"][:] == ["first line", "second, with comma"]


def test_bom_is_stripped(tmp_path):
    ds = read_table(write(tmp_path, "a.csv", "\ufefftext,label\nx,1\n"))
    assert ds.column_names == ["text", "label"]
    ds = read_table(write(tmp_path, "a.jsonl", '\ufeff{"text": "x"}\n'))
    assert ds["text"][:] == ["x"]


def test_multiline_csv_field_keeps_the_line_numbers(tmp_path):
    path = write(tmp_path, "a.csv", 'text,label\n"two\nlines",1\n\n ,0\n')
    ds = read_table(path)
    assert ds["text"][:] == ["two\nlines", " "]
    assert [row_location(ds, i) for i in range(2)] == ["line 2", "line 5"]  # a blank line 4 is skipped
    message = error_of(check_texts, ds, ColumnMap("text", None, "label"), path)
    assert message.startswith(f"{path} line 5: column 'text' is empty")


def test_an_empty_quoted_field_is_a_row_not_a_blank_line(tmp_path):
    """A one-column CSV whose line is "" holds an empty text: skipped as a blank line, every later row of a predict
    was written against the wrong input row (8 predictions for 9 lines, exit 0). Kept, it is refused by its line."""
    path = write(tmp_path, "one.csv", 'text\na\n""\n\nb\n   \nc\n')
    ds = read_table(path)
    assert ds["text"][:] == ["a", "", "b", "c"]
    assert [row_location(ds, i) for i in range(4)] == ["line 2", "line 3", "line 5", "line 7"]
    message = error_of(check_texts, ds, ColumnMap("text", None, None), path)
    assert message.startswith(f"{path} line 3: column 'text' is empty")


# ---------------------------------------------------------------------------------------------------------------
# Bad input


def test_missing_file(tmp_path):
    assert error_of(read_table, "x.csv") == "no such file: x.csv — check the path"
    assert "no such file" in error_of(read_table, str(tmp_path / "missing" / "train"))


def test_unknown_extension_lists_the_supported_ones(tmp_path):
    message = error_of(read_table, write(tmp_path, "a.xlsx", "x"))
    assert "a.xlsx" in message and ".csv" in message and ".parquet" in message and ".jsonl" in message


def test_folder(tmp_path):
    write(tmp_path, "train.csv", "text,label\na,1\n")
    message = error_of(read_table, str(tmp_path))
    assert "is a folder" in message and "train.csv" in message


@pytest.mark.parametrize("name", ["a.csv", "a.jsonl", "a.txt", "a.json"])
def test_empty_file(tmp_path, name):
    path = write(tmp_path, name, "")
    assert path in error_of(read_table, path) and "empty" in error_of(read_table, path)


@pytest.mark.parametrize("name, content", [("a.csv", "text,label\n"), ("a.json", "[]"), ("a.jsonl", "\n\n")])
def test_no_rows(tmp_path, name, content):
    path = write(tmp_path, name, content)
    message = error_of(read_table, path)
    assert path in message and ("no rows" in message or "empty" in message)


def test_parquet_with_no_rows(tmp_path):
    path = str(tmp_path / "a.parquet")
    pd.DataFrame({"text": pd.Series([], dtype=str)}).to_parquet(path)
    assert "no rows" in error_of(read_table, path)


def test_not_utf8_names_offset_and_line(tmp_path):
    path = write(tmp_path, "a.csv", "text,label\n很好,正面\n", encoding="gbk")
    message = error_of(read_table, path)
    assert path in message and "not UTF-8" in message and "offset 11" in message and "line 2" in message
    assert "GB18030" in message and "re-save the file as UTF-8" in message


def test_malformed_jsonl_line(tmp_path):
    path = write(tmp_path, "a.jsonl", '{"text": "a"}\n\n{"text": "b",, "label": 1}\n')
    message = error_of(read_table, path)
    assert message.startswith(f"{path} line 3 is not valid JSON")
    assert '{"text": "b",, "label": 1}' in message


def test_json_row_that_is_not_an_object(tmp_path):
    path = write(tmp_path, "a.json", '[\n {"text": "a"},\n "b"\n]')
    assert error_of(read_table, path).startswith(f"{path} line 3 holds a string, not an object")


def test_broken_json_array_names_the_line(tmp_path):
    path = write(tmp_path, "a.json", '[\n {"text": "a"},\n {"text": }\n]')
    assert error_of(read_table, path).startswith(f"{path} line 3 is not valid JSON")


def test_single_json_object_is_not_rows(tmp_path):
    path = write(tmp_path, "a.json", json.dumps({"version": "v2", "data": []}, indent=2))
    assert "holds one JSON object (keys: version, data)" in error_of(read_table, path)


def test_mixed_types_in_a_json_column(tmp_path):
    path = write(tmp_path, "a.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": "x"}\n')
    message = error_of(read_table, path)
    assert "column 'label'" in message and "line 1 has a number" in message and "line 2 has a string" in message


def test_ragged_csv_row(tmp_path):
    path = write(tmp_path, "a.csv", "text,label\ngood,1\nbad, really bad,0\n")
    message = error_of(read_table, path)
    assert message.startswith(f"{path} line 3 has 3 fields but the header has 2 (text, label)")
    assert "quotes" in message


def test_unclosed_quote_names_the_line_where_it_opened(tmp_path):
    path = write(tmp_path, "a.csv", 'text,label\nok,1\n"bad"x,0\n')
    assert error_of(read_table, path).startswith(f"{path} line 3: the row cannot be parsed")


def test_semicolon_separated_csv_gets_a_hint(tmp_path):
    path = write(tmp_path, "a.csv", "text;label\nx;1\n")
    assert "separated by ';'" in error_of(read_table, path)


def test_hub_name_failure_is_one_line(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    message = error_of(read_table, "someone/not-a-real-dataset:cfg@validation")
    assert "could not be loaded" in message and "HF_HUB_OFFLINE" in message


def test_hub_name_is_parsed_into_name_config_split(monkeypatch):
    seen = {}

    def fake_load_dataset(name, config, split):
        seen.update(name=name, config=config, split=split)
        return datasets.Dataset.from_dict({"sentence": ["a", "b"], "label": [0, 1]})

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    ds = read_table("nyu-mll/glue:sst2@validation")
    assert seen == {"name": "nyu-mll/glue", "config": "sst2", "split": "validation"}
    assert row_location(ds, 0) == "row 1"
    read_table("imdb", split="test")
    assert seen == {"name": "imdb", "config": None, "split": "test"}


# ---------------------------------------------------------------------------------------------------------------
# Columns


@pytest.mark.parametrize(
    "names, expected",
    [
        (["text", "label"], ColumnMap("text", None, "label")),
        (["Sentence", "Label"], ColumnMap("Sentence", None, "Label")),
        (["premise", "hypothesis", "label"], ColumnMap("premise", "hypothesis", "label")),
        (["sentence1", "sentence2", "score"], ColumnMap("sentence1", "sentence2", "score")),
        (["question", "text", "category"], ColumnMap("text", None, "category")),  # priority, not column order
        (["文本", "标签"], ColumnMap("文本", None, "标签")),
        (["句子", "句子2", "分数"], ColumnMap("句子", "句子2", "分数")),
        (["评论", "情感"], ColumnMap("评论", None, "情感")),
    ],
)
def test_column_auto_detection(names, expected):
    assert resolve_columns(names, "f.csv") == expected


def test_the_only_string_column_is_the_text():
    features = datasets.Features(
        {"id": datasets.Value("string"), "tweet": datasets.Value("string"), "n": datasets.Value("int64"),
         "label": datasets.Value("int64")}
    )  # fmt: skip
    assert resolve_columns(features, "f.csv") == ColumnMap("tweet", None, "label")


def test_explicit_columns_win(tmp_path):
    cols = resolve_columns(["body", "title", "text", "stars"], "f.csv", text="body", text_pair="title", label="stars")
    assert cols == ColumnMap("body", "title", "stars")


def test_explicit_column_missing_lists_the_columns():
    message = error_of(resolve_columns, ["text", "label"], "f.csv", text="txt")
    assert "column 'txt'" in message and "f.csv" in message and "columns: text, label" in message


def test_no_text_column():
    message = error_of(resolve_columns, ["a", "b", "label"], "f.csv")
    assert "f.csv" in message and "columns: a, b, label" in message and "data.text_column=" in message


def test_ambiguous_text_column():
    message = error_of(resolve_columns, ["Text", "text", "label"], "f.csv")
    assert "'Text', 'text'" in message and "data.text_column=" in message


def test_no_label_column_unless_optional():
    message = error_of(resolve_columns, ["text"], "f.csv")
    assert "no label column in f.csv" in message and "data.label_column=" in message
    assert resolve_columns(["text"], "f.csv", require_label=False) == ColumnMap("text", None, None)


# ---------------------------------------------------------------------------------------------------------------
# Labels


def test_string_labels_are_sorted():
    space = LabelSpace.from_values(["positive", "negative", "positive"])
    assert space.kind == "single" and space.names == ["negative", "positive"]
    assert space.encode("positive") == 1 and space.label2id == {"negative": 0, "positive": 1}
    assert space.problem_type == "single_label_classification" and space.num_labels == 2


def test_ordering_does_not_depend_on_row_order():
    values = ["b", "c", "a", "c"]
    assert LabelSpace.from_values(values).names == LabelSpace.from_values(values[::-1]).names == ["a", "b", "c"]


def test_int_labels_keep_their_numeric_meaning():
    space = LabelSpace.from_values([10, 2, 0, 1, 2])
    assert space.names == ["0", "1", "2", "10"]  # numeric order, not '10' before '2'
    assert space.encode(10) == space.label2id["10"] == 3
    assert space.encode(2) == 2 and space.encode("2") == 2 and space.encode(2.0) == 2
    assert LabelSpace.from_values([1, 0, 2]).id2label == {0: "0", 1: "1", 2: "2"}


def test_delimited_multi_label():
    space = LabelSpace.from_values(["billing;shipping", "account", "shipping"])
    assert space.kind == "multi" and space.names == ["account", "billing", "shipping"]
    assert space.encode("shipping; billing") == [0.0, 1.0, 1.0]
    assert space.encode("") == [0.0, 0.0, 0.0]
    assert space.problem_type == "multi_label_classification"


def test_list_multi_label():
    space = LabelSpace.from_values([["b", "a"], ["c"], []])
    assert space.kind == "multi" and space.names == ["a", "b", "c"]
    assert space.encode(["c", "a"]) == [1.0, 0.0, 1.0]


def test_regression_detection():
    space = LabelSpace.from_values([0.5, 3.2, 4.0])
    assert space.kind == "regression" and space.names == [] and space.num_labels == 1
    assert space.encode("2.5") == 2.5 and space.problem_type == "regression"
    assert LabelSpace.from_values([1.0, 2.0, 3.0]).kind == "single"  # whole numbers are classes...
    msg = error_of(space.encode, "high", "dev.csv", 4)
    assert "label 'high' in dev.csv line 4 is not a number" in msg


def test_score_column_is_regression_even_with_whole_numbers(tmp_path):
    path = write(tmp_path, "a.csv", "sentence1,sentence2,score\na,b,1\nc,d,5\n")
    ds, cols, space = load_split(path)
    assert space.kind == "regression" and ds["labels"][:] == [1.0, 5.0]


def test_unseen_label_error_message():
    space = LabelSpace.from_values(["positive", "negative"])
    message = error_of(space.encode, "neutral", "dev.csv", 7)
    assert message == (
        "label 'neutral' in dev.csv line 7 was never seen in training (known: negative, positive) — "
        "fix the label or add it to the training data"
    )
    assert "label 'x' in dev.csv line 3" in error_of(LabelSpace.from_values(["a;b"]).encode, "a;x", "dev.csv", 3)


def test_a_single_class_is_refused():
    message = error_of(LabelSpace.from_values, ["yes", "yes"], source="t.csv")
    assert "only one label ('yes') was found in t.csv" in message
    assert "every row's label list is empty" in error_of(LabelSpace.from_values, [[], []])


def test_round_trip_through_model_config():
    space = LabelSpace.from_values(["负面", "正面", "中性"])
    config = transformers.BertConfig(id2label=space.id2label, label2id=space.label2id)
    assert LabelSpace.from_model_config(config) == space
    multi = LabelSpace.from_values(["a|b", "c"], delimiter="|")
    config = transformers.BertConfig(**multi.config_kwargs())
    config.multi_label_threshold = 0.3
    back = LabelSpace.from_model_config(config)
    assert (back.kind, back.names, back.threshold, back.delimiter) == ("multi", ["a", "b", "c"], 0.3, "|")
    regression = LabelSpace.from_model_config(transformers.BertConfig(num_labels=1))
    assert regression.kind == "regression" and regression.num_labels == 1


# ---------------------------------------------------------------------------------------------------------------
# load_split, check_texts, inspect report


def test_load_split_encodes_and_reuses_the_training_label_space(tmp_path):
    train = write(tmp_path, "train.csv", "review,sentiment\ngreat,pos\nawful,neg\nfine,pos\n")
    dev = write(tmp_path, "dev.csv", "review,sentiment\nmeh,neg\nwow,neutral\n")
    ds, cols, space = load_split(train, {}, None, True)
    assert cols == ColumnMap("review", None, "sentiment")
    assert ds["labels"][:] == [1, 0, 1] and ds["sentiment"][:] == ["pos", "neg", "pos"]
    message = error_of(load_split, dev, {}, space, True)
    assert message.startswith(f"label 'neutral' in {dev} line 3 was never seen in training (known: neg, pos)")


def test_load_split_overrides_and_multi_label_jsonl(tmp_path):
    path = write(tmp_path, "a.jsonl", '{"body": "a", "labels": ["x"]}\n{"body": "b", "labels": ["x", "y"]}\n')
    ds, cols, space = load_split(path, {"text_column": "body", "label_column": None}, None, True)
    assert cols == ColumnMap("body", None, "labels") and space.names == ["x", "y"]
    assert ds["labels"][:] == [[1.0, 0.0], [1.0, 1.0]]  # the encoded column replaces the raw `labels`
    assert "unknown column setting 'txt'" in error_of(load_split, path, {"txt": "body"}, None, True)


def test_load_split_without_labels(tmp_path):
    path = write(tmp_path, "a.txt", "one\ntwo\n")
    ds, cols, space = load_split(path, {}, None, False)
    assert cols == ColumnMap("text") and space is None and "labels" not in ds.column_names
    # Predicting on a labelled file: the label column is found (not taken for the text) but not encoded.
    known = LabelSpace.from_values(["a", "b"])
    path = write(tmp_path, "b.csv", "tweet,label\nhi,zzz\n")
    ds, cols, space = load_split(path, {}, known, False)
    assert cols == ColumnMap("tweet", None, "label") and space is known and "labels" not in ds.column_names


def test_load_split_empty_text_and_missing_label(tmp_path):
    path = write(tmp_path, "a.csv", "premise,hypothesis,label\na,b,x\nc,  ,y\n")
    assert error_of(load_split, path).startswith(f"{path} line 3: column 'hypothesis' is empty")
    path = write(tmp_path, "b.csv", "text,label\na,x\nb,y\nc,\n")
    assert error_of(load_split, path).startswith(f"{path} line 4: the label is empty")


def test_load_split_numeric_text_becomes_strings(tmp_path):
    ds, cols, _ = load_split(write(tmp_path, "a.csv", "text,label\n12,a\n34,b\n"))
    assert ds["text"][:] == ["12", "34"]


def test_load_split_class_label_names(monkeypatch):
    features = datasets.Features({"sentence": datasets.Value("string"),
                                  "label": datasets.ClassLabel(names=["positive", "negative"])})  # fmt: skip
    hub = datasets.Dataset.from_dict({"sentence": ["a", "b"], "label": [1, 0]}, features=features)
    monkeypatch.setattr(datasets, "load_dataset", lambda name, config, split: hub)
    ds, cols, space = load_split("someone/reviews")
    assert space.names == ["positive", "negative"] and ds["labels"][:] == [1, 0]  # the dataset's own ids


def test_duplicate_and_overlap_report(tmp_path):
    train = read_table(write(tmp_path, "t.csv", "text,label\na,1\na,0\nb,1\nb,1\nb,1\n\" \",1\nc,0\n"))
    dev = read_table(write(tmp_path, "d.csv", "text,label\nc,0\nz,1\nz,1\n"))
    report = duplicate_and_overlap_report(train, dev, ColumnMap("text", None, "label"))
    assert report["train"]["rows"] == 7 and report["train"]["empty_texts"] == 1
    assert report["train"]["duplicate_texts"] == 3 and report["train"]["conflicting_labels"] == 1
    assert report["dev"]["duplicate_texts"] == 1 and report["dev"]["duplicate_examples"] == ["z"]
    assert report["train_dev_overlap"] == 1 and report["overlap_examples"] == ["c"]
    assert duplicate_and_overlap_report(train, None, ColumnMap("text"))["dev"] is None


# ---------------------------------------------------------------------------------------------------------------
# The sample datasets shipped in data/, with zero configuration

SAMPLES = {
    "en_sentiment/train.csv": ("single", ColumnMap("text", None, "label")),
    "en_pair/train.csv": ("single", ColumnMap("premise", "hypothesis", "label")),
    "en_multilabel/train.jsonl": ("multi", ColumnMap("text", None, "labels")),
    "en_multilabel/train.csv": ("multi", ColumnMap("text", None, "labels")),
    "en_regression/train.csv": ("regression", ColumnMap("sentence1", "sentence2", "score")),
    "zh_sentiment/train.csv": ("single", ColumnMap("text", None, "label")),
}


@pytest.mark.parametrize("rel", list(SAMPLES))
def test_sample_datasets_load_with_zero_config(rel):
    path = DATA / rel
    if not path.exists():
        pytest.skip(f"{rel} is not generated yet")
    kind, columns = SAMPLES[rel]
    ds, cols, space = load_split(str(path))
    assert (space.kind, cols) == (kind, columns) and len(ds) > 0
    dev = path.with_name("dev" + path.suffix)
    if dev.exists():
        dev_ds, _, _ = load_split(str(dev), {}, space, True)
        assert len(dev_ds) > 0
    if rel == "zh_sentiment/train.csv":
        assert space.names == ["正面", "负面"]
