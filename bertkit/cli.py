"""The `bertkit` command: thin typer commands over plain functions.

    bertkit run classify data.train=train.csv data.eval=dev.csv     fine-tune (recipe defaults + overrides)
    bertkit run classify -c classify/en_sentiment train.num_train_epochs=5         a shipped config, by name
    bertkit ls | cp | validate | predict | evaluate | export | inspect | push | runs | diagnose | report | serve
"""

from __future__ import annotations

import errno
import functools
import importlib
import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Optional

import typer

from .errors import BertkitError
from .speed import keep_freed_memory
from .tasks import CORPUS_RANKERS, RETRIEVERS
from .shipped import (CONFIGS_DIR, RECIPES_DIR, config_names, copy_text, recipe_names, recipe_path,
                      resolve_config_path)

# markdown: a docstring's single line breaks are not kept in the help (rich mode kept them: ragged summaries)
app = typer.Typer(help="Fine-tune, pretrain, evaluate and share BERT models.", no_args_is_help=True,
                  rich_markup_mode="markdown", add_completion=False, pretty_exceptions_enable=False)


DEBUG = {"traceback": False}  # set by --debug, before any command runs


@app.callback()
def options(debug: bool = typer.Option(False, "--debug", help="Show the full traceback of an error.")):
    """Fine-tune, pretrain, evaluate and share BERT models."""
    DEBUG["traceback"] = debug


