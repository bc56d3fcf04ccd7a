"""`bertkit app`: train, watch, compare, try and share from a web page: a thin shell over the `bertkit` command.

Every action is a bertkit command line, shown on the page before it runs: Check runs `bertkit validate` and `bertkit
inspect` (their refusals shown word for word), Start launches `bertkit run` detached (bertkit/webapp_runs.py),
Compare `bertkit report A B`, a file on the Try page `bertkit predict`, Share `bertkit push`. What the page shows of a
run is read from its directory, so a reload or another browser sees the same. The Try page answers in this process,
through the task's served Endpoint (the same parse, checks and records as `bertkit serve`), loaded on first use.

FastAPI and Jinja2 templates rather than Gradio: every screen is a URL whose state is the run directory (Gradio keeps
the state in the browser's session: LlamaBoard lost its curves on reload), a page is plain HTML forms that a test
drives in a real browser, and FastAPI is already what `bertkit serve` runs on.

Safety: bound to 127.0.0.1 unless --host (which needs --auth: HTTP basic, the password from the environment or a
prompt). A run name, a file to show and an upload all resolve inside the runs directory; anything else is refused.
The data paths a user types are read by the bertkit commands as the CLI reads them.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import hashlib
import html
import math
import os
import re
import secrets
import shutil
import subprocess
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import yaml
from fastapi import Depends, FastAPI, HTTPException, Request, UploadFile
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse
from fastapi.security import HTTPBasic, HTTPBasicCredentials
from starlette.concurrency import run_in_threadpool
from jinja2 import Environment, PackageLoader, select_autoescape

from . import rundir, runs, shipped, webapp_runs
from .errors import BertkitError
from .report_html import dev_metric_names, highlight, line_chart
from .webapp_text import LANGUAGES, translator

APP_DIR = ".app"  # inside the runs directory: uploads, comparison pages, predictions of uploaded files
# The keys the Train page gives fields of their own (when the recipe has them); every other key is YAML.
COMMON_KEYS = ("model", "data.train", "data.eval", "train.num_train_epochs", "train.learning_rate",
               "train.per_device_train_batch_size", "data.max_length", "seed")
DEFAULT_MODEL = shipped.DEFAULT_MODEL
STARTING_SECONDS = 180  # how long Start waits for the run to refuse its input or begin training
COMMAND_TIMEOUT = 600  # seconds for a command the page waits on (validate, inspect, report, predict, push)
NAME = re.compile(r"^[\w][\w.-]*(/[\w][\w.-]*)?$")  # a run name: a folder, or group/folder

templates = Environment(loader=PackageLoader("bertkit", "resources/app"), autoescape=select_autoescape())


class Refused(Exception):
    """Something the page cannot do, said on the page in its language: `key` names the words in webapp_text.TEXT,
    `values` fill them (str() is the English, for logs and tests)."""

    def __init__(self, key: str, status: int = 400, **values):
        super().__init__(key)
        self.key, self.status, self.values = key, status, values

    def said(self, lang: str) -> str:
        return translator(lang)(self.key).format(**self.values)

    def __str__(self) -> str:
        return self.said("en")


def create_app(runs_dir: str | Path = "runs", lang: str = "en", user: str | None = None,
               password: str | None = None) -> FastAPI:
    """The app over `runs_dir` (created if missing); with `user`, every page and endpoint asks for the password."""
    root = Path(runs_dir).expanduser().resolve()
    root.mkdir(parents=True, exist_ok=True)
    state = AppState(root, lang)
    dependencies = [Depends(password_check(user, password))] if user else []
    app = FastAPI(title="bertkit app", dependencies=dependencies, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.bertkit = state
    app.middleware("http")(same_origin_only)
    add_routes(app, state)

    @app.exception_handler(Refused)
    async def refused(request: Request, error: Refused):
        return state.page(request, "message.html", status_code=error.status, heading="error.heading",
                          message=error.said(state.language(request)))

    return app


async def same_origin_only(request: Request, call_next):
    """A form posted from another site (a page open in the same browser) is refused: every POST starts, stops,
    deletes or pushes something, and the browser would send it, credentials and all (cross-site request forgery).
    Browsers name the page a POST comes from in Origin; a client that sends none (curl, a script) is the user's own."""
    origin = request.headers.get("origin")
    if request.method not in ("GET", "HEAD") and origin and urlsplit(origin).netloc != request.headers.get("host"):
        return HTMLResponse(f"refused: a form from {html.escape(origin)} may not act on this page", status_code=403)
    return await call_next(request)


