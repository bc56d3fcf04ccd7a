"""The library's shape, checked: every task exposes the same interface, no two modules share a name, and the import
graph has at most five layers and points one way only (the model at the bottom, shared pieces, tasks, the Trainer
wiring and tools, the CLI on top), without a cycle. No size caps: a module holds one idea whole."""

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest

from bertkit import tasks

PACKAGE = Path(__file__).resolve().parent.parent / "bertkit"
TASK_NAMES = sorted({task.name for task in tasks.TASKS})

# Each module's layer; a module may import only modules of its own layer or below. Longest prefix wins.
LAYERS = {
    # 1 the model: configuration, modeling, padding and the speed switch; torch and transformers only
    "bertkit": 1,  # the package root registers the model classes with transformers' Auto classes
    "bertkit.cache": 1,
    "bertkit.errors": 1, "bertkit.shipped": 1, "bertkit.configuration_bert": 1, "bertkit.modeling_bert": 1,
    "bertkit.modeling_document": 1, "bertkit.losses": 1, "bertkit.padding": 1, "bertkit.speed": 1,
    "bertkit.families": 1,  # which implementation runs a checkpoint: bertkit's BERT or transformers' AutoModelFor<Task>
    # 2 shared pieces: data files and labels, metrics, the run directory, console, loading, LLRD, the config
    "bertkit.tokenization": 2, "bertkit.datafiles": 2, "bertkit.labels": 2, "bertkit.splits": 2, "bertkit.metrics": 2,
    "bertkit.console": 2, "bertkit.precision": 2, "bertkit.checkpoints": 2, "bertkit.rundir": 2,
    "bertkit.inference": 2, "bertkit.onnx_model": 2, "bertkit.config": 2, "bertkit.llrd": 2,
    "bertkit.training_arguments": 2,  # TrainingArguments' fields without importing transformers (config checks them)
    "bertkit.report_html": 2, "bertkit.calibration": 2,
    # 3 tasks: classify, ner, qa, choice, mlm, each the same interface
    "bertkit.tasks": 3,
    # 4 the Trainer wiring and the tools
    "bertkit.options": 4, "bertkit.checks": 4, "bertkit.training": 4, "bertkit.search": 4, "bertkit.model_card": 4,
    "bertkit.hub": 4, "bertkit.export": 4, "bertkit.distill": 4, "bertkit.runs": 4, "bertkit.inspection": 4,
    "bertkit.diagnose": 4, "bertkit.report": 4, "bertkit.serve": 4, "bertkit.audit": 4,
    "bertkit.engine": 4,  # serve's choice of PyTorch or ONNX Runtime (it exports through bertkit.export)
    "bertkit.distributed": 4,  # fsdp / deepspeed: checked before training, verified in the run
    "bertkit.recipe_configs": 4,  # each recipe's Config, apart from the recipe so that the CLI checks it cheaply
    "bertkit.training_display": 4,  # the live line of a training run (a Trainer callback)
    # 5 the CLI, and the web page over it (bertkit app)
    "bertkit.cli": 5, "bertkit.__main__": 5,
    "bertkit.webapp": 5, "bertkit.webapp_runs": 5, "bertkit.webapp_text": 5, "bertkit.webapp_checks": 5,
}
LAYER_NAMES = {1: "model", 2: "shared pieces", 3: "tasks", 4: "Trainer wiring and tools", 5: "CLI and page"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int:
    prefix = max((name for name in LAYERS if module == name or module.startswith(name + ".")), key=len, default=None)
    assert prefix is not None, f"{module} has no layer in test_structure.LAYERS: add it"
    return LAYERS[prefix]


def imported_modules(path: Path) -> set[str]:
    """bertkit modules a file imports, at the top or inside functions (`from .x import y` resolved)."""
    here = module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            submodules = {f"{module}.{alias.name}" for alias in node.names
                          if (PACKAGE.parent / f"{module}.{alias.name}".replace(".", "/")).is_dir()
                          or (PACKAGE.parent / (f"{module}.{alias.name}".replace(".", "/") + ".py")).is_file()}
            # `from . import speed` needs bertkit.speed, not what bertkit/__init__ defines (as `from .speed import`)
            found.update(submodules if len(submodules) == len(node.names) else submodules | {module})
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name == "bertkit" or name.startswith("bertkit.")}


LIBRARY_FILES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", LIBRARY_FILES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down(path):
    me = module_name(path)
    upward = [f"{other} ({LAYER_NAMES[layer_of(other)]})" for other in imported_modules(path)
              if layer_of(other) > layer_of(me)]
    assert not upward, f"{me} ({LAYER_NAMES[layer_of(me)]}) imports a higher layer: {', '.join(sorted(upward))}"


def test_no_two_modules_share_a_file_name():
    """`checkpoints.py` twice, `settings.py` four times: a name that does not say which one misleads."""
    names = [path.name for path in LIBRARY_FILES if path.name != "__init__.py"]
    assert sorted({name for name in names if names.count(name) > 1}) == []


