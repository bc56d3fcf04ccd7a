"""Recipes, configs and sample data that ship with bertkit: found from any folder, copied without harm."""

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from bertkit.cli import app, load_recipe_config
from bertkit.shipped import CONFIGS_DIR, ROOT, SAMPLE_DATA_DIR, copy_text, rebase_shipped_paths, resolve_config_path

runner = CliRunner()


def test_shipped_config_paths_name_the_shipped_sample_data_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _, cfg = load_recipe_config("classify", "classify/en_sentiment", [])
    assert Path(cfg.data.train) == SAMPLE_DATA_DIR / "en_sentiment" / "train.csv"
    assert Path(cfg.data.train).is_file()
    assert cfg.run.output_dir == "runs/en_sentiment"  # outputs stay relative to the working directory
    assert cfg.model == "all-MiniLM-L6-v2"


def test_overrides_and_user_configs_stay_relative_to_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data" / "en_sentiment").mkdir(parents=True)  # the user's own file at the sample's relative path
    (tmp_path / "data" / "en_sentiment" / "train.csv").write_text("text,label\ngood,pos\nbad,neg\n")
    _, cfg = load_recipe_config("classify", "classify/en_sentiment", ["data.train=data/en_sentiment/train.csv"])
    assert cfg.data.train == "data/en_sentiment/train.csv"
    (tmp_path / "mine.yaml").write_text("data:\n  train: data/en_sentiment/train.csv\n")
    _, cfg = load_recipe_config("classify", "mine.yaml", [])
    assert cfg.data.train == "data/en_sentiment/train.csv"


def test_accelerate_configs_in_the_train_block_resolve_too():
    _, cfg = load_recipe_config("classify", "classify/multi_gpu_deepspeed", [])
    assert Path(cfg.train["deepspeed"]).is_file() and Path(cfg.train["deepspeed"]).is_relative_to(ROOT)


def test_rebase_leaves_what_is_not_a_shipped_file():
    data = {"model": "all-MiniLM-L6-v2", "output_dir": "runs/x", "data": {"train": "data/en_pair/train.csv",
                                                                          "eval": "data/missing.csv"},
            "lora": {"target_modules": ["query", "value"]}, "train": {"learning_rate": 1e-4}}
    rebased = rebase_shipped_paths(data)
    assert rebased["data"]["train"] == str(ROOT / "data/en_pair/train.csv")
    assert {**rebased, "data": data["data"]} == data


def test_shipped_names_resolve_and_a_users_file_wins(tmp_path, monkeypatch):
    assert resolve_config_path("classify/en_sentiment") == CONFIGS_DIR / "classify" / "en_sentiment.yaml"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "classify").mkdir()
    (tmp_path / "classify" / "en_sentiment").write_text("seed: 7\n")
    assert resolve_config_path("classify/en_sentiment") == Path("classify/en_sentiment")


def test_cp_makes_a_copy_that_runs_from_its_new_place(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["cp", "classify/en_sentiment", "configs"])
    assert result.exit_code == 0, result.output
    assert "created folder configs" in result.output
    copied = tmp_path / "configs" / "en_sentiment.yaml"
    text = copied.read_text()
    assert text.splitlines()[0] == f"# bertkit run classify -c {Path('configs') / 'en_sentiment.yaml'}"
    data = yaml.safe_load(text)
    assert Path(data["data"]["train"]).is_absolute() and Path(data["data"]["train"]).is_file()
    assert data["output_dir"] == "runs/en_sentiment"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    result = runner.invoke(app, ["validate", "classify", "-c", str(copied)])
    assert result.exit_code == 0, result.output


def test_cp_never_replaces_a_users_file_without_force(tmp_path):
    target = tmp_path / "en_sentiment.yaml"
    target.write_text("# my edits\nseed: 7\n")
    for destination in (tmp_path, target):
        result = runner.invoke(app, ["cp", "classify/en_sentiment", str(destination)])
        assert result.exit_code == 2
        assert "already exists" in result.output and "--force" in result.output
        assert target.read_text() == "# my edits\nseed: 7\n"
    result = runner.invoke(app, ["cp", "classify/en_sentiment", str(tmp_path), "--force"])
    assert result.exit_code == 0 and "learning_rate" in target.read_text()