def password_check(user: str, password: str):
    """HTTP basic authentication: a wrong user or password gets 401 and nothing else."""
    basic = HTTPBasic(realm="bertkit")

    def check(credentials: HTTPBasicCredentials = Depends(basic)):
        good_user = secrets.compare_digest(credentials.username.encode(), user.encode())
        good_password = secrets.compare_digest(credentials.password.encode(), password.encode())
        if not (good_user and good_password):
            raise HTTPException(401, "wrong user or password", headers={"WWW-Authenticate": 'Basic realm="bertkit"'})

    return check


class AppState:
    """The runs directory, the page language, the processes this app started and the models loaded for Try."""

    def __init__(self, root: Path, lang: str):
        self.root, self.lang = root, lang
        self.children: dict[Path, subprocess.Popen] = {}
        self.endpoints: dict[Path, object] = {}
        self.lock = threading.Lock()

    # ---- paths: everything the page names lives under the runs directory

    def run_path(self, name: str) -> Path:
        """The folder of run `name`, refused when the name leaves the runs directory."""
        if not NAME.match(name or "") or ".." in name.split("/"):
            raise Refused("refuse.name", name=repr(name))
        return self.inside(self.root / name)

    def inside(self, path: Path) -> Path:
        resolved = path.resolve()
        if resolved == self.root or not resolved.is_relative_to(self.root):
            raise Refused("refuse.outside", path=path, root=self.root)
        return resolved

    def app_file(self, folder: str, name: str) -> Path:
        """A new file in RUNS/.app/FOLDER, its name from `name` (characters a shell would need quoted become _)."""
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        safe = re.sub(r"[^\w.-]", "_", Path(name).name).lstrip(".") or "file"
        path = self.root / APP_DIR / folder / f"{stamp}-{safe}"
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    # ---- pages

    def language(self, request: Request) -> str:
        chosen = request.query_params.get("lang") or request.cookies.get("bertkit_lang") or self.lang
        return chosen if chosen in LANGUAGES else self.lang

    def page(self, request: Request, template: str, status_code: int = 200, **values) -> HTMLResponse:
        lang = self.language(request)
        body = templates.get_template(template).render(t=translator(lang), lang=lang, other=other_language(lang),
                                                       path=request.url.path, root=str(self.root), **values)
        response = HTMLResponse(body, status_code=status_code)
        if request.query_params.get("lang") in LANGUAGES:
            response.set_cookie("bertkit_lang", lang, samesite="strict")
        return response

    # ---- runs

    def status(self, path: Path) -> str:
        """runs.run_status, and "starting" for a process of this app that has not yet taken the run's lock."""
        child = self.children.get(path)
        if child is not None and child.poll() is None and not rundir.lock_holder(path):
            return "starting"
        return runs.run_status(path) if path.is_dir() else "unfinished"

    def command(self, args: list[str], env: dict | None = None) -> tuple[int, str]:
        """(exit code, output) of `bertkit ARGS`, waited for: what the CLI prints, word for word."""
        done = subprocess.run([*webapp_runs.bertkit_command(), *args], capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT, stdin=subprocess.DEVNULL,
                              env={**os.environ, "COLUMNS": "120", **(env or {})})
        return done.returncode, (done.stdout + done.stderr).strip()

    def endpoint(self, path: Path):
        """The task's served Endpoint for a finished run, loaded once (the model stays in memory for Try)."""
        with self.lock:
            if path not in self.endpoints:
                from .tasks import module_for_model

                self.endpoints[path] = module_for_model(str(path)).Endpoint(str(path))
            return self.endpoints[path]


def other_language(lang: str) -> str:
    return LANGUAGES[(LANGUAGES.index(lang) + 1) % len(LANGUAGES)]


# ---------------------------------------------------------------------------------------------------- the command


