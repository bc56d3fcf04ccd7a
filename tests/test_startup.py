"""A command line that answers at once: what needs no model imports no model stack, through the installed `bertkit`.

`import bertkit` imports neither torch nor transformers, yet keeps the library's contract (its classes by name, and
transformers' Auto classes loading a `model_type: "bertkit"` folder); commands that need no model (help, ls, cp,
validate, runs, version, and refusals of bad arguments, keys, values and paths) import none of torch, transformers,
sentence-transformers, datasets or a recipe's training code; commands that load a model say what they do first.
"""

import ast
import importlib
import json
import logging
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = Path(sys.executable).parent / "bertkit"
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "TOKENIZERS_PARALLELISM": "false"}
HEAVY = ("torch", "transformers", "sentence_transformers", "datasets", "bertkit.modeling_bert", "bertkit.training")
needs_script = pytest.mark.skipif(not SCRIPT.exists(), reason="bertkit is not installed in this environment")


def python(code: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=cwd,
                          env=ENV, timeout=300)


# ------------------------------------------------------------------------------------------- every --help, installed


def command_names() -> list[str]:
    from bertkit.cli import app

    return sorted(command.name or command.callback.__name__ for command in app.registered_commands)


@needs_script
def test_every_command_answers_help_through_the_installed_script(tmp_path):
    names = command_names()
    assert {"run", "ls", "cp", "validate", "predict", "evaluate", "serve", "runs", "version"} <= set(names)
    for name in ["", *names]:
        result = subprocess.run([str(SCRIPT), *([name] if name else []), "--help"], capture_output=True, text=True,
                                cwd=tmp_path, env=ENV, timeout=120)
        assert result.returncode == 0, (name, result.stderr)
        assert "Usage:" in result.stdout and "Traceback" not in result.stderr, (name, result.stdout, result.stderr)


def function_imports() -> list[tuple[str, int, str, list[str]]]:
    """(file, line, module, names) of every import inside a function of the package: the lazy imports, which
    `--help` never runs and a rename would break only when the command runs."""
    found = []
    for path in sorted((ROOT / "bertkit").rglob("*.py")):
        package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom):
                    base = package.rsplit(".", inner.level - 1)[0] if inner.level else ""
                    module = ".".join(part for part in (base, inner.module) if part)
                    found.append((path.name, inner.lineno, module, [alias.name for alias in inner.names]))
    return found


def test_every_lazy_import_in_the_package_names_what_exists():
    optional = ("deepspeed", "optuna", "uvicorn", "fastapi", "prometheus_client", "onnxruntime", "onnx", "peft")
    missing = []
    for file, line, module, names in function_imports():
        try:
            imported = importlib.import_module(module)
        except ImportError:
            if module.partition(".")[0] not in optional:
                missing.append(f"{file}:{line} {module}")
            continue
        for name in names:
            if not hasattr(imported, name):
                try:
                    importlib.import_module(f"{module}.{name}")
                except ImportError:
                    missing.append(f"{file}:{line} {module}.{name}")
    assert not missing, missing


# ------------------------------------------------------------------------------------- what each command imports


@pytest.fixture(scope="module")
def places(tmp_path_factory):
    """A folder to run in, holding an empty runs/ folder, a fine-tuned model's config.json (no weights: every
    command here must refuse or answer before it would load them) and an output_dir that a run may not take."""
    folder = tmp_path_factory.mktemp("startup")
    (folder / "runs").mkdir()
    model = folder / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "bert", "architectures":
                                                   ["BertForSequenceClassification"]}), encoding="utf-8")
    (folder / "dev.csv").write_text("text,label\ngood,pos\n", encoding="utf-8")
    (folder / "taken" / "checkpoint-5").mkdir(parents=True)  # an output_dir holding checkpoints bertkit did not write
    (folder / "encoder").mkdir()  # a bare encoder: no fine-tuned head to predict with or export
    (folder / "encoder" / "config.json").write_text(json.dumps({"model_type": "bert"}), encoding="utf-8")
    # the TrainingArguments fields are read from transformers once per installed version (cached afterwards)
    assert python("from bertkit.training_arguments import training_fields; training_fields()").returncode == 0
    return folder


