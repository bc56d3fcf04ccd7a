"""Hyperparameter search (search.trials) and seed bands (seeds): on tiny choice and NER runs, the trials table, the
metrics.json entry and the kept model agree; a trial made bad on purpose is pruned; a band's per-seed metrics, mean
and sd, and the best seed's model; the option errors; the CLI path."""

import json
import statistics
import sys
from pathlib import Path

import pytest
import torch
import transformers
from typer.testing import CliRunner

from bertkit.cli import app, load_recipe
from bertkit.config import load_config
from bertkit.errors import BertkitError
from bertkit.rundir import clear_old_run

runner = CliRunner()
DATA = Path(__file__).resolve().parent.parent / "data"

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def choice_model_dir(tmp_path_factory, minilm_dir):
    """A tiny random BERT (initializer_range 0.2, as in test_choice: the options' scores spread from the start)."""
    path = tmp_path_factory.mktemp("tiny-choice")
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=128, initializer_range=0.2)
    transformers.BertModel(config).save_pretrained(path)
    transformers.AutoTokenizer.from_pretrained(minilm_dir).save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def choice_data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("choice-data")
    files = {}
    for split, count in (("train", 24), ("dev", 12)):
        lines = (DATA / "choice" / "en" / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()[:count]
        (folder / f"{split}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        files[split] = str(folder / f"{split}.jsonl")
    return files


def choice_overrides(model_dir, data, output_dir, *extra):
    return [f"model={model_dir}", f"data.train={data['train']}", f"data.eval={data['dev']}",
            f"output_dir={output_dir}", "precision=fp32", "data.max_length=40", "train.logging_steps=3",
            "train.learning_rate=1.0e-3", "train.num_train_epochs=1", "train.per_device_train_batch_size=8", *extra]


SMALL_SPACE = ("search.learning_rate=[3.0e-4,3.0e-3]", "search.batch_sizes=[6,8]", "search.epochs=[1,2]")


def metrics_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


def left_folders(run_dir: Path) -> list[str]:
    return sorted(p.name for p in run_dir.iterdir() if p.is_dir())


def unpruned_search(model_dir, data, out, trials: int, *extra):
    """`bertkit run choice` with a search of `trials` trials over SMALL_SPACE, no pruning; asserts it exits 0."""
    result = runner.invoke(app, ["run", "choice", *choice_overrides(
        model_dir, data, out, f"search.trials={trials}", *SMALL_SPACE, "search.pruning=false", *extra)])
    assert result.exit_code == 0, result.output
    return result


def test_search_keeps_the_best_trial_and_its_settings(choice_model_dir, choice_data, tmp_path):
    out = tmp_path / "run"
    result = unpruned_search(choice_model_dir, choice_data, out, 3, "train.metric_for_best_model=loss")
    assert "search: 3 trials, dev loss" in result.output and "best settings" in result.output
    metrics = metrics_of(out)
    trials, best = metrics["search"]["trials"], metrics["search"]["best"]
    assert [t["number"] for t in trials] == [0, 1, 2]
    assert [t["state"] for t in trials] == ["complete"] * 3
    assert best["objective"] == min(t["objective"] for t in trials)  # loss: lower is better
    assert best["number"] != 2  # (the seeded search here) so a run that kept the last trial's model would fail
    for trial in trials:  # every trial's row in the printed table, with its dev loss
        assert f"{trial['objective']:.4f}" in result.output
    # the kept model is the best trial's best checkpoint: the recipe's own dev loss of the saved model is its score
    assert metrics["eval"]["loss"] == pytest.approx(best["objective"], abs=1e-5)
    args = torch.load(out / "training_args.bin", weights_only=False)
    assert args.learning_rate == pytest.approx(best["params"]["learning_rate"])
    assert args.per_device_train_batch_size == best["params"]["per_device_train_batch_size"]
    assert args.num_train_epochs == best["params"]["num_train_epochs"]
    assert left_folders(out) == []  # no trial-* or checkpoint-* folders pile up
    card = (out / "README.md").read_text()
    assert "How this model was chosen" in card and f"#{best['number']} (this model)" in card


def test_under_max_steps_the_epochs_are_not_searched_and_the_search_says_so(choice_model_dir, choice_data, tmp_path):
    out = tmp_path / "run"
    result = unpruned_search(choice_model_dir, choice_data, out, 2, "train.max_steps=4")
    assert "epochs not searched (train.max_steps=4)" in " ".join(result.output.split())
    assert all("num_train_epochs" not in trial["params"] for trial in metrics_of(out)["search"]["trials"])


def sabotage(monkeypatch, module, bad_evaluation: int) -> list:
    """The recipe's real dev metrics, but evaluation number `bad_evaluation` (from 1) scores accuracy -1: a trial
    made bad on purpose. Returns the list of evaluations, one entry each."""
    real, evaluations = module.compute_metrics_fn, []

    def metrics_fn():
        compute = real()

        def metrics(prediction):
            evaluations.append(1)
            scores = compute(prediction)
            return {**scores, "accuracy": -1.0} if len(evaluations) == bad_evaluation else scores

        return metrics

    monkeypatch.setattr(module, "compute_metrics_fn", metrics_fn)
    return evaluations


def test_pruning_stops_a_trial_made_bad_on_purpose(choice_model_dir, choice_data, tmp_path, monkeypatch):
    module = load_recipe("choice")
    evaluations = sabotage(monkeypatch, module, 3)  # 2 epochs a trial: trial 1's first evaluation
    cfg = load_config(module.Config, None, choice_overrides(choice_model_dir, choice_data, tmp_path / "run",
                                                            "search.trials=3", "search.epochs=[2,2]"))
    trials = module.main(cfg)["search"]["trials"]
    assert [t["state"] for t in trials] == ["complete", "pruned", "complete"]
    assert trials[1]["evaluations"] == 1 and trials[1]["objective"] == -1.0
    assert len(evaluations) == 2 + 1 + 2 + 1  # trial 1 stopped after its first evaluation; then the recipe's own


def test_without_pruning_the_bad_trial_runs_to_its_end(choice_model_dir, choice_data, tmp_path, monkeypatch):
    module = load_recipe("choice")
    evaluations = sabotage(monkeypatch, module, 2)
    cfg = load_config(module.Config, None, choice_overrides(choice_model_dir, choice_data, tmp_path / "run",
                                                            "search.trials=2", "search.epochs=[1,1]",
                                                            "search.pruning=false"))
    trials = module.main(cfg)["search"]["trials"]
    assert [t["state"] for t in trials] == ["complete", "complete"] and trials[1]["objective"] == -1.0
    assert len(evaluations) == 1 + 1 + 1  # one each, then the recipe's own dev evaluation


def test_seed_band_mean_sd_and_the_best_seed_kept(choice_model_dir, choice_data, tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", "choice", *choice_overrides(
        choice_model_dir, choice_data, out, "seeds=[1,2,3]", "train.metric_for_best_model=loss")])
    assert result.exit_code == 0, result.output
    metrics = metrics_of(out)
    band = metrics["seeds"]
    assert [run["seed"] for run in band["runs"]] == [1, 2, 3]
    losses = [run["eval"]["loss"] for run in band["runs"]]
    assert len(set(losses)) == 3  # each seed drew its own head and data order
    assert band["mean"]["loss"] == pytest.approx(statistics.fmean(losses))
    assert band["sd"]["loss"] == pytest.approx(statistics.stdev(losses))
    accuracies = [run["eval"]["accuracy"] for run in band["runs"]]
    assert band["sd"]["accuracy"] == pytest.approx(statistics.stdev(accuracies))
    best_seed = band["runs"][losses.index(min(losses))]["seed"]
    assert band["best_seed"] == best_seed
    assert metrics["eval"]["loss"] == pytest.approx(min(losses), abs=1e-5)  # the saved model is the best seed's
    assert torch.load(out / "training_args.bin", weights_only=False).seed == best_seed
    history = json.loads((out / "log_history.json").read_text())  # the kept seed's training: 1 epoch, 1 evaluation
    assert [entry["eval_loss"] for entry in history if "eval_loss" in entry] == [pytest.approx(min(losses))]
    assert f"{band['mean']['accuracy']:.3f} ± {band['sd']['accuracy']:.3f} (3 seeds)" in result.output
    assert left_folders(out) == []
    assert "Trained with 3 seeds (1, 2, 3)" in (out / "README.md").read_text()