def run_arguments(form: dict, state: AppState, recipe_keys: set[str]) -> list[str]:
    """`run RECIPE [-c CONFIG] key=value ... output_dir=RUNS/NAME` from the Train form: a field left empty is not
    passed (the config's or the recipe's value stands), the YAML box becomes key=value overrides."""
    recipe = form.get("recipe", "")
    if recipe not in shipped.recipe_names():
        raise Refused("refuse.recipe", recipe=repr(recipe), recipes=", ".join(shipped.recipe_names()))
    args = ["run", recipe]
    if form.get("config"):
        args += ["-c", form["config"]]
    for key in COMMON_KEYS:
        value = (form.get(key) or "").strip()
        if value and key in recipe_keys:
            args.append(f"{key}={value}")
    args += yaml_overrides(form.get("extra", ""))
    name = (form.get("name") or "").strip()
    args.append(f"output_dir={state.run_path(name)}")
    return args


def yaml_overrides(text: str) -> list[str]:
    """The YAML box as key=value overrides, nested mappings as dotted keys (`train: {warmup_steps: 0.1}` ->
    `train.warmup_steps=0.1`); values in YAML flow style, which the CLI reads back as the same value."""
    if not text.strip():
        return []
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise Refused("refuse.yaml", error=" ".join(str(error).split())) from None
    if not isinstance(data, dict):
        raise Refused("refuse.yaml_mapping")
    return [f"{key}={_flow(value)}" for key, value in _flatten(data)]


def _flatten(data: dict, prefix: str = ""):
    for key, value in data.items():
        if isinstance(value, dict) and value:
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _flow(value) -> str:
    if isinstance(value, str):
        return value
    return yaml.safe_dump(value, default_flow_style=True, width=10**6).strip().removesuffix("...").strip()


def recipe_fields(recipe: str) -> list[dict]:
    """The recipe's keys that get fields of their own: {key, type, default, help} as `bertkit validate --keys` lists
    them; TrainingArguments' keys (train.*) where the recipe passes a `train:` mapping through, with the recipe's
    default and their help from the page's text table."""
    from .config import describe_config
    from .recipe_configs import config_class

    if recipe not in shipped.recipe_names():
        return []
    described = {field.key: field for field in describe_config(config_class(recipe))}
    train = described.get("train")
    fields = []
    for key in COMMON_KEYS:
        if key in described:
            field = described[key]
            fields.append({"key": key, "type": field.type, "default": field.default, "help": field.help})
        elif key.startswith("train.") and train is not None and isinstance(train.default, dict):
            fields.append({"key": key, "type": "TrainingArguments", "default": train.default.get(key[6:], ""),
                           "help": None})
    return fields


def resolved_config(output: str) -> dict:
    """The config `bertkit validate` printed after its ok line."""
    text = output.split("config is valid", 1)[-1]
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return {}
    return data if isinstance(data, dict) else {}


def inspect_arguments(recipe: str, config: dict) -> list[str] | None:
    """`bertkit inspect` of the run's training (and dev) file with its model's tokenizer, for a recipe whose data
    inspect reads (tasks.INSPECTED)."""
    from .tasks import INSPECTED

    if recipe not in INSPECTED:
        return None
    data = config.get("data") if isinstance(config.get("data"), dict) else {}
    train = data.get("train")
    if not isinstance(train, str) or not train:
        return None
    args = ["inspect", train]
    if isinstance(data.get("eval"), str) and data["eval"]:
        args += ["--dev", data["eval"]]
    if isinstance(config.get("model"), str):
        args += ["--model", config["model"]]
    if isinstance(data.get("max_length"), int):
        args += ["--max-length", str(data["max_length"])]
    return args


# ---------------------------------------------------------------------------------------------------- the curves


def curves(history: list[dict], t) -> list[str]:
    """SVG charts of a run so far: train and dev loss, each dev score, the learning rate (report.html's curves,
    drawn from train.log while the run writes it)."""
    def points(key):
        return [(e["step"], float(e[key])) for e in history if isinstance(e.get(key), (int, float))
                and math.isfinite(float(e[key]))]

    chart = functools.partial(line_chart, x_label=t("watch.step"))
    charts = []
    loss = [(t("watch.loss"), points("loss")), (f"{t('watch.dev')} {t('watch.loss')}", points("eval_loss"))]
    if any(pts for _, pts in loss):
        charts.append(chart(loss, t("watch.loss"), t("watch.loss")))
    scores = dev_metric_names(history)[:6]
    if scores:
        series = [(f"{t('watch.dev')} {name}", points(f"eval_{name}")) for name in scores]
        charts.append(chart(series, t("watch.dev"), t("watch.dev"), height=220))
    if points("learning_rate"):
        charts.append(chart([(t("watch.lr"), points("learning_rate"))], t("watch.lr"), t("watch.lr"), height=180))
    return charts