def test_cp_to_a_missing_folder_creates_the_folder_not_a_file(tmp_path):
    result = runner.invoke(app, ["cp", "classify", str(tmp_path / "my_recipes")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "my_recipes" / "classify.py").is_file()
    result = runner.invoke(app, ["cp", "classify/en_pair", str(tmp_path / "pair.yaml")])
    assert result.exit_code == 0 and (tmp_path / "pair.yaml").is_file()


def test_a_copied_recipe_runs_by_path(tmp_path):
    runner.invoke(app, ["cp", "classify", str(tmp_path)])
    result = runner.invoke(app, ["validate", str(tmp_path / "classify.py"), "-c", "classify/en_sentiment"])
    assert result.exit_code == 0, result.output
    assert "ok: " in result.output


def test_copy_text_leaves_files_that_are_not_shipped_configs(tmp_path):
    own = tmp_path / "own.yaml"
    own.write_text("data:\n  train: data/en_pair/train.csv\n")
    assert copy_text(own, tmp_path / "copy.yaml") == own.read_text()


@pytest.mark.parametrize("name", ["classify/en_sentiment", "ner/en_conll", "qa/en_squad2", "choice/en",
                                  "mlm/en_medical"])
def test_every_shipped_sample_path_exists(name):
    data = yaml.safe_load((CONFIGS_DIR / f"{name}.yaml").read_text())
    for key in ("train", "eval"):
        if data["data"].get(key):
            assert (ROOT / data["data"][key]).is_file(), (name, key)


def test_cp_points_only_the_header_command_at_the_copy(tmp_path):
    copied = tmp_path / "en_medical.yaml"
    text = copy_text(CONFIGS_DIR / "mlm" / "en_medical.yaml", copied)
    assert text.splitlines()[0] == f"# bertkit run mlm -c {copied}"
    assert "# Then: bertkit run classify -c classify/en_sentiment model=runs/mlm_en_medical" in text


def test_only_shipped_inputs_are_rebased_never_what_a_run_made_under_the_checkout(tmp_path, monkeypatch):
    """After `make demo` a checkout holds runs/en_sentiment: a shipped config's `output_dir: runs/en_sentiment` (and
    a teacher an earlier run made) must stay relative to the working directory, in a run and in a copy."""
    import bertkit.shipped as shipped

    root = tmp_path / "checkout"
    for name in ("data/en_sentiment/train.csv", "recipes/configs/accelerate/ds.json", "runs/en_sentiment/config.json"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("{}")
    monkeypatch.setattr(shipped, "ROOT", root)
    data = {"output_dir": "runs/en_sentiment", "teacher": "runs/en_sentiment",
            "data": {"train": "data/en_sentiment/train.csv"},
            "train": {"deepspeed": "recipes/configs/accelerate/ds.json"}}
    rebased = rebase_shipped_paths(data)
    assert rebased["output_dir"] == "runs/en_sentiment" and rebased["teacher"] == "runs/en_sentiment"
    assert rebased["data"]["train"] == str(root / "data/en_sentiment/train.csv")
    assert rebased["train"]["deepspeed"] == str(root / "recipes/configs/accelerate/ds.json")
    config = root / "recipes/configs/classify/en.yaml"
    config.parent.mkdir(parents=True)
    config.write_text("output_dir: runs/en_sentiment\ndata:\n  train: data/en_sentiment/train.csv\n")
    monkeypatch.setattr(shipped, "CONFIGS_DIR", root / "recipes/configs")
    copied = yaml.safe_load(copy_text(config, tmp_path / "copy.yaml"))
    assert copied["output_dir"] == "runs/en_sentiment"
    assert copied["data"]["train"] == str(root / "data/en_sentiment/train.csv")
