"""The NER recipe: exact label alignment on split words, window stitching, scheme checks, Chinese character spans
mapped back to the original string, and end-to-end runs on tiny models through main(cfg) and the CLI."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from safetensors.torch import load_file
from typer.testing import CliRunner

from bertkit import BertkitConfig, BertkitForTokenClassification
from bertkit.cli import app, load_recipe
from bertkit.config import load_config
from bertkit.errors import BertkitError
from bertkit.tasks import SETTINGS_KEY, read_settings, settings_dict
from bertkit.tasks.long_documents import sliding_windows
from bertkit.tasks.ner import (ReadOptions, Sentence, Settings, Tagger, encode, entities_from_tags, label_names,
                               predict_word_probabilities, read_examples, read_texts, repair_tags, scheme_violations,
                               sentence_windows, spans_to_tags, split_words, stitch_windows, tags_to_spans)

runner = CliRunner()
DATA = Path(__file__).resolve().parent.parent / "data" / "ner"


pytestmark = pytest.mark.usefixtures("one_thread")


def head_lines(source: Path, target: Path, sentences: int) -> str:
    """The first `sentences` blank-line-separated blocks of a CoNLL file, or the first lines of a JSONL file."""
    text = source.read_text(encoding="utf-8")
    if source.suffix == ".jsonl":
        target.write_text("\n".join(text.splitlines()[:sentences]) + "\n", encoding="utf-8")
    else:
        target.write_text("\n\n".join(text.split("\n\n")[: sentences + 1]) + "\n", encoding="utf-8")
    return str(target)


def run_recipe(overrides):
    module = load_recipe("ner")
    return module.main(load_config(module.Config, None, overrides))


def base_overrides(model_dir, train, dev, output_dir, *extra):
    return [f"model={model_dir}", f"data.train={train}", f"data.eval={dev}", f"output_dir={output_dir}",
            "precision=fp32", "train.num_train_epochs=1", "train.per_device_train_batch_size=8",
            "train.learning_rate=5.0e-3", "train.logging_steps=2", *extra]


# ---------------------------------------------------------------------------------------------------------------
# Label alignment


def test_labels_go_on_the_first_sub_token_or_all_with_label_all_tokens(tiny_model_dir):
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model_dir)
    sentence = Sentence(["Johanssonberg", "visited", "Nkechi", "in", "Rotterdam"],
                        ["B-PER", "O", "B-PER", "O", "B-LOC"], "test")
    labels = label_names({"PER", "LOC"}, "IOB2")
    assert labels == ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
    label2id = {name: i for i, name in enumerate(labels)}
    windows = encode(tokenizer, [sentence], 64, 8, label2id)
    tokens = tokenizer.convert_ids_to_tokens(windows.features[0]["input_ids"])
    assert tokens == ["[CLS]", "johansson", "##berg", "visited", "nk", "##ech", "##i", "in", "rotterdam", "[SEP]"]
    named = lambda ids: [labels[i] if i >= 0 else -100 for i in ids]  # noqa: E731
    assert named(windows.features[0]["labels"]) == [-100, "B-PER", -100, "O", "B-PER", -100, -100, "O", "B-LOC", -100]
    all_tokens = encode(tokenizer, [sentence], 64, 8, label2id, label_all_tokens=True)
    assert named(all_tokens.features[0]["labels"]) == [
        -100, "B-PER", "I-PER", "O", "B-PER", "I-PER", "I-PER", "O", "B-LOC", -100]
    assert windows.first_tokens == [[0, 2, 3, 6, 7]]


def test_bioes_label_all_tokens_continues_with_i(tiny_model_dir):
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model_dir)
    labels = label_names({"PER"}, "BIOES")
    assert labels == ["O", "B-PER", "I-PER", "E-PER", "S-PER"]
    label2id = {name: i for i, name in enumerate(labels)}
    sentence = Sentence(["Nkechi", "Halden", "Johanssonberg"], ["S-PER", "B-PER", "E-PER"], "test")
    windows = encode(tokenizer, [sentence], 64, 8, label2id, label_all_tokens=True)
    # nk ##ech ##i | hal ##den | johansson ##berg
    assert [labels[i] for i in windows.features[0]["labels"][1:-1]] == [
        "S-PER", "I-PER", "I-PER", "B-PER", "I-PER", "E-PER", "I-PER"]


# ---------------------------------------------------------------------------------------------------------------
# Windows


def test_window_spans_cover_everything_with_the_stride():
    assert sliding_windows(10, 4, 2, full_last=True) == [(0, 4), (2, 6), (4, 8), (6, 10)]
    # last window moved back, full
    assert sliding_windows(11, 4, 2, full_last=True) == [(0, 4), (2, 6), (4, 8), (6, 10), (7, 11)]
    assert sliding_windows(3, 4, 2, full_last=True) == [(0, 3)]
    with pytest.raises(BertkitError, match="stride 4 must be smaller"):
        sliding_windows(10, 4, 4, full_last=True)


def test_an_empty_sentence_gets_no_window(tiny_model_dir):
    """sliding_windows gives no tokens one empty window, (0, 0); NER keeps none: an empty sentence has no rows."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model_dir)
    assert sentence_windows(0, 6, 2) == []
    windows = encode(tokenizer, [Sentence([], None, "empty"), Sentence(["Oslo"], None, "t")], 6, 2)
    assert windows.num_tokens[0] == 0 and windows.owner and set(windows.owner) == {1}