def test_there_are_five_layers_at_most():
    assert set(LAYERS.values()) <= set(LAYER_NAMES) and len(LAYER_NAMES) <= 5


def test_the_architecture_table_names_every_head():
    from bertkit import modeling_bert, modeling_document

    heads = [name.removeprefix("Bertkit") for name in modeling_bert.__all__ + modeling_document.__all__
             if name.startswith("BertkitFor")]
    assert sorted(heads) == sorted(task.suffix for task in tasks.TASKS)
    assert tasks.task_of_architecture("BertForTokenClassification").name == "ner"
    assert tasks.task_of_architecture("BertModel") is None
    assert tasks.task_of_peft("SEQ_CLS").name == "classify"


@pytest.mark.parametrize("name", TASK_NAMES)
def test_every_task_exposes_the_same_interface_in_the_same_order(name):
    module = tasks.task_module(name)
    assert tuple(module.__all__[:len(tasks.INTERFACE)]) == tasks.INTERFACE
    for attribute in tasks.INTERFACE:
        assert callable(getattr(module, attribute)), f"bertkit.tasks.{name}.{attribute}"
    assert dataclasses.is_dataclass(module.Settings) and callable(module.Settings.check)
    reference = tasks.task_module("classify")
    for function in ("predict_file", "evaluate_file", "load_predictor"):
        assert (list(inspect.signature(getattr(module, function)).parameters)
                == list(inspect.signature(getattr(reference, function)).parameters)), f"{name}.{function}"


@pytest.mark.parametrize("name", TASK_NAMES)
def test_task_settings_round_trip_through_the_model_config(name, tmp_path):
    import transformers

    settings_cls = tasks.task_module(name).Settings
    settings = settings_cls()
    config = transformers.BertConfig(**{tasks.SETTINGS_KEY: tasks.settings_dict(settings)})
    config.save_pretrained(tmp_path)
    reloaded = transformers.BertConfig.from_pretrained(tmp_path)
    assert tasks.read_settings(settings_cls, reloaded, str(tmp_path / "config.json")) == settings


def test_a_bad_saved_setting_names_its_key_and_file(tmp_path):
    from bertkit.errors import BertkitError

    settings_cls = tasks.task_module("classify").Settings
    saved = {**tasks.settings_dict(settings_cls()), "max_length": "long"}
    with pytest.raises(BertkitError, match=r"bertkit_task_settings\.max_length.*config\.json"):
        tasks.read_settings(settings_cls, {tasks.SETTINGS_KEY: saved}, str(tmp_path / "config.json"))


@pytest.mark.parametrize("name", TASK_NAMES)
def test_a_saved_setting_that_cannot_work_is_refused_when_read_for_every_task(name, tmp_path):
    """Typed but unusable (a 2-token window): every task's check() runs in read_settings, not where callers remember."""
    from bertkit.errors import BertkitError

    settings_cls = tasks.task_module(name).Settings
    saved = {**tasks.settings_dict(settings_cls()), "max_length": 2}
    with pytest.raises(BertkitError, match="max_length"):
        tasks.read_settings(settings_cls, {tasks.SETTINGS_KEY: saved}, str(tmp_path / "config.json"))


def test_task_modules_load_without_the_trainer_wiring():
    """Serving a model (predict / evaluate) must not pull in the training stack's modules."""
    import subprocess
    import sys

    code = ("import sys, bertkit.tasks as t\n"
            "[t.task_module(n) for n in ('classify', 'ner', 'qa', 'choice', 'mlm')]\n"
            "wiring = ('bertkit.training', 'bertkit.search', 'bertkit.checks', 'bertkit.cli', 'bertkit.hub', "
            "'bertkit.model_card')\n"
            "print(sorted(m for m in sys.modules if m in wiring or m.startswith(tuple(w + '.' for w in wiring))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_wheel_lists_every_package():
    """pyproject.toml names its packages one by one: a new subpackage missing there is missing from the wheel."""
    import tomllib

    listed = set(tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    packages = {module_name(init) for init in PACKAGE.rglob("__init__.py") if "shipped" not in init.parts}
    assert packages <= listed, f"add to pyproject.toml [tool.setuptools] packages: {sorted(packages - listed)}"



def import_graph() -> dict[str, set[str]]:
    """module -> the bertkit modules it imports (at the top or inside functions), modules only (a name imported
    from a module is an edge to that module)."""
    modules = {module_name(path): path for path in LIBRARY_FILES}
    return {name: {other for other in imported_modules(path) if other in modules and other != name}
            for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path [a, b, ..., a], or None (depth-first search, colouring modules in progress)."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for other in sorted(graph[node]):
            if state.get(other) == "open":
                return stack[stack.index(other):] + [other]
            if other not in state and (cycle := visit(other)):
                return cycle
        state[node] = "done"
        stack.pop()
        return None

    return next((cycle for node in sorted(graph) if node not in state and (cycle := visit(node))), None)


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_import_graph_has_no_cycle():
    """A package's __init__ that imports its modules while they import it back counts too: nothing here may need
    the module that needs it."""
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)
