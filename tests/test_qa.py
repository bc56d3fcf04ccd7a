"""The qa recipe: readers (SQuAD v1/v2 JSON, JSONL, answer_start repair), context windows, exact post-processing
cases (spans across windows, null answer vs threshold, max_answer_length, offsets back to the original characters in
English and Chinese), and end to end on tiny models through main(cfg) and the CLI (run / predict / evaluate)."""

import json
from pathlib import Path

import numpy as np
import pytest
import transformers
from safetensors.torch import load_file
from typer.testing import CliRunner

from bertkit.cli import app, load_recipe
from bertkit.config import load_config
from bertkit.errors import BertkitError
from bertkit.metrics import SquadMetric
from bertkit.tasks import SETTINGS_KEY, read_settings, settings_dict
from bertkit.tasks.qa import (Prediction, QAExample, Settings, answer_token_span, best_prediction, candidate_spans,
                              check_window_settings, detect_language, encode, load_predictor, locate_answer,
                              postprocess, predict_examples, read_examples, tune_null_threshold)
from bertkit.tokenization import chinese_bert_tokenizer

runner = CliRunner()


# ------------------------------------------------------------------------------------------------ fixtures / data


@pytest.fixture(scope="module")
def en_tokenizer(tiny_model_dir):
    return transformers.AutoTokenizer.from_pretrained(tiny_model_dir)


TOWNS = ["Alder", "Brook", "Cedar", "Dover", "Elm", "Fern", "Glen", "Heath", "Ivy", "Jasper", "Kent", "Larch"]
PEOPLE = ["Mara Quill", "Tom Reed", "Ann Vale", "Joe Park", "Eva Stone", "Max Bell"]
FILLER = "The streets are quiet and the weather is mild. Many visitors come in summer. "


def en_paragraph(i: int, long: bool) -> dict:
    town, person, year = TOWNS[i % len(TOWNS)], PEOPLE[i % len(PEOPLE)], 1800 + 7 * i
    context = f"{town} is a small town. " + (FILLER * 3 if long else "") + f"It was founded in {year} by {person}."
    qas = [{"id": f"{i}-year", "question": f"When was {town} founded?",
            "answers": [{"text": str(year), "answer_start": context.index(str(year))}], "is_impossible": False},
           {"id": f"{i}-who", "question": f"Who founded {town}?",
            "answers": [{"text": person, "answer_start": context.index(person)}], "is_impossible": False},
           {"id": f"{i}-mayor", "question": f"Who is the mayor of {town}?", "answers": [], "is_impossible": True}]
    return {"context": context, "qas": qas}


def write_squad(path: Path, paragraphs: list[dict], version: str = "v2.0") -> str:
    path.write_text(json.dumps({"version": version, "data": [{"title": "t", "paragraphs": paragraphs}]},
                               ensure_ascii=False), encoding="utf-8")
    return str(path)


def write_jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def example(context: str, answer: str | None = None, question: str = "q?", qid: str = "e") -> QAExample:
    answers = [{"text": answer, "answer_start": context.index(answer)}] if answer else []
    return QAExample(qid, question, context, answers, "test")


# ------------------------------------------------------------------------------------------------ readers


def test_locate_answer_keeps_repairs_or_gives_up():
    context = "The cat sat on the mat. The cat left."
    assert locate_answer(context, "cat", 4) == 4
    assert locate_answer(context, "cat", 7) == 4  # 3 off: moved to the nearest occurrence
    assert locate_answer(context, "cat", 26) == 28
    assert locate_answer("a cat and a cat", "cat", 11) == 12  # both within ±20: the nearer one wins
    assert locate_answer("a cat and a cat", "cat", 6) == 2
    assert locate_answer(context, "mat", None) == 19  # no start: the first occurrence
    assert locate_answer(context, "dog", 4) is None
    far = "x" * 30 + "cat"
    assert locate_answer(far, "cat", 0) is None  # 30 characters away: beyond the ±20 search