# ---------------------------------------------------------------------------------------------------- the routes


def add_routes(app: FastAPI, state: AppState) -> None:  # noqa: C901 - one route per screen action, read in order
    @app.get("/")
    def home():
        return RedirectResponse("/runs", status_code=303)

    # ---- Train

    @app.get("/train", response_class=HTMLResponse)
    def train_page(request: Request, recipe: str = "", config: str = ""):
        return train_view(request, {"recipe": recipe, "config": config})

    def train_view(request: Request, form: dict, **shown) -> HTMLResponse:
        recipe = form.get("recipe") or ""
        return state.page(request, "train.html", recipes=shipped.recipe_names(), form=form,
                          configs=shipped.config_names(recipe) if recipe in shipped.recipe_names() else [],
                          fields=recipe_fields(recipe), default_model=DEFAULT_MODEL,
                          finished=[str(path) for path in runs.find_runs(state.root)
                                    if runs.run_status(path) == "finished"], **shown)

    @app.post("/train", response_class=HTMLResponse)
    async def train_action(request: Request):
        form = await request.form()
        values = {key: value for key, value in form.items() if isinstance(value, str)}
        for key in ("data.train", "data.eval"):  # an upload goes into the runs directory, and its path in the field
            upload = form.get(f"{key}.upload")
            if upload is not None and getattr(upload, "filename", ""):
                values[key] = str(await save_upload(state, upload))
        if values.get("action") == "recipe" or not values.get("name"):
            return train_view(request, values, problem=None if values.get("action") == "recipe" else
                              "train.need_name")
        keys = {field["key"] for field in recipe_fields(values.get("recipe", ""))}
        try:
            args = run_arguments(values, state, keys)
        except Refused as error:
            return train_view(request, values, refusal=str(error))
        code, checked = await run_in_threadpool(state.command, ["validate", *args[1:]])
        shown = {"command": webapp_runs.shown(args), "validate": checked, "refused": code != 0}
        if code != 0 or values.get("action") != "start":
            inspect = inspect_arguments(values["recipe"], resolved_config(checked)) if code == 0 else None
            if inspect:
                inspect_code, shown["preview"] = await run_in_threadpool(state.command, inspect)
                shown["refused"] = inspect_code != 0
            return train_view(request, values, **shown)
        path = state.run_path(values["name"])
        launched = time.time()
        child = state.children[path] = webapp_runs.launch(args, path)
        await until_training(child, path, launched)
        if child.returncode not in (None, 0):  # refused before training (a bad data file, a run in the way)
            return train_view(request, values, **{**shown, "refused": True,
                                                   "validate": webapp_runs.console_tail(path, 8)})
        webapp_runs.remember(args, path)
        return RedirectResponse(f"/watch/{values['name']}", status_code=303)

    # ---- Runs

    @app.get("/runs", response_class=HTMLResponse)
    def runs_page(request: Request):
        listed = sorted(_runs(state), key=lambda r: r.date, reverse=True)
        rows = [{"name": str(r.path.relative_to(state.root)), "recipe": r.recipe, "status": state.status(r.path),
                 "metric": f"{r.metric} {r.value:.4g}" if r.value is not None else "", "date": r.date,
                 "size": rundir.human_size(r.size) if r.size is not None else ""} for r in listed]
        return state.page(request, "runs.html", rows=rows)

    @app.get("/compare", response_class=HTMLResponse)
    def compare(request: Request):
        picked = list(dict.fromkeys(request.query_params.getlist("pick")))
        if len(picked) != 2:
            raise Refused("runs.compare.two")
        paths = [state.run_path(name) for name in picked]
        key = hashlib.sha1("\n".join(map(str, paths)).encode()).hexdigest()[:10]
        output = state.root / APP_DIR / "compare" / f"compare-{key}.html"
        output.parent.mkdir(parents=True, exist_ok=True)
        args = ["report", *map(str, paths), "-o", str(output), "--force"]
        code, printed = state.command(args)
        if code != 0:
            return state.page(request, "message.html", status_code=400, heading="error.heading", message=printed,
                              command=webapp_runs.shown(args))
        return RedirectResponse(f"/file/{output.relative_to(state.root)}", status_code=303)

    @app.get("/file/{name:path}")
    def file(name: str):
        """A file of the runs directory: a page bertkit wrote (report.html, a comparison) shown, anything else
        downloaded; uploads are never served back (an uploaded page would run as this app's own)."""
        path = state.inside(state.root / name)
        uploads = (state.root / APP_DIR / "uploads").resolve()
        if not path.is_file() or path.is_relative_to(uploads):
            raise Refused("refuse.no_file", status=404, name=name)
        shown = path.name == rundir.REPORT_FILE or path.parent == (state.root / APP_DIR / "compare").resolve()
        return FileResponse(path, **({} if shown else {"filename": path.name}))  # a filename: an attachment

    # ---- Watch

    @app.get("/watch/{name:path}", response_class=HTMLResponse)
    def watch(request: Request, name: str):
        path = state.run_path(name)
        if not path.is_dir():
            raise Refused("refuse.no_run", status=404, name=name)
        args = webapp_runs.saved_command(path)
        return state.page(request, "watch.html", name=name, run=str(path),
                          command=webapp_runs.shown(args) if args else "", resumable=args is not None,
                          **live_values(state, path, translator(state.language(request))))

    @app.get("/live/{name:path}", response_class=HTMLResponse)
    def live(request: Request, name: str):
        path = state.run_path(name)
        args = webapp_runs.saved_command(path)
        return state.page(request, "live.html", name=name, resumable=args is not None,
                          **live_values(state, path, translator(state.language(request))))

    @app.post("/stop/{name:path}")
    def stop(name: str):
        path = state.run_path(name)
        child = state.children.get(path)
        try:
            webapp_runs.stop(path, child)
        except BertkitError:
            raise Refused("refuse.not_running", name=name) from None
        if child is not None:
            try:
                child.wait(10)  # reaped here, so that the page shows it stopped (no zombie holds the pid)
            except subprocess.TimeoutExpired:
                pass
        return RedirectResponse(f"/watch/{name}", status_code=303)

    @app.post("/resume/{name:path}")
    def resume(name: str):
        path = state.run_path(name)
        args = webapp_runs.saved_command(path)
        if args is None:
            raise Refused("refuse.shell_run", name=name, path=path)
        if state.status(path) in ("running", "starting"):
            raise Refused("refuse.running", name=name)
        state.children[path] = webapp_runs.launch(webapp_runs.resume_args(args), path)
        return RedirectResponse(f"/watch/{name}", status_code=303)

    @app.get("/delete/{name:path}", response_class=HTMLResponse)
    def delete_page(request: Request, name: str):
        state.run_path(name)
        return state.page(request, "delete.html", name=name)

    @app.post("/delete/{name:path}")
    def delete(request: Request, name: str):
        path = state.run_path(name)
        if state.status(path) in ("running", "starting"):
            raise Refused("delete.running")
        if not rundir.is_bertkit_run(path) and not (path / webapp_runs.COMMAND_FILE).is_file():
            raise Refused("refuse.not_a_run", path=path)
        state.endpoints.pop(path, None)
        shutil.rmtree(path)
        return RedirectResponse("/runs", status_code=303)

    # ---- Try

    @app.get("/try/{name:path}", response_class=HTMLResponse)
    def try_page(request: Request, name: str):
        return try_view(request, name, {})

    def try_view(request: Request, name: str, values: dict, **shown) -> HTMLResponse:
        path = state.run_path(name)
        if state.status(path) != "finished":
            raise Refused("try.unfinished")
        endpoint = state.endpoint(path)
        return state.page(request, "try.html", name=name, form=endpoint.form, many=endpoint.many, values=values,
                          **shown)

    @app.post("/try/{name:path}", response_class=HTMLResponse)
    async def try_it(request: Request, name: str):
        form = await request.form()
        path = state.run_path(name)
        endpoint = await run_in_threadpool(state.endpoint, path)
        values = {key: str(form.get(key) or "") for key in endpoint.form}
        fields = {key: [line for line in value.splitlines() if line.strip()] if key in endpoint.many else value
                  for key, value in values.items()}
        try:
            answer = await run_in_threadpool(endpoint.try_it, fields)
        except Exception as error:  # noqa: BLE001 - the served endpoint's 422 (an empty text, no [MASK]) on the page
            return try_view(request, name, values, problem=" ".join(str(error).split()))
        marked = marked_text(endpoint, values, answer)
        return try_view(request, name, values, answer=answer, marked=marked)

    @app.post("/predict-file/{name:path}", response_class=HTMLResponse)
    async def predict_file(request: Request, name: str, upload: UploadFile):
        path = state.run_path(name)
        source = await save_upload(state, upload)
        output = state.app_file("predictions", f"{path.name}-{Path(source.name).stem}.jsonl")
        args = ["predict", str(path), str(source), "-o", str(output)]
        code, printed = await run_in_threadpool(state.command, args)
        endpoint = await run_in_threadpool(state.endpoint, path)
        shown = {"file_command": webapp_runs.shown(args), "file_output": printed}
        if code == 0:
            shown["download"] = f"/file/{output.relative_to(state.root)}"
        return try_view(request, name, {key: "" for key in endpoint.form}, **shown)

    # ---- Share

    @app.get("/push/{name:path}", response_class=HTMLResponse)
    def push_page(request: Request, name: str, repo: str = ""):
        path = state.run_path(name)
        return state.page(request, "push.html", name=name, card=model_card_text(path, repo), repo=repo)

    @app.post("/push/{name:path}", response_class=HTMLResponse)
    async def push(request: Request, name: str):
        form = await request.form()
        path = state.run_path(name)
        repo = str(form.get("repo") or "").strip()
        args = ["push", str(path), repo] + (["--private"] if form.get("private") else [])
        token = str(form.get("token") or "").strip()
        code, printed = await run_in_threadpool(state.command, args,  # the token never on the command line
                                                {"HF_TOKEN": token} if token else None)
        return state.page(request, "push.html", name=name, card=model_card_text(path, repo), repo=repo,
                          pushed=printed, refused=code != 0, command=webapp_runs.shown(args))


