"""`push=user/repo` at the end of a run goes up once, from rank 0, whichever recipe ran."""

import pytest

import bertkit.hub as hub
from bertkit.shipped import RECIPES_DIR, recipe_names


@pytest.fixture()
def pushes(monkeypatch):
    calls = []
    monkeypatch.setattr(hub, "push_model", lambda model_dir, repo_id: calls.append((model_dir, repo_id)) or "url")
    return calls


@pytest.mark.parametrize("rank, expected", [("0", 1), ("1", 0), ("3", 0)])
def test_only_rank_zero_pushes(monkeypatch, pushes, rank, expected):
    monkeypatch.setenv("RANK", rank)
    result = hub.push_finished_run("runs/x", "user/model")
    assert len(pushes) == expected
    assert result == ("url" if expected else None)


@pytest.mark.parametrize("recipe", recipe_names())
def test_every_recipe_pushes_through_the_rank_safe_helper(recipe):
    source = (RECIPES_DIR / f"{recipe}.py").read_text()
    assert "report(cfg, " in source  # bertkit.training.report: the summary, then push_finished_run
    assert "push_model(" not in source and "push_finished_run(" not in source


@pytest.mark.parametrize("repo", [None, "user/model"])
def test_the_end_of_a_run_pushes_once_through_the_rank_safe_helper(monkeypatch, repo):
    from types import SimpleNamespace

    from bertkit import training as trainer

    calls = []
    monkeypatch.setattr(trainer, "run_summary", lambda *args, **kwargs: None)
    monkeypatch.setattr(trainer, "push_finished_run", lambda output_dir, repo_id: calls.append((output_dir, repo_id)))
    trainer.report(SimpleNamespace(run=SimpleNamespace(push=repo)), "classify", "title", {}, "runs/x")
    assert calls == ([("runs/x", repo)] if repo else [])