def test_reader_repairs_skips_and_counts_with_first_locations(tmp_path):
    context = "Greyfold was founded in 1937 by Grace Okonkwo in Greyhaven."
    rows = [{"id": "ok", "question": "When?", "context": context, "answers": {"text": ["1937"], "answer_start": [24]}},
            {"id": "off", "question": "Who?", "context": context,
             "answers": [{"text": "Grace Okonkwo", "answer_start": 29}]},  # true start 32
            {"id": "bad", "question": "Where?", "context": context,
             "answers": [{"text": "Lagos", "answer_start": 49}]},  # not in the context at all
            {"question": "Which city?", "context": context, "answers": {"text": [], "answer_start": []}}]
    examples, report = read_examples(write_jsonl(tmp_path / "d.jsonl", rows))
    assert [e.id for e in examples] == ["ok", "off", "d-3"]
    assert examples[1].answers == [{"text": "Grace Okonkwo", "answer_start": 32}]
    assert (report.fixed_starts, report.bad_answers, report.skipped, report.generated_ids) == (1, 1, 1, 1)
    assert report.first_fixed.endswith("line 2 (id off): 'Grace Okonkwo' 29 -> 32")
    assert report.first_bad.endswith("line 3 (id bad): 'Lagos' at 49")
    assert report.unanswerable == 1 and report.examples == 3
    text = "\n".join(report.lines())
    assert "1 answer_start values" in text and "1 answers are not in the context" in text
    assert "skipping 1 questions" in text


def test_squad_v1_v2_jsonl_and_array_read_the_same(tmp_path):
    paragraph = en_paragraph(0, long=False)
    v2 = read_examples(write_squad(tmp_path / "v2.json", [paragraph]))[0]
    v1_paragraph = {"context": paragraph["context"],
                    "qas": [{k: v for k, v in qa.items() if k != "is_impossible"} for qa in paragraph["qas"]]}
    v1 = read_examples(write_squad(tmp_path / "v1.json", [v1_paragraph], "1.1"))[0]
    flat = [{"id": qa["id"], "question": qa["question"], "context": paragraph["context"],
             "answers": {"text": [a["text"] for a in qa["answers"]],
                         "answer_start": [a["answer_start"] for a in qa["answers"]]}} for qa in paragraph["qas"]]
    jsonl = read_examples(write_jsonl(tmp_path / "flat.jsonl", flat))[0]
    array_path = tmp_path / "array.json"
    array_path.write_text(json.dumps(flat, indent=1))
    array = read_examples(str(array_path))[0]
    key = [(e.id, e.question, e.context, e.answers) for e in v2]
    for other in (v1, jsonl, array):
        assert [(e.id, e.question, e.context, e.answers) for e in other] == key
    assert v2[2].answers == [] and v2[0].location == "data[0].paragraphs[0].qas[0]"


def test_empty_context_is_an_error_naming_the_example(tmp_path):
    rows = [{"id": "q1", "question": "Who?", "context": "Ann did.", "answers": []},
            {"id": "q2", "question": "Who?", "context": "   ", "answers": []}]
    with pytest.raises(BertkitError, match=r"d\.jsonl line 2 \(id q2\) has an empty context"):
        read_examples(write_jsonl(tmp_path / "d.jsonl", rows))
    with pytest.raises(BertkitError, match=r"data\[0\]\.paragraphs\[0\]\.qas\[0\] \(id x\) has an empty context"):
        read_examples(write_squad(tmp_path / "s.json", [{"context": "", "qas": [{"id": "x", "question": "q",
                                                                                 "answers": []}]}]))


def test_detect_language():
    assert detect_language(["云石镇位于福建省，建于1176年。CEO是Ann。"]) == "zh"
    assert detect_language(["Greyfold was founded in 1937 by 王芳."]) == "en"