def test_cli_ner_search_exits_0_and_prints_the_trials_table(tiny_model_dir, tmp_path):
    def head(source: Path, target: Path, sentences: int) -> str:
        text = source.read_text(encoding="utf-8")
        target.write_text("\n\n".join(text.split("\n\n")[: sentences + 1]) + "\n", encoding="utf-8")
        return str(target)

    train = head(DATA / "ner" / "en" / "train.conll", tmp_path / "train.conll", 24)
    dev = head(DATA / "ner" / "en" / "dev.conll", tmp_path / "dev.conll", 8)
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", "ner", f"model={tiny_model_dir}", f"data.train={train}", f"data.eval={dev}",
                                 f"output_dir={out}", "precision=fp32", "data.max_length=32", "data.stride=8",
                                 "search.trials=2", "search.epochs=[1,1]", "search.batch_sizes=[8]",
                                 "search.learning_rate=[1.0e-3,5.0e-3]"])
    assert result.exit_code == 0, result.output
    assert "search: 2 trials, dev f1" in result.output and "#0" in result.output and "#1" in result.output
    assert len(metrics_of(out)["search"]["trials"]) == 2
    assert (out / "bertkit_run.json").is_file() and left_folders(out) == []


@pytest.mark.parametrize("override, key", [
    ("search.trials=-1", "search.trials"),
    ("search.learning_rate=[5.0e-5,2.0e-5]", "search.learning_rate"),
    ("search.learning_rate=[0.0,2.0e-5]", "search.learning_rate"),
    ("search.learning_rate=[2.0e-5]", "search.learning_rate"),
    ("search.epochs=[4,2]", "search.epochs"),
    ("search.warmup=[0.0,1.5]", "search.warmup"),
    ("search.llrd=[0.8,1.2]", "search.llrd"),
    ("search.batch_sizes=[]", "search.batch_sizes"),
    ("search.batch_sizes=[0,16]", "search.batch_sizes"),
    ("seeds=[]", "seeds"),
    ("seeds=[42]", "seeds"),
    ("seeds=[42,42]", "seeds"),
    ("seeds=[42,-1]", "seeds"),
])
def test_bad_search_and_seed_settings_are_one_line_errors_naming_the_key(override, key, choice_data):
    module = load_recipe("choice")
    with pytest.raises(BertkitError, match=f"config key '{key}'") as caught:
        load_config(module.Config, None, [f"data.train={choice_data['train']}", f"data.eval={choice_data['dev']}",
                                          override])
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("extra, message", [
    (["search.trials=2", "seeds=[1,2]"], "cannot go with search.trials"),
    (["search.trials=2", "data.eval=null"], "needs a dev split"),
    (["seeds=[1,2]", "data.eval=null"], "needs a dev split"),
    (["search.trials=2", "resume=true"], "cannot resume"),
])
def test_search_and_seeds_refuse_what_they_cannot_do(extra, message, choice_data):
    module = load_recipe("choice")
    with pytest.raises(BertkitError, match=message):
        load_config(module.Config, None, [f"data.train={choice_data['train']}", f"data.eval={choice_data['dev']}",
                                          *extra])


