"""The few-shot recipe (`bertkit run fewshot`: SetFit through the setfit package) and its task room: a run on a few
rows saves SetFit's own folder, which stock `SetFitModel.from_pretrained` loads with the probabilities bertkit
predicts; predict, evaluate, serve, the report and the card take it as a classify run; bad input is one line; and
`bertkit run classify` / `bertkit inspect` point at it below the few-labels threshold and not above it."""

import csv
import json
from pathlib import Path

import httpx
import numpy as np
import pytest

from bertkit import tasks
from bertkit.inspection import FEW_PER_LABEL, few_labels_hint
from bertkit.tasks import fewshot
from helpers import run_in_process, write_csv
from test_hub import TOKEN, hub, make_hub, no_internet  # noqa: F401 - fixtures

ROOT = Path(__file__).resolve().parent.parent
EN = ROOT / "data" / "en_sentiment"
pytestmark = pytest.mark.usefixtures("one_thread")


def sample_rows(path: Path, per_label: int, offset: int = 0) -> list[list[str]]:
    """`per_label` rows of each label of a shipped CSV, skipping the first `offset` of each."""
    rows = list(csv.reader(path.open(encoding="utf-8")))[1:]
    chosen = []
    for label in sorted({label for _, label in rows}):
        chosen += [row for row in rows if row[1] == label][offset:offset + per_label]
    return chosen


@pytest.fixture(scope="module")
def run(tmp_path_factory, tiny_model_dir):
    """A fewshot run on 6 rows per label of the English sample (tiny random BERT body), with a dev split."""
    root = tmp_path_factory.mktemp("fewshot")
    train = write_csv(root / "train.csv", ["text", "label"], sample_rows(EN / "train.csv", 6))
    dev = write_csv(root / "dev.csv", ["text", "label"], sample_rows(EN / "dev.csv", 10))
    done = run_in_process("run", "fewshot", f"model={tiny_model_dir}", f"data.train={train}", f"data.eval={dev}",
                          f"output_dir={root / 'run'}", cwd=root)
    assert done.returncode == 0, done.stdout + done.stderr
    return {"dir": str(root / "run"), "train": train, "dev": dev, "root": root, "output": done.stdout + done.stderr}


def test_the_run_saves_setfit_s_folder_and_the_table_knows_it(run):
    folder = Path(run["dir"])
    assert (folder / fewshot.SETFIT_FILE).is_file() and (folder / fewshot.HEAD_FILE).is_file()
    assert tasks.task_of_model(run["dir"]) == "fewshot"
    config = json.loads((folder / "config.json").read_text())
    assert config["id2label"] == {"0": "negative", "1": "positive"}
    assert config[tasks.SETTINGS_KEY]["label_kind"] == "single"
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["method"] == "setfit" and 0 <= metrics["eval"]["accuracy"] <= 1
    assert "rows per label: negative 6, positive 6" in run["output"]
    assert "embedding_loss" not in run["output"] and "it/s]" not in run["output"]  # bertkit's lines only


def test_stock_setfit_loads_it_with_the_probabilities_bertkit_predicts(run):
    from setfit import SetFitModel

    texts = ["a warm, funny and moving film", "dull, slow and far too long", "it was fine"]
    stock = SetFitModel.from_pretrained(run["dir"]).predict_proba(texts, as_numpy=True)
    predictor = fewshot.load_predictor(run["dir"])
    temperature, predictor.temperature = predictor.temperature, None
    np.testing.assert_allclose(fewshot.predict_probabilities(predictor, texts), stock, atol=1e-6)
    if temperature:  # the calibrated probabilities: softmax(log p / T) of the same head's
        predictor.temperature = temperature
        expected = np.exp(np.log(stock) / temperature[0])
        np.testing.assert_allclose(fewshot.predict_probabilities(predictor, texts),
                                   expected / expected.sum(1, keepdims=True), atol=1e-5)