def test_window_settings_that_would_panic_the_tokenizer_are_refused(en_tokenizer):
    expected = (r"data\.doc_stride=40 must be less than data\.max_length=48 minus 16 question tokens minus 3 special "
                r"tokens = 29")
    with pytest.raises(BertkitError, match=expected):
        check_window_settings(max_length=48, doc_stride=40, question_tokens=16)
    check_window_settings(max_length=48, doc_stride=28, question_tokens=16)
    question = "one two three four five six seven eight nine ten"  # 10 tokens: room 48 - 10 - 3 = 35
    with pytest.raises(BertkitError, match=r"minus 10 question tokens minus 3 special tokens = 35"):
        encode(en_tokenizer, [example("a b c", question=question)], max_length=48, doc_stride=35)
    assert len(encode(en_tokenizer, [example("a b c", question=question)], max_length=48, doc_stride=34)) == 1


# ------------------------------------------------------------------------------------------------ windows and spans


WORDS = ("apple river stone cloud grass house table chair light water bread music paper glass green horse money "
         "night plant train sugar dream field metal smoke north south").split()


def test_answer_straddling_two_windows_is_found_through_the_window_holding_it_whole(en_tokenizer):
    context = " ".join(WORDS)  # every word is one token
    assert len(en_tokenizer.tokenize(context)) == len(WORDS)
    answer = " ".join(WORDS[16:20])  # context tokens 16..19
    windows = encode(en_tokenizer, [example(context, answer)], max_length=24, doc_stride=8)
    # [CLS] q ? [SEP] + 19 context tokens + [SEP]; the next window restarts 8 tokens back, at context token 11 (music)
    first_context = [[span for span in offsets if span] for offsets in windows.offsets]
    assert [(context[w[0][0]:w[-1][1]].split()[0], len(w)) for w in first_context] == [("apple", 19), ("music", 16)]
    assert (windows.inputs["start_positions"][0], windows.inputs["end_positions"][0]) == (0, 0)  # cut: [CLS]
    start, end = windows.inputs["start_positions"][1], windows.inputs["end_positions"][1]
    offsets = windows.offsets[1]
    assert context[offsets[start][0]:offsets[end][1]] == answer
    # window 0 can only offer the part inside it; window 1 holds the whole answer and scores higher
    logits = [np.zeros(len(o)) for o in windows.offsets], [np.zeros(len(o)) for o in windows.offsets]
    w0_start = windows.offsets[0].index((context.index(answer), context.index(answer) + len(WORDS[16])))
    logits[0][0][w0_start], logits[1][0][len(windows.offsets[0]) - 2] = 3.0, 3.0  # partial span in window 0
    logits[0][1][start], logits[1][1][end] = 4.0, 4.0
    assert candidate_spans(logits[0][0], logits[1][0], windows.offsets[0])[0].score == 6.0
    prediction = postprocess(*logits, windows, [example(context, answer)])[0]
    assert (prediction.text, prediction.score) == (answer, 8.0)
    assert prediction.start == context.index(answer) and prediction.end == prediction.start + len(answer)


def test_best_span_is_chosen_across_windows_and_null_is_the_minimum():
    context = "aaa bbb ccc ddd"
    spans = [None, (0, 3), (4, 7), (8, 11), (12, 15), None]
    windows = [(np.array([1.0, 2, 0, 0, 0, 0]), np.array([1.0, 2, 0, 0, 0, 0]), spans),  # aaa: 4
               (np.array([0.5, 0, 0, 5, 0, 0]), np.array([0.5, 0, 0, 0, 4, 0]), spans),  # ccc ddd: 9
               (np.array([3.0, 0, 3, 0, 0, 0]), np.array([3.0, 0, 3, 0, 0, 0]), spans)]  # bbb: 6
    prediction = best_prediction(windows, context)
    assert (prediction.text, prediction.start, prediction.end, prediction.score) == ("ccc ddd", 8, 15, 9.0)
    assert prediction.null_score == 1.0  # min over windows of start[0] + end[0]


