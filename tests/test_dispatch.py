"""A task is one room (docs/adding-a-task.md): the tools outside bertkit/tasks/ ask the table of tasks and the task's
own module, and hold no branch on a task's name. The check reads bertkit/*.py with `ast`: a comparison with a task's
name (`task == "embed"`, `recipe in ("classify", "ner")`), a dict keyed by task names, a list of several task names
(`FINE_TUNED = {"classify", "ner"}`: a tool that keeps its own list of tasks), or a class named *Endpoint.

NOT_A_CHOICE names the places that hold task names without choosing a task, each with why; a new place anywhere, or
one more in a listed file, fails here."""

import ast
from pathlib import Path

from bertkit import tasks

ROOT = Path(__file__).resolve().parent.parent
TASK_NAMES = set(tasks.task_names())
# metrics.metric_for_task is a registry of metrics by name, as evaluate.load is ("ner": seqeval, "qa": SQuAD, beside
# the problem types); no tool picks a task by it
NOT_A_CHOICE = {"metrics.py": 1}


def _names(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Constant) and node.value in TASK_NAMES:
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in TASK_NAMES}
    return set()


def task_branches(source: str) -> list[tuple[int, str]]:
    """(line, what) of every place in `source` that chooses by a task's name, or keeps a list of tasks."""
    tree = ast.parse(source)
    compared = {id(side) for node in ast.walk(tree) if isinstance(node, ast.Compare)
                for side in [node.left, *node.comparators]}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            hit = set().union(*(_names(side) for side in [node.left, *node.comparators]))
            if hit:
                found.append((node.lineno, f"compares with {sorted(hit)}"))
        elif isinstance(node, ast.Dict):
            hit = {key.value for key in node.keys if isinstance(key, ast.Constant) and key.value in TASK_NAMES}
            if hit:
                found.append((node.lineno, f"a dict keyed by {sorted(hit)}"))
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)) and id(node) not in compared \
                and len(_names(node)) >= 2:
            found.append((node.lineno, f"a list of tasks {sorted(_names(node))}: the table keeps those"))
        elif isinstance(node, ast.ClassDef) and node.name.endswith("Endpoint"):
            found.append((node.lineno, f"class {node.name}: a task's endpoint belongs in its module"))
    return found


def test_the_check_finds_each_kind_of_branch():
    source = ('if task == "embed": pass\nok = recipe in ("classify", "ner")\nviews = {"qa": 1}\n'
              'class ChoiceEndpoint: pass\nfine = task == "other"\nFINE_TUNED = {"classify", "rerank"}\n'
              'ONE = ("mlm",)\n')
    assert sorted(line for line, _ in task_branches(source)) == [1, 2, 3, 4, 6]


def test_tools_outside_the_tasks_hold_no_new_branch_on_a_task_name():
    found = {path.name: task_branches(path.read_text(encoding="utf-8"))
             for path in sorted((ROOT / "bertkit").glob("*.py"))}
    for name, branches in found.items():
        allowed = NOT_A_CHOICE.get(name, 0)
        assert len(branches) <= allowed, (
            f"bertkit/{name} chooses by a task's name at {branches}: ask the table of tasks "
            f"(bertkit/tasks/__init__.py) or the task's module instead (docs/adding-a-task.md)")
        assert len(branches) == allowed, (f"bertkit/{name} now holds {len(branches)} task branches, not {allowed}: "
                                          f"lower its count in NOT_A_CHOICE")


def test_serve_holds_no_task():
    """bertkit serve asks the model's task module for its Endpoint (bertkit/tasks/serving.py): every task has one,
    on the route the table names."""
    source = (ROOT / "bertkit" / "serve.py").read_text(encoding="utf-8")
    assert not task_branches(source)
    from bertkit.tasks import serving

    for name in sorted({task.name for task in tasks.TASKS} | set(tasks.ROUTES)):
        endpoint = tasks.task_module(name).Endpoint
        assert issubclass(endpoint, serving.Endpoint) and endpoint.name == name
        assert endpoint.route.fget(endpoint) == tasks.route_of(name)
        assert "Endpoint" in tasks.task_module(name).__all__


def test_the_report_asks_each_task_for_its_part():
    """report.html's task sections, dev examples, chance level and data view come from the task's `Report`
    (bertkit/tasks/reporting.py); a recipe that is no task gets the base part, which says it has no view."""
    from bertkit import report
    from bertkit.tasks import reporting

    for name in ("classify", "ner", "qa", "choice", "mlm", "embed", "fewshot"):
        part = report.task_report(name)
        assert type(part) is tasks.task_module(name).Report and isinstance(part, reporting.Report)
        assert "Report" in tasks.task_module(name).__all__
    assert type(report.task_report("distill")) is reporting.Report
    assert report.task_report("mlm").default_metric == "perplexity"
    assert {name for name in ("classify", "ner", "qa") if report.task_report(name).shows_data} == {"classify", "ner"}


def test_the_card_asks_a_library_task_for_its_part():
    """A model another library loads (sentence-transformers) gets its card's tag, notes, results and snippet from its
    task's `Card`; a transformers model's card needs none."""
    from bertkit.tasks import reporting

    for name, library in (("embed", "sentence-transformers"), ("rerank", "sentence-transformers"),
                          ("fewshot", "setfit")):
        card = tasks.task_module(name).Card
        assert issubclass(card, reporting.Card) and card.tag and card.library == library
    assert set(tasks.LIBRARY_TASKS) == {"embed", "rerank", "fewshot"}
    assert tasks.task_part("classify", "Card") is None


def test_a_push_takes_the_files_a_task_names_and_no_other_pickle(tmp_path):
    """hub.select_files asks the task for its own files (MODEL_FILES): an embed run's retriever.json, a few-shot
    model's head (a pickle, which a push keeps back from any other folder)."""
    import json

    from bertkit.hub import select_files

    def folder(name: str, *files: str):
        path = tmp_path / name
        (path / "1_Pooling").mkdir(parents=True)
        (path / "modules.json").write_text(json.dumps([{"path": "", "type": "sentence_transformers.models.Transformer"},
                                                       {"path": "1_Pooling", "type": "x.Pooling"}]))
        (path / "1_Pooling" / "config.json").write_text("{}")
        for file in ("config.json", "model.safetensors", *files):
            (path / file).write_text("{}")
        return path

    embed = select_files(folder("embed", "retriever.json", "model_head.pkl"))
    assert "retriever.json" in embed and "model_head.pkl" not in embed
    few = select_files(folder("few", "config_setfit.json", "model_head.pkl", "other.pkl"))
    assert {"config_setfit.json", "model_head.pkl"} <= set(few) and "other.pkl" not in few