def test_each_token_takes_the_window_where_it_is_most_central():
    spans = sliding_windows(10, 4, 2, full_last=True)
    values = [np.full((end - start, 1), index, dtype=np.float32) for index, (start, end) in enumerate(spans)]
    chosen = stitch_windows(spans, values, 10)[:, 0].astype(int).tolist()
    assert chosen == [0, 0, 0, 1, 1, 2, 2, 3, 3, 3]
    # token 8 is equally central in (6, 10) and (7, 11): the earlier one wins
    eleven = sliding_windows(11, 4, 2, full_last=True)
    values = [np.full((end - start, 1), index, dtype=np.float32) for index, (start, end) in enumerate(eleven)]
    assert stitch_windows(eleven, values, 11)[:, 0].astype(int).tolist() == [0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    # rows keep their position inside the window: window 1's row for token 4 is its third row
    values = [np.arange(start, end, dtype=np.float32)[:, None] * 10 + i for i, (start, end) in enumerate(spans)]
    assert stitch_windows(spans, values, 10)[:, 0].tolist() == [0, 10, 20, 31, 41, 52, 62, 73, 83, 93]


def per_token_tagger(tokenizer, max_length: int, stride: int) -> Tagger:
    """A tiny tagger whose output at a token depends on that token alone: attention outputs and position
    embeddings are zero, so a window sees exactly what the whole sentence sees."""
    torch.manual_seed(1)
    config = BertkitConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=64, max_position_embeddings=128, num_labels=5)
    model = BertkitForTokenClassification(config).eval()
    with torch.no_grad():
        model.bert.embeddings.position_embeddings.weight.zero_()
        for layer in model.bert.encoder.layer:
            layer.attention.output.dense.weight.zero_()
            layer.attention.output.dense.bias.zero_()
        model.classifier.weight.mul_(50)  # spread the probabilities so a wrong row is visible
    id2label = dict(enumerate(label_names({"PER", "LOC"}, "IOB2")))
    return Tagger(model, tokenizer, id2label, Settings(max_length=max_length, stride=stride))


def test_settings_read_files_as_the_run_did_default_when_none_were_saved_and_refuse_a_bad_stride():
    settings = Settings(scheme="IOB2", file_scheme="IOB1", repair_tags=True, split="chars", max_length=64, stride=8,
                        strict=True)
    assert settings.read_options() == ReadOptions(scheme="IOB1", repair=True, split="chars")
    bare = transformers.BertConfig()
    assert read_settings(Settings, bare, "config.json") == Settings()
    saved = {SETTINGS_KEY: {**settings_dict(Settings()), "max_length": 16, "stride": 14}}
    with pytest.raises(BertkitError, match=r"bertkit_task_settings\.stride must be .* below the 14 tokens"):
        read_settings(Settings, saved, "config.json")