def test_window_spans_skip_outside_context_reversed_and_too_long():
    spans = [None, None, (0, 3), (4, 7), (8, 11), (12, 15), None]  # [CLS] question-token ctx ctx ctx ctx [SEP]
    start = np.array([0.0, 9.0, 1.0, 0.0, 2.0, 0.0, 9.0])  # the 9.0s sit on non-context tokens: never used
    end = np.array([0.0, 9.0, 0.0, 3.0, 0.5, 1.0, 9.0])
    got = [(s.start, s.end, s.score) for s in candidate_spans(start, end, spans, n_best=20, max_answer_length=2)]
    # every start <= end pair of at most 2 tokens, best first; (tok 4 -> tok 3) is reversed, tok 2 -> tok 4 too long
    assert got == [(0, 7, 4.0), (4, 7, 3.0), (8, 15, 3.0), (8, 11, 2.5), (0, 3, 1.0), (12, 15, 1.0), (4, 11, 0.5)]
    # n_best=1: the best start (tok 4) and best end (tok 3) make a reversed span, so nothing is left
    assert candidate_spans(start, end, spans, n_best=1) == []
    got = [(s.start, s.end, s.score) for s in candidate_spans(start, end, spans, n_best=2)]
    assert got == [(0, 7, 4.0), (8, 15, 3.0), (0, 15, 2.0)]


def test_max_answer_length_is_respected_exactly():
    spans = [None, (0, 1), (2, 3), (4, 5), (6, 7), None]
    start, end = np.array([0, 5.0, 0, 0, 0, 0]), np.array([0, 0, 0, 0, 5.0, 0])  # best pair spans 4 tokens
    assert [(s.start, s.end) for s in candidate_spans(start, end, spans, max_answer_length=4)][0] == (0, 7)
    longest = max(s.end - s.start for s in candidate_spans(start, end, spans, max_answer_length=3))
    assert longest == 5  # 3 tokens: (0,1)..(4,5)
    assert (0, 7) not in [(s.start, s.end) for s in candidate_spans(start, end, spans, max_answer_length=3)]


def test_null_answer_against_threshold_on_both_sides():
    prediction = Prediction("1937", 10, 14, score=5.0, null_score=7.0)  # null beats the span by 2
    assert prediction.decide(1.9) == ("", None, None, 7.0)
    assert prediction.decide(2.1) == ("1937", 10, 14, 5.0)
    assert prediction.decide(None) == ("1937", 10, 14, 5.0)  # v1 model: always answers
    assert Prediction("", None, None, float("-inf"), 1.0).decide(None)[0] == ""  # no valid span at all


def test_tune_null_threshold_exact():
    # null iff margin > t. Candidates -4, -2, 0.5, 3, 5 give F1 .25, .5, .625, .375, .625: the tie goes to 0.5
    threshold, f1 = tune_null_threshold([-3, -1, 2, 4], [1, 0.5, 0, 1], [0, 0, 1, 0])
    assert (threshold, f1) == (0.5, 0.625)
    assert tune_null_threshold([float("inf"), 1.0], [0, 1], [1, 0]) == (2.0, 1.0)  # no span -> always null
    assert tune_null_threshold([1.0, 3.0], [0, 0], [1, 1])[0] == 0.0  # all null is best: below every margin