CHEAP = [
    (["--help"], 0, ""),
    (["run", "--help"], 0, ""),
    (["ls"], 0, "classify"),
    (["cp", "classify/en_sentiment", "mine.yaml"], 0, "copied"),
    (["validate", "classify"], 0, "ok: classify config is valid"),
    (["validate", "classify", "--keys"], 0, "train.learning_rate"),
    (["runs"], 0, ""),
    (["version"], 0, "bertkit 0.1.0"),
    (["run", "classify", "data.train=missing.csv"], 2, "no such file missing.csv"),
    (["run", "classify", "data.trian=x.csv"], 2, "did you mean 'data.train'"),
    (["run", "classify", "data.max_length=1"], 2, "data.max_length"),
    (["run", "classify", "model=./no/such/model"], 2, "does not exist"),
    (["run", "mlm"], 2, "no training data"),
    (["run", "classify", "data.train=dev.csv", "output_dir=taken"], 2, "overwrite=true"),
    (["validate", "classify", "train.num_train_epochs=0"], 2, "train.num_train_epochs"),
    (["validate", "ner", "train.lerning_rate=1"], 2, "did you mean 'train.learning_rate'"),
    (["predict", "no_such_run", "x.csv"], 2, "does not exist"),
    (["predict", "model", "missing.csv"], 2, "no such file: missing.csv"),
    (["predict", "model", "dev.csv", "--precision", "fp64"], 2, "--precision fp64"),
    (["evaluate", "model", "missing.csv"], 2, "no such file: missing.csv"),
    (["predict", "model", "dev.csv", "--corpus", "dev.csv"], 2, "--corpus is for embedding models"),
    (["export", "no_such_run"], 2, "does not exist"),
    (["export", "encoder"], 2, "classify, ner, qa, choice, mlm, fewshot, embed or rerank"),
    (["serve", "encoder", "--port", "{port}"], 2, "classify, ner, qa, choice, mlm, fewshot, embed or rerank"),
    (["serve", "model", "--engine", "nope"], 2, "--engine nope"),
    (["app", "--host", "0.0.0.0"], 2, "add --auth USER"),
    (["app", "--lang", "fr"], 2, "--lang fr"),
]


def test_cheap_commands_import_no_model_stack(places):
    """Each command as the console script runs it (bertkit.cli:main), one after another in one fresh process: after
    each, its answer and exit code, and the heavy modules imported so far (none, or the command just run imported
    them: the first one to import any is the one named)."""
    with socket.socket() as probe:  # a free port for serve, which binds it before it looks at the model
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    commands = [[arg.replace("{port}", port) for arg in args] for args, _, _ in CHEAP]
    result = python(f"""
        import contextlib, io, json, sys
        from bertkit.cli import main
        for args in {commands!r}:
            sys.argv = ["bertkit", *args]
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    main()
                    code = 0
                except SystemExit as exit:
                    code = exit.code or 0
            heavy = [name for name in {HEAVY!r} if name in sys.modules]
            print(json.dumps({{"args": args, "code": code, "text": out.getvalue() + err.getvalue(), "heavy": heavy}}))
    """, cwd=places)
    assert result.returncode == 0, result.stderr[-3000:]
    answers = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [answer["args"] for answer in answers] == commands, result.stdout[-3000:]
    for (args, code, words), answer in zip(CHEAP, answers):
        assert answer["heavy"] == [], (args, answer)
        assert answer["code"] == code and words in answer["text"], (args, answer)


