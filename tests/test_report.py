"""report.html: built for a classify, a Chinese NER and a QA run (tiny models, the shipped samples), one file under
3 MB with every section, no URL to load, non-empty figures, user text escaped, Chinese as UTF-8; rewritten live at
each evaluation; `bertkit report A B` compares; a directory that is not a finished run is one line, exit 2. With a
headless Chromium on the machine, each report is also opened, screenshot at phone width, and checked to make no
network request."""

import csv
import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bertkit import report, report_html
from bertkit.cli import app, load_recipe
from bertkit.config import load_config
from helpers import one_line_error

pytestmark = pytest.mark.usefixtures("one_thread")
runner = CliRunner()
DATA = Path(__file__).resolve().parent.parent / "data"
SCRIPT = "<script>alert('x')</script>"
MAX_BYTES = 3 * 2**20
COMMON = ["The answer", "Training curves", "Diagnosis", "Settings that differ from the defaults",
          "Model, versions, time"]
SECTIONS = {"classify": ["The data", "Per-class precision, recall and F1", "Confusion matrix",
                         "Confidently wrong on dev"],
            "ner": ["The data", "F1 per entity type", "Dev sentences"],
            "qa": ["Dev questions", "EM and F1 by answer length"], "choice": ["Dev questions and options"],
            "mlm": ["Perplexity", "Fill-mask examples"]}


def run_recipe(recipe: str, overrides: list[str], reader=None):
    module = load_recipe(recipe)
    if reader is None:
        return module.main(load_config(module.Config, None, overrides))
    write = report.ReportCallback.on_evaluate

    def write_then_read(callback, args, state, control, **kwargs):  # the run's own ReportCallback, then a look
        write(callback, args, state, control, **kwargs)
        reader.on_evaluate(args, state, control)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(report.ReportCallback, "on_evaluate", write_then_read)
        return module.main(load_config(module.Config, None, overrides))


def common(model, train, dev, out, *extra):
    return [f"model={model}", f"data.train={train}", f"data.eval={dev}", f"output_dir={out}", "precision=fp32",
            "train.per_device_train_batch_size=8", "train.logging_steps=2", *extra]


def head_csv(source: Path, target: Path, rows: int, extra: list[list[str]] = ()) -> str:
    with source.open(encoding="utf-8") as handle:
        table = list(csv.reader(handle))
    with target.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([*table[: rows + 1], *extra])
    return str(target)


class ReadReportMidRun:
    """Registered after ReportCallback: reads report.html at each evaluation, while training goes on."""

    def __init__(self, path: Path):
        self.path, self.seen = path, []

    def __getattr__(self, name):  # every other TrainerCallback event: nothing to do
        if name.startswith("on_"):
            return lambda *args, **kwargs: None
        raise AttributeError(name)

    def on_evaluate(self, args, state, control, **kwargs):
        self.seen.append((state.global_step, self.path.read_text(encoding="utf-8")))