async def until_training(child: subprocess.Popen, path: Path, since: float) -> None:
    """Wait until the run begins training (it writes its fingerprint then, after reading and checking its data and
    building the model) or exits (a refusal): a bad file is refused on the Train page, in the run's own words."""
    fingerprint = path / rundir.FINGERPRINT_FILE
    deadline = time.monotonic() + STARTING_SECONDS
    while child.poll() is None and time.monotonic() < deadline:
        if fingerprint.is_file() and fingerprint.stat().st_mtime >= since - 1:
            return
        await asyncio.sleep(0.25)


def live_values(state: AppState, path: Path, t) -> dict:
    """What the Watch page shows of a run now: its status, curves so far, the console's last lines."""
    history = webapp_runs.history(path)
    status = state.status(path)
    last = history[-1] if history else {}
    return {"status": status, "charts": curves(history, t), "console": webapp_runs.console_tail(path),
            "step": last.get("step"), "report": (path / rundir.REPORT_FILE).is_file(),
            "report_url": f"/file/{(path / rundir.REPORT_FILE).relative_to(state.root)}"}


def marked_text(endpoint, values: dict, answer) -> str | None:
    """The text the answer's character offsets point into, with those spans marked (entities, an answer span)."""
    field = getattr(endpoint, "spans_in", None)
    if not field or field not in values:
        return None
    spans = []
    for record in answer if isinstance(answer, list) else [answer]:
        if not isinstance(record, dict):
            continue
        found = [record] + [item for value in record.values() if isinstance(value, list) for item in value]
        for item in found:
            if isinstance(item, dict) and isinstance(item.get("start"), int) and isinstance(item.get("end"), int):
                label = str(item.get("type") or item.get("label") or "")
                spans.append((item["start"], item["end"], "gold", label))
    return highlight(values[field], spans) if spans else None


def model_card_text(path: Path, repo: str) -> str:
    """The README.md a push uploads: the run's own, or the card push would generate."""
    readme = path / "README.md"
    if readme.is_file():
        return readme.read_text(encoding="utf-8", errors="replace")
    try:
        from .model_card import render_model_card

        return render_model_card(path, repo_id=repo or None)
    except Exception as error:  # noqa: BLE001 - the push itself will say what is wrong; the page shows why here
        return f"(no model card: {' '.join(str(error).split())})"


async def save_upload(state: AppState, upload: UploadFile) -> Path:
    path = state.app_file("uploads", upload.filename or "upload")
    with open(path, "wb") as out:
        while chunk := await upload.read(1 << 20):
            out.write(chunk)
    return path


def _runs(state: AppState) -> list:
    return [runs.read_run(path) for path in runs.find_runs(state.root)]


__all__ = ["create_app", "run_arguments", "yaml_overrides", "curves", "Refused"]