@pytest.mark.parametrize("extra", [["search.trials=2"], ["seeds=[1,2]"]])
def test_mlm_refuses_a_search_or_seed_band_when_validated(extra, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("one line of text\nanother line of text\n", encoding="utf-8")
    with pytest.raises(BertkitError, match="for fine-tuning recipes") as caught:
        load_config(load_recipe("mlm").Config, None, [f"data.train={corpus}", *extra])
    assert "\n" not in str(caught.value)


def test_cli_exits_2_on_a_bad_range(choice_data, tmp_path):
    result = runner.invoke(app, ["run", "choice", f"data.train={choice_data['train']}",
                                 f"data.eval={choice_data['dev']}", f"output_dir={tmp_path / 'run'}",
                                 "search.trials=2", "search.epochs=[3,1]"])
    assert result.exit_code == 2 and "search.epochs" in result.output
    assert not (tmp_path / "run").exists()


def test_a_missing_optuna_is_one_line_with_the_install_command(monkeypatch):
    from bertkit.search import load_optuna

    monkeypatch.setitem(sys.modules, "optuna", None)  # import optuna now raises ImportError
    with pytest.raises(BertkitError, match=r"pip install 'bertkit\[search\]'"):
        load_optuna()


def test_importing_bertkit_and_a_recipe_does_not_import_optuna():
    import subprocess

    code = ("import sys; from bertkit.cli import load_recipe; import bertkit.training; load_recipe('ner'); "
            "assert 'optuna' not in sys.modules, 'optuna imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_recipe_without_a_model_builder_refuses_a_search_before_clearing_anything():
    from types import SimpleNamespace

    from bertkit.options import FineTuning, SearchOptions
    from bertkit.training import repeated_training

    cfg = SimpleNamespace(tune=FineTuning(search=SearchOptions(trials=2)))
    with pytest.raises(BertkitError, match="search.trials is not available for this recipe"):
        repeated_training(SimpleNamespace(model_init=None), cfg)
    assert repeated_training(SimpleNamespace(model_init=None), SimpleNamespace(tune=FineTuning())) is None


def test_overwrite_clears_trial_and_seed_folders_a_killed_run_left(tmp_path):
    for name in ("trial-3/checkpoint-2", "seed-42/checkpoint-4", "checkpoint-6", "my-notes"):
        (tmp_path / name).mkdir(parents=True)
    clear_old_run(tmp_path)
    assert left_folders(tmp_path) == ["my-notes"]


def test_each_trial_or_seed_starts_with_no_evaluations_without_gain():
    from types import SimpleNamespace

    from bertkit.search import reset_early_stopping

    stopping = transformers.EarlyStoppingCallback(early_stopping_patience=2)
    stopping.early_stopping_patience_counter = 1  # what the previous trial / seed left
    reset_early_stopping(SimpleNamespace(callback_handler=SimpleNamespace(callbacks=[stopping])))
    assert stopping.early_stopping_patience_counter == 0


def test_distill_seed_band_keeps_the_best_student(tiny_model_dir, tmp_path):
    module = load_recipe("distill")
    torch.manual_seed(0)
    config = transformers.BertConfig.from_pretrained(tiny_model_dir, num_labels=2,
                                                     id2label={0: "negative", 1: "positive"},
                                                     label2id={"negative": 0, "positive": 1})
    transformers.BertForSequenceClassification(config).save_pretrained(tmp_path / "teacher")
    transformers.AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(tmp_path / "teacher")
    for split, count in (("train", 24), ("dev", 12)):
        good = [(i * 7 + count) % 3 > 0 for i in range(count)]
        rows = [f"the film {i} was {'great' if g else 'dull'},{'positive' if g else 'negative'}"
                for i, g in enumerate(good)]
        (tmp_path / f"{split}.csv").write_text("text,label\n" + "\n".join(rows) + "\n")
    cfg = load_config(module.Config, None, [
        f"teacher={tmp_path / 'teacher'}", f"data.train={tmp_path / 'train.csv'}", f"data.eval={tmp_path / 'dev.csv'}",
        f"output_dir={tmp_path / 'student'}", "student.layers=[1]", "precision=fp32", "data.max_length=24",
        "train.num_train_epochs=1", "train.learning_rate=1.0e-3", "train.per_device_train_batch_size=8",
        "seeds=[1,2]", "train.metric_for_best_model=loss"])
    band = module.main(cfg)["seeds"]
    losses = [run["eval"]["loss"] for run in band["runs"]]
    assert band["best_seed"] == [1, 2][losses.index(min(losses))] and len(set(losses)) == 2
    assert metrics_of(tmp_path / "student")["seeds"] == band
    assert torch.load(tmp_path / "student" / "training_args.bin", weights_only=False).seed == band["best_seed"]


def test_classify_seed_band_and_search_over_attention_pooled_documents(tiny_model_dir, tmp_path):
    """classify hands a model builder too: a band and a search each keep their best run, with the document model."""
    common = [f"model={tiny_model_dir}", f"data.train={DATA / 'long_docs/train.jsonl'}",
              f"data.eval={DATA / 'long_docs/dev.jsonl'}", "data.max_length=32", "long_doc.strategy=chunk",
              "long_doc.aggregate=attention", "long_doc.stride=8", "long_doc.max_windows=4", "precision=fp32",
              "train.num_train_epochs=1",
              "train.per_device_train_batch_size=8", "train.metric_for_best_model=loss"]
    band = runner.invoke(app, ["run", "classify", *common, f"output_dir={tmp_path / 'band'}", "seeds=[1,2]"])
    assert band.exit_code == 0, band.output
    seeds = metrics_of(tmp_path / "band")["seeds"]
    losses = [run["eval"]["loss"] for run in seeds["runs"]]
    assert len(set(losses)) == 2 and seeds["best_seed"] == seeds["runs"][losses.index(min(losses))]["seed"]
    kept = seeds["runs"][losses.index(min(losses))]["eval"]  # classify's final metrics are recomputed, loss aside
    assert metrics_of(tmp_path / "band")["eval"]["macro_f1"] == pytest.approx(kept["macro_f1"], abs=1e-6)
    config = json.loads((tmp_path / "band" / "config.json").read_text())
    assert config["architectures"] == ["BertForDocumentClassification"]
    search = runner.invoke(app, ["run", "classify", *common, f"output_dir={tmp_path / 'search'}", "search.trials=2",
                                 "search.epochs=[1,1]"])
    assert search.exit_code == 0, search.output
    found = metrics_of(tmp_path / "search")["search"]
    assert found["best"]["objective"] == min(trial["objective"] for trial in found["trials"])
    assert left_folders(tmp_path / "band") == [] and left_folders(tmp_path / "search") == []