def test_windowed_prediction_equals_the_unwindowed_one_for_a_per_token_model(tiny_model_dir):
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model_dir)
    words = ("Johanssonberg met Nkechi Vasquez-Lindqvist in Rotterdam while Halden Energy announced a merger with "
             "a firm from Tromso and Oslo on Friday , the agency said").split() * 3
    sentence = Sentence(words, None, "test")
    short = per_token_tagger(tokenizer, max_length=16, stride=5)
    assert len(encode(tokenizer, [sentence], 16, 5).features) > 5
    windowed = predict_word_probabilities(short, [sentence, Sentence(["Oslo"], None, "t")], batch_size=4)
    whole = predict_word_probabilities(per_token_tagger(tokenizer, 128, 5), [sentence], batch_size=4)
    assert windowed[0].shape == (len(words), 5)
    assert np.allclose(windowed[0], whole[0], atol=1e-5)
    assert len({tuple(np.round(row, 3)) for row in whole[0]}) > 5  # the words really get different rows
    # and a model that mixes context does differ between windowed and whole: the check above can fail
    mixing = per_token_tagger(tokenizer, 16, 5)
    torch.manual_seed(2)
    for layer in mixing.model.bert.encoder.layer:
        torch.nn.init.normal_(layer.attention.output.dense.weight, std=0.5)
    mixing_whole = Tagger(mixing.model, tokenizer, mixing.id2label, Settings(max_length=128, stride=5))
    assert not np.allclose(predict_word_probabilities(mixing, [sentence])[0],
                           predict_word_probabilities(mixing_whole, [sentence])[0], atol=1e-3)


# ---------------------------------------------------------------------------------------------------------------
# Tags and schemes


def test_scheme_conversions_round_trip():
    iob2 = ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "O"]
    spans = [(0, 2, "PER"), (3, 4, "LOC"), (4, 6, "LOC")]
    assert tags_to_spans(iob2) == spans
    assert spans_to_tags(spans, 7, "BIOES") == ["B-PER", "E-PER", "O", "S-LOC", "B-LOC", "E-LOC", "O"]
    assert spans_to_tags(spans, 7, "IOB1") == ["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-LOC", "O"]
    for scheme in ("IOB2", "IOB1", "BIOES"):
        tags = spans_to_tags(spans, 7, scheme)
        assert scheme_violations(tags, scheme) == []
        assert repair_tags(tags, scheme) == tags and tags_to_spans(tags) == spans


def test_scheme_violations_are_found_and_repaired():
    assert scheme_violations(["O", "I-PER", "I-PER", "B-LOC", "I-ORG"], "IOB2") == [
        (1, "I-PER after O"), (4, "I-ORG after B-LOC")]
    assert scheme_violations(["B-PER", "O", "S-LOC", "I-LOC"], "BIOES") == [
        (0, "B-PER not closed by E-PER"), (3, "I-LOC after S-LOC"), (3, "I-LOC not closed by E-LOC")]
    assert repair_tags(["O", "I-PER", "I-PER", "B-LOC", "I-ORG"], "IOB2") == ["O", "B-PER", "I-PER", "B-LOC", "B-ORG"]
    # lenient reading: S- always starts (and ends) an entity, E- ends one, I- of another type starts a new one
    assert tags_to_spans(["B-LOC", "S-LOC", "I-LOC", "E-LOC", "E-LOC", "I-PER"]) == [
        (0, 1, "LOC"), (1, 2, "LOC"), (2, 4, "LOC"), (4, 5, "LOC"), (5, 6, "PER")]
    assert repair_tags(["B-PER", "O", "S-LOC", "I-LOC"], "BIOES") == ["S-PER", "O", "S-LOC", "S-LOC"]


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_broken_tags_stop_with_count_and_first_line_or_get_repaired(tmp_path):
    path = write(tmp_path / "bad.conll", "-DOCSTART- O\n\nAnna I-PER\nBerg I-PER\nsang O\n\nin O\nOslo I-LOC\n")
    with pytest.raises(BertkitError) as error:
        read_examples(path)
    message = str(error.value)
    assert "2 tags break the IOB2 scheme" in message and f"{path} line 3: I-PER after sentence start" in message
    assert "data.repair_tags=true" in message and "\n" not in message
    data = read_examples(path, ReadOptions(repair=True))
    assert [s.tags for s in data.sentences] == [["B-PER", "I-PER", "O"], ["O", "B-LOC"]]
    assert data.notes == [f"{path}: repaired 2 tags that broke IOB2 (first: {path} line 3: I-PER after sentence start)"]
    iob1 = read_examples(path, ReadOptions(scheme="IOB1"))  # the same file is valid IOB1: converted to IOB2
    assert iob1.scheme == "IOB2" and iob1.sentences[0].tags == ["B-PER", "I-PER", "O"]


