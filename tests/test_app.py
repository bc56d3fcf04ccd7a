"""`bertkit app` without a browser: the command a form becomes, what the page refuses (a path out of the runs
directory, a wrong password, a host open to the network without one), the words of both languages, curves read from
a growing train.log, and each task's Try fields through its served Endpoint. The page in a real browser, with real
runs started, stopped and resumed from it: tests/test_app_browser.py."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("multipart")
from fastapi.testclient import TestClient  # noqa: E402

from bertkit import webapp, webapp_runs  # noqa: E402
from bertkit.webapp_text import LANGUAGES, TEXT  # noqa: E402
from helpers import tiny_task_models  # noqa: E402

BERTKIT = Path(sys.executable).with_name("bertkit")
TEMPLATES = Path(webapp.__file__).parent / "resources" / "app"
PASSWORD = "correct horse battery"


@pytest.fixture
def client(tmp_path):
    return TestClient(webapp.create_app(tmp_path / "runs"))


# ---------------------------------------------------------------------------------------------- the command


def test_the_form_becomes_the_command_a_person_would_type(tmp_path):
    state = webapp.AppState(tmp_path, "en")
    form = {"recipe": "classify", "config": "classify/en_sentiment", "name": "first", "model": " ",
            "train.learning_rate": "3.0e-5", "seed": "7", "data.max_length": "",
            "extra": "train:\n  warmup_steps: 0.1\n  report_to: [none]\nllrd: 0.8\n"}
    args = webapp.run_arguments(form, state, {"model", "train.learning_rate", "seed", "data.max_length"})
    assert args == ["run", "classify", "-c", "classify/en_sentiment", "train.learning_rate=3.0e-5", "seed=7",
                    "train.warmup_steps=0.1", "train.report_to=[none]", "llrd=0.8", f"output_dir={tmp_path / 'first'}"]
    assert webapp_runs.shown(args).startswith("bertkit run classify -c classify/en_sentiment ")
    assert webapp_runs.resume_args([*args, "overwrite=true"])[-1] == "resume=true"
    assert "overwrite=true" not in webapp_runs.resume_args([*args, "overwrite=true"])


@pytest.mark.parametrize("form, fragment", [
    ({"recipe": "nope", "name": "x"}, "recipe 'nope'"),
    ({"recipe": "classify", "name": "../outside"}, "run name '../outside'"),
    ({"recipe": "classify", "name": "/etc"}, "run name '/etc'"),
    ({"recipe": "classify", "name": "x", "extra": "train: [unclosed"}, "the YAML box does not parse"),
    ({"recipe": "classify", "name": "x", "extra": "- a list"}, "must hold key: value lines"),
])
def test_a_form_that_cannot_work_is_refused_in_one_line(tmp_path, form, fragment):
    with pytest.raises(webapp.Refused, match=re.escape(fragment)):
        webapp.run_arguments(form, webapp.AppState(tmp_path, "en"), set())


def test_the_common_fields_carry_the_recipes_own_help():
    fields = {field["key"]: field for field in webapp.recipe_fields("classify")}
    assert {"model", "data.train", "data.eval", "train.learning_rate", "seed"} <= set(fields)
    assert fields["model"]["help"].startswith("Model to fine-tune")
    assert fields["train.learning_rate"]["default"] == 5e-05  # the recipe's own train: default
    assert webapp.recipe_fields("no-such-recipe") == []


def test_every_page_renders_for_every_recipe_in_both_languages(client):
    from bertkit.shipped import recipe_names

    for lang in LANGUAGES:
        assert client.get(f"/runs?lang={lang}").status_code == 200
        for recipe in ["", *recipe_names()]:
            page = client.get(f"/train?recipe={recipe}&lang={lang}")
            assert page.status_code == 200 and 'id="recipe"' in page.text, (recipe, lang)
            if recipe:
                assert 'id="check"' in page.text and 'name="name"' in page.text, recipe


def test_a_run_without_a_name_is_asked_for_one(client):
    page = client.post("/train", data={"recipe": "classify", "action": "check"})
    assert page.status_code == 200 and "Give the run a name first" in page.text and 'id="command"' not in page.text


def test_the_train_page_refuses_a_bad_config_as_the_cli_does(client, tmp_path):
    page = client.post("/train", data={"recipe": "classify", "name": "bad", "train.learning_rate": "fast",
                                        "action": "check"})
    assert page.status_code == 200
    refusal = re.search(r'<pre id="validate" class="refused">(.*?)</pre>', page.text, re.S)
    assert refusal and "train.learning_rate" in refusal.group(1) and refusal.group(1).startswith("error: ")
    assert not (tmp_path / "runs" / "bad").exists()  # nothing started


# ---------------------------------------------------------------------------------------------- safety


@pytest.mark.parametrize("url", ["/watch/../secret", "/live/..%2Fsecret", "/try/../../etc", "/file/../secret.txt",
                                 "/file/%2E%2E/secret.txt", "/push/%2E%2E", "/delete/%2E%2E/secret"])
def test_nothing_outside_the_runs_directory_is_shown(client, tmp_path, url):
    (tmp_path / "secret.txt").write_text("do not show")
    page = client.get(url)
    assert page.status_code in (400, 404) and "do not show" not in page.text


def test_a_form_posted_from_another_site_is_refused(client, tmp_path):
    (tmp_path / "runs" / "mine").mkdir(parents=True)
    (tmp_path / "runs" / "mine" / webapp_runs.COMMAND_FILE).write_text("{}")
    forged = client.post("/delete/mine", headers={"Origin": "http://evil.example"})
    assert forged.status_code == 403 and (tmp_path / "runs" / "mine").is_dir()
    assert client.post("/train", data={"recipe": "classify", "name": "x", "action": "start"},
                       headers={"Origin": "http://evil.example"}).status_code == 403
    own = client.post("/delete/mine", headers={"Origin": "http://testserver"}, follow_redirects=False)
    assert own.status_code == 303 and not (tmp_path / "runs" / "mine").exists()


def test_uploads_are_never_served_back_and_other_files_download(client, tmp_path):
    uploads = tmp_path / "runs" / webapp.APP_DIR / "uploads"
    uploads.mkdir(parents=True)
    (uploads / "page.html").write_text("<script>alert(1)</script>")
    assert client.get(f"/file/{webapp.APP_DIR}/uploads/page.html").status_code == 404
    (tmp_path / "runs" / "r").mkdir()
    (tmp_path / "runs" / "r" / "train.log").write_text("log")
    (tmp_path / "runs" / "r" / "report.html").write_text("<p>report</p>")
    assert "attachment" in client.get("/file/r/train.log").headers["content-disposition"]
    shown = client.get("/file/r/report.html")
    assert "content-disposition" not in shown.headers and shown.text == "<p>report</p>"


def test_a_delete_outside_the_runs_directory_or_of_a_non_run_is_refused(client, tmp_path):
    (tmp_path / "runs" / "notes").mkdir(parents=True)
    (tmp_path / "runs" / "notes" / "mine.txt").write_text("keep")
    assert client.post("/delete/notes").status_code == 400
    assert client.post("/delete/%2E%2E").status_code in (400, 404)
    assert (tmp_path / "runs" / "notes" / "mine.txt").read_text() == "keep"


def test_uploads_go_into_the_runs_directory_whatever_their_name(tmp_path):
    state = webapp.AppState(tmp_path, "en")
    path = state.app_file("uploads", "../../etc/passwd")
    assert path.parent == tmp_path / webapp.APP_DIR / "uploads" and path.name.endswith("-passwd")


def test_with_auth_a_wrong_password_gets_nothing(tmp_path):
    client = TestClient(webapp.create_app(tmp_path / "runs", user="ana", password=PASSWORD))
    for url in ("/runs", "/train", "/file/x", "/watch/x"):
        assert client.get(url).status_code == 401
        assert client.get(url, auth=("ana", "wrong password")).status_code == 401
        assert client.get(url, auth=("bob", PASSWORD)).status_code == 401
    assert client.post("/train", data={"recipe": "classify"}, auth=("ana", "nope")).status_code == 401
    assert client.get("/runs", auth=("ana", PASSWORD)).status_code == 200


def app_command(*args, env=None, cwd=None):
    return subprocess.run([str(BERTKIT), "app", *args], capture_output=True, text=True, timeout=60, cwd=cwd,
                          stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})})


def test_a_port_in_use_is_one_line_before_the_web_stack_loads(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        done = app_command("--port", str(taken.getsockname()[1]), cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith("error: port ") and "is in use" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args, env, fragment", [
    (["--host", "0.0.0.0"], {}, "--host 0.0.0.0 opens the page to other machines"),
    (["--host", "192.168.1.5", "--port", "7861"], {}, "add --auth USER"),
    (["--lang", "fr"], {}, "--lang fr: use en or zh"),
    (["--port", "0"], {}, "--port 0: a port is a number in 1..65535"),
    (["--auth", "ana"], {"BERTKIT_APP_PASSWORD": ""}, "shorter than 8 characters"),
    (["--host", "0.0.0.0", "--auth", "ana"], {}, "set the password in $BERTKIT_APP_PASSWORD"),
])
def test_the_installed_command_refuses_an_open_or_unguarded_page(tmp_path, args, env, fragment):
    clean = {k: v for k, v in os.environ.items() if k != "BERTKIT_APP_PASSWORD"}
    done = subprocess.run([str(BERTKIT), "app", *args], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          stdin=subprocess.DEVNULL, env={**clean, **env})
    assert done.returncode == 2, done.stderr
    assert fragment in done.stderr and len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists()


# ---------------------------------------------------------------------------------------------- the words


def test_every_word_on_the_page_is_there_in_both_languages():
    used = set()
    for template in TEMPLATES.glob("*.html"):
        used |= {key for key in re.findall(r"t\('([\w.]+)'", template.read_text(encoding="utf-8"))
                 if not key.endswith(".")}  # a prefix ('status.' + status): its keys are listed below
    used |= {f"status.{status}" for status in ("finished", "running", "unfinished", "failed", "corrupt", "mixed",
                                               "starting")}
    used |= set(re.findall(r'Refused\("([\w.]+)"', Path(webapp.__file__).read_text(encoding="utf-8")))
    used |= {f"key.{key}" for key in webapp.COMMON_KEYS if key.startswith("train.")}
    used |= {f"field.{name}" for name in ("text", "text_pair", "question", "context", "options", "query", "texts")}
    missing = sorted(used - set(TEXT))
    assert not missing, f"words the page shows with no entry in webapp_text.TEXT: {missing}"
    for key, words in TEXT.items():
        assert len(words) == len(LANGUAGES) and all(word.strip() for word in words), key
    chinese = [key for key, (_, zh) in TEXT.items() if not re.search(r"[\u4e00-\u9fff]", zh)]
    assert set(chinese) <= {"title", "lang.other"}, f"entries with no Chinese: {chinese}"


def test_a_refusal_of_the_page_is_said_in_the_pages_language(client):
    english = client.get("/watch/no-such-run")
    assert english.status_code == 404 and "no run no-such-run in the runs directory" in english.text
    chinese = client.get("/watch/no-such-run?lang=zh")
    assert chinese.status_code == 404 and "运行目录中没有运行 no-such-run" in chinese.text


def test_the_language_switch_sticks_across_pages(client):
    page = client.get("/runs?lang=zh")
    assert "运行记录" in page.text and 'lang="zh-CN"' in page.text
    assert "开始一次训练" in client.get("/train").text  # the cookie keeps it
    assert "Start a run" in client.get("/train?lang=en").text


# ---------------------------------------------------------------------------------------------- a run's curves


def test_curves_come_from_train_log_as_it_grows_and_a_resume_replaces_repeated_steps(tmp_path):
    log = tmp_path / "train.log"
    lines = ['===== start', 'logged {"step": 5, "loss": 0.9, "learning_rate": 4e-05}',
             'logged {"step": 10, "loss": 0.8, "learning_rate": 3e-05}',
             'logged {"step": 10, "eval_loss": 0.85, "eval_accuracy": 0.6, "eval_runtime": 1.0}',
             'logged {"step": 15, "loss": 0.7}', '===== resumed from checkpoint-10',
             'logged {"step": 15, "loss": 0.65}', 'logged {"step": 20, "loss": 0.6']  # the last line half written
    log.write_text("\n".join(lines))
    history = webapp_runs.history(tmp_path)
    assert [entry["step"] for entry in history] == [5, 10, 15]
    assert history[1]["eval_accuracy"] == 0.6 and history[1]["loss"] == 0.8 and history[2]["loss"] == 0.65
    charts = webapp.curves(history, lambda key: key)
    assert len(charts) == 3 and all(chart.startswith("<svg") for chart in charts)  # loss, dev scores, lr
    chinese = webapp.curves(history, lambda key: TEXT[key][LANGUAGES.index("zh")])
    assert all(">步</text>" in chart and ">step</text>" not in chart for chart in chinese)  # the x axis too
    assert webapp.curves([], lambda key: key) == []


# ---------------------------------------------------------------------------------------------- Try, per task


@pytest.fixture(scope="module")
def models(tmp_path_factory, minilm_dir):
    return tiny_task_models(tmp_path_factory.mktemp("app-models"), minilm_dir)


@pytest.mark.parametrize("task, values, check", [
    ("classify", {"text": "a fine film"}, lambda answer, _: answer[0]["label"] in ("negative", "positive")),
    ("ner", {"text": "Angela Merkel visited Paris"},
     lambda answer, values: all(values["text"][e["start"]:e["end"]] == e["text"] for e in answer[0]["entities"])),
    ("qa", {"question": "Where is the cat?", "context": "The cat sleeps on the mat."},
     lambda answer, values: answer[0]["answer"] == values["context"][answer[0]["start"]:answer[0]["end"]]),
    ("choice", {"context": "He was hungry.", "question": "So he", "options": ["ate", "slept"]},
     lambda answer, _: answer[0]["option"] in ("ate", "slept") and len(answer[0]["probabilities"]) == 2),
    ("mlm", {"text": "the cat sat on the [MASK]."}, lambda answer, _: len(answer[0]["masks"]) == 1),
])
def test_each_task_tries_what_it_serves(models, task, values, check):
    from bertkit.tasks import module_for_model

    endpoint = module_for_model(models[task]).Endpoint(models[task])
    assert set(endpoint.form) == set(values) and set(endpoint.many) <= set(endpoint.form)
    answer = endpoint.try_it(values)
    assert check(answer, values), answer
    served = endpoint.answer(None, endpoint.predict(endpoint.parse(endpoint.inputs_of(
        endpoint.request_model()(**endpoint.body_of(values))))))
    assert json.dumps(answer, sort_keys=True) == json.dumps(served, sort_keys=True)


def test_an_embedding_model_ranks_the_passages_for_the_query(minilm_dir):
    from sentence_transformers import SentenceTransformer

    from bertkit.tasks.embed import Endpoint

    passages = ["The cat sleeps on the mat.", "Stock markets fell sharply today.", "A kitten naps on a rug."]
    answer = Endpoint(minilm_dir).try_it({"query": "where does the cat sleep", "texts": passages})
    model = SentenceTransformer(minilm_dir)
    cosine = model.similarity(model.encode(["where does the cat sleep"]), model.encode(passages))[0].tolist()
    assert [row["index"] for row in answer] == sorted(range(3), key=lambda i: -cosine[i])
    assert [row["score"] for row in answer] == pytest.approx(sorted(cosine, reverse=True), abs=1e-4)


def test_an_input_the_endpoint_refuses_is_said_on_the_try_page(models):
    from bertkit.tasks import module_for_model
    from bertkit.tasks.serving import InputError

    endpoint = module_for_model(models["mlm"]).Endpoint(models["mlm"])
    with pytest.raises(InputError, match="holds no"):
        endpoint.try_it({"text": "no mask here"})


def test_marked_text_marks_the_spans_an_answer_points_at():
    class Tagger:
        spans_in = "text"

    answer = [{"text": "Ana met Bo", "entities": [{"start": 0, "end": 3, "type": "PER"}, {"start": 8, "end": 10,
                                                                                       "type": "PER"}]}]
    marked = webapp.marked_text(Tagger(), {"text": "Ana met Bo"}, answer)
    assert marked.count("<mark") == 2 and ">Ana<" in marked and ">Bo<" in marked
    assert webapp.marked_text(type("Plain", (), {"spans_in": None})(), {"text": "x"}, answer) is None


def test_the_pages_files_beside_a_run_leave_it_finished(tmp_path):
    """console.log goes on growing after the run's record (its summary, a resume's lines): it is the page's, as
    train.log is the run's, so the record does not list it and the run stays finished, not mixed."""
    from bertkit import rundir, runs

    run = tmp_path / "run"
    run.mkdir()
    (run / webapp_runs.CONSOLE_FILE).write_text("===== bertkit run classify ...\n")
    (run / webapp_runs.COMMAND_FILE).write_text(json.dumps({"args": ["run", "classify"]}))
    (run / "config.json").write_text("{}")
    rundir.write_record(run, "classify")
    with open(run / webapp_runs.CONSOLE_FILE, "a") as console:
        console.write("the summary table, printed after the record\n")
    (run / webapp_runs.COMMAND_FILE).write_text(json.dumps({"args": ["run", "classify", "resume=true"]}))
    assert runs.run_status(run) == "finished"