ENGLISH = "Dr. O'Neil's café (est. 1890) sells \"crème brûlée\" for $9,000.50—really! Ask Ms. Lee-Park, e.g. at 9am."
ENGLISH_ANSWERS = ["O'Neil's café", "1890", "\"crème brûlée\"", "$9,000.50", "Lee-Park", "9am", "Dr."]
CHINESE = "华为公司成立于1987年，总部位于深圳。CEO是任正非，员工约19.5万人。iPhone不是它的产品！《三体》很好看。"
CHINESE_ANSWERS = ["1987年", "深圳", "任正非", "19.5万人", "iPhone", "《三体》", "CEO"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_offsets_map_answers_back_to_the_exact_original_characters(lang, en_tokenizer):
    tokenizer, context, answers = ((en_tokenizer, ENGLISH, ENGLISH_ANSWERS) if lang == "en" else
                                   (chinese_bert_tokenizer(), CHINESE, CHINESE_ANSWERS))
    examples = [example(context, answer, qid=str(i)) for i, answer in enumerate(answers)]
    windows = encode(tokenizer, examples, max_length=128, doc_stride=32)
    assert len(windows) == len(examples)  # one window each
    for w, ex in enumerate(examples):
        s, e = windows.inputs["start_positions"][w], windows.inputs["end_positions"][w]
        assert s > 0, ex.answers
        offsets = windows.offsets[w]
        assert context[offsets[s][0]:offsets[e][1]] == ex.answers[0]["text"]
        start_logits, end_logits = np.zeros(len(offsets)), np.zeros(len(offsets))
        start_logits[s], end_logits[e] = 10.0, 10.0
        prediction = best_prediction([(start_logits, end_logits, offsets)], context)
        assert prediction.text == ex.answers[0]["text"]
        assert context[prediction.start:prediction.end] == prediction.text


def test_unanswerable_and_uncontained_windows_point_at_cls(en_tokenizer):
    assert answer_token_span([None, (0, 3), (4, 7), None], 4, 7) == (2, 2)
    assert answer_token_span([None, (0, 3), (4, 7), None], 4, 9) == (0, 0)  # answer runs past the window
    windows = encode(en_tokenizer, [example(" ".join(WORDS))], max_length=24, doc_stride=8)
    assert set(windows.inputs["start_positions"]) == {0} and set(windows.inputs["end_positions"]) == {0}


# ------------------------------------------------------------------------------------------------ saved settings


def test_settings_come_from_the_saved_task_settings():
    config = transformers.BertConfig(max_position_embeddings=128)
    config.bertkit_task_settings = settings_dict(Settings(max_length=96, doc_stride=24))
    assert read_settings(Settings, config, "config.json") == Settings(96, 24)
    config.bertkit_task_settings = {"max_length": "long"}
    with pytest.raises(BertkitError, match="bertkit_task_settings.max_length"):
        read_settings(Settings, config, "config.json")
    with pytest.raises(BertkitError, match="bertkit_task_settings.doc_stride=200"):
        Settings(max_length=96, doc_stride=200).check()


# ------------------------------------------------------------------------------------------------ end to end


def run_overrides(model_dir, train, dev, output_dir, *extra):
    return [f"model={model_dir}", f"data.train={train}", f"data.eval={dev}", f"output_dir={output_dir}",
            "precision=fp32", "data.max_length=64", "data.doc_stride=16", "data.max_question_length=16",
            "train.num_train_epochs=1", "train.per_device_train_batch_size=8", "train.learning_rate=1.0e-3",
            "train.logging_steps=2", "llrd=0.9", *extra]


@pytest.fixture(scope="module")
def en_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("qa-en")
    train = write_squad(root / "train.json", [en_paragraph(i, long=i % 2 == 0) for i in range(6)])
    dev_rows = [{"id": qa["id"], "question": qa["question"], "context": p["context"],
                 "answers": {"text": [a["text"] for a in qa["answers"]],
                             "answer_start": [a["answer_start"] for a in qa["answers"]]}}
                for p in (en_paragraph(i, long=i % 2 == 0) for i in range(6, 9)) for qa in p["qas"]]
    return {"train": train, "dev": write_jsonl(root / "dev.jsonl", dev_rows), "dev_rows": dev_rows}


def test_cli_run_predict_evaluate_agree(tiny_model_dir, en_data, tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", "qa", *run_overrides(tiny_model_dir, en_data["train"], en_data["dev"], out,
                                                             "keep_checkpoints=true")])  # read below
    assert result.exit_code == 0, result.output
    for name in ("model.safetensors", "config.json", "tokenizer.json", "metrics.json", "training_curve.png",
                 "bertkit_config.yaml", "README.md", "dev_predictions.jsonl"):
        assert (out / name).exists(), name
    config = json.loads((out / "config.json").read_text())
    metrics = json.loads((out / "metrics.json").read_text())
    saved = config[SETTINGS_KEY]
    assert saved["null_threshold"] == metrics["null_threshold"] == metrics["eval"]["null_threshold"]
    assert saved["language"] == "en" and saved["max_length"] == 64 and saved["doc_stride"] == 16
    assert {"exact_match", "f1", "HasAns_f1", "NoAns_f1", "f1_threshold_0"} <= set(metrics["eval"])
    assert metrics["windows"]["dev"] > len(en_data["dev_rows"])  # the long contexts were windowed
    # the per-epoch eval inside Trainer (compute_metrics over examples) agrees with the final evaluation
    state = json.loads(next(out.glob("checkpoint-*/trainer_state.json")).read_text())
    epoch_eval = [entry for entry in state["log_history"] if "eval_f1" in entry][-1]
    assert epoch_eval["eval_f1"] == pytest.approx(metrics["eval"]["f1"])
    assert epoch_eval["eval_null_threshold"] == pytest.approx(metrics["null_threshold"])
    assert type(transformers.AutoModelForQuestionAnswering.from_pretrained(out)) is \
        transformers.BertForQuestionAnswering

    questions = write_jsonl(tmp_path / "q.jsonl", [{"question": r["question"], "context": r["context"]}
                                                   for r in en_data["dev_rows"]])
    predictions_file = tmp_path / "predictions.jsonl"
    result = runner.invoke(app, ["predict", str(out), questions, "-o", str(predictions_file)])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in predictions_file.read_text().splitlines()]
    assert len(records) == len(en_data["dev_rows"]) and records[0]["id"] == "q-0"
    qa = load_predictor(str(out))
    assert (qa.settings.max_length, qa.settings.doc_stride, qa.settings.null_threshold) == (64, 16,
                                                                                          saved["null_threshold"])
    spans = predict_examples(qa, read_examples(questions, require_answers=False)[0])
    for record, row, span in zip(records, en_data["dev_rows"], spans):
        assert set(record) == {"id", "question", "answer", "start", "end", "score", "null_score"}
        assert row["context"][span.start:span.end] == span.text != ""  # every question has a best span ...
        if span.null_margin > qa.settings.null_threshold:  # ... which the null answer beats by more than the threshold
            assert (record["answer"], record["start"], record["score"]) == ("", None, record["null_score"])
        else:
            assert (record["answer"], record["start"], record["end"]) == (span.text, span.start, span.end)
    metrics_file = tmp_path / "eval.json"
    result = runner.invoke(app, ["evaluate", str(out), en_data["dev"], "-o", str(metrics_file)])
    assert result.exit_code == 0, result.output
    evaluated = json.loads(metrics_file.read_text())
    expected = SquadMetric().compute(predictions=[r["answer"] for r in records],
                                     references=[r["answers"]["text"] for r in en_data["dev_rows"]], lang="en")
    assert evaluated["exact_match"] == pytest.approx(expected["exact_match"])
    assert evaluated["f1"] == pytest.approx(expected["f1"])
    # the run's final dev metrics were scored at the threshold it saved: evaluate reproduces them
    assert evaluated["f1"] == pytest.approx(metrics["eval"]["f1"])
    assert {"HasAns_exact", "NoAns_exact"} <= set(evaluated)

    bad = write_jsonl(tmp_path / "bad.jsonl", [{"id": "a", "question": "Who?", "context": ""}])
    result = runner.invoke(app, ["predict", str(out), bad, "-o", str(tmp_path / "p.jsonl")])
    assert result.exit_code == 2 and "line 1 (id a) has an empty context" in result.output