def test_import_bertkit_imports_no_model_stack_and_keeps_the_library_contract(tmp_path):
    """`import bertkit` is cheap; its classes still come by name, and transformers' Auto classes still load a
    model_type "bertkit" folder, whichever of bertkit and transformers comes first."""
    folder = tmp_path / "bertkit-model"
    made = python(f"""
        import json, sys, bertkit
        assert not [m for m in {HEAVY!r} if m in sys.modules], sorted(sys.modules)
        from bertkit import BertkitConfig, BertkitModel
        BertkitModel(BertkitConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                   intermediate_size=20)).save_pretrained({str(folder)!r})
        path = {str(folder / "config.json")!r}
        config = json.load(open(path))
        config.update(model_type="bertkit", architectures=["BertkitModel"])
        json.dump(config, open(path, "w"))
    """)
    assert made.returncode == 0, made.stderr
    orders = {
        "bertkit first": "import bertkit\nfrom transformers import AutoModel",
        "transformers first": "from transformers import AutoModel\nimport bertkit",
        "a transformers model first": "import bertkit, transformers\ntransformers.BertModel\n"
                                      "from transformers import AutoModel",
        "a bertkit class first": "from bertkit import BertkitForSequenceClassification\n"
                                 "from transformers import AutoModel",
        "the config class first": "from bertkit import BertkitConfig\nfrom transformers import AutoModel",
    }
    for name, imports in orders.items():
        result = python(imports + f"\nprint(type(AutoModel.from_pretrained({str(folder)!r})).__name__)")
        assert result.returncode == 0 and result.stdout.split()[-1] == "BertkitModel", (name, result.stderr[-2000:])


# ------------------------------------------------------------------------------------------ what long commands say


def first_line_and_torch(args: list[str], cwd: Path) -> tuple[list[str], int]:
    """The lines a person sees on a terminal (stderr is a pseudo-terminal) from a command whose first import of torch
    writes a marker line: (lines, index of the marker). The last line names the HEAVY modules it imported."""
    import pty

    code = textwrap.dedent(f"""
        import importlib.abc, sys
        class Marker(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path, target=None):
                if name == "torch":
                    print("<torch is imported here>", file=sys.stderr, flush=True)
                    sys.meta_path.remove(self)
        sys.meta_path.insert(0, Marker())
        sys.argv = ["bertkit", *{args!r}]
        from bertkit.cli import main
        try:
            main()
        except SystemExit:
            pass
        print("<imported:", *[name for name in {HEAVY!r} if name in sys.modules], file=sys.stderr, flush=True)
    """)
    terminal, stderr = pty.openpty()
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=stderr, cwd=cwd,
                               env=ENV)
    os.close(stderr)
    seen = b""
    while True:
        try:
            chunk = os.read(terminal, 65536)
        except OSError:  # EIO: the command has ended and closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    process.wait(timeout=300)
    os.close(terminal)
    lines = seen.decode("utf-8", "replace").replace("\r\n", "\n").splitlines()
    return lines, lines.index("<torch is imported here>") if "<torch is imported here>" in lines else -1


def test_a_run_says_what_it_does_before_it_imports_torch(tmp_path):
    train = ROOT / "data" / "en_sentiment" / "train.csv"
    lines, torch_at = first_line_and_torch(["run", "classify", f"data.train={train}", "train.max_steps=1",
                                            f"output_dir={tmp_path / 'run'}", "data.eval=null"], tmp_path)
    assert torch_at >= 1, lines
    assert lines[0].startswith("classify: all-MiniLM-L6-v2 on ") and "(loading PyTorch" in lines[0], lines


def test_validate_says_what_it_does_before_it_imports_torch_for_the_train_block(tmp_path):
    """A config that sets train: keys is checked by building the real TrainingArguments (seconds of imports): the
    person at the terminal is told first."""
    lines, torch_at = first_line_and_torch(["validate", "classify", "train.logging_steps=7"], tmp_path)
    assert torch_at >= 1, lines
    assert lines[0] == ("validate: classify, its train: settings as TrainingArguments takes them (loading PyTorch and "
                        "transformers)"), lines
    imported = set(lines[-1].removeprefix("<imported:").split())  # not the training wiring (datasets, ...: 2x the time)
    assert {"torch", "transformers"} <= imported and not imported & {"bertkit.training", "datasets"}, lines