def test_bioes_is_detected_and_checked(tmp_path):
    good = read_examples(write(tmp_path / "a.conll", "Anna B-PER\nBerg E-PER\nin O\nOslo S-LOC\n"))
    assert good.scheme == "BIOES" and good.entity_types == {"PER", "LOC"}
    with pytest.raises(BertkitError, match=r"b\.conll line 1: B-PER not closed by E-PER"):
        read_examples(write(tmp_path / "b.conll", "Anna B-PER\nin O\nOslo S-LOC\n"))
    with pytest.raises(BertkitError, match=r"a\.conll line 2: tag E-PER is not an IOB2 tag — set data.scheme=BIOES"):
        read_examples(str(tmp_path / "a.conll"), ReadOptions(scheme="IOB2"))


def test_conll_format_errors_name_the_line(tmp_path):
    with pytest.raises(BertkitError, match=r"c\.conll line 3 has 3 columns but line 1 has 2"):
        read_examples(write(tmp_path / "c.conll", "Anna B-PER\nsang O\nin NN O\n"))
    with pytest.raises(BertkitError, match=r"d\.conll line 2 has one column \('Oslo'\)"):
        read_examples(write(tmp_path / "d.conll", "in O\nOslo\n"))
    with pytest.raises(BertkitError, match=r"e\.conll line 2: tag 'PER' is neither O nor"):
        read_examples(write(tmp_path / "e.conll", "in O\nOslo PER\n"))
    four = read_examples(write(tmp_path / "f.conll", "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n"))
    assert four.sentences[0].words == ["EU", "rejects"] and four.sentences[0].tags == ["B-ORG", "O"]


def test_bad_spans_stop_or_are_counted_and_skipped(tmp_path):
    rows = [{"text": "张三在北京", "entities": [{"start": 0, "end": 2, "type": "PER"}]},
            {"text": "李四", "entities": [{"start": 0, "end": 9, "type": "PER"}]},
            {"text": "王五去上海", "entities": [{"start": 3, "end": 5, "type": "LOC", "text": "北京"}]},
            {"tokens": ["a", "b"], "tags": ["O"]}]
    path = write(tmp_path / "spans.jsonl", "\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n")
    with pytest.raises(BertkitError, match=r"spans\.jsonl line 2: entity 0-9 PER is out of range for a text of 2 "
                                           r"characters .* data\.skip_bad_examples=true"):
        read_examples(path, ReadOptions(split="chars"))
    data = read_examples(path, ReadOptions(split="chars", skip_bad=True))
    assert len(data.sentences) == 1 and data.sentences[0].tags == ["B-PER", "I-PER", "O", "O", "O"]
    assert data.notes[0].startswith(f"{path}: skipped 2 examples with bad entity spans (first: {path} line 2")
    assert data.notes[1].startswith(f"{path}: skipped 1 example with tags and tokens of different lengths")


# ---------------------------------------------------------------------------------------------------------------
# Chinese characters and offsets into the original string


def test_chinese_spans_map_back_to_the_original_characters(tmp_path):
    text = " 张三在北京大学读书，后来去了 New York。"
    entities = [{"start": 1, "end": 3, "type": "PER"}, {"start": 4, "end": 8, "type": "ORG"},
                {"start": 16, "end": 24, "type": "LOC"}]
    assert [text[e["start"]:e["end"]] for e in entities] == ["张三", "北京大学", "New York"]
    path = write(tmp_path / "zh.jsonl", json.dumps({"text": text, "entities": entities}, ensure_ascii=False) + "\n")
    chars = read_examples(path, ReadOptions(split="chars")).sentences[0]
    assert chars.words[:8] == ["张", "三", "在", "北", "京", "大", "学", "读"]
    assert chars.words[-8:] == [*"NewYork", "。"] and chars.tags[-8:] == ["B-LOC"] + ["I-LOC"] * 6 + ["O"]
    assert chars.tags[:8] == ["B-PER", "I-PER", "O", "B-ORG", "I-ORG", "I-ORG", "I-ORG", "O"]
    words = read_examples(path).sentences[0]  # bert split: CJK characters alone, English words whole
    assert words.words[-3:] == ["New", "York", "。"] and words.tags[-3:] == ["B-LOC", "I-LOC", "O"]
    for sentence in (chars, words):
        scores = np.linspace(0.5, 0.9, len(sentence.words))
        found = entities_from_tags(sentence, sentence.tags, scores)
        assert [(e["start"], e["end"], e["type"], e["text"]) for e in found] == [
            (e["start"], e["end"], e["type"], text[e["start"]:e["end"]]) for e in entities]
    person = entities_from_tags(chars, chars.tags, np.linspace(0.5, 0.9, len(chars.words)))[0]
    assert person["score"] == pytest.approx(round(float(np.mean(np.linspace(0.5, 0.9, len(chars.words))[:2])), 4))