def test_predict_evaluate_and_serve_answer_as_for_classify(run, tmp_path):
    from test_serve import running

    texts = ["a warm, funny and moving film", "dull, slow and far too long"]
    inputs = write_csv(tmp_path / "in.csv", ["text"], [[t] for t in texts])
    done = run_in_process("predict", run["dir"], inputs, "-o", tmp_path / "out.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    written = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [sorted(r["probabilities"]) for r in written] == [["negative", "positive"]] * 2
    assert all(r["label"] == max(r["probabilities"], key=r["probabilities"].get) for r in written)
    done = run_in_process("evaluate", run["dir"], run["dev"], cwd=tmp_path)
    assert done.returncode == 0 and "accuracy" in done.stdout + done.stderr
    with running(run["dir"]) as (url, _):
        info = httpx.get(f"{url}/info").json()
        served = httpx.post(f"{url}/predict", json={"inputs": texts}, timeout=30).json()
        pair = httpx.post(f"{url}/predict", json={"inputs": [["a", "b"]]}, timeout=30)
    assert info["task"] == "fewshot" and info["labels"] == ["negative", "positive"]
    for mine, theirs in zip(served, written):
        assert mine["label"] == theirs["label"]
        assert all(abs(p - theirs["probabilities"][n]) < 1e-5 for n, p in mine["probabilities"].items())
    assert pair.status_code == 422 and "single texts" in pair.text


def test_diagnose_reads_its_curve_and_its_dev_labels(run, tmp_path):
    done = run_in_process("diagnose", run["dir"], cwd=tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 0 and "0 logged losses" not in output and "classify runs only" not in output, output
    assert (Path(run["dir"]) / "training_curve.png").is_file()


def test_the_report_and_the_card_are_the_few_shot_model_s(run):
    page = (Path(run["dir"]) / "report.html").read_text()
    assert "The task on dev (fewshot)" in page and "Confusion matrix" in page and "Confidently wrong" in page
    card = (Path(run["dir"]) / "README.md").read_text()
    assert "library_name: setfit" in card and "SetFitModel.from_pretrained" in card
    assert "| 1 | positive |" in card  # the label table reads the names the run saved


def test_a_multi_label_run_gets_one_vs_rest_heads_and_a_tuned_threshold(tmp_path, tiny_model_dir):
    rows = [["refund my order and fix the app", "billing;bug"], ["the app crashes on start", "bug"],
            ["charge me twice? refund please", "billing"], ["love the new colours", "praise"],
            ["crash when I pay, and I was charged", "billing;bug"], ["great support, thanks", "praise"],
            ["billing page is wrong", "billing"], ["button does nothing", "bug"], ["so smooth now", "praise"]]
    train = write_csv(tmp_path / "train.csv", ["text", "labels"], rows)
    done = run_in_process("run", "fewshot", f"model={tiny_model_dir}", f"data.train={train}", f"data.eval={train}",
                          "data.label_kind=multi", f"output_dir={tmp_path / 'run'}", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    predictor = fewshot.load_predictor(str(tmp_path / "run"))
    assert predictor.labels.kind == "multi" and predictor.labels.names == ["billing", "bug", "praise"]
    assert fewshot.predict_probabilities(predictor, ["my app crashed"]).shape == (1, 3)


@pytest.mark.parametrize("setting, rows, fragment", [
    ("pairs", [["a", "b", "x"], ["c", "d", "y"]], "second text column"),
    ("numbers", [["a", "1.5"], ["b", "2.5"], ["c", "0.5"]], "regression"),
])
def test_what_the_method_cannot_take_is_one_line(tmp_path, tiny_model_dir, setting, rows, fragment):
    header = ["text", "text_pair", "label"] if setting == "pairs" else ["text", "label"]
    train = write_csv(tmp_path / "train.csv", header, rows)
    done = run_in_process("run", "fewshot", f"model={tiny_model_dir}", f"data.train={train}",
                          f"output_dir={tmp_path / 'run'}", cwd=tmp_path)
    assert done.returncode == 2 and fragment in done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_the_onnx_export_holds_the_body_and_predicts_what_the_run_predicts(run, tmp_path):
    """`bertkit export`: the body's graph (pooling and normalisation inside) and SetFit's head beside it, checked
    against PyTorch as it is written; predict on the export writes the run's predictions."""
    pytest.importorskip("onnxruntime")
    export = tmp_path / "export"
    done = run_in_process("export", run["dir"], "-o", export, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((export / "onnx_export.json").read_text())
    assert summary["recipe"] == "fewshot" and summary["parity_max_abs_diff"]["probabilities"] < 1e-4
    assert "accuracy" in summary["dev"]["fp32"] and tasks.task_of_model(str(export)) == "fewshot"
    inputs = write_csv(tmp_path / "in.csv", ["text"], [["a warm, funny and moving film"], ["dull and slow"]])
    for source, out in ((run["dir"], "torch.jsonl"), (export, "onnx.jsonl")):
        done = run_in_process("predict", source, inputs, "-o", tmp_path / out, cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
    torch_rows, onnx_rows = ([json.loads(line) for line in (tmp_path / out).read_text().splitlines()]
                             for out in ("torch.jsonl", "onnx.jsonl"))
    for mine, theirs in zip(onnx_rows, torch_rows):
        assert mine["label"] == theirs["label"]
        assert all(abs(p - theirs["probabilities"][n]) < 1e-4 for n, p in mine["probabilities"].items())


def test_a_push_uploads_the_head_and_stock_setfit_loads_the_repo(run, hub, tmp_path):  # noqa: F811
    """The head is a pickle, which a push keeps back from any other folder: here the task names it."""
    from huggingface_hub import snapshot_download
    from setfit import SetFitModel

    done = run_in_process("push", run["dir"], "tester/few", "--token", TOKEN, "--endpoint", hub.endpoint,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    remote = set(hub.files("tester/few"))
    assert {fewshot.SETFIT_FILE, fewshot.HEAD_FILE, "modules.json", "1_Pooling/config.json", "README.md"} <= remote
    assert not any(name.endswith(".pkl") and name != fewshot.HEAD_FILE for name in remote)
    local = snapshot_download("tester/few", token=TOKEN, cache_dir=str(tmp_path / "cache"))
    texts = ["a warm, funny and moving film"]
    np.testing.assert_allclose(SetFitModel.from_pretrained(local).predict_proba(texts, as_numpy=True),
                               SetFitModel.from_pretrained(run["dir"]).predict_proba(texts, as_numpy=True), atol=1e-6)


def test_validate_lists_its_keys_and_refuses_what_setfit_cannot_do(tmp_path):
    done = run_in_process("validate", "fewshot", "--keys", cwd=tmp_path)
    assert done.returncode == 0 and "num_iterations" in done.stdout and "ok: fewshot config is valid" in done.stdout
    for key, fragment in (("resume=true", "keeps no checkpoints"), ("precision=bf16", "trains in fp32"),
                          ("batch_size=1", "batch_size")):
        done = run_in_process("validate", "fewshot", key, cwd=tmp_path)
        assert done.returncode == 2 and fragment in done.stdout + done.stderr, (key, done.stdout + done.stderr)


def test_the_hint_appears_below_the_threshold_and_not_above_it():
    below = few_labels_hint({"negative": FEW_PER_LABEL - 1, "positive": 500}, "few.csv", "dev.csv")
    assert below and "negative" in below and "bertkit run fewshot data.train=few.csv data.eval=dev.csv" in below
    assert few_labels_hint({"negative": FEW_PER_LABEL, "positive": 500}, "many.csv") is None


def test_classify_and_inspect_point_at_the_few_shot_recipe_with_few_labels(tmp_path, tiny_model_dir):
    few = write_csv(tmp_path / "few.csv", ["text", "label"], sample_rows(EN / "train.csv", 4))
    done = run_in_process("inspect", few, f"--model={tiny_model_dir}", cwd=tmp_path)
    assert "bertkit run fewshot data.train=" in done.stdout + done.stderr
    done = run_in_process("run", "classify", f"model={tiny_model_dir}", f"data.train={few}", "train.num_train_epochs=1",
                          f"output_dir={tmp_path / 'run'}", cwd=tmp_path)
    assert done.returncode == 0 and "few labels: the rarest label" in done.stdout + done.stderr


def test_a_seed_band_keeps_the_best_dev_seed_and_reports_the_band(run, tiny_model_dir, tmp_path):
    out = tmp_path / "band"
    done = run_in_process("run", "fewshot", f"model={tiny_model_dir}", f"data.train={run['train']}",
                          f"data.eval={run['dev']}", f"output_dir={out}", "num_iterations=2", "seeds=[1,2,3]",
                          cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    band = metrics["seeds"]
    scores = {entry["seed"]: entry["eval"]["macro_f1"] for entry in band["runs"]}
    assert sorted(scores) == [1, 2, 3] and band["metric"] == "macro_f1"
    assert band["best_seed"] == max(scores, key=scores.get)
    assert metrics["eval"]["macro_f1"] == pytest.approx(scores[band["best_seed"]])  # the saved model is that seed's
    assert band["mean"]["macro_f1"] == pytest.approx(sum(scores.values()) / 3)
    assert "seed band: 3 trainings" in done.stdout + done.stderr
    evaluated = run_in_process("evaluate", out, run["dev"], "-o", tmp_path / "dev.json", cwd=tmp_path)
    assert evaluated.returncode == 0
    kept = json.loads((tmp_path / "dev.json").read_text())["macro_f1"]
    assert kept == pytest.approx(scores[band["best_seed"]], abs=1e-6)


def test_a_seed_band_without_a_dev_split_is_refused_before_anything_loads(run, tmp_path):
    done = run_in_process("validate", "fewshot", f"data.train={run['train']}", "seeds=[1,2]", cwd=tmp_path)
    assert done.returncode == 2 and "set data.eval=dev.csv" in done.stderr and "seeds" in done.stderr


def test_the_contrastive_loss_is_logged_where_the_app_draws_curves(run):
    from bertkit import webapp_runs

    history = webapp_runs.history(Path(run["dir"]))
    assert history and all(isinstance(entry["loss"], float) for entry in history if "loss" in entry)