def test_predict_says_what_it_does_before_it_imports_torch(places):
    lines, torch_at = first_line_and_torch(["predict", "model", "dev.csv", "-o", "out.jsonl"], places)
    assert torch_at >= 1, lines
    assert lines[0] == "predict: the classify model model on dev.csv -> out.jsonl (loading PyTorch and transformers)"


def test_piped_output_gets_no_first_line_and_a_refusal_stays_one_line(places):
    """The first line is for a person at a terminal: a script or a log reading the output gets the error alone."""
    result = python("""
        import sys
        sys.argv = ["bertkit", "predict", "model", "dev.csv", "-o", "out.jsonl"]
        from bertkit.cli import main
        main()
    """, cwd=places)
    assert result.returncode == 2 and result.stderr.startswith("error: "), result.stderr
    assert result.stderr.strip().count("\n") == 0, result.stderr


# ------------------------------------------------------------------------------ library lines a person cannot act on


def test_library_lines_without_action_stay_off_the_console(tmp_path):
    from bertkit import console

    logger = logging.getLogger("transformers.trainer_utils")
    with console.console_session():
        console.run_log.open(tmp_path)
        with pytest.MonkeyPatch.context() as patch:
            shown = []
            patch.setattr(console.console, "print", lambda *a, **k: shown.append(a))
            logger.warning("mtime may not be reliable on this filesystem, falling back to numerical ordering")
            logging.getLogger("transformers.modeling_utils").warning(
                "\x1b[1mBertForSequenceClassification LOAD REPORT\x1b[0m from: x\nclassifier.weight | MISSING")
            logger.warning("something a person should see")
    log = (tmp_path / console.LOG_FILE).read_text(encoding="utf-8")
    assert "mtime may not be reliable" not in log and "LOAD REPORT" in log and "\x1b[" not in log
    assert len(shown) == 1 and "something a person should see" in str(shown[0]), shown


# ------------------------------------------------------------------------------- the TrainingArguments fields cache


def test_training_fields_cache_matches_transformers_and_survives_damage(tmp_path, monkeypatch):
    from bertkit import training_arguments

    monkeypatch.setenv("BERTKIT_CACHE", str(tmp_path))
    training_arguments.training_fields.cache_clear()
    try:
        fresh = training_arguments.training_fields()
        [cached] = (tmp_path / "training_arguments").glob("transformers-*.json")
        assert json.loads(cached.read_text()) == training_arguments._schema_from_transformers()
        cached.write_text("{not json")
        training_arguments.training_fields.cache_clear()
        assert training_arguments.training_fields() == fresh
        assert json.loads(cached.read_text())  # written again, whole
    finally:
        training_arguments.training_fields.cache_clear()
    import transformers

    assert set(fresh) == {f for f, v in transformers.TrainingArguments.__dataclass_fields__.items() if v.init}
    assert fresh["learning_rate"].default == 5e-05


@pytest.mark.parametrize("recipe", ["classify", "ner", "qa", "choice", "mlm", "embed", "rerank", "distill"])
def test_every_recipes_training_defaults_build_training_arguments(recipe, tmp_path):
    """`bertkit validate` skips building TrainingArguments when the config leaves `train:` and the precision at the
    recipe's defaults: those defaults must be accepted."""
    from bertkit.checks import check_training_arguments, sets_trainer_arguments
    from bertkit.cli import load_config_of

    overrides = [f"output_dir={tmp_path / 'run'}"] + (["teacher=x"] if recipe == "distill" else [])
    cfg = load_config_of(recipe, None, overrides)
    assert not sets_trainer_arguments(cfg)
    check_training_arguments(cfg)
    assert sets_trainer_arguments(load_config_of(recipe, None, [*overrides, "train.learning_rate=3.0e-4"]))