def test_split_words_offsets():
    assert split_words("Hi, U.S. 北京 x2") == [(0, 2), (2, 3), (4, 5), (5, 6), (6, 7), (7, 8), (9, 10), (10, 11),
                                                (12, 14)]
    assert split_words("北京ab", "chars") == [(0, 1), (1, 2), (2, 3), (3, 4)]
    assert split_words("Berlin-based", cuts=[6]) == [(0, 6), (6, 7), (7, 12)]
    assert split_words("NewYork", cuts=[3]) == [(0, 3), (3, 7)]


# ---------------------------------------------------------------------------------------------------------------
# End to end


def test_english_run_writes_everything(tiny_model_dir, tmp_path):
    train = head_lines(DATA / "en" / "train.conll", tmp_path / "train.conll", 48)
    dev = head_lines(DATA / "en" / "dev.conll", tmp_path / "dev.conll", 16)
    out = tmp_path / "run"
    results = run_recipe(base_overrides(tiny_model_dir, train, dev, out, "llrd=0.8", "data.max_length=24",
                                        "data.stride=6", "train.gradient_accumulation_steps=2",
                                        "early_stopping_patience=1", "data.label_all_tokens=true"))
    for name in ("model.safetensors", "config.json", "tokenizer.json", "metrics.json", "training_curve.png",
                 "bertkit_config.yaml", "README.md", "entity_report.txt"):
        assert (out / name).exists(), name
    config = json.loads((out / "config.json").read_text())
    assert config[SETTINGS_KEY]["scheme"] == "IOB2" and config["architectures"] == ["BertForTokenClassification"]
    assert config[SETTINGS_KEY]["max_length"] == 24 and config[SETTINGS_KEY]["stride"] == 6
    assert config["id2label"]["0"] == "O" and "B-MISC" in config["label2id"]
    metrics = json.loads((out / "metrics.json").read_text())["eval"]
    assert metrics == pytest.approx(results["eval"])
    assert {"precision", "recall", "f1", "f1_PER", "f1_LOC", "f1_ORG", "f1_MISC", "number_PER"} <= set(metrics)
    assert "token-classification" in (out / "README.md").read_text()
    stock = transformers.AutoModelForTokenClassification.from_pretrained(out)
    assert type(stock) is transformers.BertForTokenClassification


def test_auto_max_length_is_chosen_from_the_training_sentences_and_saved_as_a_number(tiny_model_dir, tmp_path):
    train = head_lines(DATA / "en" / "train.conll", tmp_path / "train.conll", 32)
    out = tmp_path / "run"
    auto = base_overrides(tiny_model_dir, train, train, out, "data.max_length=auto", "data.stride=4",
                          "train.max_steps=2")
    result = runner.invoke(app, ["run", "ner", *auto])
    assert result.exit_code == 0, result.output
    settings = json.loads((out / "config.json").read_text())[SETTINGS_KEY]
    chosen = settings["max_length"]
    assert chosen % 8 == 0 and 16 <= chosen <= 128
    assert f"data.max_length=auto: {chosen} tokens" in result.output
    assert f"max_length: {chosen}" in (out / "bertkit_config.yaml").read_text()  # the resolved config: the number
    # a stride that does not fit the chosen windows: after the line saying what auto chose, one error line naming
    # both keys, before any training
    refused = runner.invoke(app, ["run", "ner", *base_overrides(tiny_model_dir, train, train, tmp_path / "r2",
                                                                "data.max_length=auto", "data.stride=200")])
    assert refused.exit_code == 2 and "Traceback" not in refused.output
    said, error = refused.output.strip().splitlines()[-2:]
    assert f"data.max_length=auto: {chosen} tokens" in said
    assert error.startswith("error: config key 'data.stride'") and f"chosen by data.max_length=auto: {chosen}" in error
    assert not (tmp_path / "r2" / "model.safetensors").exists()