def zh_rows(start: int, count: int) -> list[dict]:
    towns, foods = ["云石镇", "金溪镇", "青山村", "白沙镇", "东湖乡", "南岭镇"], ["米粉", "烧饼", "豆腐", "汤圆"]
    rows = []
    for i in range(start, start + count):
        town, food, year = towns[i % len(towns)], foods[i % len(foods)], 1100 + 13 * i
        context = f"{town}位于福建省，始建于{year}年。镇上的老街很热闹，每天都有人来往。当地最有名的小吃是{food}。"
        rows.append({"id": f"{i}-y", "question": f"{town}始建于哪一年？", "context": context,
                     "answers": [{"text": f"{year}年", "answer_start": context.index(f"{year}年")}]})
        rows.append({"id": f"{i}-f", "question": f"{town}最有名的小吃是什么？", "context": context,
                     "answers": [{"text": food, "answer_start": context.index(food)}]})
        rows.append({"id": f"{i}-n", "question": f"{town}的镇长是谁？", "context": context, "answers": []})
    return rows


def test_chinese_run_through_main_scores_characters(tiny_zh_model_dir, tmp_path):
    train = write_jsonl(tmp_path / "train.jsonl", zh_rows(0, 6))
    dev = write_jsonl(tmp_path / "dev.jsonl", zh_rows(6, 3))
    module = load_recipe("qa")
    out = tmp_path / "run"
    results = module.main(load_config(module.Config, None, run_overrides(tiny_zh_model_dir, train, dev, out)))
    assert results["language"] == "zh" and results["null_threshold"] is not None
    assert {"exact_match", "f1", "HasAns_f1", "NoAns_f1"} <= set(results["eval"])
    config = json.loads((out / "config.json").read_text())
    assert config[SETTINGS_KEY]["language"] == "zh" and config["vocab_size"] == 21128
    contexts = {r["id"]: r["context"] for r in zh_rows(6, 3)}
    for line in (out / "dev_predictions.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["answer"]:
            assert contexts[record["id"]][record["start"]:record["end"]] == record["answer"]
    assert "language: zh" in (out / "bertkit_config.yaml").read_text(encoding="utf-8")


def test_lora_on_v1_data_saves_a_merged_model_without_null_threshold(tiny_model_dir, tmp_path):
    paragraphs = [{"context": p["context"], "qas": [qa for qa in p["qas"] if not qa["is_impossible"]]}
                  for p in (en_paragraph(i, long=False) for i in range(4))]
    data = write_squad(tmp_path / "v1.json", paragraphs, "1.1")
    out = tmp_path / "run"
    module = load_recipe("qa")
    results = module.main(load_config(module.Config, None, run_overrides(tiny_model_dir, data, data, out,
                                                                         "lora.enabled=true", "lora.r=4")))
    assert results["null_threshold"] is None and "NoAns_f1" not in results["eval"]
    assert json.loads((out / "config.json").read_text())[SETTINGS_KEY]["null_threshold"] is None
    weights = load_file(out / "model.safetensors")
    assert "qa_outputs.weight" in weights and not any("lora" in name for name in weights)


def bad_answer_data(tmp_path) -> str:
    """Four paragraphs, one of whose answers is not in its context at all (its question is skipped)."""
    paragraphs = [{"context": p["context"], "qas": [qa for qa in p["qas"] if not qa["is_impossible"]]}
                  for p in (en_paragraph(i, long=False) for i in range(4))]
    paragraphs[1]["qas"][0]["answers"] = [{"text": "Atlantis", "answer_start": 3}]
    return write_squad(tmp_path / "bad.json", paragraphs, "1.1")


def test_dropped_questions_are_counted_in_the_summary_and_metrics(tiny_model_dir, tmp_path):
    data = bad_answer_data(tmp_path)
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", "qa", *run_overrides(tiny_model_dir, data, data, out)])
    assert result.exit_code == 0, result.output
    assert "train questions skipped" in " ".join(result.output.split())
    questions = json.loads((out / "metrics.json").read_text())["questions"]
    assert questions["train"]["skipped_questions"] == questions["dev"]["skipped_questions"] == 1
    assert questions["train"]["dropped_answers"] == 1 and questions["train"]["questions"] == 7


def test_strict_mode_refuses_answers_not_in_their_context(tiny_model_dir, tmp_path):
    data = bad_answer_data(tmp_path)
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", "qa", *run_overrides(tiny_model_dir, data, data, out), "data.strict=true"])
    assert result.exit_code == 2
    message = " ".join(result.output.split())
    assert "1 answers are not at their answer_start" in message and "'Atlantis' at 3" in message
    assert "data.strict=false" in message and not (out / "model.safetensors").exists()