@pytest.fixture(scope="module")
def classify_run(tiny_model_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("report-classify")
    # the same text under both labels: whatever the model predicts, one of them is a wrong dev example to show
    bad = [[f"{SCRIPT} a film & its <b>cast</b> were great", label] for label in ("positive", "negative")]
    train = head_csv(DATA / "en_sentiment" / "train.csv", root / "train.csv", 48, bad)
    dev = head_csv(DATA / "en_sentiment" / "dev.csv", root / "dev.csv", 8, bad)  # every wrong one shown
    out = root / "run"
    reader = ReadReportMidRun(out / report.REPORT_FILE)
    run_recipe("classify", common(tiny_model_dir, train, dev, out, "data.max_length=32", "train.num_train_epochs=2",
                                  "train.learning_rate=1.0e-3"), reader)
    final = out / report.REPORT_FILE  # written by the run itself, when it ends
    return {"out": out, "train": train, "dev": dev, "seen": reader.seen, "report": final}


@pytest.fixture(scope="module")
def ner_run(tiny_zh_model_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("report-ner")
    lines = (DATA / "ner" / "zh" / "dev.jsonl").read_text(encoding="utf-8").splitlines()
    train, dev = root / "train.jsonl", root / "dev.jsonl"
    train.write_text("\n".join((DATA / "ner" / "zh" / "train.jsonl").read_text(encoding="utf-8").splitlines()[:60])
                     + "\n", encoding="utf-8")
    dev.write_text("\n".join(lines[:16]) + "\n", encoding="utf-8")
    out = root / "run"
    run_recipe("ner", common(tiny_zh_model_dir, train, dev, out, "data.split=chars", "data.max_length=24",
                             "data.stride=6", "train.num_train_epochs=2", "train.learning_rate=5.0e-3"))
    return {"out": out, "report": report.write_report(out), "dev": dev}


@pytest.fixture(scope="module")
def qa_run(tiny_model_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("report-qa")
    files = {}
    for name, articles in (("train", 6), ("dev", 3)):
        whole = json.loads((DATA / "qa" / "en" / f"{name}.json").read_text(encoding="utf-8"))
        whole["data"] = whole["data"][:articles]
        files[name] = root / f"{name}.json"
        files[name].write_text(json.dumps(whole), encoding="utf-8")
    out = root / "run"
    run_recipe("qa", common(tiny_model_dir, files["train"], files["dev"], out, "data.max_length=64",
                            "data.doc_stride=16", "data.max_question_length=16", "train.num_train_epochs=1",
                            "train.learning_rate=1.0e-3"))
    return {"out": out, "report": report.write_report(out)}


def head_lines(source: Path, target: Path, start: int, stop: int) -> str:
    lines = source.read_text(encoding="utf-8").splitlines()[start:stop]
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(target)


@pytest.fixture(scope="module")
def choice_run(tiny_model_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("report-choice")
    train = head_lines(DATA / "choice" / "en" / "train.jsonl", root / "train.jsonl", 0, 24)
    dev = head_lines(DATA / "choice" / "en" / "dev.jsonl", root / "dev.jsonl", 0, 8)
    out = root / "run"
    run_recipe("choice", common(tiny_model_dir, train, dev, out, "data.max_length=48", "train.num_train_epochs=1",
                                "train.learning_rate=1.0e-3"))
    return {"out": out, "report": out / report.REPORT_FILE}


@pytest.fixture(scope="module")
def mlm_run(tiny_model_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("report-mlm")
    corpus = DATA / "corpus" / "en_medical.txt"
    train, dev = head_lines(corpus, root / "train.txt", 0, 200), head_lines(corpus, root / "dev.txt", 200, 260)
    out = root / "run"
    run_recipe("mlm", common(tiny_model_dir, train, dev, out, "data.max_length=64", "train.max_steps=6",
                             "train.eval_strategy=steps", "train.eval_steps=3", "train.save_strategy=steps",
                             "train.save_steps=3", "train.learning_rate=1.0e-3"))
    return {"out": out, "report": out / report.REPORT_FILE}


def check_page(path: Path, sections: list[str]) -> str:
    """The checks every report passes; returns its text."""
    assert path.is_file() and path.stat().st_size < MAX_BYTES
    text = path.read_bytes().decode("utf-8")  # UTF-8 through and through
    assert text.startswith("<!DOCTYPE html>") and '<meta charset="utf-8">' in text
    assert 'name="viewport"' in text and "Noto Sans CJK SC" in text and "Microsoft YaHei" in text
    for heading in sections:
        assert f">{heading}</h" in text, heading
    # nothing to load: no src / href / url() at all, no script; the only URL is the SVG namespace (never fetched)
    assert not re.search(r"\b(src|href)\s*=", text, re.I) and "url(" not in text and "<script" not in text
    assert "@import" not in text
    assert not re.findall(r"https?://(?!www\.w3\.org/2000/svg\")", text)
    for svg in re.findall(r"<svg\b.*?</svg>", text, re.S):  # each figure draws something
        assert re.search(r"<(polyline|rect|circle|line)\b", svg) and len(svg) > 300, svg[:200]
    assert text.count("<svg") == text.count("</svg>") >= 2
    return text


def test_classify_report_has_every_section_and_escapes_user_text(classify_run):
    text = check_page(classify_run["report"], COMMON + SECTIONS["classify"])
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in text
    assert "<b>cast</b>" not in text and "&lt;b&gt;cast&lt;/b&gt;" in text
    assert "dev macro_f1 = " in text and "best evaluation" in text and "learning rate" in text
    assert "chance (macro F1 of always answering the majority class)" in text
    assert 'aria-label="confusion matrix"' in text and 'aria-label="per-class scores"' in text
    assert "train.num_train_epochs" in text  # a setting that differs from the recipe's defaults
    assert "live:" not in text  # the final report, not the live one
    # the data: labels of both splits, lengths against max_length, and the text planted in train and dev under
    # both labels (a duplicate with conflicting labels, and a leak into dev)
    assert 'aria-label="rows per label (share of the split)"' in text
    assert re.search(r"max_length 32: \d+\.\d% of training texts truncated", text)
    data = text.split(">The data</h2>")[1].split("<h2")[0]
    assert "<td>train</td><td>50</td><td>0</td><td>1</td><td>1</td>" in data
    assert re.search(r"[1-9]\d* dev row\(s\) have a text that is also in train", data)
    assert "trained on" in text and " cores, torch threads " in text  # the hardware, from the completion record
    card = (classify_run["out"] / "README.md").read_text()
    assert "![Confusion matrix on dev](confusion_matrix.png)" in card  # the Hub shows images, not report.html
    assert (classify_run["out"] / "confusion_matrix.png").read_bytes()[:4] == b"\x89PNG"


def test_evaluate_on_a_test_file_joins_the_report_and_keeps_the_run_whole(classify_run, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(classify_run["out"], run)
    result = runner.invoke(app, ["evaluate", str(run), classify_run["dev"]])
    assert result.exit_code == 0, result.output
    assert f"added to {run / report.REPORT_FILE}" in result.output
    # one record per file (its name and a hash of its path: rundir.py), holding the path as given and resolved
    saved = json.loads(report.evaluation_record_path(run, classify_run["dev"]).read_text())
    assert saved["file"] == str(Path(classify_run["dev"]).resolve()) and "accuracy" in saved["metrics"]
    assert saved["given"] == str(classify_run["dev"])
    text = check_page(run / report.REPORT_FILE, COMMON + SECTIONS["classify"] + ["Evaluations on other files"])
    assert f"<td>{saved['given']}</td>" in text
    predicted = runner.invoke(app, ["predict", str(run), classify_run["dev"], "-o", str(tmp_path / "p.jsonl")])
    assert predicted.exit_code == 0, predicted.output  # the run is still whole: the record does not list them
    from bertkit.rundir import old_run_files

    assert run / "evaluations" in old_run_files(run)[1]  # overwrite=true takes the old run's evaluations with it


def test_ner_report_shows_spans_in_chinese(ner_run):
    text = check_page(ner_run["report"], COMMON + SECTIONS["ner"])
    first = json.loads(ner_run["dev"].read_text(encoding="utf-8").splitlines()[0])["text"]
    assert re.sub(r"<[^>]+>", "", first) and any(ch in text for ch in first if "\u4e00" <= ch <= "\u9fff")
    assert '<mark class="gold">' in text and "gold:" in text and "predicted (" in text
    assert 'aria-label="per-type scores"' in text
    assert 'aria-label="entities per label (share of the split)"' in text and "of training sentences take 2+" in text
    assert (ner_run["out"] / "entity_f1.png").is_file() and "![F1 per entity type on dev](entity_f1.png)" in \
        (ner_run["out"] / "README.md").read_text()


def test_qa_report_marks_gold_and_predicted_answers(qa_run):
    text = check_page(qa_run["report"], COMMON + SECTIONS["qa"])
    assert '<mark class="gold">' in text and "EM " in text and "gold answer length" in text
    assert "dev f1 = " in text


def test_choice_report_marks_gold_and_chosen_options(choice_run):
    text = check_page(choice_run["report"], COMMON + SECTIONS["choice"])
    assert "chance (picking an option at random)" in text
    assert re.search(r"\d+ of 8 dev questions answered wrongly", text) and "✅" in text and "👉" in text
    first = json.loads((DATA / "choice" / "en" / "dev.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert html.escape(first["options"][0], quote=True) in text


def test_mlm_report_shows_perplexity_before_and_after_and_fill_mask(mlm_run):
    text = check_page(mlm_run["report"], COMMON + SECTIONS["mlm"])
    metrics = json.loads((mlm_run["out"] / "metrics.json").read_text())
    assert "<td>before training</td>" in text and "<td>after training</td>" in text
    assert report_html.fmt(metrics["eval"]["perplexity"]) in text
    assert "hidden: " in text and "[MASK]" in text  # held-out lines with a word hidden, and the model's guesses


def test_report_is_rewritten_at_each_evaluation(classify_run):
    seen = classify_run["seen"]
    assert len(seen) == 2  # two epochs, one evaluation each
    (first_step, first), (second_step, second) = seen
    assert first_step < second_step
    assert "live: rewritten at each evaluation" in first and f"at step {first_step} of {second_step}" in first
    assert f"at step {second_step} of {second_step}" in second and first != second
    assert "the dev examples need the final model" in first
    check_page(classify_run["out"] / report.REPORT_FILE, COMMON)


def test_a_report_that_cannot_be_written_is_one_warning_not_a_failure(tmp_path, monkeypatch):
    import bertkit.console

    said = []
    monkeypatch.setattr(bertkit.console, "warn", said.append)
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    callback = report.ReportCallback(blocked / "run")  # a run directory that cannot exist

    class Args:
        metric_for_best_model, greater_is_better = "eval_accuracy", True

    class State:
        is_world_process_zero, global_step, max_steps, log_history = True, 3, 6, [{"loss": 1.0, "step": 2}]

    callback.on_evaluate(Args(), State(), None)
    callback.on_evaluate(Args(), State(), None)  # said once
    assert len(said) == 1 and said[0].startswith("report.html not written (") and "training goes on" in said[0]


def test_the_end_of_run_write_never_fails_the_run(tmp_path, monkeypatch):
    import bertkit.console

    said = []
    monkeypatch.setattr(bertkit.console, "warn", said.append)
    (tmp_path / "file").write_text("x")
    assert report.write_report_quietly(tmp_path / "file" / "run") is None
    assert len(said) == 1 and "bertkit report" in said[0]


def test_highlighted_spans_escape_the_text_around_and_inside_them():
    marked = report_html.highlight("<b>张三</b> & co", [(3, 5, "gold", "PER<x>"), (0, 2, "pred", "X")])
    assert marked == ('<mark class="pred">&lt;b<span class="tag">X</span></mark>&gt;<mark class="gold">张三<span '
                      'class="tag">PER&lt;x&gt;</span></mark>&lt;/b&gt; &amp; co')


def test_cli_rebuilds_a_report_and_compares_runs(classify_run, tiny_model_dir, tmp_path, monkeypatch):
    out = classify_run["out"]
    (out / report.REPORT_FILE).unlink()
    result = runner.invoke(app, ["report", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"wrote {out / report.REPORT_FILE}"
    check_page(out / report.REPORT_FILE, COMMON + SECTIONS["classify"])

    other = tmp_path / "other"
    run_recipe("classify", common(tiny_model_dir, classify_run["train"], classify_run["dev"], other,
                                  "data.max_length=32", "train.num_train_epochs=1", "train.learning_rate=3.0e-3"))
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["report", str(out), str(other)])
    assert result.exit_code == 0, result.output
    page = tmp_path / report.COMPARE_FILE
    text = check_page(page, ["Metrics", "Curves overlaid", "Settings that differ",
                             "Dev examples predicted differently"])
    assert "train.learning_rate" in text and "train.num_train_epochs" in text
    assert "dev examples predicted differently" in text or "predict the same on all" in text
    # the comparison is never written into a run directory
    result = runner.invoke(app, ["report", str(out), str(other), "-o", str(out / "metrics.json")])
    one_line_error(result, 2, "run directory")


def test_a_comparison_lists_the_dev_examples_the_runs_predict_differently(classify_run, tmp_path):
    """The second run is the first with its two head rows swapped (re-recorded as a finished run): it predicts the
    other label for every dev text, so every one of them must be listed."""
    import shutil

    from safetensors.torch import load_file, save_file

    from bertkit import rundir

    flipped = tmp_path / "flipped"
    shutil.copytree(classify_run["out"], flipped)
    weights = load_file(flipped / "model.safetensors")
    for name in ("classifier.weight", "classifier.bias"):
        weights[name] = weights[name].flip(0).contiguous()
    save_file(weights, flipped / "model.safetensors", metadata={"format": "pt"})
    rundir.write_record(flipped, "classify")
    out = tmp_path / "compare.html"
    result = runner.invoke(app, ["report", str(classify_run["out"]), str(flipped), "-o", str(out)])
    assert result.exit_code == 0, result.output
    text = check_page(out, ["Dev examples predicted differently"])
    texts = {row[0] for row in csv.reader(open(classify_run["dev"], encoding="utf-8"))} - {"text"}
    assert f"{len(texts)} of {len(texts)} dev examples predicted differently" in text
    section = text.split(">Dev examples predicted differently</h2>")[1]
    assert section.count("<tr>") == len(texts) + 1  # the header and one row per text, each with both labels
    pairs = re.findall(r"<td>(positive|negative)</td><td>(positive|negative)</td></tr>", section)
    assert len(pairs) == len(texts) and all(first != second for first, second in pairs)


def test_not_a_run_or_unfinished_run_is_one_line_exit_2(classify_run, tmp_path):
    one_line_error(runner.invoke(app, ["report", str(tmp_path)]), 2, "not a bertkit run directory")
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    shutil.copy(classify_run["out"] / "bertkit_config.yaml", unfinished / "bertkit_config.yaml")
    one_line_error(runner.invoke(app, ["report", str(unfinished)]), 2, "unfinished")


def test_a_missing_file_drops_its_section_to_one_line(classify_run, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(classify_run["out"], copy, ignore=shutil.ignore_patterns("checkpoint-*"))
    for name in ("log_history.json", "confusion_matrix.json"):
        (copy / name).unlink()
    text = report.render(report.read_view(copy))
    assert "no log history" in text and "no confusion_matrix.json" in text


def test_push_uploads_the_report_and_the_card_links_it(classify_run):
    from bertkit.hub import select_files
    from bertkit.model_card import render_model_card

    out = classify_run["out"]
    files = select_files(out)
    assert report.REPORT_FILE in files and "confusion_matrix.png" in files and "training_curve.png" in files
    card = render_model_card(out)
    assert "[report.html](report.html)" in card and "![Confusion matrix on dev](confusion_matrix.png)" in card


# ------------------------------------------------------------------------------------------------ a real browser


# The browser's own traffic (updates, sync, spell-check dictionaries, field trials) is switched off, so that any
# request left in the net log is one the page made.
QUIET_BROWSER = ["--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--no-default-browser-check", "--disable-default-apps", "--disable-extensions", "--no-pings",
                 "--disable-client-side-phishing-detection", "--disable-domain-reliability", "--metrics-recording-only",
                 "--disable-features=Translate,OptimizationHints,MediaRouter,SpellcheckService,AutofillServerCommunication"
                 ",NetworkTimeServiceQuerying,CertificateTransparencyComponentUpdater"]


def chromium() -> str | None:
    return next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(name)), None)


def open_in_browser(page: Path, shot: Path, scratch: Path) -> tuple[list[str], list[str]]:
    """Open `page` in headless Chromium at phone width and screenshot it: (console messages, the URLs the page
    asked for). The net log names who started each request: the page's (from file://) have the initiator "null",
    the browser's own "not an origin"."""
    log = scratch / "netlog.json"
    result = subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=390,2400",
         *QUIET_BROWSER, f"--user-data-dir={scratch / 'profile'}", f"--screenshot={shot}", f"--log-net-log={log}",
         "--enable-logging=stderr", "--v=0", page.resolve().as_uri()], capture_output=True, text=True, timeout=120)
    assert shot.is_file() and shot.stat().st_size > 2000, result.stderr[-2000:]
    console = [line for line in result.stderr.splitlines() if re.search(r":CONSOLE[:(]", line)]
    text = log.read_text(encoding="utf-8", errors="replace").rstrip()
    netlog = json.loads(text if text.endswith("}") else text.rstrip(",") + "]}")  # a log cut at exit
    names = {number: name for name, number in netlog["constants"]["logEventTypes"].items()}
    requested = [event["params"]["url"] for event in netlog["events"]
                 if names.get(event["type"]) == "URL_REQUEST_START_JOB" and "url" in event.get("params", {})
                 and event["params"].get("initiator") != "not an origin"
                 and not event["params"]["url"].startswith("file:")]
    return console, requested


needs_browser = pytest.mark.skipif(chromium() is None, reason="no headless Chromium here (apt-get install chromium)")


@needs_browser
def test_the_browser_check_sees_requests_and_console_errors(tmp_path):
    page = tmp_path / "bad.html"
    page.write_text('<!DOCTYPE html><p>x</p><img src="https://example.invalid/a.png">'
                    '<script>throw new Error("boom")</script>', encoding="utf-8")
    console, requested = open_in_browser(page, tmp_path / "bad.png", tmp_path)
    assert requested == ["https://example.invalid/a.png"] and any("boom" in line for line in console)


@needs_browser
@pytest.mark.parametrize("run", ["classify_run", "ner_run", "qa_run", "choice_run", "mlm_run"])
def test_headless_browser_renders_without_network_or_errors(run, request, tmp_path):
    path = request.getfixturevalue(run)["report"]
    shot = path.parent / f"report-{run.removesuffix('_run')}.png"  # kept beside the run, to look at
    console, requested = open_in_browser(path, shot, tmp_path)
    assert console == [] and requested == []