def test_lora_run_saves_a_merged_plain_model(tiny_model_dir, tmp_path):
    train = head_lines(DATA / "en" / "train.conll", tmp_path / "train.conll", 24)
    out = tmp_path / "run"
    run_recipe(base_overrides(tiny_model_dir, train, train, out, "lora.enabled=true", "lora.r=4"))
    weights = load_file(out / "model.safetensors")
    assert not any("lora" in name for name in weights) and "classifier.weight" in weights


def test_resume_continues_from_the_last_checkpoint(tiny_model_dir, tmp_path):
    train = head_lines(DATA / "en" / "train.conll", tmp_path / "train.conll", 16)
    out = tmp_path / "run"
    # 16 sentences / batch 8: 2 steps an epoch; a finished run keeps its checkpoints only when asked to
    run_recipe(base_overrides(tiny_model_dir, train, train, out, "keep_checkpoints=true"))
    assert (out / "checkpoint-2").is_dir()
    results = run_recipe(base_overrides(tiny_model_dir, train, train, out, "train.num_train_epochs=2", "resume=true",
                                        "keep_checkpoints=true"))
    state = json.loads((out / "checkpoint-4" / "trainer_state.json").read_text())
    assert state["global_step"] == 4 and results["train"]["epoch"] == 2
    assert [e["step"] for e in state["log_history"] if "eval_f1" in e] == [2, 4]


def test_chinese_cli_run_predict_evaluate(tiny_zh_model_dir, tmp_path):
    train = head_lines(DATA / "zh" / "train.jsonl", tmp_path / "train.jsonl", 80)
    dev = head_lines(DATA / "zh" / "dev.jsonl", tmp_path / "dev.jsonl", 20)
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", "ner", *base_overrides(tiny_zh_model_dir, train, dev, out, "data.split=chars",
                                                               "data.max_length=12", "data.stride=4",
                                                               "train.num_train_epochs=3")])
    assert result.exit_code == 0, result.output
    recipe_metrics = json.loads((out / "metrics.json").read_text())["eval"]

    evaluated = tmp_path / "eval.json"
    result = runner.invoke(app, ["evaluate", str(out), dev, "-o", str(evaluated)])
    assert result.exit_code == 0, result.output
    metrics = json.loads(evaluated.read_text())
    # the Trainer's windowed eval and `bertkit evaluate` stitch the same windows into the same words
    assert {k: metrics[k] for k in recipe_metrics} == pytest.approx(recipe_metrics)
    assert 0.0 < metrics["accuracy"] < 1.0

    texts = [json.loads(line)["text"] for line in Path(dev).read_text(encoding="utf-8").splitlines()]
    inputs = write(tmp_path / "texts.jsonl", "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n"
                                                     for t in texts + ["", "  张三  去了北京 "]))
    predictions = tmp_path / "predictions.jsonl"
    result = runner.invoke(app, ["predict", str(out), inputs, "-o", str(predictions)])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in predictions.read_text(encoding="utf-8").splitlines()]
    assert [r["text"] for r in records] == texts + ["", "  张三  去了北京 "]
    assert records[-2]["entities"] == []
    found = [e for r in records for e in r["entities"]]
    assert found, "the model predicts no entity at all: nothing to check the offsets on"
    for record in records:
        for entity in record["entities"]:
            assert record["text"][entity["start"]:entity["end"]] == entity["text"] and 0 < entity["score"] <= 1
    # predict reads csv / txt text columns too
    txt = write(tmp_path / "texts.txt", "\n".join(texts[:3]) + "\n")
    assert [s.text for s in read_texts(txt, "chars")] == texts[:3]


def test_bad_inputs_fail_with_one_line(tiny_model_dir, tmp_path):
    bad = write(tmp_path / "bad.conll", "Anna I-PER\n")
    result = runner.invoke(app, ["run", "ner", f"model={tiny_model_dir}", f"data.train={bad}"])
    assert result.exit_code == 2 and "1 tag breaks the IOB2 scheme" in result.output
    result = runner.invoke(app, ["run", "ner", f"model={tiny_model_dir}"])
    assert result.exit_code == 2 and "no training data" in result.output