def test_a_reranker_ranks_the_passages_as_cross_encoder_predict_does(tmp_path, tiny_model_dir):
    import torch
    from sentence_transformers import CrossEncoder

    from bertkit.tasks.rerank import Endpoint

    torch.manual_seed(0)
    CrossEncoder(tiny_model_dir, num_labels=1, max_length=64).save_pretrained(str(tmp_path / "ce"))
    passages = ["The cat sleeps on the mat.", "Stock markets fell sharply today.", "A kitten naps on a rug."]
    answer = Endpoint(str(tmp_path / "ce")).try_it({"query": "where does the cat sleep", "texts": passages})
    scores = CrossEncoder(str(tmp_path / "ce")).predict([("where does the cat sleep", p) for p in passages]).tolist()
    assert [row["index"] for row in answer] == sorted(range(3), key=lambda i: -scores[i])
    assert [row["text"] for row in answer] == [passages[row["index"]] for row in answer]
    assert [row["score"] for row in answer] == pytest.approx(sorted(scores, reverse=True), abs=1e-4)


def test_stop_signals_that_runs_process_group_and_nothing_else(tmp_path):
    from bertkit.errors import BertkitError

    with pytest.raises(BertkitError, match="not running"):
        webapp_runs.stop(tmp_path)
    # a run still starting (no lock yet): its process group, children included, and only it
    starting = subprocess.Popen(["sh", "-c", "sleep 60 & wait"], start_new_session=True)
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        assert webapp_runs.stop(tmp_path, starting) == starting.pid
        assert starting.wait(10) == -15
        assert bystander.poll() is None
    finally:
        bystander.kill()
        starting.kill()