def user_errors(command):
    """An error becomes one line on stderr, never a traceback (unless --debug): a BertkitError (bad input: it says
    what to fix) or a full disk / unwritable folder exits 2; anything else is unexpected and exits 1."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except KeyboardInterrupt:
            typer.echo("interrupted", err=True)
            raise typer.Exit(130) from None
        except BrokenPipeError:  # the reader of stdout went away (`bertkit ... | head`): stop quietly, as Unix tools do
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit's flush
            raise typer.Exit(141) from None  # 128 + SIGPIPE, what a tool killed by the signal returns
        except Exception as error:  # noqa: BLE001 - the one place that turns every error into one line
            if DEBUG["traceback"]:
                raise
            code, message = error_line(error)
            typer.echo(f"error: {message}", err=True)
            raise typer.Exit(code) from None

    return wrapper


def error_line(error: Exception) -> tuple[int, str]:
    """(exit code, one line) for an error that reached the command line."""
    if isinstance(error, BertkitError):
        return 2, " ".join(str(error).split())
    if isinstance(error, OSError) and error.errno in OS_ERROR_HINTS:
        where = f" at {error.filename}" if error.filename else ""
        return 2, f"{error.strerror or error}{where} — {OS_ERROR_HINTS[error.errno]}"
    first = (str(error).strip().splitlines() or [""])[0]
    return 1, (f"unexpected {type(error).__name__}: {first} — rerun with --debug for the traceback, and report it "
               "if your input looks right")


OS_ERROR_HINTS = {
    errno.ENOSPC: "the disk is full: free space there or choose another output_dir",
    errno.EACCES: "no permission: choose a folder you can write to, or fix its permissions",
    errno.EROFS: "that file system is read-only: choose another folder",
    errno.EDQUOT: "the disk quota is used up: free space or choose another output_dir",
}


# -------------------------------------------------------------------------------------------------------- recipes


def load_recipe(name: str) -> ModuleType:
    """Import a shipped recipe by path (recipes are scripts that use the library, not part of its API)."""
    spec = importlib.util.spec_from_file_location(f"bertkit_recipes.{Path(name).stem}", recipe_path(name))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def load_recipe_config(recipe: str, config: Optional[str], overrides: list[str]):
    """(the recipe's module, its config): the module imported, with its model stack."""
    module = load_recipe(recipe)
    return module, load_config_of(recipe, config, overrides, module.Config)


def load_config_of(recipe: str, config: Optional[str], overrides: list[str], config_cls: Optional[type] = None):
    """A recipe's config from its defaults, the YAML config and the overrides, checked: a shipped recipe's Config
    comes from bertkit.recipe_configs, which imports no torch or transformers (a refusal here answers at once)."""
    from .config import load_config
    from .recipe_configs import config_class, is_shipped_recipe

    if config_cls is None:
        config_cls = config_class(recipe) if is_shipped_recipe(recipe) else load_recipe(recipe).Config
    path = resolve_config_path(config) if config else None
    return load_config(config_cls, path, overrides or [])


def check_run_start(recipe: str, cfg) -> None:
    """What the run would refuse about its output_dir (a run there to replace, a resume from another run, inputs it
    would destroy), asked before the model stack is imported; the recipe asks again, holding the directory."""
    from .config import config_to_dict
    from .console import is_main_process
    from .rundir import check_start

    if is_main_process():  # the other ranks would see rank 0's run begin as a run in the way
        check_start(cfg.run.output_dir, recipe, config_to_dict(cfg), cfg.run.overwrite, cfg.run.resume)


def check_training_data(cfg) -> None:
    """A run needs data.train: refused before the model stack loads, with the key's own help (the files it takes)."""
    from .config import describe_config

    if hasattr(getattr(cfg, "data", None), "train") and not cfg.data.train:
        help_line = next((field.help for field in describe_config(type(cfg)) if field.key == "data.train"), "")
        raise BertkitError(f"no training data — set data.train=<file>{f' ({help_line})' if help_line else ''}")


def first_line(recipe: str, cfg) -> str:
    """What `bertkit run` is about to do, said before the seconds of importing torch and transformers."""
    model = getattr(cfg, "model", None) or f"teacher {getattr(cfg, 'teacher', None)}"
    data = getattr(cfg.data, "train", None)
    on = f" on {data}" if data else ""
    return f"{recipe}: {model}{on} -> {cfg.run.output_dir}"


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
@user_errors
def run(
    recipe: str = typer.Argument(..., help="Recipe: classify, ner, qa, choice, mlm (see bertkit ls), or a .py copy."),
    overrides: Optional[list[str]] = typer.Argument(None, help="key=value overrides, e.g. train.learning_rate=3.0e-5"),
    config: Optional[str] = typer.Option(None, "--config", "-c", help="YAML config (path or shipped name)."),
    verbose: bool = typer.Option(False, "--verbose", help="Show Trainer's and transformers' raw output too."),
    quiet: bool = typer.Option(False, "--quiet", help="Show only the final summary (and warnings)."),
):
    """Run a recipe: its defaults, then the YAML config, then key=value overrides. The full log goes to
    OUTPUT_DIR/train.log."""
    from .console import console_session, log_failure
    from .distributed import check_launcher, end_process_group

    if verbose and quiet:
        raise BertkitError("--verbose and --quiet contradict each other — give one of them")
    check_launcher()  # accelerate launch's MULTI_CPU without mpirun: one unranked process per machine
    cfg = load_config_of(recipe, config, overrides)
    name = Path(recipe).stem
    check_training_data(cfg)
    check_run_start(name, cfg)
    if not quiet:
        say_first(first_line(name, cfg))
    module = load_recipe(recipe)
    keep_freed_memory()  # this process is ours: reuse freed memory instead of page-faulting it back every step
    with console_session("verbose" if verbose else "quiet" if quiet else "normal"):
        try:
            module.main(cfg)
        except BaseException as error:
            log_failure(error)
            raise
    end_process_group()  # a finished run only: after a failure the other ranks may still be in a collective


@app.command("ls")
@user_errors
def list_recipes():
    """List recipes and their ready-made configs, with the command that runs each."""
    from .config import config_header_command
    from .recipe_configs import summary

    for name in recipe_names():
        typer.echo(f"{name:<10} {summary(name)}")
        for config_name in config_names(name):
            typer.echo(f"    {config_name:<33} {config_header_command(CONFIGS_DIR / f'{config_name}.yaml') or ''}")


@app.command("cp")
@user_errors
def copy(
    source: str = typer.Argument(..., help="A recipe name (classify) or a config name (classify/en_sentiment)."),
    destination: Path = typer.Argument(..., help="A file name, or a folder (created if missing) to copy into."),
    force: bool = typer.Option(False, "--force", help="Replace a file that is already there."),
):
    """Copy a recipe or a shipped config out to edit it. A config's sample-data paths are made absolute, so the copy
    runs from any folder; an existing file is never replaced without --force."""
    path = RECIPES_DIR / f"{source}.py" if (RECIPES_DIR / f"{source}.py").is_file() else resolve_config_path(source)
    target = copy_target(path, destination)
    from .rundir import check_output_path

    # a run's own files stay the run's, --force or not (a replaced bertkit_config.yaml would make the run mixed)
    check_output_path(target, flag="the destination", what="the copy")
    if target.exists() and not force:
        raise BertkitError(f"{target} already exists — choose another name, or add --force to replace it")
    if not target.parent.is_dir():
        target.parent.mkdir(parents=True)
        typer.echo(f"created folder {target.parent}")
    target.write_text(copy_text(path, target), encoding="utf-8")
    typer.echo(f"copied {path} -> {target}")


def copy_target(source: Path, destination: Path) -> Path:
    """Where `bertkit cp` writes: into `destination` when it is a folder, or names none with the source's suffix
    (`bertkit cp classify/en_sentiment my_configs`); else the file `destination` itself."""
    if destination.is_dir() or (not destination.exists() and destination.suffix != source.suffix):
        return destination / source.name
    return destination


@app.command()
@user_errors
def validate(
    recipe: str = typer.Argument(..., help="Recipe name."),
    overrides: Optional[list[str]] = typer.Argument(None, help="key=value overrides."),
    config: Optional[str] = typer.Option(None, "--config", "-c", help="YAML config (path or shipped name)."),
    show_keys: bool = typer.Option(False, "--keys", help="List every key with its type, default and help."),
    schema: bool = typer.Option(False, "--schema", help="Print the recipe config's JSON schema instead."),
):
    """Check a config (types, ranges, keys, the real TrainingArguments) without running anything."""
    from .checks import check_training_arguments, sets_trainer_arguments
    from .config import config_schema, config_to_dict, describe_config

    cfg = load_config_of(recipe, config, overrides)
    if schema:
        typer.echo(json.dumps(config_schema(type(cfg)), indent=2, default=str))
        return
    if sets_trainer_arguments(cfg):  # the recipe's own train: defaults are checked by the test suite
        say_first(f"validate: {recipe}, its train: settings as TrainingArguments takes them")
        check_training_arguments(cfg)
    if show_keys:
        for field in describe_config(type(cfg)):
            typer.echo(f"{field.key:<32} {field.type:<28} {field.default!s:<16} {field.help}")
    typer.echo(f"ok: {recipe} config is valid")
    typer.echo(_yaml(config_to_dict(cfg)))


def _yaml(data) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


# ---------------------------------------------------------------------------------------------------- models

def at_least(value: int, minimum: int, option: str, meaning: str) -> None:
    """A number option that cannot work below `minimum` (a batch of 0 rows), refused before anything loads."""
    if value < minimum:
        raise BertkitError(f"{option} {value}: must be at least {minimum} — {meaning}")


def check_model_command(model_dir: str, precision: str) -> str:
    """What predict / evaluate refuse before they load anything: a precision that does not exist, a directory that
    holds no fine-tuned model. Returns the model's task."""
    from .precision import check_inference_precision
    from .tasks import task_of_model

    check_inference_precision(precision)
    return task_of_model(model_dir)


def check_inputs(*paths: Optional[str]) -> None:
    """Input files that are not there, or folders, refused before a model is loaded."""
    from .datafiles import check_data_path

    for path in paths:
        if path is not None:
            check_data_path(path)


def replacing_note(output: Optional[str]) -> str:
    """What the command's last line adds when -o names an existing file: the output checks let an earlier output of
    the same kind be replaced without --force, and nothing of the user's is replaced without a word. Asked before
    the command writes."""
    return ", replacing the earlier file" if output and Path(output).expanduser().is_file() else ""


def say_first(line: str) -> None:
    """A command's first line on a terminal, said before it imports torch and transformers (seconds): what it is about
    to do, so that a person is never left without a word. Piped or captured output (a script, a log) gets the result
    alone, and a refusal stays one line."""
    from .console import is_main_process

    if is_main_process() and sys.stderr.isatty():
        typer.echo(f"{line} (loading PyTorch and transformers)", err=True)


def task_module(model_dir: str) -> ModuleType:
    """The task module that predicts / evaluates the fine-tuned model in `model_dir` (tasks.module_for_model)."""
    from .tasks import module_for_model

    return module_for_model(model_dir)


PRECISION_HELP = ("fp32 (exact), bf16 (the model cast to bf16 once: fast on CPUs with native bf16 and on GPUs), "
                  "fp16 (CUDA), auto (the fastest the device runs natively), or int8 (dynamic int8 linear layers on "
                  "CPU; an ONNX export's int8 graph).")


RETRIEVER_HELP = ("embed: rank with dense (the model), bm25 or hybrid (both fused) instead of the first stage the run "
                  "chose on its dev set (retriever.json).")


def check_retriever(retriever: str | None) -> None:
    if retriever is not None and retriever not in RETRIEVERS:
        raise BertkitError(f"--retriever {retriever}: use {', '.join(RETRIEVERS)}")


@app.command()
@user_errors
def predict(
    model_dir: str = typer.Argument(..., help="A fine-tuned model directory (a run's output_dir)."),
    input_file: str = typer.Argument(..., help="File to predict on (csv, tsv, json, jsonl, parquet, txt)."),
    output: str = typer.Option("predictions.jsonl", "--output", "-o", help="Output .jsonl or .csv."),
    batch_size: int = typer.Option(64, help="Rows per batch (batches also respect a token budget)."),
    precision: str = typer.Option("fp32", help=PRECISION_HELP),
    min_confidence: Optional[float] = typer.Option(
        None, "--min-confidence", help="classify: rows less confident than this (0-1, after the run's calibration) "
        "get no label and abstained=true, for a person to decide (default: the run's abstain_below, if any)."),
    force: bool = typer.Option(False, "--force", help="Replace an existing file of another kind at -o (never the "
                               "input, a run's file or the data a run was made from)."),
    corpus: Optional[str] = typer.Option(None, "--corpus", help="embed: rank this file's passages (.txt one per "
                                         "line, or a table with a text column) for each query, instead of vectors; "
                                         "rerank: the run's first stage over them, then re-ranked."),
    top_k: Optional[int] = typer.Option(None, "--top-k", help="embed / rerank with --corpus: passages written per "
                                        "query (default 10)."),
    retriever: Optional[str] = typer.Option(None, "--retriever", help=RETRIEVER_HELP),
):
    """Predict for every row of a file, in input order: labels with scores and probabilities (classify), entity
    spans (ner), answers (qa), the chosen option (choice), for each [MASK] of a text line, the likeliest tokens
    (mlm), or vectors (embed: .jsonl or .npy; with --corpus the top-k passages per query) — the model directory says
    which."""
    from .tasks import check_min_confidence

    check_min_confidence(min_confidence, "single")  # a probability in (0, 1), before any model is loaded
    at_least(batch_size, 1, "--batch-size", "rows per batch, e.g. --batch-size 64")
    if top_k is not None and corpus is None:  # it would be ignored: without a corpus predict writes vectors
        raise BertkitError(f"--top-k {top_k} needs --corpus: it is how many of the corpus's passages are written per "
                           f"query (embed models) — add --corpus passages.txt, or leave --top-k out")
    if retriever is not None and corpus is None:
        raise BertkitError(f"--retriever {retriever} needs --corpus: it chooses how the corpus is ranked — add "
                           "--corpus passages.txt, or leave --retriever out")
    check_retriever(retriever)
    task = check_model_command(model_dir, precision)
    if corpus is not None and task not in CORPUS_RANKERS:  # ranking a corpus is the embedding models' own
        raise BertkitError(f"--corpus is for embedding models and rerankers, and {model_dir} is neither — leave it out")
    check_inputs(input_file, corpus)
    say_first(f"predict: the {task} model {model_dir} on {input_file} -> {output}")
    replacing = replacing_note(output)
    from .console import console_session
    from .inference import inference_precision
    from .rundir import replacing_allowed

    # bertkit's bar over examples, not transformers' bars; --force reaches the task's output check
    with console_session(), inference_precision(precision), replacing_allowed(force):
        module = task_module(model_dir)
        if corpus is not None:
            count = module.predict_top_k(model_dir, input_file, output, corpus, batch_size=batch_size,
                                         retriever=retriever, **({} if top_k is None else {"top": top_k}))
        else:
            count = module.predict_file(model_dir, input_file, output, batch_size, min_confidence)
    typer.echo(f"wrote {count} predictions to {output}{replacing}")


@app.command()
@user_errors
def evaluate(
    model_dir: str = typer.Argument(..., help="A fine-tuned model directory (a run's output_dir)."),
    input_file: str = typer.Argument(..., help="Labelled file (same columns as training)."),
    output: Optional[str] = typer.Option(None, "--output", "-o", help="Also save the metrics as JSON here."),
    batch_size: int = typer.Option(64, help="Rows per batch."),
    precision: str = typer.Option("fp32", help=PRECISION_HELP),
    force: bool = typer.Option(False, "--force", help="Replace an existing file of another kind at -o (never the "
                               "input, a run's file or the data a run was made from)."),
    retriever: Optional[str] = typer.Option(None, "--retriever", help=RETRIEVER_HELP),
):
    """Compute metrics of a fine-tuned model on a labelled file (mlm: held-out perplexity of a text file)."""
    at_least(batch_size, 1, "--batch-size", "rows per batch, e.g. --batch-size 64")
    check_retriever(retriever)
    task = check_model_command(model_dir, precision)
    if retriever is not None and task not in CORPUS_RANKERS:
        raise BertkitError(f"--retriever is for embedding models, and {model_dir} is a {task} model — leave it out")
    check_inputs(input_file)
    say_first(f"evaluate: the {task} model {model_dir} on {input_file}")
    replacing = replacing_note(output)
    from .console import console_session, result_line
    from .inference import inference_precision
    from .report import record_evaluation
    from .rundir import replacing_allowed

    with console_session(), inference_precision(precision), replacing_allowed(force):
        metrics = task_module(model_dir).evaluate_file(model_dir, input_file, output, batch_size,
                                                       **({"retriever": retriever} if retriever else {}))
        report = record_evaluation(model_dir, input_file, metrics)
    # one line still: the report that now shows this evaluation (its numbers: RUN/evaluations/)
    typer.echo(result_line(input_file, metrics) + (f" (added to {report})" if report else ""))
    if output:
        typer.echo(f"saved metrics to {output}{replacing}")


@app.command("export")
@user_errors
def export_command(
    run_dir: str = typer.Argument(..., help="A fine-tuned run directory (classify, ner, qa, choice, distill, embed, "
                                  "rerank)."),
    fmt: str = typer.Option("onnx", "--format", help="Export format: onnx."),
    quantize: Optional[str] = typer.Option(None, "--quantize", help="int8: also write a dynamically quantized graph."),
    output: Optional[str] = typer.Option(None, "--output", "-o", help="Export folder (default: RUN_DIR-onnx)."),
    force: bool = typer.Option(False, "--force", help="Replace an earlier export at -o (only an export: never "
                               "another folder)."),
):
    # help texts are rich markup: an unescaped "[onnx]" would be eaten as a style tag
    """Export for ONNX Runtime (pip install "bertkit\\[onnx]"): one folder with the graph, tokenizer and label map that
    predict / evaluate run; outputs checked against PyTorch; dev metrics of fp32 and int8 printed side by side."""
    from .tasks import task_of_model

    task_of_model(run_dir)  # a folder that is not there, or holds no fine-tuned model: one line, before the imports
    say_first(f"export: {run_dir} -> {output or str(run_dir).rstrip('/') + '-onnx'}")
    from .export import export_run

    summary = export_run(run_dir, output, fmt, quantize, force=force)
    typer.echo(f"exported to {summary['output']} (max abs difference from PyTorch: {summary['parity_max_abs_diff']})")


@app.command("inspect")
@user_errors
def inspect_command(
    train_file: str = typer.Argument(..., help="The file to look at (usually the training split)."),
    dev: Optional[str] = typer.Option(None, "--dev", help="A dev file: checked for overlap with the first file."),
    model: str = typer.Option("all-MiniLM-L6-v2", "--model", "-m", help="Whose tokenizer counts the tokens."),
    max_length: int = typer.Option(128, "--max-length", help="The max_length you plan to train with."),
    label_kind: str = typer.Option("auto", "--label-kind", help="single, multi or regression, as data.label_kind "
                                   "decides a label column that auto refuses as ambiguous."),
):
    """Labels, lengths in tokens, share over max_length, [UNK] rate, empty / duplicate rows, train/dev overlap."""
    at_least(max_length, 8, "--max-length", "tokens per example, as data.max_length: e.g. --max-length 128")
    check_inputs(train_file, dev)
    say_first(f"inspect: {train_file} with the tokenizer of {model}")
    from .console import summary, warn
    from .inspection import coverage_table, inspect_data, label_rows

    report = inspect_data(train_file, dev, model, max_length, label_kind=label_kind)
    summary(f"{train_file}: {report['rows']} rows", {
        **{f"column {k}": v for k, v in report["columns"].items() if v},
        "label kind": report["label_kind"], **label_rows(report["labels"])})
    tokens = report["tokens"]
    summary(f"length in tokens ({model})", {
        **{k: v for k, v in tokens.items() if isinstance(v, int)},
        f"share over {max_length}": f"{tokens['over_max_length']:.1%}",
        "tokens kept by truncation": f"{tokens['tokens_kept_by_truncation']:.1%}",
        "data.max_length=auto": f"{report['auto_max_length']['value']} (truncates "
                                f"{report['auto_max_length']['truncated']:.1%} of rows)",
        "[UNK] rate": f"{report['unknown_token_rate']:.2%}"})
    summary(*coverage_table(report))
    for line in report["warnings"]:
        warn(line)
    quality = report["quality"]
    summary("quality", {**{f"train {k}": v for k, v in quality["train"].items() if not isinstance(v, list)},
                        "train/dev overlap": quality["train_dev_overlap"]})


@app.command()
@user_errors
def push(
    model_dir: str = typer.Argument(..., help="A model directory to upload."),
    repo_id: str = typer.Argument(..., help="Hub repo id, e.g. user/my-model."),
    private: bool = typer.Option(False, "--private", help="Create the repo private."),
    revision: Optional[str] = typer.Option(None, "--revision", help="Branch to push to (created if missing)."),
    commit_message: Optional[str] = typer.Option(None, "--commit-message", help="Commit message."),
    endpoint: Optional[str] = typer.Option(None, "--endpoint", help="Hub endpoint URL (default: huggingface.co)."),
    token: Optional[str] = typer.Option(None, "--token", help="Hub token (default: HF_TOKEN or saved login)."),
):
    """Upload weights, config, tokenizer, metrics, curve and a model card to the Hub."""
    from .hub import push_model

    result = push_model(model_dir, repo_id, private=private, revision=revision, commit_message=commit_message,
                        endpoint=endpoint, token=token)
    typer.echo(result)


@app.command("runs")
@user_errors
def runs_command(
    paths: Optional[list[str]] = typer.Argument(None, help="A folder of runs (default runs/), or two run directories "
                                                "to compare."),
    sort: str = typer.Option("date", "--sort", help="date (newest first), metric (best first) or name."),
):
    """Every run under a folder: recipe, model, data, selection metric, status, date, wall time. With two run
    directories: the config keys that differ, next to their metrics."""
    from .runs import show_runs

    show_runs(paths or ["runs"], sort)


@app.command("diagnose")
@user_errors
def diagnose_command(
    run_dir: str = typer.Argument(..., help="A finished run directory (its output_dir)."),
    no_predict: bool = typer.Option(False, "--no-predict", help="Skip running the model on the dev split."),
):
    """The troubleshooting table as a command: training-curve symptoms with their evidence and the next command,
    and (classify) dev accuracy against chance and the examples the model gets confidently wrong."""
    if not no_predict:  # the dev predictions load the model
        say_first(f"diagnose: {run_dir}, its dev split run through the model")
    from .console import console_session
    from .diagnose import diagnose, report_lines

    with console_session():
        lines = report_lines(diagnose(run_dir, predict=not no_predict))
    typer.echo("\n".join(lines))


@app.command("audit", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
@user_errors
def audit_command(
    recipe: str = typer.Argument(..., help="classify or ner: the recipe whose training data is audited."),
    overrides: Optional[list[str]] = typer.Argument(None, help="key=value overrides as for `bertkit run`, and "
                                                    "audit.folds=5, audit.output=DIR, audit.keep_models=true."),
    config: Optional[str] = typer.Option(None, "--config", "-c", help="YAML config (path or shipped name)."),
):
    """Find training rows whose label is probably wrong (cleanlab on out-of-fold predictions: one model per fold,
    trained with the recipe's settings), and write them ranked, with the training file cleaned two ways."""
    say_first(f"audit {recipe}: one model per fold on its training data")
    from .audit import audit, check_recipe, report_lines, split_overrides
    from .console import console_session

    check_recipe(recipe)
    options, recipe_overrides = split_overrides(overrides or [])
    module, cfg = load_recipe_config(recipe, config, recipe_overrides)
    keep_freed_memory()  # k trainings in this process, as `run` does for one
    with console_session():
        summary = audit(recipe, module, cfg, options, recipe_overrides, config)
    typer.echo("\n".join(report_lines(summary)))


@app.command("report")
@user_errors
def report_command(
    run_dirs: list[str] = typer.Argument(..., help="One finished run directory, or several to compare."),
    output: str = typer.Option("report-compare.html", "--output", "-o", help="The comparison page (two or more "
                               "runs); never a file of a run directory."),
    force: bool = typer.Option(False, "--force", help="Replace an existing file at -o that is not a comparison page "
                               "(never a run's file or the data a run was made from)."),
):
    """Rebuild RUN_DIR/report.html, one self-contained page: the answer, curves, the task's dev view, the diagnosis,
    the settings. With several run directories: one page comparing them (curves overlaid, metrics, differing
    predictions)."""
    say_first(f"report: {', '.join(run_dirs)}")
    from .console import console_session
    from .report import check_reportable, write_comparison, write_report

    paths = [check_reportable(run_dir) for run_dir in run_dirs]
    replacing = replacing_note(output) if len(paths) > 1 else ""  # a run's own report.html is rebuilt, not the user's
    with console_session("quiet"):  # loading the model for the dev view: no bars, transformers' log not shown
        written = write_report(paths[0]) if len(paths) == 1 else write_comparison(run_dirs, output, force)
    typer.echo(f"wrote {written}{replacing}")


@app.command("serve")
@user_errors
def serve_command(
    run_dir: str = typer.Argument(..., help="A finished run directory (any task), or its ONNX export."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (0.0.0.0: every interface)."),
    port: int = typer.Option(8000, "--port", help="Port to listen on."),
    precision: str = typer.Option("auto", "--precision", help=PRECISION_HELP + " serve's default is auto: bf16 "
                                  "measured 0.0 points from fp32 on SST-2 dev; fp32 answers exactly as predict does."),
    max_inputs: int = typer.Option(64, "--max-inputs", help="Inputs per request (413 above)."),
    max_chars: int = typer.Option(20_000, "--max-chars", help="Characters per input (413 above)."),
    max_queue: int = typer.Option(1024, "--max-queue", help="Inputs waiting for the model (503 above)."),
    max_batch_tokens: int = typer.Option(16_384, "--max-batch-tokens", help="Tokens per call of the model."),
    max_wait_ms: float = typer.Option(0.0, "--max-wait-ms", help="How long a request waits for others to batch (0: "
                                      "what queued while the model ran goes together)."),
    timeout: float = typer.Option(30.0, "--timeout", help="Seconds before a request gets 504."),
    threads: Optional[int] = typer.Option(None, "--threads", help="Threads the model runs on (default: torch's, "
                                          "one per core); fewer leaves cores to the HTTP side and other processes."),
    engine: Optional[str] = typer.Option(None, "--engine", show_default="auto", help="What runs the model: auto "
                                         "(PyTorch or ONNX Runtime, each for the calls it runs faster here, timed at "
                                         "start; the graph is exported once into ~/.cache/bertkit), torch, or onnx. "
                                         "Default: $BERTKIT_ENGINE, else auto."),
    access_log: bool = typer.Option(False, "--access-log", help="Log a line per request (off: /metrics counts them; "
                                    "the line cost about a tenth of the requests/s at one client)."),
):
    """Serve a fine-tuned model over HTTP (pip install "bertkit\\[serve]"): POST /predict, GET /health, /info,
    /metrics; concurrent requests are batched under a token budget."""
    from .serve import Limits, serve

    limits = Limits(max_inputs, max_chars, max_queue, max_batch_tokens, max_wait_ms, timeout)
    if threads is not None:
        at_least(threads, 1, "--threads", "threads the model runs on, e.g. --threads 2")
        import torch

        torch.set_num_threads(threads)
    serve(run_dir, host, port, precision, limits, engine=engine, access_log=access_log)  # its console is quiet


APP_PASSWORD_VARIABLE = "BERTKIT_APP_PASSWORD"


@app.command("app")
@user_errors
def app_command(
    port: int = typer.Option(7860, "--port", help="Port to listen on."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on; any but this machine's own "
                             "(127.0.0.1, localhost, ::1) needs --auth."),
    auth: Optional[str] = typer.Option(None, "--auth", help=f"A user name: every page asks for it and a password "
                                       f"(from ${APP_PASSWORD_VARIABLE}, else asked here; never on the command line)."),
    runs_dir: str = typer.Option("runs", "--runs-dir", help="The folder of runs the page shows, starts runs in and "
                                 "takes uploads into (created if missing)."),
    lang: str = typer.Option("en", "--lang", help="The page's language: en or zh (a switch on the page too)."),
):
    """A web page over bertkit (pip install "bertkit\\[app]"): start a run from a form and watch its curves, compare
    runs, try a finished model, push it to the Hub. Runs are processes of their own: closing the page or stopping the
    app leaves them running, and a restarted app finds them."""
    from .serve import listening_socket
    from .webapp_checks import app_password, check_app_options

    check_app_options(host, auth, runs_dir, lang)
    password = app_password(auth, APP_PASSWORD_VARIABLE) if auth else None
    sock = listening_socket(host, port)  # a port in use is one line, before the web stack loads
    try:
        import uvicorn

        from .webapp import create_app

        server = uvicorn.Server(uvicorn.Config(create_app(runs_dir, lang, auth, password), log_level="warning"))
        typer.echo(f"bertkit app on http://{host if ':' not in host else f'[{host}]'}:{port}/ (runs in {runs_dir}"
                   f"{f'; user {auth}' if auth else ''}) — Ctrl-C stops the page, never the runs it started", err=True)
        server.run(sockets=[sock])
    finally:
        sock.close()


@app.command("mine")
@user_errors
def mine_command(
    input_file: str = typer.Argument(..., help="Training pairs: query, positive (or FlagEmbedding JSONL)."),
    output: str = typer.Option(..., "--output", "-o", help="Training file to write: FlagEmbedding JSONL "
                               "{query, pos, neg}."),
    model: Optional[str] = typer.Option(None, "--model", help="Embedding model that ranks the corpus (a run, a "
                                        "folder, a Hub id or all-MiniLM-L6-v2); leave out for BM25 alone."),
    corpus: Optional[str] = typer.Option(None, "--corpus", help="Passages to mine from besides the positives (.txt "
                                         "one per line, or a table with a text column)."),
    bm25: bool = typer.Option(False, "--bm25", help="Rank with BM25 too (bm25s; Chinese by characters and "
                              "their bigrams)."),
    num_negatives: int = typer.Option(3, "--num-negatives", help="Negatives per query."),
    range_min: int = typer.Option(0, "--range-min", help="Skip this many top-ranked candidates (likely unlabelled "
                                  "positives)."),
    range_max: Optional[int] = typer.Option(None, "--range-max", help="Take negatives from the first this many "
                                            "candidates (default: enough for --num-negatives)."),
    margin: Optional[float] = typer.Option(None, "--margin", help="--model only: skip candidates scoring within this "
                                           "share of the positive's score (sentence-transformers' relative_margin; "
                                           "default 0.05)."),
    batch_size: int = typer.Option(64, help="Texts per batch when encoding."),
    force: bool = typer.Option(False, "--force", help="Replace an existing file of another kind at -o."),
):
    """Mine hard negatives for each query of a pairs file from a corpus, with an embedding model and/or BM25,
    positives and near-positives skipped; writes a training file for `bertkit run embed` (or rerank)."""
    # numbers that cannot work, refused before a model or a file is read (sentence-transformers would refuse some
    # only after the model loaded, BM25 none: a negative --range-min or an empty window wrote a file of no negatives)
    at_least(num_negatives, 1, "--num-negatives", "negatives per query, e.g. --num-negatives 3")
    at_least(range_min, 0, "--range-min", "top-ranked candidates to skip, e.g. --range-min 0 (skip none)")
    if range_max is not None:
        at_least(range_max, range_min + 1, "--range-max", f"candidates looked at, more than --range-min {range_min}"
                 f" (e.g. --range-max {range_min + 10 * num_negatives})")
    if margin is not None and not 0 <= margin < 1:
        raise BertkitError(f"--margin {margin}: use 0 <= margin < 1 — the share of the positive's score a negative "
                           f"must stay below (0.05 skips candidates within 5%; 0 skips none)")
    if margin is not None and model is None and bm25:  # mine_file would drop it: BM25 scores are on another scale
        raise BertkitError(f"--margin {margin}: the margin is a share of the positive's score by an embedding model, "
                           f"and BM25 alone gives no such score (its scores are on another scale) — add --model, or "
                           f"leave --margin out (--range-min skips BM25's top candidates)")
    at_least(batch_size, 1, "--batch-size", "texts per batch, e.g. --batch-size 64")
    check_inputs(input_file, corpus)
    say_first(f"mine: hard negatives for the queries of {input_file} -> {output}")
    from .console import console_session
    from .rundir import replacing_allowed
    from .tasks.embed import mine_file

    with console_session(), replacing_allowed(force):
        count = mine_file(input_file, output, model, corpus, bm25, num_negatives, range_min, range_max,
                          batch_size=batch_size, **({} if margin is None else {"margin": margin}))  # else its 0.05
    typer.echo(f"wrote {count} queries with mined negatives to {output}")


@app.command("version")
def version_command():
    """Print bertkit's version and those of the libraries it runs on (read from the installed packages)."""
    from importlib.metadata import PackageNotFoundError, version

    from . import __version__

    typer.echo(f"bertkit {__version__}")
    for package in ("torch", "transformers", "sentence-transformers", "datasets", "huggingface_hub"):
        try:
            typer.echo(f"{package} {version(package)}")
        except PackageNotFoundError:
            typer.echo(f"{package} (not installed)")


def main():
    app()


__all__ = ["app", "main", "load_recipe", "recipe_names", "task_module"]
